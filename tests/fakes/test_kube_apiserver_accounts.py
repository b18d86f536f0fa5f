"""The fake API server's ServiceAccounts, RBAC objects, token controller and bearer tokens."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from tests.fakes.kube_apiserver import SA_TOKEN_TYPE, FakeKube


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.start()
    yield kube
    kube.stop()


def call(fake: FakeKube, method: str, path: str, body: object = None, token: str = "") -> tuple[int, dict]:  # type: ignore[type-arg]
    raw = json.dumps(body).encode() if body is not None else b""
    return fake.handle(method, path, "application/json", raw, f"Bearer {token}" if token else "")


def token_secret(name: str = "sa-token", sa: str = "robot") -> dict[str, object]:
    return {"metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": sa}},
            "type": SA_TOKEN_TYPE}


def test_service_accounts_and_rbac_objects_are_served(fake: FakeKube) -> None:
    assert call(fake, "POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}})[0] == 201
    assert call(fake, "GET", "/api/v1/namespaces/default/serviceaccounts/robot")[0] == 200
    role = {"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    assert call(fake, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)[0] == 201
    code, got = call(fake, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/r")
    assert code == 200 and got["kind"] == "ClusterRole" and "namespace" not in got["metadata"]
    binding = {"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                      "name": "r"}, "subjects": []}
    assert call(fake, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)[0] == 201
    assert call(fake, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/b")[0] == 200
    assert call(fake, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", role)[0] == 201


def test_the_token_controller_fills_a_service_account_token(fake: FakeKube) -> None:
    call(fake, "POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}})
    code, created = call(fake, "POST", "/api/v1/namespaces/default/secrets", token_secret())
    assert code == 201
    _, secret = call(fake, "GET", "/api/v1/namespaces/default/secrets/sa-token")
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert token in fake.issued_tokens
    assert base64.b64decode(secret["data"]["ca.crt"]).decode() == fake.ca_pem
    assert base64.b64decode(secret["data"]["namespace"]).decode() == "default"
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"]
    assert int(secret["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_the_token_comes_after_the_configured_delay_and_needs_the_account(fake: FakeKube) -> None:
    fake.token_fill_delay = 2
    call(fake, "POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}})
    call(fake, "POST", "/api/v1/namespaces/default/secrets", token_secret())
    reads = [call(fake, "GET", "/api/v1/namespaces/default/secrets/sa-token")[1] for _ in range(3)]
    assert ["token" in (r.get("data") or {}) for r in reads] == [False, False, True]
    fake.token_fill_delay = 0
    call(fake, "POST", "/api/v1/namespaces/default/secrets", token_secret("orphan", sa="nobody"))
    assert "token" not in (call(fake, "GET", "/api/v1/namespaces/default/secrets/orphan")[1].get("data") or {})
    assert len(fake.issued_tokens) == 1


def test_bearer_tokens_only_when_required(fake: FakeKube) -> None:
    assert call(fake, "GET", "/api/v1/namespaces")[0] == 200
    fake.require_auth = True
    fake.admin_tokens.add("admin")
    code, body = call(fake, "GET", "/api/v1/namespaces")
    assert code == 401 and body["reason"] == "Unauthorized"
    assert call(fake, "GET", "/api/v1/namespaces", token="wrong")[0] == 401
    assert call(fake, "GET", "/api/v1/namespaces", token="admin")[0] == 200
    call(fake, "POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}}, token="admin")
    call(fake, "POST", "/api/v1/namespaces/default/secrets", token_secret(), token="admin")
    (issued,) = fake.issued_tokens
    assert call(fake, "GET", "/api/v1/namespaces", token=issued)[0] == 200  # authenticated; RBAC not enforced
