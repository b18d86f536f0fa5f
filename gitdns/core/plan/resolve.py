"""Who wins, for the planner (`gitdns.core.plan.planner`): where owners disagree about a name,
what this owner may write (the ownership and merge rules of docs/records.md).

- Strategy: a host where another owner publishes the other strategy (simple vs
  loadbalanced) switches when this owner holds the newest revision among gitdns owners there
  (make-before-break, docs/records.md "Switching a host's strategy"); an owner on an older
  revision yields; a foreign owner, or one on the same revision, freezes the host until every
  policy for the host agrees.
- Type: CNAME and other types cannot share a name; A/AAAA win over CNAME (as Kuadrant).
- Content: multi-value records without a set identifier publish the union of every owner's
  values (`resolve_union`); CNAMEs and routed rows hold one content, and the owner on the
  older revision yields (`resolve_single`).  Disagreements are conflicts reported as data.
"""

from __future__ import annotations

from gitdns.core import names
from gitdns.core.model import Revision
from gitdns.core.plan.context import (
    PlanContext,
    claimed,
    removed_by_authority,
    revision_of,
    same_commit,
    stale_claim,
)
from gitdns.core.rdata import value_error
from gitdns.core.records import RecordKey, RecordSet
from gitdns.core.registry import OwnershipEntry
from gitdns.core.text import inline

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
    """Decide, per host whose top record this owner wants, what another strategy at the host
    (simple vs loadbalanced) means: a switch this owner carries out, a yield, or a freeze.

    - Every other owner publishing the other strategy is a gitdns owner (its TXT has a `rev`)
      whose newest write in the host is older than this owner's revision: the newest revision
      asks for this owner's strategy, so it switches the host (`ctx.switching`; their claims
      on the old top record are read as none, `ctx.stale`) — make-before-break, see `order`.
    - One of them wrote the host at a newer revision: this owner yields (`NewerRevisionSeen`).
    - One has no `rev` (a foreign owner such as dns-operator), this owner has no revision, or
      one wrote the other strategy at this very revision: the host is frozen
      (`ConflictingStrategyDiscovered`) until every policy for the host agrees.
    An owner's own old top record beside its new one (a leftover) is no disagreement.
    """
    mine: dict[str, str] = {}
    for key, rec in ctx.desired.items():
        strategy = _host_strategy(key, rec.values)
        if strategy:
            mine[rec.name] = strategy
    newest: dict[str, dict[str, Revision]] | None = None
    for host, strategy in sorted(mine.items()):
        opposing, agreeing, own_old = _top_claims(ctx, host, strategy)
        if not opposing and not own_old:
            continue
        if not opposing:  # only this owner's old top record: its own switch
            ctx.switching.add(names.root_host_of(host))
            continue
        if newest is None:
            newest = _newest_by_root(ctx)
        _decide(ctx, host, strategy, opposing, agreeing, newest.get(names.root_host_of(host), {}))


_Claim = tuple[RecordKey, OwnershipEntry, str]


def _top_claims(ctx: PlanContext, host: str, strategy: str
                ) -> tuple[list[_Claim], dict[str, list[OwnershipEntry]], bool]:
    """Other owners' top-record claims at ``host`` for the other strategy and for this one, and
    whether this owner itself still holds a top record of the other strategy."""
    opposing: list[_Claim] = []
    agreeing: dict[str, list[OwnershipEntry]] = {}
    own_old = False
    for key in sorted(ctx.obs.by_name.get(host, ())):
        for owner, entry in ctx.obs.owners.get(key, {}).items():
            if removed_by_authority(ctx, entry):
                continue
            theirs = _host_strategy(key, claimed(entry, ctx.obs.data.get(key)))
            if not theirs:
                continue
            if owner == ctx.intent.owner:
                own_old = own_old or theirs != strategy
            elif theirs == strategy:
                agreeing.setdefault(owner, []).append(entry)
            else:
                opposing.append((key, entry, theirs))
    return opposing, agreeing, own_old


def _newest_by_root(ctx: PlanContext) -> dict[str, dict[str, Revision]]:
    """Per root host, per owner: the newest revision at which it wrote any record there."""
    out: dict[str, dict[str, Revision]] = {}
    for key, entries in ctx.obs.owners.items():
        root = names.root_host_of(key.name)
        for owner, entry in entries.items():
            rev = revision_of(entry)
            if rev is None:
                continue
            held = out.setdefault(root, {}).get(owner)
            if held is None or rev > held:
                out[root][owner] = rev
    return out


