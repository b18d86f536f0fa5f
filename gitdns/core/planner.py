"""The pure planner: ``plan(intent, observed, policy) -> Plan`` (ARCHITECTURE.md §4, §5).

Ownership is by `RecordKey`; several owners may own one key, each with its own TXT.
Multi-value records without a set identifier publish the union of every owner's
targets; other records (CNAMEs, weighted and geo rows) hold one content that owners must
agree on — on disagreement the owner on the older revision yields, and two owners on the
same revision (or a foreign owner) are a conflict reported as data.  A row is deleted only
when no owner is left.  Changes come out grouped by data record: TXT written before its
data, data deleted before its TXT.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from gitdns.core import names
from gitdns.core.model import Revision
from gitdns.core.plan import Authority, Conflict, Intent, Plan, PlanMode, PlanPolicy
from gitdns.core.records import (
    MULTI_VALUE_TYPES,
    Action,
    Change,
    Guard,
    RecordKey,
    RecordSet,
    ZoneSnapshot,
    in_zone,
)
from gitdns.core.registry import (
    OwnerLabels,
    OwnershipEntry,
    decode,
    decode_entry,
    ownership_record,
    txt_name,
)
from gitdns.core.safety import judge_mass_change

_SIMPLE = "simple"
_LB = "loadbalanced"


@dataclass(slots=True)
class Observed:
    """The decoded zone: data records, and ownership entries by data key."""

    data: dict[RecordKey, RecordSet] = field(default_factory=dict)
    owners: dict[RecordKey, dict[str, OwnershipEntry]] = field(default_factory=dict)
    by_name: dict[str, set[RecordKey]] = field(default_factory=dict)
    complete: bool = True


def decode_zone(snapshot: ZoneSnapshot) -> Observed:
    obs = Observed(complete=snapshot.complete)
    for rec in snapshot.records:
        entry = decode_entry(rec) if rec.type == "TXT" else None
        if entry is None:
            key = rec.key
            obs.data[key] = rec
            obs.by_name.setdefault(rec.name, set()).add(key)
        else:
            obs.owners.setdefault(entry.key, {})[entry.owner] = entry
    for key in obs.owners:
        obs.by_name.setdefault(key.name, set()).add(key)
    return obs


def _is_shared_union(key: RecordKey) -> bool:
    return key.type in MULTI_VALUE_TYPES and not key.set_id


def claimed(entry: OwnershipEntry, current: RecordSet | None) -> tuple[str, ...]:
    """The values an owner claims: its per-target label, else the record's values."""
    if entry.labels.targets is not None:
        return entry.labels.targets
    return current.values if current is not None else ()


def _revision_of(entry: OwnershipEntry) -> Revision | None:
    return Revision.parse(entry.labels.rev) if entry.labels.rev else None


@dataclass(slots=True)
class _Ctx:
    intent: Intent
    policy: PlanPolicy
    obs: Observed
    desired: dict[RecordKey, RecordSet]
    changes: list[Change] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    frozen_hosts: set[str] = field(default_factory=set)
    read_names: frozenset[str] | None = None  # a per-name read: only these names are known
    final: dict[RecordKey, RecordSet | None] = field(default_factory=dict)
    final_owners: dict[RecordKey, tuple[str, ...]] = field(default_factory=dict)  # tuples: one per key planned

    def conflict(self, key: RecordKey, reason: str, message: str, owners: Iterable[str] = ()) -> None:
        self.conflicts.append(Conflict(key, reason, message, tuple(sorted(owners))))


def _removed_by_authority(ctx: _Ctx, entry: OwnershipEntry) -> bool:
    policy = ctx.policy
    if entry.owner == ctx.intent.owner:
        return False
    if policy.authority is Authority.PRUNE_OWNER:
        return entry.owner == policy.prune_owner
    if policy.authority is Authority.INACTIVE_GROUPS:
        group = entry.labels.group  # an empty active set means every group is active
        return bool(group) and bool(policy.active_groups) and group not in policy.active_groups
    return False


def _host_strategy(key: RecordKey, values: tuple[str, ...]) -> str | None:
    """The strategy a record at a listener host reveals, if it is the host's top record."""
    if key.set_id or names.root_host_of(key.name) != names.lb_host(key.name):
        return None
    if key.type == "CNAME":
        return _LB if values and values[0] == names.klb_name(key.name) else _SIMPLE
    if key.type in ("A", "AAAA"):
        return _SIMPLE
    return None


