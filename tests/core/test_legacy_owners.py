"""Kuadrant's legacy ownership TXT whose owner label joins several owners with ``&&``.

dns-operator wrote one unversioned TXT per record before it versioned its registry; when a
record had several owners the label listed them all (``owner=a&&b``).  Its reader splits the
label (``NewLabelsFromString`` and ``Records`` in internal/external-dns/registry/txt.go, with
``SplitLabels`` of internal/external-dns/plan/labels.go), every owner it names owns the record,
and its writer never rewrites or deletes such a TXT: each owner writes and deletes only its own
versioned TXT beside it (the ``txt/force-update`` migration of ``Records``; ``ApplyChanges``
deletes ``generateTXTRecord`` of its own owner id), and the joint one waits for
``kubectl kuadrant-dns prune-legacy-txt-records`` (cmd/plugin/cleanup_old_txt.go).  When an
owner leaves a record others keep, dns-operator removes the values it published "but not if
we are going to be left with none" (``calculateDesired``, internal/external-dns/plan/plan.go).
All read at github.com/Kuadrant/dns-operator commit 57b9db50acedff236622b5529e4e8f1c515e4ec6.
"""

from __future__ import annotations

import dataclasses

import pytest

from gitdns.core import registry
from gitdns.core.groups import relabel
from gitdns.core.owner import zone as own
from gitdns.core.plan.values import Authority
from gitdns.core.records import RecordKey, RecordSet
from gitdns.core.registry import OwnerLabels
from tests.core.planner_kit import ZONE, Zone, a

FOO = f"foo.{ZONE}"
FOO_A = RecordKey(FOO, "A")
JOINT = RecordSet(f"kuadrant-a-{FOO}", "TXT", 300, ('"heritage=external-dns,external-dns/owner=o1&&o2"',))

# The planner reads every owner of a joint TXT (planner.decode_zone files each entry of
# registry.decode_entries with registry.add_entry); a joint entry of the planning owner keeps its
# claim on the whole record (planner._new_content), and an owner claiming the whole record keeps
# it from being emptied (planresolve.resolve_union, dns-operator's "not if we are going to be
# left with none").


def joint_zone(*values: str) -> Zone:
    return Zone([a("foo", *values), JOINT])


def versioned_txt(owner: str, *targets: str) -> RecordSet:
    txt, _ = registry.ownership_record(a("foo", *targets), OwnerLabels(owner, targets=targets), ZONE)
    return txt


def test_a_joint_txt_is_one_entry_per_owner_each_claiming_the_whole_record() -> None:
    entries = registry.decode_entries(JOINT)
    assert [e.owner for e in entries] == ["o1", "o2"]
    assert all(e.key == FOO_A and e.joint == ("o1", "o2") and e.labels.targets is None for e in entries)
    assert all(e.labels.version is None and not e.versioned for e in entries)
    whole = registry.decode_entry(JOINT)  # the TXT as written: which record it claims
    assert whole is not None and whole.owner == "o1&&o2" and whole.joint == ("o1", "o2") and whole.key == FOO_A


@pytest.mark.parametrize(("label", "owners"), [
    ("o1", ("o1",)), ("o2&&o1", ("o1", "o2")), ("o1&&o1", ("o1",)), ("o1&&", ("o1",)), ("&&", ()),
])
def test_owner_labels_split_as_kuadrant_splits_them(label: str, owners: tuple[str, ...]) -> None:
    assert registry.split_owners(label) == owners


def test_a_label_joining_one_owner_is_that_owners_own_txt() -> None:
    txt = RecordSet(f"kuadrant-a-{FOO}", "TXT", 300, ("heritage=external-dns,external-dns/owner=o1&&o1",))
    (entry,) = registry.decode_entries(txt)
    assert entry.owner == "o1" and entry.joint == ()


def test_no_owner_id_joining_two_can_be_written() -> None:
    with pytest.raises(ValueError, match="owner"):
        registry.encode(OwnerLabels("o1&&o2"))


