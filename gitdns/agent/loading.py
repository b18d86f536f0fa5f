"""The first two steps of a cycle: fetch the desired branch, load and validate its head.

A failing step leaves the last good revision in force: an unreachable remote keeps it, a head
that is not a descendant of the applied revision (a force-push back) is refused, and after a
restart the applied revision is taken back from our status branch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gitdns.adapters.git.verify import SignatureRefusedError
from gitdns.agent import identity
from gitdns.agent.applied import load_applied
from gitdns.agent.config import AgentConfig
from gitdns.agent.gitwait import FileWatch
from gitdns.agent.ports import AgentPorts, AgentView, load_desired
from gitdns.agent.roles import Role
from gitdns.agent.state import AgentState
from gitdns.agent.zones import Zones
from gitdns.core.blobcache import ValidationCache
from gitdns.core.checks.index import Held, documents_of_files
from gitdns.core.checks.reach import HOLDS_NOTHING
from gitdns.core.conditions import REASONS, Condition
from gitdns.core.desired import Desired, HeadInfo, held_as_before
from gitdns.core.model import Cluster, Mode, Revision
from gitdns.errors import GitdnsError
from gitdns.reconcile.engine import from_files
from gitdns.reconcile.zonepass import ZoneOutcome

log = logging.getLogger(__name__)

FLOOR_READS = 3  # reads of our own records' revision after a restart (a failed read is tried again)

# a head refused stays reported while it is the head, although git itself works
_REFUSALS = frozenset({"SignatureRefused", "RollbackRefused"})


@dataclass(slots=True)
class Cycle:
    """One pass's scratch state."""

    trigger: str
    head: str | None = None
    fetched: Any = None
    desired: Desired | None = None
    outcomes: list[ZoneOutcome] = field(default_factory=list)
    wrote: bool = False
    yielded: bool = False


