"""Zones a cluster left, for the one-shot verbs (``apply``, ``plan --cluster``).

`gitdns.reconcile.run.reconcile` runs the zones a cluster publishes in and those it published
in at the revision it last applied.  That revision may be unknown (no status branch, the
previous commit already without the cluster) — so every other zone in git is read, and one
where the cluster still holds an ownership TXT or a heartbeat (`gitdns.core.plan.leave`) gets
the same pass with nothing wanted: its values and ownership TXT go, then its heartbeat, as its
agent does.  A dry run (``plan``, ``apply --dry-run``) writes to a copy of the zone.

Also here: the builder's notes on a cluster's hosts (flattened layouts, hosts with nothing to
publish) added to its plans, as the agent adds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gitdns.core import builder
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, Mode, Zone
from gitdns.core.plan.leave import farewell, holds
from gitdns.core.plan.values import Plan, PlanMode, annotated
from gitdns.errors import GitdnsError
from gitdns.providers.base import Provider
from gitdns.reconcile.engine import ProviderFactory, skip_reason
from gitdns.reconcile.preview import Overlay, Published, Recorder, StateAt, effective_plan, preview_pass
from gitdns.reconcile.preview import primary_inputs as preview_primary_inputs
from gitdns.reconcile.run import zone_pass
from gitdns.reconcile.zonepass import ZoneOutcome


def with_notes(desired: Desired, cluster: Cluster, outcomes: Sequence[ZoneOutcome]) -> None:
    """Each outcome's plan with what the builder says about the cluster's hosts in its zone."""
    for outcome in outcomes:
        if outcome.plan is not None:
            outcome.plan = annotated(outcome.plan, builder.notes_for_zone(desired.state, cluster, outcome.zone))


def plan_notes(desired: Desired, cluster: Cluster, zone: Zone, plan: Plan) -> Plan:
    return annotated(plan, builder.notes_for_zone(desired.state, cluster, zone))


def left_zones(desired: Desired, cluster: Cluster, factory: ProviderFactory, done: set[str], *,
               dry_run: bool, force: bool, mode: PlanMode, zones: Sequence[str], always_verify: bool,
               health: Published, state_at: StateAt | None, now: float) -> list[ZoneOutcome]:
    """A pass in every zone of git, other than ``done``, where the cluster still holds records."""
    if cluster.mode is Mode.REMOTE:
        return []  # a remote writes no zone: its primaries clean its old claims
    out: list[ZoneOutcome] = []
    for zone in desired.state.zones:
        if zone.name in done or (zones and zone.name not in zones and zone.domain not in zones):
            continue
        if skip_reason(desired, zone):
            continue
        try:
            provider = factory(zone)
            held = holds(provider.read(zone.domain), cluster.id)
        except GitdnsError as exc:  # another cluster's zone this machine cannot read: said, not fatal
            why = f"not read for records {cluster.name} left there: {exc.reason}: {exc}"
            out.append(ZoneOutcome(zone, skipped=why))
            continue
        if not held:
            continue
        if dry_run:
            out.append(_preview(desired, cluster, zone, provider, force=force, mode=mode, health=health,
                                state_at=state_at))
        else:
            out.append(_leave(desired, cluster, zone, provider, force=force, mode=mode, always_verify=always_verify,
                              health=health, state_at=state_at, now=now))
    return out


def _preview(desired: Desired, cluster: Cluster, zone: Zone, provider: Provider, *, force: bool, mode: PlanMode,
             health: Published, state_at: StateAt | None) -> ZoneOutcome:
    overlay = Overlay(provider, zone.domain)
    plan, outcome, _ = preview_pass(desired, cluster, zone, overlay, health=health, force=force, mode=mode,
                                    state_at=state_at)
    if not plan.stalled and not plan.conflicts:
        last = overlay.apply(zone.domain, farewell(overlay.read(zone.domain), cluster.id, zone.domain))
        plan = replace(plan, changes=(*plan.changes, *last.applied))
    outcome.plan = plan
    return outcome


def _leave(desired: Desired, cluster: Cluster, zone: Zone, provider: Provider, *, force: bool, mode: PlanMode,
           always_verify: bool, health: Published, state_at: StateAt | None, now: float) -> ZoneOutcome:
    """The pass `reconcile` runs in a zone, plus the heartbeat once nothing else is left."""
    inputs = preview_primary_inputs(desired, cluster, zone, health, now)
    recorder = Recorder(provider, zone.domain)
    p = zone_pass(desired, cluster, zone, recorder, inputs, force=force, mode=mode, always_verify=always_verify,
                  health=health, state_at=state_at)
    outcome = p.outcome
    if outcome.ok and not outcome.pending_after_apply:
        last = farewell(recorder.read(zone.domain), cluster.id, zone.domain)
        if last:
            result = recorder.apply(zone.domain, last)
            outcome.applied += len(result.applied)
    if outcome.plan is not None or recorder.changes:
        outcome.plan = effective_plan(outcome, cluster, recorder, 0, p.notes)
    return outcome
