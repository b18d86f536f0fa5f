"""Writes a pass makes beside its plan — mirroring the active groups, removing inactive groups,
leaving a zone, the heartbeat — report what the provider failed: one error naming the write
(they were dropped: the zone said Ready while the provider had refused them)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.groups import gitdns_name
from gitdns.core.model import Zone
from gitdns.core.owner.zone import heartbeat_name
from gitdns.core.records import Change, Guard
from gitdns.providers.base import ApplyResult, Provider
from gitdns.providers.memory import MemoryProvider
from gitdns.reconcile.zonepass import ZoneOutcome
from tests.agent.fakes import Clock, FakeSource
from tests.agent.test_groups_cycle import repo

ZONE = "example.com"


class FailsWhere(MemoryProvider):
    """Fails every change group that ``bad`` picks (content the server will not take); writes the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.bad: Callable[[Change], bool] = lambda c: False

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        failing = {c.group for c in changes if self.bad(c)}
        result = super().apply(zone, [c for c in changes if c.group not in failing],
                               [g for g in guards if g.group not in failing])
        refused = tuple((g, f"{g}: the server refused this content (REFUSED)") for g in sorted(failing))
        return ApplyResult(result.applied, result.refused, (*result.failed, *refused), result.change_ids)


CLOCK = Clock()


def agent(tmp: Path, name: str, source: FakeSource, provider: Provider) -> Agent:
    def factory(zone: Zone) -> Provider:
        return provider
    return Agent(AgentConfig(repo="mem://", cluster=name, state_dir=str(tmp / name)),
                 AgentPorts(source=source, factory=factory, clock=CLOCK, rng=random.Random(1)))


def outcome_of(a: Agent) -> ZoneOutcome:
    """The zone's outcome of the agent's next pass (a day later: its validation pass is due)."""
    CLOCK.advance(86400)
    return next(o for o in a.run().outcomes if o.zone.domain == ZONE)


CLUSTERS = {"c1": ("g1", "192.0.2.1"), "c2": ("g2", "192.0.2.2")}


def test_a_failed_mirror_of_the_active_groups_is_an_error(tmp_path: Path) -> None:
    source, provider = FakeSource(), FailsWhere()
    source.commit(repo(["g1"], 1, CLUSTERS))
    provider.bad = lambda c: c.key.name == gitdns_name(ZONE)
    out = outcome_of(agent(tmp_path, "c1", source, provider))
    mirror = [e for e in out.errors if "mirroring the active groups" in e]
    assert len(mirror) == 1 and "REFUSED" in mirror[0] and mirror[0].count(gitdns_name(ZONE)) == 1, out.errors
    assert not out.ok


def test_a_failed_removal_of_an_inactive_group_is_an_error(tmp_path: Path) -> None:
    source, provider = FakeSource(), FailsWhere()
    source.commit(repo([], 1, CLUSTERS))
    c1, c2 = agent(tmp_path, "c1", source, provider), agent(tmp_path, "c2", source, provider)
    assert outcome_of(c1).ok and outcome_of(c2).ok  # no group active: both publish
    source.commit(repo(["g1"], 2, CLUSTERS))
    provider.bad = lambda c: "192.0.2.2" in (c.old.values if c.old else ())  # g2's value will not go
    out = outcome_of(c1)
    removing = [e for e in out.errors if "removing inactive groups" in e]
    assert len(removing) == 1 and "REFUSED" in removing[0], out.errors
    provider.bad = lambda c: False
    assert outcome_of(c1).ok  # the next pass removes it
    assert all("192.0.2.2" not in r.values for r in provider.read(ZONE).records)


def test_a_failed_farewell_keeps_the_zone_and_says_why(tmp_path: Path) -> None:
    source, provider = FakeSource(), FailsWhere()
    source.commit(repo(None, 1, CLUSTERS))
    c2 = agent(tmp_path, "c2", source, provider)
    assert outcome_of(c2).ok
    source.commit(repo(None, 1, {"c1": CLUSTERS["c1"]}))  # c2 leaves git: its records and TXT go
    provider.bad = lambda c: c.key.name == heartbeat_name("c2-uid", ZONE)  # its heartbeat goes last
    out = outcome_of(c2)
    assert any("leaving the zone" in e and "REFUSED" in e for e in out.errors), out.errors
    assert any(r.name == heartbeat_name("c2-uid", ZONE) for r in provider.read(ZONE).records)
    provider.bad = lambda c: False
    assert outcome_of(c2).ok
    assert not any(r.name == heartbeat_name("c2-uid", ZONE) for r in provider.read(ZONE).records)


def test_a_failed_heartbeat_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source, provider = FakeSource(), FailsWhere()
    source.commit(repo(None, 1, CLUSTERS))
    provider.bad = lambda c: c.key.name == heartbeat_name("c1-uid", ZONE)
    with caplog.at_level(logging.WARNING, logger="gitdns"):
        outcome_of(agent(tmp_path, "c1", source, provider))
    assert any("heartbeat not written" in r.getMessage() and "REFUSED" in r.getMessage() for r in caplog.records)
