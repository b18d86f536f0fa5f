"""The pure planner: ``plan(intent, observed, policy) -> Plan`` (the ownership and merge rules
of docs/records.md; a change group is written with a compare-and-swap, see the provider
protocol in docs/architecture.md).

Ownership is by `RecordKey`; several owners may own one key, each with its own TXT.
Multi-value records without a set identifier publish the union of every owner's
targets; other records (CNAMEs, weighted and geo rows) hold one content that owners must
agree on — on disagreement the owner on the older revision yields, and two owners on the
same revision (or a foreign owner) are a conflict reported as data.  A row is deleted only
when no owner is left.  Changes come out grouped by data record: TXT written before its
data, data deleted before its TXT.

Who wins is decided in `gitdns.core.plan.resolve`, this owner's ownership TXT are written by
`gitdns.core.plan.txt`, and the state of one plan is a `gitdns.core.plan.context.PlanContext`.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from gitdns.core import names
from gitdns.core.plan.context import Observed, PlanContext, claimed, removed_by_authority, stale_claim
from gitdns.core.plan.resolve import find_strategy_conflicts, resolve_single, resolve_union, type_conflict
from gitdns.core.plan.txt import announce, emit, leave_guards, my_txt, stay_guards, txt_taken
from gitdns.core.plan.values import Intent, Plan, PlanMode, PlanPolicy
from gitdns.core.records import MULTI_VALUE_TYPES, Action, Change, RecordKey, RecordSet, ZoneSnapshot, in_zone
from gitdns.core.registry import OwnershipEntry, add_entry, decode_entries
from gitdns.core.safety import judge_mass_change


def decode_zone(snapshot: ZoneSnapshot) -> Observed:
    obs = Observed(complete=snapshot.complete)
    zone = snapshot.zone
    names: dict[str, set[RecordKey]] = {}
    for rec in snapshot.records:  # an ownership TXT outside the zone (a store another writer filled) is none
        entries = decode_entries(rec) if rec.type == "TXT" and (not zone or in_zone(rec.name, zone)) else ()
        if not entries:
            key = rec.key
            obs.data[key] = rec
            names.setdefault(rec.name, set()).add(key)
        for entry in entries:
            add_entry(obs.owners, entry)
    for key in obs.owners:
        names.setdefault(key.name, set()).add(key)
    while names:  # tuples (a set of one key is ~4 times its size), each set freed as its tuple is made
        name, keys = names.popitem()
        obs.by_name[name] = tuple(keys)
    return obs


def _is_shared_union(key: RecordKey) -> bool:
    return key.type in MULTI_VALUE_TYPES and not key.set_id


def _plan_key(ctx: PlanContext, key: RecordKey) -> None:
    me = ctx.intent.owner
    entries = ctx.obs.owners.get(key, {})
    mine = entries.get(me)
    others = {o: e for o, e in entries.items()
              if o != me and not removed_by_authority(ctx, e) and not stale_claim(ctx, e)}
    removed = [e for o, e in entries.items() if o != me and removed_by_authority(ctx, e)]
    switched = any(stale_claim(ctx, e) for e in entries.values())  # the old top of a switch
    want = ctx.desired.get(key)
    current = ctx.obs.data.get(key)
    ctx.final[key] = current
    ctx.final_owners[key] = tuple(entries)
    if names.root_host_of(key.name) in ctx.frozen_hosts:
        return
    if want is not None and current is not None and not entries and ctx.policy.registry:
        ctx.conflict(key, "ForeignRecordInTheWay",
                     f"{key} exists without an ownership record; `gitdns adopt` takes it over")
        return
    if want is not None and type_conflict(ctx, key):
        if key.type != "CNAME":
            announce(ctx, key, want, mine)  # A/AAAA win: claim the name, wait for the CNAME to go
            return
        if mine is None:
            return
        want = None  # A/AAAA win: withdraw our CNAME
    if want is None and mine is None and not removed and not switched:
        return
    if not _mode_allows(ctx.policy.mode, want, current):
        return
    new = _new_content(ctx, key, want, others, mine, current)
    if new is _SKIP:
        return
    assert not isinstance(new, _Skip)
    if new == current:
        new = current  # keep the record read rather than an equal copy (one per record of a zone)
    txt = my_txt(ctx, key, new, want)
    if txt is not None and txt_taken(ctx, key, txt):
        return
    if new is None and current is not None:
        leave_guards(ctx, key, entries)
    elif want is None and mine is not None and not mine.joint and new is not None and others:
        stay_guards(ctx, key, others)
    emit(ctx, key, current, new, txt, removed)
    ctx.final[key] = new
    ctx.final_owners[key] = tuple(others) + ((me,) if want is not None else ())


class _Skip:
    pass


_SKIP = _Skip()


def _mode_allows(mode: PlanMode, want: RecordSet | None, current: RecordSet | None) -> bool:
    if mode is PlanMode.CREATE_ONLY:
        return want is not None and current is None
    if mode is PlanMode.UPSERT_ONLY:
        return want is not None
    return True


def _new_content(ctx: PlanContext, key: RecordKey, want: RecordSet | None,
                 others: dict[str, OwnershipEntry], mine: OwnershipEntry | None,
                 current: RecordSet | None) -> RecordSet | _Skip | None:
    """The record's content after this plan: None deletes it, _SKIP leaves it alone."""
    if _is_shared_union(key):
        my_prev: tuple[str, ...]
        if mine is not None and mine.joint:
            # a joint legacy TXT is not this owner's to change: its claim on the whole record
            # stands for every owner it names (dns-operator never rewrites it)
            others, my_prev = {**others, mine.owner: mine}, ()
        else:
            my_prev = claimed(mine, current) if mine is not None else ()
        new = resolve_union(ctx, key, want, others, my_prev)
        if new is not None and ctx.policy.mode is PlanMode.UPSERT_ONLY and current is not None:
            new = new.with_values(set(new.values) | set(current.values))
        return new
    if want is not None:
        resolved = resolve_single(ctx, key, want, others)
        return _SKIP if resolved is None else resolved
    return current if others else None


