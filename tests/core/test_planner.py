"""The pure planner, table by table (ownership and safety: docs/records.md)."""

from __future__ import annotations

from gitdns.core import builder
from gitdns.core.plan.values import Authority, PlanMode
from gitdns.core.records import Action, RecordKey
from tests.core import worked_example as we
from tests.core.planner_kit import R1, R2, Zone, a, cname


def test_worked_example_two_owners_publish_8_records_and_9_txt() -> None:
    zone = Zone()
    for c in (we.CLUSTER_A, we.CLUSTER_B):
        zone.sync(c.id, builder.desired_for_zone(we.STATE, c, we.ZONE))
    assert len(zone.data()) == 8
    assert len([t for t in zone.txt() if t.startswith("kuadrant-1hrxiems-")]) == 5
    assert len([t for t in zone.txt() if t.startswith("kuadrant-17ol5yav-")]) == 4
    assert zone.data()[("klb.api.example.com", "CNAME", "default")] == ("geo-eu.klb.api.example.com",)
    txt = zone.records[RecordKey("kuadrant-1hrxiems-cname-klb.api.example.com", "TXT", "GEO-EU")]
    assert txt.geo == "GEO-EU"
    assert txt.values == ("heritage=external-dns,external-dns/owner=cluster-a-uid,"
                          "external-dns/rev=1700000000.1111111,"
                          "external-dns/targets=geo-eu.klb.api.example.com,external-dns/version=1",)


def test_second_plan_is_empty_after_apply() -> None:
    zone = Zone()
    for c in (we.CLUSTER_A, we.CLUSTER_B):
        zone.sync(c.id, builder.desired_for_zone(we.STATE, c, we.ZONE))
    for c in (we.CLUSTER_A, we.CLUSTER_B):
        assert zone.plan(c.id, builder.desired_for_zone(we.STATE, c, we.ZONE)).empty


def test_txt_written_before_data_and_data_deleted_before_txt() -> None:
    zone = Zone()
    p = zone.sync("o1", [a("foo", "1.1.1.1")])
    assert [(c.action, c.key.type) for c in p.changes] == [(Action.CREATE, "TXT"), (Action.CREATE, "A")]
    p = zone.sync("o1", [])
    assert [(c.action, c.key.type) for c in p.changes] == [(Action.DELETE, "A"), (Action.DELETE, "TXT")]
    assert zone.records == {}


def test_two_owners_share_a_record_one_leaves_its_value_goes() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1")])
    zone.sync("o2", [a("foo", "2.2.2.2")])
    assert zone.data()[("foo.example.com", "A", "")] == ("1.1.1.1", "2.2.2.2")
    zone.sync("o2", [])
    assert zone.data() == {("foo.example.com", "A", ""): ("1.1.1.1",)}
    assert len(zone.txt()) == 1


def test_a_shared_address_stays_when_one_owner_leaves() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1", "9.9.9.9")])
    zone.sync("o2", [a("foo", "2.2.2.2", "9.9.9.9")])
    zone.sync("o1", [])
    assert zone.data() == {("foo.example.com", "A", ""): ("2.2.2.2", "9.9.9.9")}


def test_two_eu_clusters_one_leaves_the_geo_eu_row_stays() -> None:
    import dataclasses
    c3 = dataclasses.replace(we.cluster("cluster-c", "cluster-c-uid", "3.3.3.3", "GEO-EU"))
    state = dataclasses.replace(we.STATE, clusters=(we.CLUSTER_A, we.CLUSTER_B, c3))
    zone = Zone()
    for c in state.clusters:
        zone.sync(c.id, builder.desired_for_zone(state, c, we.ZONE))
    zone.sync(we.CLUSTER_A.id, [])
    data = zone.data()
    assert data[("klb.api.example.com", "CNAME", "GEO-EU")] == ("geo-eu.klb.api.example.com",)
    assert data[("klb.api.example.com", "CNAME", "default")] == ("geo-eu.klb.api.example.com",)
    assert ("1hrxie-30ics1.klb.api.example.com", "A", "") not in data
    assert not [t for t in zone.txt() if t.startswith("kuadrant-1hrxiems-")]
    assert zone.data()[("api.example.com", "CNAME", "")] == ("klb.api.example.com",)


