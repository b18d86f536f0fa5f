"""The optional mode ConfigMap (Kuadrant's delegation RFC) sets the mode, read through the
Kubernetes API (HTTP fake)."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes import client

from gitdns.agent.modes import choose, configmap_mode
from gitdns.core.model import Mode
from tests.fakes.kube_apiserver import FakeKube

NS = "gitdns-system"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.create("", "v1", "namespaces", {"metadata": {"name": NS}})
    kube.start()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setattr(kubernetes.config, "load_incluster_config", lambda *a, **k: None)
    monkeypatch.setattr(client.Configuration, "_default", None)
    if hasattr(client.ApiClient, "_default"):
        monkeypatch.setattr(client.ApiClient, "_default", None)
    cfg = client.Configuration()
    cfg.host = kube.base_url
    client.Configuration.set_default(cfg)
    yield kube
    kube.stop()


def test_the_configmap_sets_the_mode_below_flags_and_env(fake: FakeKube) -> None:
    assert configmap_mode(NS, "gitdns-config") is None  # absent: no override, no error
    fake.create("", "v1", "configmaps", {"metadata": {"name": "gitdns-config"}, "data": {"DNS_MODE": "remote"}},
                namespace=NS)
    assert configmap_mode(NS, "gitdns-config") == "remote"
    picked = choose(configured="", env={}, configmap=lambda: configmap_mode(NS, "gitdns-config"),
                    git_mode=Mode.PRIMARY)
    assert picked.mode is Mode.REMOTE and not picked.condition(Mode.PRIMARY).status
    assert choose(configured="primary", env={}, configmap=lambda: configmap_mode(NS, "gitdns-config"),
                  git_mode=Mode.PRIMARY).mode is Mode.PRIMARY


def test_gitdns_mode_key_wins_in_the_configmap(fake: FakeKube) -> None:
    fake.create("", "v1", "configmaps", {"metadata": {"name": "gitdns-config"},
                                         "data": {"DNS_MODE": "remote", "GITDNS_MODE": "primary"}}, namespace=NS)
    assert configmap_mode(NS, "gitdns-config") == "primary"


def test_outside_a_cluster_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert configmap_mode(NS, "gitdns-config") is None
