"""The zone pipeline: each role's steps run in order, a step's result ends the pass, the
closing steps always run, and the guard stops writes."""

from __future__ import annotations

from pathlib import Path

from gitdns.core.records import RecordKey
from gitdns.providers.memory import MemoryProvider
from gitdns.reconcile.engine import from_files
from gitdns.reconcile.pipeline import PIPELINES, Role, run
from gitdns.reconcile.zonepass import NO_PROVIDER, Result, ZoneOutcome, ZonePass
from tests.agent.fakes import example_files


def _pass(tmp_path: Path, can_write: bool, provider: MemoryProvider | None = None) -> tuple[ZonePass, MemoryProvider]:
    desired = from_files(tmp_path, example_files(), None)
    zone = desired.state.zone("example-com")
    cluster = desired.state.cluster("eu-west-1")
    assert zone is not None and cluster is not None
    provider = provider or MemoryProvider()
    return ZonePass(zone, desired, cluster, provider, can_write, ZoneOutcome(zone)), provider


def test_role_step_lists() -> None:
    assert PIPELINES[Role.DEFAULT].names() == ["build", "groups", "health", "plan", "guard", "apply", "verify",
                                               "prune-inactive", "render"]
    assert PIPELINES[Role.PRIMARY].names() == ["build", "groups", "health", "merge", "retire-primaries", "plan",
                                               "guard", "apply", "verify", "prune-inactive", "peers",
                                               "clean-remote-claims", "render"]
    assert PIPELINES[Role.REMOTE].names() == ["endpoints"]
    # the preview runs the same steps but verify and render, against a copy of the zone
    assert PIPELINES[Role.PREVIEW].names() == [n for n in PIPELINES[Role.DEFAULT].names()
                                               if n not in ("verify", "render")]
    assert PIPELINES[Role.PREVIEW_PRIMARY].names() == [n for n in PIPELINES[Role.PRIMARY].names()
                                                       if n not in ("verify", "render")]


def test_all_steps_run_and_write_when_the_lease_is_held(tmp_path: Path) -> None:
    p, provider = _pass(tmp_path, True)
    assert run(p, Role.DEFAULT) is Result.CONTINUE
    assert list(p.outcome.steps) == PIPELINES[Role.DEFAULT].names()
    assert p.outcome.applied > 0 and p.outcome.pending_after_apply == 0
    assert RecordKey("api.example.com", "CNAME") in {r.key for r in provider.read("example.com").records}


def test_guard_holds_writes_without_the_lease_and_closing_steps_still_run(tmp_path: Path) -> None:
    p, provider = _pass(tmp_path, False)
    assert run(p, Role.DEFAULT) is Result.HELD
    assert list(p.outcome.steps) == ["build", "groups", "health", "plan", "guard", "render"]
    assert p.outcome.plan is not None and p.outcome.plan.changes
    assert provider.read("example.com").records == ()
    assert "lease" in p.notes[0]


def test_nothing_to_do_writes_nothing(tmp_path: Path) -> None:
    p, provider = _pass(tmp_path, True)
    run(p, Role.DEFAULT)
    version = provider.version
    again, _ = _pass(tmp_path, True, provider)
    assert run(again, Role.DEFAULT) is Result.CONTINUE
    assert again.outcome.plan is not None and not again.outcome.plan.changes
    assert again.outcome.applied == 0 and provider.version == version


def test_unchanged_intent_reads_nothing(tmp_path: Path) -> None:
    p, provider = _pass(tmp_path, True)
    run(p, Role.DEFAULT)
    again, _ = _pass(tmp_path, True, provider)
    again.memory.intent = p.intent.records if p.intent else None
    run(again, Role.DEFAULT)
    assert again.unchanged and again.outcome.plan is None
    assert "intent unchanged: nothing read" in again.notes


def test_remote_role_touches_no_provider(tmp_path: Path) -> None:
    p, _ = _pass(tmp_path, True)
    p.provider = NO_PROVIDER
    assert run(p, Role.REMOTE) is Result.DONE
    assert p.endpoints and "delegated to the primaries" in p.outcome.skipped


def test_a_stalled_plan_stops_before_apply(tmp_path: Path) -> None:
    p, provider = _pass(tmp_path, True)
    run(p, Role.DEFAULT)
    # every record of the cluster would go with no reviewed removal behind it: the guard refuses
    gone, _ = _pass(tmp_path, True, provider)
    gone.desired = from_files(tmp_path, {k: v for k, v in example_files().items()
                                         if not k.startswith(("policies/", "records/"))}, None)
    before = provider.read("example.com").records
    assert run(gone, Role.DEFAULT) is Result.STALLED
    assert gone.outcome.plan is not None and gone.outcome.plan.stalled == "MassChangeRefused"
    assert "apply" not in gone.outcome.steps and gone.outcome.steps[-1] == "render"
    assert provider.read("example.com").records == before


def test_a_stalled_preview_shows_what_the_guard_refused(tmp_path: Path) -> None:
    from gitdns.core.plan import fmt as planfmt
    from gitdns.reconcile.preview import NOTHING_PUBLISHED, Overlay, preview_pass

    p, provider = _pass(tmp_path, True)
    run(p, Role.DEFAULT)
    gone = from_files(tmp_path, {k: v for k, v in example_files().items()
                                 if not k.startswith(("policies/", "records/"))}, None)
    plan, _, _ = preview_pass(gone, p.cluster, p.zone, Overlay(provider, "example.com"),
                              health=NOTHING_PUBLISHED)
    assert plan.stalled == "MassChangeRefused"
    assert not [c for c in plan.changes if c.key == c.group]  # nothing of the cluster's records is written
    refused = [c for c in plan.refused if c.key == c.group]
    assert refused and all(c.action.value == "delete" for c in refused)
    assert "refused: - api.example.com CNAME" in planfmt.to_text([plan])
    assert "Refused by the guard (MassChangeRefused)" in planfmt.to_markdown([plan])


def test_apply_reports_every_write_the_pass_made(tmp_path: Path) -> None:
    from gitdns.reconcile.run import reconcile

    desired = from_files(tmp_path, example_files(), None)
    cluster = desired.state.cluster("eu-west-1")
    assert cluster is not None
    provider = MemoryProvider()
    outcomes = {o.zone.domain: o for o in reconcile(desired, cluster, lambda zone: provider)}
    com = outcomes["example.com"]
    written = {r.key for r in provider.read("example.com").records}
    assert com.plan is not None
    reported = {c.key for c in com.plan.changes}
    # the active-groups mirror TXT is written by the groups step, before the plan: counted and shown
    mirror = {k for k in written if k.name.startswith(("gitdns-active-groups.", "kuadrant-active-groups."))}
    assert mirror and mirror <= reported
    assert com.applied == len(com.plan.changes)
