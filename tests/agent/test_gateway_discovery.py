"""Gateways discovered from the cluster: a Cluster's gateway without ``addresses`` (and
``listeners``) is read from the agent's own cluster on every poll, against the HTTP fake
Kubernetes API.  A changed address reaches the zone within one poll without a commit, an address
removed is withdrawn, a deleted Gateway withdraws its records like a removed listener, a read
that fails keeps what was observed, and what was observed is published on the status branch."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.gateway.read import KubeGatewayReader, parse_gateway
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent, files_of
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.core.status.doc import load as load_doc
from gitdns.core.status.report import ClusterReport, published_gateways
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files
from tests.fakes.kube_apiserver import ApiError, FakeKube, Request

client = pytest.importorskip("kubernetes.client")
GW = ("gateway.networking.k8s.io", "v1", "gateways")
CLUSTER = "eu-west-1"
WRITTEN = ("      addresses: [192.0.2.10, 192.0.2.11]\n      listeners:\n        - hostname: api.example.com\n"
           "          name: https\n")


def discovering_files(safety: bool = False) -> dict[str, str]:
    """The example repository with eu-west-1's api-gw discovered; without ``safety`` the
    example.com zone allows any share of its records to change in one pass (a single cluster's
    few records would otherwise be a mass change, see test_a_mass_withdrawal_still_stalls)."""
    files = example_files()
    text = files["clusters/eu-west-1.yaml"]
    assert WRITTEN in text
    files["clusters/eu-west-1.yaml"] = text.replace(WRITTEN, "")
    if not safety:
        zone = files["zones/example-com.yaml"]
        assert "maxChangeFraction: 0.3" in zone
        files["zones/example-com.yaml"] = zone.replace("maxChangeFraction: 0.3", "maxChangeFraction: 1.0")
    return files


def gateway(addresses: list[dict[str, str]], hosts: tuple[str, ...] = ("api.example.com",)) -> dict[str, Any]:
    return {"metadata": {"name": "api-gw", "namespace": "ingress"},
            "spec": {"gatewayClassName": "istio",
                     "listeners": [{"name": f"l{i}", "hostname": h, "port": 443, "protocol": "HTTPS"}
                                   for i, h in enumerate(hosts)]},
            "status": {"addresses": addresses}}


def set_addresses(kube: FakeKube, addresses: list[dict[str, str]]) -> None:
    def change(obj: dict[str, Any]) -> None:
        obj.setdefault("status", {})["addresses"] = addresses
    kube.mutate(*GW, "api-gw", change, namespace="ingress")


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube()
    fake.register(*GW, kind="Gateway")
    fake.create("", "v1", "namespaces", {"metadata": {"name": "ingress"}})
    fake.create(*GW, gateway([]))
    set_addresses(fake, [{"type": "IPAddress", "value": "192.0.2.50"}])  # POST drops .status, as Kubernetes
    fake.start()
    yield fake
    fake.stop()


def reader(kube: FakeKube) -> KubeGatewayReader:
    cfg = client.Configuration()
    cfg.host = kube.base_url
    return KubeGatewayReader(client.ApiClient(cfg))


class Sink:
    def __init__(self) -> None:
        self.reports: list[ClusterReport] = []

    def publish(self, report: ClusterReport) -> str | None:
        self.reports.append(report)
        return None


class World:
    def __init__(self, tmp_path: Path, gateways: Any, files: dict[str, str] | None = None) -> None:
        self.source = FakeSource()
        self.source.commit(files or discovering_files(), "initial")
        self.providers: dict[str, MemoryProvider] = {}
        self.sink = Sink()
        self.clock = Clock()

        def factory(zone: Zone) -> Provider:
            return self.providers.setdefault(zone.domain, MemoryProvider())

        self.agent = Agent(AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(tmp_path)),
                           AgentPorts(source=self.source, factory=factory, clock=self.clock, rng=random.Random(1),
                                      status=self.sink), gateways=gateways)

    def records(self, zone: str = "example.com") -> dict[tuple[str, str], tuple[str, ...]]:
        provider = self.providers.get(zone)
        if provider is None:
            return {}
        return {(r.name, r.type): r.values for r in provider.read(zone).records
                if r.type in ("A", "AAAA", "CNAME") and not r.name.startswith("kuadrant-")}

    def addresses(self) -> set[str]:
        """Addresses published for the gateway's hosts (the static mail records left out)."""
        return {v for (name, rtype), values in self.records().items()
                if rtype in ("A", "AAAA") and not name.startswith("mail") for v in values}

    def fetches(self) -> int:
        return self.source.calls.count("fetch")

    def gateways_doc(self) -> dict[str, Any]:
        report = self.agent.last_report
        assert report is not None
        files = files_of(report, lambda doc: __import__("json").dumps(doc))
        return load_doc(files["gateways.yaml"]) if "gateways.yaml" in files else {}


