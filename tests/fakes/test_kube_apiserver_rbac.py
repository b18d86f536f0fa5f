"""The fake API server's opt-in RBAC, per-account tokens, chosen kube-system UID and TLS."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.kube_apiserver import FakeKube, forbidden_message, request_attributes

RBAC = ("rbac.authorization.k8s.io", "v1")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.enforce_rbac = True
    kube.create("", "v1", "namespaces", {"metadata": {"name": "app"}})
    kube.create("", "v1", "serviceaccounts", {"metadata": {"name": "robot", "namespace": "app"}})
    kube.create("", "v1", "configmaps", {"metadata": {"name": "mine", "namespace": "app"}})
    kube.create("", "v1", "configmaps", {"metadata": {"name": "other", "namespace": "app"}})
    kube.create("", "v1", "configmaps", {"metadata": {"name": "mine", "namespace": "default"}})
    yield kube


def call(fake: FakeKube, method: str, path: str, token: str, body: object = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    raw = json.dumps(body).encode() if body is not None else b""
    return fake.handle(method, path, "application/json", raw, f"Bearer {token}")


def bind(fake: FakeKube, rules: list[dict[str, object]], *, namespace: str | None = "app",
         cluster_role: bool = False, subject: dict[str, str] | None = None) -> None:
    role_plural = "clusterroles" if cluster_role or namespace is None else "roles"
    fake.create(*RBAC, role_plural, {"metadata": {"name": "r", **({"namespace": namespace} if role_plural == "roles"
                                                                   else {})}, "rules": rules})
    binding = {"metadata": {"name": "b"}, "roleRef": {"apiGroup": RBAC[0], "kind": "ClusterRole" if role_plural ==
                                                      "clusterroles" else "Role", "name": "r"},
               "subjects": [subject or {"kind": "ServiceAccount", "name": "robot", "namespace": "app"}]}
    if namespace is None:
        fake.create(*RBAC, "clusterrolebindings", binding)
    else:
        fake.create(*RBAC, "rolebindings", binding, namespace=namespace)


def test_nothing_is_allowed_without_a_binding_and_the_refusal_is_kubernetes_message(fake: FakeKube) -> None:
    token = fake.issue_token("app", "robot")
    code, body = call(fake, "GET", "/api/v1/namespaces/app/configmaps/mine", token)
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('configmaps "mine" is forbidden: User "system:serviceaccount:app:robot" cannot get '
                               'resource "configmaps" in API group "" in the namespace "app"')
    assert [f.attributes.verb for f in fake.forbidden] == ["get"]
    assert fake.subjects[token] == "system:serviceaccount:app:robot"


def test_discovery_is_open_and_unknown_tokens_are_401(fake: FakeKube) -> None:
    token = fake.issue_token("app", "robot")
    assert call(fake, "GET", "/version", token)[0] == 200
    assert call(fake, "GET", "/apis", token)[0] == 200
    assert call(fake, "GET", "/api/v1/namespaces/app/configmaps", "not-a-token")[0] == 401
    with pytest.raises(KeyError):
        fake.issue_token("app", "nobody")


def test_resource_names_pin_get_but_never_list_or_create(fake: FakeKube) -> None:
    bind(fake, [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"],
                 "verbs": ["get", "list", "create", "update"]}])
    token = fake.issue_token("app", "robot")
    assert call(fake, "GET", "/api/v1/namespaces/app/configmaps/mine", token)[0] == 200
    assert call(fake, "GET", "/api/v1/namespaces/app/configmaps/other", token)[0] == 403
    assert call(fake, "GET", "/api/v1/namespaces/app/configmaps", token)[0] == 403
    assert call(fake, "POST", "/api/v1/namespaces/app/configmaps", token, {"metadata": {"name": "mine2"}})[0] == 403
    assert call(fake, "PUT", "/api/v1/namespaces/app/configmaps/mine", token, {"metadata": {"name": "mine"}})[0] == 200
    assert call(fake, "PATCH", "/api/v1/namespaces/app/configmaps/mine", token, {})[0] == 403  # patch not granted
    assert [(f.attributes.verb, f.attributes.name) for f in fake.forbidden] == [
        ("get", "other"), ("list", ""), ("create", ""), ("patch", "mine")]


def test_a_role_binding_grants_in_its_own_namespace_only(fake: FakeKube) -> None:
    bind(fake, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}], cluster_role=True)
    token = fake.issue_token("app", "robot")
    assert call(fake, "GET", "/api/v1/namespaces/app/configmaps/mine", token)[0] == 200
    assert call(fake, "GET", "/api/v1/namespaces/default/configmaps/mine", token)[0] == 403


def test_a_cluster_role_binding_grants_everywhere_and_namespaces_by_name(fake: FakeKube) -> None:
    bind(fake, [{"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["kube-system"],
                 "verbs": ["get"]}], namespace=None)
    token = fake.issue_token("app", "robot")
    assert call(fake, "GET", "/api/v1/namespaces/kube-system", token)[0] == 200
    assert call(fake, "GET", "/api/v1/namespaces/default", token)[0] == 403
    code, body = call(fake, "GET", "/api/v1/namespaces", token)
    assert code == 403 and "at the cluster scope" in body["message"]


def test_subresources_groups_and_wildcards(fake: FakeKube) -> None:
    fake.register("gateway.networking.k8s.io", "v1", "gateways", kind="Gateway")
    bind(fake, [{"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways/status"], "verbs": ["update"]},
                {"apiGroups": ["*"], "resources": ["leases"], "verbs": ["*"]}],
         subject={"kind": "Group", "name": "system:serviceaccounts:app"})
    token = fake.issue_token("app", "robot")
    attrs = request_attributes("PUT", ["apis", "gateway.networking.k8s.io", "v1", "namespaces", "app", "gateways",
                                       "gw", "status"], {})
    assert attrs is not None and fake.authorized(fake.subjects[token], attrs)
    get = request_attributes("GET", ["apis", "gateway.networking.k8s.io", "v1", "namespaces", "app", "gateways",
                                     "gw"], {})
    assert get is not None and not fake.authorized(fake.subjects[token], get)
    assert forbidden_message(fake.subjects[token], get).startswith(
        'gateways.gateway.networking.k8s.io "gw" is forbidden: User "system:serviceaccount:app:robot" cannot get')
    code, _ = call(fake, "POST", "/apis/coordination.k8s.io/v1/namespaces/app/leases", token,
                   {"metadata": {"name": "l"}, "spec": {}})
    assert code == 201


def test_admin_tokens_are_not_checked_and_watch_is_its_own_verb(fake: FakeKube) -> None:
    fake.admin_tokens.add("admin")
    assert call(fake, "GET", "/api/v1/namespaces/app/configmaps/other", "admin")[0] == 200
    attrs = request_attributes("GET", ["api", "v1", "namespaces", "app", "configmaps"], {"watch": "true"})
    assert attrs is not None and attrs.verb == "watch"


def test_the_token_controller_token_carries_its_account(fake: FakeKube) -> None:
    fake.create("", "v1", "secrets", {"metadata": {"name": "t", "namespace": "app", "annotations": {
        "kubernetes.io/service-account.name": "robot"}}, "type": "kubernetes.io/service-account-token"})
    (token,) = fake.issued_tokens
    assert fake.subjects[token] == "system:serviceaccount:app:robot"


def test_kube_system_uid_is_chosen() -> None:
    kube = FakeKube(kube_system_uid="3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63")
    assert kube.kube_system_uid == "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"
    assert kube.get("", "v1", "namespaces", "kube-system")["metadata"]["uid"] == kube.kube_system_uid
    assert FakeKube().kube_system_uid != FakeKube().kube_system_uid


def test_tls_serving_with_the_ca_given(tmp_path: Path) -> None:
    from tests.e2e.pod_kit import make_tls

    tls = make_tls(tmp_path, "test")
    kube = FakeKube()
    kube.ca_pem = tls.ca_pem
    url = kube.start(certfile=str(tls.cert_file), keyfile=str(tls.key_file))
    try:
        assert url.startswith("https://127.0.0.1:")
        trusted = ssl.create_default_context(cafile=str(tls.ca_file))
        with urllib.request.urlopen(url + "/version", context=trusted, timeout=5) as resp:
            assert json.loads(resp.read())["gitVersion"] == "v1.30.0-fake"
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(url + "/version", context=ssl.create_default_context(), timeout=5)
    finally:
        kube.stop()
