"""Active groups in the zone: mirror, serials, break-glass, exact matching, relabelling."""

from __future__ import annotations

from gitdns.core import groups as g
from gitdns.core.model import ActiveGroups
from gitdns.core.records import RecordSet, ZoneSnapshot
from gitdns.core.store import apply_changes
from tests.core.planner_kit import Zone, a

ZONE = "example.com"


def snap(*records: RecordSet) -> ZoneSnapshot:
    return ZoneSnapshot(ZONE, records)


def ag(serial: int, *groups: str) -> ActiveGroups:
    return ActiveGroups("groups", "example-com", serial, groups)


def test_values_match_the_contract() -> None:
    assert g.kuadrant_value(["g2", "g1"]) == "version=1;groups=g1&&g2"
    assert g.gitdns_value(7, ["g1"]) == "version=1;serial=7;groups=g1"
    assert g.kuadrant_name(ZONE) == "kuadrant-active-groups.example.com"


def test_git_ahead_mirrors_both_records_and_reads_back() -> None:
    d = g.decide(ag(3, "site-a"), g.read_zone_groups(snap(), ZONE), ZONE)
    assert d.active == frozenset({"site-a"}) and not d.diverged and len(d.write) == 2
    records = apply_changes({}, d.write).records
    state = g.read_zone_groups(snap(*records.values()), ZONE)
    assert (state.serial, state.groups, state.kuadrant) == (3, ("site-a",), ("site-a",))
    assert g.decide(ag(3, "site-a"), state, ZONE).write == ()


def test_an_agent_on_an_older_revision_never_overwrites_a_higher_serial() -> None:
    records = apply_changes({}, g.decide(ag(5, "site-b"), g.read_zone_groups(snap(), ZONE), ZONE).write).records
    state = g.read_zone_groups(snap(*records.values()), ZONE)
    old = g.decide(ag(4, "site-a"), state, ZONE)
    assert old.write == () and old.active == frozenset({"site-b"}) and old.diverged


def test_break_glass_writes_a_higher_serial_and_agents_follow_the_zone() -> None:
    state = g.read_zone_groups(snap(*apply_changes({}, g.decide(ag(2, "site-a"), g.read_zone_groups(
        snap(), ZONE), ZONE).write).records.values()), ZONE)
    serial, changes = g.direct_changes(state, ZONE, ["site-b"], git_serial=2)
    assert serial == 3
    after = g.read_zone_groups(snap(*apply_changes({r.key: r for r in (state.gitdns_record, state.kuadrant_record)
                                                     if r}, changes).records.values()), ZONE)
    d = g.decide(ag(2, "site-a"), after, ZONE)
    assert d.diverged and d.active == frozenset({"site-b"}) and d.write == ()
    assert g.decide(ag(3, "site-b"), after, ZONE).diverged is False  # git caught up


def test_membership_is_exact() -> None:
    active = frozenset({"us-east"})
    assert not g.is_active("east", active)
    assert g.is_active("us-east", active)
    assert g.is_active(None, active) and g.is_active("anything", frozenset())


def test_relabel_updates_only_own_entries_with_a_stale_group() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1")], group="site-a")
    zone.sync("o2", [a("foo", "2.2.2.2")], group="site-a")
    changes = g.relabel(zone.snapshot(), "o1", "site-b")
    assert len(changes) == 1 and "group=site-b" in changes[0].new.values[0]  # type: ignore[union-attr]
    assert g.relabel(zone.snapshot(), "o1", "site-a") == []
