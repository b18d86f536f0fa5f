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

from gitdns.agent import identity
from gitdns.agent.config import AgentConfig
from gitdns.agent.ports import AgentPorts
from gitdns.agent.roles import Role
from gitdns.agent.state import AgentState
from gitdns.agent.zones import Zones
from gitdns.core.conditions import REASONS, Condition
from gitdns.core.desired import Desired, HeadInfo
from gitdns.core.model import Cluster, Mode
from gitdns.errors import GitdnsError
from gitdns.reconcile.zonepass import ZoneOutcome

log = logging.getLogger(__name__)


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
                 changed: Callable[[], bool]) -> None:
        self.state = state
        self.config = config
        self.ports = ports
        self.role = role
        self.zones = zones
        self.health_changed = changed
        self.restore = ports.restore

    def fetch(self, cycle: Cycle, force: bool) -> bool:
        """The remote head; False when nothing is new and nothing is due."""
        state = self.state
        try:
            cycle.head = self.ports.source.remote_head()
        except GitdnsError as exc:
            self.source_failed(exc)
            raise
        if not state.source_condition.status and state.source_condition.reason == "GitUnreachable":
            state.source_condition = Condition("SourceAvailable", True, "GitOperationSucceeded", "reachable again")
        force = self.health_changed() or force
        if (cycle.head == state.fetched_sha and not force and not self.zones.due(self.ports.clock())
                and not self.role.due(state.current, state.known_cluster)):
            return False
        if cycle.head == state.fetched_sha and state.current is not None:
            cycle.desired = state.current
            return True
        try:
            cycle.fetched = self.ports.source.fetch(cycle.head)
        except GitdnsError as exc:
            self.source_failed(exc)
            raise
        state.source_condition = Condition("SourceAvailable", True, "GitOperationSucceeded",
                                           f"fetched {str(cycle.head)[:7]}")
        return True

    def source_failed(self, exc: GitdnsError) -> None:
        reason = exc.reason if exc.reason in REASONS else "GitUnreachable"
        self.state.source_condition = Condition("SourceAvailable", False, reason,
                                                f"{exc}; the last good revision stays in force")

    def load(self, cycle: Cycle) -> bool:
        fetched, state = cycle.fetched, self.state
        if fetched is None:
            return cycle.desired is not None
        head = HeadInfo(fetched.revision, fetched.message, fetched.author)
        desired = self._from(fetched.files, head)
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
        return True

    def _from(self, files: dict[str, str], head: HeadInfo) -> Desired:
        from gitdns.reconcile.engine import from_files

        return from_files(self.zones.root, files, head, None)

    def _identify(self, desired: Desired) -> None:
        """Who we are in this revision, in which mode, and what we last applied."""
        cluster = self.zones.cluster_of(desired)
        identity.resolve_identity(self.state, self.config, desired, cluster, self._history)
        self.role.resolve(self._mode_cluster(desired))
        self.role.note_primaries(desired)
        self.role.refresh_for_revision(desired, self.zones.cluster_of(desired))
        self._restore_applied()

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

    def _restore_applied(self) -> None:
        """After a restart: take the applied revision from our status branch, so a force-push
        is still refused and a zone held by an invalid commit keeps its last good state."""
        state = self.state
        if self.restore is None or state.applied_sha is not None or state.known_cluster is None:
            return
        restore, self.restore = self.restore, None
        try:
            state.applied_sha = restore(state.known_cluster.id)
        except GitdnsError as exc:
            log.warning("restore applied revision failed: error=%s", exc)
        if state.applied_sha:
            log.info("restored applied revision: sha=%s", state.applied_sha[:12])

    def _refuse_rollback(self, head: str) -> bool:
        applied = self.state.applied_sha
        if not applied or self.config.allow_rollback or head == applied:
            return False
        if self.ports.source.is_descendant(head, applied):
            return False
        self.state.source_condition = Condition(
            "SourceAvailable", False, "RollbackRefused",
            f"head {head[:7]} is not a descendant of the applied revision {applied[:7]} "
            "(a force-push back?); the applied revision stays; start with --allow-rollback to accept it")
        return True
