"""Entry points that run the pipeline for one cluster: `gitdns apply` and `gitdns plan
--cluster` (the preview role, against a copy of each zone), the same steps the agent runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, DesiredState, Mode, Zone
from gitdns.core.plan.values import PlanMode
from gitdns.reconcile.engine import ProviderFactory, skip_reason
from gitdns.reconcile.pipeline import Role, run
from gitdns.reconcile.preview import (
    NOTHING_PUBLISHED,
    Overlay,
    Published,
    Recorder,
    StateAt,
    effective_plan,
    last_applied,
    preview_pass,
    primary_inputs,
    zones_of,
)
from gitdns.reconcile.zonepass import NO_PROVIDER, ZoneOutcome, ZonePass


def reconcile(desired: Desired, cluster: Cluster, factory: ProviderFactory, *,
              dry_run: bool = False, force: bool = False, mode: PlanMode = PlanMode.SYNC,
              zones: Sequence[str] = (), always_verify: bool = False, health: Published = NOTHING_PUBLISHED,
              state_at: StateAt | None = None, now: float = 0.0) -> list[ZoneOutcome]:
    """Plan (and unless ``dry_run`` apply) every zone the cluster's agent reconciles, with the
    steps of its role.  A dry run is the preview: writes land in a copy of the zone.  As the
    agent does, a reviewed removal is judged against the revision the cluster last applied."""
    outcomes: list[ZoneOutcome] = []
    for zone in reconciled_zones(desired, cluster, health, state_at):
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
                                            primary=inputs, state_at=state_at)
            outcome.plan = plan
            outcomes.append(outcome)
            continue
        provider = Recorder(NO_PROVIDER if cluster.mode is Mode.REMOTE else factory(zone), zone.domain)
        p = zone_pass(desired, cluster, zone, provider, inputs, force=force, mode=mode, always_verify=always_verify,
                      health=health, state_at=state_at)
        if p.outcome.plan is not None or provider.changes:  # what was written, whichever step wrote it
            p.outcome.plan = effective_plan(p.outcome, cluster, provider, 0, p.notes)
        outcomes.append(p.outcome)
    return outcomes


def zone_pass(desired: Desired, cluster: Cluster, zone: Zone, provider: Recorder, inputs: Any, *, force: bool,
              mode: PlanMode, always_verify: bool, health: Published, state_at: StateAt | None) -> ZonePass:
    """One zone's pass as the cluster's agent runs it (the steps of its role), written through
    ``provider``; a reviewed removal judged against the revision the cluster last applied."""
    unhealthy, _ = health.of(cluster.id)
    own = replace(desired, previous=last_applied(desired, cluster, partial(provider.read, zone.domain), health,
                                                 state_at))
    p = ZonePass(zone, own, cluster, provider, True, ZoneOutcome(zone), mode=mode, force=force,
                 owners=tuple(c.id for c in desired.state.clusters), always_verify=always_verify,
                 unhealthy=unhealthy, frozen=health.frozen, primary=inputs)
    run(p, role_of(cluster, inputs is not None))
    return p


def reconciled_zones(desired: Desired, cluster: Cluster, health: Published, state_at: StateAt | None) -> list[Zone]:
    """The zones the cluster's agent reconciles: those it publishes in now, and those it
    published in at the revision it last applied (its status branch's, else the previous
    commit) and left since — its agent removes its records there."""
    zones = zones_of(desired, cluster)
    if {z.name for z in zones} >= {z.name for z in desired.state.zones}:
        return zones  # it reconciles every zone in git: none can have been left (and no old revision is loaded)
    sha = health.applied.get(cluster.id)
    before = state_at(sha) if sha and state_at is not None else None
    if before is None and desired.previous is not None:
        before = desired.previous()
    was = before.cluster(cluster.id) if before is not None else None
    if before is None or was is None:
        return zones
    names = {z.name for z in zones}
    left = [desired.state.zone(z.name) for z in zones_of(replace(desired, state=before), was) if z.name not in names]
    return zones + [z for z in left if z is not None]


def role_of(cluster: Cluster, primary: bool) -> Role:
    if cluster.mode is Mode.REMOTE:
        return Role.REMOTE
    return Role.PRIMARY if primary else Role.DEFAULT


def published(desired: Desired) -> Published:
    """What each cluster's status branch last said (the branches the work tree's repository
    knows): its unhealthy targets and its applied revision; clusters with no status branch are
    left out."""
    from pathlib import Path

    from gitdns.adapters.git.rev import status_files

    unhealthy: dict[str, frozenset[str]] = {}
    applied: dict[str, str] = {}
    branches = status_files(Path(desired.root), [c.id for c in desired.state.clusters], ("health.yaml", "summary.yaml"))
    for cluster in desired.state.clusters:
        files = branches.get(cluster.id)
        if files is None:
            continue
        unhealthy[cluster.id] = unhealthy_of(files.get("health.yaml", ""))
        sha = applied_of(files.get("summary.yaml", ""))
        if sha:
            applied[cluster.id] = sha
    # a host whose every target some cluster reported unhealthy fails open, as the agents do:
    # nothing of it is withdrawn in the preview either
    from gitdns.core.health.filter import every_target_down, fail_open_id, host_targets

    everyone: frozenset[str] = frozenset().union(*unhealthy.values())
    for cluster in desired.state.clusters:
        if cluster.id in unhealthy:
            down = every_target_down(host_targets(desired.state, cluster), everyone)
            unhealthy[cluster.id] |= {fail_open_id(host) for host in down}
    return Published(unhealthy, applied)


def unhealthy_of(text: str) -> frozenset[str]:
    """The targets a status branch's health.yaml says are unhealthy (none when unreadable)."""
    from gitdns.core.status.doc import load as load_doc

    try:
        targets = (load_doc(text).get("targets") or {}) if text else {}
    except ValueError:
        return frozenset()
    if not isinstance(targets, dict):  # anyone who can push a status branch writes it
        return frozenset()
    return frozenset(str(t) for t, v in targets.items() if isinstance(v, dict) and v.get("state") == "unhealthy")


def applied_of(text: str) -> str:
    """A status branch's summary.yaml appliedRevision ("" when none or unreadable)."""
    from gitdns.core.status.doc import load as load_doc

    try:
        value = load_doc(text).get("appliedRevision") if text else None
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""


def revisions(desired: Desired) -> StateAt:
    """The desired state at a revision of the work tree's repository (None when unknown)."""
    from pathlib import Path

    from gitdns.adapters.git.rev import files_at
    from gitdns.adapters.repo import load_schemas
    from gitdns.core.loader import load as load_files

    cache: dict[str, DesiredState | None] = {}

    def state_at(rev: str) -> DesiredState | None:
        if rev not in cache:
            files = files_at(Path(desired.root), rev) if rev else None
            cache[rev] = load_files(files, load_schemas()).state if files is not None else None
        return cache[rev]
    return state_at
