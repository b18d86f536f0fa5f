"""A value that fails where nothing should (a provider's parser, a renderer) fails its zone only:
the agent keeps running, the other zones are applied, what the failed pass wrote is taken back,
the applied revision does not advance, and the report says so."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import dns.exception

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.core.records import Change, Guard
from gitdns.providers.base import ApplyResult, Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files


class ParserBreaks(MemoryProvider):
    """Writes, then fails as dnspython does on a value it cannot parse (while ``broken``)."""

    broken = False

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        result = super().apply(zone, changes, guards)
        if self.broken and any(c.reason != "undo a failed pass" for c in changes):
            raise dns.exception.SyntaxError("Text input is malformed.")
        return result


def test_an_unexpected_failure_fails_its_zone_only_and_is_taken_back(tmp_path: Path) -> None:
    source = FakeSource()
    first = source.commit(example_files(), "c1")
    providers: dict[str, MemoryProvider] = {"example.com": ParserBreaks(), "example.org": MemoryProvider()}

    def factory(zone: Zone) -> Provider:
        return providers[zone.domain]

    agent = Agent(AgentConfig(repo="mem://", cluster="eu-west-1", state_dir=str(tmp_path)),
                  AgentPorts(source=source, factory=factory, clock=Clock(), rng=random.Random(1)))
    agent.run()
    before = {d: {r.key: r.values for r in p.read(d).records} for d, p in providers.items()}
    files = example_files()
    files["clusters/eu-west-1.yaml"] = files["clusters/eu-west-1.yaml"].replace("192.0.2.", "203.0.113.")
    source.commit(files, "c2")
    providers["example.com"].broken = True  # type: ignore[attr-defined]
    cycle = agent.run()  # no exception escapes
    com = next(o for o in cycle.outcomes if o.zone.domain == "example.com")
    assert com.errors and com.errors[0].startswith("InternalError: SyntaxError")
    after_com = {r.key: r.values for r in providers["example.com"].read("example.com").records}
    assert after_com == before["example.com"]  # what the failed pass wrote is taken back
    org = {r.key: r.values for r in providers["example.org"].read("example.org").records}
    assert org != before["example.org"]  # the other zone moved on
    assert agent.state.applied_sha == first  # the revision is not applied everywhere
    report = agent.last_report
    assert report is not None and not report.ready
    ready = next(c for c in report.conditions if c.type == "Ready")
    assert "example.com" in ready.message and "InternalError" in ready.message


class ReadBreaks(MemoryProvider):
    """Fails every read as a provider library's own bug would (no gitdns error)."""

    def read(self, zone: str, names: Sequence[str] | None = None):  # type: ignore[no-untyped-def]
        raise KeyError("ResourceRecordSets")


def test_an_unexpected_read_failure_on_a_restart_fails_the_zones_not_the_agent(tmp_path: Path) -> None:
    """A restart that finds no state reads each zone for the revision its own records carry,
    and a grouped zone is read for its active groups at every poll: a failure there that is no
    gitdns error fails the zones' passes (reported), never the agent's cycle."""
    source = FakeSource()
    source.commit(example_files(), "c1")
    agent = Agent(AgentConfig(repo="mem://", cluster="eu-west-1", state_dir=str(tmp_path / "fresh")),
                  AgentPorts(source=source, factory=lambda zone: ReadBreaks(), clock=Clock(), rng=random.Random(1)))
    cycle = agent.run()  # no exception escapes
    assert cycle.outcomes and all(o.errors for o in cycle.outcomes)
    assert agent.run() is not None  # the next poll too
    report = agent.last_report
    assert report is not None and not report.ready
