"""The agent keeps what each file made across its cycles (`gitdns.core.blobcache.ValidationCache`,
by git blob id): a commit that changes one file parses that file alone, and the Desired it
loads is the one a cold load gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core import loader
from gitdns.providers.memory import MemoryProvider
from gitdns.reconcile.engine import from_files
from tests.agent.fakes import Clock, FakeSource
from tests.agent.test_held_files import EXTRA, FILES


def test_a_commit_changing_one_file_parses_that_file_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = FakeSource()
    provider = MemoryProvider()
    agent = Agent(AgentConfig(repo="mem://", cluster="lo", state_dir=str(tmp_path)),
                  AgentPorts(source=source, factory=lambda zone: provider, clock=Clock(), rng=random.Random(1)))
    source.commit({**FILES, "records.yaml": EXTRA}, "c1")
    agent.run()
    parsed: list[str] = []
    real = loader._parse
    monkeypatch.setattr(loader, "_parse", lambda file, text: parsed.append(file) or real(file, text))
    changed = {**FILES, "records.yaml": EXTRA.replace("name: www", "name: web")}
    source.commit(changed, "c2")
    agent.run()
    assert parsed == ["records.yaml"]
    current = agent.state.current
    assert current is not None
    cold = from_files(Path("."), changed, None)
    assert current.state.record_sets == cold.state.record_sets
    assert current.state.clusters == cold.state.clusters and current.state.policies == cold.state.policies
    assert current.problems == cold.problems
    assert "web.example.com" in {r.name for r in provider.read("example.com").records}
