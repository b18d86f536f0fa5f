"""Who wins, for the planner (`gitdns.core.planner`): where owners disagree about a name,
what this owner may write (the ownership and merge rules of docs/records.md).

- Strategy: a host where another owner publishes the other strategy (simple vs
  loadbalanced) is frozen for this owner until every policy for the host agrees.
- Type: CNAME and other types cannot share a name; A/AAAA win over CNAME (as Kuadrant).
- Content: multi-value records without a set identifier publish the union of every owner's
  values (`resolve_union`); CNAMEs and routed rows hold one content, and the owner on the
  older revision yields (`resolve_single`).  Disagreements are conflicts reported as data.
"""

from __future__ import annotations

from gitdns.core import names
from gitdns.core.plancontext import PlanContext, claimed, removed_by_authority, revision_of
from gitdns.core.records import RecordKey, RecordSet
from gitdns.core.registry import OwnershipEntry

_SIMPLE = "simple"
_LB = "loadbalanced"


def _host_strategy(key: RecordKey, values: tuple[str, ...]) -> str | None:
    """The strategy a record at a listener host reveals, if it is the host's top record."""
    if key.set_id or names.root_host_of(key.name) != names.lb_host(key.name):
        return None
    if key.type == "CNAME":
        return _LB if values and values[0] == names.klb_name(key.name) else _SIMPLE
    if key.type in ("A", "AAAA"):
        return _SIMPLE
    return None


def find_strategy_conflicts(ctx: PlanContext) -> None:
    """Freeze hosts where another owner publishes the other strategy (until every policy for
    the host agrees, the host's records stay as they are)."""
    mine: dict[str, str] = {}
    for key, rec in ctx.desired.items():
        strategy = _host_strategy(key, rec.values)
        if strategy:
            mine[rec.name] = strategy
    for host, strategy in mine.items():
        for key in ctx.obs.by_name.get(host, ()):
            for owner, entry in ctx.obs.owners.get(key, {}).items():
                if owner == ctx.intent.owner or removed_by_authority(ctx, entry):
                    continue
                theirs = _host_strategy(key, claimed(entry, ctx.obs.data.get(key)))
                if theirs and theirs != strategy:
                    ctx.frozen_hosts.add(names.root_host_of(host))
                    ctx.conflict(key, "ConflictingStrategyDiscovered",
                                 f"{host}: owner {owner} publishes the {theirs} strategy, this owner "
                                 f"wants {strategy}; the existing records are kept until every "
                                 "policy for the host agrees", [owner])


def type_conflict(ctx: PlanContext, key: RecordKey) -> bool:
    """CNAME and other types cannot share a name; A/AAAA win over CNAME (as Kuadrant)."""
    for other in ctx.obs.by_name.get(key.name, ()):
        if other.type == key.type or (key.type != "CNAME" and other.type != "CNAME"):
            continue
        owners = {o for o, e in ctx.obs.owners.get(other, {}).items()
                  if o != ctx.intent.owner and not removed_by_authority(ctx, e)}
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


def resolve_single(ctx: PlanContext, key: RecordKey, want: RecordSet,
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
             if (r := revision_of(e)) is not None and mine is not None and r > mine]
    if newer:
        ctx.conflict(key, "NewerRevisionSeen",
                     f"{key}: owner(s) on a newer revision publish other content; yielding", newer)
        return None
    same = [o for o, e in disagree.items()
            if (r := revision_of(e)) is None or mine is None or r == mine]
    if same and _content_differs(current, want):
        ctx.conflict(key, "ConflictingValues",
                     f"{key}: wanted {want.describe()}, owner(s) {', '.join(sorted(same))} "
                     f"publish {current.describe()}", same)
        return None
    return want


def resolve_union(ctx: PlanContext, key: RecordKey, want: RecordSet | None,
                   others: dict[str, OwnershipEntry], my_prev: tuple[str, ...]) -> RecordSet | None:
    """The union of every remaining owner's values (multi-value records)."""
    current = ctx.obs.data.get(key)
    values: set[str] = set(want.values) if want is not None else set()
    drop = set(my_prev) - values
    whole = False
    for entry in others.values():
        claim = set(claimed(entry, current))
        if entry.labels.targets is None:
            claim -= drop
            whole = whole or current is not None
        values |= claim
    if not values and whole:
        # dns-operator removes a leaving owner's values "but not if we are going to be left
        # with none": an owner claiming the whole record still holds it
        assert current is not None
        values = set(current.values)
    if not values:
        return None
    base = want if want is not None else current
    assert base is not None
    ttl = base.ttl
    if want is not None and current is not None and current.ttl != want.ttl and others:
        revs = [revision_of(e) for e in others.values()]
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