class Loading:
    def __init__(self, state: AgentState, config: AgentConfig, ports: AgentPorts, role: Role, zones: Zones,
                 changed: Callable[[], bool], groups_moved: Callable[[], bool] = lambda: False,
                 own_revision: Callable[[Desired, Cluster], tuple[str, Revision] | None] = lambda d, c: None) -> None:
        self.state = state
        self.config = config
        self.ports = ports
        self.role = role
        self.zones = zones
        self.health_changed = changed
        self.groups_moved = groups_moved
        self.own_revision = own_revision
        self.floor_reads = 0  # own_revision calls so far: at most FLOOR_READS per process, not one per revision
        self.held_files: dict[str, Held] = {}  # a broken file -> what its documents were (`_held`)
        self.floor: tuple[str, Revision] | None = None  # (zone, revision) our own records carry, if nothing else
        self.restore = ports.restore
        self.directed = False  # a webhook announced a push to the desired branch
        self.validation = ValidationCache()  # what each file made, by blob id, across cycles (`_from`)
        self.files = FileWatch((config.token_file, config.ssh_key, config.known_hosts, config.ca_file,
                                config.verify_ssh_signers, config.verify_gpg_keys))

    def fetch(self, cycle: Cycle, force: bool) -> bool:
        """The remote head, fetched when it is new; False when nothing is new and nothing is due.

        Git failing (down, refusing our credentials) or a refused head never stops the pass while
        a revision is in force: the pass goes on from it when zone-side work is due, and only the
        git operations back off (`GitWait`)."""
        state = self.state
        if self.files.changed():  # a rotated token or key, new trusted keys: try them now
            state.git_wait.reset()
            state.push_wait.reset()
            state.refused_head = None
        if self.directed and state.git_wait.ready(self.ports.clock()):
            self.directed = False
            if self._fetch(cycle, None) and not self._unchanged(cycle):
                return True
        else:
            cycle.head = self._remote_head()
            new = cycle.head is not None and cycle.head != state.refused_head and (
                cycle.head != state.fetched_sha or state.current is None)
            if new and self._fetch(cycle, str(cycle.head)):
                return True
        if state.current is None:
            return False
        force = self.health_changed() or force
        now = self.ports.clock()
        # every check runs (no short cut): each keeps its own baseline up to date
        due = [force, bool(self.zones.due(now)), self.role.due(state.current, state.known_cluster),
               self.groups_moved()]
        if not any(due):
            return False
        cycle.desired = state.current
        return True

    def _remote_head(self) -> str | None:
        """The remote head; None while git backs off or when it failed with a revision in force."""
        state = self.state
        if not state.git_wait.ready(self.ports.clock()) and state.current is not None:
            return None
        try:
            head = self.ports.source.remote_head()
        except GitdnsError as exc:
            self.source_failed(exc)
            if state.current is None:
                raise
            return None
        if not state.source_condition.status and state.source_condition.reason not in _REFUSALS:
            log.info("git reachable again: after=%d failure(s) reason=%s", state.git_wait.failures,
                     state.source_condition.reason)
            state.source_condition = Condition("SourceAvailable", True, "GitOperationSucceeded", "reachable again")
        state.git_wait.succeeded()
        return head

    def directed_fetch(self) -> None:
        """A webhook announced a push to the desired branch: the next pass fetches the branch at
        once (one git operation) instead of listing it first."""
        self.directed = True

    def _unchanged(self, cycle: Cycle) -> bool:
        """The branch fetched on a webhook holds the revision already in force: nothing new."""
        if cycle.fetched is None or self.state.current is None or cycle.fetched.sha != self.state.fetched_sha:
            return False
        cycle.fetched = None
        return True

    def _fetch(self, cycle: Cycle, head: str | None) -> bool:
        """Fetch (and verify) the head (None: the branch head, without listing it first); False
        when it failed or was refused, with the last good revision kept.  After a restart on a
        refused head, the last verified revision is taken back from our status branch and
        fetched (and verified) instead."""
        state = self.state
        try:
            cycle.fetched = self.ports.source.fetch(head)
            cycle.head = cycle.fetched.sha
        except SignatureRefusedError as exc:
            head = head or exc.sha
            cycle.head = head
            if head == state.refused_head and state.current is not None:
                return False  # refused already: reported, and the last verified revision stays
            state.refused_head = head
            cycle.fetched = self._last_verified() if state.current is None else None
            self._refused(exc, head)  # names the revision that stays, restored just above if need be
            return cycle.fetched is not None
        except GitdnsError as exc:
            self.source_failed(exc)
            if state.current is None:
                raise
            return False
        state.git_wait.succeeded()
        if not state.source_condition.status and state.source_condition.reason not in _REFUSALS:
            log.info("git reachable again: reason=%s", state.source_condition.reason)
        state.refused_head = None
        state.source_condition = Condition("SourceAvailable", True, "GitOperationSucceeded",
                                           f"fetched {str(cycle.head)[:7]}")
        return True

    def _refused(self, exc: SignatureRefusedError, head: str) -> None:
        keep = self.state.applied_sha
        log.warning("head refused: sha=%s reason=%s why=%s", head[:12], exc.reason, exc.why)
        self.state.source_condition = Condition(
            "SourceAvailable", False, exc.reason,
            f"{exc}; " + (f"the last verified revision {keep[:7]} stays in force" if keep else
                          "no verified revision is known yet (our status branch names none)") +
            "; a new signed head is taken on the next poll")

    def _last_verified(self) -> Any:
        """The revision our status branch says we applied, fetched and verified; None if none."""
        state = self.state
        known = identity.load_identity(self.zones.root, self.config.cluster)
        ident = known.id if known is not None else self.config.cluster
        try:
            applied = load_applied(self.zones.root)
            if not applied and self.restore is not None and ident:
                applied = self.restore(ident)
            if not applied:
                return None
            fetched = self.ports.source.fetch(applied)
        except GitdnsError as exc:
            log.warning("last verified revision unavailable: error=%s", exc)
            return None
        self.restore = None
        state.applied_sha = applied
        log.info("serving the last verified revision: sha=%s", applied[:12])
        return fetched

    def source_failed(self, exc: GitdnsError) -> None:
        """Git failed: report it (the cause kept) and back off the git operations only."""
        delay = self.state.git_wait.failed(self.ports.clock())
        reason = exc.reason if exc.reason in REASONS else "GitUnreachable"
        log.warning("git failed: reason=%s retry_in=%.2fs error=%s", reason, delay, exc)
        self.state.source_condition = Condition("SourceAvailable", False, reason,
                                                f"{exc}; the last good revision stays in force")

    def load(self, cycle: Cycle) -> bool:
        fetched, state = cycle.fetched, self.state
        if fetched is None:
            return cycle.desired is not None
        head = HeadInfo(fetched.revision, fetched.message, fetched.author)
        desired = self._held(self._from(fetched.files, head))
        restored = state.applied_sha is None
        self._identify(desired)
        if restored and state.applied_sha is not None and desired.problems:  # restored after a restart
            desired = self._held(desired)
            self._identify(desired)
        state.fetched_sha = fetched.sha
        if self._refuse_rollback(fetched.sha):
            cycle.fetched = None
            cycle.desired = state.current or self.zones.desired_at(state.applied_sha)
            state.current = cycle.desired
            return cycle.desired is not None
        applied = state.applied_sha
        cycle.desired = replace(desired, previous=(lambda: self.zones.state_at(applied)) if applied else None)
        state.current = cycle.desired
        if applied and applied != fetched.sha:
            state.revision_loaded_at = self.ports.clock()
        view = AgentView(state.known_cluster, self.role.mode, state.current)
        for hook in self.ports.load_hooks:  # before any zone: the fleet size the budgets divide by
            hook(view)
        return True

    def _from(self, files: dict[str, str], head: HeadInfo) -> Desired:
        """The head's files as a Desired.  With the default loader, files unchanged since the last
        cycle (by git blob id) are neither parsed nor checked again, and only the checks that
        read a changed document run again (`gitdns.core.blobcache.ValidationCache`)."""
        if self.ports.loader is load_desired:
            return from_files(self.zones.root, files, head, memo=self.validation)
        return self.ports.loader(self.zones.root, files, head)

    def _held(self, desired: Desired) -> Desired:
        """A head with problems also holds what the documents of its broken files touched when
        each file last had none (`held_as_before`): read at the applied revision the first time
        a file breaks, and kept while it stays broken (the applied revision moves on to broken
        heads, which no longer hold what the file was).  A problem that holds nothing by
        design (a probe target refused: `reach.HOLDS_NOTHING`) holds nothing here either."""
        files = {p.file for p in desired.problems if p.code not in HOLDS_NOTHING}
        self.held_files = {f: held for f, held in self.held_files.items() if f in files}
        missing = files - self.held_files.keys()
        applied = self.state.applied_sha
        before = self.zones.state_at(applied) if missing and applied else None
        if before is not None:
            self.held_files.update(documents_of_files(before, missing))
        return held_as_before(desired, self.held_files)

    def _identify(self, desired: Desired) -> None:
        """Who we are in this revision, in which mode, and what we last applied."""
        cluster = self.zones.cluster_of(desired)
        identity.resolve_identity(self.state, self.config, desired, cluster, self._history)
        self.role.resolve(self._mode_cluster(desired))
        self.role.note_primaries(desired)
        self.role.refresh_for_revision(desired, self.zones.cluster_of(desired))
        self._restore_applied(desired)

    def _history(self) -> Cluster | None:
        return identity.cluster_from_history(self.state, self.config, self.ports.source, self.zones.desired_at)

    def _mode_cluster(self, desired: Desired) -> Cluster | None:
        """The Cluster whose mode counts: git's now.  One whose own document does not validate
        keeps its last known mode while its zones are held; a remote removed from git stays a
        remote (it has nothing in any zone to clean up, and no credentials); a primary or
        default cluster removed from git runs as default, withdrawing its own claims."""
        cluster = self.zones.cluster_of(desired)
        known = self.state.known_cluster
        if cluster is not None or known is None:
            return cluster
        if self.state.cluster_problem is not None or known.mode is Mode.REMOTE:
            return known
        return None

    def _restore_applied(self, desired: Desired) -> None:
        """After a restart: the applied revision from the state directory, else our status
        branch, else (as a floor) the revision our own records carry in our zones, so a
        force-push back is refused even when two of the three are lost (gitdns.agent.applied)."""
        state = self.state
        if state.applied_sha is not None or state.known_cluster is None or self.floor is not None:
            return
        state.applied_sha = load_applied(self.zones.root)
        if state.applied_sha:
            self.restore = None
            log.info("restored applied revision: sha=%s from=state-dir", state.applied_sha[:12])
            return
        if self.restore is not None:
            restore, self.restore = self.restore, None
            try:
                state.applied_sha = restore(state.known_cluster.id)
            except GitdnsError as exc:
                log.warning("restore applied revision failed: error=%s", exc)
            if state.applied_sha:
                log.info("restored applied revision: sha=%s from=status-branch", state.applied_sha[:12])
                return
        if self.floor_reads >= FLOOR_READS:
            return  # looked enough: no record of ours carries a revision (or they could not be read)
        self.floor_reads += 1
        cluster = self.zones.cluster_of(desired) or state.known_cluster
        self.floor = self.own_revision(desired, cluster)
        if self.floor is not None:
            log.info("restored applied revision: rev=%s zone=%s from=own-records", self.floor[1].label, self.floor[0])

    def _refuse_rollback(self, head: str) -> bool:
        """A head that is not a descendant of what this cluster applied (a force-push back, or
        unrelated history) is refused unless the operator allowed rollbacks.  Fails closed:
        when the ancestry cannot be shown, the head is refused."""
        applied = self.state.applied_sha
        if self.config.allow_rollback:
            return False
        if applied:
            if head == applied or self.ports.source.is_descendant(head, applied):
                return False
            what = f"the applied revision {applied[:7]}"
        elif self.floor is not None:
            zone, rev = self.floor
            if head.startswith(rev.sha) or self.ports.source.is_descendant(head, rev.sha):
                return False
            what = f"revision {rev.sha[:7]}, which this cluster's own records in {zone} carry (its last applied)"
        else:
            return False
        log.warning("head refused: sha=%s reason=RollbackRefused not-after=%s", head[:12], what)
        self.state.source_condition = Condition(
            "SourceAvailable", False, "RollbackRefused",
            f"head {head[:7]} is not a descendant of {what} (a force-push back?); "
            "the applied revision stays; start with --allow-rollback to accept it")
        return True