def _dead_ends(ctx: PlanContext) -> list[RecordKey]:
    """CNAMEs inside a root host's klb tree pointing at names with no records left, in the
    root hosts this owner touches."""
    live_names: set[str] = {k.name for k, v in ctx.final.items() if v is not None}
    live_names |= {k.name for k in ctx.obs.data if k not in ctx.final}
    hosts = {names.root_host_of(k.name) for k in ctx.final}
    dead: list[RecordKey] = []
    for key in _cnames_in(ctx, hosts):
        rec = ctx.final[key] if key in ctx.final else ctx.obs.data.get(key)
        if rec is None or not rec.values:
            continue
        target = rec.values[0]
        if target in live_names or not in_zone(target, ctx.policy.zone):
            continue
        if ctx.read_names is not None and target not in ctx.read_names:
            continue  # not read: unknown, not dead
        if names.root_host_of(target) != names.root_host_of(key.name) or target == key.name:
            continue
        if names.KLB not in target.split("."):
            continue
        dead.append(key)
    return dead


def _cnames_in(ctx: PlanContext, hosts: set[str]) -> list[RecordKey]:
    keys = {k for k in ctx.final if k.type == "CNAME"}
    keys |= {k for k in ctx.obs.data if k.type == "CNAME" and names.root_host_of(k.name) in hosts}
    return sorted(keys)


def _prune_dead_ends(ctx: PlanContext) -> None:
    """Withdraw this owner's CNAMEs that lead nowhere, until none remain (Kuadrant's
    Distributed DNS Load Balancing RFC)."""
    for _ in range(6):
        dead = _dead_ends(ctx)
        mine = [k for k in dead if ctx.intent.owner in ctx.final_owners.get(k, ())
                and ctx.desired.get(k) is not None]
        if not mine:
            break
        for key in mine:
            ctx.desired.pop(key, None)
            ctx.changes = [c for c in ctx.changes if c.group != key]
            ctx.notes.append(f"{key}: withdrawn, its target leads nowhere (dead end)")
            _plan_key(ctx, key)
    for key in _dead_ends(ctx):
        if ctx.intent.owner not in ctx.final_owners.get(key, ()):
            rec = ctx.final.get(key, ctx.obs.data.get(key))
            target = rec.values[0] if rec else "?"
            owners = ctx.final_owners.get(key, tuple(ctx.obs.owners.get(key, {})))
            ctx.conflict(key, "DeadEndCNAME", f"{key} points at {target}, which nobody publishes", owners)


def _order(changes: list[Change], switching: AbstractSet[str] = frozenset()) -> tuple[Change, ...]:
    """Groups that only delete go first (a CNAME must leave before an A can arrive).  In a host
    switching strategy, make-before-break: the new layout's records first, then the host's
    top record (the old one deleted, the new one written), then the old layout withdrawn."""
    groups: dict[RecordKey, list[Change]] = {}
    for change in changes:
        groups.setdefault(change.group, []).append(change)

    def rank(key: RecordKey, group: list[Change]) -> int:
        deleting = all(c.action is Action.DELETE for c in group)
        if names.root_host_of(key.name) not in switching:
            return 0 if deleting else 1
        if names.root_host_of(key.name) != names.lb_host(key.name):
            return 4 if deleting else 1  # the layout below the host (klb names)
        return 2 if deleting else 3  # the host's top record
    ordered = sorted(groups.items(), key=lambda item: rank(*item))  # stable: plan order kept
    return tuple(c for _, g in ordered for c in g)


def _keys_to_plan(ctx: PlanContext) -> list[RecordKey]:
    keys = set(ctx.desired)
    for key, entries in ctx.obs.owners.items():
        if ctx.intent.owner in entries or any(removed_by_authority(ctx, e) or stale_claim(ctx, e)
                                              for e in entries.values()):
            keys.add(key)
    return sorted(keys)


def plan(intent: Intent, observed: ZoneSnapshot, policy: PlanPolicy) -> Plan:
    """Plan the writes that bring ``intent.owner``'s part of the zone to ``intent``."""
    obs = decode_zone(observed)
    desired = {r.key: r for r in intent.records}
    if observed.names is not None:  # a per-name read: plan only what was read
        desired = {k: r for k, r in desired.items() if k.name in observed.names}
    ctx = PlanContext(intent, policy, obs, desired, read_names=observed.names)
    find_strategy_conflicts(ctx)
    for key in _keys_to_plan(ctx):
        _plan_key(ctx, key)
    _prune_dead_ends(ctx)
    if not obs.complete:
        dropped = [c for c in ctx.changes if c.action is Action.DELETE]
        if dropped:
            ctx.notes.append(f"the read was partial: {len(dropped)} delete(s) withheld")
            ctx.changes = [c for c in ctx.changes if c.action is not Action.DELETE]
    managed = sum(1 for k, e in obs.owners.items() if intent.owner in e and k in obs.data)
    changes = _order(ctx.changes, ctx.switching)
    stalled, note = judge_mass_change(changes, managed, policy)
    if note:
        ctx.notes.append(note)
    return Plan(
        zone=policy.zone, owner=intent.owner, authority=policy.authority, changes=changes,
        guards=tuple(g for g in ctx.guards if any(c.group == g.group for c in changes)),
        conflicts=tuple(ctx.conflicts), notes=tuple(ctx.notes), managed=managed,
        stalled=stalled, revision=intent.revision,
    )
