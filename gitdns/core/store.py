"""Compare-and-swap semantics of a record store, as a pure function.

The `memory` and `local` providers hold their zone as a mapping ``RecordKey -> RecordSet``
and apply writes through `apply_changes`: every change group (a data record and its
ownership TXT) lands atomically or not at all, and a change lands only when what the
planner read (``Change.old``) is exactly what the store holds now — values, TTL and
routing.  A refused group is reported as stale so the caller re-reads and re-plans.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet


@dataclass(frozen=True, slots=True)
class StoreResult:
    records: dict[RecordKey, RecordSet]
    applied: tuple[Change, ...]
    refused: tuple[tuple[RecordKey, str], ...]  # (group, why)

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def group_changes(changes: Iterable[Change]) -> dict[RecordKey, list[Change]]:
    """Changes by group, in first-seen order, keeping the order inside each group."""
    groups: dict[RecordKey, list[Change]] = {}
    for change in changes:
        groups.setdefault(change.group, []).append(change)
    return groups


def _check(change: Change, current: RecordSet | None) -> str:
    if change.action is Action.CREATE:
        return "" if current is None else f"{change.key} already exists"
    if current is None:
        return f"{change.key} no longer exists"
    if current != change.old:
        return f"{change.key} changed since it was read"
    return ""


def _check_guard(guard: Guard, records: Mapping[RecordKey, RecordSet]) -> str:
    exists = guard.key in records
    if exists == guard.present:
        return ""
    state = "appeared" if exists else "disappeared"
    return f"{guard.key} {state} ({guard.why})" if guard.why else f"{guard.key} {state}"


def apply_changes(
    records: Mapping[RecordKey, RecordSet],
    changes: Sequence[Change],
    guards: Sequence[Guard] = (),
) -> StoreResult:
    """Apply ``changes`` group by group onto a copy of ``records``."""
    out = dict(records)
    guards_by_group: dict[RecordKey, list[Guard]] = {}
    for guard in guards:
        guards_by_group.setdefault(guard.group, []).append(guard)
    applied: list[Change] = []
    refused: list[tuple[RecordKey, str]] = []
    for group, members in group_changes(changes).items():
        scratch: dict[RecordKey, RecordSet | None] = {}
        why = ""
        for guard in guards_by_group.get(group, ()):
            why = _check_guard(guard, out)
            if why:
                break
        for change in members if not why else ():
            key = change.key
            current = scratch[key] if key in scratch else out.get(key)
            why = _check(change, current)
            if why:
                break
            scratch[key] = change.new if change.action is not Action.DELETE else None
        if why:
            refused.append((group, why))
            continue
        for key, value in scratch.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        applied.extend(members)
    return StoreResult(out, tuple(applied), tuple(refused))


class ContradictoryGroup(ValueError):
    """The changes of one group contradict each other (a later change's ``old`` is not what an
    earlier one leaves): the group is stale before it is sent."""


def group_states(changes: Sequence[Change]) -> tuple[dict[RecordKey, RecordSet | None],
                                                     dict[RecordKey, RecordSet | None]]:
    """For each key a group touches: the state it must find (the first change's view) and the
    state it leaves (the last change's).  Providers that write a group as one request use it."""
    before: dict[RecordKey, RecordSet | None] = {}
    after: dict[RecordKey, RecordSet | None] = {}
    for change in changes:
        key = change.key
        if key in after:
            seen = after[key]
            if (seen is not None) if change.action is Action.CREATE else (seen != change.old):
                raise ContradictoryGroup(f"{key}: the group's changes contradict each other")
        else:
            before[key] = None if change.action is Action.CREATE else change.old
        after[key] = None if change.action is Action.DELETE else change.new
    return before, after

