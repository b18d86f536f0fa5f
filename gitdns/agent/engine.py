"""One reconcile pass for one cluster: load, validate, build, plan, apply, verify, render.

The same steps serve `gitdns plan`, `gitdns apply` and, later, each cycle of the agent.
Nothing here prints; results are values the CLI formats.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitdns.adapters.gitrev import HeadInfo, head_info
from gitdns.adapters.repo import load_repo
from gitdns.core import builder
from gitdns.core.loader import LoadResult
from gitdns.core.model import Cluster, DesiredState, Publisher, Zone
from gitdns.core.plan import Intent, Plan, PlanPolicy
from gitdns.core.planner import plan as make_plan
from gitdns.core.problems import Problem, blocked_zones
from gitdns.core.records import ZoneSnapshot
from gitdns.errors import ConfigError
from gitdns.providers.base import ApplyResult, Provider
from gitdns.providers.registry import make_provider

log = logging.getLogger(__name__)

ProviderFactory = Callable[[Zone], Provider]
MAX_STALE_RETRIES = 8


@dataclass(frozen=True, slots=True)
class Desired:
    """A loaded repository: the state, its problems and its revision."""

    root: Path
    state: DesiredState
    problems: tuple[Problem, ...]
    head: HeadInfo | None

    @property
    def blocked(self) -> set[str]:
        return blocked_zones(self.problems, [z.name for z in self.state.zones])


@dataclass(slots=True)
class ZoneOutcome:
    zone: Zone
    plan: Plan | None = None
    applied: int = 0
    refused_retries: int = 0
    skipped: str = ""  # why nothing was planned (blocked, publisher kuadrant, ...)
    errors: list[str] = field(default_factory=list)
    views: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors and (self.plan is None or not self.plan.stalled)


def load(root: Path) -> Desired:
    result: LoadResult = load_repo(root)
    head = head_info(root)
    state = replace(result.state, revision=head.revision if head else None)
    return Desired(root, state, tuple(result.problems), head)


def default_factory(base_dir: Path) -> ProviderFactory:
    cache: dict[str, Provider] = {}

    def factory(zone: Zone) -> Provider:
        if zone.name not in cache:
            cache[zone.name] = make_provider(zone.domain, zone.provider, base_dir)
        return cache[zone.name]

    return factory


def find_cluster(desired: Desired, ident: str) -> Cluster:
    cluster = desired.state.cluster(ident)
    if cluster is None:
        known = ", ".join(sorted(c.name for c in desired.state.clusters)) or "none"
        raise ConfigError(f"--cluster {ident}: no Cluster in {desired.root} has this id or name "
                          f"(known: {known})")
    return cluster


def policy_for_zone(desired: Desired, zone: Zone, *, force: bool = False) -> PlanPolicy:
    head = desired.head
    sha = head.revision.sha if head else ""
    ack = zone.safety.acknowledge
    acknowledged = bool(ack and sha and sha.startswith(ack)) or bool(
        head and head.allows_mass_change(zone.domain))
    return PlanPolicy(
        zone=zone.domain,
        known_owners=tuple(c.id for c in desired.state.clusters),
        registry=zone.registry == "txt",
        max_change_fraction=zone.safety.max_change_fraction,
        min_managed=zone.safety.min_managed,
        acknowledged=acknowledged,
        force=force,
    )


def intent_for(desired: Desired, cluster: Cluster, zone: Zone) -> Intent:
    records = builder.desired_for_zone(desired.state, cluster, zone)
    return Intent(cluster.id, records, desired.state.revision, cluster.group)


def _skip_reason(desired: Desired, zone: Zone) -> str:
    if zone.name in desired.blocked:
        return "held: the zone's desired state does not validate; the last published state stays"
    if zone.publisher is Publisher.KUADRANT:
        return "publisher is kuadrant: DNSRecords are rendered (gitdns render), not published"
    return ""


def plan_zone(desired: Desired, cluster: Cluster, zone: Zone, provider: Provider,
              *, force: bool = False) -> tuple[Plan, ZoneSnapshot]:
    snapshot = provider.read(zone.domain)
    pol = policy_for_zone(desired, zone, force=force)
    return make_plan(intent_for(desired, cluster, zone), snapshot, pol), snapshot


def _apply_with_retries(desired: Desired, cluster: Cluster, zone: Zone, provider: Provider,
                        outcome: ZoneOutcome, force: bool) -> None:
    plan = outcome.plan
    assert plan is not None
    for attempt in range(MAX_STALE_RETRIES + 1):
        if plan.stalled or not plan.changes:
            break
        result: ApplyResult = provider.apply(zone.domain, plan.applicable, plan.guards)
        outcome.applied += len(result.applied)
        for group, why in result.failed:
            outcome.errors.append(f"{group}: {why}")
        if not result.refused:
            break
        outcome.refused_retries += 1
        log.info("stale write refused: zone=%s groups=%d attempt=%d", zone.domain,
                 len(result.refused), attempt + 1)
        time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
        plan, _ = plan_zone(desired, cluster, zone, provider, force=force)
    else:
        outcome.errors.append(f"stale writes still refused after {MAX_STALE_RETRIES} re-plans")


def render_views(provider: Provider, zone: Zone) -> dict[str, str]:
    """RFC 1035 master files per geo view, for stores that serve through them (`local`)."""
    views_dir = getattr(provider, "views_dir", None)
    if not callable(views_dir):
        return {}
    from gitdns.adapters.zonefile import write_views

    return write_views(views_dir(zone.domain), zone.domain, provider.read)


def reconcile(desired: Desired, cluster: Cluster, factory: ProviderFactory, *,
              dry_run: bool = False, force: bool = False,
              zones: Sequence[str] = ()) -> list[ZoneOutcome]:
    """Plan (and unless ``dry_run`` apply) every zone the cluster publishes."""
    outcomes: list[ZoneOutcome] = []
    for zone in builder.zones_for_cluster(desired.state, cluster):
        if zones and zone.name not in zones and zone.domain not in zones:
            continue
        outcome = ZoneOutcome(zone, skipped=_skip_reason(desired, zone))
        outcomes.append(outcome)
        if outcome.skipped:
            continue
        provider = factory(zone)
        outcome.plan, _ = plan_zone(desired, cluster, zone, provider, force=force)
        if dry_run:
            continue
        _apply_with_retries(desired, cluster, zone, provider, outcome, force)
        outcome.views = render_views(provider, zone)
    return outcomes


@dataclass(frozen=True, slots=True)
class Simulation:
    """Every cluster's plan applied in turn to a copy of the zone (the PR preview)."""

    zone: Zone
    plans: tuple[tuple[str, Plan], ...]  # (cluster name, plan)
    before: ZoneSnapshot
    after: ZoneSnapshot


def simulate_all(desired: Desired, zone: Zone, provider: Provider, *, force: bool = False) -> Simulation:
    from gitdns.core.store import apply_changes

    before = provider.read(zone.domain)
    records = before.by_key()
    plans: list[tuple[str, Plan]] = []
    pol = policy_for_zone(desired, zone, force=force)
    for cluster in desired.state.clusters:
        if zone not in builder.zones_for_cluster(desired.state, cluster):
            continue
        snap = ZoneSnapshot(zone.domain, tuple(records.values()))
        plan = make_plan(intent_for(desired, cluster, zone), snap, pol)
        plans.append((cluster.name, plan))
        records = apply_changes(records, plan.applicable, plan.guards).records
    after = ZoneSnapshot(zone.domain, tuple(records[k] for k in sorted(records)))
    return Simulation(zone, tuple(plans), before, after)
