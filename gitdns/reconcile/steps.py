"""The steps of a zone pass.  Each has one signature, ``step(pass) -> Result``, reads and
writes only the `ZonePass`, and never calls another step; `gitdns.reconcile.pipeline` lists
them per role.  Helpers shared by several steps (plan, apply with re-plans, verify) live in
`gitdns.reconcile.engine`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from gitdns.core.builder import build_hosts, merge_records
from gitdns.core.delegation import STATE_MERGED, STATE_PARTIAL, former_primaries, primaries_records, retire_keys
from gitdns.core.delegation import merge as merge_remotes
from gitdns.core.groups import decide, gitdns_name, is_active, kuadrant_name, read_zone_groups, relabel
from gitdns.core.health.filter import apply_health
from gitdns.core.owner.zone import heartbeat_name, owners
from gitdns.core.plan.planner import plan as make_plan
from gitdns.core.plan.values import Authority, Intent, Plan
from gitdns.core.reads import changed_keys, names_to_read, per_name_is_cheaper
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet, ZoneSnapshot, normalize_name
from gitdns.providers.base import ApplyResult, Provider, ZoneInfo
from gitdns.reconcile.delegation import remote_endpoints
from gitdns.reconcile.engine import (
    apply_with_retries,
    intent_for,
    needs_verify,
    plan_zone,
    policy_for_zone,
    ready_to_write,
    refused_names,
    reload_notes,
    render_views,
    verify,
)
from gitdns.reconcile.readset import co_owner_names, key_owners, needs_co_owners, own_names
from gitdns.reconcile.zonepass import Result, ZonePass

VERIFY_ROUNDS = 3


def build(p: ZonePass) -> Result:
    """The records this cluster owns in the zone (none once git no longer names it)."""
    if p.desired.state.cluster(p.cluster.id) is None:
        p.intent = Intent(p.cluster.id, (), p.desired.state.revision, p.cluster.group)
    else:
        p.intent = intent_for(p.desired, p.cluster, p.zone)
    if p.primary is not None:  # it publishes for every group: its ownership carries none
        p.intent = replace(p.intent, group=None)
    return Result.CONTINUE


def groups(p: ZonePass) -> Result:
    """Mirror the ActiveGroups of git into the zone (never over a higher serial); an inactive
    cluster publishes nothing and only keeps its ownership labels' group right."""
    git = p.desired.state.groups_for_zone(p.zone.name)
    if git is None and not p.cluster.group:
        p.memory.groups_watch = False
        return Result.CONTINUE
    names = [kuadrant_name(p.zone.domain), gitdns_name(p.zone.domain)]
    state = read_zone_groups(p.provider.read(p.zone.domain, names), p.zone.domain)
    p.memory.groups_watch, p.memory.groups_seen = True, state.key()
    p.groups = decide(git, state, p.zone.domain)
    p.inactive = not is_active(p.cluster.group, p.groups.active)
    if p.inactive and p.primary is not None:  # its own records go; the remotes are filtered by group
        assert p.intent is not None
        p.intent = replace(p.intent, records=())
        p.inactive = False
    elif p.inactive:
        return _inactive(p)
    if p.groups.write and p.can_write:
        p.memory.groups_seen = None  # the zone changes now: the next check takes a new baseline
        result = p.provider.apply(p.zone.domain, p.groups.write)
        p.outcome.record(result, p.groups.write, "mirroring the active groups")
        if result.refused:
            p.notes.append("active groups: the zone changed while mirroring; the next pass re-reads it")
    return Result.CONTINUE


def _inactive(p: ZonePass) -> Result:
    if p.can_write:
        fixes = relabel(p.provider.read(p.zone.domain), p.cluster.id, p.cluster.group)
        if fixes:
            p.outcome.record(p.provider.apply(p.zone.domain, fixes), fixes, "relabelling its claims as inactive")
    p.notes.append(f"group {p.cluster.group} is not active in {p.zone.domain}: nothing published")
    p.outcome.plan = Plan(zone=p.zone.domain, owner=p.cluster.id, authority=Authority.OWN, notes=tuple(p.notes))
    return Result.DONE


