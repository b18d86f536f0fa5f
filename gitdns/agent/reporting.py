"""The agent's report: zone documents, conditions and Ready.

`report` builds the `ClusterReport` the status branch, ``/status`` and the metrics show;
`conditions` derives the conditions from the last pass (closed reasons, docs/agent.md);
`publish` pushes it to the status branch and runs the report hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gitdns.core import builder
from gitdns.core.conditions import REASONS, Condition
from gitdns.core.model import Cluster, Zone
from gitdns.core.status.report import ClusterReport, ZoneReport
from gitdns.errors import GitdnsError

if TYPE_CHECKING:
    from gitdns.agent.config import AgentConfig
    from gitdns.agent.discovery import Discovery
    from gitdns.agent.ports import AgentPorts
    from gitdns.agent.roles import Role
    from gitdns.agent.state import AgentState
    from gitdns.agent.zones import Zones
    from gitdns.core.desired import Desired

log = logging.getLogger(__name__)


class Reporter:
    """Builds the report from the agent's state and publishes it."""

    def __init__(self, state: AgentState, config: AgentConfig, role: Role, ports: AgentPorts,
                 zones: Zones, discovery: Discovery | None = None) -> None:
        self.discovery = discovery  # discovered gateways: published in gateways.yaml
        self.state = state
        self.config = config
        self.role = role
        self.ports = ports
        self.zones = zones

    def report(self) -> ClusterReport:
        return report(self)

    def shown(self) -> ClusterReport:
        """The report as ``/status`` and the metrics show it: with the last status push."""
        return with_push(self, report(self))

    def publish(self) -> None:
        publish(self)

    def push_pending(self) -> bool:
        """The last status push failed (it is tried again on its own backoff)."""
        pushed = self.state.status_push
        return self.ports.status is not None and self.config.status and pushed is not None and not pushed.status

    def push_due(self) -> bool:
        return self.push_pending() and self.state.push_wait.ready(self.ports.clock())


def report(agent: Reporter) -> ClusterReport:
    desired = agent.state.current
    cluster = agent.zones.cluster_of(desired) if desired else None
    zones = []
    for name, track in sorted(agent.state.tracks.items()):
        zone = agent.zones.zone_in(track.desired, name)
        outcome = track.last
        zones.append(ZoneReport(
            zone=zone.domain, provider=zone.provider.type,
            held=bool(desired and name in desired.blocked),
            problems=tuple(p.format() for p in (desired.problems if desired else ()) if name in p.zones),
            owned=tuple(_owned(track.desired, cluster, zone)),
            plan=outcome.plan if outcome else None,
            applied_revision=track.desired.state.revision.label if track.desired.state.revision else None,
            error="; ".join(outcome.errors) if outcome else "",
            missing=outcome.pending_after_apply if outcome else 0,
            notes=builder.notes_for_zone(track.desired.state, cluster, zone) if cluster is not None else (),
            **agent.role.zone_extras(zone),
        ))
    for name in sorted(agent.state.held_without_state - set(agent.state.tracks)):
        zone_obj = desired.state.zone(name) if desired else None
        if zone_obj is None:
            continue
        zones.append(ZoneReport(
            zone=zone_obj.domain, provider=zone_obj.provider.type, held=True,
            problems=tuple(p.format() for p in (desired.problems if desired else ()) if name in p.zones),
            error="no last good revision is known for this zone: nothing was changed"))
    conds = conditions(agent, zones)
    rev = desired.state.revision if desired else None
    policies: dict[str, list[str]] = {}
    if desired and cluster:
        for zone in desired.state.zones:
            for host in builder.build_hosts(desired.state, cluster, zone):
                policies.setdefault(host.policy, []).append(host.host)
    me = cluster or agent.state.known_cluster
    ready = next((c for c in conds if c.type == "Ready"), None)
    zones_only = (ready is not None and not ready.status and agent.state.cluster_problem is None
                  and ready.reason in ZONE_SCOPED
                  and any(z.held or z.error or (z.plan is not None and z.plan.stalled) for z in zones))
    rejected = tuple(sorted(name for kind, name in (desired.rejected if desired else ()) if kind == "DNSPolicy"))
    return ClusterReport(
        cluster=me.name if me else agent.config.cluster,
        cluster_id=me.id if me else agent.config.cluster,
        mode=agent.role.mode.value,
        group=me.group if me else None,
        desired_revision=agent.state.fetched_sha,
        applied_revision=agent.state.applied_sha,
        attempted_revision=rev.sha if rev else None,
        conditions=tuple(conds), zones=tuple(zones), policies=policies, zones_only=zones_only,
        rejected_policies=rejected,
        heartbeat=agent.ports.clock(),
        health=agent.ports.probes.states() if agent.ports.probes is not None else {},
        groups={z: {k: v for k, v in g.items() if k not in ("records", "targets")}
                for z, g in agent.state.group_results.items()},
        poll_interval=agent.config.poll_interval,
        heartbeat_granularity=agent.role.granularity,
        gateways=agent.discovery.report(me) if agent.discovery is not None else {},
    )


