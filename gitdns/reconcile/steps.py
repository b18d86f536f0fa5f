"""The per-zone steps of a cycle, in order, each with one signature (Flux style):

    build → health → plan → guard → apply → verify → render

A step takes the zone's `ZonePass` and returns whether the next step runs.  The cycle
(`gitdns.agent.cycle`) runs fetch → load/validate → these steps for every zone → report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gitdns.core.builder import build_hosts, merge_records
from gitdns.core.delegation import Merged, former_primaries, primaries_records, retire_keys
from gitdns.core.delegation import merge as merge_remotes
from gitdns.core.desired import Desired
from gitdns.core.groups import Decision, decide, gitdns_name, is_active, kuadrant_name, read_zone_groups, relabel
from gitdns.core.healthfilter import HealthResult, apply_health
from gitdns.core.model import Cluster, Zone
from gitdns.core.plan import Authority, Intent, Plan, PlanMode
from gitdns.core.planner import plan as make_plan
from gitdns.core.reads import changed_keys, names_to_read, per_name_is_cheaper
from gitdns.core.records import Action, RecordKey, RecordSet
from gitdns.providers.base import Provider
from gitdns.reconcile.delegation import PrimaryInputs
from gitdns.reconcile.engine import (
    ZoneOutcome,
    apply_with_retries,
    intent_for,
    needs_verify,
    plan_zone,
    policy_for_zone,
    render_views,
    verify,
)


@dataclass(slots=True)
class ZonePass:
    zone: Zone
    desired: Desired  # the desired state in force for this zone (the last good one if held)
    cluster: Cluster
    provider: Provider
    can_write: bool  # the owner lease is held
    outcome: ZoneOutcome
    mode: PlanMode = PlanMode.SYNC
    intent: Intent | None = None
    notes: list[str] = field(default_factory=list)
    last_intent: tuple[RecordSet, ...] | None = None  # what the previous pass wanted
    validation: bool = False  # a validation pass: check every owned name
    owners: tuple[str, ...] = ()  # owner ids git knows (their TXT names are read too)
    zone_size: int = 0  # records seen in the last whole-zone read (the read-cost estimate)
    names: frozenset[str] | None = None  # what this pass reads; None: the whole zone
    always_verify: bool = False  # verify even a clean apply (one-shot runs)
    unhealthy: frozenset[str] = frozenset()  # target ids (host|address) the probes find unhealthy
    frozen: frozenset[str] = frozenset()  # hosts whose withdrawals are frozen
    health: HealthResult | None = None
    withdrawn: dict[RecordKey, RecordSet] = field(default_factory=dict)
    groups: Decision | None = None  # active failover groups (seed 002), None: the zone has none
    inactive: bool = False  # this cluster's group is not active: it publishes nothing
    pruned_serial: int | None = None  # the groups serial inactive groups were last pruned for
    primary: PrimaryInputs | None = None  # primary mode (seed 001): the remotes to publish for
    merged: Merged | None = None  # what the merge step made of them


def build(p: ZonePass) -> bool:
    """The records this cluster owns in the zone (none once git no longer names it)."""
    if p.desired.state.cluster(p.cluster.id) is None:
        p.intent = Intent(p.cluster.id, (), p.desired.state.revision, p.cluster.group)
    else:
        p.intent = intent_for(p.desired, p.cluster, p.zone)
    if p.primary is not None:  # it publishes for every group: its ownership carries none
        p.intent = replace(p.intent, group=None)
    return True


def groups(p: ZonePass) -> bool:
    """Seed 002: mirror the ActiveGroups of git into the zone (never over a higher serial);
    an inactive cluster publishes nothing and only keeps its ownership labels' group right."""
    git = p.desired.state.groups_for_zone(p.zone.name)
    if git is None and not p.cluster.group:
        return True
    names = [kuadrant_name(p.zone.domain), gitdns_name(p.zone.domain)]
    state = read_zone_groups(p.provider.read(p.zone.domain, names), p.zone.domain)
    p.groups = decide(git, state, p.zone.domain)
    p.inactive = not is_active(p.cluster.group, p.groups.active)
    if p.inactive and p.primary is not None:  # its own records go; the remotes are filtered by group
        assert p.intent is not None
        p.intent = replace(p.intent, records=())
        p.inactive = False
    elif p.inactive:
        if p.can_write:
            fixes = relabel(p.provider.read(p.zone.domain), p.cluster.id, p.cluster.group)
            if fixes:
                result = p.provider.apply(p.zone.domain, fixes)
                p.outcome.applied += len(result.applied)
        p.notes.append(f"group {p.cluster.group} is not active in {p.zone.domain}: nothing published")
        p.outcome.plan = Plan(zone=p.zone.domain, owner=p.cluster.id, authority=Authority.OWN,
                              notes=tuple(p.notes))
        return False
    if p.groups.write and p.can_write:
        result = p.provider.apply(p.zone.domain, p.groups.write)
        if result.refused:
            p.notes.append("active groups: the zone changed while mirroring; the next pass re-reads it")
    return True