@pytest.mark.parametrize("reverse", [False, True])
def test_the_versioned_entry_counts_whatever_the_order_read(reverse: bool) -> None:
    versioned = registry.decode_entries(versioned_txt("o1", "1.1.1.1"))[0]
    own_legacy = registry.decode_entries(
        RecordSet(f"kuadrant-a-{FOO}", "TXT", 300, ("heritage=external-dns,external-dns/owner=o1",)))[0]
    joint = registry.decode_entries(JOINT)[0]
    found: dict[RecordKey, dict[str, registry.OwnershipEntry]] = {}
    order = [joint, own_legacy, versioned]
    for entry in reversed(order) if reverse else order:
        registry.add_entry(found, entry)
    assert found[FOO_A]["o1"] == dataclasses.replace(versioned, superseded=(own_legacy.txt,))  # not the joint one
    assert registry.prefer(joint, own_legacy) == own_legacy == registry.prefer(own_legacy, joint)


def test_owners_lists_each_owner_of_a_joint_txt_as_legacy() -> None:
    zone = joint_zone("1.1.1.1")
    rows = {r.owner: r for r in own.owners(zone.snapshot(), known=())}
    assert set(rows) == {"o1", "o2"}
    assert all(r.kind is own.OwnerKind.LEGACY and r.keys == (FOO_A,) for r in rows.values())
    assert rows["o1"].shared_with == ("o2",) and rows["o2"].shared_with == ("o1",)


def test_joining_writes_the_owners_own_txt_beside_the_joint_one() -> None:
    zone = joint_zone("1.1.1.1", "2.2.2.2")
    p = zone.sync("o1", [a("foo", "1.1.1.1")])
    assert all(c.old != JOINT for c in p.changes)
    assert zone.records[JOINT.key] == JOINT
    assert zone.data()[(FOO, "A", "")] == ("1.1.1.1", "2.2.2.2")  # o2 claims the whole record
    assert registry.txt_name("o1", "A", FOO) in zone.txt()
    assert zone.plan("o1", [a("foo", "1.1.1.1")]).empty


def test_leaving_removes_only_the_owners_own_values_and_txt() -> None:
    zone = joint_zone("1.1.1.1", "2.2.2.2")
    zone.sync("o1", [a("foo", "1.1.1.1")])
    zone.sync("o1", [])
    assert zone.records[JOINT.key] == JOINT
    assert zone.data()[(FOO, "A", "")] == ("2.2.2.2",)
    assert registry.txt_name("o1", "A", FOO) not in zone.txt()
    assert zone.plan("o1", []).empty


def test_leaving_beside_a_joint_txt_guards_on_it_once() -> None:
    """An owner leaving a record the joint TXT's owners keep: its TXT delete is conditional on
    the joint TXT (a ``present`` guard) once, not once per owner the TXT names (Route53 says
    a guard as an unchanged DELETE/CREATE pair; two pairs of one record refuse the request)."""
    zone = Zone([a("foo", "1.1.1.1", "2.2.2.2"), JOINT.with_values(
        ('"heritage=external-dns,external-dns/owner=o2&&o3"',))])
    zone.sync("o1", [a("foo", "1.1.1.1")])
    leave = zone.plan("o1", [])
    assert [(g.key, g.present) for g in leave.guards] == [(JOINT.key, True)]
    zone.apply(leave)
    assert registry.txt_name("o1", "A", FOO) not in zone.txt()


def test_an_owner_only_the_joint_txt_names_removes_nothing_when_it_wants_nothing() -> None:
    zone = joint_zone("1.1.1.1", "2.2.2.2")
    before = dict(zone.records)
    assert zone.plan("o1", []).empty
    assert zone.plan("o2", []).empty
    assert zone.records == before


def test_prune_owner_of_one_joint_owner_keeps_the_record_and_the_joint_txt() -> None:
    zone = joint_zone("1.1.1.1", "2.2.2.2")
    zone.sync("o3", [a("foo", "3.3.3.3")])
    p = zone.plan("o3", [a("foo", "3.3.3.3")], authority=Authority.PRUNE_OWNER, prune_owner="o2")
    zone.apply(p)
    assert zone.records[JOINT.key] == JOINT
    assert zone.data()[(FOO, "A", "")] == ("1.1.1.1", "2.2.2.2", "3.3.3.3")