def health(p: ZonePass) -> Result:
    """Withdraw this cluster's unhealthy targets (gitdns/core/health/filter.py); nothing to do
    when no probe reports one."""
    if not p.unhealthy or p.intent is None or p.desired.state.cluster(p.cluster.id) is None:
        return Result.CONTINUE
    hosts = build_hosts(p.desired.state, p.cluster, p.zone)
    result = apply_health(p.intent.records, hosts, p.unhealthy, frozen=p.frozen,
                          weight_zero=p.provider.capabilities.weight_zero_allowed)
    p.health = result
    p.withdrawn = result.withdrawn
    p.intent = replace(p.intent, records=tuple(result.records))
    p.notes.extend(result.notes)
    return Result.CONTINUE


def endpoints(p: ZonePass) -> Result:
    """Remote mode: the records after health go to the status branch for the primaries;
    nothing is read or written here."""
    if p.desired.state.cluster(p.cluster.id) is None:
        p.endpoints = ()  # removed from git: withdraw everything
    else:
        p.endpoints, p.health = remote_endpoints(p.desired, p.cluster, p.zone, p.unhealthy, p.frozen)
    p.outcome.skipped = f"remote mode: {len(p.endpoints)} record set(s) delegated to the primaries"
    return Result.DONE


def merge(p: ZonePass) -> Result:
    """Primary mode: add every accepted remote's records to this cluster's own."""
    if p.primary is None or p.intent is None:
        return Result.CONTINUE
    inputs = p.primary
    own = p.desired.state.cluster(p.cluster.id)
    active = p.groups.active if p.groups is not None and p.groups.active else None
    previous = p.memory.intent or ()
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
    return Result.CONTINUE


def retire_primaries(p: ZonePass) -> Result:
    """Remove the claims of primaries git no longer names from this zone's nameserver records
    (`former_primaries`): looked for when those records change, on a validation pass and
    after a restart, so an idle primary reads nothing."""
    if p.primary is None or not p.can_write or p.intent is None or not retire_keys(p.desired.state, p.zone):
        return Result.CONTINUE

    def ns(recs: tuple[RecordSet, ...]) -> set[RecordSet]:
        return {r for r in recs if r.type == "NS"}
    if p.memory.intent is not None and not p.validation and ns(p.memory.intent) == ns(p.intent.records):
        return Result.CONTINUE
    snapshot = p.provider.read(p.zone.domain)
    for owner in former_primaries(p.desired.state, p.zone, snapshot.records, p.cluster.id):
        policy = replace(policy_for_zone(p.desired, p.zone), authority=Authority.PRUNE_OWNER,
                         prune_owner=owner, reviewed=True)
        retire = make_plan(Intent(owner, (), None), p.provider.read(p.zone.domain), policy)
        if retire.changes and not retire.stalled:
            result = p.provider.apply(p.zone.domain, retire.applicable, retire.guards)
            p.outcome.record(result, retire.applicable, f"retiring former primary {owner}")
            p.notes.append(f"retired the claims of former primary {owner} ({len(result.applied)} change(s))")
    return Result.CONTINUE


