"""Hostile tenants and node pools against the orchestrator (scripted health monitor, real
DirectoryDelivery): a tenant name that breaks out of a comment, tenant zones that are not the
tenant's to claim, a node address that is no IP, and rendered files that would not parse as
meant.  One bad tenant is left out (named in /status, a metric and the log) and the others are
delivered; a pool or tenant that turns bad keeps its last good version; a snippet failing as a
whole is not delivered and the last delivery stays."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from gitdns.adapters.templates import load_template_sources
from gitdns.core.desired import Desired
from gitdns.core.health import State
from gitdns.core.model import DesiredState, Node, NodePool, Origin, Tenant
from gitdns.core.render import make_environment
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DirectorySource
from tests.e2e.orchestrator_kit import tenant_yaml
from tests.orchestrator.test_orchestrator import POOL_YAML, CountingDelivery, FakeMonitor, ips

ZONE_YAML = "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-org}\nspec: {domain: example.org}\n"
EVIL_YAML = ("apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata: {name: \"evil\\n\"}\n"
             "spec:\n  nodePool: edge\n  domains: [x.evil.io]\n")

Rig = tuple[Orchestrator, FakeMonitor, CountingDelivery]


def start(desired: Path, out: Path, env: jinja2.Environment | None = None) -> Rig:
    monitor = FakeMonitor()
    delivery = CountingDelivery(out, "edge")
    o = Orchestrator("edge", DirectorySource(desired), delivery, monitor=monitor, poll_interval=3600,  # type: ignore[arg-type]
                     clock=lambda: 0.0, env=env)
    o.lease_state = o.lease.acquire()
    return o, monitor, delivery


def round_(o: Orchestrator, monitor: FakeMonitor, **states: State) -> None:
    o.poll()
    monitor.set(**(states or {"n1": State.HEALTHY, "n2": State.HEALTHY, "n3": State.HEALTHY}))
    o.publish()


def files_in(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in out.iterdir() if not p.name.startswith(".")} if out.is_dir() else {}


@pytest.fixture
def desired(tmp_path: Path) -> Path:
    root = tmp_path / "desired"
    root.mkdir()
    (root / "pool.yaml").write_text(POOL_YAML)
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io", "app.tenant-a.io"]))
    return root


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out"


# --- a tenant name that breaks out of a comment -----------------------------------------------


def test_a_tenant_named_evil_newline_does_not_block_the_pool(desired: Path, out: Path) -> None:
    (desired / "evil.yaml").write_text(EVIL_YAML)
    o, monitor, _ = start(desired, out)
    round_(o, monitor)
    assert "delivery" not in o.errors and o.ready
    assert sorted(files_in(out)) == ["gitdns-edge.server", "tenant-a.hosts"]
    assert ips(out / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert not any("evil" in text for text in files_in(out).values())


class StateSource:
    """A desired state as a model holds it (what a schema that lets a value through would give)."""

    def __init__(self, state: DesiredState) -> None:
        self.state: DesiredState | None = state

    def read(self) -> Desired | None:
        state, self.state = self.state, None
        return None if state is None else Desired("mem", state, (), None)


def test_names_that_would_break_the_files_are_refused_and_named(out: Path) -> None:
    nodes = tuple(Node(f"n{i}", f"10.0.0.{i}", f"http://10.0.0.{i}:15021/healthz/ready") for i in (1, 2, 3))
    state = DesiredState(
        node_pools=(NodePool("edge", nodes),),
        tenants=(Tenant("evil\n", ("x.evil.io",), "edge", origin=Origin("evil.yaml", 3)),
                 Tenant("z", ("a.z.io",), "edge", "z.io\nimport /etc/passwd", Origin("z.yaml", 7)),
                 Tenant("tenant-a", ("api.tenant-a.io",), "edge", origin=Origin("a.yaml", 1))))
    monitor = FakeMonitor()
    o = Orchestrator("edge", StateSource(state), CountingDelivery(out, "edge"), monitor=monitor,  # type: ignore[arg-type]
                     poll_interval=3600, clock=lambda: 0.0)
    o.lease_state = o.lease.acquire()
    round_(o, monitor)
    assert sorted(files_in(out)) == ["gitdns-edge.server", "tenant-a.hosts"] and "delivery" not in o.errors
    refused = {r["tenant"]: r for r in o.status()["refused"]}
    assert sorted(refused) == ["evil\n", "z"]
    assert refused["evil\n"]["file"] == "evil.yaml" and "not a tenant name" in refused["evil\n"]["reason"]
    assert refused["z"]["file"] == "z.yaml" and "not a DNS name" in refused["z"]["reason"]
    assert o.metrics.value("health_orchestrator_tenants", {"state": "refused"}) == 2
    assert o.metrics.value("health_orchestrator_tenants", {"state": "served"}) == 1


# --- tenant zones that are not the tenant's to claim ------------------------------------------


@pytest.mark.parametrize(("zone", "domain", "words"), [
    ("cluster.local", "kubernetes.default.svc.cluster.local", "cluster domain"),
    ("com", "google.com", "one label"),
    ("co.uk", "bank.co.uk", "public suffix"),
    ("example.org", "www.example.org", "Zone 'example-org'"),
    ("shop.example.org", "api.shop.example.org", "Zone 'example-org'"),
])
def test_a_fenced_zone_is_not_served(desired: Path, out: Path, zone: str, domain: str, words: str) -> None:
    (desired / "zone.yaml").write_text(ZONE_YAML)
    (desired / "t.yaml").write_text(tenant_yaml("grabber", "edge", [domain], zone=zone))
    o, monitor, _ = start(desired, out)
    round_(o, monitor)
    server = files_in(out)["gitdns-edge.server"]
    assert f"{zone}:53" not in server and "tenant-a.io:53 {" in server
    assert sorted(files_in(out)) == ["gitdns-edge.server", "tenant-a.hosts"]
    [refused] = o.status()["refused"]
    assert refused["tenant"] == "grabber" and refused["file"] == "t.yaml" and words in refused["reason"]
    assert any(n.startswith("tenant 'grabber' refused:") for n in o.notes)
    assert o.metrics.value("health_orchestrator_tenants", {"state": "refused"}) == 1


def test_a_zone_inside_a_gitdns_zone_is_served_once_the_pool_allows_it(desired: Path, out: Path) -> None:
    (desired / "zone.yaml").write_text(ZONE_YAML)
    (desired / "t.yaml").write_text(tenant_yaml("shop", "edge", ["api.shop.example.org"], zone="shop.example.org"))
    o, monitor, _ = start(desired, out)
    round_(o, monitor)
    assert "shop.hosts" not in files_in(out)
    (desired / "pool.yaml").write_text(POOL_YAML + "  tenants: {allowInside: [example.org]}\n")
    round_(o, monitor)
    assert ips(out / "shop.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert o.status()["refused"] == []


def test_a_tenant_turned_hostile_keeps_its_last_good_version(desired: Path, out: Path) -> None:
    o, monitor, _ = start(desired, out)
    round_(o, monitor)
    (desired / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["google.com"], zone="com"))
    round_(o, monitor)
    server = files_in(out)["gitdns-edge.server"]
    assert "tenant-a.io:53 {" in server and "com:53" not in server
    assert ips(out / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert any("Tenant tenant-a:" in n and "its last good version is kept" in n for n in o.notes)


def test_another_pool_cannot_take_a_zone_by_sorting_first(desired: Path, out: Path) -> None:
    o, monitor, _ = start(desired, out)
    round_(o, monitor)
    thief = tenant_yaml("thief", "aaa", ["api.tenant-a.io"], zone="tenant-a.io")
    (desired / "thief.yaml").write_text(POOL_YAML.replace("name: edge", "name: aaa") + "---\n" + thief)
    round_(o, monitor)
    # both claims are refused (and validation says so); the last good version of tenant-a is
    # refused too, so it is withdrawn rather than handed to another pool
    assert "thief" not in "".join(files_in(out))
    assert [r["tenant"] for r in o.status()["refused"]] == ["tenant-a"]


# --- a node address that is no IP ---------------------------------------------------------------


def test_a_bad_node_ip_keeps_the_last_good_pool(desired: Path, out: Path) -> None:
    o, monitor, _ = start(desired, out)
    round_(o, monitor)
    (desired / "pool.yaml").write_text(POOL_YAML.replace("10.0.0.3", "999.1.1.1"))
    round_(o, monitor)  # raised ValueError (the process exited 1) before
    assert ips(out / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert any("node 'n3': ip '999.1.1.1' is not an IPv4 address" in n and "last good version is kept" in n
               for n in o.notes)
    assert [n.ip for n in o.nodes] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def test_a_bad_node_ip_from_the_start_is_left_out(desired: Path, out: Path) -> None:
    (desired / "pool.yaml").write_text(POOL_YAML.replace("10.0.0.3", "999.1.1.1"))
    o, monitor, _ = start(desired, out)
    round_(o, monitor, n1=State.HEALTHY, n2=State.HEALTHY)
    assert ips(out / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2"]
    assert any("node 'n3': ip '999.1.1.1'" in n and "left out" in n for n in o.notes)
    assert [n.name for n in o.nodes] == ["n1", "n2"]


# --- rendered files that would not parse as meant -------------------------------------------------


def hostile_env(server: tuple[str, str] | None = None, hosts: tuple[str, str] | None = None) -> jinja2.Environment:
    """The packaged templates with one change, as a template override could make it."""
    sources = load_template_sources()
    if server is not None:
        sources["coredns/tenant.server.j2"] = sources["coredns/tenant.server.j2"].replace(*server)
    if hosts is not None:
        sources["coredns/tenant.hosts.j2"] = sources["coredns/tenant.hosts.j2"].replace(*hosts)
    return make_environment(sources)


def two_tenants(desired: Path) -> None:
    (desired / "b.yaml").write_text(tenant_yaml("tenant-b", "edge", ["shop.tenant-b.test"]))


def test_a_block_failing_the_parse_check_is_left_out_and_the_others_delivered(desired: Path, out: Path) -> None:
    two_tenants(desired)
    inject = ("    errors\n", "    errors\n{% if block.zone == 'shop.tenant-b.test' %}    forward . 192.0.2.1\n"
                               "{% endif %}")
    o, monitor, delivery = start(desired, out, hostile_env(server=inject))
    round_(o, monitor)
    assert sorted(files_in(out)) == ["gitdns-edge.server", "tenant-a.hosts"] and delivery.calls == 1
    assert "forward" not in files_in(out)["gitdns-edge.server"]
    assert "tenant 'tenant-b': gitdns-edge.server: " in o.errors["render"] and "'forward'" in o.errors["render"]
    assert o.status()["refused"] == [{"tenant": "tenant-b", "file": "gitdns-edge.server",
                                      "reason": o.status()["refused"][0]["reason"]}]
    assert o.metrics.value("health_orchestrator_render_refusals_total", {"reason": "tenant"}) == 1
    assert o.metrics.value("health_orchestrator_tenants", {"state": "refused"}) == 1


def test_a_hosts_file_failing_the_check_is_left_out(desired: Path, out: Path) -> None:
    two_tenants(desired)
    inject = ("{% endfor %}", "{% endfor %}{% if zone == 'tenant-a.io' %}192.0.2.66 bank.example\n{% endif %}")
    o, monitor, _ = start(desired, out, hostile_env(hosts=inject))
    round_(o, monitor)
    assert sorted(files_in(out)) == ["gitdns-edge.server", "tenant-b.hosts"]
    assert "tenant-a.io" not in files_in(out)["gitdns-edge.server"]
    assert "tenant 'tenant-a': tenant-a.hosts: " in o.errors["render"]


def test_a_snippet_failing_as_a_whole_is_not_delivered_and_the_last_stays(desired: Path, out: Path) -> None:
    o, monitor, delivery = start(desired, out)
    round_(o, monitor)
    before = files_in(out)
    o.publisher.env = hostile_env(server=("{% for block in blocks %}", "import /etc/passwd\n{% for block in blocks %}"))
    o.publisher.forget_rendered()
    monitor.set(n3=State.UNHEALTHY)
    o.publish()
    assert files_in(out) == before and delivery.calls == 1
    assert "nothing delivered, the last delivery stays: gitdns-edge.server:" in o.errors["render"]
    assert o.metrics.value("health_orchestrator_render_refusals_total", {"reason": "snippet"}) == 1
    o.publisher.env = make_environment(load_template_sources())
    o.publisher.forget_rendered()
    o.publish()
    assert ips(out / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2"] and "render" not in o.errors
