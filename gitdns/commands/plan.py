"""``gitdns plan``: what ``apply`` would change, nothing written.

One cluster (``--cluster``): its zones through the agents' pipeline in the preview role (and
the zones it left where it still holds records, `gitdns.commands.leftzones`).  Every
cluster (``--all-clusters``, the pull-request preview): each zone as every agent would leave it,
the merged zone below the plans.  Exit codes as ``apply --dry-run`` (held 1, stalled 4,
conflicts 5); with ``--exit-code``, pending changes exit 3.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gitdns.commands import EXIT_CHANGES, EXIT_CONFLICTS, EXIT_ERROR, EXIT_OK, EXIT_STALLED, Result
from gitdns.commands.zones import held, problem_lines
from gitdns.core.desired import Desired
from gitdns.core.plan import Plan, PlanMode
from gitdns.providers.fences import STRICT, Fences
from gitdns.reconcile.engine import ProviderFactory
from gitdns.reconcile.zonepass import ZoneOutcome


def plan(repo: Path, *, cluster: str | None = None, all_clusters: bool = False, fmt: str = "text",
         zones: Sequence[str] = (), exit_code: bool = False, force: bool = False, mode: str = "sync",
         fences: Fences = STRICT) -> Result:
    """``fences``: what the Zones may name (the operator's flags; `gitdns.providers.fences`)."""
    from gitdns.commands.leftzones import left_zones, with_notes
    from gitdns.commands.observed import observed_gateways
    from gitdns.reconcile.engine import default_factory, find_cluster, load, previous_state
    from gitdns.reconcile.run import published, reconcile, revisions

    loaded = load(repo)
    desired = replace(loaded, previous=lambda: previous_state(loaded))
    result = Result(err=problem_lines(desired))
    desired, observed = observed_gateways(desired)  # discovered gateways: the status branches' observations
    for note in observed:
        (result.err if fmt == "json" else result.out).append(f"note: {note}")
    factory = default_factory(repo, fences=fences)
    if all_clusters:
        return plan_all(desired, factory, result, fmt=fmt, zones=zones, exit_code=exit_code, force=force)
    who = find_cluster(desired, cluster or "")
    health, state_at, now = published(desired), revisions(desired), time.time()
    outcomes = reconcile(desired, who, factory, dry_run=True, force=force, zones=list(zones),
                         mode=PlanMode(mode), health=health, state_at=state_at, now=now)
    outcomes += left_zones(desired, who, factory, {o.zone.name for o in outcomes}, dry_run=True, force=force,
                           mode=PlanMode(mode), zones=zones, always_verify=False, health=health, state_at=state_at,
                           now=now)
    with_notes(desired, who, outcomes)
    plans: list[Plan] = []
    for outcome in outcomes:
        if outcome.skipped:
            result.err.append(f"zone {outcome.zone.domain}: {outcome.skipped}")
        if outcome.plan is not None:
            plans.append(outcome.plan)
    names = {c.id: c.name for c in desired.state.clusters}
    result.out.append(format_plans(fmt, plans, names))
    result.code = plan_exit(desired, outcomes, plans, exit_code)
    return result


def plan_exit(desired: Desired, outcomes: Sequence[ZoneOutcome], plans: Sequence[Plan], exit_code: bool) -> int:
    """As `apply --dry-run` would exit (held 1, stalled 4, conflicts 5); with --exit-code,
    pending changes exit 3."""
    if held(desired, outcomes):
        return EXIT_ERROR
    if any(p.stalled for p in plans):
        return EXIT_STALLED
    if any(p.real_conflicts for p in plans):
        return EXIT_CONFLICTS
    return EXIT_CHANGES if exit_code and any(p.changes for p in plans) else EXIT_OK


def format_plans(fmt: str, typed: list[Plan], names: dict[str, str] | None = None) -> str:
    from gitdns.core import planfmt

    if fmt == "json":
        return planfmt.to_json(typed, names=names)
    if fmt == "markdown":
        return planfmt.to_markdown(typed, names=names)
    return planfmt.to_text(typed, names=names)


def plan_all(desired: Desired, factory: ProviderFactory, result: Result, *, fmt: str, zones: Sequence[str],
             exit_code: bool, force: bool) -> Result:
    """The merged preview: every zone as every cluster's agent would leave it."""
    from gitdns.commands.leftzones import plan_notes
    from gitdns.core import inventory, planfmt
    from gitdns.reconcile.preview import preview_zone
    from gitdns.reconcile.run import published, revisions

    health = published(desired)
    state_at = revisions(desired)
    out_json: list[dict[str, object]] = []
    all_plans: list[Plan] = []
    outcomes: list[ZoneOutcome] = []
    for zone in desired.state.zones:
        if zones and zone.name not in zones and zone.domain not in zones:
            continue
        if zone.name in desired.blocked:
            result.err.append(f"zone {zone.domain}: held, its desired state does not validate")
            outcomes.append(ZoneOutcome(zone, skipped="held"))
            continue
        if zone.publisher.value == "kuadrant":
            result.err.append(f"zone {zone.domain}: publisher is kuadrant: DNSRecords are rendered "
                              "(gitdns render), not published")
            continue
        sim = preview_zone(desired, zone, factory(zone), health=health, force=force, state_at=state_at,
                           now=time.time())
        plans = [plan_notes(desired, c, zone, p) for c, p in sim.plans]
        names = {c.id: c.name for c in desired.state.clusters} | {c.id: c.name for c, _ in sim.plans}
        all_plans.extend(plans)
        outcomes.extend(sim.outcomes)
        rows = inventory.inventory(sim.after, names)
        if fmt == "json":
            out_json.append({"zone": zone.domain, "plans": [planfmt.plan_dict(p, names) for p in plans],
                             "merged": json.loads(inventory.to_json(zone.domain, rows))["records"]})
        elif fmt == "markdown":
            result.block(planfmt.to_markdown(plans, title=f"gitdns plan: {zone.domain}, every cluster", names=names))
            result.block("<details><summary>Merged zone after every cluster applied</summary>\n\n```")
            result.out.append(inventory.to_text(zone.domain, rows))
            result.block("```\n</details>\n")
        else:
            result.out.append(planfmt.to_text(plans, names=names))
            result.line("merged zone after every cluster applied:")
            result.block(inventory.to_text(zone.domain, rows))
    if fmt == "json":
        result.block(json.dumps({"zones": out_json}, indent=2, sort_keys=True))
    result.code = plan_exit(desired, outcomes, all_plans, exit_code)
    return result