def test_last_owner_leaving_removes_everything_no_dead_ends() -> None:
    zone = Zone()
    for c in (we.CLUSTER_A, we.CLUSTER_B):
        zone.sync(c.id, builder.desired_for_zone(we.STATE, c, we.ZONE))
    zone.sync(we.CLUSTER_B.id, [])
    assert not any(k[0].startswith("us.") or k[2] == "US" for k in zone.data())
    zone.sync(we.CLUSTER_A.id, [])
    assert zone.records == {}


def test_owner_on_older_revision_yields() -> None:
    zone = Zone()
    zone.sync("o2", [cname("www", "new.example.net")], rev=R2)
    p = zone.plan("o1", [cname("www", "old.example.net")], rev=R1)
    assert p.empty
    assert p.yielded
    assert p.conflicts[0].owners == ("o2",)


def test_owner_on_newer_revision_wins() -> None:
    zone = Zone()
    zone.sync("o1", [cname("www", "old.example.net")], rev=R1)
    zone.sync("o2", [cname("www", "new.example.net")], rev=R2)
    assert zone.data()[("www.example.com", "CNAME", "")] == ("new.example.net",)


def test_two_cname_targets_on_one_revision_is_a_conflict_not_a_union() -> None:
    zone = Zone()
    zone.sync("o1", [cname("www", "a.example.net")])
    p = zone.plan("o2", [cname("www", "b.example.net")])
    assert p.empty
    assert [(c.reason, c.owners) for c in p.conflicts] == [("ConflictingValues", ("o1",))]


def test_weight_disagreement_on_one_revision_names_the_other_owner() -> None:
    zone = Zone()
    row = cname("geo-eu.klb.api", "t.klb.api.example.com", set_id="t.klb.api.example.com", weight=120)
    zone.sync("o1", [row, a("t.klb.api", "1.1.1.1")])
    import dataclasses
    p = zone.plan("o2", [dataclasses.replace(row, weight=50), a("t.klb.api", "1.1.1.1")])
    assert not [c for c in p.changes if c.group == row.key]
    assert p.conflicts[0].reason == "ConflictingValues" and p.conflicts[0].owners == ("o1",)


def test_set_identifier_change_is_delete_plus_create() -> None:
    zone = Zone()
    target = a("geo-eu.klb.api", "1.1.1.1")
    zone.sync("o1", [cname("klb.api", "geo-eu.klb.api.example.com", set_id="GEO-EU", geo="GEO-EU"), target])
    p = zone.sync("o1", [cname("klb.api", "geo-eu.klb.api.example.com", set_id="GEO-DE", geo="GEO-DE"),
                         target])
    data = [(c.action, c.key.set_id) for c in p.changes if c.key.type == "CNAME"]
    assert (Action.DELETE, "GEO-EU") in data and (Action.CREATE, "GEO-DE") in data
    assert sorted(zone.data()) == [("geo-eu.klb.api.example.com", "A", ""),
                                   ("klb.api.example.com", "CNAME", "GEO-DE")]


def test_unowned_record_in_the_way_is_left_alone() -> None:
    zone = Zone([a("foo", "9.9.9.9")])
    p = zone.plan("o1", [a("foo", "1.1.1.1")])
    assert p.empty and p.conflicts[0].reason == "ForeignRecordInTheWay"


def test_a_wins_over_cname_and_the_cname_owner_withdraws() -> None:
    zone = Zone()
    zone.sync("o1", [cname("app", "lb.example.net")])
    zone.sync("o2", [a("x", "0.0.0.0")])
    # o2 wants A at app while o1's CNAME is there: o2 waits (conflict), o1 withdraws.
    p2 = zone.plan("o2", [a("x", "0.0.0.0"), a("app", "2.2.2.2")])
    assert p2.conflicts[0].reason == "RecordTypeConflict"
    # ... but announces its claim (TXT only), so o1 learns of it and withdraws its CNAME.
    assert [(c.action, c.key.type) for c in p2.changes] == [(Action.CREATE, "TXT")]
    zone.apply(p2)
    p1 = zone.sync("o1", [cname("app", "lb.example.net")])
    assert any(c.action is Action.DELETE and c.key.type == "CNAME" for c in p1.changes)
    zone.sync("o2", [a("x", "0.0.0.0"), a("app", "2.2.2.2")])
    assert zone.data()[("app.example.com", "A", "")] == ("2.2.2.2",)