def plan(p: ZonePass) -> Result:
    """Read what the pass needs and plan.  After a new revision only the keys whose intent
    changed are looked at; on a validation pass (not a drift check) and on the first pass of an
    agent that never applied a revision, every key of its intent.  Those keys are read by name
    when that costs fewer calls than a whole-zone read: its own names first, its co-owners'
    ownership TXT names only when the plan needs them (`gitdns.reconcile.readset`).  An
    unchanged intent reads nothing at all.  The validation pass that follows a write looks at
    the groups that write changed (`ZoneMemory.recheck`), not at every key: a fleet's
    validations after a fleet-wide change cost what the change touched (the quiet validations
    and the drift check look at everything)."""
    assert p.intent is not None
    keys: set[RecordKey] | None = None
    if p.memory.intent is not None and not p.validation:
        keys = changed_keys(p.memory.intent, p.intent.records)
        if not keys:
            p.notes.append("intent unchanged: nothing read")
            p.unchanged = True
            return Result.CONTINUE
    elif p.validation and not p.drift and p.memory.recheck and p.memory.intent == p.intent.records:
        keys, p.rechecked = set(p.memory.recheck), True
    elif p.intent.records and (_by_names_first(p) or (p.validation and not p.drift) or _after_failure(p)):
        keys = {r.key for r in p.intent.records}
    if keys is not None:
        keys |= set(p.withdrawn)  # withdrawn by health: read, so fail-open can keep the last path
    index = key_owners(p.desired.state, p.zone) if keys is not None and p.primary is None else None
    if keys is not None and index is None:
        p.names = _cheaper(p, names_to_read(keys, p.owners, p.zone.domain))
    elif keys is not None and index is not None:
        p.names = _cheaper(p, own_names(keys, p.cluster.id, p.zone.domain, index), index.records)
    if p.can_write and (not p.validation or _after_failure(p)):
        ready_to_write(p.provider, p.zone.domain, p.names)  # a plan meant to be written: read just before
    p.outcome.plan, snapshot = _plan(p)
    if keys is not None and index is not None and p.names is not None and needs_co_owners(
            p.outcome.plan, snapshot, keys, index, p.cluster.id):
        first = snapshot
        p.names = _cheaper(p, co_owner_names(keys, index, p.cluster.id, p.zone.domain), index.records)
        p.outcome.plan, snapshot = _plan(p, known=first if p.names is not None else None)
    if _fail_open(p):
        p.outcome.plan, snapshot = _plan(p)
    if p.names is None:
        p.memory.zone_size = len(snapshot.records)
    return Result.CONTINUE


def _by_names_first(p: ZonePass) -> bool:
    """The first pass of an agent that never applied a revision: it holds nothing but what its
    intent names (leftovers elsewhere are the drift check's)."""
    return p.first_by_names and p.primary is None and p.memory.intent is None and p.memory.last is None


def _after_failure(p: ZonePass) -> bool:
    """A pass after a failed one (nothing remembered, the last outcome kept) looks at every key
    of its intent by name, as a validation does, not at the whole zone (at a thousand clusters
    27 pages at one request per 250 s); leftovers elsewhere are the drift check's."""
    return p.primary is None and p.memory.intent is None and p.memory.last is not None and not p.drift


def _plan(p: ZonePass, known: ZoneSnapshot | None = None) -> tuple[Plan, ZoneSnapshot]:
    """Read and plan; with ``known`` (step 1's read by name), only the names it did not read
    are read, and it supplies the rest: step 2 costs its co-owners' TXT names, not step 1's
    names again (at a thousand clusters, one request per 250 s each)."""
    provider = p.provider if known is None else TopUp(p.provider, known)
    return plan_zone(p.desired, p.cluster, p.zone, provider, force=p.force, mode=p.mode, intent=p.intent,
                     names=p.names, reviewed=p.reviewed)


class TopUp:
    """A provider whose reads by name read only what ``known`` did not, merged with it."""

    def __init__(self, inner: Provider, known: ZoneSnapshot) -> None:
        self.inner, self.known = inner, known
        self.name, self.capabilities = inner.name, inner.capabilities

    def zones(self) -> list[ZoneInfo]:
        return self.inner.zones()

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        return self.inner.apply(zone, changes, guards)

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        had = self.known.names
        if names is None or had is None:
            return self.inner.read(zone, names) if names is not None else self.inner.read(zone)
        wanted = frozenset(normalize_name(n) for n in names)
        rest = sorted(wanted - had)
        fresh = self.inner.read(zone, rest) if rest else ZoneSnapshot(self.known.zone, (), names=frozenset())
        kept = tuple(r for r in self.known.records if r.name in wanted)
        return ZoneSnapshot(zone=self.known.zone, records=kept + fresh.records,
                            complete=self.known.complete and fresh.complete, version="", names=wanted)


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
            p.health.notes.append(f"{key.name}: every target is unhealthy; kept until every agent's probes "
                                  "agree (fail open)")
    p.intent = replace(p.intent, records=tuple(records[k] for k in sorted(records)))
    return True


def _cheaper(p: ZonePass, names: frozenset[str], foretold: int = 0) -> frozenset[str] | None:
    # unknown size: what git foretells, else assume large until a whole read tells
    size = p.memory.zone_size or foretold or 1_000_000
    caps = p.provider.capabilities
    return names if per_name_is_cheaper(len(names), size, caps.page_size, caps.name_read_cost) else None