def prune_inactive(p: ZonePass) -> bool:
    """An active grouped cluster removes the records, targets and ownership TXT of inactive
    groups after its own publish — the planner's explicit authority, exempt from the
    mass-change guard because a reviewed ActiveGroups change caused it."""
    if p.groups is None or not p.cluster.group or not p.groups.active or not p.can_write or p.intent is None:
        return True
    if p.pruned_serial == p.groups.serial and not p.validation:
        return True  # pruned for this serial already; validation passes look again
    policy = replace(policy_for_zone(p.desired, p.zone), authority=Authority.INACTIVE_GROUPS,
                     active_groups=p.groups.active, reviewed=True)
    plan_ = make_plan(p.intent, p.provider.read(p.zone.domain), policy)
    removals = [c for c in plan_.applicable if c.reason.startswith("authority") or (c.key == c.group
                and c.action is Action.DELETE)]
    if plan_.applicable:
        result = p.provider.apply(p.zone.domain, plan_.applicable, plan_.guards)
        p.outcome.applied += len(result.applied)
        if removals:
            p.notes.append(f"removed {len(removals)} change(s) of inactive groups")
        if not result.ok:
            return True
    p.pruned_serial = p.groups.serial
    return True


def health(p: ZonePass) -> bool:
    """Withdraw this cluster's unhealthy targets (gitdns/core/healthfilter.py); nothing to do
    when no probe reports one."""
    if not p.unhealthy or p.intent is None or p.desired.state.cluster(p.cluster.id) is None:
        return True
    hosts = build_hosts(p.desired.state, p.cluster, p.zone)
    result = apply_health(p.intent.records, hosts, p.unhealthy, frozen=p.frozen,
                          weight_zero=p.provider.capabilities.weight_zero_allowed)
    p.health = result
    p.withdrawn = result.withdrawn
    p.intent = replace(p.intent, records=tuple(result.records))
    p.notes.extend(result.notes)
    return True


def merge(p: ZonePass) -> bool:
    """Primary mode: add every accepted remote's records to this cluster's own (seed 001)."""
    if p.primary is None or p.intent is None:
        return True
    inputs = p.primary
    own = p.desired.state.cluster(p.cluster.id)
    active = p.groups.active if p.groups is not None and p.groups.active else None
    previous = p.last_intent or ()
    merged = merge_remotes(own=own, own_records=p.intent.records, state=p.desired.state, zone=p.zone,
                           payloads=inputs.payloads, remotes=inputs.remotes, now=inputs.now,
                           stale_after=inputs.stale_after, default_poll=inputs.default_poll,
                           active=active, previous=previous,
                           weight_zero=p.provider.capabilities.weight_zero_allowed)
    p.merged = merged
    records = merged.records
    if own is not None:  # CoreDNS primaries: apex NS + glue, the parent's delegation (identical on all)
        extra = primaries_records(p.desired.state, p.zone)
        records = merge_records([*records, *extra]) if extra else records
    p.intent = replace(p.intent, records=records)
    p.notes.extend(merged.conflicts)
    _retire_former_primaries(p, previous)
    return True


