"""DNS record values: identity (`RecordKey`) kept apart from content (`RecordSet`).

A record set is the unit every provider reads and writes: one name, one type, one
optional set identifier (weighted/geo rows), a TTL, routing (weight, geo code) and a
sorted tuple of values.  Names are absolute, lower-case and carry no trailing dot.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from gitdns.core.text import inline

# Types whose values from several owners merge into one multi-value record.
MULTI_VALUE_TYPES = frozenset({"A", "AAAA", "TXT", "MX", "SRV", "CAA", "NS"})
RECORD_TYPES = frozenset(MULTI_VALUE_TYPES | {"CNAME"})


@dataclass(frozen=True, slots=True, order=True)
class RecordKey:
    """Identity of a record set: ``(name, type, set_id)``; ``set_id`` is "" when absent."""

    name: str
    type: str
    set_id: str = ""

    def __str__(self) -> str:
        """``name TYPE [set]``, through the text gate: a name read from a zone is outside text."""
        suffix = f" [{self.set_id}]" if self.set_id else ""
        return inline(f"{self.name} {self.type}{suffix}")


@dataclass(frozen=True, slots=True)
class RecordSet:
    """A record set with its content.  Equality compares every field, values included."""

    name: str
    type: str
    ttl: int
    values: tuple[str, ...]
    set_id: str = ""
    weight: int | None = None
    geo: str | None = None

    def __post_init__(self) -> None:
        if list(self.values) != sorted(set(self.values)):
            object.__setattr__(self, "values", tuple(sorted(set(self.values))))

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.name, self.type, self.set_id)

    def with_values(self, values: tuple[str, ...] | list[str] | set[str]) -> RecordSet:
        return replace(self, values=tuple(sorted(set(values))))

    def same_routing(self, other: RecordSet) -> bool:
        return self.ttl == other.ttl and self.weight == other.weight and self.geo == other.geo

    def describe(self) -> str:
        routing = []
        if self.weight is not None:
            routing.append(f"weight={self.weight}")
        if self.geo is not None:
            routing.append(f"geo={self.geo}")
        extra = f" ({', '.join(routing)})" if routing else ""
        return f"{self.key} ttl={self.ttl}{extra} [{inline(', '.join(self.values))}]"


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Change:
    """One write.  ``old`` is what the planner read (the compare of compare-and-swap);
    ``new`` is what it wants.  ``group`` is the data record key the change belongs to:
    a record and its ownership TXT share a group and are never split across batches."""

    action: Action
    old: RecordSet | None
    new: RecordSet | None
    group: RecordKey
    reason: str = ""

    @property
    def key(self) -> RecordKey:
        rec = self.new if self.new is not None else self.old
        assert rec is not None
        return rec.key

    @property
    def record(self) -> RecordSet:
        rec = self.new if self.new is not None else self.old
        assert rec is not None
        return rec


@dataclass(frozen=True, slots=True)
class Guard:
    """A precondition a write depends on: ``key`` must be absent (``present=False``)
    or present when the change group lands.  Used for the join/leave race (the last owner
    deletes a record while another owner joins it)."""

    key: RecordKey
    present: bool
    group: RecordKey
    why: str = ""


@dataclass(frozen=True, slots=True)
class ZoneSnapshot:
    """What a provider read: the records, and whether the read was complete.  ``skipped``
    names the record sets the read saw and left out because gitdns does not manage their type
    (PTR, SSHFP, DNSSEC records, ...; never the SOA): nothing plans on them, and `gitdns import`
    reports each by name instead of dropping it silently."""

    zone: str
    records: tuple[RecordSet, ...]
    complete: bool = True
    version: str = ""
    names: frozenset[str] | None = field(default=None)
    skipped: tuple[RecordKey, ...] = ()

    def by_key(self) -> dict[RecordKey, RecordSet]:
        return {r.key: r for r in self.records}


def normalize_name(name: str) -> str:
    """Lower-case, strip one trailing dot."""
    name = name.strip().lower()
    return name[:-1] if name.endswith(".") else name


def in_zone(name: str, zone: str) -> bool:
    return name == zone or name.endswith("." + zone)