def _find_strategy_conflicts(ctx: _Ctx) -> None:
    """Freeze hosts where another owner publishes the other strategy (§4)."""
    mine: dict[str, str] = {}
    for key, rec in ctx.desired.items():
        strategy = _host_strategy(key, rec.values)
        if strategy:
            mine[rec.name] = strategy
    for host, strategy in mine.items():
        for key in ctx.obs.by_name.get(host, ()):
            for owner, entry in ctx.obs.owners.get(key, {}).items():
                if owner == ctx.intent.owner or _removed_by_authority(ctx, entry):
                    continue
                theirs = _host_strategy(key, claimed(entry, ctx.obs.data.get(key)))
                if theirs and theirs != strategy:
                    ctx.frozen_hosts.add(names.root_host_of(host))
                    ctx.conflict(key, "ConflictingStrategyDiscovered",
                                 f"{host}: owner {owner} publishes the {theirs} strategy, this owner "
                                 f"wants {strategy}; the existing records are kept until every "
                                 "policy for the host agrees", [owner])


def _type_conflict(ctx: _Ctx, key: RecordKey) -> bool:
    """CNAME and other types cannot share a name; A/AAAA win over CNAME (as Kuadrant)."""
    for other in ctx.obs.by_name.get(key.name, ()):
        if other.type == key.type or (key.type != "CNAME" and other.type != "CNAME"):
            continue
        owners = {o for o, e in ctx.obs.owners.get(other, {}).items()
                  if o != ctx.intent.owner and not _removed_by_authority(ctx, e)}
        mine_only = ctx.intent.owner in ctx.obs.owners.get(other, {}) and not owners
        if mine_only or (other not in ctx.obs.data and not owners):
            continue
        if not owners:
            ctx.conflict(key, "ForeignRecordInTheWay",
                         f"{other} exists without an ownership record; `gitdns adopt` takes it over")
            return True
        winner = "the A/AAAA records win" if key.type == "CNAME" else "waiting for the CNAME owners"
        ctx.conflict(key, "RecordTypeConflict",
                     f"{key.name}: {key.type} wanted but {other.type} is owned by others ({winner})",
                     owners)
        return True
    return False


def _content_differs(a: RecordSet, b: RecordSet) -> bool:
    return a.values != b.values or not a.same_routing(b)


def _resolve_single(ctx: _Ctx, key: RecordKey, want: RecordSet,
                    others: dict[str, OwnershipEntry]) -> RecordSet | None:
    """One content for CNAMEs and routed rows: git decides between gitdns owners."""
    current = ctx.obs.data.get(key)
    disagree = {o: e for o, e in others.items()
                if claimed(e, current) != want.values
                or (current is not None and not current.same_routing(want))}
    if not disagree or current is None:
        return want
    mine = ctx.intent.revision
    newer = [o for o, e in disagree.items()
             if (r := _revision_of(e)) is not None and mine is not None and r > mine]
    if newer:
        ctx.conflict(key, "NewerRevisionSeen",
                     f"{key}: owner(s) on a newer revision publish other content; yielding", newer)
        return None
    same = [o for o, e in disagree.items()
            if (r := _revision_of(e)) is None or mine is None or r == mine]
    if same and _content_differs(current, want):
        ctx.conflict(key, "ConflictingValues",
                     f"{key}: wanted {want.describe()}, owner(s) {', '.join(sorted(same))} "
                     f"publish {current.describe()}", same)
        return None
    return want


def _resolve_union(ctx: _Ctx, key: RecordKey, want: RecordSet | None,
                   others: dict[str, OwnershipEntry], my_prev: tuple[str, ...]) -> RecordSet | None:
    """The union of every remaining owner's values (multi-value records)."""
    current = ctx.obs.data.get(key)
    values: set[str] = set(want.values) if want is not None else set()
    drop = set(my_prev) - values
    for entry in others.values():
        claim = set(claimed(entry, current))
        if entry.labels.targets is None:
            claim -= drop
        values |= claim
    if not values:
        return None
    base = want if want is not None else current
    assert base is not None
    ttl = base.ttl
    if want is not None and current is not None and current.ttl != want.ttl and others:
        revs = [_revision_of(e) for e in others.values()]
        mine = ctx.intent.revision
        if any(r is not None and mine is not None and r > mine for r in revs):
            ttl = current.ttl
        elif any(r is None or mine is None or r == mine for r in revs):
            ttl = current.ttl
            ctx.conflict(key, "ConflictingValues",
                         f"{key}: TTL {want.ttl} wanted, co-owners on the same revision keep "
                         f"{current.ttl}", others)
    return base.with_values(values) if base.ttl == ttl else RecordSet(
        base.name, base.type, ttl, tuple(values), base.set_id, base.weight, base.geo)


def _labels(ctx: _Ctx, data: RecordSet) -> OwnerLabels:
    rev = ctx.intent.revision.label if ctx.intent.revision else None
    return OwnerLabels(owner=ctx.intent.owner, group=ctx.intent.group, rev=rev, targets=data.values)