def _moved_on(entry: OwnershipEntry, agreeing: list[OwnershipEntry]) -> bool:
    """The owner publishes this strategy too, written after its old top record: a leftover."""
    rev = revision_of(entry)
    return rev is not None and any((r := revision_of(e)) is not None and r > rev for e in agreeing)


def _decide(ctx: PlanContext, host: str, strategy: str, opposing: list[_Claim],
            agreeing: dict[str, list[OwnershipEntry]], newest: dict[str, Revision]) -> None:
    root = names.root_host_of(host)
    leftovers = [c for c in opposing if _moved_on(c[1], agreeing.get(c[1].owner, []))]
    live = [c for c in opposing if c not in leftovers]
    mine = ctx.intent.revision
    foreign = [c for c in live if revision_of(c[1]) is None or mine is None]
    newer = sorted({c[1].owner for c in live if c not in foreign
                    and (r := newest.get(c[1].owner)) is not None and mine is not None and r > mine})
    same = [c for c in live if c not in foreign and c[1].owner not in newer
            and (r := newest.get(c[1].owner)) is not None and mine is not None and same_commit(r, mine)]
    if newer:
        ctx.frozen_hosts.add(root)
        theirs = next(c[2] for c in live if c[1].owner in newer)
        ctx.conflict(live[0][0], "NewerRevisionSeen",
                     f"{host}: owner(s) {', '.join(newer)} applied a newer revision publishing the "
                     f"{theirs} strategy; this owner (wanting {strategy}) yields and leaves the "
                     "host as it is", newer)
        return
    if foreign or same:
        ctx.frozen_hosts.add(root)
        for key, entry, theirs in foreign + same:
            ctx.conflict(key, "ConflictingStrategyDiscovered",
                         f"{host}: owner {entry.owner} publishes the {theirs} strategy, this owner "
                         f"wants {strategy}; the existing records are kept until every "
                         "policy for the host agrees", [entry.owner])
        return
    ctx.switching.add(root)
    ctx.stale.update((key, entry.owner) for key, entry, _ in opposing)
    if live:
        owners = sorted({c[1].owner for c in live})
        ctx.notes.append(
            f"{host}: strategy switch to {strategy}: owner(s) {', '.join(owners)} last wrote the "
            f"{live[0][2]} strategy at an older revision; this owner publishes its {strategy} "
            "records, replaces the host's top record, then withdraws its old ones "
            "(StrategySwitching)")


def type_conflict(ctx: PlanContext, key: RecordKey) -> bool:
    """CNAME and other types cannot share a name; A/AAAA win over CNAME (as Kuadrant)."""
    for other in ctx.obs.by_name.get(key.name, ()):
        if other.type == key.type or (key.type != "CNAME" and other.type != "CNAME"):
            continue
        entries = ctx.obs.owners.get(other, {})
        owners = {o for o, e in entries.items()
                  if o != ctx.intent.owner and not removed_by_authority(ctx, e) and not stale_claim(ctx, e)}
        mine_only = ctx.intent.owner in entries and not owners
        switched = any(stale_claim(ctx, e) for e in entries.values()) and not owners
        if mine_only or switched or (other not in ctx.obs.data and not owners):
            continue  # this plan withdraws it (a switch withdraws the old top record)
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
            if (r := revision_of(e)) is None or mine is None or same_commit(r, mine)]
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
    held = set(current.values) if current is not None else set()
    for entry in others.values():
        claim = set(claimed(entry, current))
        if entry.labels.targets is None:
            claim -= drop
            whole = whole or current is not None
        else:
            claim -= _not_values(ctx, key, claim - held - values, entry.owner)
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
        elif any(r is None or mine is None or same_commit(r, mine) for r in revs):
            ttl = current.ttl
            ctx.conflict(key, "ConflictingValues",
                         f"{key}: TTL {want.ttl} wanted, co-owners on the same revision keep "
                         f"{current.ttl}", others)
    return base.with_values(values) if base.ttl == ttl else RecordSet(
        base.name, base.type, ttl, tuple(values), base.set_id, base.weight, base.geo)


def _not_values(ctx: PlanContext, key: RecordKey, new: set[str], owner: str) -> set[str]:
    """What a co-owner's ``targets`` label claims beyond the record and this owner's values that
    is no value of the record's type (a label is text anyone writing TXT to the zone chose):
    never written into the record, and the plan says so."""
    wrong = {v for v in new if value_error(key.type, v) is not None}
    if wrong:
        shown = ", ".join(inline(v)[:40] for v in sorted(wrong)[:3])
        ctx.notes.append(f"{key}: the ownership record of {inline(owner)[:80]} claims {len(wrong)} value(s) that are "
                         f"no {key.type} values ({shown}); they are left out")
    return wrong
