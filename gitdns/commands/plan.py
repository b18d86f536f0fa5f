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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gitdns.commands import EXIT_CHANGES, EXIT_CONFLICTS, EXIT_ERROR, EXIT_OK, EXIT_STALLED, Result
from gitdns.commands.zones import held, problem_lines
from gitdns.core.desired import Desired
from gitdns.core.plan import Plan, PlanMode
from gitdns.providers.fences import STRICT, Fences
from gitdns.reconcile.engine import ProviderFactory
from gitdns.reconcile.preview import Published
from gitdns.reconcile.zonepass import ZoneOutcome


def plan(repo: Path, *, cluster: str | None = None, all_clusters: bool = False, fmt: str = "text",
         zones: Sequence[str] = (), exit_code: bool = False, force: bool = False, mode: str = "sync",
         fences: Fences = STRICT, base: str | None = None) -> Result:
    """``fences``: what the Zones may name (the operator's flags; `gitdns.providers.fences`).
    ``base``: compare with the zones as the fleet publishes them at that revision, built from
    git alone (`gitdns.reconcile.basezone`): no record store, no provider, no credentials."""
    from gitdns.commands.leftzones import left_zones, with_notes
    from gitdns.reconcile.engine import find_cluster
    from gitdns.reconcile.run import reconcile, revisions

    prepared = prepare(repo, fences, base)
    desired, factory, health, now = prepared.desired, prepared.factory, prepared.health, prepared.now
    result = Result(err=problem_lines(desired))
    say(result, fmt, prepared.notes)
    if all_clusters:
        return plan_all(desired, factory, result, fmt=fmt, zones=zones, exit_code=exit_code, force=force,
                        health=health, now=now, late_notes=prepared.late_notes)
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
             exit_code: bool, force: bool, health: Published, now: float,
             late_notes: Callable[[], list[str]] = list) -> Result:
    """The merged preview: every zone as every cluster's agent would leave it."""
    from gitdns.commands.leftzones import plan_notes
    from gitdns.core import inventory, planfmt
    from gitdns.reconcile.preview import preview_zone
    from gitdns.reconcile.run import revisions

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
        sim = preview_zone(desired, zone, factory(zone), health=health, force=force, state_at=state_at, now=now)
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
    say(result, fmt, late_notes())
    if fmt == "json":
        result.block(json.dumps({"zones": out_json}, indent=2, sort_keys=True))
    result.code = plan_exit(desired, outcomes, all_plans, exit_code)
    return result


def say(result: Result, fmt: str, notes: Sequence[str]) -> None:
    """Notes as lines of the output, or of stderr when the output is JSON."""
    if fmt == "json":
        result.err.extend(f"note: {note}" for note in notes)
    else:
        result.lines([f"note: {note}" for note in notes])


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a preview runs on: the head's desired state (the status branches' observed gateways
    in), the providers, the clusters' published health, the time; ``notes`` to print first,
    ``late_notes`` after the zones were built (a base's zone held, not settled)."""

    desired: Desired
    factory: ProviderFactory
    health: Published
    now: float
    notes: tuple[str, ...]
    late_notes: Callable[[], list[str]]


def prepare(repo: Path, fences: Fences, base: str | None) -> Prepared:
    """The head (the work tree) and, with ``base``, the zones as the fleet publishes that
    revision (`gitdns.reconcile.basezone`) standing in for the providers; else the Zones'
    providers (``fences``: what they may name)."""
    from gitdns.commands.observed import observed_gateways
    from gitdns.reconcile.engine import default_factory, load, previous_state
    from gitdns.reconcile.run import published

    loaded = load(repo)
    desired, observed = observed_gateways(replace(loaded, previous=lambda: previous_state(loaded)))
    now = time.time()
    health = published(desired)
    if base is None:
        return Prepared(desired, default_factory(repo, fences=fences), health, now, tuple(observed), list)
    prepared = over(repo, desired, health, base, now)
    return replace(prepared, notes=(*prepared.notes, *observed))


def over(repo: Path, desired: Desired, health: Published, base: str, now: float) -> Prepared:
    """``desired`` previewed over the zones as the fleet publishes ``base``, built from git
    alone (`gitdns.reconcile.basezone`); the notes say so, and where the clusters' health comes
    from, in one line."""
    from gitdns.commands.observed import observed_gateways
    from gitdns.reconcile import basezone
    from gitdns.reconcile.run import published

    at_base, _ = observed_gateways(basezone.load_base(repo, base))
    zones = basezone.BaseZones(at_base, published(at_base), now, repo)
    desired, newer = basezone.over_base(desired, at_base)
    sha = at_base.head.revision.sha[:7] if at_base.head else base
    notes = (f"compared with {base} ({sha}) as the fleet publishes it, built from git: no record store and no "
             "provider read", *([newer] if newer else []), health_line(desired, health))
    return Prepared(desired, zones.provider, basezone.applied_at_base(health, at_base, desired), now, notes,
                    lambda: list(dict.fromkeys(zones.notes)))


def health_line(desired: Desired, health: Published) -> str:
    """One line: whose status branches the clusters' health comes from, and who published none
    (every target of those taken as healthy)."""
    known = [c.name for c in desired.state.clusters if health.of(c.id)[1]]
    unknown = [c.name for c in desired.state.clusters if not health.of(c.id)[1]]
    if not unknown:
        return f"health: from the status branches of {', '.join(known)}"
    if not known:
        return "health: no cluster has published a status: every target is taken as healthy"
    return (f"health: from the status branches of {', '.join(known)}; {', '.join(unknown)} published none: "
            "every target of theirs is taken as healthy")
