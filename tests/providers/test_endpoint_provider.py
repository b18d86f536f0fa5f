"""The `endpoint` provider against the HTTP-level fake Kubernetes API server: the conformance
suite, the settings (Kuadrant's keys and those of its DNSRecord delegation RFC) and the
resourceVersion compare-and-swap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.core.endpoints import endpoint_gvr, parse_label_selector, zone_selector
from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.plan.planner import plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import Action, Change, RecordKey, RecordSet
from gitdns.errors import ConfigError
from gitdns.providers.base import CasGranularity, Provider, Routing
from gitdns.providers.endpoint import EndpointProvider, from_ref
from gitdns.providers.fences import Fences
from gitdns.providers.registry import known_types
from tests.fakes.kube_apiserver import FakeKube, Request
from tests.providers.conformance import Conformance, ProviderCase

client = pytest.importorskip("kubernetes.client")

DNSR = ("kuadrant.io", "v1alpha1", "dnsrecords")
NS = "dnstest"
ZONE_LABEL = "kuadrant.io/zone-record"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.register(*DNSR, kind="DNSRecord")
    kube.create("", "v1", "namespaces", {"metadata": {"name": NS}})
    kube.start()
    yield kube
    kube.stop()


@pytest.fixture(scope="module")
def api(fake: FakeKube) -> Iterator[Any]:
    cfg = client.Configuration()
    cfg.host = fake.base_url
    with client.ApiClient(cfg) as api_client:
        yield api_client


_counter = iter(range(1, 1_000_000))


def zone_resource(fake: FakeKube, root: str, labels: dict[str, str] | None = None,
                  endpoints: list[dict[str, Any]] | None = None) -> str:
    name = f"zone-{next(_counter)}"
    fake.create(*DNSR, {"metadata": {"name": name, "namespace": NS, "labels": labels or {ZONE_LABEL: "true"}},
                        "spec": {"rootHost": root, "endpoints": endpoints or []}})
    return name


class TestEndpointConformance(Conformance):
    """Each test gets its own zone resource (rootHost example.com) in a fresh namespace-wide
    label value, so the zone is unambiguous."""

    @pytest.fixture
    def case(self, fake: FakeKube, api: Any) -> ProviderCase:
        value = f"z{next(_counter)}"
        zone_resource(fake, "example.com", {ZONE_LABEL: value})
        return ProviderCase("endpoint", lambda tmp: EndpointProvider(api, NS, selector=((ZONE_LABEL, value),)))


def test_capabilities_are_declared_honestly(api: Any) -> None:
    provider: Provider = EndpointProvider(api, NS)
    assert provider.capabilities.cas is CasGranularity.RECORD
    assert provider.capabilities.routing is Routing.GEO and provider.capabilities.guards
    assert "endpoint" in known_types()


def a(name: str, *values: str, ttl: int = 60) -> RecordSet:
    return RecordSet(name, "A", ttl, tuple(values))


def test_zones_read_and_endpoint_shape(fake: FakeKube, api: Any) -> None:
    name = zone_resource(fake, "*.shape.example.com", {ZONE_LABEL: "shape"}, [
        {"dnsName": "w.shape.example.com", "recordType": "A", "recordTTL": 60, "setIdentifier": "eu",
         "targets": ["192.0.2.1"], "providerSpecific": [{"name": "weight", "value": "120"},
                                                        {"name": "geo-code", "value": "GEO-EU"}],
         "labels": {"owner": "abc"}}])
    provider = EndpointProvider(api, NS, selector=((ZONE_LABEL, "shape"),))
    assert [(z.id, z.domain) for z in provider.zones()] == [(name, "shape.example.com")]
    for zone in (name, "shape.example.com"):  # by name or by rootHost
        (rec,) = provider.read(zone).records
        assert rec == RecordSet("w.shape.example.com", "A", 60, ("192.0.2.1",), "eu", 120, "GEO-EU")
    snap = provider.read("shape.example.com")
    assert snap.version == fake.get(*DNSR, name, namespace=NS)["metadata"]["resourceVersion"]


def test_apply_writes_only_spec_endpoints_with_the_resource_version(fake: FakeKube, api: Any) -> None:
    name = zone_resource(fake, "keep.example.com", {ZONE_LABEL: "keep"})
    fake.mutate(*DNSR, name, lambda o: o["spec"].__setitem__("healthCheck", {"path": "/h"}), namespace=NS)
    fake.mutate(*DNSR, name, lambda o: o.__setitem__("status", {"ownerID": "x"}), namespace=NS)
    provider = EndpointProvider(api, NS, selector=((ZONE_LABEL, "keep"),))
    rec = a("www.keep.example.com", "192.0.2.1")
    assert provider.apply("keep.example.com", [Change(Action.CREATE, None, rec, rec.key)]).ok
    stored = fake.get(*DNSR, name, namespace=NS)
    assert stored["spec"]["healthCheck"] == {"path": "/h"} and stored["status"] == {"ownerID": "x"}
    assert stored["spec"]["endpoints"] == [{"dnsName": "www.keep.example.com", "recordType": "A", "recordTTL": 60,
                                            "targets": ["192.0.2.1"]}]
    puts = [r for r in fake.requests if r.method == "PUT" and r.path.endswith(f"/dnsrecords/{name}")]
    assert puts and puts[-1].body["metadata"]["resourceVersion"]


def test_a_resource_version_conflict_refuses_every_group_as_stale(fake: FakeKube, api: Any) -> None:
    name = zone_resource(fake, "race.example.com", {ZONE_LABEL: "race"})
    provider = EndpointProvider(api, NS, selector=((ZONE_LABEL, "race"),))
    writer = a("other.race.example.com", "198.51.100.1")

    def other_writer(request: Request) -> None:  # lands between our GET and our PUT
        if request.method == "PUT" and request.path.endswith(f"/dnsrecords/{name}"):
            fake.clear_hooks()
            fake.mutate(*DNSR, name, lambda o: o["spec"]["endpoints"].append(
                {"dnsName": writer.name, "recordType": "A", "recordTTL": 60, "targets": list(writer.values)}),
                namespace=NS)

    fake.add_hook(other_writer)
    pol = PlanPolicy(zone="race.example.com")
    want = (a("www.race.example.com", "192.0.2.1"),)
    p = plan(Intent("owner-a", want), provider.read("race.example.com"), pol)
    result = provider.apply("race.example.com", p.applicable, p.guards)
    assert not result.applied and {g for g, _ in result.refused} == {RecordKey("www.race.example.com", "A")}
    assert "resourceVersion" in result.refused[0][1]
    again = plan(Intent("owner-a", want), provider.read("race.example.com"), pol)  # the re-plan lands
    assert provider.apply("race.example.com", again.applicable, again.guards).ok
    data = {r.key: r.values for r in provider.read("race.example.com").records if r.type == "A"}
    assert data == {writer.key: writer.values, RecordKey("www.race.example.com", "A"): ("192.0.2.1",)}


def test_invalid_changes_fail_alone(fake: FakeKube, api: Any) -> None:
    zone_resource(fake, "bad.example.com", {ZONE_LABEL: "bad"})
    provider = EndpointProvider(api, NS, selector=((ZONE_LABEL, "bad"),))
    good, out = a("www.bad.example.com", "192.0.2.1"), a("www.elsewhere.org", "192.0.2.1")
    result = provider.apply("bad.example.com", [Change(Action.CREATE, None, out, out.key),
                                                Change(Action.CREATE, None, good, good.key)])
    assert [c.key for c in result.applied] == [good.key] and [g for g, _ in result.failed] == [out.key]


def test_missing_or_ambiguous_zone(fake: FakeKube, api: Any) -> None:
    provider = EndpointProvider(api, NS, selector=((ZONE_LABEL, "twice"),))
    with pytest.raises(ConfigError, match=r"no kuadrant\.io/v1alpha1\.dnsrecords"):
        provider.read("twice.example.com")
    rec = a("www.twice.example.com", "192.0.2.1")
    assert provider.apply("twice.example.com", [Change(Action.CREATE, None, rec, rec.key)]).failed
    zone_resource(fake, "twice.example.com", {ZONE_LABEL: "twice"})
    zone_resource(fake, "twice.example.com", {ZONE_LABEL: "twice"})
    with pytest.raises(ConfigError, match="several"):
        provider.read("twice.example.com")


def test_seed_001_key_only_label_selects_by_value(fake: FakeKube, api: Any) -> None:
    key = "kuadrant.io/primary-authoritative-zone-record"
    name = zone_resource(fake, "api.seed.example.com", {key: "api.seed.example.com"})
    zone_resource(fake, "www.seed.example.com", {key: "www.seed.example.com"})
    provider = EndpointProvider(api, NS, selector=zone_selector({"CRD_ZONE_RECORD_LABEL": key}))
    assert {z.domain for z in provider.zones()} >= {"api.seed.example.com", "www.seed.example.com"}
    assert provider.read("api.seed.example.com").version == fake.get(*DNSR, name, namespace=NS)["metadata"][
        "resourceVersion"]


def test_settings_accept_both_spellings() -> None:
    assert str(endpoint_gvr({"ENDPOINT_GVR": "kuadrant.io/v1alpha1.dnsrecords"})) == "kuadrant.io/v1alpha1.dnsrecords"
    assert endpoint_gvr({"ENDPOINT_GVK": "kuadrant.io/v1alpha1.DNSRecord"}) == endpoint_gvr({})
    assert endpoint_gvr({"ENDPOINT_GVK": "example.org/v1.Policy"}).plural == "policies"
    with pytest.raises(ValueError, match="different"):
        endpoint_gvr({"ENDPOINT_GVR": "a.io/v1.things", "ENDPOINT_GVK": "kuadrant.io/v1alpha1.DNSRecord"})
    with pytest.raises(ValueError):
        endpoint_gvr({"ENDPOINT_GVR": "dnsrecords"})
    assert zone_selector({}) == (("kuadrant.io/zone-record", "true"),)
    assert zone_selector({"ENDPOINT_ZONE_RECORD_LABEL": "kuadrant.io/authoritative-record=true, "
                                                      "kuadrant.io/authoritative-record-hash=1jbcyj4z",
                          "CRD_ZONE_RECORD_LABEL": "kuadrant.io/primary-authoritative-zone-record"}) == (
        ("kuadrant.io/authoritative-record", "true"), ("kuadrant.io/authoritative-record-hash", "1jbcyj4z"),
        ("kuadrant.io/primary-authoritative-zone-record", None))
    assert parse_label_selector('my-own-label="my-expected-label-value"') == (("my-own-label",
                                                                               "my-expected-label-value"),)
    for bad in ("a!=b", "a in (b)", "", "bad key=x"):
        with pytest.raises(ValueError):
            parse_label_selector(bad)


def test_from_ref_reads_a_kuadrant_endpoint_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   fake: FakeKube) -> None:
    secret = tmp_path / "endpoint-secret.yaml"
    secret.write_text("apiVersion: v1\nkind: Secret\ntype: kuadrant.io/endpoint\nstringData:\n"
                      "  CRD_ZONE_RECORD_LABEL: kuadrant.io/primary-authoritative-zone-record\n"
                      "  ENDPOINT_GVK: kuadrant.io/v1alpha1.DNSRecord\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{fake.base_url}'}}}}]\n"
        "users: [{name: fake, user: {token: x}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    ref = ProviderRef("endpoint", (("kubeconfigContext", "fake"), ("namespace", NS)),
                      CredentialsRef(file=str(secret)))
    with pytest.raises(ConfigError, match=r"no credentials directory is set.*--credentials-dir"):
        from_ref("api.example.com", ref, tmp_path)  # the operator named no credentials directory
    provider = from_ref("api.example.com", ref, tmp_path, fences=Fences.parse(credentials_dir=str(tmp_path)))
    assert provider.selector == (("kuadrant.io/primary-authoritative-zone-record", None),)
    assert str(provider.gvr) == "kuadrant.io/v1alpha1.dnsrecords" and provider.namespace == NS
    provider.zones()  # talks to the fake through the kubeconfig
    with pytest.raises(ConfigError, match="namespace"):
        from_ref("api.example.com", ProviderRef("endpoint"), tmp_path)
