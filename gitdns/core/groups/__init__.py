"""Active failover groups in the zone (Kuadrant's "DNS Failover" proposal; docs/failover.md).

The ``ActiveGroups`` file in git is the truth and carries a serial.  Agents mirror it into
the zone twice: Kuadrant's ``kuadrant-active-groups.<zone>`` TXT ``"version=1;groups=g1&&g2"``
(so Kuadrant clusters sharing the zone follow) and ``gitdns-active-groups.<zone>``
``"version=1;serial=<n>;groups=g1&&g2"``.  No agent overwrites a higher serial: agents on an
older revision leave the zone alone, so a rollout does not flip it back and forth.  A
break-glass switch writes a higher serial straight to the zone; agents then follow the zone
and report ``GroupsDivergedFromGit`` until git catches up.  Membership is an exact match, as
in dns-operator's controller (its ``kubectl-kuadrant_dns remove-active-group`` looks for the
name as a substring before it removes it).  An absent or empty list
means every group is active (for gitdns; dns-operator then publishes only its ungrouped
clusters: docs/records.md, "Differences from dns-operator").  An empty list is written as
dns-operator writes it, ``version=1``; ``version=1;groups=`` and a value without ``version`` are
read as well.

The package's other module: `serials` — Committed active-groups serials against the ones the
clusters applied, pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gitdns.core.model import ActiveGroups
from gitdns.core.plan.planner import decode_zone
from gitdns.core.records import Action, Change, RecordSet, ZoneSnapshot
from gitdns.core.registry import OwnerLabels, encode

KUADRANT_PREFIX = "kuadrant-active-groups."
GITDNS_PREFIX = "gitdns-active-groups."
TTL = 60


def kuadrant_name(zone: str) -> str:
    return KUADRANT_PREFIX + zone


def gitdns_name(zone: str) -> str:
    return GITDNS_PREFIX + zone


def kuadrant_value(groups: Iterable[str]) -> str:
    """Kuadrant's value, as dns-operator writes it: ``version=1`` alone for an empty list."""
    names = sorted({g for g in groups if g})
    return f"version=1;groups={'&&'.join(names)}" if names else "version=1"


def gitdns_value(serial: int, groups: Iterable[str]) -> str:
    return f"version=1;serial={serial};groups={'&&'.join(sorted(set(groups)))}"


def _fields(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in value.strip('"').split(";"):
        key, sep, val = part.partition("=")
        if sep:
            out[key.strip()] = val.strip()
    return out


def _groups(text: str) -> tuple[str, ...]:
    return tuple(sorted({g for g in text.split("&&") if g}))


@dataclass(frozen=True, slots=True)
class ZoneGroups:
    """What the zone says: Kuadrant's list, and gitdns's serial and list (None: absent)."""

    kuadrant: tuple[str, ...] | None
    serial: int | None
    groups: tuple[str, ...] | None
    kuadrant_record: RecordSet | None = None
    gitdns_record: RecordSet | None = None

    def key(self) -> tuple[object, ...]:
        """What a later read is compared with to notice a switch written straight to the zone."""
        return (self.kuadrant, self.serial, self.groups)


def read_zone_groups(snapshot: ZoneSnapshot, zone: str) -> ZoneGroups:
    kname, gname = kuadrant_name(zone), gitdns_name(zone)
    krec = next((r for r in snapshot.records if r.name == kname and r.type == "TXT"), None)
    grec = next((r for r in snapshot.records if r.name == gname and r.type == "TXT"), None)
    kuadrant = _groups(_fields(krec.values[0]).get("groups", "")) if krec and krec.values else None
    serial: int | None = None
    groups: tuple[str, ...] | None = None
    if grec and grec.values:
        fields = _fields(grec.values[0])
        serial = int(fields["serial"]) if fields.get("serial", "").isdigit() else None
        groups = _groups(fields.get("groups", ""))
    return ZoneGroups(kuadrant, serial, groups, krec, grec)


@dataclass(frozen=True, slots=True)
class Decision:
    active: frozenset[str]  # empty: every group is active
    serial: int
    diverged: bool  # the zone holds a higher serial than git (break-glass)
    write: tuple[Change, ...]  # the TXT mirror to write (empty when the zone is level or ahead)


def decide(git: ActiveGroups | None, zone_state: ZoneGroups, zone: str) -> Decision:
    """Which groups are active, and what to mirror into the zone."""
    git_serial = git.serial if git is not None else 0
    git_groups = tuple(sorted(set(git.groups))) if git is not None else ()
    zone_serial = zone_state.serial if zone_state.serial is not None else -1
    if zone_serial > git_serial:
        return Decision(frozenset(zone_state.groups or ()), zone_serial, True, ())
    changes: list[Change] = []
    if git is not None and (zone_serial < git_serial or zone_state.groups != git_groups
                            or zone_state.kuadrant != git_groups):
        changes.extend(_mirror(zone_state, zone, git_serial, git_groups))
    return Decision(frozenset(git_groups), git_serial, False, tuple(changes))


def _mirror(state: ZoneGroups, zone: str, serial: int, groups: tuple[str, ...]) -> list[Change]:
    out: list[Change] = []
    for old, new in ((state.gitdns_record, RecordSet(gitdns_name(zone), "TXT", TTL, (gitdns_value(serial, groups),))),
                     (state.kuadrant_record, RecordSet(kuadrant_name(zone), "TXT", TTL, (kuadrant_value(groups),)))):
        if old == new:
            continue
        out.append(Change(Action.CREATE if old is None else Action.UPDATE, old, new, new.key,
                          reason="active groups"))
    return out


def direct_changes(state: ZoneGroups, zone: str, groups: Iterable[str], git_serial: int) -> tuple[int, list[Change]]:
    """Break-glass: write ``groups`` with a serial above both git's and the zone's."""
    serial = max(git_serial, state.serial or 0) + 1
    return serial, _mirror(state, zone, serial, tuple(sorted(set(groups))))


def is_active(group: str | None, active: frozenset[str]) -> bool:
    """Ungrouped clusters are always active; an empty active set means every group is."""
    return group is None or not active or group in active


def relabel(snapshot: ZoneSnapshot, owner: str, group: str | None) -> list[Change]:
    """An inactive agent publishes nothing, but keeps the group label of its own ownership
    entries correct, so a changed group is visible in the zone."""
    out: list[Change] = []
    obs = decode_zone(snapshot)
    for key, entries in sorted(obs.owners.items()):
        entry = entries.get(owner)
        if entry is None or entry.joint or entry.labels.group == group:
            continue  # a joint legacy TXT names other owners too: never rewritten
        labels = OwnerLabels(owner=owner, group=group, rev=entry.labels.rev, targets=entry.labels.targets,
                             version=entry.labels.version, extra=entry.labels.extra)
        value, _ = encode(labels)
        new = RecordSet(entry.txt.name, "TXT", entry.txt.ttl, (value,), entry.txt.set_id, entry.txt.weight,
                        entry.txt.geo)
        out.append(Change(Action.UPDATE, entry.txt, new, key, reason="group label"))
    return out
