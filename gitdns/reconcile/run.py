"""Entry points that run the pipeline for one cluster: `gitdns apply` and `gitdns plan
--cluster` (the preview role, against a copy of each zone), the same steps the agent runs."""

from __future__ import annotations

from collections.abc import Sequence

from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, DesiredState, Mode
from gitdns.core.plan import PlanMode
from gitdns.reconcile.engine import ProviderFactory, skip_reason
from gitdns.reconcile.pipeline import Role, run
from gitdns.reconcile.preview import (
    NO_HEALTH,
    HealthView,
    Overlay,
    StateAt,
    preview_pass,
    primary_inputs,
    zones_of,
)
from gitdns.reconcile.zonepass import ZoneOutcome, ZonePass


def reconcile(desired: Desired, cluster: Cluster, factory: ProviderFactory, *,
              dry_run: bool = False, force: bool = False, mode: PlanMode = PlanMode.SYNC,
              zones: Sequence[str] = (), always_verify: bool = False, health: HealthView = NO_HEALTH,
              now: float = 0.0) -> list[ZoneOutcome]:
    """Plan (and unless ``dry_run`` apply) every zone the cluster's agent reconciles, with the
    steps of its role.  A dry run is the preview: writes land in a copy of the zone."""
    outcomes: list[ZoneOutcome] = []
    for zone in zones_of(desired, cluster):
        if zones and zone.name not in zones and zone.domain not in zones:
            continue
        skipped = skip_reason(desired, zone)
        if skipped:
            outcomes.append(ZoneOutcome(zone, skipped=skipped))
            continue
        inputs = primary_inputs(desired, cluster, zone, health, now)
        if dry_run:
            overlay = Overlay(factory(zone), zone.domain)
            plan, outcome, _ = preview_pass(desired, cluster, zone, overlay, health=health, force=force, mode=mode,
                                            primary=inputs)
            outcome.plan = plan
            outcomes.append(outcome)
            continue
        outcome = ZoneOutcome(zone)
        unhealthy, _ = health.of(cluster.id)
        p = ZonePass(zone, desired, cluster, factory(zone), True, outcome, mode=mode, force=force,
                     owners=tuple(c.id for c in desired.state.clusters), always_verify=always_verify,
                     unhealthy=unhealthy, frozen=health.frozen, primary=inputs)
        run(p, role_of(cluster, inputs is not None))
        outcomes.append(outcome)
    return outcomes


def role_of(cluster: Cluster, primary: bool) -> Role:
    if cluster.mode is Mode.REMOTE:
        return Role.REMOTE
    return Role.PRIMARY if primary else Role.DEFAULT


def published_health(desired: Desired) -> HealthView:
    """Each cluster's unhealthy targets as its status branch last said (the branches the
    work tree's repository knows); clusters with no status branch are left out."""
    from pathlib import Path

    from gitdns.adapters.gitrev import status_files
    from gitdns.core.statusdoc import load as load_doc

    unhealthy: dict[str, frozenset[str]] = {}
    for cluster in desired.state.clusters:
        files = status_files(Path(desired.root), cluster.id)
        if files is None:
            continue
        try:
            targets = load_doc(files["health.yaml"]).get("targets") or {} if "health.yaml" in files else {}
        except ValueError:
            continue
        unhealthy[cluster.id] = frozenset(str(t) for t, v in targets.items()
                                          if isinstance(v, dict) and v.get("state") == "unhealthy")
    return HealthView(unhealthy)


def revisions(desired: Desired) -> StateAt:
    """The desired state at a revision of the work tree's repository (None when unknown)."""
    from pathlib import Path

    from gitdns.adapters.gitrev import files_at
    from gitdns.adapters.repo import load_schemas
    from gitdns.core.loader import load as load_files

    cache: dict[str, DesiredState | None] = {}

    def state_at(rev: str) -> DesiredState | None:
        if rev not in cache:
            files = files_at(Path(desired.root), rev) if rev else None
            cache[rev] = load_files(files, load_schemas()).state if files is not None else None
        return cache[rev]
    return state_at