def test_parse_reads_ip_and_hostname_addresses_and_listener_hosts() -> None:
    seen = parse_gateway(gateway([{"type": "IPAddress", "value": "2001:DB8::1"}, {"value": "192.0.2.7"},
                                  {"type": "Hostname", "value": "LB-1.Elb.Example.net."},
                                  {"type": "example.com/custom", "value": "x"},
                                  {"type": "IPAddress", "value": "not-an-ip"}],
                                 hosts=("API.example.com.", "*.apps.example.com")))
    assert seen.addresses == ("192.0.2.7", "2001:db8::1", "lb-1.elb.example.net")
    assert [ls.hostname for ls in seen.listeners] == ["*.apps.example.com", "api.example.com"]
    assert len(seen.skipped) == 2 and any("custom" in s for s in seen.skipped) and any("not-an-ip" in s
                                                                                       for s in seen.skipped)


def test_a_changed_address_reaches_the_zone_within_one_poll_without_a_commit(kube: FakeKube, tmp_path: Path) -> None:
    world = World(tmp_path, reader(kube))
    world.agent.run()
    assert world.addresses() == {"192.0.2.50"}
    assert ("api.example.com", "CNAME") in world.records()
    # written addresses still work: web-gw keeps its git addresses in example.org
    assert {v for (_, t), vs in world.records("example.org").items() if t == "A" for v in vs} == {"192.0.2.20"}
    fetched = world.fetches()
    set_addresses(kube, [{"type": "IPAddress", "value": "192.0.2.51"}, {"type": "IPAddress", "value": "192.0.2.52"}])
    world.agent.run()  # one poll
    assert world.addresses() == {"192.0.2.51", "192.0.2.52"}
    assert world.fetches() == fetched  # no commit, nothing fetched from git
    set_addresses(kube, [{"type": "IPAddress", "value": "192.0.2.52"}])
    world.agent.run()
    assert world.addresses() == {"192.0.2.52"}  # the removed address is withdrawn
    doc = world.gateways_doc()["gateways"]["ingress/api-gw"]
    assert doc["state"] == "observed" and doc["addresses"] == ["192.0.2.52"]
    assert doc["listeners"] == [{"hostname": "api.example.com", "name": "l0"}] and doc["observedAt"].endswith("Z")
    report = world.agent.last_report
    assert report is not None and report.ready


def test_an_unchanged_gateway_costs_one_read_and_no_write(kube: FakeKube, tmp_path: Path) -> None:
    world = World(tmp_path, reader(kube))
    world.agent.run()
    provider = world.providers["example.com"]
    version = provider.version
    reads = kube.count("GET", "/gateways/api-gw")
    world.agent.run()
    assert kube.count("GET", "/gateways/api-gw") == reads + 1
    assert provider.version == version


def test_a_hostname_address_is_published_as_a_cname_target(kube: FakeKube, tmp_path: Path) -> None:
    set_addresses(kube, [{"type": "Hostname", "value": "lb-1.elb.example.net"}])
    world = World(tmp_path, reader(kube))
    world.agent.run()
    assert world.addresses() == set()
    assert any(values == ("lb-1.elb.example.net",) for (_, t), values in world.records().items() if t == "CNAME")


def test_a_deleted_gateway_withdraws_its_records(kube: FakeKube, tmp_path: Path) -> None:
    world = World(tmp_path, reader(kube))
    world.agent.run()
    assert ("api.example.com", "CNAME") in world.records()
    cfg = client.Configuration()
    cfg.host = kube.base_url
    client.CustomObjectsApi(client.ApiClient(cfg)).delete_namespaced_custom_object(*GW[:2], "ingress", GW[2],
                                                                                   "api-gw")
    world.agent.run()
    assert world.addresses() == set()
    assert not any(name == "api.example.com" for name, _ in world.records())
    assert world.gateways_doc()["gateways"]["ingress/api-gw"]["state"] == "missing"
    # web-gw's written records stay
    assert world.records("example.org")


