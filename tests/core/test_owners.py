"""Heartbeats, owner listing and explicit adoption."""

from __future__ import annotations

from gitdns.core.owner import zone as own
from gitdns.core.plan.planner import plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import RecordKey, ZoneSnapshot
from gitdns.core.store import apply_changes
from tests.core.planner_kit import R1, Zone, a


def test_heartbeat_round_trip_and_forgery_rejected() -> None:
    rec = own.heartbeat_record("cluster-a-uid", "example.com", 1234.9)
    assert rec.name == "gitdns-heartbeat-1hrxiems.example.com"
    assert own.parse_heartbeat(rec) == ("cluster-a-uid", 1234)
    forged = own.heartbeat_record("cluster-b-uid", "example.com", 1)
    forged = type(forged)(rec.name, "TXT", 60, forged.values)
    assert own.parse_heartbeat(forged) is None


def test_owners_lists_records_groups_heartbeats_and_git_knowledge() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1"), a("bar", "2.2.2.2")], group="g1")
    zone.sync("o2", [a("foo", "3.3.3.3")])
    hb = own.heartbeat_record("o1", "example.com", 500)
    zone.records[hb.key] = hb
    rows = {r.owner: r for r in own.owners(zone.snapshot(), known={"o1"})}
    assert rows["o1"].records == 2 and rows["o1"].groups == ("g1",) and rows["o1"].heartbeat == 500
    assert rows["o1"].known and not rows["o2"].known and rows["o2"].heartbeat is None
    assert not rows["o1"].stale(10_000, 100)  # known to git: never stale
    assert not rows["o2"].stale(10_000, 100)  # no heartbeat: age unknown, never pruned automatically


def test_heartbeat_is_invisible_to_the_planner() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1")])
    hb = own.heartbeat_record("o2", "example.com", 500)
    zone.records[hb.key] = hb
    assert zone.plan("o1", [a("foo", "1.1.1.1")]).empty
    zone.sync("o1", [])
    assert hb.key in zone.records


def test_adopt_makes_a_foreign_record_owned_then_managed() -> None:
    zone = Zone([a("legacy", "9.9.9.9")])
    foreign = own.foreign_records(zone.snapshot(), ["legacy.example.com"])
    assert [r.key for r in foreign] == [RecordKey("legacy.example.com", "A")]
    result = apply_changes(zone.records, own.adopt_changes(foreign, "o1", "example.com", rev=R1.label, group=None))
    zone.records = result.records
    assert not own.foreign_records(zone.snapshot(), ["legacy.example.com"])
    p = plan(Intent("o1", (a("legacy", "1.1.1.1"),), R1), ZoneSnapshot("example.com", tuple(zone.records.values())),
             PlanPolicy(zone="example.com"))
    assert not p.conflicts and any(c.key.type == "A" for c in p.changes)
