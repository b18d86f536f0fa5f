"""The provider conformance suite: one suite for every provider.

Each test drives the real planner against a provider: apply a sequence of desired states,
re-read, re-plan — the second plan must be empty.  Tests are gated by the provider's
declared capabilities.  A provider joins by adding a `ProviderCase` to `CASES` in
`test_conformance.py` (or its own module, subclassing `Conformance`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitdns.core import builder
from gitdns.core.model import Revision
from gitdns.core.plan.planner import plan
from gitdns.core.plan.values import Intent, Plan, PlanPolicy
from gitdns.core.records import Action, Change, RecordKey, RecordSet
from gitdns.providers.base import CasGranularity, Provider, Routing
from tests.core import worked_example as we

REV = Revision(1_700_000_000, "c0ffee0123456789")
OWNERS = ("owner-a", "owner-b", "owner-c")
# take ``present`` guards only (the other owner still holds its TXT): an unchanged DELETE/CREATE
# pair of that TXT in the same atomic request; ``absent`` guards they cannot express
PRESENT_GUARDS = frozenset({"route53"})


@dataclass(frozen=True)
class ProviderCase:
    name: str
    make: Callable[[Path], Provider]
    zone: str = "example.com"


class Conformance:
    """Subclass with a `case` fixture returning a `ProviderCase`."""

    @pytest.fixture
    def provider(self, case: ProviderCase, tmp_path: Path) -> Provider:
        return case.make(tmp_path)

    @pytest.fixture
    def zone(self, case: ProviderCase) -> str:
        return case.zone

    # --- helpers -------------------------------------------------------------------
    @staticmethod
    def plan(provider: Provider, zone: str, owner: str, records: Sequence[RecordSet],
             **policy: object) -> Plan:
        pol = PlanPolicy(zone=zone, known_owners=OWNERS, **policy)  # type: ignore[arg-type]
        return plan(Intent(owner, tuple(records), REV), provider.read(zone), pol)

    def sync(self, provider: Provider, zone: str, owner: str, records: Sequence[RecordSet]) -> Plan:
        p = self.plan(provider, zone, owner, records)
        result = provider.apply(zone, p.applicable, p.guards)
        assert result.ok, (result.refused, result.failed)
        assert self.plan(provider, zone, owner, records).empty, "the second plan must be empty"
        return p

    @staticmethod
    def data(provider: Provider, zone: str) -> dict[RecordKey, tuple[str, ...]]:
        return {r.key: r.values for r in provider.read(zone).records if not r.name.startswith("kuadrant-")}

    @staticmethod
    def a(zone: str, name: str, *values: str, ttl: int = 60) -> RecordSet:
        return RecordSet(f"{name}.{zone}", "A", ttl, tuple(values))

    # --- the suite -----------------------------------------------------------------
    def test_create_then_second_plan_empty(self, provider: Provider, zone: str) -> None:
        p = self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.1", "192.0.2.2")])
        assert p.summary()["create"] == 2
        assert self.data(provider, zone)[RecordKey(f"www.{zone}", "A")] == ("192.0.2.1", "192.0.2.2")

    def test_update_values_and_ttl(self, provider: Provider, zone: str) -> None:
        self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.1")])
        self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.9", ttl=120)])
        recs = {r.key: r for r in provider.read(zone).records}
        assert recs[RecordKey(f"www.{zone}", "A")].values == ("192.0.2.9",)
        assert recs[RecordKey(f"www.{zone}", "A")].ttl == 120

    def test_delete_removes_data_and_txt(self, provider: Provider, zone: str) -> None:
        before = {r.key for r in provider.read(zone).records}
        self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.1")])
        self.sync(provider, zone, "owner-a", [])
        assert {r.key for r in provider.read(zone).records} == before

    def test_multi_owner_merge_and_leave(self, provider: Provider, zone: str) -> None:
        self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.1", "192.0.2.7")])
        self.sync(provider, zone, "owner-b", [self.a(zone, "www", "192.0.2.2", "192.0.2.7")])
        key = RecordKey(f"www.{zone}", "A")
        assert self.data(provider, zone)[key] == ("192.0.2.1", "192.0.2.2", "192.0.2.7")
        assert self.plan(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.1", "192.0.2.7")]).empty
        self.sync(provider, zone, "owner-a", [])
        assert self.data(provider, zone)[key] == ("192.0.2.2", "192.0.2.7")

    def test_loadbalanced_layout_where_the_provider_routes(self, provider: Provider, zone: str) -> None:
        if provider.capabilities.routing is not Routing.GEO:
            pytest.skip(f"{provider.name} has no geo routing")
        state = dataclasses.replace(we.STATE, zones=(dataclasses.replace(we.ZONE, domain=zone),))
        for c in (we.CLUSTER_A, we.CLUSTER_B):
            records = builder.desired_for_zone(state, c, state.zones[0])
            if zone != "example.com":
                pytest.skip("the worked example is in example.com")
            self.sync(provider, zone, c.id, records)
        data = self.data(provider, zone)
        assert len(data) == 8
        assert data[RecordKey("klb.api.example.com", "CNAME", "default")] == ("geo-eu.klb.api.example.com",)
        txt = [r for r in provider.read(zone).records if r.name.startswith("kuadrant-")]
        assert len(txt) == 9

    def test_stale_write_is_refused(self, provider: Provider, zone: str) -> None:
        if provider.capabilities.cas is CasGranularity.NONE:
            pytest.skip(f"{provider.name} cannot refuse a stale write")
        self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.1")])
        stale = self.plan(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.5")])
        self.sync(provider, zone, "owner-b", [self.a(zone, "www", "192.0.2.2")])
        result = provider.apply(zone, stale.applicable, stale.guards)
        assert result.refused and not result.applied
        assert self.data(provider, zone)[RecordKey(f"www.{zone}", "A")] == ("192.0.2.1", "192.0.2.2")
        self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.5")])
        assert self.data(provider, zone)[RecordKey(f"www.{zone}", "A")] == ("192.0.2.2", "192.0.2.5")

    def test_join_leave_race_loses_nothing(self, provider: Provider, zone: str) -> None:
        if not provider.capabilities.guards:
            pytest.skip(f"{provider.name} cannot make a write conditional on other names")
        self.sync(provider, zone, "owner-a", [self.a(zone, "www", "192.0.2.1")])
        leave = self.plan(provider, zone, "owner-a", [])
        join = self.plan(provider, zone, "owner-b", [self.a(zone, "www", "192.0.2.1", "192.0.2.2")])
        txt_first = [c for c in join.changes if c.key.type == "TXT"]
        assert provider.apply(zone, txt_first).ok  # the joiner announces, then the leaver writes
        assert provider.apply(zone, leave.applicable, leave.guards).refused
        self.sync(provider, zone, "owner-b", [self.a(zone, "www", "192.0.2.1", "192.0.2.2")])
        self.sync(provider, zone, "owner-a", [])
        assert self.data(provider, zone)[RecordKey(f"www.{zone}", "A")] == ("192.0.2.1", "192.0.2.2")

    def test_owners_leaving_at_once_leave_no_record_behind(self, provider: Provider, zone: str) -> None:
        """Two owners of one record leave together, each planning from the same read: each leaves
        the record to the other.  Unless the TXT delete is conditional on the other's TXT, both
        TXT go and the record stays with no owner, foreign for good (found by bench/soak.py: a
        static record removed from git, every agent leaving it at once).  The second write is
        refused; re-planned, its owner is the last and deletes the record."""
        if not provider.capabilities.guards and provider.name not in PRESENT_GUARDS:
            pytest.skip(f"{provider.name} cannot make a write conditional on another record")
        for rec in (RecordSet(f"s2.{zone}", "CNAME", 300, ("other.example.net",)),
                    self.a(zone, "shared", "192.0.2.1", "192.0.2.2")):
            self.sync(provider, zone, "owner-a", [rec])
            self.sync(provider, zone, "owner-b", [rec])
            leave_a = self.plan(provider, zone, "owner-a", [])
            leave_b = self.plan(provider, zone, "owner-b", [])
            assert [c.key.type for c in leave_a.applicable] == ["TXT"] and leave_a.guards
            assert provider.apply(zone, leave_a.applicable, leave_a.guards).ok
            assert provider.apply(zone, leave_b.applicable, leave_b.guards).refused
            self.sync(provider, zone, "owner-b", [])
            left = [r.key for r in provider.read(zone).records
                    if r.name == rec.name or r.name.endswith(f"-{rec.type.lower()}-{rec.name}")]
            assert not left, f"{left} left behind"

    def test_txt_is_written_before_data_and_a_crash_between_recovers(self, provider: Provider,
                                                                     zone: str) -> None:
        want = [self.a(zone, "www", "192.0.2.1")]
        p = self.plan(provider, zone, "owner-a", want)
        assert [(c.action, c.key.type) for c in p.changes] == [(Action.CREATE, "TXT"), (Action.CREATE, "A")]
        assert provider.apply(zone, p.changes[:1]).ok  # crash after the TXT landed
        again = self.plan(provider, zone, "owner-a", want)
        assert [(c.action, c.key.type) for c in again.changes] == [(Action.CREATE, "A")]
        self.sync(provider, zone, "owner-a", want)

    def test_foreign_records_are_never_touched(self, provider: Provider, zone: str) -> None:
        foreign = self.a(zone, "legacy", "198.51.100.1")
        assert provider.apply(zone, [Change(Action.CREATE, None, foreign, foreign.key)]).ok
        p = self.plan(provider, zone, "owner-a", [self.a(zone, "legacy", "192.0.2.1")])
        assert p.empty and p.conflicts[0].reason == "ForeignRecordInTheWay"
        self.sync(provider, zone, "owner-a", [])
        assert self.data(provider, zone)[foreign.key] == foreign.values