def guard(p: ZonePass) -> Result:
    """Write only a plan that is not stalled, and only with the owner lease held."""
    plan_ = p.outcome.plan
    if plan_ is not None and plan_.stalled:
        return Result.STALLED
    if plan_ is not None and plan_.changes and not p.can_write:
        p.notes.append("not written: the owner lease is held by another agent")
        return Result.HELD
    return Result.CONTINUE


def apply(p: ZonePass) -> Result:
    """Apply the plan; a change group refused as stale is re-read and re-planned at once."""
    plan_ = p.outcome.plan
    if p.unchanged or plan_ is None or not plan_.changes:
        return Result.CONTINUE
    first = plan_
    p.attempted = frozenset(c.group for c in first.changes)
    apply_with_retries(p.desired, p.cluster, p.zone, p.provider, p.outcome, p.force, p.mode, intent=p.intent,
                       names=p.names, reviewed=p.reviewed, pacing=p.pacing)
    if p.outcome.refused_retries == 0:
        p.outcome.plan = first
    if p.memory.zone_size:  # keep the read-cost estimate in step with what was written
        delta = sum(1 if c.action is Action.CREATE else -1 if c.action is Action.DELETE else 0
                    for c in first.changes)
        p.memory.zone_size = max(0, p.memory.zone_size + delta)
    return Result.CONTINUE


def verify_step(p: ZonePass) -> Result:
    """Re-read and re-plan.  Changes still wanted (a co-owner wrote in between) are applied
    again at once, a few rounds; what is left is reported as RecordsMissing and retried by
    the validation loop.  A group the provider failed is not wanted again here: its error
    reports it, and writing it again in the same pass would only be refused again.  A pass
    that read by name verifies the groups it wrote (their names and their ownership TXT), not
    every name it read: the rest it did not touch."""
    plan_ = p.outcome.plan
    if p.unchanged or plan_ is None or not plan_.changes or not needs_verify(p.outcome, p.always_verify):
        return Result.CONTINUE
    names = refused_names(p.attempted, p.names) if p.attempted else p.names
    for _ in range(VERIFY_ROUNDS):
        pending = verify(p.desired, p.cluster, p.zone, p.provider, p.force, p.mode, p.intent, names, p.reviewed,
                         failed=p.outcome.failed_groups)
        p.outcome.pending_after_apply = pending
        if not pending or not p.can_write:
            break
        p.outcome.plan, _ = plan_zone(p.desired, p.cluster, p.zone, p.provider, force=p.force, mode=p.mode,
                                      intent=p.intent, names=names, reviewed=p.reviewed)
        if p.outcome.plan.stalled:
            break
        apply_with_retries(p.desired, p.cluster, p.zone, p.provider, p.outcome, p.force, p.mode, intent=p.intent,
                           names=names, reviewed=p.reviewed, pacing=p.pacing)
    return Result.CONTINUE


def prune_inactive(p: ZonePass) -> Result:
    """An active grouped cluster removes the records, targets and ownership TXT of inactive
    groups after its own publish — the planner's explicit authority, exempt from the
    mass-change guard because a reviewed ActiveGroups change caused it."""
    if p.groups is None or not p.cluster.group or not p.groups.active or not p.can_write or p.intent is None:
        return Result.CONTINUE
    if p.memory.pruned_serial == p.groups.serial and not p.validation:
        return Result.CONTINUE  # pruned for this serial already; validation passes look again
    policy = replace(policy_for_zone(p.desired, p.zone), authority=Authority.INACTIVE_GROUPS,
                     active_groups=p.groups.active, reviewed=True)
    plan_ = make_plan(p.intent, p.provider.read(p.zone.domain), policy)
    later = joining(p, plan_)
    if later:
        p.notes.append(f"kept {len(later)} record(s) of inactive groups until the active cluster that builds "
                       "each claims it")
    failed = p.outcome.failed_groups | later  # not sent in this pass
    changes = [c for c in plan_.applicable if c.group not in failed]
    removals = [c for c in changes if c.reason.startswith("authority") or (c.key == c.group
                and c.action is Action.DELETE)]
    if changes:
        result = p.provider.apply(p.zone.domain, changes, [g for g in plan_.guards if g.group not in failed])
        p.outcome.record(result, changes, "removing inactive groups")
        if removals:
            p.notes.append(f"removed {len(removals)} change(s) of inactive groups")
        if not result.ok:
            return Result.CONTINUE
    p.memory.pruned_serial = p.groups.serial
    return Result.CONTINUE


