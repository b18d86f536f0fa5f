"""Kuadrant's DNSPolicy RFC: an agent running in a cluster sets PolicyAffected on its Gateways."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.hooks import gateway_hook
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files
from tests.fakes.kube_apiserver import FakeKube

client = pytest.importorskip("kubernetes.client")
GW = ("gateway.networking.k8s.io", "v1", "gateways")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.register(*GW, kind="Gateway")
    kube.create("", "v1", "namespaces", {"metadata": {"name": "ingress"}})
    kube.create(*GW, {"metadata": {"name": "api-gw", "namespace": "ingress"}, "spec": {"listeners": []}})
    kube.start()
    cfg = client.Configuration()
    cfg.host = kube.base_url
    client.Configuration.set_default(cfg)
    yield kube
    kube.stop()
    client.Configuration.set_default(client.Configuration())


def test_policy_affected_is_set_once_and_not_rewritten(fake: FakeKube, tmp_path: Path) -> None:
    source = FakeSource()
    source.commit(example_files())
    providers: dict[str, MemoryProvider] = {}

    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, MemoryProvider())

    agent = Agent(AgentConfig(repo="mem://", cluster="eu-west-1", state_dir=str(tmp_path)),
                  AgentPorts(source=source,
                  factory=factory, clock=Clock(), rng=random.Random(1), report_hooks=(gateway_hook(),)))
    agent.run()
    gateway: dict[str, Any] = fake.get(*GW, "api-gw", namespace="ingress")
    conditions = {c["type"]: c for c in gateway["status"]["conditions"]}
    ours = conditions["gateway.networking.k8s.io/PolicyAffected"]
    assert ours["status"] == "True" and ours["reason"] == "PolicyApplied"
    writes = fake.count("PUT", "/status")
    agent.run(force=True)
    assert fake.count("PUT", "/status") == writes