def _emit(ctx: _Ctx, key: RecordKey, current: RecordSet | None, new: RecordSet | None,
          my_txt_new: RecordSet | None, drop_entries: list[OwnershipEntry]) -> None:
    """Changes for one group: TXT before data on write, data before TXT on delete."""
    mine = ctx.obs.owners.get(key, {}).get(ctx.intent.owner)
    old_txt = mine.txt if mine is not None else None
    out: list[Change] = []
    if my_txt_new is not None and old_txt is not None and _same_but_rev(old_txt, my_txt_new):
        my_txt_new = old_txt
    if my_txt_new is not None and old_txt != my_txt_new:
        if old_txt is not None and old_txt.key != my_txt_new.key:
            out.append(Change(Action.CREATE, None, my_txt_new, key))
            drop_entries = [*drop_entries, mine] if mine is not None else drop_entries
        else:
            action = Action.CREATE if old_txt is None else Action.UPDATE
            out.append(Change(action, old_txt, my_txt_new, key))
    if new is not None and (current is None or current != new):
        out.append(Change(Action.CREATE if current is None else Action.UPDATE, current, new, key))
    elif new is None and current is not None:
        out.append(Change(Action.DELETE, current, None, key))
    if my_txt_new is None and old_txt is not None:
        out.append(Change(Action.DELETE, old_txt, None, key))
    for entry in drop_entries:
        out.append(Change(Action.DELETE, entry.txt, None, key, reason=f"authority: {entry.owner}"))
    ctx.changes.extend(out)


_REV = re.compile(r",external-dns/rev=[^,]*")


def _same_but_rev(old: RecordSet, new: RecordSet) -> bool:
    """True when two ownership TXT differ only in the ``rev`` label.  The label records the
    revision at which the owner last wrote this record; a new commit that does not change the
    record does not rewrite every TXT of the zone (who wins compares it with the planning
    owner's current revision, so a stale label only ever makes its owner look older)."""
    if old.key != new.key or not old.same_routing(new):
        return False
    if len(old.values) == 1 and len(new.values) == 1 and _REV.sub("", old.values[0]) == _REV.sub("", new.values[0]):
        return True  # the same text but for the rev label (the common case), without decoding
    old_labels = [decode(v) for v in old.values]
    new_labels = [decode(v) for v in new.values]
    if len(old_labels) != 1 or len(new_labels) != 1 or old_labels[0] is None or new_labels[0] is None:
        return False
    return replace(old_labels[0], rev=None) == replace(new_labels[0], rev=None)


def _plan_key(ctx: _Ctx, key: RecordKey) -> None:
    me = ctx.intent.owner
    entries = ctx.obs.owners.get(key, {})
    mine = entries.get(me)
    others = {o: e for o, e in entries.items() if o != me and not _removed_by_authority(ctx, e)}
    removed = [e for o, e in entries.items() if o != me and _removed_by_authority(ctx, e)]
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
    if want is not None and _type_conflict(ctx, key):
        if key.type != "CNAME":
            _announce(ctx, key, want, mine)  # A/AAAA win: claim the name, wait for the CNAME to go
            return
        if mine is None:
            return
        want = None  # A/AAAA win: withdraw our CNAME
    if want is None and mine is None and not removed:
        return
    if not _mode_allows(ctx.policy.mode, want, current):
        return
    new = _new_content(ctx, key, want, others, mine, current)
    if new is _SKIP:
        return
    assert not isinstance(new, _Skip)
    if new == current:
        new = current  # keep the record read rather than an equal copy (one per record of a zone)
    txt = _my_txt(ctx, key, new, want)
    if new is None and current is not None:
        _leave_guards(ctx, key, entries)
    _emit(ctx, key, current, new, txt, removed)
    ctx.final[key] = new
    ctx.final_owners[key] = tuple(others) + ((me,) if want is not None else ())


def _announce(ctx: _Ctx, key: RecordKey, want: RecordSet, mine: OwnershipEntry | None) -> None:
    """Write only this owner's ownership TXT, so co-owners see the claim."""
    txt = _my_txt(ctx, key, want, want)
    if (txt is not None and mine is None and ctx.policy.mode is not PlanMode.UPSERT_ONLY) or (
            txt is not None and mine is not None and mine.txt != txt):
        ctx.changes.append(Change(Action.CREATE if mine is None else Action.UPDATE,
                                  mine.txt if mine else None, txt, key, reason="announce"))


class _Skip:
    pass


_SKIP = _Skip()


def _mode_allows(mode: PlanMode, want: RecordSet | None, current: RecordSet | None) -> bool:
    if mode is PlanMode.CREATE_ONLY:
        return want is not None and current is None
    if mode is PlanMode.UPSERT_ONLY:
        return want is not None
    return True


