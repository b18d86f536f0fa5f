"""Whether a cluster applied a desired commit or holds a zone below it: the decision `gitdns
history` makes per entry and `gitdns status --revision` per cluster, on the same facts (the
status commits whose appliedRevision contains the commit, each with its zone documents).

    applied_or_held(reached, contains, zones=None) -> Decision

A zone document saying ``held: true`` means the agent kept that zone at its last good revision
(the revision it applied does not validate for the zone): a status commit whose appliedRevision
contains the commit is then not enough.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gitdns.commands.status.log import ZoneState

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Decision(Generic[T]):
    """``applied``: the first status commit at which the commit counts as applied; else (it is
    held) ``since`` the first status commit that held it, ``latest`` the last one asked, and
    ``held`` the zones still held there."""

    applied: T | None = None
    since: T | None = None
    latest: T | None = None
    held: Mapping[str, ZoneState] = field(default_factory=dict)


def applied_or_held(reached: Iterable[tuple[T, Mapping[str, ZoneState]]], contains: Callable[[str | None], bool],
                    zones: Collection[str] | None = None) -> Decision[T]:
    """``reached``: the status commits whose appliedRevision contains the commit, oldest first,
    each with its zones' states.  Applied at the first one where every zone it holds (of
    ``zones``, when given) had been applied at the commit or later — by an earlier one that did
    not hold it, or as the held zone's own last good revision (``contains(label)``); held
    otherwise."""
    done: set[str] = set()
    since: T | None = None
    latest: T | None = None
    held: dict[str, ZoneState] = {}
    for entry, states in reached:
        held = {}
        for zone, state in states.items():
            if zones is not None and zone not in zones:
                continue
            if not state.held or contains(state.applied):
                done.add(zone)
            elif zone not in done:
                held[zone] = state
        if not held:
            return Decision(applied=entry)
        since = since if since is not None else entry
        latest = entry
    return Decision(since=since, latest=latest, held=held)
