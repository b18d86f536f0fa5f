"""Rollback protection fails closed: a head that is not a descendant of what this cluster
applied is refused after a restart even when the state directory, or the status branch, or
both are lost (the revision its own records carry in the zone is then the floor)."""

from __future__ import annotations

import random
from pathlib import Path

from gitdns.agent.applied import APPLIED_FILE
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files

CLUSTER = "eu-west-1"


def agent(source: FakeSource, state: Path, providers: dict[str, MemoryProvider], **config: object) -> Agent:
    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, MemoryProvider())

    cfg = AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(state), **config)  # type: ignore[arg-type]
    return Agent(cfg, AgentPorts(source=source, factory=factory, clock=Clock(), rng=random.Random(1)))


def zone_values(providers: dict[str, MemoryProvider]) -> dict[str, object]:
    return {r.name + " " + r.type: r.values for r in providers["example.com"].read("example.com").records
            if not r.name.startswith(("kuadrant-", "gitdns-"))}


def history(source: FakeSource) -> tuple[str, str]:
    """c1, then c2 (a later commit changing eu-west-1's addresses); the head is c2."""
    first = source.commit(example_files(), "c1")
    files = example_files()
    files["clusters/eu-west-1.yaml"] = files["clusters/eu-west-1.yaml"].replace("192.0.2.", "203.0.113.")
    second = source.commit(files, "c2")
    return first, second


def force_push_back(source: FakeSource, sha: str) -> None:
    source.head = sha


def refused(a: Agent) -> bool:
    report = a.last_report
    return report is not None and any(c.type == "SourceAvailable" and c.reason == "RollbackRefused"
                                      for c in report.conditions)


def test_the_state_directory_remembers_the_applied_revision(tmp_path: Path) -> None:
    source, providers = FakeSource(), {}  # type: ignore[var-annotated]
    first, second = history(source)
    agent(source, tmp_path / "s", providers).run()
    assert (tmp_path / "s" / APPLIED_FILE).read_text().count(second) == 1
    before = zone_values(providers)
    force_push_back(source, first)
    restarted = agent(source, tmp_path / "s", providers)  # no status branch at all
    restarted.run("start", force=True)
    assert refused(restarted)
    assert zone_values(providers) == before


def test_with_state_and_status_lost_the_zone_s_own_records_are_the_floor(tmp_path: Path) -> None:
    source, providers = FakeSource(), {}  # type: ignore[var-annotated]
    first, second = history(source)
    agent(source, tmp_path / "old", providers).run()
    before = zone_values(providers)
    force_push_back(source, first)
    restarted = agent(source, tmp_path / "new", providers)  # a new state directory, no status branch
    restarted.run("start", force=True)
    assert refused(restarted), restarted.last_report
    message = next(c.message for c in restarted.last_report.conditions  # type: ignore[union-attr]
                   if c.type == "SourceAvailable")
    assert second[:7] in message and "example.com" in message
    assert zone_values(providers) == before
    assert restarted.state.applied_sha is None


def test_the_floor_lets_a_descendant_through(tmp_path: Path) -> None:
    source, providers = FakeSource(), {}  # type: ignore[var-annotated]
    _first, _second = history(source)
    agent(source, tmp_path / "old", providers).run()
    files = example_files()
    files["clusters/eu-west-1.yaml"] = files["clusters/eu-west-1.yaml"].replace("192.0.2.", "198.51.100.")
    third = source.commit(files, "c3")
    restarted = agent(source, tmp_path / "new", providers)
    restarted.run("start", force=True)
    assert not refused(restarted)
    assert restarted.state.applied_sha == third


def test_allow_rollback_accepts_the_older_head(tmp_path: Path) -> None:
    source, providers = FakeSource(), {}  # type: ignore[var-annotated]
    first, _second = history(source)
    agent(source, tmp_path / "old", providers).run()
    force_push_back(source, first)
    restarted = agent(source, tmp_path / "new", providers, allow_rollback=True)
    restarted.run("start", force=True)
    assert not refused(restarted)
    assert restarted.state.applied_sha == first
