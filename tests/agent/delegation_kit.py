"""A small fleet for delegation tests: primaries and remotes sharing one in-memory git source,
one status hub (the status branches) and one memory zone."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent, files_of
from gitdns.agent.delegate import DelegationSource
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.core.records import RecordKey
from gitdns.core.status.doc import StatusTree, dump
from gitdns.core.status.report import ClusterReport
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource

ZONE = """apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: example-com}
spec:
  domain: example.com
  provider: {type: memory}
"""

POLICY = """apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata: {name: %(name)s}
spec:
  targetRef: {gateway: %(gateway)s, namespace: ingress}
  strategy: %(strategy)s
"""

POLL = 10.0


def cluster_doc(name: str, mode: str, addresses: list[str] | None = None, hosts: tuple[str, ...] = (),
                group: str | None = None, geo: str = "GEO-EU", gateway: str = "gw") -> str:
    lines = ["apiVersion: gitdns.io/v1alpha1", "kind: Cluster", f"metadata: {{name: {name}}}", "spec:",
             f"  id: id-{name}", f"  geo: {geo}", f"  mode: {mode}"]
    if group:
        lines.append(f"  group: {group}")
    if addresses:
        lines += ["  gateways:", f"    - name: {gateway}", "      namespace: ingress",
                  f"      addresses: [{', '.join(addresses)}]", "      listeners:"]
        lines += [f"        - hostname: {h}" for h in hosts] or ["        []"]
    return "\n".join(lines) + "\n"


def base_files(**extra: str) -> dict[str, str]:
    files = {
        "zones/example.yaml": ZONE,
        "policies/app.yaml": POLICY % {"name": "app", "gateway": "gw", "strategy": "simple"},
        "clusters/p1.yaml": cluster_doc("p1", "primary"),
        "clusters/p2.yaml": cluster_doc("p2", "primary"),
        "clusters/r1.yaml": cluster_doc("r1", "remote", ["10.0.0.1"], ("app.example.com", "solo1.example.com")),
        "clusters/r2.yaml": cluster_doc("r2", "remote", ["10.0.0.2"], ("app.example.com",)),
    }
    files.update(extra)
    return files


@dataclass
class Hub:
    """The status branches: cluster id -> the files of its last report."""

    trees: dict[str, StatusTree] = field(default_factory=dict)
    reads: int = 0

    def sink(self) -> StatusSink:
        return StatusSink(self)

    def read(self) -> Mapping[str, StatusTree]:
        self.reads += 1
        return dict(self.trees)


@dataclass
class StatusSink:
    hub: Hub

    def publish(self, report: ClusterReport) -> str | None:
        files = files_of(report, dump)
        old = self.hub.trees.get(report.cluster_id)
        if old is not None and old.files == files:
            return None
        self.hub.trees[report.cluster_id] = StatusTree(f"c{len(self.hub.trees)}", files, "status", 0)
        return "sha"


class NoProvider:
    def __call__(self, zone: Zone) -> Provider:
        raise AssertionError("a remote agent must not build a provider")


@dataclass
class Fleet:
    tmp: Path
    source: FakeSource = field(default_factory=FakeSource)
    hub: Hub = field(default_factory=Hub)
    clock: Clock = field(default_factory=lambda: Clock(1_700_000_000.0))
    zone: MemoryProvider = field(default_factory=MemoryProvider)
    agents: dict[str, Agent] = field(default_factory=dict)

    def agent(self, name: str, *, remote: bool = False, cluster: str | None = None, factory: Any = None,
              lease_builder: Any = None, **config: object) -> Agent:
        cfg = AgentConfig(repo="mem://", cluster=cluster or name, state_dir=str(self.tmp / name),
                          poll_interval=POLL, **config)  # type: ignore[arg-type]
        factory = factory or (NoProvider() if remote else (lambda zone: self.zone))
        delegation = DelegationSource(self.hub.read, stale_after=cfg.stale_after, default_poll=POLL,
                                      clock=self.clock)
        agent = Agent(cfg, AgentPorts(source=self.source, factory=factory, status=self.hub.sink(), clock=self.clock,
                                      rng=random.Random(1), delegation=delegation, mode_env={},
                                      lease_builder=lease_builder(cfg, factory) if lease_builder else None))
        self.agents[name] = agent
        return agent

    def data(self) -> dict[RecordKey, tuple[str, ...]]:
        return {r.key: r.values for r in self.zone.read("example.com").records
                if not r.name.startswith("kuadrant-") and r.type != "TXT"}