def joining(p: ZonePass, plan_: Plan) -> frozenset[RecordKey]:
    """Records the inactive groups' pruning would delete (no active claim seen) though an
    active cluster git names builds them: that cluster is about to claim it, and deleting it
    now would leave its claim without its record (Route53 cannot make the delete conditional
    on that claim's absence).  Left for a later pass, once the joiner's claim is there."""
    assert p.groups is not None
    deletes = {c.group for c in plan_.applicable if c.key == c.group and c.action is Action.DELETE}
    if not deletes:
        return frozenset()
    index = key_owners(p.desired.state, p.zone)
    if index is None:
        return frozenset()
    active = {c.id for c in p.desired.state.clusters if is_active(c.group, p.groups.active)}
    return frozenset(k for k in deletes if index.by_key.get(k, frozenset()) & active)


def peers(p: ZonePass) -> Result:
    """Primary mode: keep the other primaries' claims equal to this merge, so a primary that
    died does not hold a withdrawn value in the zone (a live one plans the same anyway)."""
    if p.unchanged or p.primary is None or not p.primary.peers or not p.can_write or p.intent is None:
        return Result.CONTINUE
    for peer in p.primary.peers:
        intent = replace(p.intent, owner=peer)
        plan_, _ = plan_zone(p.desired, p.cluster, p.zone, p.provider, mode=p.mode, intent=intent,
                             names=p.names, reviewed=p.reviewed)
        if plan_.changes and not plan_.stalled:
            result = p.provider.apply(p.zone.domain, plan_.applicable, plan_.guards)
            p.outcome.record(result, plan_.applicable, f"keeping peer primary {peer}'s claims")
    return Result.CONTINUE


def clean_remote_claims(p: ZonePass) -> Result:
    """Primary mode: a cluster that published in ``default`` mode and then became a remote
    left its own ownership claims in the zone.  Once this primary publishes its records (the
    remote is merged), those claims and its heartbeat are removed, so a value the remote later
    withdraws does not stay alive under its old claim.  Looked at once per set of merged remotes."""
    if p.primary is None or p.merged is None or not p.can_write or p.outcome.errors:
        return Result.CONTINUE
    merged = frozenset(v.cluster_id for v in p.merged.verdicts if v.state in (STATE_MERGED, STATE_PARTIAL))
    if not merged or p.memory.cleaned == merged:
        return Result.CONTINUE
    snapshot = p.provider.read(p.zone.domain)
    ok = True
    for remote in sorted(merged & {row.owner for row in owners(snapshot, ())}):
        pol = replace(policy_for_zone(p.desired, p.zone, force=True), authority=Authority.PRUNE_OWNER,
                      prune_owner=remote)
        plan_ = make_plan(Intent(remote, (), None), snapshot, pol)
        beat = next((r for r in snapshot.records if r.name == heartbeat_name(remote, p.zone.domain)), None)
        changes = [*plan_.changes, *([Change(Action.DELETE, beat, None, beat.key)] if beat else [])]
        result = p.provider.apply(p.zone.domain, changes, plan_.guards)
        ok = p.outcome.record(result, changes, f"removing the old claims of {remote}") and ok
        p.notes.append(f"removed the old claims of {remote}, now a remote ({len(result.applied)} change(s))")
        snapshot = p.provider.read(p.zone.domain)
    if ok:
        p.memory.cleaned = merged
    return Result.CONTINUE


def render(p: ZonePass) -> Result:
    """Master files per geo view for stores served through them (`local`), after every pass,
    so the views always follow the store."""
    p.outcome.views = render_views(p.provider, p.zone, p.desired.state)
    p.outcome.reloads = reload_notes(p.provider, p.zone)  # the server told to load them (--local-reload)
    return Result.CONTINUE
