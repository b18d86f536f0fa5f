"""This owner's ownership TXT, for the planner (`gitdns.core.plan.planner`): the changes of one
group in write order (TXT before data on write, data before TXT on delete), the TXT that
only announces a claim, and the guards a deletion carries against owners about to join.

A joint legacy TXT (Kuadrant's ``owner=a&&b``, `gitdns.core.registry`) is never rewritten or
deleted, whoever leaves: as dns-operator, this owner writes and deletes only its own TXT
beside it, and the joint one stays for the other owners it names.
"""

from __future__ import annotations

import re
from dataclasses import replace

from gitdns.core.plan.context import PlanContext
from gitdns.core.plan.values import PlanMode
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet
from gitdns.core.registry import (
    OwnerLabels,
    OwnershipEntry,
    decode,
    ownership_record,
    targets_fit,
    txt_name,
)


def _labels(ctx: PlanContext, data: RecordSet) -> OwnerLabels:
    rev = ctx.intent.revision.label if ctx.intent.revision else None
    return OwnerLabels(owner=ctx.intent.owner, group=ctx.intent.group, rev=rev, targets=data.values)


def emit(ctx: PlanContext, key: RecordKey, current: RecordSet | None, new: RecordSet | None,
          my_txt_new: RecordSet | None, drop_entries: list[OwnershipEntry]) -> None:
    """Changes for one group: TXT before data on write, data before TXT on delete."""
    mine = _own(ctx.obs.owners.get(key, {}).get(ctx.intent.owner))
    drop_entries = [e for e in drop_entries if not e.joint]
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
    if ctx.policy.mode is not PlanMode.UPSERT_ONLY:  # an owner's own TXT its current one hides
        hidden = {e.owner: e for e in (*drop_entries, *((mine,) if mine is not None else ()))}
        out.extend(Change(Action.DELETE, txt, None, key, reason=f"superseded: {e.owner}")
                   for e in hidden.values() for txt in e.superseded)
    ctx.changes.extend(out)


def _own(entry: OwnershipEntry | None) -> OwnershipEntry | None:
    """This owner's own TXT: a joint TXT also names others, so it is not this owner's to write."""
    return None if entry is None or entry.joint else entry


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


def txt_taken(ctx: PlanContext, key: RecordKey, txt: RecordSet) -> bool:
    """Whether the name of this owner's ownership TXT holds a TXT that is not one of its
    ownership records (malformed, another heritage, another owner's value under this owner's
    hash): it is never overwritten, so nothing of the group is written (a conflict says so)."""
    if txt.key not in ctx.obs.data:
        return False
    ctx.conflict(key, "ForeignRecordInTheWay",
                 f"{txt.key}, where this owner's ownership record of {key} goes, holds a TXT that is not an "
                 "ownership record of this owner; remove it to let this owner publish the record")
    return True


def announce(ctx: PlanContext, key: RecordKey, want: RecordSet, mine: OwnershipEntry | None) -> None:
    """Write only this owner's ownership TXT, so co-owners see the claim."""
    mine = _own(mine)
    txt = my_txt(ctx, key, want, want)
    if txt is None or txt_taken(ctx, key, txt):
        return
    upsert_only = ctx.policy.mode is PlanMode.UPSERT_ONLY
    if mine is None:
        if not upsert_only:
            ctx.changes.append(Change(Action.CREATE, None, txt, key, reason="announce"))
    elif mine.txt.key != txt.key:  # its own legacy TXT: the versioned one replaces it
        ctx.changes.append(Change(Action.CREATE, None, txt, key, reason="announce"))
        if not upsert_only:
            ctx.changes.append(Change(Action.DELETE, mine.txt, None, key, reason="announce"))
    elif mine.txt != txt:
        ctx.changes.append(Change(Action.UPDATE, mine.txt, txt, key, reason="announce"))


def my_txt(ctx: PlanContext, key: RecordKey, new: RecordSet | None, want: RecordSet | None) -> RecordSet | None:
    if want is None or new is None or not ctx.policy.registry:
        return None
    routed = RecordSet(new.name, new.type, new.ttl, want.values, new.set_id, new.weight, new.geo)
    rec, fitted = ownership_record(routed, _labels(ctx, want), ctx.policy.zone)
    if not fitted and not targets_fit(want.values):
        ctx.notes.append(f"{key}: its values hold characters the targets label cannot carry (, ; or "
                         "control characters): this owner claims the whole record")
    elif not fitted:
        ctx.notes.append(f"{key}: per-target ownership of {len(want.values)} values does not fit one TXT "
                         "string (TargetsLabelOverflow); this owner claims the whole record")
    return rec


STAY_GUARDS = 2  # co-owners a leaving owner's change is conditional on


def leave_guards(ctx: PlanContext, key: RecordKey, entries: dict[str, OwnershipEntry]) -> None:
    """Deleting the last owner's record: joiners known from git must not have announced."""
    for owner in ctx.policy.known_owners:
        if owner == ctx.intent.owner or owner in entries:
            continue
        name = txt_name(owner, key.type, key.name, ctx.policy.zone)
        ctx.guards.append(Guard(RecordKey(name, "TXT", key.set_id), False, key,
                                f"{owner} has not joined {key}"))


def stay_guards(ctx: PlanContext, key: RecordKey, others: dict[str, OwnershipEntry]) -> None:
    """Leaving a record the other owners keep (this owner's TXT goes, the record stays): each
    of them must still hold its TXT when the change lands.  Without this, owners leaving at
    the same moment each leave the record to the others, every TXT goes, and the record stays
    with no owner: foreign for good, never deleted.

    One co-owner still holding its TXT when the change lands is enough for the record to keep an
    owner, so the guards name at most `STAY_GUARDS` of them (the first by owner id): a guard is
    a read inside the write where the provider checks it by reading (Route53), and a record of
    a thousand owners must not cost a thousand reads to leave.  When a guarded co-owner left
    meanwhile, the change is refused as stale and the next plan guards on those still there."""
    seen: set[RecordKey] = set()  # a joint legacy TXT stands for each owner it names: one guard
    for owner, entry in sorted(others.items()):
        if len(seen) >= STAY_GUARDS:
            break
        if entry.txt.key not in seen:
            seen.add(entry.txt.key)
            ctx.guards.append(Guard(entry.txt.key, True, key, f"{owner} still owns {key}"))