def test_a_mass_withdrawal_still_stalls(kube: FakeKube, tmp_path: Path) -> None:
    """A deleted Gateway withdrawing more than the zone's maxChangeFraction is refused as any
    mass change is (MassChangeRefused): no commit can be reviewed for it."""
    world = World(tmp_path, reader(kube), files=discovering_files(safety=True))
    world.agent.run()
    set_addresses(kube, [])
    kube.mutate(*GW, "api-gw", lambda o: o["spec"].update(listeners=[]), namespace="ingress")
    world.agent.run()
    assert world.addresses() == {"192.0.2.50"}
    report = world.agent.last_report
    assert report is not None
    assert next(c for c in report.conditions if c.type == "Ready").reason == "MassChangeRefused"


def test_a_changed_listener_moves_the_records(kube: FakeKube, tmp_path: Path) -> None:
    world = World(tmp_path, reader(kube))
    world.agent.run()

    def relisten(obj: dict[str, Any]) -> None:
        obj["spec"]["listeners"] = [{"name": "l0", "hostname": "shop.example.com", "port": 443, "protocol": "HTTPS"}]
    kube.mutate(*GW, "api-gw", relisten, namespace="ingress")
    world.agent.run()
    names = {name for name, _ in world.records()}
    assert "shop.example.com" in names and "api.example.com" not in names


def test_a_failing_read_keeps_what_was_observed(kube: FakeKube, tmp_path: Path) -> None:
    world = World(tmp_path, reader(kube))
    world.agent.run()

    def broken(request: Request) -> None:
        if request.method == "GET" and request.path.endswith("/gateways/api-gw"):
            raise ApiError(503, "ServiceUnavailable", "etcd is down")
    kube.add_hook(broken)
    set_addresses(kube, [])  # unseen: every read fails from now on
    world.agent.run(force=True)
    assert world.addresses() == {"192.0.2.50"}  # nothing withdrawn because it could not be read
    entry = world.gateways_doc()["gateways"]["ingress/api-gw"]
    assert entry["state"] == "observed" and "503" in entry["message"]


def test_a_gateway_never_read_reconciles_nothing_and_says_why(kube: FakeKube, tmp_path: Path) -> None:
    def refused(request: Request) -> None:
        if request.path.endswith("/gateways/api-gw"):
            raise ApiError(403, "Forbidden", "gateways.gateway.networking.k8s.io \"api-gw\" is forbidden")
    kube.add_hook(refused)
    world = World(tmp_path, reader(kube))
    world.agent.run()
    assert world.records() == {} and world.records("example.org") == {}
    report = world.agent.last_report
    assert report is not None and not report.ready
    ready = next(c for c in report.conditions if c.type == "Ready")
    assert ready.reason == "InvalidConfiguration"
    assert "clusters/eu-west-1.yaml" in ready.message and "spec.gateways[0].addresses" in ready.message
    assert "RoleBinding in namespace ingress" in ready.message
    assert world.gateways_doc()["gateways"]["ingress/api-gw"]["state"] == "unobserved"
    kube.clear_hooks()  # the RoleBinding is added
    world.agent.run()
    assert world.addresses() == {"192.0.2.50"}
    assert world.agent.last_report is not None and world.agent.last_report.ready


def test_outside_kubernetes_a_gateway_without_addresses_is_a_clear_problem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    world = World(tmp_path, None)
    world.agent.run()
    assert world.records() == {}
    report = world.agent.last_report
    assert report is not None and not report.ready
    ready = next(c for c in report.conditions if c.type == "Ready")
    assert ready.reason == "InvalidConfiguration"
    assert "clusters/eu-west-1.yaml" in ready.message and "spec.gateways[0].addresses" in ready.message
    assert "does not run in Kubernetes" in ready.message


def test_written_addresses_need_no_kubernetes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    world = World(tmp_path, None, files=example_files())
    world.agent.run()
    assert world.addresses() == {"192.0.2.10", "192.0.2.11"}
    assert "gateways.yaml" not in files_of(world.agent.last_report, str)  # type: ignore[arg-type]


def test_published_observation_reads_back(kube: FakeKube, tmp_path: Path) -> None:
    world = World(tmp_path, reader(kube))
    world.agent.run()
    assert world.sink.reports, "the status branch got a report"
    published = published_gateways(world.gateways_doc())
    seen = published[("ingress", "api-gw")]
    assert seen.state == "observed" and seen.addresses == ("192.0.2.50",)
    assert seen.listeners == (("api.example.com", "l0"),)
