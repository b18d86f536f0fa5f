"""A group a provider refuses is one error, named once, however many re-plans a stale write in
the same pass causes (it was printed four times, its name doubled: ``ns1… A: ns1… A: …``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.core.records import Change, Guard
from gitdns.providers.base import ApplyResult, Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files


class RefusesOne(MemoryProvider):
    """Fails one record's group every time (its message names the group, as the rfc2136 and
    route53 providers' do) and refuses another as stale on the first two applies."""

    stale = 2

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        bad = [c for c in changes if c.key.type == "A" and c.key.name.startswith("api.")]
        if not bad:
            bad = [c for c in changes if c.key.type == "A"][:1]
        victim = bad[0].key if bad else None
        rest = [c for c in changes if victim is None or c.key != victim]
        refused: tuple[tuple[object, str], ...] = ()
        if self.stale and len(rest) > 1:
            self.stale -= 1
            refused = ((rest[-1].key, "changed since read"),)
            rest = rest[:-1]
        result = super().apply(zone, rest, guards)
        failed = ((victim, f"{victim}: the server refused this content (REFUSED)"),) if victim else ()
        return ApplyResult(result.applied, refused, failed)  # type: ignore[arg-type]


def test_a_refused_group_is_one_error_named_once(tmp_path: Path) -> None:
    source = FakeSource()
    source.commit(example_files(), "c1")
    providers: dict[str, MemoryProvider] = {"example.com": RefusesOne(), "example.org": MemoryProvider()}

    def factory(zone: Zone) -> Provider:
        return providers[zone.domain]

    agent = Agent(AgentConfig(repo="mem://", cluster="eu-west-1", state_dir=str(tmp_path)),
                  AgentPorts(source=source, factory=factory, clock=Clock(), rng=random.Random(1)))
    cycle = agent.run()
    com = next(o for o in cycle.outcomes if o.zone.domain == "example.com")
    refused = [e for e in com.errors if "REFUSED" in e]
    assert com.refused_retries >= 1, com.errors  # the pass did re-plan
    assert len(refused) == 1, com.errors
    name = refused[0].split(":", 1)[0]
    assert refused[0].count(name) == 1, refused[0]