def conditions(agent: Reporter, zones: list[ZoneReport]) -> list[Condition]:
    out = [agent.state.source_condition]
    if agent.state.lease_state is not None:
        out.append(Condition("LeaseHeld", agent.state.lease_state.held,
                             "LeaseAcquired" if agent.state.lease_state.held else "LeaseHeldByAnother",
                             agent.state.lease_state.message))
    conflicts = [c for z in zones if z.plan for c in z.plan.real_conflicts]
    if conflicts:
        first = conflicts[0]
        reason = "ConflictingStrategyDiscovered" if any(
            c.reason == "ConflictingStrategyDiscovered" for c in conflicts) else first.reason
        out.append(Condition("UnresolvedConflictDiscovered", True, reason,
                             f"{len(conflicts)} conflict(s); first: {first.message}"))
    healthy = healthy_condition(agent)
    if healthy is not None:
        out.append(healthy)
    diverged = sorted(z for z, g in agent.state.group_results.items() if g["diverged"])
    if agent.state.group_results:
        out.append(Condition("GroupsDivergedFromGit", bool(diverged),
                             "ZoneSerialAhead" if diverged else "GroupsLevelWithGit",
                             f"the zone holds a higher active-groups serial than git (break-glass) in "
                             f"{', '.join(diverged)}: agents follow the zone; run `gitdns groups reconcile`"
                             if diverged else "active groups as git says"))
    missing = [z for z in zones if z.missing and not z.held]
    out.extend(agent.role.conditions())
    if missing:
        out.append(Condition("UnresolvedConflictDiscovered", True, "RecordsMissing",
                             f"own records missing after apply in {', '.join(z.zone for z in missing)}; "
                             "re-applying with jitter"))
    out.append(ready_condition(agent, zones, out))
    return out


def healthy_condition(agent: Reporter) -> Condition | None:
    if agent.ports.probes is None:
        return None
    down = sorted({f"{host} {addr}" for r in agent.state.health_results.values()
                   for host, addrs in r.unhealthy.items() for addr in addrs})
    if not down:
        return _no_down(agent.ports.probes.states())
    frozen = sorted({h for r in agent.state.health_results.values() for h in r.frozen})
    all_down = sorted({h for r in agent.state.health_results.values() for h in r.fail_open})
    failopen = [n for r in agent.state.health_results.values() for n in r.notes if "fail open" in n]
    if all_down:
        return Condition("Healthy", False, "AllTargetsUnhealthy",
                         f"every target of {', '.join(all_down)} is unhealthy, in every cluster: all are published "
                         f"(fail open); unhealthy: {', '.join(down)}")
    if frozen:
        return Condition("Healthy", False, "WithdrawalsFrozen",
                         f"unhealthy: {', '.join(down)}; withdrawals frozen for {', '.join(frozen)} "
                         "(a large share of the fleet's targets failing at once)")
    if failopen:
        return Condition("Healthy", False, "AllTargetsUnhealthy", f"unhealthy: {', '.join(down)}; "
                         "kept until every agent's probes agree (fail open)")
    return Condition("Healthy", False, "TargetsWithdrawn", f"unhealthy, withdrawn: {', '.join(down)}")


def _no_down(states: Mapping[str, Mapping[str, Any]]) -> Condition:
    """Healthy with nothing unhealthy: TargetsHealthy only when a probe of this cluster's targets
    has answered; otherwise NoTargetsProbed (status True: nothing is withdrawn, nothing measured)."""
    measured = [s for s in states.values() if str(s.get("state")) in ("healthy", "unhealthy")]
    if measured:
        return Condition("Healthy", True, "TargetsHealthy", "every probed target is healthy")
    if not states:
        return Condition("Healthy", True, "NoTargetsProbed",
                         "no target of this cluster is probed (no DNSPolicy healthCheck covers its addresses): "
                         "health is not measured, nothing is withdrawn")
    return Condition("Healthy", True, "NoTargetsProbed",
                     f"{len(states)} target(s) of this cluster not probed yet: health is not measured, "
                     "nothing is withdrawn")


# Ready reasons that name zones (stalled, held, in error): the other zones are reconciled
ZONE_SCOPED = ("MassChangeRefused", "ValidationFailed", "ProviderError")


