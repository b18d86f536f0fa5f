"""Record builder: the layouts of docs/records.md, record for record."""

from __future__ import annotations

import dataclasses

import pytest

from gitdns.core import builder, names
from gitdns.core.model import CustomWeight, Strategy
from gitdns.core.records import RecordSet
from tests.core.worked_example import CLUSTER_A, CLUSTER_B, POLICY, STATE, ZONE, cluster


@pytest.mark.parametrize(
    ("value", "length", "expected"),
    [
        ("TestName-TestNamespace", 6, "a8xcra"),
        ("owner1", 8, "2tqs20a7"),
        ("api-gw-ingress", 6, "30ics1"),
        ("cluster-a-uid", 6, "1hrxie"),
        ("cluster-b-uid", 6, "17ol5y"),
        ("cluster-a-uid", 8, "1hrxiems"),
        ("cluster-b-uid", 8, "17ol5yav"),
        ("ownera", 8, "1zluoqhm"),
    ],
)
def test_hash_vectors(value: str, length: int, expected: str) -> None:
    assert names.short_hash(value, length) == expected


def fmt(records: tuple[RecordSet, ...] | list[RecordSet]) -> set[tuple[object, ...]]:
    return {(r.name, r.type, r.ttl, r.set_id, r.weight, r.geo, r.values) for r in records}


A_EXPECTED = {
    ("api.example.com", "CNAME", 300, "", None, None, ("klb.api.example.com",)),
    ("klb.api.example.com", "CNAME", 300, "GEO-EU", None, "GEO-EU", ("geo-eu.klb.api.example.com",)),
    ("klb.api.example.com", "CNAME", 300, "default", None, "*", ("geo-eu.klb.api.example.com",)),
    ("geo-eu.klb.api.example.com", "CNAME", 60, "1hrxie-30ics1.klb.api.example.com", 120, None,
     ("1hrxie-30ics1.klb.api.example.com",)),
    ("1hrxie-30ics1.klb.api.example.com", "A", 60, "", None, None, ("1.1.1.1",)),
}
B_EXPECTED = {
    ("api.example.com", "CNAME", 300, "", None, None, ("klb.api.example.com",)),
    ("klb.api.example.com", "CNAME", 300, "US", None, "US", ("us.klb.api.example.com",)),
    ("us.klb.api.example.com", "CNAME", 60, "17ol5y-30ics1.klb.api.example.com", 120, None,
     ("17ol5y-30ics1.klb.api.example.com",)),
    ("17ol5y-30ics1.klb.api.example.com", "A", 60, "", None, None, ("2.2.2.2",)),
}


def test_worked_example_cluster_a() -> None:
    assert fmt(builder.desired_for_zone(STATE, CLUSTER_A, ZONE)) == A_EXPECTED


def test_worked_example_cluster_b() -> None:
    assert fmt(builder.desired_for_zone(STATE, CLUSTER_B, ZONE)) == B_EXPECTED


def test_simple_strategy_merges_ips_and_prefers_a_over_cname() -> None:
    policy = dataclasses.replace(POLICY, strategy=Strategy.SIMPLE)
    state = dataclasses.replace(STATE, policies=(policy,))
    c = cluster("c", "c-uid", "1.1.1.1", "US")
    gw = dataclasses.replace(c.gateways[0], addresses=("1.1.1.1", "2001:db8::1", "lb.example.net"))
    c = dataclasses.replace(c, gateways=(gw,))
    got = fmt(builder.desired_for_zone(state, c, ZONE))
    assert got == {
        ("api.example.com", "A", 60, "", None, None, ("1.1.1.1",)),
        ("api.example.com", "AAAA", 60, "", None, None, ("2001:db8::1",)),
    }


