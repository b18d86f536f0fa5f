"""``gitdns plan``: what ``apply`` would change, nothing written.

One cluster (``--cluster``): its zones through the agents' pipeline in the preview role (and
the zones it left where it still holds records, `gitdns.commands.leftzones`).  Every
cluster (``--all-clusters``, the pull-request preview): each zone as every agent would leave it,
the merged zone below the plans.  Exit codes as ``apply --dry-run`` (held 1, stalled 4,
conflicts 5); with ``--exit-code``, pending changes exit 3.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from gitdns.commands import EXIT_CHANGES, EXIT_CONFLICTS, EXIT_ERROR, EXIT_OK, EXIT_STALLED, Result
from gitdns.commands.zones import held, problem_lines
from gitdns.core.desired import Desired
from gitdns.core.plan.values import Plan, PlanMode
from gitdns.core.text import md_block
from gitdns.providers.fences import STRICT, Fences
from gitdns.reconcile.engine import ProviderFactory
from gitdns.reconcile.preview import Preview, Published
from gitdns.reconcile.zonepass import ZoneOutcome


def plan(repo: Path, *, cluster: str | None = None, all_clusters: bool = False, fmt: str = "text",
         zones: Sequence[str] = (), exit_code: bool = False, force: bool = False, mode: str = "sync",
         fences: Fences = STRICT, base: str | None = None, verbose: bool = False) -> Result:
    """``fences``: what the Zones may name (the operator's flags; `gitdns.providers.fences`).
    ``base``: compare with the zones as the fleet publishes them at that revision, built from
    git alone (`gitdns.reconcile.basezone`): no record store, no provider, no credentials."""
    from gitdns.commands.leftzones import left_zones, with_notes
    from gitdns.commands.plan.base import prepare
    from gitdns.reconcile.engine import find_cluster
    from gitdns.reconcile.run import reconcile, revisions

    prepared = prepare(repo, fences, base)
    desired, factory, health, now = prepared.desired, prepared.factory, prepared.health, prepared.now
    result = Result(err=problem_lines(desired))
    if all_clusters:
        return plan_all(desired, factory, result, fmt=fmt, zones=zones, exit_code=exit_code, force=force,
                        health=health, now=now, notes=prepared.notes, late_notes=prepared.late_notes,
                        verbose=verbose, base=base)
    say(result, fmt, prepared.notes)
    who = find_cluster(desired, cluster or "")
    state_at = revisions(desired)
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
    result.out.append(format_plans(fmt, plans, names, verbose=verbose))
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


def format_plans(fmt: str, typed: list[Plan], names: dict[str, str] | None = None, *, verbose: bool = False) -> str:
    """Text lists ownership TXT changes only with ``verbose`` (the headline counts them);
    markdown counts them; JSON carries them all."""
    from gitdns.core.plan import fmt as planfmt

    if fmt == "json":
        return planfmt.to_json(typed, names=names)
    if fmt == "markdown":
        return planfmt.to_markdown(typed, names=names)
    return planfmt.to_text(typed, names=names, show_txt=verbose)


def plan_all(desired: Desired, factory: ProviderFactory, result: Result, *, fmt: str, zones: Sequence[str],
             exit_code: bool, force: bool, health: Published, now: float, notes: Sequence[str] = (),
             late_notes: Callable[[], list[str]] = list, verbose: bool = False, base: str | None = None) -> Result:
    """The merged preview: every zone as every cluster's agent would leave it, read by a
    reviewer (`gitdns.core.prpreview`): the verdict, each zone's changed records, ownership TXT
    counted per cluster, traffic splits, failovers; ``verbose`` adds each cluster's plan and the
    merged zone.  JSON carries all of it."""
    from functools import cache

    from gitdns.commands.groups.status import local_status
    from gitdns.commands.leftzones import plan_notes
    from gitdns.commands.plan.review import zone_review
    from gitdns.core import inventory, prpreview
    from gitdns.core.plan import fmt as planfmt
    from gitdns.reconcile.preview import preview_zone
    from gitdns.reconcile.run import revisions

    state_at = revisions(desired)
    trees = cache(lambda: dict(local_status(Path(desired.root)).trees) or None)
    out_json: list[dict[str, object]] = []
    all_plans: list[Plan] = []
    outcomes: list[ZoneOutcome] = []
    reviews: list[prpreview.ZoneReview] = []
    detail: dict[str, tuple[str, str]] = {}
    for zone in desired.state.zones:
        if zones and zone.name not in zones and zone.domain not in zones:
            continue
        if zone.name in desired.blocked:
            result.err.append(f"zone {zone.domain}: held, its desired state does not validate")
            outcomes.append(ZoneOutcome(zone, skipped="held"))
            reviews.append(prpreview.ZoneReview(zone.domain, (), (), (), held="its desired state does not validate "
                                                "(gitdns validate): agents keep its last good revision"))
            continue
        if zone.publisher.value == "kuadrant":
            result.err.append(f"zone {zone.domain}: publisher is kuadrant: DNSRecords are rendered "
                              "(gitdns render), not published")
            continue
        sim = preview_zone(desired, zone, factory(zone), health=health, force=force, state_at=state_at, now=now)
        plans = [plan_notes(desired, c, zone, p) for c, p in sim.plans]
        names = {c.id: c.name for c in desired.state.clusters} | {c.id: c.name for c, _ in sim.plans}
        all_plans.extend(plans)
        outcomes.extend(sim.outcomes)
        review = zone_review(desired, zone, replace(sim, plans=tuple(zip([c for c, _ in sim.plans], plans,
                                                                        strict=True))), names,
                             trees() if _switches(sim) else None)
        reviews.append(review)
        rows = inventory.inventory(sim.after, names)
        merged = inventory.to_text(zone.domain, rows)
        detail[zone.domain] = (
            planfmt.to_text(plans, names=names) + "merged zone after every cluster applied:\n" + merged + "\n",
            planfmt.to_markdown(plans, title=f"gitdns plan: {zone.domain}, every cluster", names=names)
            + "\n<details><summary>Merged zone after every cluster applied</summary>\n\n" + md_block(merged)
            + "</details>\n")
        if fmt == "json":
            out_json.append({"zone": zone.domain, "plans": [planfmt.plan_dict(p, names) for p in plans],
                             "merged": inventory.to_dict(zone.domain, rows)["records"],
                             **prpreview.zone_dict(review)})
    all_notes = [*notes, *late_notes()]
    review_all = prpreview.Review(tuple(reviews), tuple(all_notes), detail)
    if fmt == "json":
        say(result, fmt, all_notes)
        result.block(json.dumps({"zones": out_json, "summary": prpreview.summary_dict(reviews), "notes": all_notes},
                                indent=2, sort_keys=True))
    elif fmt == "markdown":
        rest = "gitdns plan --all-clusters --format json" + (f" --base {base}" if base else "")
        result.block(prpreview.to_markdown(review_all, verbose=verbose, rest=rest))
    else:
        result.block(prpreview.to_text(review_all, verbose=verbose).rstrip("\n"))
    result.code = plan_exit(desired, outcomes, all_plans, exit_code)
    return result


def _switches(sim: Preview) -> bool:
    """Whether the preview changes the zone's active groups (a failover: the gate is asked)."""
    from gitdns.core.groups import gitdns_name

    name = gitdns_name(sim.zone.domain)
    return any(c.record.name == name for _, plan in sim.plans for c in plan.changes)


def say(result: Result, fmt: str, notes: Sequence[str]) -> None:
    """Notes as lines of the output, or of stderr when the output is JSON."""
    if fmt == "json":
        result.err.extend(f"note: {note}" for note in notes)
    else:
        result.lines([f"note: {note}" for note in notes])
