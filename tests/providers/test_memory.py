"""The record-store contract (memory here; `test_local` runs the same `StoreContract`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet
from gitdns.providers.base import CasGranularity, Provider, Routing
from gitdns.providers.memory import MemoryProvider

ZONE = "example.com"
WWW = RecordSet("www.example.com", "A", 60, ("192.0.2.1",))
TXT = RecordSet("kuadrant-owner-a-www.example.com", "TXT", 60, ('"heritage=external-dns"',))


def create(rec: RecordSet, group: RecordKey | None = None) -> Change:
    return Change(Action.CREATE, None, rec, group or rec.key)


def update(old: RecordSet, new: RecordSet, group: RecordKey | None = None) -> Change:
    return Change(Action.UPDATE, old, new, group or old.key)


def delete(old: RecordSet, group: RecordKey | None = None) -> Change:
    return Change(Action.DELETE, old, None, group or old.key)


class StoreContract:
    """Tests every record store passes.  Subclasses provide the ``provider`` fixture."""

    def test_is_a_provider_with_store_capabilities(self, provider: Provider) -> None:
        assert isinstance(provider, Provider)
        assert provider.capabilities.routing is Routing.GEO
        assert provider.capabilities.cas is CasGranularity.RECORD
        assert provider.capabilities.guards
        assert {"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA", "NS"} <= provider.capabilities.record_types

    def test_empty_zone_reads_empty(self, provider: Provider) -> None:
        snap = provider.read(ZONE)
        assert snap.records == () and snap.complete and snap.zone == ZONE

    def test_create_update_delete_round_trip(self, provider: Provider) -> None:
        assert provider.apply(ZONE, [create(WWW), create(TXT, WWW.key)]).ok
        assert set(provider.read(ZONE).records) == {WWW, TXT}
        new = WWW.with_values(["192.0.2.1", "192.0.2.2"])
        result = provider.apply(ZONE, [update(WWW, new)])
        assert result.ok and result.applied == (update(WWW, new),)
        assert provider.read(ZONE).by_key()[WWW.key] == new
        assert provider.apply(ZONE, [delete(new), delete(TXT, WWW.key)]).ok
        assert provider.read(ZONE).records == ()

    def test_version_moves_on_write_only(self, provider: Provider) -> None:
        v0 = provider.read(ZONE).version
        provider.apply(ZONE, [create(WWW)])
        v1 = provider.read(ZONE).version
        provider.apply(ZONE, [create(WWW)])  # refused: no write
        assert v0 != v1 == provider.read(ZONE).version

    def test_stale_update_refused_per_group_others_land(self, provider: Provider) -> None:
        other = RecordSet("api.example.com", "A", 60, ("192.0.2.9",))
        provider.apply(ZONE, [create(WWW), create(TXT, WWW.key), create(other)])
        stale = WWW.with_values(["192.0.2.7"])  # not what the store holds
        changes = [
            update(TXT, TXT.with_values(['"heritage=external-dns,x"']), WWW.key),
            update(stale, WWW.with_values(["192.0.2.3"]), WWW.key),
            update(other, other.with_values(["192.0.2.10"])),
        ]
        result = provider.apply(ZONE, changes)
        assert [g for g, _ in result.refused] == [WWW.key]
        assert "changed since it was read" in result.refused[0][1]
        got = provider.read(ZONE).by_key()
        assert got[WWW.key] == WWW and got[TXT.key] == TXT  # nothing of the stale group landed
        assert got[other.key].values == ("192.0.2.10",)

    @pytest.mark.parametrize(
        "stale",
        [
            replace(WWW, ttl=300),
            replace(WWW, weight=10),
            replace(WWW, geo="US"),
        ],
        ids=["ttl", "weight", "geo"],
    )
    def test_update_compares_ttl_and_routing(self, provider: Provider, stale: RecordSet) -> None:
        provider.apply(ZONE, [create(WWW)])
        result = provider.apply(ZONE, [update(stale, WWW.with_values(["192.0.2.5"]))])
        assert result.refused and provider.read(ZONE).by_key()[WWW.key] == WWW

    def test_create_on_existing_key_refused(self, provider: Provider) -> None:
        provider.apply(ZONE, [create(WWW)])
        result = provider.apply(ZONE, [create(WWW.with_values(["192.0.2.99"]))])
        assert result.refused and "already exists" in result.refused[0][1]
        assert provider.read(ZONE).by_key()[WWW.key] == WWW

    def test_delete_of_missing_refused(self, provider: Provider) -> None:
        result = provider.apply(ZONE, [delete(WWW)])
        assert result.refused and "no longer exists" in result.refused[0][1]

    def test_guards_refuse(self, provider: Provider) -> None:
        provider.apply(ZONE, [create(TXT)])
        must_be_absent = Guard(TXT.key, present=False, group=WWW.key, why="co-owner joined")
        result = provider.apply(ZONE, [create(WWW)], [must_be_absent])
        assert result.refused and "appeared (co-owner joined)" in result.refused[0][1]
        missing = RecordKey("kuadrant-b-www.example.com", "TXT")
        result = provider.apply(ZONE, [create(WWW)], [Guard(missing, present=True, group=WWW.key)])
        assert result.refused and "disappeared" in result.refused[0][1]
        assert WWW.key not in provider.read(ZONE).by_key()
        assert provider.apply(ZONE, [create(WWW)], [Guard(TXT.key, present=True, group=WWW.key)]).ok

    def test_routed_records_round_trip_exactly(
        self, provider: Provider, worked_example: tuple[RecordSet, ...]
    ) -> None:
        result = provider.apply(ZONE, [create(r) for r in worked_example])
        assert result.ok and len(result.applied) == 8
        assert provider.read(ZONE).records == tuple(sorted(worked_example, key=lambda r: r.key))

    def test_read_filters_names(self, provider: Provider, worked_example: tuple[RecordSet, ...]) -> None:
        provider.apply(ZONE, [create(r) for r in worked_example])
        snap = provider.read(ZONE, names=["KLB.api.example.com.", "nope.example.com"])
        assert snap.names == frozenset({"klb.api.example.com", "nope.example.com"})
        assert {r.set_id for r in snap.records} == {"GEO-EU", "US", "default"}

    def test_invalid_changes_fail_their_group_only(self, provider: Provider) -> None:
        outside = RecordSet("www.example.org", "A", 60, ("192.0.2.1",))
        result = provider.apply(ZONE, [create(outside), create(WWW)])
        assert [g for g, _ in result.failed] == [outside.key] and "outside zone" in result.failed[0][1]
        assert result.applied == (create(WWW),)

    def test_zones_lists_written_zones(self, provider: Provider) -> None:
        provider.apply(ZONE, [create(WWW)])
        assert [z.domain for z in provider.zones()] == [ZONE]


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def provider(self) -> MemoryProvider:
        return MemoryProvider()


def test_memory_name_and_initial_zones(worked_example: tuple[RecordSet, ...]) -> None:
    provider = MemoryProvider({ZONE: worked_example})
    assert provider.name == "memory"
    assert len(provider.read(ZONE).records) == 8


def test_memory_version_counts_successful_writes() -> None:
    provider = MemoryProvider()
    before = provider.version
    provider.apply(ZONE, [create(WWW)])
    provider.apply(ZONE, [create(WWW)])
    assert int(provider.version) == int(before) + 1


def test_memory_concurrent_threads_exactly_one_wins() -> None:
    from concurrent.futures import ThreadPoolExecutor

    provider = MemoryProvider({ZONE: [WWW]})
    news = [WWW.with_values([f"192.0.2.{i}"]) for i in range(10, 30)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda new: provider.apply(ZONE, [update(WWW, new)]), news))
    assert sum(r.ok for r in results) == 1
