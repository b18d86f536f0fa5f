"""The per-zone steps run in order and the guard stops writes."""

from __future__ import annotations

from pathlib import Path

from gitdns.core.records import RecordKey
from gitdns.providers.memory import MemoryProvider
from gitdns.reconcile.engine import ZoneOutcome, from_files
from gitdns.reconcile.steps import ZONE_STEPS, ZonePass, run_zone_steps
from tests.agent.fakes import example_files


def _pass(tmp_path: Path, can_write: bool) -> tuple[ZonePass, MemoryProvider]:
    desired = from_files(tmp_path, example_files(), None)
    zone = desired.state.zone("example-com")
    cluster = desired.state.cluster("eu-west-1")
    assert zone is not None and cluster is not None
    provider = MemoryProvider()
    return ZonePass(zone, desired, cluster, provider, can_write, ZoneOutcome(zone)), provider


def test_steps_in_order() -> None:
    assert [name for name, _ in ZONE_STEPS] == ["build", "groups", "health", "merge", "plan", "guard", "apply",
                                                "verify", "prune-inactive", "peers", "render"]


def test_all_steps_run_and_write_when_the_lease_is_held(tmp_path: Path) -> None:
    p, provider = _pass(tmp_path, True)
    assert run_zone_steps(p) == [name for name, _ in ZONE_STEPS]
    assert p.outcome.applied > 0 and p.outcome.pending_after_apply == 0
    assert RecordKey("api.example.com", "CNAME") in {r.key for r in provider.read("example.com").records}


def test_guard_stops_writes_without_the_lease(tmp_path: Path) -> None:
    p, provider = _pass(tmp_path, False)
    assert run_zone_steps(p) == ["build", "groups", "health", "merge", "plan", "guard"]
    assert p.outcome.plan is not None and p.outcome.plan.changes
    assert provider.read("example.com").records == ()
    assert "lease" in p.notes[0]


def test_nothing_to_do_stops_at_the_guard(tmp_path: Path) -> None:
    p, _ = _pass(tmp_path, True)
    run_zone_steps(p)
    again = ZonePass(p.zone, p.desired, p.cluster, p.provider, True, ZoneOutcome(p.zone))
    assert run_zone_steps(again) == ["build", "groups", "health", "merge", "plan", "guard"]
