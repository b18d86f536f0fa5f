"""Remote clusters from kubeconfig Secrets, against the fake API server."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from gitdns.adapters.kube.clusters import ClusterSecrets
from gitdns.errors import AuthError, UnreachableError
from tests.fakes.kube_apiserver import FakeKube
from tests.kubedelegation.kube_fleet import kubeconfig

client = pytest.importorskip("kubernetes.client")

NS = "kuadrant-system"
LABEL = "kuadrant.io/multicluster-kubeconfig"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.create("", "v1", "namespaces", {"metadata": {"name": NS}})
    kube.start()
    yield kube
    kube.stop()


@pytest.fixture
def secrets(fake: FakeKube) -> Iterator[ClusterSecrets]:
    cfg = client.Configuration()
    cfg.host = fake.base_url
    with client.ApiClient(cfg) as api:
        found = ClusterSecrets(api)
        yield found
        found.close()


def put(fake: FakeKube, name: str, data: dict[str, str], label: str = "true") -> None:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": NS, "labels": {LABEL: label}}, "data": data}
    try:
        fake.get("", "v1", "secrets", name, namespace=NS)
    except Exception:
        fake.create("", "v1", "secrets", body)
        return
    fake.mutate("", "v1", "secrets", name, lambda o: o.__setitem__("data", data), namespace=NS)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_one_client_per_secret_kept_while_unchanged(fake: FakeKube, secrets: ClusterSecrets) -> None:
    put(fake, "eu", {"kubeconfig": b64(kubeconfig("http://127.0.0.1:1"))})
    put(fake, "us", {"kubeconfig": b64(kubeconfig("http://127.0.0.1:2"))})
    put(fake, "off", {"kubeconfig": b64(kubeconfig("http://127.0.0.1:3"))}, label="false")
    first = secrets.discover()
    assert set(first.clients) == {"eu", "us"} and not first.problems
    assert first.clients["eu"].configuration.host == "http://127.0.0.1:1"
    again = secrets.discover()
    assert again.clients["eu"] is first.clients["eu"]  # unchanged: the same client
    put(fake, "eu", {"kubeconfig": b64(kubeconfig("http://127.0.0.1:9"))})
    changed = secrets.discover()
    assert changed.clients["eu"] is not first.clients["eu"]
    assert changed.clients["eu"].configuration.host == "http://127.0.0.1:9"
    fake.handle("DELETE", f"/api/v1/namespaces/{NS}/secrets/us", "", b"")
    assert set(secrets.discover().clients) == {"eu"}


def test_unusable_secrets_are_named_never_quoted(fake: FakeKube, secrets: ClusterSecrets) -> None:
    put(fake, "nokey", {"other": b64("x")})
    put(fake, "garbage", {"kubeconfig": b64("users: [{token: sup3r-s3cret: : :")})
    put(fake, "empty", {"kubeconfig": b64("apiVersion: v1\nkind: Config\n")})
    found = secrets.discover()
    assert not found.clients and set(found.problems) == {"nokey", "garbage", "empty"}
    assert found.names == {"nokey", "garbage", "empty"}
    assert all("sup3r" not in why for why in found.problems.values())


def test_the_primary_api_failing_is_an_error(fake: FakeKube, secrets: ClusterSecrets) -> None:
    fake.require_auth = True
    with pytest.raises(AuthError, match="not allowed to list Secrets"):
        secrets.discover()
    fake.require_auth = False
    fake.stop()
    with pytest.raises(UnreachableError):
        secrets.discover()