def ready_condition(agent: Reporter, zones: list[ZoneReport], conditions: list[Condition]) -> Condition:
    if agent.state.cluster_problem is not None:
        return agent.state.cluster_problem
    if agent.discovery is not None:
        desired = agent.state.current
        unread = agent.discovery.condition(agent.zones.cluster_of(desired) if desired else None)
        if unread is not None:
            return unread
    stalled = [z.zone for z in zones if z.plan is not None and z.plan.stalled]
    if stalled:
        return Condition("Ready", False, "MassChangeRefused", f"stalled: {', '.join(stalled)}")
    held = [z.zone for z in zones if z.held]
    if held:
        return Condition("Ready", False, "ValidationFailed",
                         f"zones held at their last good revision: {', '.join(held)}")
    errors = [f"{z.zone}: {z.error}" for z in zones if z.error]
    if errors:
        return Condition("Ready", False, "ProviderError", "; ".join(errors))
    bad = [c for c in conditions if not c.status and c.type in ("SourceAvailable", "LeaseHeld")]
    if bad:
        return Condition("Ready", False, bad[0].reason, bad[0].message)
    if any(c.type == "UnresolvedConflictDiscovered" for c in conditions):
        return Condition("Ready", False, "ReconcileFailed", "conflicts left as they are (see conditions)")
    return Condition("Ready", True, "ReconcileSucceeded",
                     f"applied {agent.state.applied_sha[:7]}" if agent.state.applied_sha else "nothing to apply")


def publish(agent: Reporter) -> None:
    """Push the report to the status branch.  A failed push is reported (the StatusPublished
    condition in ``/status`` and ``--once``, Ready False with the push's reason until a push
    succeeds, a log line, ``gitdns_status_push_failures_total``) and retried on its own backoff;
    DNS is reconciled meanwhile."""
    built = report(agent)
    if agent.ports.status is not None and agent.config.status:
        state, now = agent.state, agent.ports.clock()
        if state.status_push is None or state.status_push.status or state.push_wait.ready(now):
            state.status_push = _push(agent, built)
    built = with_push(agent, built)
    agent.state.last_report = built
    for hook in agent.ports.report_hooks:
        try:
            hook(built, agent.state.current)
        except GitdnsError as exc:
            log.warning("report hook failed: error=%s", exc)


def with_push(agent: Reporter, built: ClusterReport) -> ClusterReport:
    """``built`` with the last status push's condition (StatusPublished).  While the last push
    failed, Ready is False with the push's reason (unless already False for another): the
    status branch, which the fleet, the pull-request preview and `gitdns status` read, no
    longer says what this cluster does.  The DNSPolicies are still judged by their zones
    (``zones_only``): DNS was published."""
    pushed = agent.state.status_push
    if pushed is None or agent.ports.status is None or not agent.config.status:
        return built
    conditions = (*built.conditions, pushed)
    if pushed.status or not built.ready:
        return replace(built, conditions=conditions)
    ready = Condition("Ready", False, pushed.reason, f"the status branch could not be pushed ({pushed.reason}; see "
                      "StatusPublished): DNS is reconciled, Ready again once a push succeeds")
    return replace(built, conditions=tuple(ready if c.type == "Ready" else c for c in conditions), zones_only=True)


# why a push failed, as the StatusPublished reason: git's own classification where it has one
_PUSH_REASONS = {"StaleWrite": "StatusPushRaced", "Unreachable": "GitUnreachable"}


def _push(agent: Reporter, built: ClusterReport) -> Condition:
    assert agent.ports.status is not None
    try:
        agent.ports.status.publish(built)
    except GitdnsError as exc:
        delay = agent.state.push_wait.failed(agent.ports.clock())
        agent.state.push_failures += 1
        log.warning("status push failed: reason=%s retry_in=%.2fs error=%s", exc.reason, delay, exc)
        reason = _PUSH_REASONS.get(exc.reason, exc.reason)
        reason = reason if reason in REASONS else "StatusPushFailed"
        return Condition("StatusPublished", False, reason,
                         f"status push failed: {exc}; DNS is reconciled meanwhile, the push is tried again "
                         f"in {delay:.0f}s (or at the next webhook delivery)")
    agent.state.push_wait.succeeded()
    agent.role.reported(built.heartbeat)
    return Condition("StatusPublished", True, "StatusPushed", "the status branch holds this report")


def _owned(desired: Desired, cluster: Cluster | None, zone: Zone) -> tuple[Any, ...]:
    if cluster is None:
        return ()
    return builder.desired_for_zone(desired.state, cluster, zone)
