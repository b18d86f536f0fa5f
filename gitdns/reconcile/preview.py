"""The preview: the agents' own pipeline, run against a copy of each zone.

Every write a step makes lands in an `Overlay` (a copy of the zone read once from the
provider) and is recorded, so the preview lists exactly what the agents would write — their
own records, the active-groups mirror, inactive groups pruned, other primaries kept in step —
and nothing reaches the zone.  Health comes from each cluster's last published status
(`Published`); a cluster with none is previewed with every target healthy, and the plan says so.

`preview_zone` runs every cluster git names for one zone in turn against one copy — remotes
first (their endpoints feed the primaries), then the others, then the clusters that left git
since the zone was last applied (their agents remove their records) — and returns the zone as
it will be after every agent ran once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gitdns.core import builder
from gitdns.core.delegation import Payload, zones_for_primary
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, DesiredState, Mode, Zone
from gitdns.core.owner.zone import owners
from gitdns.core.plan.values import Authority, Plan, PlanMode
from gitdns.core.records import Change, Guard, RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.store import apply_changes
from gitdns.providers.base import ApplyResult, Provider, ZoneInfo
from gitdns.providers.memory import filter_names, snapshot_names, split_valid
from gitdns.reconcile.delegation import PrimaryInputs, remote_endpoints
from gitdns.reconcile.pipeline import Role, run
from gitdns.reconcile.zonepass import ZoneOutcome, ZonePass

# how a preview finds the desired state a revision had (a sha or its 7-character prefix);
# None when it cannot be found
StateAt = Callable[[str], DesiredState | None]
PREVIEW_POLL = 30.0  # the poll interval a previewed remote's payload carries


class Overlay:
    """A copy of one zone that takes the writes: read once from the provider, then every read
    and write goes to the copy.  ``changes`` lists what was applied, in order."""

    def __init__(self, real: Provider, zone: str) -> None:
        self.name = f"preview:{real.name}"
        self.capabilities = real.capabilities
        self._real = real
        self.zone = zone
        self.before = real.read(zone)
        self.records: dict[RecordKey, RecordSet] = self.before.by_key()
        self.changes: list[Change] = []

    def zones(self) -> list[ZoneInfo]:
        return self._real.zones()

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        return ZoneSnapshot(zone, filter_names(self.records.values(), names), complete=self.before.complete,
                            version=str(len(self.changes)), names=snapshot_names(names))

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        good, failed = split_valid(zone, changes)
        result = apply_changes(self.records, good, guards)
        self.records = result.records
        self.changes.extend(result.applied)
        return ApplyResult(applied=result.applied, refused=result.refused, failed=failed)

    def after(self) -> ZoneSnapshot:
        return ZoneSnapshot(self.zone, tuple(self.records[k] for k in sorted(self.records)))


class Recorder:
    """The zone's provider passed through, each applied change recorded: what `apply` reports
    having written, whichever step wrote it."""

    def __init__(self, real: Provider, zone: str) -> None:
        self.name = real.name
        self.capabilities = real.capabilities
        self._real = real
        self.zone = zone
        self.changes: list[Change] = []

    def __getattr__(self, name: str) -> object:  # views_dir and the like, for rendering
        return getattr(self._real, name)

    def zones(self) -> list[ZoneInfo]:
        return self._real.zones()

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        return self._real.read(zone, names) if names is not None else self._real.read(zone)

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        result = self._real.apply(zone, changes, guards)
        self.changes.extend(result.applied)
        return result


@dataclass(frozen=True, slots=True)
class Published:
    """What each cluster last published on its status branch: its unhealthy target ids and
    the revision it applied.  A cluster missing from ``unhealthy`` published no status: every
    target is taken as healthy."""

    unhealthy: Mapping[str, frozenset[str]] = field(default_factory=dict)
    applied: Mapping[str, str] = field(default_factory=dict)  # cluster id -> applied sha
    frozen: frozenset[str] = frozenset()

    def of(self, cluster_id: str) -> tuple[frozenset[str], bool]:
        """(unhealthy target ids, whether the cluster published a status)."""
        known = cluster_id in self.unhealthy
        return self.unhealthy.get(cluster_id, frozenset()), known


NOTHING_PUBLISHED = Published()


def newest_rev(snapshot: ZoneSnapshot, owner: str) -> str | None:
    """The sha7 of the newest revision the owner's ownership TXT in the zone record."""
    revs = [rev for row in owners(snapshot, ()) if row.owner == owner for rev in row.revisions]
    stamped = sorted((int(t), sha) for t, _, sha in (r.partition(".") for r in revs) if t.isdigit() and sha)
    return stamped[-1][1] if stamped else None


