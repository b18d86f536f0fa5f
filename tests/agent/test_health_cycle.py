"""DNSPolicy health through the agent cycle: withdraw, re-add, fail open, freeze."""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.health.filter import HealthTarget
from gitdns.core.model import Zone
from gitdns.core.records import RecordKey
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files

HOST = "app.example.org"


class FakeHealth:
    def __init__(self) -> None:
        self.targets: list[HealthTarget] = []
        self.down: set[str] = set()

    def set_targets(self, targets: list[HealthTarget]) -> None:
        self.targets = targets

    def unhealthy(self) -> frozenset[str]:
        return frozenset(t.target_id for t in self.targets if t.address in self.down)

    changed = False  # a target changed state (the next pass re-plans)

    def take_changed(self) -> bool:
        changed, self.changed = self.changed, False
        return changed

    def states(self) -> Mapping[str, Mapping[str, Any]]:
        return {t.target_id: {"state": "unhealthy" if t.address in self.down else "healthy"} for t in self.targets}


def with_health_check(files: dict[str, str]) -> dict[str, str]:
    simple = next(k for k, v in files.items() if "kind: DNSPolicy" in v and "strategy: simple" in v)
    text = files[simple]
    assert "healthCheck" not in text
    files[simple] = text.rstrip("\n") + "\n  healthCheck: {protocol: HTTP, port: 80, path: /healthz}\n"
    return files


def make(tmp_path: Path, cluster: str, providers: dict[str, MemoryProvider], source: FakeSource,
         health: FakeHealth, fleet: dict[str, tuple[int, int]] | None = None) -> Agent:
    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, MemoryProvider())

    agent = Agent(AgentConfig(repo="mem://", cluster=cluster, state_dir=str(tmp_path / cluster)),
                  AgentPorts(source=source,
                  factory=factory, clock=Clock(), rng=random.Random(1), probes=health,
                             fleet_health=(lambda own: fleet) if fleet is not None else None))
    return agent


def values(providers: dict[str, MemoryProvider]) -> tuple[str, ...]:
    recs = {r.key: r for r in providers["example.org"].read("example.org").records}
    return recs[RecordKey(HOST, "A")].values


def test_withdraw_readd_and_fail_open(tmp_path: Path) -> None:
    source = FakeSource()
    source.commit(with_health_check(example_files()))
    providers: dict[str, MemoryProvider] = {}
    eu, us = FakeHealth(), FakeHealth()
    a = make(tmp_path, "eu-west-1", providers, source, eu)
    b = make(tmp_path, "us-east-1", providers, source, us)
    a.run()
    b.run()
    assert values(providers) == ("192.0.2.20", "203.0.113.20")
    assert "app.example.org|192.0.2.20" in {t.target_id for t in eu.targets}
    eu.down = {"192.0.2.20"}
    a.ports.probes.changed = True
    a.run()
    assert values(providers) == ("203.0.113.20",)  # withdrawn: the other cluster still answers
    healthy = next(c for c in a.last_report.conditions if c.type == "Healthy")  # type: ignore[union-attr]
    assert (healthy.status, healthy.reason) == (False, "TargetsWithdrawn") and "192.0.2.20" in healthy.message
    us.down = {"203.0.113.20"}
    b.ports.probes.changed = True
    b.run()
    assert values(providers) == ("203.0.113.20",)  # the last path stays: fail open
    healthy = next(c for c in b.last_report.conditions if c.type == "Healthy")  # type: ignore[union-attr]
    assert healthy.reason == "AllTargetsUnhealthy"
    eu.down = set()
    a.ports.probes.changed = True
    a.run()
    assert values(providers) == ("192.0.2.20", "203.0.113.20")  # re-added on recovery
    assert a.last_report is not None and "health.yaml" not in a.last_report.health


def test_a_fleet_wide_failure_freezes_withdrawals(tmp_path: Path) -> None:
    source = FakeSource()
    source.commit(with_health_check(example_files()))
    providers: dict[str, MemoryProvider] = {}
    eu, us = FakeHealth(), FakeHealth()
    fleet: dict[str, tuple[int, int]] = {}
    a = make(tmp_path, "eu-west-1", providers, source, eu, fleet)
    b = make(tmp_path, "us-east-1", providers, source, us)
    a.run()
    b.run()
    fleet[HOST] = (2, 2)  # the other clusters' targets are failing too
    eu.down = {"192.0.2.20"}
    a.ports.probes.changed = True
    a.run()
    assert values(providers) == ("192.0.2.20", "203.0.113.20")  # nothing withdrawn
    healthy = next(c for c in a.last_report.conditions if c.type == "Healthy")  # type: ignore[union-attr]
    assert healthy.reason == "WithdrawalsFrozen"


def test_failures_right_after_a_revision_change_are_frozen(tmp_path: Path) -> None:
    source = FakeSource()
    files = with_health_check(example_files())
    source.commit(files)
    providers: dict[str, MemoryProvider] = {}
    eu, us = FakeHealth(), FakeHealth()
    a = make(tmp_path, "eu-west-1", providers, source, eu)
    b = make(tmp_path, "us-east-1", providers, source, us)
    a.run()
    b.run()
    source.commit({**files, "records/extra.yaml": files[next(k for k in files if "kind: RecordSet" in files[k])]
                   .replace("name: ", "name: x-", 1)}, "a new revision")
    eu.down = {"192.0.2.20"}  # e.g. the new revision changed the health path
    a.run()
    assert values(providers) == ("192.0.2.20", "203.0.113.20")
    healthy = next(c for c in a.last_report.conditions if c.type == "Healthy")  # type: ignore[union-attr]
    assert healthy.reason == "WithdrawalsFrozen"
    a.ports.clock.advance(a.health.revision_grace + 1)  # type: ignore[attr-defined]
    a.ports.probes.changed = True
    a.run()
    assert values(providers) == ("203.0.113.20",)
