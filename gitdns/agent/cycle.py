"""The agent's reconcile cycle: a list of steps with one signature (Flux style).

    fetch → load → validate → build/plan/guard/apply/verify (per zone) → render → report

Each step takes the `Cycle` (this pass's scratch state) and returns whether to go on.  The
`Agent` keeps what survives between passes: the applied revision, the last good desired
state per zone (validation holds per zone), the validation schedule, the lease.  Nothing
is deleted because something could not be read; a failing step leaves the last good
revision in force.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from gitdns.agent import identity, reporting
from gitdns.agent.config import AgentConfig
from gitdns.agent.lease import Lease, LeaseState, NoLease
from gitdns.agent.roles import Role
from gitdns.core import builder
from gitdns.core.conditions import Condition
from gitdns.core.desired import Desired, HeadInfo
from gitdns.core.healthfilter import HealthResult, HealthTarget, fleet_frozen, health_targets
from gitdns.core.model import Cluster, DesiredState, Mode, Revision, Zone
from gitdns.core.owners import heartbeat_change, heartbeat_name, owners
from gitdns.core.plan import Authority, Intent
from gitdns.core.planner import plan as make_plan
from gitdns.core.status import ClusterReport, ZoneReport
from gitdns.errors import GitdnsError
from gitdns.providers.base import Provider
from gitdns.reconcile import pipeline
from gitdns.reconcile.engine import (
    ProviderFactory,
    from_files,
    policy_for_zone,
)
from gitdns.reconcile.zonepass import NO_PROVIDER, ZoneMemory, ZoneOutcome, ZonePass

log = logging.getLogger(__name__)


class Fetched(Protocol):
    sha: str
    revision: Revision
    message: str
    author: str
    files: dict[str, str]


class Source(Protocol):
    def remote_head(self) -> str: ...
    def fetch(self, sha: str | None = None) -> Any: ...
    def is_descendant(self, new: str, old: str) -> bool: ...
    def files_at(self, sha: str) -> dict[str, str]: ...


class HealthSource(Protocol):
    def set_targets(self, targets: list[HealthTarget]) -> None: ...
    def unhealthy(self) -> frozenset[str]: ...
    def states(self) -> Mapping[str, Mapping[str, Any]]: ...


class StatusSink(Protocol):
    def publish(self, report: ClusterReport) -> str | None: ...


@dataclass(slots=True)
class ZoneTrack:
    """What the agent remembers about one zone between cycles: the state the zone's passes
    read and update (`ZoneMemory`, held by reference by each pass) and the validation schedule."""

    desired: Desired  # the last desired state under which this zone validated
    next_validation: float | None = None
    interval: float = 0.0
    memory: ZoneMemory = field(default_factory=ZoneMemory)

    @property
    def last(self) -> ZoneOutcome | None:
        return self.memory.last


@dataclass(slots=True)
class Cycle:
    trigger: str
    head: str | None = None
    fetched: Any = None
    desired: Desired | None = None
    outcomes: list[ZoneOutcome] = field(default_factory=list)
    conditions: list[Condition] = field(default_factory=list)
    wrote: bool = False
    yielded: bool = False


Step = Callable[["Agent", Cycle], bool]


class Agent:
    def __init__(self, config: AgentConfig, *, source: Source, factory: ProviderFactory,
                 status: StatusSink | None = None, lease: Lease | None = None,
                 clock: Callable[[], float], rng: random.Random | None = None,
                 on_apply: Callable[[str, ZoneOutcome], None] | None = None) -> None:
        self.config = config
        self.source = source
        self.factory = factory
        self.status = status
        self.lease: Lease = lease or NoLease()
        self.clock = clock
        self.rng = rng or random.Random()
        self.on_apply = on_apply
        self.root = Path(config.state_dir)
        self.applied_sha: str | None = None
        self.applied_state: DesiredState | None = None
        self.fetched_sha: str | None = None
        self.current: Desired | None = None
        self.tracks: dict[str, ZoneTrack] = {}
        self.source_condition = Condition("SourceAvailable", True, "GitOperationSucceeded")
        self.lease_state: LeaseState | None = None
        self.last_report: ClusterReport | None = None
        self.provider_calls = 0
        self.known_cluster: Cluster | None = None  # the last Cluster git named for us
        self.heartbeats: dict[str, float] = {}  # zone name -> when our heartbeat was refreshed
        self.held_without_state: set[str] = set()  # held zones with no last good state known
        self.cluster_problem: Condition | None = None  # git names no usable Cluster for us
        self.history_desired: Desired | None = None  # the last revision that named our Cluster
        # DNSPolicy health: probes (set by the wiring), the fleet's unhealthy share per host
        # (from the status branches), and a flag the probes set when a target changes state
        self.health_source: HealthSource | None = None
        self.fleet_health: Callable[[], Mapping[str, tuple[int, int]]] | None = None
        self.health_dirty = False
        self.poke: Callable[[str], None] | None = None  # the scheduler's "run now" (set by the wiring)
        self.health_results: dict[str, HealthResult] = {}  # zone name -> last health filtering
        self.group_results: dict[str, dict[str, Any]] = {}  # zone domain -> groups verdict
        self.freeze_share = 0.5
        # right after a new revision a failing probe may be a wrong health path just merged:
        # within this window any host whose targets fail is frozen
        self.revision_grace = 120.0
        self.revision_loaded_at: float | None = None
        # chooses the lease once the cluster's zones are known (set by the wiring)
        self.lease_builder: Callable[[Desired, Cluster], Lease] | None = None
        # called with every report (the Gateway PolicyAffected condition in a cluster)
        self.report_hooks: list[Callable[[ClusterReport, Desired | None], None]] = []
        # the applied revision recorded on our status branch, read once at start-up
        self.restore: Callable[[str], str | None] | None = None
        # refuses to run as a Cluster that is not this one (set by the wiring in a cluster)
        self.identity_check: Callable[[Cluster | None], None] | None = None
        # seed 001: default, primary or remote, and what that changes (gitdns/agent/roles.py)
        self.role = Role(configured=config.mode, poll_interval=config.poll_interval,
                         stale_after=config.stale_after, clock=clock)
        # work done on every poll, after the cycle (a primary's Kubernetes delegation pass)
        self.poll_hooks: list[Callable[[], None]] = []

    # --- the poll ----------------------------------------------------------------
    def validation_due(self) -> bool:
        now = self.clock()
        return any(t.next_validation is not None and t.next_validation <= now for t in self.tracks.values())

    def run(self, trigger: str = "poll", *, force: bool = False) -> Cycle:
        """One pass.  With the revision unchanged and no validation due it returns after one
        remote ref check: no provider call, no status push."""
        cycle = Cycle(trigger)
        source_before = self.source_condition
        reported = False
        try:
            for name, step in (("fetch", lambda a, c: a._fetch(c, force)), ("load", Agent._load),
                               ("reconcile", Agent._reconcile), ("report", Agent._report)):
                if not step(self, cycle):
                    break
                reported = name == "report"
        finally:
            if not reported and self.source_condition != source_before and self.current is not None:
                self.refresh_report()  # the source went away or came back: say so now
            for hook in self.poll_hooks:
                try:
                    hook()
                except Exception as exc:
                    log.warning("poll hook failed: error=%s: %s", type(exc).__name__, exc)
        return cycle

    def refresh_report(self) -> None:
        """Rebuild the report without publishing it (the remote may be the thing that is down)."""
        self.last_report = self.report()

    def _fetch(self, cycle: Cycle, force: bool) -> bool:
        try:
            cycle.head = self.source.remote_head()
        except GitdnsError as exc:
            self._source_failed(exc)
            raise
        if not self.source_condition.status and self.source_condition.reason == "GitUnreachable":
            self.source_condition = Condition("SourceAvailable", True, "GitOperationSucceeded", "reachable again")
        force = force or self.health_dirty
        self.health_dirty = False
        if (cycle.head == self.fetched_sha and not force and not self.validation_due()
                and not self.role.due(self.current, self.known_cluster)):
            return False
        if cycle.head == self.fetched_sha and self.current is not None:
            cycle.desired = self.current
            return True
        try:
            cycle.fetched = self.source.fetch(cycle.head)
        except GitdnsError as exc:
            self._source_failed(exc)
            raise
        self.source_condition = Condition("SourceAvailable", True, "GitOperationSucceeded",
                                          f"fetched {str(cycle.head)[:7]}")
        return True

    def _restore_applied(self) -> None:
        """After a restart: take the applied revision from our status branch, so a force-push
        is still refused and a zone held by an invalid commit keeps its last good state."""
        if self.restore is None or self.applied_sha is not None or self.known_cluster is None:
            return
        restore, self.restore = self.restore, None
        try:
            self.applied_sha = restore(self.known_cluster.id)
        except GitdnsError as exc:
            log.warning("restore applied revision failed: error=%s", exc)
        if self.applied_sha:
            log.info("restored applied revision: sha=%s", self.applied_sha[:12])

    def _source_failed(self, exc: GitdnsError) -> None:
        self.source_condition = Condition("SourceAvailable", False, _reason(exc, "GitUnreachable"),
                                          f"{exc}; the last good revision stays in force")

    def _load(self, cycle: Cycle) -> bool:
        fetched = cycle.fetched
        if fetched is None:
            return cycle.desired is not None
        head = HeadInfo(fetched.revision, fetched.message, fetched.author)
        desired = from_files(self.root, fetched.files, head, None)
        self._resolve_identity(desired)
        self.role.resolve(self._mode_cluster(desired))
        self.role.note_primaries(desired)
        self.role.refresh_for_revision(desired, self.cluster_of(desired))
        self._restore_applied()
        self.fetched_sha = fetched.sha
        if self._refuse_rollback(fetched.sha):
            cycle.fetched = None
            cycle.desired = self.current or self._desired_at(self.applied_sha)
            self.current = cycle.desired
            return cycle.desired is not None
        applied = self.applied_sha
        cycle.desired = replace(desired, previous=(lambda: self._state_at(applied)) if applied else None)
        self.current = cycle.desired
        if applied and applied != fetched.sha:
            self.revision_loaded_at = self.clock()
        return True

    def _mode_cluster(self, desired: Desired) -> Cluster | None:
        """The Cluster whose mode counts: git's now.  One whose own document does not validate
        keeps its last known mode while its zones are held; a remote removed from git stays a
        remote (it has nothing in any zone to clean up, and no credentials); a primary or
        default cluster removed from git runs as default, withdrawing its own claims."""
        cluster = self.cluster_of(desired)
        known = self.known_cluster
        if cluster is not None or known is None:
            return cluster
        if self.cluster_problem is not None or known.mode is Mode.REMOTE:
            return known
        return None

    def _refuse_rollback(self, head: str) -> bool:
        applied = self.applied_sha
        if not applied or self.config.allow_rollback or head == applied:
            return False
        if self.source.is_descendant(head, applied):
            return False
        self.source_condition = Condition(
            "SourceAvailable", False, "RollbackRefused",
            f"head {head[:7]} is not a descendant of the applied revision {applied[:7]} "
            "(a force-push back?); the applied revision stays; start with --allow-rollback to accept it")
        return True

    def _desired_at(self, sha: str | None) -> Desired | None:
        if not sha:
            return None
        try:
            return from_files(self.root, self.source.files_at(sha), None)
        except GitdnsError:
            return None

    def _state_at(self, sha: str) -> DesiredState | None:
        if self.applied_state is not None and sha == self.applied_sha:
            return self.applied_state
        try:
            return from_files(self.root, self.source.files_at(sha), None).state
        except GitdnsError:
            return None

    # --- who we are (gitdns/agent/identity.py) and the report (gitdns/agent/reporting.py) --
    def _save_identity(self, cluster: Cluster) -> None:
        identity.save_identity(self, cluster)

    def _resolve_identity(self, desired: Desired) -> None:
        identity.resolve_identity(self, desired)

    def report(self, cycle: Cycle | None = None) -> ClusterReport:
        return reporting.report(self, cycle)

    def conditions(self, zones: list[ZoneReport]) -> list[Condition]:
        return reporting.conditions(self, zones)

    def _report(self, cycle: Cycle) -> bool:
        return reporting.publish(self, cycle)

    # --- per zone ----------------------------------------------------------------
    def cluster_of(self, desired: Desired) -> Cluster | None:
        cluster = desired.state.cluster(self.config.cluster)
        if cluster is None and self.known_cluster is not None:
            cluster = desired.state.cluster(self.known_cluster.id)
        if cluster is not None and cluster != self.known_cluster:
            self.known_cluster = cluster
            self._save_identity(cluster)
        return cluster

    def _zones(self, desired: Desired) -> list[tuple[Zone, Desired, bool]]:
        """(zone, the desired state to use for it, held?) for every zone to reconcile."""
        out: list[tuple[Zone, Desired, bool]] = []
        cluster = self.cluster_of(desired)
        if cluster is None and self.cluster_problem is not None:
            return self._hold_all()
        if cluster is None:
            self._track_removed_zones()
        wanted = self.role.zones(desired, cluster) if cluster else []
        names = {z.name for z in wanted}
        for zone in wanted:
            if zone.name in desired.blocked:
                track = self.tracks.get(zone.name) or self._track_from_applied(zone)
                if track is not None:
                    out.append((zone, track.desired, True))
                else:
                    self.held_without_state.add(zone.name)
                continue
            out.append((zone, desired, False))
        for name, track in self.tracks.items():
            if name not in names and name not in desired.blocked:
                out.append((self._zone_in(track.desired, name), desired, False))  # left the cluster
        return out

    def _track_removed_zones(self) -> None:
        """Our Cluster was removed from git: the zones it published (per the applied revision,
        or the last revision that named it) are tracked so its records are cleaned up, even by
        an agent that starts after the removal."""
        known = self.known_cluster
        old = self._desired_at(self.applied_sha) or self.history_desired
        if known is None or old is None:
            return
        cluster = old.state.cluster(known.id) or known
        for zone in builder.zones_for_cluster(old.state, cluster):
            self.tracks.setdefault(zone.name, ZoneTrack(old))

    def _hold_all(self) -> list[tuple[Zone, Desired, bool]]:
        """Our own Cluster document is broken (or unknown): keep every zone as it was."""
        known = self.known_cluster
        old = self._desired_at(self.applied_sha)
        if old is not None and known is not None:
            for zone in builder.zones_for_cluster(old.state, known):
                if zone.name not in self.tracks:
                    self._track_from_applied(zone)
        out: list[tuple[Zone, Desired, bool]] = []
        for name, track in self.tracks.items():
            out.append((self._zone_in(track.desired, name), track.desired, True))
        return out

    def _track_from_applied(self, zone: Zone) -> ZoneTrack | None:
        """The last good state of a zone after a restart: the applied revision's files."""
        if not self.applied_sha:
            return None
        try:
            old = from_files(self.root, self.source.files_at(self.applied_sha), None)
        except GitdnsError:
            return None
        if zone.name in old.blocked or old.state.zone(zone.name) is None:
            return None
        track = self.tracks[zone.name] = ZoneTrack(old)
        return track

    @staticmethod
    def _zone_in(desired: Desired, name: str) -> Zone:
        zone = desired.state.zone(name)
        assert zone is not None
        return zone

    def _acquire(self) -> bool:
        if isinstance(self.lease, NoLease) and self.lease_builder is not None and self.current is not None:
            cluster = self.cluster_of(self.current)
            if cluster is not None:
                self.lease = self.lease_builder(self.current, cluster)
                self.lease_builder = None
        try:
            self.lease_state = self.lease.acquire()
        except GitdnsError as exc:
            self.lease_state = LeaseState(False, "unknown", 0.0, f"lease: {exc}")
        if not self.lease_state.held:
            log.warning("lease held: %s", self.lease_state.message)
        return self.lease_state.held

    def _reconcile(self, cycle: Cycle) -> bool:
        desired = cycle.desired
        assert desired is not None
        self.held_without_state = set()
        if self.identity_check is not None:
            self.identity_check(self.cluster_of(desired))
            self.identity_check = None
        can_write = self._acquire()
        self._update_health_targets(desired)
        for zone, zdesired, held in self._zones(desired):
            outcome = self._reconcile_zone(zone, zdesired, desired, can_write)
            if held:
                outcome.skipped = "held: this revision does not validate for the zone; the last good one stays"
            cycle.outcomes.append(outcome)
            cycle.wrote = cycle.wrote or outcome.applied > 0
            cycle.yielded = cycle.yielded or bool(outcome.plan and outcome.plan.yielded)
        if cycle.fetched is not None and can_write and not any(o.errors for o in cycle.outcomes):
            self.applied_sha = cycle.fetched.sha
            self.applied_state = desired.state
        return True

    def _reconcile_zone(self, zone: Zone, zdesired: Desired, newest: Desired, can_write: bool,
                        validation: bool = False) -> ZoneOutcome:
        outcome = ZoneOutcome(zone)
        cluster = self._cluster_for_zone(zdesired, newest)
        track = self.tracks.get(zone.name) or self.tracks.setdefault(zone.name, ZoneTrack(zdesired))
        remote = self.role.mode is Mode.REMOTE
        zpass: ZonePass | None = None
        try:
            provider = NO_PROVIDER if remote else self.factory(zone)  # a remote holds no credentials
            unhealthy, frozen = self._health_inputs()
            zpass = ZonePass(zone, zdesired, cluster, provider, can_write, outcome, memory=track.memory,
                             validation=validation, owners=tuple(c.id for c in newest.state.clusters),
                             always_verify=self.config.once, unhealthy=unhealthy, frozen=frozen,
                             primary=None if remote else self.role.primary_inputs(zdesired, cluster, zone))
            pipeline.run(zpass, pipeline.Role.REMOTE if remote else pipeline.Role.PRIMARY if zpass.primary is not None
                         else pipeline.Role.DEFAULT)
            self._note_results(zone, cluster, zpass)
            if outcome.plan is None and track.last is not None and not remote:
                outcome.plan = track.last.plan  # nothing was read: the last verdict stands
            if can_write and not remote:
                self._housekeeping(zone, provider, cluster, newest)
                if zpass.primary is not None and not outcome.errors:
                    outcome.applied += self.role.clean_remote_claims(zdesired, zone, provider)
        except GitdnsError as exc:
            outcome.errors.append(f"{exc.reason}: {exc}")
        self._track(zone, zdesired, outcome)
        if remote:
            track.next_validation = None
        self._remember(zpass, outcome)
        if self.on_apply is not None:
            self.on_apply(zone.domain, outcome)
        return outcome

    def _cluster_for_zone(self, zdesired: Desired, newest: Desired) -> Cluster:
        cluster = self.cluster_of(newest)
        if cluster is None:
            known = self.known_cluster
            ident = known.id if known else self.config.cluster
            if zdesired is not newest:  # held: the cluster as it was in the zone's last good state
                cluster = zdesired.state.cluster(ident)
            if cluster is None:  # removed from git: remove our own records (a reviewed removal)
                cluster = Cluster(name=known.name if known else self.config.cluster, id=ident)
        return cluster

    def _note_results(self, zone: Zone, cluster: Cluster, zpass: ZonePass) -> None:
        """What the report shows of this pass: endpoints, merge verdicts, groups, health."""
        if self.role.mode is Mode.REMOTE:
            self.role.endpoints[zone.name] = zpass.endpoints
        if zpass.merged is not None:
            self.role.record_merge(zone, zpass.merged)
        if zpass.groups is not None:
            self.group_results[zone.domain] = {
                "group": cluster.group, "active": not zpass.inactive,
                "activeGroups": sorted(zpass.groups.active), "serial": zpass.groups.serial,
                "diverged": zpass.groups.diverged,
                "records": len(zpass.intent.records) if zpass.intent and not zpass.inactive else 0,
                "targets": sum(len(r.values) for r in (zpass.intent.records if zpass.intent else ())
                               if r.type in ("A", "AAAA", "CNAME")) if not zpass.inactive else 0}
        else:
            self.group_results.pop(zone.domain, None)
        if zpass.health is not None:
            self.health_results[zone.name] = zpass.health
        else:
            self.health_results.pop(zone.name, None)

    def _update_health_targets(self, desired: Desired) -> None:
        if self.health_source is None:
            return
        cluster = self.cluster_of(desired)
        targets: list[HealthTarget] = []
        if cluster is not None:
            for zone in builder.zones_for_cluster(desired.state, cluster):
                targets.extend(health_targets(builder.build_hosts(desired.state, cluster, zone)))
        self.health_source.set_targets(targets)

    def _health_inputs(self) -> tuple[frozenset[str], frozenset[str]]:
        """(unhealthy target ids, hosts whose withdrawals are frozen)."""
        if self.health_source is None:
            return frozenset(), frozenset()
        unhealthy = self.health_source.unhealthy()
        if not unhealthy:
            return unhealthy, frozenset()
        shares: dict[str, tuple[int, int]] = {}
        if self.fleet_health is not None:
            try:
                shares = dict(self.fleet_health())
            except GitdnsError as exc:
                log.warning("fleet health unavailable: error=%s", exc)
        own_total: dict[str, int] = {}
        for target_id in self.health_source.states():
            host = target_id.split("|", 1)[0]
            own_total[host] = own_total.get(host, 0) + 1
        for host, total in own_total.items():
            bad = sum(1 for t in unhealthy if t.split("|", 1)[0] == host)
            other_bad, other_total = shares.get(host, (0, 0))
            shares[host] = (bad + other_bad, total + other_total)
        fresh = self.revision_loaded_at is not None and self.clock() - self.revision_loaded_at < self.revision_grace
        if fresh:  # a new revision: freeze even a lone failing target
            return unhealthy, fleet_frozen(shares, self.freeze_share, minimum=1)
        return unhealthy, fleet_frozen(shares, self.freeze_share)

    def _remember(self, zpass: ZonePass | None, outcome: ZoneOutcome) -> None:
        """Keep what this pass wanted, so the next revision reads only what changed."""
        if zpass is None:
            return
        memory = zpass.memory
        ok = not outcome.errors and not outcome.pending_after_apply and not (
            outcome.plan is not None and (outcome.plan.stalled or (outcome.plan.changes and not outcome.applied)))
        if ok and zpass.intent is not None and not zpass.inactive and self.role.mode is not Mode.REMOTE:
            memory.intent = zpass.intent.records
        else:
            memory.intent = None  # next pass plans in full (after a failure, or once active again)

    def _housekeeping(self, zone: Zone, provider: Provider, cluster: Cluster, desired: Desired) -> None:
        """Refresh this owner's heartbeat TXT; with --prune-stale-owners-after, remove owners
        that no Cluster in git names and whose heartbeat went silent (opt-in)."""
        now = self.clock()
        last = self.heartbeats.get(zone.name, 0.0)
        if now - last < self.config.heartbeat_interval:
            return
        after = self.config.prune_stale_owners_after
        # the heartbeat alone reads one name; the opt-in pruning needs every owner's heartbeat
        snapshot = (provider.read(zone.domain) if after > 0
                    else provider.read(zone.domain, [heartbeat_name(cluster.id, zone.domain)]))
        result = provider.apply(zone.domain, [heartbeat_change(snapshot, cluster.id, zone.domain, now)])
        if result.ok:
            self.heartbeats[zone.name] = now
        if after <= 0:
            return
        known = {c.id for c in desired.state.clusters}
        for row in owners(snapshot, known):
            if row.stale(now, after):
                log.warning("pruning stale owner: zone=%s owner=%s silent_for=%.0fs", zone.domain,
                            row.owner, now - (row.heartbeat or 0))
                pol = replace(policy_for_zone(desired, zone, force=True), authority=Authority.PRUNE_OWNER,
                              prune_owner=row.owner)
                plan = make_plan(Intent(row.owner, (), None), provider.read(zone.domain), pol)
                provider.apply(zone.domain, plan.changes, plan.guards)

    def _track(self, zone: Zone, desired: Desired, outcome: ZoneOutcome) -> None:
        track = self.tracks.get(zone.name)
        if track is None:
            track = self.tracks[zone.name] = ZoneTrack(desired)
        elif zone.name not in desired.blocked:
            track.desired = desired
        track.memory.last = outcome
        now = self.clock()
        delay = self.config.validate_delay
        if outcome.applied or outcome.pending_after_apply or outcome.errors:
            track.interval = delay
            track.next_validation = now + delay + self.rng.uniform(0, delay)  # seed 000: 5 s + jitter
        elif track.next_validation is None or track.next_validation <= now:
            track.interval = min(max(track.interval * 2, delay), self.config.quiet_period)
            track.next_validation = now + track.interval

    # --- validation loop (seed 000) ------------------------------------------------
    def validate(self) -> int:
        """Re-check due zones; re-apply where own records are missing or overwritten.
        Returns the number of zones re-applied."""
        now = self.clock()
        reapplied = 0
        desired = self.current
        if desired is None:
            return 0
        can_write: bool | None = None
        for name, track in list(self.tracks.items()):
            if track.next_validation is None or track.next_validation > now:
                continue
            zone = self._zone_in(track.desired, name)
            if can_write is None:
                can_write = self._acquire()
            outcome = self._reconcile_zone(zone, track.desired, desired, can_write, validation=True)
            reapplied += 1 if outcome.applied else 0
        if can_write is not None:
            self._report(Cycle("validate"))
        return reapplied

    def next_validation(self) -> float | None:
        times = [t.next_validation for t in self.tracks.values() if t.next_validation is not None]
        return min(times) if times else None


def _reason(exc: GitdnsError, default: str) -> str:
    from gitdns.core.conditions import REASONS

    return exc.reason if exc.reason in REASONS else default


def files_of(report: ClusterReport, dump: Callable[[Mapping[str, Any]], str]) -> dict[str, str]:
    from gitdns.core.status import documents

    return {path: dump(doc) for path, doc in documents(report).items()}