def last_applied(desired: Desired, cluster: Cluster, read: Callable[[], ZoneSnapshot], published: Published,
                 state_at: StateAt | None) -> Callable[[], DesiredState | None]:
    """The desired state the cluster last applied, as its agent judges a reviewed removal
    against it: its status branch's applied revision, else the newest revision its ownership
    TXT in the zone record, else the previous commit.  Looked up only when a plan stalls."""
    fallback = desired.previous

    def previous() -> DesiredState | None:
        sha = published.applied.get(cluster.id) or newest_rev(read(), cluster.id)
        state = state_at(sha) if sha and state_at is not None else None
        if state is not None:
            return state
        return fallback() if fallback is not None else None
    return previous


@dataclass(frozen=True, slots=True)
class Preview:
    """One zone after every cluster's pipeline ran against one copy of it."""

    zone: Zone
    plans: tuple[tuple[Cluster, Plan], ...]  # each cluster's effective plan, in the order run
    before: ZoneSnapshot
    after: ZoneSnapshot
    outcomes: tuple[ZoneOutcome, ...] = ()


def effective_plan(outcome: ZoneOutcome, cluster: Cluster, overlay: Overlay | Recorder, first: int,
                   notes: list[str]) -> Plan:
    """The plan a reviewer reads: the planner's verdict (conflicts, stalls, notes) with every
    change the pass wrote, whichever step wrote it."""
    base = outcome.plan or Plan(zone=overlay.zone, owner=cluster.id, authority=Authority.OWN)
    extra = tuple(n for n in notes if n not in base.notes)
    changes = tuple(overlay.changes[first:])
    # removals of inactive groups' records are the one authority beyond its own a pass uses
    authority = (Authority.INACTIVE_GROUPS if any(c.reason.startswith("authority") for c in changes)
                 else base.authority)
    refused = base.changes if base.stalled else ()  # the reviewer sees what the guard holds back
    return replace(base, changes=changes, guards=(), notes=(*base.notes, *extra), authority=authority,
                   refused=refused)


def preview_pass(desired: Desired, cluster: Cluster, zone: Zone, overlay: Overlay, *, health: Published,
                 force: bool = False, mode: PlanMode = PlanMode.SYNC, primary: PrimaryInputs | None = None,
                 state_at: StateAt | None = None) -> tuple[Plan, ZoneOutcome, ZonePass]:
    """One cluster's pass against the copy, judged against the revision it last applied; its
    effective plan."""
    unhealthy, known = health.of(cluster.id)
    outcome = ZoneOutcome(zone)
    desired = replace(desired, previous=last_applied(desired, cluster, lambda: overlay.before, health, state_at))
    p = ZonePass(zone, desired, cluster, overlay, True, outcome, mode=mode, force=force,
                 owners=tuple(c.id for c in desired.state.clusters), unhealthy=unhealthy,
                 frozen=health.frozen, primary=primary)
    if not known and builder.build_hosts(desired.state, cluster, zone) and _has_checks(desired, cluster, zone):
        p.notes.append(f"health: {cluster.name} has published no status; every target is taken as healthy")
    first = len(overlay.changes)
    role = Role.PREVIEW_PRIMARY if primary is not None else Role.PREVIEW
    if cluster.mode is Mode.REMOTE and desired.state.cluster(cluster.id) is not None:
        role = Role.REMOTE
    run(p, role)
    return effective_plan(outcome, cluster, overlay, first, p.notes), outcome, p


def _has_checks(desired: Desired, cluster: Cluster, zone: Zone) -> bool:
    from gitdns.core.health.filter import health_targets

    return bool(health_targets(builder.build_hosts(desired.state, cluster, zone)))


