"""In a pod with GITDNS_CLUSTER unset the agent is the Cluster whose id is the kube-system
Namespace UID (seed 000: the owner id is derived in code), read through the Kubernetes API
(HTTP fake); outside Kubernetes the setting is required."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from kubernetes import client

from gitdns.agent.config import AgentConfig
from gitdns.agent.identity import UID_ATTEMPTS, derive_cluster
from gitdns.errors import ConfigError, UnreachableError
from tests.fakes.kube_apiserver import FakeKube

UID = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # eu-west-1's id in example-repo


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    yield from serve(monkeypatch, UID)


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    yield from serve(monkeypatch, "0c1d2e3f-aaaa-bbbb-cccc-1234567890ab")  # a cluster git does not name


def serve(monkeypatch: pytest.MonkeyPatch, uid: str) -> Iterator[FakeKube]:
    kube = FakeKube(kube_system_uid=uid)
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


def test_unset_in_a_pod_is_the_kube_system_uid(fake: FakeKube, tmp_path: Path) -> None:
    config = derive_cluster(AgentConfig(repo="r", cluster="", state_dir=str(tmp_path)))
    assert config.cluster == UID == fake.kube_system_uid


def test_a_configured_cluster_is_kept_and_the_api_not_asked(tmp_path: Path) -> None:
    def never() -> str:
        raise AssertionError("asked")

    config = AgentConfig(repo="r", cluster="eu-west-1", state_dir=str(tmp_path))
    assert derive_cluster(config, read_uid=never) is config


def test_outside_kubernetes_the_setting_is_required(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match=r"--cluster \(GITDNS_CLUSTER\) is required outside Kubernetes"):
        derive_cluster(AgentConfig(repo="r", cluster="", state_dir=str(tmp_path)))


def test_the_api_is_asked_again_then_the_error_names_the_rule(tmp_path: Path) -> None:
    calls: list[int] = []
    waits: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise UnreachableError("cluster-id: cannot read namespace kube-system: ConnectionRefusedError")
        return UID

    config = derive_cluster(AgentConfig(repo="r", cluster="", state_dir=str(tmp_path)), read_uid=flaky,
                            sleep=waits.append)
    assert config.cluster == UID and waits == [1.0, 2.0]

    def forbidden() -> str:
        raise UnreachableError("cluster-id: cannot read namespace kube-system: HTTP 403 Forbidden")

    waits.clear()
    with pytest.raises(ConfigError) as err:
        derive_cluster(AgentConfig(repo="r", cluster="", state_dir=str(tmp_path)), read_uid=forbidden,
                       sleep=waits.append)
    assert len(waits) == UID_ATTEMPTS - 1
    assert "403 Forbidden" in str(err.value) and "gitdns-cluster-id" in str(err.value)


def test_no_cluster_with_that_uid_names_it_and_the_command(elsewhere: FakeKube, tmp_path: Path) -> None:
    import random

    from gitdns.agent.cycle import Agent
    from gitdns.agent.ports import AgentPorts
    from gitdns.providers.memory import MemoryProvider
    from tests.agent.fakes import Clock, FakeSource, example_files

    other = elsewhere.kube_system_uid
    config = derive_cluster(AgentConfig(repo="mem://", cluster="", state_dir=str(tmp_path)))
    assert config.cluster == other
    source = FakeSource()
    source.commit(example_files())
    agent = Agent(config, AgentPorts(source=source, factory=lambda zone: MemoryProvider(), clock=Clock(),
                                     rng=random.Random(1)))
    agent.run()
    report = agent.last_report
    assert report is not None and not report.ready and report.cluster_id == other
    ready = next(c for c in report.conditions if c.type == "Ready")
    assert ready.reason == "InvalidConfiguration"
    assert f"no Cluster {other} in git" in ready.message and "gitdns cluster-id" in ready.message
    assert f"spec.id: {other}" in ready.message