def _new_content(ctx: _Ctx, key: RecordKey, want: RecordSet | None,
                 others: dict[str, OwnershipEntry], mine: OwnershipEntry | None,
                 current: RecordSet | None) -> RecordSet | _Skip | None:
    """The record's content after this plan: None deletes it, _SKIP leaves it alone."""
    if _is_shared_union(key):
        my_prev = claimed(mine, current) if mine is not None else ()
        new = _resolve_union(ctx, key, want, others, my_prev)
        if new is not None and ctx.policy.mode is PlanMode.UPSERT_ONLY and current is not None:
            new = new.with_values(set(new.values) | set(current.values))
        return new
    if want is not None:
        resolved = _resolve_single(ctx, key, want, others)
        return _SKIP if resolved is None else resolved
    return current if others else None


def _my_txt(ctx: _Ctx, key: RecordKey, new: RecordSet | None, want: RecordSet | None) -> RecordSet | None:
    if want is None or new is None or not ctx.policy.registry:
        return None
    routed = RecordSet(new.name, new.type, new.ttl, want.values, new.set_id, new.weight, new.geo)
    rec, fitted = ownership_record(routed, _labels(ctx, want), ctx.policy.zone)
    if not fitted:
        ctx.notes.append(f"{key}: per-target ownership of {len(want.values)} values does not fit one TXT "
                         "string (TargetsLabelOverflow); this owner claims the whole record")
    return rec


def _may_remove(ctx: _Ctx) -> bool:
    return ctx.policy.mode is PlanMode.SYNC


def _leave_guards(ctx: _Ctx, key: RecordKey, entries: dict[str, OwnershipEntry]) -> None:
    """Deleting the last owner's record: joiners known from git must not have announced."""
    for owner in ctx.policy.known_owners:
        if owner == ctx.intent.owner or owner in entries:
            continue
        name = txt_name(owner, key.type, key.name, ctx.policy.zone)
        ctx.guards.append(Guard(RecordKey(name, "TXT", key.set_id), False, key,
                                f"{owner} has not joined {key}"))


def _dead_ends(ctx: _Ctx) -> list[RecordKey]:
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


def _cnames_in(ctx: _Ctx, hosts: set[str]) -> list[RecordKey]:
    keys = {k for k in ctx.final if k.type == "CNAME"}
    keys |= {k for k in ctx.obs.data if k.type == "CNAME" and names.root_host_of(k.name) in hosts}
    return sorted(keys)


def _prune_dead_ends(ctx: _Ctx) -> None:
    """Withdraw this owner's CNAMEs that lead nowhere, until none remain (seed 000)."""
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


def _order(changes: list[Change]) -> tuple[Change, ...]:
    """Groups that only delete go first (a CNAME must leave before an A can arrive)."""
    groups: dict[RecordKey, list[Change]] = {}
    for change in changes:
        groups.setdefault(change.group, []).append(change)
    deleting = [g for g in groups.values() if all(c.action is Action.DELETE for c in g)]
    writing = [g for g in groups.values() if not all(c.action is Action.DELETE for c in g)]
    return tuple(c for g in (*deleting, *writing) for c in g)


def _keys_to_plan(ctx: _Ctx) -> list[RecordKey]:
    keys = set(ctx.desired)
    for key, entries in ctx.obs.owners.items():
        if ctx.intent.owner in entries or any(_removed_by_authority(ctx, e) for e in entries.values()):
            keys.add(key)
    return sorted(keys)


def plan(intent: Intent, observed: ZoneSnapshot, policy: PlanPolicy) -> Plan:
    """Plan the writes that bring ``intent.owner``'s part of the zone to ``intent``."""
    obs = decode_zone(observed)
    desired = {r.key: r for r in intent.records}
    if observed.names is not None:  # a per-name read: plan only what was read
        desired = {k: r for k, r in desired.items() if k.name in observed.names}
    ctx = _Ctx(intent, policy, obs, desired, read_names=observed.names)
    _find_strategy_conflicts(ctx)
    for key in _keys_to_plan(ctx):
        _plan_key(ctx, key)
    _prune_dead_ends(ctx)
    if not obs.complete:
        dropped = [c for c in ctx.changes if c.action is Action.DELETE]
        if dropped:
            ctx.notes.append(f"the read was partial: {len(dropped)} delete(s) withheld")
            ctx.changes = [c for c in ctx.changes if c.action is not Action.DELETE]
    managed = sum(1 for k, e in obs.owners.items() if intent.owner in e and k in obs.data)
    changes = _order(ctx.changes)
    stalled, note = judge_mass_change(changes, managed, policy)
    if note:
        ctx.notes.append(note)
    return Plan(
        zone=policy.zone, owner=intent.owner, authority=policy.authority, changes=changes,
        guards=tuple(g for g in ctx.guards if any(c.group == g.group for c in changes)),
        conflicts=tuple(ctx.conflicts), notes=tuple(ctx.notes), managed=managed,
        stalled=stalled, revision=intent.revision,
    )