def departed(desired: Desired, zone: Zone, snapshot: ZoneSnapshot, state_at: StateAt | None) -> list[Cluster]:
    """Owners in the zone whose agents will remove their records: a Cluster still in git that
    no longer reconciles the zone (a remote's old claims are its primaries' to clean), and a
    Cluster that left git — named by the revision its ownership TXT record (its ``rev``
    label) or by the previous commit."""
    current = {c.id: c for c in desired.state.clusters}
    out: list[Cluster] = []
    previous: list[DesiredState | None] = []  # loaded once, only if an owner is not in git

    def older(revisions: tuple[str, ...]) -> Iterator[DesiredState | None]:
        yield from (state_at(rev.rpartition(".")[2]) for rev in revisions) if state_at else ()
        if not previous:
            previous.append(desired.previous() if desired.previous is not None else None)
        yield previous[0]

    for row in owners(snapshot, current):
        cluster = current.get(row.owner)
        if cluster is not None:
            if cluster.mode is not Mode.REMOTE and zone not in zones_of(desired, cluster):
                out.append(cluster)
            continue
        named = (s.cluster(row.owner) for s in older(row.revisions) if s is not None)
        found = next((c for c in named if c is not None), None)
        if found is not None:
            out.append(Cluster(name=found.name, id=found.id))
    return out


def remote_payloads(desired: Desired, zone: Zone, health: Published, now: float) -> dict[str, Payload]:
    """What each remote in git would put on its status branch for ``zone`` at this revision."""
    sha = desired.state.revision.sha if desired.state.revision else None
    out: dict[str, Payload] = {}
    for cluster in desired.state.clusters:
        if cluster.mode is not Mode.REMOTE or zone not in builder.zones_for_cluster(desired.state, cluster):
            continue
        unhealthy, _ = health.of(cluster.id)
        records, _ = remote_endpoints(desired, cluster, zone, unhealthy, health.frozen)
        out[cluster.id] = Payload(cluster.id, records, now, PREVIEW_POLL, sha)
    return out


def primary_inputs(desired: Desired, cluster: Cluster, zone: Zone, health: Published,
                   now: float) -> PrimaryInputs | None:
    if cluster.mode is not Mode.PRIMARY or desired.state.cluster(cluster.id) is None:
        return None
    remotes = tuple(c for c in desired.state.clusters if c.mode is Mode.REMOTE)
    peers = tuple(c.id for c in desired.state.clusters if c.id != cluster.id and c.mode is Mode.PRIMARY)
    return PrimaryInputs(remotes, remote_payloads(desired, zone, health, now), now, 6.0, PREVIEW_POLL, peers)


def zones_of(desired: Desired, cluster: Cluster) -> list[Zone]:
    """The zones a cluster's agent reconciles, as its mode in git says."""
    state = desired.state
    if cluster.mode is Mode.PRIMARY:
        return zones_for_primary(state, cluster, [c for c in state.clusters if c.mode is Mode.REMOTE])
    return builder.zones_for_cluster(state, cluster)


def publishers(desired: Desired, zone: Zone) -> list[Cluster]:
    """Clusters whose agents reconcile ``zone``: remotes first (they write nothing, but say
    what the primaries merge), then everyone else in git order."""
    out = [c for c in desired.state.clusters if zone in zones_of(desired, c)]
    return sorted(out, key=lambda c: c.mode is not Mode.REMOTE)


def preview_zone(desired: Desired, zone: Zone, provider: Provider, *, health: Published = NOTHING_PUBLISHED,
                 force: bool = False, state_at: StateAt | None = None, now: float = 0.0,
                 clusters: Sequence[Cluster] | None = None) -> Preview:
    """Every publishing cluster's pass in turn against one copy of the zone (the PR preview)."""
    overlay = Overlay(provider, zone.domain)
    plans: list[tuple[Cluster, Plan]] = []
    outcomes: list[ZoneOutcome] = []
    chosen = list(clusters) if clusters is not None else publishers(desired, zone)
    if clusters is None:
        chosen += departed(desired, zone, overlay.before, state_at)
    for cluster in chosen:
        inputs = primary_inputs(desired, cluster, zone, health, now)
        plan, outcome, _ = preview_pass(desired, cluster, zone, overlay, health=health, force=force,
                                        primary=inputs, state_at=state_at)
        plans.append((cluster, plan))
        outcomes.append(outcome)
    return Preview(zone, tuple(plans), overlay.before, overlay.after(), tuple(outcomes))