def test_simple_vs_loadbalanced_on_one_host_keeps_the_old_records() -> None:
    zone = Zone()
    zone.sync("o1", [RecordSetA := a("api", "1.1.1.1")])
    p = zone.plan("o2", [cname("api", "klb.api.example.com", ttl=300)])
    assert p.empty
    assert p.conflicts[0].reason == "ConflictingStrategyDiscovered"
    assert zone.data()[("api.example.com", "A", "")] == RecordSetA.values


def test_switching_strategy_keeps_own_old_records_until_others_agree() -> None:
    zone = Zone()
    zone.sync("o1", [a("api", "1.1.1.1")])
    zone.sync("o2", [a("api", "2.2.2.2")])
    p = zone.plan("o1", [cname("api", "klb.api.example.com", ttl=300)])
    assert p.empty and p.conflicts[0].reason == "ConflictingStrategyDiscovered"


def test_upsert_only_never_deletes_or_shrinks() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1", "1.1.1.2"), a("bar", "3.3.3.3")])
    p = zone.sync("o1", [a("foo", "1.1.1.1")], mode=PlanMode.UPSERT_ONLY)
    assert not [c for c in p.changes if c.key.type == "A" or c.action is Action.DELETE]
    assert zone.data()[("foo.example.com", "A", "")] == ("1.1.1.1", "1.1.1.2")


def test_create_only_creates_missing_and_touches_nothing_else() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1")])
    p = zone.sync("o1", [a("foo", "9.9.9.9"), a("new", "5.5.5.5")], mode=PlanMode.CREATE_ONLY)
    assert {c.key.name for c in p.changes if c.key.type == "A"} == {"new.example.com"}
    assert zone.data()[("foo.example.com", "A", "")] == ("1.1.1.1",)


def test_mass_change_is_refused_then_allowed_by_ack_review_or_force() -> None:
    zone = Zone()
    recs = [a(f"h{i}", f"10.0.0.{i}") for i in range(20)]
    zone.sync("o1", recs)
    p = zone.plan("o1", recs[:10])
    assert p.stalled == "MassChangeRefused" and p.applicable == () and p.managed == 20
    for flag in ("acknowledged", "reviewed", "force"):
        assert zone.plan("o1", recs[:10], **{flag: True}).stalled is None
    assert zone.plan("o1", recs[:15]).stalled is None  # 5 of 20 = 25% < 30%


def test_partial_read_never_deletes() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1"), a("bar", "2.2.2.2")])
    from gitdns.core.plan.planner import plan
    from gitdns.core.plan.values import Intent, PlanPolicy
    p = plan(Intent("o1", (a("foo", "1.1.1.1"),), R1), zone.snapshot(complete=False),
             PlanPolicy(zone="example.com"))
    assert not [c for c in p.changes if c.action is Action.DELETE]
    assert any("partial" in n for n in p.notes)


def test_prune_owner_removes_a_dead_owner_whole_and_keeps_others() -> None:
    zone = Zone()
    zone.sync("dead", [a("foo", "1.1.1.1"), a("only-dead", "7.7.7.7")])
    zone.sync("live", [a("foo", "2.2.2.2")])
    zone.sync("live", [a("foo", "2.2.2.2")], authority=Authority.PRUNE_OWNER, prune_owner="dead")
    assert zone.data() == {("foo.example.com", "A", ""): ("2.2.2.2",)}
    assert all("kuadrant-" in t for t in zone.txt()) and len(zone.txt()) == 1


def test_inactive_groups_records_and_targets_removed_by_active_owner() -> None:
    zone = Zone()
    zone.sync("g1-owner", [a("foo", "1.1.1.1"), a("g1-only", "1.1.1.9")], group="g1")
    zone.sync("g2-owner", [a("foo", "2.2.2.2")], group="g2")
    zone.sync("ungrouped", [a("foo", "3.3.3.3")])
    zone.sync("g2-owner", [a("foo", "2.2.2.2")], group="g2",
              authority=Authority.INACTIVE_GROUPS, active_groups=frozenset({"g2"}))
    assert zone.data() == {("foo.example.com", "A", ""): ("2.2.2.2", "3.3.3.3")}
    assert len(zone.txt()) == 2


def test_group_matching_is_exact() -> None:
    zone = Zone()
    zone.sync("us-east-owner", [a("foo", "1.1.1.1")], group="us-east")
    zone.sync("east-owner", [a("foo", "2.2.2.2")], group="east",
              authority=Authority.INACTIVE_GROUPS, active_groups=frozenset({"east"}))
    assert zone.data() == {("foo.example.com", "A", ""): ("2.2.2.2",)}