def _retire_former_primaries(p: ZonePass, previous: tuple[RecordSet, ...]) -> None:
    """Remove the claims of primaries git no longer names from this zone's nameserver records
    (`former_primaries`): looked for when those records change, on a validation pass and
    after a restart, so an idle primary reads nothing."""
    if not p.can_write or p.intent is None or not retire_keys(p.desired.state, p.zone):
        return

    def ns(recs: tuple[RecordSet, ...]) -> set[RecordSet]:
        return {r for r in recs if r.type == "NS"}
    if p.last_intent is not None and not p.validation and ns(previous) == ns(p.intent.records):
        return
    snapshot = p.provider.read(p.zone.domain)
    for owner in former_primaries(p.desired.state, p.zone, snapshot.records, p.cluster.id):
        policy = replace(policy_for_zone(p.desired, p.zone), authority=Authority.PRUNE_OWNER,
                         prune_owner=owner, reviewed=True)
        retire = make_plan(Intent(owner, (), None), p.provider.read(p.zone.domain), policy)
        if retire.changes and not retire.stalled:
            result = p.provider.apply(p.zone.domain, retire.applicable, retire.guards)
            p.outcome.applied += len(result.applied)
            p.notes.append(f"retired the claims of former primary {owner} ({len(result.applied)} change(s))")


def peers(p: ZonePass) -> bool:
    """Primary mode: keep the other primaries' claims equal to this merge, so a primary that
    died does not hold a withdrawn value in the zone (a live one plans the same anyway)."""
    if p.primary is None or not p.primary.peers or not p.can_write or p.intent is None:
        return True
    for peer in p.primary.peers:
        intent = replace(p.intent, owner=peer)
        plan_, _ = plan_zone(p.desired, p.cluster, p.zone, p.provider, mode=p.mode, intent=intent,
                             names=p.names, reviewed=p.primary.reviewed)
        if plan_.changes and not plan_.stalled:
            result = p.provider.apply(p.zone.domain, plan_.applicable, plan_.guards)
            p.outcome.applied += len(result.applied)
    return True


def _fail_open(p: ZonePass) -> bool:
    """A withdrawal that would delete a record outright (no other owner's value or row left)
    is undone: the last published set stays.  Returns True when the intent changed."""
    plan_ = p.outcome.plan
    if plan_ is None or not p.withdrawn or p.intent is None:
        return False
    restore = {c.key for c in plan_.changes
               if c.action is Action.DELETE and c.key == c.group and c.key in p.withdrawn}
    if not restore:
        return False
    records = {r.key: r for r in p.intent.records}
    for key in restore:
        records[key] = p.withdrawn.pop(key)
        if p.health is not None:
            p.health.notes.append(f"{key.name}: every target is unhealthy; the last published set stays "
                                  "(fail open)")
    p.intent = replace(p.intent, records=tuple(records[k] for k in sorted(records)))
    return True


def plan(p: ZonePass) -> bool:
    """Read what the pass needs and plan.  After a new revision only the records whose
    intent changed are read (with every known owner's TXT names for them), when that costs
    fewer calls than a whole-zone read; an unchanged intent reads nothing at all."""
    assert p.intent is not None
    if p.last_intent is not None and not p.validation:
        changed = changed_keys(p.last_intent, p.intent.records)
        if not changed:
            p.notes.append("intent unchanged: nothing read")
            prune_inactive(p)
            return False
        p.names = _cheaper(p, names_to_read(changed, p.owners, p.zone.domain))
    elif p.validation and p.intent.records:
        own = {r.key for r in p.intent.records}
        p.names = _cheaper(p, names_to_read(own, p.owners, p.zone.domain))
    p.outcome.plan, snapshot = plan_zone(p.desired, p.cluster, p.zone, p.provider, mode=p.mode,
                                         intent=p.intent, names=p.names, reviewed=_reviewed(p))
    if _fail_open(p):
        p.outcome.plan, snapshot = plan_zone(p.desired, p.cluster, p.zone, p.provider, mode=p.mode,
                                             intent=p.intent, names=p.names, reviewed=_reviewed(p))
    if p.names is None:
        p.zone_size = len(snapshot.records)
    return True


