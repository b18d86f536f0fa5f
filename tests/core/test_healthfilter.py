"""Health in the published records: withdraw own unhealthy targets, never the last path."""

from __future__ import annotations

import dataclasses

from gitdns.core import builder
from gitdns.core.health.filter import apply_health, fleet_frozen, health_targets
from gitdns.core.model import HealthCheck, Strategy
from gitdns.core.records import RecordKey
from tests.core import worked_example as we

CHECK = HealthCheck(protocol="HTTP", port=80, path="/healthz")


def _hosts(strategy: Strategy, *ips: str) -> list[builder.BuiltHost]:
    policy = dataclasses.replace(we.POLICY, strategy=strategy, health=CHECK)
    gw = dataclasses.replace(we.CLUSTER_A.gateways[0], addresses=ips)
    cluster = dataclasses.replace(we.CLUSTER_A, gateways=(gw,))
    state = dataclasses.replace(we.STATE, policies=(policy,), clusters=(cluster, we.CLUSTER_B))
    return builder.build_hosts(state, cluster, we.ZONE)


def test_targets_are_the_published_addresses() -> None:
    hosts = _hosts(Strategy.SIMPLE, "1.1.1.1", "1.1.1.2")
    assert [t.target_id for t in health_targets(hosts)] == ["api.example.com|1.1.1.1", "api.example.com|1.1.1.2"]


def test_simple_withdraws_only_the_unhealthy_address() -> None:
    hosts = _hosts(Strategy.SIMPLE, "1.1.1.1", "1.1.1.2")
    recs = [r for h in hosts for r in h.records]
    result = apply_health(recs, hosts, frozenset({"api.example.com|1.1.1.2"}))
    assert [r.values for r in result.records] == [("1.1.1.1",)]
    assert result.unhealthy == {"api.example.com": ["1.1.1.2"]}
    assert result.withdrawn[RecordKey("api.example.com", "A")].values == ("1.1.1.1", "1.1.1.2")


def test_simple_all_down_drops_the_record_and_remembers_it_for_fail_open() -> None:
    hosts = _hosts(Strategy.SIMPLE, "1.1.1.1")
    recs = [r for h in hosts for r in h.records]
    result = apply_health(recs, hosts, frozenset({"api.example.com|1.1.1.1"}))
    assert result.records == []
    assert RecordKey("api.example.com", "A") in result.withdrawn


def test_loadbalanced_all_down_sets_weight_zero_and_keeps_geo_rows() -> None:
    hosts = _hosts(Strategy.LOADBALANCED, "1.1.1.1")
    recs = [r for h in hosts for r in h.records]
    result = apply_health(recs, hosts, frozenset({"api.example.com|1.1.1.1"}))
    weighted = [r for r in result.records if r.weight is not None]
    assert [r.weight for r in weighted] == [0]
    assert {(r.name, r.set_id) for r in result.records if r.geo} == {
        ("klb.api.example.com", "GEO-EU"), ("klb.api.example.com", "default")}
    assert next(r for r in result.records if r.type == "A").values == ("1.1.1.1",)  # the A name stays


def test_loadbalanced_without_weight_zero_withdraws_the_row() -> None:
    hosts = _hosts(Strategy.LOADBALANCED, "1.1.1.1")
    recs = [r for h in hosts for r in h.records]
    result = apply_health(recs, hosts, frozenset({"api.example.com|1.1.1.1"}), weight_zero=False)
    assert not [r for r in result.records if r.weight is not None]


def test_frozen_hosts_keep_everything() -> None:
    hosts = _hosts(Strategy.SIMPLE, "1.1.1.1", "1.1.1.2")
    recs = [r for h in hosts for r in h.records]
    result = apply_health(recs, hosts, frozenset({"api.example.com|1.1.1.2"}),
                          frozen=frozenset({"api.example.com"}))
    assert result.records == recs and result.frozen == ["api.example.com"]


def test_fleet_share_freezes() -> None:
    assert fleet_frozen({"a": (6, 10), "b": (1, 10), "c": (2, 2)}, 0.5) == frozenset({"a"})
