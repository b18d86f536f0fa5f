"""Fail open, the pure decision: when every target of a host — every cluster's — is unhealthy,
nothing of it is withdrawn, whatever order the failures were detected in; as targets recover
the ones still down are withdrawn again (docs/health.md, "DNSPolicy targets")."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from gitdns.core import builder
from gitdns.core.health.filter import (
    HostTargets,
    apply_health,
    every_target_down,
    fail_open_hosts,
    fail_open_id,
    fleet_targets,
    host_targets,
)
from gitdns.core.model import Cluster, DesiredState, Gateway, HealthCheck, Listener, Strategy
from gitdns.core.records import RecordKey
from tests.core import worked_example as we

CHECK = HealthCheck(protocol="HTTP", port=80, path="/healthz")
HOST = we.HOST


def _cluster(name: str, *addresses: str, host: str = HOST) -> Cluster:
    return Cluster(name=name, id=f"{name}-uid", geo="GEO-EU",
                   gateways=(Gateway("api-gw", "ingress", addresses, (Listener(host),)),))


A = _cluster("a", "127.0.0.11")
B = _cluster("b", "127.0.0.12")
C = _cluster("c", "127.0.0.13", "127.0.0.14")
ADDRESSES = ("127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14")


def _state(*clusters: Cluster, strategy: Strategy = Strategy.SIMPLE, check: HealthCheck | None = CHECK) -> DesiredState:
    policy = dataclasses.replace(we.POLICY, strategy=strategy, health=check)
    return dataclasses.replace(we.STATE, policies=(policy,), clusters=clusters)


def _fleet(state: DesiredState, me: Cluster) -> dict[str, HostTargets]:
    others = [h for c in state.clusters if c.id != me.id for h in builder.build_hosts(state, c, we.ZONE)]
    return fleet_targets(builder.build_hosts(state, me, we.ZONE), others)


def _view(state: DesiredState, me: Cluster, down: set[str]) -> frozenset[str]:
    """What one agent hands to `apply_health` when its probes see ``down`` unhealthy."""
    fleet = _fleet(state, me)
    unhealthy = frozenset(f"{HOST}|{a}" for a in down)
    return unhealthy | {fail_open_id(h) for h in every_target_down(fleet, unhealthy)}


def _published(state: DesiredState, views: dict[str, set[str]]) -> set[str]:
    """The host's A values once every cluster applied its own view (the zone's union)."""
    out: set[str] = set()
    for cluster in state.clusters:
        hosts = builder.build_hosts(state, cluster, we.ZONE)
        records = [r for h in hosts for r in h.records]
        result = apply_health(records, hosts, _view(state, cluster, views[cluster.id]))
        out |= {v for r in result.records if r.key == RecordKey(HOST, "A") for v in r.values}
    return out


def test_every_agent_probes_every_target_of_its_hosts_its_own_marked() -> None:
    state = _state(A, B, C)
    fleet = _fleet(state, A)
    assert set(fleet) == {HOST}
    assert [(t.address, t.own) for t in fleet[HOST].targets] == [
        ("127.0.0.11", True), ("127.0.0.12", False), ("127.0.0.13", False), ("127.0.0.14", False)]
    assert not fleet[HOST].unchecked


def test_hosts_this_cluster_does_not_publish_are_not_probed() -> None:
    other = _cluster("d", "127.0.0.20", host="other.example.com")
    state = _state(A, other)
    assert set(_fleet(state, A)) == {HOST}


def test_a_cluster_publishing_the_host_without_a_check_keeps_it_from_ever_failing_open() -> None:
    plain = dataclasses.replace(we.POLICY, name="plain", strategy=Strategy.SIMPLE, health=None,
                                target=dataclasses.replace(we.POLICY.target, gateway="plain-gw"))
    checked = dataclasses.replace(we.POLICY, strategy=Strategy.SIMPLE, health=CHECK)
    b = Cluster(name="b", id="b-uid", gateways=(Gateway("plain-gw", "ingress", ("127.0.0.12",), (Listener(HOST),)),))
    state = dataclasses.replace(we.STATE, policies=(checked, plain), clusters=(A, b))
    fleet = _fleet(state, A)
    assert fleet[HOST].unchecked and [t.address for t in fleet[HOST].targets] == ["127.0.0.11"]
    assert every_target_down(fleet, frozenset({f"{HOST}|127.0.0.11"})) == frozenset()


def test_a_host_name_target_is_never_probed_so_it_keeps_the_host_from_failing_open() -> None:
    b = _cluster("b", "lb.elsewhere.test")
    fleet = _fleet(_state(A, b), A)
    assert fleet[HOST].unchecked
    assert every_target_down(fleet, frozenset({f"{HOST}|127.0.0.11"})) == frozenset()


def test_every_target_down_needs_every_target_of_every_cluster() -> None:
    fleet = _fleet(_state(A, B, C), A)
    ids = [f"{HOST}|{a}" for a in ADDRESSES]
    assert every_target_down(fleet, frozenset(ids)) == frozenset({HOST})
    for missing in ids:
        assert every_target_down(fleet, frozenset(ids) - {missing}) == frozenset()


def test_the_verdict_travels_as_a_host_level_id() -> None:
    assert fail_open_id(HOST) == f"{HOST}|*"
    assert fail_open_hosts({fail_open_id(HOST), f"{HOST}|127.0.0.11", "x.example.com|*"}) == {
        HOST, "x.example.com"}


def test_simple_host_failing_open_withdraws_nothing_and_says_so() -> None:
    state = _state(A, B)
    hosts = builder.build_hosts(state, A, we.ZONE)
    records = [r for h in hosts for r in h.records]
    result = apply_health(records, hosts, _view(state, A, {"127.0.0.11", "127.0.0.12"}))
    assert result.records == sorted(records, key=lambda r: r.key) and result.withdrawn == {}
    assert result.fail_open == [HOST] and result.unhealthy == {HOST: ["127.0.0.11"]}
    assert any("fail open" in n and HOST in n for n in result.notes)


def test_loadbalanced_host_failing_open_keeps_every_weight() -> None:
    state = _state(A, B, strategy=Strategy.LOADBALANCED)
    hosts = builder.build_hosts(state, A, we.ZONE)
    records = [r for h in hosts for r in h.records]
    result = apply_health(records, hosts, _view(state, A, {"127.0.0.11", "127.0.0.12"}))
    assert result.records == sorted(records, key=lambda r: r.key)
    assert [r.weight for r in result.records if r.weight is not None] == [120]
    assert result.fail_open == [HOST]


def test_loadbalanced_cluster_down_while_another_serves_still_goes_to_weight_zero() -> None:
    state = _state(A, B, strategy=Strategy.LOADBALANCED)
    hosts = builder.build_hosts(state, A, we.ZONE)
    records = [r for h in hosts for r in h.records]
    result = apply_health(records, hosts, _view(state, A, {"127.0.0.11"}))
    assert [r.weight for r in result.records if r.weight is not None] == [0]
    assert result.fail_open == []


@pytest.mark.parametrize("order_a", list(itertools.permutations(ADDRESSES)))
def test_agents_seeing_the_failures_in_any_order_converge_on_every_target(order_a: tuple[str, ...]) -> None:
    state = _state(A, B, C)
    orders = {A.id: order_a, B.id: tuple(reversed(order_a)), C.id: order_a[1:] + order_a[:1]}
    own = {A.id: {"127.0.0.11"}, B.id: {"127.0.0.12"}, C.id: {"127.0.0.13", "127.0.0.14"}}
    for step in range(len(ADDRESSES)):
        views = {cid: set(order[:step]) for cid, order in orders.items()}
        published = _published(state, views)
        for cid, mine in own.items():  # what its own agent has not seen fail is never withdrawn
            assert mine - views[cid] <= published, f"step {step}"
    # every agent has seen every failure, each in its own order: all published, in every order
    assert _published(state, {cid: set(order) for cid, order in orders.items()}) == set(ADDRESSES)


def test_recovery_publishes_only_the_recovered_targets_one_by_one() -> None:
    state = _state(A, B, C)
    down = set(ADDRESSES)
    assert _published(state, {c.id: down for c in state.clusters}) == set(ADDRESSES)
    for recovered, expected in (("127.0.0.12", {"127.0.0.12"}),
                                ("127.0.0.14", {"127.0.0.12", "127.0.0.14"}),
                                ("127.0.0.11", {"127.0.0.11", "127.0.0.12", "127.0.0.14"}),
                                ("127.0.0.13", set(ADDRESSES))):
        down = down - {recovered}
        assert _published(state, {c.id: down for c in state.clusters}) == expected


def test_one_cluster_all_down_while_another_serves_is_withdrawn_as_before() -> None:
    state = _state(A, B)
    assert _published(state, {A.id: {"127.0.0.11"}, B.id: {"127.0.0.11"}}) == {"127.0.0.12"}
    hosts = builder.build_hosts(state, A, we.ZONE)
    result = apply_health([r for h in hosts for r in h.records], hosts, _view(state, A, {"127.0.0.11"}))
    assert result.fail_open == [] and RecordKey(HOST, "A") in result.withdrawn


def test_a_gateway_another_cluster_discovers_keeps_the_host_from_failing_open_here() -> None:
    """Its addresses are read in its own cluster only: this agent cannot know them, so it
    cannot know that every target is down."""
    hidden = Cluster(name="b", id="b-uid", gateways=(
        Gateway("api-gw", "ingress", (), (Listener(HOST),), discovered=True),))
    state = _state(A, hidden)
    fleet = host_targets(state, A)
    assert fleet[HOST].unchecked and [t.address for t in fleet[HOST].targets] == ["127.0.0.11"]
    assert every_target_down(fleet, frozenset({f"{HOST}|127.0.0.11"})) == frozenset()
    unknown_hosts = Cluster(name="b", id="b-uid", gateways=(
        Gateway("api-gw", "ingress", (), (), discovered=True, discovered_listeners=True),))
    assert host_targets(_state(A, unknown_hosts), A)[HOST].unchecked  # the policy covers api-gw there
    elsewhere = Cluster(name="b", id="b-uid", gateways=(
        Gateway("other-gw", "ingress", (), (), discovered=True, discovered_listeners=True),))
    assert not host_targets(_state(A, elsewhere), A)[HOST].unchecked  # no policy covers other-gw


def test_host_targets_follow_git_declared_addresses_of_every_cluster() -> None:
    fleet = host_targets(_state(A, B, C), B)
    assert [(t.address, t.own) for t in fleet[HOST].targets] == [
        ("127.0.0.11", False), ("127.0.0.12", True), ("127.0.0.13", False), ("127.0.0.14", False)]