def _reviewed(p: ZonePass) -> bool:
    return p.primary is not None and p.primary.reviewed


def _cheaper(p: ZonePass, names: frozenset[str]) -> frozenset[str] | None:
    size = p.zone_size or 1_000_000  # unknown size: assume large until a whole read tells
    return names if per_name_is_cheaper(len(names), size, p.provider.capabilities.page_size) else None


def guard(p: ZonePass) -> bool:
    """Write only with the lease held, only a plan that is not stalled, only when needed
    (with nothing of its own to write, an active grouped cluster still prunes inactive groups)."""
    plan_ = p.outcome.plan
    if plan_ is None or not plan_.changes or plan_.stalled:
        if plan_ is not None and not plan_.stalled:
            prune_inactive(p)
            peers(p)
        return False
    if not p.can_write:
        p.notes.append("not written: the owner lease is held by another agent")
        return False
    return True


def apply(p: ZonePass) -> bool:
    apply_with_retries(p.desired, p.cluster, p.zone, p.provider, p.outcome, False, p.mode, intent=p.intent,
                       names=p.names, reviewed=_reviewed(p))
    plan_ = p.outcome.plan
    if plan_ is not None and p.zone_size:  # keep the read-cost estimate in step with what was written
        delta = sum(1 if c.action is Action.CREATE else -1 if c.action is Action.DELETE else 0
                    for c in plan_.changes)
        p.zone_size = max(0, p.zone_size + delta)
    return True


VERIFY_ROUNDS = 3


def verify_step(p: ZonePass) -> bool:
    """Re-read and re-plan.  Changes still wanted (a co-owner wrote in between) are applied
    again at once, a few rounds; what is left is reported as RecordsMissing and retried by
    the validation loop."""
    if not needs_verify(p.outcome, p.always_verify):
        return True
    for _ in range(VERIFY_ROUNDS):
        pending = verify(p.desired, p.cluster, p.zone, p.provider, False, p.mode, p.intent, p.names, _reviewed(p))
        p.outcome.pending_after_apply = pending
        if not pending or not p.can_write:
            break
        p.outcome.plan, _ = plan_zone(p.desired, p.cluster, p.zone, p.provider, mode=p.mode, intent=p.intent,
                                      names=p.names, reviewed=_reviewed(p))
        if p.outcome.plan.stalled:
            break
        apply_with_retries(p.desired, p.cluster, p.zone, p.provider, p.outcome, False, p.mode, intent=p.intent,
                           names=p.names, reviewed=_reviewed(p))
    return True


def render(p: ZonePass) -> bool:
    p.outcome.views = render_views(p.provider, p.zone, p.desired.state)
    return True


ZoneStep = Callable[[ZonePass], bool]
ZONE_STEPS: tuple[tuple[str, ZoneStep], ...] = (
    ("build", build),
    ("groups", groups),
    ("health", health),
    ("merge", merge),
    ("plan", plan),
    ("guard", guard),
    ("apply", apply),
    ("verify", verify_step),
    ("prune-inactive", prune_inactive),
    ("peers", peers),
    ("render", render),
)


def run_zone_steps(p: ZonePass, steps: tuple[tuple[str, ZoneStep], ...] = ZONE_STEPS) -> list[str]:
    """Run the steps until one stops the pass; the names of the steps that ran."""
    ran: list[str] = []
    for name, step in steps:
        ran.append(name)
        if not step(p):
            break
    return ran
