"""A tiny harness for planner tests: a zone as a dict, applied through the store's CAS."""

from __future__ import annotations

from collections.abc import Iterable

from gitdns.core.model import Revision
from gitdns.core.plan.planner import plan
from gitdns.core.plan.values import Intent, Plan, PlanPolicy
from gitdns.core.records import RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.store import apply_changes

ZONE = "example.com"
R1 = Revision(1_700_000_000, "1111111aaaa")
R2 = Revision(1_700_000_100, "2222222bbbb")


class Zone:
    def __init__(self, records: Iterable[RecordSet] = ()) -> None:
        self.records: dict[RecordKey, RecordSet] = {r.key: r for r in records}

    def snapshot(self, complete: bool = True) -> ZoneSnapshot:
        return ZoneSnapshot(ZONE, tuple(self.records.values()), complete=complete)

    def plan(self, owner: str, records: Iterable[RecordSet], rev: Revision | None = R1,
             group: str | None = None, **policy: object) -> Plan:
        pol = PlanPolicy(zone=ZONE, **policy)  # type: ignore[arg-type]
        return plan(Intent(owner, tuple(records), rev, group), self.snapshot(), pol)

    def apply(self, p: Plan) -> None:
        result = apply_changes(self.records, p.applicable, p.guards)
        assert not result.refused, result.refused
        self.records = result.records

    def sync(self, owner: str, records: Iterable[RecordSet], **kw: object) -> Plan:
        p = self.plan(owner, records, **kw)  # type: ignore[arg-type]
        self.apply(p)
        return p

    def data(self) -> dict[tuple[str, str, str], tuple[str, ...]]:
        return {(k.name, k.type, k.set_id): r.values for k, r in self.records.items()
                if not k.name.startswith("kuadrant-")}

    def txt(self) -> list[str]:
        """Ownership TXT record names, one per record set (names repeat across set ids)."""
        return sorted(k.name for k in self.records if k.name.startswith("kuadrant-"))


def a(name: str, *values: str, ttl: int = 60) -> RecordSet:
    return RecordSet(f"{name}.{ZONE}", "A", ttl, tuple(values))


def cname(name: str, target: str, ttl: int = 60, **kw: object) -> RecordSet:
    return RecordSet(f"{name}.{ZONE}", "CNAME", ttl, (target,), **kw)  # type: ignore[arg-type]
