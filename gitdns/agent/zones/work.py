"""One zone, one pass, in the agent: the pipeline for its role, then what only a running agent
does around it (what the report shows of the pass, the builder's notes on the plan, the heartbeat
TXT, opt-in pruning of silent owners).  In a zone the cluster left, the pass removes its values
and ownership TXT; once none is left its heartbeat goes too and the zone is no longer
reconciled (`gitdns.agent.zones.Zones.forget`)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace

from gitdns.agent.budget import RESERVE
from gitdns.agent.config import AgentConfig
from gitdns.agent.health.inputs import HealthInputs
from gitdns.agent.ports import AgentPorts, AgentView
from gitdns.agent.roles import Role as AgentRole
from gitdns.agent.state import AgentState, ZoneTrack
from gitdns.agent.zones import Zones
from gitdns.agent.zones.primed import Primed
from gitdns.core.builder import notes_for_zone
from gitdns.core.desired import Desired
from gitdns.core.groups import gitdns_name, kuadrant_name, read_zone_groups
from gitdns.core.model import Cluster, Mode, Revision, Zone
from gitdns.core.owner.zone import heartbeat_change, heartbeat_name, owners
from gitdns.core.plan.leave import farewell, heartbeat_removal, holdings
from gitdns.core.plan.planner import plan as make_plan
from gitdns.core.plan.values import Authority, Intent, annotated
from gitdns.core.reads import changed_keys, per_name_is_cheaper
from gitdns.core.records import Action, Change, RecordKey, ZoneSnapshot
from gitdns.core.registry import txt_name
from gitdns.errors import GitdnsError
from gitdns.providers.base import Capabilities, Provider
from gitdns.reconcile import pipeline
from gitdns.reconcile.engine import intent_for, policy_for_zone, render_views
from gitdns.reconcile.readset import key_owners
from gitdns.reconcile.zonepass import NO_PROVIDER, ZoneMemory, ZoneOutcome, ZonePass

log = logging.getLogger(__name__)



class ZoneWork:
    def __init__(self, state: AgentState, config: AgentConfig, ports: AgentPorts, role: AgentRole, zones: Zones,
                 health: HealthInputs) -> None:
        self.state = state
        self.config = config
        self.ports = ports
        self.role = role
        self.zones = zones
        self.health = health
        self.primed: dict[str, ZoneSnapshot] = {}  # whole reads of this cycle's own_revision, by zone name
        zones.lend_reader(self._read_whole)

    def _read_whole(self, zone: Zone) -> ZoneSnapshot:
        return self.ports.factory(zone).read(zone.domain)

    def run(self, zone: Zone, zdesired: Desired, newest: Desired, can_write: bool,
            validation: bool = False) -> ZoneOutcome:
        outcome = ZoneOutcome(zone)
        finished = False  # a left zone where nothing of ours is left
        cluster = self._cluster(zdesired, newest)
        track = self.zones.track(zone, zdesired)
        remote = self.role.mode is Mode.REMOTE
        zpass: ZonePass | None = None
        spent = None if remote else self._sent(zone)
        try:
            provider = NO_PROVIDER if remote else self.ports.factory(zone)  # a remote holds no credentials
            primed = self.primed.pop(zone.name, None)
            if primed is not None and not remote:  # the zone as own_revision just read it (primed.py)
                provider = Primed(provider, primed)
            unhealthy, frozen = self.health.inputs()
            zpass = ZonePass(zone, zdesired, cluster, provider, can_write, outcome, memory=track.memory,
                             validation=validation, owners=tuple(c.id for c in newest.state.clusters),
                             always_verify=self.config.once, unhealthy=unhealthy, frozen=frozen,
                             primary=None if remote else self.role.primary_inputs(zdesired, cluster, zone),
                             pacing=self.ports.pacing, first_by_names=self.state.applied_sha is None,
                             drift=validation and self._drift_due(track.memory, cluster))
            pipeline.run(zpass, _role(remote, zpass))
            self._note(zone, cluster, zpass)
            if outcome.plan is None and track.last is not None and not remote:
                outcome.plan = track.last.plan  # nothing was read: the last verdict stands
            if outcome.plan is not None:
                outcome.plan = annotated(outcome.plan, notes_for_zone(zdesired.state, cluster, zone))
            left = not remote and zdesired is newest and not self._publishes(newest, cluster, zone)
            if zpass.drift:
                self._next_drift(track.memory, provider, newest, cluster)
            if can_write and not remote:
                finished = self._leave(zone, provider, cluster, outcome, zpass.names) if left else False
                if not left:
                    self._housekeeping(zone, provider, cluster, newest, validation)
        except GitdnsError as exc:
            outcome.errors.append(f"{exc.reason}: {exc}")
        except Exception as exc:
            log.exception("zone pass failed: zone=%s", zone.domain)
            outcome.errors.append(f"InternalError: {type(exc).__name__}: {_short(str(exc))}; what this pass "
                                  "wrote is taken back and the zone keeps its last good state")
            if zpass is not None and not remote:
                _undo(zpass)
        if zpass is not None and zpass.names is not None:
            track.read_cost = max(track.read_cost, len(zpass.names))
        if spent is not None and validation and not outcome.applied and not (zpass and zpass.rechecked):
            track.quiet_cost = max(0, (self._sent(zone) or spent) - spent)
            track.quiet_floor = self._quiet_floor(zone, track.quiet_cost)
        watch = _remember(zpass, outcome, remote)
        self.zones.schedule(zone, zdesired, outcome, self.ports.clock(), soon=watch)
        if remote:
            track.next_validation = None
        if finished and outcome.ok:
            log.info("left zone cleaned up: zone=%s owner=%s", zone.domain, cluster.id)
            self.zones.forget(zone.name)
        if self.ports.on_apply is not None:
            self.ports.on_apply(zone.domain, outcome)
        return outcome

    def groups_moved(self) -> bool:
        """Whether a grouped zone's active-groups records changed since its last pass (a
        break-glass `groups set --direct` written straight to the zone): one read of two names per
        grouped zone, so the agents follow within a poll interval, with or without git."""
        if self.role.mode is Mode.REMOTE:
            return False
        moved = False
        for name, track in self.state.tracks.items():
            memory = track.memory
            if not memory.groups_watch:
                continue
            zone = self.zones.zone_in(track.desired, name)
            try:
                snapshot = self.ports.factory(zone).read(zone.domain, [kuadrant_name(zone.domain),
                                                                      gitdns_name(zone.domain)])
            except Exception as exc:  # a library's own failure too: the zone's pass reports it
                log.debug("active groups check failed: zone=%s error=%s", zone.domain, _error(exc))
                continue
            seen = read_zone_groups(snapshot, zone.domain).key()
            if memory.groups_seen is not None and seen != memory.groups_seen:
                log.info("active groups changed in the zone: zone=%s", zone.domain)
                moved = True
            memory.groups_seen = seen
        return moved

    def own_revision(self, desired: Desired, cluster: Cluster) -> tuple[str, Revision] | None:
        """The newest revision this cluster's own ownership TXT records carry in its zones
        (``rev`` label: commit time and short sha), with the zone: what the agent applied last,
        as the zones remember it.  Read once, after a restart that found no other record; a
        whole-zone read is lent to the zone's pass in the same cycle (`primed`)."""
        if self.role.mode is Mode.REMOTE:
            return None  # a remote writes no zone (and holds no credentials)
        newest: tuple[str, Revision] | None = None
        view = AgentView(cluster, self.role.mode, desired)
        for hook in self.ports.load_hooks:  # read while the revision loads: the budgets' fleet size first
            hook(view)
        for zone in self.role.zones(desired, cluster):
            # its ownership TXT names for what git gives it here (a joiner holds nothing else):
            # O(its names), not a whole-zone read per joining agent; the whole zone for a large intent
            names = sorted({txt_name(cluster.id, r.type, r.name, zone.domain)
                            for r in intent_for(desired, cluster, zone).records})
            try:
                provider = self.ports.factory(zone)
                if self._by_name(zone, desired, len(names)):
                    snapshot = provider.read(zone.domain, names)
                else:
                    snapshot = self.primed[zone.name] = provider.read(zone.domain)  # lent to the zone's pass
            except Exception as exc:  # a library's own failure too: the zone's pass reports it
                log.warning("reading own revisions failed: zone=%s error=%s", zone.domain, _error(exc))
                continue
            for row in owners(snapshot, ()):
                if row.owner != cluster.id:
                    continue
                for label in row.revisions:
                    rev = Revision.parse(label)
                    if rev is not None and (newest is None or rev.time > newest[1].time):
                        newest = (zone.domain, rev)
        return newest

    def drop_primed(self) -> None:
        """Forget the whole reads no pass of this cycle borrowed (the next cycle reads afresh)."""
        self.primed.clear()

    def _by_name(self, zone: Zone, desired: Desired, names: int) -> bool:
        """Whether ``names`` reads by name cost less than the whole zone (its size as last read,
        else as git foretells it)."""
        track = self.state.tracks.get(zone.name)
        index = key_owners(desired.state, zone)
        size = (track.memory.zone_size if track is not None else 0) or (index.records if index else 0)
        caps = self.ports.factory(zone).capabilities
        return names > 0 and per_name_is_cheaper(names, size or 1_000_000, caps.page_size, caps.name_read_cost)

    def _cluster(self, zdesired: Desired, newest: Desired) -> Cluster:
        cluster = self.zones.cluster_of(newest)
        if cluster is not None and zdesired is not newest:  # held: as in the zone's last good state (a
            return zdesired.state.cluster(cluster.id) or cluster  # Cluster with a problem is planned as it was)
        if cluster is not None:
            return cluster
        known = self.state.known_cluster
        ident = known.id if known else self.config.cluster
        if zdesired is not newest:  # held: the cluster as it was in the zone's last good state
            cluster = zdesired.state.cluster(ident)
        if cluster is None:  # removed from git: remove our own records (a reviewed removal)
            cluster = Cluster(name=known.name if known else self.config.cluster, id=ident)
        return cluster

    def _note(self, zone: Zone, cluster: Cluster, zpass: ZonePass) -> None:
        """What the report shows of this pass: endpoints, merge verdicts, groups, health."""
        if self.role.mode is Mode.REMOTE:
            self.role.endpoints[zone.name] = zpass.endpoints
        if zpass.merged is not None:
            self.role.record_merge(zone, zpass.merged)
        if zpass.groups is not None:
            self.state.group_results[zone.domain] = _groups_verdict(cluster, zpass)
        else:
            self.state.group_results.pop(zone.domain, None)
        if zpass.health is not None:
            self.state.health_results[zone.name] = zpass.health
        else:
            self.state.health_results.pop(zone.name, None)

    def _publishes(self, desired: Desired, cluster: Cluster, zone: Zone) -> bool:
        return desired.state.cluster(cluster.id) is not None and any(
            z.name == zone.name for z in self.role.zones(desired, cluster))

    def _leave(self, zone: Zone, provider: Provider, cluster: Cluster, outcome: ZoneOutcome,
               names: frozenset[str] | None) -> bool:
        """In a zone this cluster left: whether nothing of it is left (its heartbeat goes last,
        after its values and ownership TXT; no heartbeat is refreshed here any more).  It reads
        the names its pass read (what it held, from its last intent) and its heartbeat's; the
        whole zone when the pass did (it did not know what it held)."""
        plan = outcome.plan
        if outcome.errors or outcome.pending_after_apply or (plan is not None and (plan.stalled or plan.conflicts)):
            return False
        snapshot = (provider.read(zone.domain) if names is None
                    else provider.read(zone.domain, sorted({*names, heartbeat_name(cluster.id, zone.domain)})))
        if holdings(snapshot, cluster.id).claims:
            return False  # a value the plan did not take (yet): the next pass looks again
        changes = farewell(snapshot, cluster.id, zone.domain)
        if not changes:
            return True
        return outcome.record(provider.apply(zone.domain, changes), changes, "leaving the zone")

    def postpone(self, zone: Zone, track: ZoneTrack) -> float:
        """Seconds a due quiet validation waits so that it does not leave the agent's share in
        debt: until the share holds what a validation of this zone costs (the last quiet one, or
        the most names a pass read) plus `RESERVE` (0: go now).  Meanwhile the agent is free for
        a new revision.  The check after a write (what it changed: a few names) and the retry
        after a failure never wait here (the budget paces their requests as they go: a retry
        held back for a validation's worth of tokens doubled the soak's convergence time on
        Route53); nor does an agent without a budget."""
        cost = max(track.quiet_cost, track.read_cost)
        last = track.memory.last
        if track.memory.recheck or cost <= 0 or last is None or not last.ok or last.applied:
            return 0.0
        try:
            wait_for = getattr(self.ports.factory(zone), "wait_for", None)
        except GitdnsError:
            return 0.0
        return float(wait_for(cost + RESERVE)) if callable(wait_for) else 0.0

    def _sent(self, zone: Zone) -> int | None:
        """Requests the zone's budgeted provider paid for so far (None: not budgeted)."""
        try:
            sent = getattr(self.ports.factory(zone), "sent", None)
        except GitdnsError:
            return None
        return sent if isinstance(sent, int) else None

    def _quiet_floor(self, zone: Zone, cost: int) -> float:
        """The shortest quiet validation interval this agent's share of the account affords: what
        its last quiet validation cost (``cost`` requests), paid with `VALIDATION_SHARE` of the
        share (Route53 at 1,000 clusters: 13 requests at one per 250 s, about 1.8 hours), so
        changes keep the rest."""
        provider = self.ports.factory(zone)
        seconds_for = getattr(provider, "seconds_for", None)
        floor = seconds_for(cost) / VALIDATION_SHARE if callable(seconds_for) and cost > 0 else 0.0
        after = self.config.prune_stale_owners_after
        return min(floor, after / 3) if after > 0 else floor  # heartbeats stay well within the pruning age

    def _drift_due(self, memory: ZoneMemory, cluster: Cluster) -> bool:
        """Whether this validation pass is the zone's drift check (a whole-zone read, which also
        finds what the per-name reads cannot: leftovers of ours under names no intent holds).
        The first falls at a point of the first interval set by hash(cluster), so a fleet's drift
        checks are spread over it."""
        now = self.ports.clock()
        if memory.drift_due is None:
            memory.drift_due = now + fleet_phase(cluster.id) * 4 * self.config.quiet_period
        return now >= memory.drift_due

    def _next_drift(self, memory: ZoneMemory, provider: Provider, desired: Desired, cluster: Cluster) -> None:
        memory.drift_due = self.ports.clock() + drift_interval(
            provider.capabilities, memory.zone_size, len(desired.state.clusters), 4 * self.config.quiet_period)

    def _housekeeping(self, zone: Zone, provider: Provider, cluster: Cluster, desired: Desired,
                      validation: bool) -> None:
        """Refresh this owner's heartbeat TXT; with --prune-stale-owners-after, remove owners
        that no Cluster in git names and whose heartbeat went silent (opt-in).  A heartbeat once
        written is refreshed by validation passes only: a new revision does not make every agent
        of a fleet write at the same moment."""
        now = self.ports.clock()
        if now - self.state.heartbeats.get(zone.name, 0.0) < self.config.heartbeat_interval:
            return
        if not validation and zone.name in self.state.heartbeats:
            return
        after = self.config.prune_stale_owners_after
        # the heartbeat alone reads one name; the opt-in pruning needs every owner's heartbeat
        snapshot = (provider.read(zone.domain) if after > 0
                    else provider.read(zone.domain, [heartbeat_name(cluster.id, zone.domain)]))
        result = provider.apply(zone.domain, [heartbeat_change(snapshot, cluster.id, zone.domain, now)])
        if result.ok:
            self.state.heartbeats[zone.name] = now
        elif result.failed:  # refused as stale: written again next pass
            log.warning("heartbeat not written: zone=%s owner=%s error=%s", zone.domain, cluster.id,
                        "; ".join(why for _, why in result.failed))
        if after <= 0:
            return
        known = {c.id for c in desired.state.clusters}
        for row in owners(snapshot, known):
            if row.stale(now, after):
                log.warning("pruning stale owner: zone=%s owner=%s silent_for=%.0fs", zone.domain,
                            row.owner, now - (row.heartbeat or 0))
                pol = replace(policy_for_zone(desired, zone, force=True), authority=Authority.PRUNE_OWNER,
                              prune_owner=row.owner)
                found = provider.read(zone.domain)
                plan = make_plan(Intent(row.owner, (), None), found, pol)
                last = heartbeat_removal(found, row.owner, zone.domain, "stale owner pruned")
                pruned = provider.apply(zone.domain, [*plan.changes, *last], plan.guards)
                if pruned.failed:
                    log.warning("stale owner not pruned: zone=%s owner=%s error=%s", zone.domain, row.owner,
                                "; ".join(why for _, why in pruned.failed))


