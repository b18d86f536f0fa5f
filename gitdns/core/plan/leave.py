"""Leaving a zone: what an owner still holds in a zone it no longer publishes in, and its last
change there.

A cluster leaves a zone when its last listener host there goes (or its Cluster leaves git).
Which zones it left cannot be told from git alone — the revision it last applied may be
unknown (a fresh state directory, a one-shot run, a rewritten history) — so the zone tells:
an owner *holds* a zone while an ownership TXT of its own (`gitdns.core.registry`; a joint
legacy TXT naming it among others does not count: no owner ever removes one) or its heartbeat
(`gitdns.core.owner.zone`) is there.  Every entry point plans such a zone with an empty
intent, which removes its values and ownership TXT (`gitdns.core.plan.planner`); once none is
left, `farewell` takes its heartbeat away and the owner stops looking at the zone.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitdns.core.owner.zone import heartbeat_name, parse_heartbeat
from gitdns.core.plan.planner import decode_zone
from gitdns.core.records import Action, Change, RecordKey, RecordSet, ZoneSnapshot


@dataclass(frozen=True, slots=True)
class Holdings:
    """What one owner has in a zone."""

    owner: str
    claims: tuple[RecordKey, ...] = ()  # data record keys its ownership TXT claim
    heartbeat: RecordSet | None = None

    @property
    def any(self) -> bool:
        return bool(self.claims) or self.heartbeat is not None


def holdings(snapshot: ZoneSnapshot, owner: str) -> Holdings:
    obs = decode_zone(snapshot)
    # a joint legacy TXT naming the owner among others is never the owner's to remove
    # (`gitdns.core.registry`): it is no holding of its own
    claims = tuple(sorted(key for key, entries in obs.owners.items()
                          if owner in entries and not entries[owner].joint))
    beat = next((r for r in snapshot.records
                 if r.type == "TXT" and (parse_heartbeat(r) or ("", 0))[0] == owner), None)
    return Holdings(owner, claims, beat)


def holds(snapshot: ZoneSnapshot, owner: str) -> bool:
    """Whether ``owner`` still has an ownership TXT or a heartbeat in the zone read."""
    return holdings(snapshot, owner).any


def farewell(snapshot: ZoneSnapshot, owner: str, zone: str) -> list[Change]:
    """The owner's last change in a zone it left: its heartbeat deleted, once no ownership TXT
    of its own is left (none while one is: its records go first, through its plan)."""
    if holdings(snapshot, owner).claims:
        return []
    return heartbeat_removal(snapshot, owner, zone, "left the zone")


def heartbeat_removal(snapshot: ZoneSnapshot, owner: str, zone: str, reason: str) -> list[Change]:
    """The owner's heartbeat deleted (none when it has none): after its records, when it
    leaves the zone or an operator prunes it."""
    beat = holdings(snapshot, owner).heartbeat
    if beat is None or beat.name != heartbeat_name(owner, zone):
        return []
    return [Change(Action.DELETE, beat, None, beat.key, reason=reason)]