def test_leaving_the_last_owner_guards_against_a_joiner_known_from_git() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1")])
    p = zone.plan("o1", [], known_owners=("o1", "o2"))
    assert len(p.guards) == 1 and not p.guards[0].present
    assert p.guards[0].key.name.startswith("kuadrant-") and "-a-foo.example.com" in p.guards[0].key.name
    # o2 announces (TXT first) between o1's read and o1's write: o1's delete is refused.
    zone.records.update({c.new.key: c.new for c in zone.plan("o2", [a("foo", "2.2.2.2")]).changes
                         if c.new is not None and c.key.type == "TXT"})
    from gitdns.core.store import apply_changes
    result = apply_changes(zone.records, p.changes, p.guards)
    assert result.refused and RecordKey("foo.example.com", "A") in result.records


def test_dead_end_cname_is_reported_not_touched_when_owned_by_others() -> None:
    from gitdns.core.registry import OwnerLabels, ownership_record
    dangling = cname("klb.api", "geo-eu.klb.api.example.com", ttl=300)
    zone = Zone([dangling, ownership_record(dangling, OwnerLabels("o1"))[0]])
    p = zone.plan("o2", [cname("api", "klb.api.example.com", ttl=300)])
    assert any(c.reason == "DeadEndCNAME" and c.owners == ("o1",) for c in p.conflicts)
    assert not [c for c in p.changes if c.group == dangling.key]


def test_own_dead_end_is_withdrawn() -> None:
    zone = Zone()
    p = zone.plan("o1", [cname("api", "klb.api.example.com", ttl=300),
                         cname("klb.api", "default.klb.api.example.com", ttl=300)])
    assert p.empty or all(c.key.type != "CNAME" for c in p.changes)
    assert any("dead end" in n for n in p.notes)


def test_ttl_change_by_sole_owner_is_an_update() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1", ttl=60)])
    p = zone.sync("o1", [a("foo", "1.1.1.1", ttl=120)])
    assert [c.action for c in p.changes if c.key.type == "A"] == [Action.UPDATE]
    assert zone.records[RecordKey("foo.example.com", "A")].ttl == 120


def test_a_new_revision_alone_does_not_rewrite_ownership_txt() -> None:
    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1")], rev=R1)
    assert zone.plan("o1", [a("foo", "1.1.1.1")], rev=R2).empty
    p = zone.sync("o1", [a("foo", "1.1.1.1", "1.1.1.2")], rev=R2)
    txt = [c.new for c in p.changes if c.key.type == "TXT"]
    assert txt and txt[0] is not None and "rev=1700000100.2222222" in txt[0].values[0]


def test_targets_overflow_is_a_note_and_the_owner_claims_the_record() -> None:
    zone = Zone()
    many = [f"10.0.{i // 250}.{i % 250}" for i in range(40)]
    p = zone.sync("o1", [a("big", *many)])
    assert not p.conflicts and any("TargetsLabelOverflow" in n for n in p.notes)
    zone.sync("o2", [a("big", "192.0.2.1")])
    zone.sync("o2", [])
    assert zone.data()[("big.example.com", "A", "")] == tuple(sorted(many))


def test_a_per_name_read_plans_only_the_names_read() -> None:
    from gitdns.core.plan.planner import plan
    from gitdns.core.plan.values import Intent, PlanPolicy
    from gitdns.core.records import ZoneSnapshot
    from gitdns.core.registry import txt_name

    zone = Zone()
    zone.sync("o1", [a("foo", "1.1.1.1"), a("bar", "2.2.2.2"), cname("api", "klb.api.example.com")])
    wanted = [a("foo", "1.1.1.9"), a("bar", "2.2.2.2"), cname("api", "klb.api.example.com")]
    names = frozenset({"foo.example.com", txt_name("o1", "A", "foo.example.com")})
    snap = ZoneSnapshot("example.com", tuple(r for r in zone.records.values() if r.name in names), names=names)
    p = plan(Intent("o1", tuple(wanted), R1), snap, PlanPolicy(zone="example.com"))
    assert {c.key.name for c in p.changes} == names  # bar and api were not read: untouched, not re-created
    assert not p.conflicts  # api's klb target was not read: unknown, not a dead end
