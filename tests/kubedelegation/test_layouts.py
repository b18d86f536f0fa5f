"""Delegation through Kubernetes with real layouts: the loadbalanced worked example published
through remotes equals publishing it directly; wildcard hosts; primaries that see a change at
different moments converge; and `build_kube_delegation` from the agent's configuration."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.core import builder
from gitdns.core.endpoints import endpoints_from_records
from gitdns.core.plan.planner import plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.errors import ConfigError
from gitdns.kubedelegation.delegation import build_kube_delegation
from gitdns.providers.local import LocalProvider
from gitdns.providers.memory import MemoryProvider
from tests.core import worked_example as we
from tests.kubedelegation.kube_fleet import DNSR, NS, Fleet, a_endpoint, kubeconfig, record, zone_data

pytest.importorskip("kubernetes.client")


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(store=tmp_path / "store")
    f.add_remote("remote-1")
    f.add_remote("remote-2")
    f.add_primary("primary-a")
    yield f
    f.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_worked_example_through_remotes_equals_publishing_it_directly(fleet: Fleet) -> None:
    direct = MemoryProvider()
    for cluster in (we.CLUSTER_A, we.CLUSTER_B):
        records = builder.desired_for_zone(we.STATE, cluster, we.ZONE)
        p = plan(Intent(cluster.id, records), direct.read("example.com"), PlanPolicy(zone="example.com"))
        assert direct.apply("example.com", p.applicable, p.guards).ok
    expected = {(r.name, r.type, r.set_id): r.values for r in direct.read("example.com").records
                if not r.name.startswith("kuadrant-")}
    for remote, cluster in (("remote-1", we.CLUSTER_A), ("remote-2", we.CLUSTER_B)):
        records = builder.desired_for_zone(we.STATE, cluster, we.ZONE)
        record(fleet.remotes[remote], "api", we.HOST, endpoints_from_records(records), owner=cluster.id[:12])
    result = fleet.delegation("primary-a").run_once()
    assert result.ok, result
    assert zone_data(fleet.store) == expected and len(expected) == 8
    routed = [r for r in LocalProvider(fleet.store).read("example.com").records
              if r.set_id and r.type == "CNAME" and r.name.startswith("klb.")]
    assert {(r.set_id, r.geo) for r in routed} == {("GEO-EU", "GEO-EU"), ("US", "US"), ("default", "*")}


def test_wildcard_hosts(fleet: Fleet) -> None:
    host = "*.apps.example.com"
    record(fleet.remotes["remote-1"], "apps", host, [
        {"dnsName": host, "recordType": "CNAME", "recordTTL": 300, "targets": ["klb.apps.example.com"]},
        {"dnsName": "klb.apps.example.com", "recordType": "A", "recordTTL": 60, "targets": ["192.0.2.1"]}])
    record(fleet.remotes["remote-2"], "apps", host, [
        {"dnsName": host, "recordType": "CNAME", "recordTTL": 300, "targets": ["klb.apps.example.com"]},
        {"dnsName": "klb.apps.example.com", "recordType": "A", "recordTTL": 60, "targets": ["192.0.2.2"]}])
    result = fleet.delegation("primary-a").run_once()
    assert result.ok and result.host(NS, "apps.example.com") is not None
    assert zone_data(fleet.store) == {(host, "CNAME", ""): ("klb.apps.example.com",),
                                      ("klb.apps.example.com", "A", ""): ("192.0.2.1", "192.0.2.2")}


def test_primaries_that_see_a_change_at_different_moments_converge(fleet: Fleet) -> None:
    cname = {"dnsName": "api.example.com", "recordType": "CNAME", "recordTTL": 60, "targets": ["one.example.net"]}
    record(fleet.remotes["remote-1"], "api", "api.example.com", [cname], owner="owner-r1")
    fleet.add_primary("primary-b")
    clock = Clock()
    one = fleet.delegation("primary-a", clock=clock)
    two = fleet.delegation("primary-b", clock=clock)
    assert one.run_once().ok and two.run_once().ok
    fleet.remotes["remote-1"].mutate(*DNSR, "api", lambda o: o["spec"]["endpoints"][0].__setitem__(
        "targets", ["two.example.net"]), namespace=NS)
    assert two.run_once().ok  # primary-b sees the change first (within the same second)
    assert zone_data(fleet.store)[("api.example.com", "CNAME", "")] == ("two.example.net",)
    assert one.run_once().ok  # primary-a follows, nobody is stuck on a conflict
    assert zone_data(fleet.store)[("api.example.com", "CNAME", "")] == ("two.example.net",)
    clock.now += 60
    fleet.remotes["remote-1"].mutate(*DNSR, "api", lambda o: o["spec"]["endpoints"][0].__setitem__(
        "targets", ["three.example.net"]), namespace=NS)
    assert one.run_once().ok and two.run_once().ok and one.run_once().ok
    assert zone_data(fleet.store)[("api.example.com", "CNAME", "")] == ("three.example.net",)


def test_owner_id_can_differ_from_the_cluster_id(fleet: Fleet) -> None:
    from tests.kubedelegation.kube_fleet import remote_status, zone_owners

    record(fleet.remotes["remote-1"], "api", "api.example.com", [a_endpoint("api.example.com", "192.0.2.1")])
    assert fleet.delegation("primary-a", owner_id="primary-a-k8s").run_once().ok
    assert zone_owners(fleet.store) == {"primary-a-k8s"}
    assert remote_status(fleet.remotes["remote-1"], "api", "primary-a")  # status stays keyed by the cluster id


def test_build_from_the_agent_configuration(fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_file = tmp_path / "kubeconfig"
    config_file.write_text(kubeconfig(fleet.primaries["primary-a"].base_url))
    monkeypatch.setenv("KUBECONFIG", str(config_file))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="kube-delegation"):
        build_kube_delegation(AgentConfig(repo="x"), "primary-a")
    config = dataclasses.replace(AgentConfig(repo="x"), kube_delegation=True, state_dir=str(tmp_path / "state"),
                                 store_dir=str(fleet.store.parent))
    record(fleet.remotes["remote-1"], "api", "api.example.com", [a_endpoint("api.example.com", "192.0.2.1")])
    delegation = build_kube_delegation(config, "primary-a")
    try:
        result = delegation.run_once()
    finally:
        delegation.close()
    assert result.ok and result.cluster("remote-1") is not None
    assert zone_data(fleet.store) == {("api.example.com", "A", ""): ("192.0.2.1",)}
