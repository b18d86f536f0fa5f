"""Fixtures for the default provider secret (load with ``pytest_plugins``): the HTTP fake
Kubernetes API with the namespaces ``dns`` and ``other``, a client for it, and "as in a pod"
(KUBERNETES_SERVICE_HOST set, the agent's own client finds the fake)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.fakes.kube_apiserver import FakeKube
from tests.providers.default_secret_helpers import NS


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as kube:
        for ns in (NS, "other"):
            kube.create("", "v1", "namespaces", {"metadata": {"name": ns}})
        yield kube


@pytest.fixture
def api(fake: FakeKube) -> Any:
    cfg = client.Configuration()
    cfg.host = fake.base_url
    return client.CoreV1Api(client.ApiClient(cfg))


@pytest.fixture
def in_cluster(fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    """As in a pod: KUBERNETES_SERVICE_HOST set, the agent's namespace known; the client
    reaches the fake through a kubeconfig (there is no service account token here)."""
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    def no_incluster() -> None:
        raise ConfigException("no service account token")

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{fake.base_url}'}}}}]\n"
        "users: [{name: fake, user: {token: fake}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n")
    monkeypatch.setattr(kube_config, "load_incluster_config", no_incluster)
    monkeypatch.setattr(client.Configuration, "_default", None)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("GITDNS_POD_NAMESPACE", NS)
    return fake
