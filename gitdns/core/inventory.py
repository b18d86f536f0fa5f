"""What a zone publishes and who owns each value (`gitdns zone show`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from gitdns.core.plan.context import claimed
from gitdns.core.plan.fmt import bookkeeping, record_dict
from gitdns.core.plan.planner import decode_zone
from gitdns.core.records import RecordSet, ZoneSnapshot
from gitdns.core.text import lines as text_lines


@dataclass(frozen=True, slots=True)
class Row:
    record: RecordSet
    owners: tuple[str, ...]  # every owner with an ownership TXT for this record
    value_owners: tuple[tuple[str, tuple[str, ...]], ...]  # value -> owners claiming it
    revisions: tuple[tuple[str, str], ...]  # owner -> applied revision label

    @property
    def foreign(self) -> bool:
        return not self.owners


def inventory(snapshot: ZoneSnapshot, names: Mapping[str, str] | None = None) -> list[Row]:
    """One row per data record; ``names`` maps owner ids to friendly names (cluster names)."""
    obs = decode_zone(snapshot)
    label = dict(names or {})
    rows: list[Row] = []
    for key in sorted(obs.data):
        rec = obs.data[key]
        entries = obs.owners.get(key, {})
        per_value: dict[str, list[str]] = {v: [] for v in rec.values}
        for owner, entry in sorted(entries.items()):
            for value in claimed(entry, rec):
                if value in per_value:
                    per_value[value].append(label.get(owner, owner))
        own = bookkeeping(rec, label) if not entries else None  # gitdns's heartbeat, lease, active groups
        rows.append(Row(
            rec,
            (own,) if own else tuple(label.get(o, o) for o in sorted(entries)),
            tuple((v, tuple(o)) for v, o in per_value.items()),
            tuple((label.get(o, o), e.labels.rev or "") for o, e in sorted(entries.items())),
        ))
    return rows


def to_text(zone: str, rows: list[Row]) -> str:
    lines = [f"zone {zone}: {len(rows)} record set(s)"]
    for row in rows:
        rec = row.record
        routing = " ".join(
            p for p in (f"set={rec.set_id}" if rec.set_id else "",
                        f"weight={rec.weight}" if rec.weight is not None else "",
                        f"geo={rec.geo}" if rec.geo is not None else "") if p)
        head = f"{rec.name} {rec.ttl} {rec.type}" + (f" ({routing})" if routing else "")
        owners = "FOREIGN (no ownership record)" if row.foreign else ", ".join(row.owners)
        lines.append(f"{head}  owners: {owners}")
        for value, who in row.value_owners:
            lines.append(f"    {value}" + (f"  <- {', '.join(who)}" if who and not row.foreign else ""))
    return text_lines(lines)


def to_json(zone: str, rows: list[Row]) -> str:
    return json.dumps(to_dict(zone, rows), indent=2, sort_keys=True) + "\n"


def to_dict(zone: str, rows: list[Row]) -> dict[str, object]:
    return {
        "zone": zone,
        "records": [
            {**(record_dict(r.record) or {}), "owners": list(r.owners), "foreign": r.foreign,
             "valueOwners": {v: list(o) for v, o in r.value_owners},
             "revisions": dict(r.revisions)}
            for r in rows
        ],
    }