def test_simple_hostname_only_gateway_is_one_cname() -> None:
    policy = dataclasses.replace(POLICY, strategy=Strategy.SIMPLE)
    state = dataclasses.replace(STATE, policies=(policy,))
    c = cluster("c", "c-uid", "lb-b.example.net", "US")
    gw = dataclasses.replace(c.gateways[0], addresses=("lb-b.example.net", "lb-a.example.net"))
    c = dataclasses.replace(c, gateways=(gw,))
    assert fmt(builder.desired_for_zone(state, c, ZONE)) == {
        ("api.example.com", "CNAME", 60, "", None, None, ("lb-a.example.net",)),
    }


def test_loadbalanced_hostname_gateway_targets_the_hostname() -> None:
    c = cluster("c", "c-uid", "lb.example.net", "US")
    got = builder.desired_for_zone(STATE, c, ZONE)
    weighted = [r for r in got if r.name == "us.klb.api.example.com"]
    assert [(r.set_id, r.values) for r in weighted] == [("lb.example.net", ("lb.example.net",))]
    assert not [r for r in got if r.type == "A"]


def test_custom_weight_first_match_wins() -> None:
    policy = dataclasses.replace(
        POLICY,
        custom_weights=(CustomWeight("cloud", "GCP", 200), CustomWeight("cloud", "GCP", 5)),
    )
    state = dataclasses.replace(STATE, policies=(policy,))
    gcp = dataclasses.replace(CLUSTER_B, attributes=(("cloud", "GCP"),))
    aws = dataclasses.replace(CLUSTER_A, attributes=(("cloud", "AWS"),))
    w_gcp = {r.weight for r in builder.desired_for_zone(state, gcp, ZONE) if r.weight is not None}
    w_aws = {r.weight for r in builder.desired_for_zone(state, aws, ZONE) if r.weight is not None}
    assert (w_gcp, w_aws) == ({200}, {120})


def test_excluded_addresses_by_ip_and_cidr() -> None:
    policy = dataclasses.replace(POLICY, strategy=Strategy.SIMPLE,
                                 exclude_addresses=("10.0.0.0/8", "1.1.1.2"))
    state = dataclasses.replace(STATE, policies=(policy,))
    c = cluster("c", "c-uid", "1.1.1.1", "US")
    gw = dataclasses.replace(c.gateways[0], addresses=("1.1.1.1", "1.1.1.2", "10.1.2.3"))
    c = dataclasses.replace(c, gateways=(gw,))
    got = builder.desired_for_zone(state, c, ZONE)
    assert [r.values for r in got] == [("1.1.1.1",)]


def test_wildcard_host_drops_star_for_klb_names() -> None:
    c = cluster("c", "cluster-a-uid", "1.1.1.1", "GEO-EU")
    gw = dataclasses.replace(c.gateways[0], listeners=(dataclasses.replace(c.gateways[0].listeners[0],
                                                                           hostname="*.apps.example.com"),))
    c = dataclasses.replace(c, gateways=(gw,))
    got = {(r.name, r.values) for r in builder.desired_for_zone(STATE, c, ZONE)}
    assert ("*.apps.example.com", ("klb.apps.example.com",)) in got
    assert ("1hrxie-30ics1.klb.apps.example.com", ("1.1.1.1",)) in got


def test_no_geo_section_uses_default_geo_code_and_plain_klb_cname() -> None:
    policy = dataclasses.replace(POLICY, default_geo=None)
    state = dataclasses.replace(STATE, policies=(policy,))
    got = fmt(builder.desired_for_zone(state, CLUSTER_B, ZONE))
    assert ("klb.api.example.com", "CNAME", 300, "", None, None, ("default.klb.api.example.com",)) in got
    assert any(r[0] == "default.klb.api.example.com" and r[4] == 120 for r in got)


def test_flattened_loadbalanced_is_one_multi_value_a() -> None:
    policy = dataclasses.replace(POLICY, flattened=True)
    state = dataclasses.replace(STATE, policies=(policy,))
    assert fmt(builder.desired_for_zone(state, CLUSTER_B, ZONE)) == {
        ("api.example.com", "A", 60, "", None, None, ("2.2.2.2",)),
    }