def test_a_joint_label_is_no_owner_of_its_own_so_pruning_it_does_nothing() -> None:
    zone = joint_zone("1.1.1.1", "2.2.2.2")
    assert zone.plan("o1&&o2", []).empty


def test_the_last_own_value_stays_while_a_joint_owner_still_holds_the_record() -> None:
    zone = joint_zone("1.1.1.1")
    zone.sync("o1", [a("foo", "1.1.1.1")])
    zone.sync("o1", [])
    assert zone.data()[(FOO, "A", "")] == ("1.1.1.1",)  # o2 still owns it: not left with none
    assert zone.records[JOINT.key] == JOINT
    assert registry.txt_name("o1", "A", FOO) not in zone.txt()


def test_a_joint_owner_that_published_nothing_of_its_own_drops_no_value_on_leaving() -> None:
    zone = joint_zone("1.1.1.1", "2.2.2.2")
    zone.sync("o3", [a("foo", "3.3.3.3")])
    zone.sync("o3", [])  # o3's own value goes; o1 and o2 keep theirs
    assert zone.data()[(FOO, "A", "")] == ("1.1.1.1", "2.2.2.2")
    zone.sync("o2", [a("foo", "2.2.2.2")])
    assert (RecordKey(registry.txt_name("o2", "A", FOO), "TXT") in zone.records)
    assert {r.owner for r in own.owners(zone.snapshot(), known=()) if FOO_A in r.keys} == {"o1", "o2"}
    assert zone.plan("o1", []).empty  # o1 is named only by the joint TXT: none of the values is provably its


def test_an_inactive_agent_relabelling_its_entries_leaves_the_joint_txt_alone() -> None:
    zone = joint_zone("1.1.1.1")
    assert relabel(zone.snapshot(), "o1", "site-a") == []


def _cname_owned_by(owner: str) -> list[RecordSet]:
    data = RecordSet(FOO, "CNAME", 60, ("lb.example.net",))
    return [data, registry.ownership_record(data, OwnerLabels(owner), ZONE)[0]]


def test_announcing_replaces_the_owners_own_legacy_txt_with_its_versioned_one() -> None:
    # o1 wants an A where o2 owns a CNAME: it only announces its claim (RecordTypeConflict)
    own_legacy = RecordSet(f"kuadrant-a-{FOO}", "TXT", 60, ("heritage=external-dns,external-dns/owner=o1",))
    zone = Zone([*_cname_owned_by("o2"), own_legacy])
    p = zone.plan("o1", [a("foo", "1.1.1.1")])
    assert [c.reason for c in p.conflicts] == ["RecordTypeConflict"]
    zone.apply(p)
    assert own_legacy.key not in zone.records
    assert registry.txt_name("o1", "A", FOO) in zone.txt()
    assert zone.plan("o1", [a("foo", "1.1.1.1")]).empty


def test_announcing_leaves_a_joint_txt_alone() -> None:
    zone = Zone([*_cname_owned_by("o3"), JOINT])
    zone.sync("o1", [a("foo", "1.1.1.1")])
    assert zone.records[JOINT.key] == JOINT
    assert registry.txt_name("o1", "A", FOO) in zone.txt()


@pytest.mark.parametrize("wants", [True, False])
def test_an_owners_own_legacy_txt_beside_its_versioned_one_goes_on_its_next_pass(wants: bool) -> None:
    own_legacy = RecordSet(f"kuadrant-a-{FOO}", "TXT", 300, ("heritage=external-dns,external-dns/owner=o1",))
    zone = Zone([a("foo", "1.1.1.1"), versioned_txt("o1", "1.1.1.1"), own_legacy])
    assert own.owners(zone.snapshot(), known=())[0].keys == (FOO_A,)
    zone.sync("o1", [a("foo", "1.1.1.1")] if wants else [])
    assert own_legacy.key not in zone.records
    assert zone.plan("o1", [a("foo", "1.1.1.1")] if wants else []).empty
    assert (registry.txt_name("o1", "A", FOO) in zone.txt()) is wants
