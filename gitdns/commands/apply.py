"""``gitdns apply``: reconcile a cluster's zones now (or every cluster's in turn, remotes first,
as the agents' merge does), and every zone it left where it still holds records
(`gitdns.commands.leftzones`).  Exit codes: held or failed 1, stalled 4, conflicts 5."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from gitdns.commands import EXIT_CONFLICTS, EXIT_ERROR, EXIT_OK, EXIT_STALLED, Result
from gitdns.commands.plan.base import over
from gitdns.commands.zones import held, problem_lines
from gitdns.core.desired import Desired
from gitdns.core.plan.values import PlanMode
from gitdns.core.progress import NO_PROGRESS, Progress, labelled
from gitdns.core.text import inline
from gitdns.errors import ConfigError
from gitdns.providers.fences import STRICT, Fences
from gitdns.reconcile.zonepass import ZoneOutcome


def apply(repo: Path, *, cluster: str | None = None, all_clusters: bool = False, fmt: str = "text",
          zones: Sequence[str] = (), force: bool = False, dry_run: bool = False, verify: bool = False,
          mode: str = "sync", fences: Fences = STRICT, from_worktree: bool = False, base: str | None = None,
          progress: Progress = NO_PROGRESS) -> Result:
    """``fences``: what the Zones may name (the operator's flags; `gitdns.providers.fences`).
    ``progress`` is told the changes each zone's writes land, as they land (`reporting`;
    ``[cluster]`` before each with ``all_clusters``).
    Committed, merged state only unless ``from_worktree`` or ``dry_run`` (`committed`).
    ``base`` (with ``dry_run`` only): what each cluster would write over the zones as the fleet
    publishes that revision, built from git alone (`gitdns.commands.plan.command.over`)."""
    if base is not None and not dry_run:
        raise ConfigError("--base compares with a revision built from git, nothing is written: it needs --dry-run")
    from gitdns.commands.committed import acting_on
    from gitdns.commands.leftzones import left_zones, with_notes
    from gitdns.providers.base import reporting
    from gitdns.reconcile.engine import default_factory, find_cluster, load, previous_state
    from gitdns.reconcile.run import published, reconcile, revisions

    acting = acting_on(repo, from_worktree=from_worktree or dry_run,
                       flag="--from-worktree" if from_worktree else "--dry-run")
    from gitdns.commands.observed import observed_gateways, unobserved

    loaded = load(repo)
    desired = replace(loaded, previous=lambda: previous_state(loaded))
    result = Result(err=problem_lines(desired))
    if fmt == "json":
        result.err.insert(0, acting)
    else:
        result.line(acting)
    factory = default_factory(repo, fences=fences) if base is None else None
    # every cluster as its agent would: remotes first (the primaries merge what they publish)
    clusters = (sorted(desired.state.clusters, key=lambda c: c.mode.value != "remote") if all_clusters
                else [find_cluster(desired, cluster or "")])
    # discovered gateways (no addresses in git): the addresses their agents last published; a
    # gateway never observed would be withdrawn by this run, so the run is refused
    never = {c.name: unobserved(desired, c.id) for c in clusters}
    if any(never.values()):
        for name, gateways in sorted(never.items()):
            if gateways:
                result.err.append(f"gitdns apply: cluster {name}: gateway(s) {', '.join(gateways)} are discovered from "
                                  "the cluster (no addresses in git) and its agent has published no observation "
                                  "(gateways.yaml on its status branch): applying now would withdraw their records; "
                                  "run the agent in that cluster, or write the addresses in git")
        result.code = EXIT_ERROR
        return result
    desired, observed = observed_gateways(desired)
    result.err.extend(f"note: {note}" for note in observed)
    clusters = [desired.state.cluster(c.id) or c for c in clusters]  # with the observed gateways
    names = {c.id: c.name for c in desired.state.clusters}
    results: list[tuple[str, ZoneOutcome]] = []
    health = published(desired)
    late: Callable[[], list[str]] = list
    if factory is None:
        prepared = over(repo, desired, health, base or "", time.time())
        desired, factory, health, late = prepared.desired, prepared.factory, prepared.health, prepared.late_notes
        result.err.extend(f"note: {note}" for note in prepared.notes)
    state_at = revisions(desired)
    for each in clusters:
        now = time.time()
        with reporting(labelled(progress, f"[{each.name}]") if all_clusters else progress):
            outcomes = reconcile(desired, each, factory, dry_run=dry_run, force=force, zones=list(zones),
                                 mode=PlanMode(mode), always_verify=verify, health=health, state_at=state_at,
                                 now=now)
            outcomes += left_zones(desired, each, factory, {o.zone.name for o in outcomes}, dry_run=dry_run,
                                   force=force, mode=PlanMode(mode), zones=zones, always_verify=verify,
                                   health=health, state_at=state_at, now=now)
        with_notes(desired, each, outcomes)
        results.extend((each.name, outcome) for outcome in outcomes)
    if fmt == "json":
        result.block(json.dumps([outcome_dict(c, o) for c, o in results], indent=2, sort_keys=True))
    else:
        for cluster, outcome in results:  # each a block: leaf lines and a plan through the text gate
            result.block(outcome_text(cluster, outcome, dry_run, names))
    result.err.extend(f"note: {note}" for note in late())
    result.code = apply_exit(desired, [o for _, o in results])
    return result


def apply_exit(desired: Desired, outcomes: list[ZoneOutcome]) -> int:
    if held(desired, outcomes):
        return EXIT_ERROR
    if any(o.plan is not None and o.plan.stalled for o in outcomes):
        return EXIT_STALLED
    if any(o.plan is not None and o.plan.real_conflicts for o in outcomes):
        return EXIT_CONFLICTS
    return EXIT_OK


def outcome_text(cluster: str, outcome: ZoneOutcome, dry_run: bool, names: dict[str, str]) -> str:
    from gitdns.core.plan import fmt as planfmt

    head = f"[{cluster}] zone {outcome.zone.domain}"
    if outcome.skipped:
        return f"{head}: skipped: {inline(outcome.skipped)}"
    lines: list[str] = []
    if outcome.plan is not None:
        # the plan block lists what was written and, marked, what the provider refused: an
        # error below is about a change its own zone's block shows
        lines.append(planfmt.to_text([outcome.plan], show_txt=False, names=names).rstrip("\n"))
        lines.extend(f"  {planfmt.failed_line(c)}" for f in outcome.failed for c in f.changes if c.key == c.group)
        verb = "would write" if dry_run else "applied"
        count = len(outcome.plan.changes) if dry_run else outcome.applied
        extra = f", {outcome.refused_retries} stale write(s) re-planned" if outcome.refused_retries else ""
        lines.append(f"{head}: {verb} {count} change(s){extra}{planfmt.errors_count(outcome.errors)}")
    lines.extend(f"{head}: error: {inline(e)}" for e in outcome.errors)
    if outcome.pending_after_apply:
        lines.append(f"{head}: RecordsMissing: a fresh read still wants {outcome.pending_after_apply} "
                     "change(s); the next apply retries")
    if outcome.views:
        lines.append(f"{head}: rendered {len(outcome.views)} geo view(s)")
    lines.extend(f"{head}: {inline(note)}" for note in outcome.reloads)  # --local-reload: not an error
    return "\n".join(lines)


def outcome_dict(cluster: str, outcome: ZoneOutcome) -> dict[str, object]:
    from gitdns.core.plan import fmt as planfmt

    return {
        "cluster": cluster,
        "zone": outcome.zone.domain,
        "skipped": outcome.skipped or None,
        "applied": outcome.applied,
        "staleRetries": outcome.refused_retries,
        "pendingAfterApply": outcome.pending_after_apply,
        "errors": outcome.errors,
        "failed": [{"group": str(f.group), "error": f.why,
                    "changes": [planfmt.change_dict(c) for c in f.changes]} for f in outcome.failed],
        "plan": planfmt.plan_dict(outcome.plan) if outcome.plan else None,
        "reloads": outcome.reloads,
    }
