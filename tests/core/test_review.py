"""Reviewed removals and switches exempt a mass change from the guard."""

from __future__ import annotations

import dataclasses

from gitdns.core.model import ActiveGroups, RecordSetDoc, StaticRecord
from gitdns.core.review import reviewed_zones
from tests.core.worked_example import CLUSTER_A, CLUSTER_B, STATE


def test_nothing_changed_nothing_reviewed() -> None:
    assert reviewed_zones(STATE, STATE) == set()


def test_removed_cluster_marks_its_zones() -> None:
    assert reviewed_zones(STATE, dataclasses.replace(STATE, clusters=(CLUSTER_A,))) == {"example-com"}


def test_removed_listener_marks_its_zone() -> None:
    gw = dataclasses.replace(CLUSTER_B.gateways[0], listeners=())
    new = dataclasses.replace(STATE, clusters=(CLUSTER_A, dataclasses.replace(CLUSTER_B, gateways=(gw,))))
    assert reviewed_zones(STATE, new) == {"example-com"}


def test_removed_policy_marks_the_zones_of_its_gateways() -> None:
    assert reviewed_zones(STATE, dataclasses.replace(STATE, policies=())) == {"example-com"}


def test_added_things_are_not_removals() -> None:
    old = dataclasses.replace(STATE, clusters=(CLUSTER_A,))
    assert reviewed_zones(old, STATE) == set()


def test_group_switch_and_static_removal() -> None:
    old = dataclasses.replace(STATE, active_groups=(ActiveGroups("g", "example-com", 1, ("a",)),),
                              record_sets=(RecordSetDoc("s", None, (StaticRecord("x.example.com", "A", 60,
                                                                                  ("1.1.1.1",)),)),))
    switched = dataclasses.replace(old, active_groups=(ActiveGroups("g", "example-com", 2, ("b",)),))
    assert reviewed_zones(old, switched) == {"example-com"}
    assert reviewed_zones(old, dataclasses.replace(old, record_sets=())) == {"example-com"}


def test_changed_static_values_are_not_a_removal() -> None:
    rec = StaticRecord("x.example.com", "A", 60, ("1.1.1.1",))
    old = dataclasses.replace(STATE, record_sets=(RecordSetDoc("s", None, (rec,)),))
    new = dataclasses.replace(STATE, record_sets=(RecordSetDoc("s", None, (dataclasses.replace(
        rec, values=("2.2.2.2",)),)),))
    assert reviewed_zones(old, new) == set()