def fleet_phase(owner: str) -> float:
    """A fraction in [0, 1) from the owner id, uniform over a fleet: where in an interval this
    owner's turn falls (its drift checks, its wake-up after a webhook)."""
    return int.from_bytes(hashlib.sha256(owner.encode()).digest()[:8], "big") / 2 ** 64


VALIDATION_SHARE = 0.5  # the share of an agent's budget its quiet validation passes may take
DRIFT_SHARE = 0.1  # the share of the account's read budget a fleet's drift checks may take


def drift_interval(caps: Capabilities, zone_size: int, fleet: int, base: float) -> float:
    """Seconds between one agent's drift checks of a zone: ``base``, or longer where the fleet's
    whole-zone reads would take more than `DRIFT_SHARE` of the account's read budget (Route53
    at 1,000 clusters and 8,000 record sets: 27 pages each, one check every 15 hours)."""
    per_second = caps.reads_per_minute / 60.0
    if per_second <= 0 or caps.page_size <= 0:
        return base
    pages = max(1, -(-zone_size // caps.page_size))
    return max(base, fleet * pages / (DRIFT_SHARE * per_second))


def _role(remote: bool, zpass: ZonePass) -> pipeline.Role:
    if remote:
        return pipeline.Role.REMOTE
    return pipeline.Role.PRIMARY if zpass.primary is not None else pipeline.Role.DEFAULT


def _groups_verdict(cluster: Cluster, zpass: ZonePass) -> dict[str, object]:
    assert zpass.groups is not None
    records = zpass.intent.records if zpass.intent and not zpass.inactive else ()
    return {"group": cluster.group, "active": not zpass.inactive, "activeGroups": sorted(zpass.groups.active),
            "serial": zpass.groups.serial, "diverged": zpass.groups.diverged, "records": len(records),
            "targets": sum(len(r.values) for r in records if r.type in ("A", "AAAA", "CNAME"))}


def _remember(zpass: ZonePass | None, outcome: ZoneOutcome, remote: bool) -> bool:
    """Keep what this pass wanted, so the next revision reads only what changed, and what the
    validation after it reads again: the groups it wrote and every key whose intent it changed.
    A change pass that found nothing to write (its read already showed the change, or showed
    nothing of a record the new revision drops) may have read a stale answer: the validation
    after it reads those keys again, soon (True), else a record the revision dropped, being in
    no intent any more, would be read again only by the drift check."""
    if zpass is None:
        return False
    plan = outcome.plan
    before = zpass.memory.intent
    ok = not outcome.errors and not outcome.pending_after_apply and not (
        plan is not None and (plan.stalled or (plan.changes and not outcome.applied)))
    if ok and zpass.intent is not None and not zpass.inactive and not remote:
        zpass.memory.intent = zpass.intent.records
    else:
        zpass.memory.intent = None  # next pass plans in full (after a failure, or once active again)
    changed: frozenset[RecordKey] = frozenset()
    if ok and not zpass.validation and not zpass.unchanged and before is not None and zpass.intent is not None:
        changed = frozenset(changed_keys(before, zpass.intent.records))
    if ok and outcome.applied and plan is not None and plan.changes:
        zpass.memory.recheck = frozenset(c.group for c in plan.changes) | changed  # what the validation after it reads
    elif changed and not remote:
        zpass.memory.recheck = changed
        return True
    elif zpass.validation or not ok:
        zpass.memory.recheck = frozenset()
    return False


def _short(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _undo(zpass: ZonePass) -> None:
    """Take back what a failed pass wrote: each change of its plan inverted, under the same
    compare-and-swap (a change that never landed is refused harmlessly), then the views again."""
    plan = zpass.outcome.plan
    if plan is None or not plan.changes or not zpass.can_write:
        return
    inverse = [Change(_INVERSE[c.action], c.new, c.old, c.group, "undo a failed pass") for c in reversed(plan.changes)]
    try:
        result = zpass.provider.apply(zpass.zone.domain, inverse, ())
        log.warning("failed pass undone: zone=%s changes=%d", zpass.zone.domain, len(result.applied))
        render_views(zpass.provider, zpass.zone, zpass.desired.state)
    except Exception as exc:
        log.warning("undo of a failed pass failed: zone=%s error=%s: %s", zpass.zone.domain, type(exc).__name__, exc)


def _error(exc: Exception) -> str:
    """An error for a log line: a gitdns error as it says itself, another with its type."""
    return str(exc) if isinstance(exc, GitdnsError) else f"{type(exc).__name__}: {_short(str(exc))}"


_INVERSE = {Action.CREATE: Action.DELETE, Action.DELETE: Action.CREATE, Action.UPDATE: Action.UPDATE}
