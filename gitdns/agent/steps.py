"""The per-zone steps of a cycle, in order, each with one signature (Flux style):

    build → health → plan → guard → apply → verify → render

A step takes the zone's `ZonePass` and returns whether the next step runs.  The cycle
(`gitdns.agent.cycle`) runs fetch → load/validate → these steps for every zone → report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gitdns.agent.engine import (
    Desired,
    ZoneOutcome,
    apply_with_retries,
    intent_for,
    plan_zone,
    render_views,
    verify,
)
from gitdns.core.model import Cluster, Zone
from gitdns.core.plan import Intent, PlanMode
from gitdns.providers.base import Provider


@dataclass(slots=True)
class ZonePass:
    zone: Zone
    desired: Desired  # the desired state in force for this zone (the last good one if held)
    cluster: Cluster
    provider: Provider
    can_write: bool  # the owner lease is held
    outcome: ZoneOutcome
    mode: PlanMode = PlanMode.SYNC
    intent: Intent | None = None
    notes: list[str] = field(default_factory=list)


def build(p: ZonePass) -> bool:
    """The records this cluster owns in the zone (none once git no longer names it)."""
    if p.desired.state.cluster(p.cluster.id) is None:
        p.intent = Intent(p.cluster.id, (), p.desired.state.revision, p.cluster.group)
    else:
        p.intent = intent_for(p.desired, p.cluster, p.zone)
    return True


def health(p: ZonePass) -> bool:
    """Health filtering of this cluster's targets.  DNSPolicy health checks plug in here;
    without them every built target is published."""
    return True


def plan(p: ZonePass) -> bool:
    p.outcome.plan, _ = plan_zone(p.desired, p.cluster, p.zone, p.provider, mode=p.mode, intent=p.intent)
    return True


def guard(p: ZonePass) -> bool:
    """Write only with the lease held, only a plan that is not stalled, only when needed."""
    plan_ = p.outcome.plan
    if plan_ is None or not plan_.changes or plan_.stalled:
        return False
    if not p.can_write:
        p.notes.append("not written: the owner lease is held by another agent")
        return False
    return True


def apply(p: ZonePass) -> bool:
    apply_with_retries(p.desired, p.cluster, p.zone, p.provider, p.outcome, False, p.mode, intent=p.intent)
    return True


VERIFY_ROUNDS = 3


def verify_step(p: ZonePass) -> bool:
    """Re-read and re-plan.  Changes still wanted (a co-owner wrote in between) are applied
    again at once, a few rounds; what is left is reported as RecordsMissing and retried by
    the validation loop."""
    for _ in range(VERIFY_ROUNDS):
        pending = verify(p.desired, p.cluster, p.zone, p.provider, False, p.mode, p.intent)
        p.outcome.pending_after_apply = pending
        if not pending or not p.can_write:
            break
        p.outcome.plan, _ = plan_zone(p.desired, p.cluster, p.zone, p.provider, mode=p.mode, intent=p.intent)
        if p.outcome.plan.stalled:
            break
        apply_with_retries(p.desired, p.cluster, p.zone, p.provider, p.outcome, False, p.mode, intent=p.intent)
    return True


def render(p: ZonePass) -> bool:
    p.outcome.views = render_views(p.provider, p.zone)
    return True


ZoneStep = Callable[[ZonePass], bool]
ZONE_STEPS: tuple[tuple[str, ZoneStep], ...] = (
    ("build", build),
    ("health", health),
    ("plan", plan),
    ("guard", guard),
    ("apply", apply),
    ("verify", verify_step),
    ("render", render),
)


def run_zone_steps(p: ZonePass, steps: tuple[tuple[str, ZoneStep], ...] = ZONE_STEPS) -> list[str]:
    """Run the steps until one stops the pass; the names of the steps that ran."""
    ran: list[str] = []
    for name, step in steps:
        ran.append(name)
        if not step(p):
            break
    return ran
