"""The agent with a zone that names no provider: the default provider secret of its namespace
(the HTTP fake Kubernetes API, as in a pod) chooses it; without one only that zone is held, with
the reason in its status, and it goes on by itself once a Secret is labelled."""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.status.report import ClusterReport, ZoneReport
from gitdns.reconcile.engine import ProviderFactory, default_factory
from tests.agent.fakes import Clock, FakeSource, example_files
from tests.fakes.kube_apiserver import FakeKube
from tests.providers.default_secret_helpers import NS, add_secret

pytest_plugins = ("tests.providers.default_secret_fixtures",)  # in_cluster

CLUSTER = "eu-west-1"
PROVIDER_BLOCK = re.compile(r"\n  provider:\n(    .*\n)+")


def files_without_org_provider() -> dict[str, str]:
    files = example_files()
    path = "zones/example-org.yaml"
    text = files[path] if files[path].endswith("\n") else files[path] + "\n"
    files[path], count = PROVIDER_BLOCK.subn("\n", text)
    assert count == 1 and "provider" not in files[path]
    return files


def zones_of(report: ClusterReport | None) -> dict[str, ZoneReport]:
    assert report is not None
    return {z.zone: z for z in report.zones}


def own_names(factory: ProviderFactory, agent: Agent, zone_name: str) -> set[str]:
    assert agent.state.current is not None
    zone = agent.state.current.state.zone(zone_name)
    assert zone is not None
    return {r.name for r in factory(zone).read(zone.domain).records if not r.name.startswith("kuadrant-")}


def test_a_zone_without_provider_waits_for_its_default_secret_alone(in_cluster: FakeKube, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    source = FakeSource()
    source.commit(files_without_org_provider(), "example.org on the default provider secret")
    clock = Clock()
    factory = default_factory(tmp_path)
    cfg = AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(tmp_path))
    agent = Agent(cfg, AgentPorts(source=source, factory=factory, clock=clock, rng=random.Random(1)))

    agent.run()
    zones = zones_of(agent.last_report)
    assert zones["example.com"].error == "" and own_names(factory, agent, "example-com")  # the other zone goes on
    org = zones["example.org"]
    assert org.provider == "default"
    assert org.error.startswith("DefaultProviderNotFound: zone example.org: no default provider secret in "
                                f"namespace {NS}"), org.error
    assert agent.last_report is not None and not agent.last_report.ready
    ready = next(c for c in agent.last_report.conditions if c.type == "Ready")
    assert "example.org" in ready.message and "kuadrant.io/default-provider=true" in ready.message

    add_secret(in_cluster, "dns-store", "gitdns.io/memory", {"TOKEN": "never-in-a-log"})
    clock.advance(60)  # past the error's validation delay
    with caplog.at_level(logging.INFO):
        assert agent.validate() == 1
    agent.run(force=True)
    zones = zones_of(agent.last_report)
    assert zones["example.org"].error == ""
    assert "app.example.org" in own_names(factory, agent, "example-org")  # published through the chosen provider
    assert agent.last_report is not None and agent.last_report.ready, agent.last_report.conditions
    assert f"default provider chosen: zone=example.org secret={NS}/dns-store type=gitdns.io/memory provider=memory" \
        in caplog.text
    assert "never-in-a-log" not in caplog.text
    lists = in_cluster.count("GET", f"/namespaces/{NS}/secrets")
    agent.run(force=True)
    assert in_cluster.count("GET", f"/namespaces/{NS}/secrets") == lists  # chosen once per zone


def test_two_default_secrets_hold_the_zone_naming_both(in_cluster: FakeKube, tmp_path: Path) -> None:
    add_secret(in_cluster, "first", "gitdns.io/memory")
    add_secret(in_cluster, "second", "kuadrant.io/aws", {"AWS_ACCESS_KEY_ID": "AKIA-NOT-SHOWN"})
    source = FakeSource()
    source.commit(files_without_org_provider(), "example.org on the default provider secret")
    cfg = AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(tmp_path))
    agent = Agent(cfg, AgentPorts(source=source, factory=default_factory(tmp_path), clock=Clock(),
                                  rng=random.Random(1)))
    agent.run()
    zones = zones_of(agent.last_report)
    error = zones["example.org"].error
    assert error.startswith("MultipleDefaultProviders:") and f"{NS}/first" in error and f"{NS}/second" in error
    assert "AKIA-NOT-SHOWN" not in error and zones["example.com"].error == ""
