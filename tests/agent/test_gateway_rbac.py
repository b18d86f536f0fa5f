"""The agent's rights on Gateways are granted per namespace (a RoleBinding of the ClusterRole
gitdns-gateway-status in each Gateway's namespace, deploy/README.md): where none is bound the
condition is not written, the refusal is logged once naming the binding to add, and the other
namespaces' Gateways are served.  Against the HTTP fake with RBAC enforced."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from gitdns.adapters.gateway.conditions import CONDITION_TYPE, GatewayReporter
from gitdns.core.model import Cluster, Gateway, Listener
from tests.fakes.kube_apiserver import FakeKube

client = pytest.importorskip("kubernetes.client")
GW = ("gateway.networking.k8s.io", "v1", "gateways")
RBAC = ("rbac.authorization.k8s.io", "v1")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.register(*GW, kind="Gateway")
    for ns in ("gitdns-system", "ingress", "web"):
        kube.create("", "v1", "namespaces", {"metadata": {"name": ns}})
    kube.create("", "v1", "serviceaccounts", {"metadata": {"name": "gitdns"}}, namespace="gitdns-system")
    kube.create(*GW, {"metadata": {"name": "api-gw", "namespace": "ingress"}, "spec": {"listeners": []}})
    kube.create(*GW, {"metadata": {"name": "web-gw", "namespace": "web"}, "spec": {"listeners": []}})
    kube.create(*RBAC, "clusterroles", {"metadata": {"name": "gitdns-gateway-status"}, "rules": [
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways"], "verbs": ["get"]},
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways/status"], "verbs": ["update"]}]})
    kube.create(*RBAC, "rolebindings", {  # bound in `ingress` only
        "metadata": {"name": "gitdns-gateway-status"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gitdns-gateway-status"},
        "subjects": [{"kind": "ServiceAccount", "name": "gitdns", "namespace": "gitdns-system"}]}, namespace="ingress")
    kube.enforce_rbac = True
    kube.start()
    yield kube
    kube.stop()


def api_client(kube: FakeKube, token: str) -> Any:
    cfg = client.Configuration()
    cfg.host = kube.base_url
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(cfg)


def test_a_namespace_without_binding_is_refused_once_and_the_others_served(
        fake: FakeKube, caplog: pytest.LogCaptureFixture) -> None:
    token = fake.issue_token("gitdns-system", "gitdns")
    reporter = GatewayReporter(api_client(fake, token))
    cluster = Cluster(name="eu-west-1", id="c1", gateways=(
        Gateway(name="api-gw", namespace="ingress", addresses=("192.0.2.10",),
                listeners=(Listener("api.example.com"),)),
        Gateway(name="web-gw", namespace="web", addresses=("192.0.2.20",), listeners=(Listener("app.example.org"),))))
    policy_of = {("ingress", "api-gw"): "api", ("web", "web-gw"): "web"}
    with caplog.at_level(logging.WARNING, logger="gitdns.adapters.gateway.conditions"):
        first = reporter.report(cluster, {"api": True, "web": True}, policy_of)
        second = reporter.report(cluster, {"api": True, "web": True}, policy_of)
    assert first == {("ingress", "api-gw"): "set", ("web", "web-gw"): "forbidden"}
    assert second == {("ingress", "api-gw"): "unchanged", ("web", "web-gw"): "forbidden"}
    refusals = [r.getMessage() for r in caplog.records if "gateway web/web-gw" in r.getMessage()]
    assert len(refusals) == 1, refusals  # once, not every pass
    assert "RoleBinding in namespace web" in refusals[0] and "gitdns-gateway-status" in refusals[0]
    conditions = {c["type"] for c in fake.get(*GW, "api-gw", namespace="ingress")["status"]["conditions"]}
    assert CONDITION_TYPE in conditions
    assert "status" not in fake.get(*GW, "web-gw", namespace="web")
    assert fake.forbidden and all(f.attributes.namespace == "web" for f in fake.forbidden)
