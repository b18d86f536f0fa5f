"""The orchestrator's conditions (/status ``conditions``, ``health_orchestrator_condition``;
docs/health.md, "Readiness and conditions"): each ``{type, status, reason, message}``.

    Ready             True Serving | StandingBy;
                      False DesiredStateNotLoaded | LeaseForbidden | LeaseError | FirstDeliveryPending
    DesiredLoaded     True RevisionLoaded | LastGoodHeld;  False NotReadYet | NodePoolNotFound | <read error>
    LeaseHeld         True LeaseAcquired;  False LeaseHeldByAnother | LeaseForbidden | LeaseError | NotTried
    Delivered         True Delivered;  False <delivery reason: ConfigMapMissing, ConfigMapForbidden,
                      WriteFailed, Unreachable, StaleWrite, ConfigMapTooLarge, ...> | RenderRefused |
                      InvalidAddress | NotLeaseHolder | NoNodes | Pending
    ProbesConfigured  True ProbesConfigured;  False HeadersSecretUnreadable | HeadersSecretNotListed |
                      ProbeTargetRefused
    NodesHealthy      True NodesHealthy;  False AllNodesDown | NoNodes | NotProbed | NotProbedYet

Only Ready decides /readyz; the others say what is wrong while the pod keeps serving.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gitdns.adapters.leases import LeaseState
from gitdns.core.corefile import Layout
from gitdns.core.health import State, TargetHealth
from gitdns.core.model import Node
from gitdns.orchestrator.faults import Faults
from gitdns.orchestrator.pool import PoolView
from gitdns.orchestrator.publisher import Published, Publisher


class Orchestrator(Protocol):
    """What the conditions read of `gitdns.orchestrator.service.Orchestrator`."""

    pool_name: str
    faults: Faults
    view: PoolView
    publisher: Publisher
    lease_state: LeaseState
    lease_reason: str
    delivery: Any
    monitor: Any

    @property
    def ready(self) -> bool: ...
    @property
    def nodes(self) -> tuple[Node, ...]: ...
    @property
    def plan(self) -> Layout | None: ...
    @property
    def published(self) -> Published: ...


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": "True" if self.status else "False", "reason": self.reason,
                "message": self.message}


def conditions(o: Orchestrator) -> list[dict[str, str]]:
    found = [desired(o), lease(o), delivered(o), probes(o), nodes(o)]
    return [c.as_dict() for c in [ready(o, found[0]), *found]]


def ready(o: Orchestrator, loaded: Condition) -> Condition:
    if o.ready:
        if o.publisher.attempted:
            return Condition("Ready", True, "Serving", "a desired revision is loaded and the first delivery was "
                                                       "tried; the other conditions say how it goes")
        return Condition("Ready", True, "StandingBy", f"a desired revision is loaded; {o.lease_state.message}")
    if not loaded.status:
        return Condition("Ready", False, "DesiredStateNotLoaded", loaded.message)
    if o.lease_reason in ("LeaseForbidden", "LeaseError"):
        return Condition("Ready", False, o.lease_reason, o.lease_state.message)
    return Condition("Ready", False, "FirstDeliveryPending", "waiting for the first probe round of the pool's nodes "
                                                             "and the lease before the first delivery")


def desired(o: Orchestrator) -> Condition:
    error, reason = o.faults.errors.get("desired"), o.faults.reasons.get("desired")
    pool = o.view.pool
    if pool is None:
        return Condition("DesiredLoaded", False, reason or "NotReadYet",
                         error or "the desired state has not been read yet")
    what = f"NodePool {o.pool_name}: {len(o.nodes)} node(s), {len(o.plan.blocks) if o.plan else 0} zone(s)"
    if error:
        return Condition("DesiredLoaded", True, "LastGoodHeld", f"{what} from the last good revision; {error}")
    return Condition("DesiredLoaded", True, "RevisionLoaded", what)


def lease(o: Orchestrator) -> Condition:
    return Condition("LeaseHeld", o.lease_state.held, o.lease_reason, o.lease_state.message)


def delivered(o: Orchestrator) -> Condition:
    errors, reasons = o.faults.errors, o.faults.reasons
    if "delivery" in errors:
        return Condition("Delivered", False, reasons["delivery"], errors["delivery"])
    if reasons.get("render") in ("RenderRefused", "InvalidAddress"):
        return Condition("Delivered", False, reasons["render"], errors["render"])
    if not o.lease_state.held:
        return Condition("Delivered", False, "NotLeaseHolder", f"only the lease holder delivers; "
                                                               f"{o.lease_state.message}")
    if o.publisher.landed:
        left_out = f"; {errors['render']}" if "render" in errors else ""
        return Condition("Delivered", True, "Delivered", f"to {o.delivery.target}{left_out}")
    if o.view.pool is not None and not o.nodes:
        return Condition("Delivered", False, "NoNodes", f"NodePool {o.pool_name} has no node: nothing to deliver")
    return Condition("Delivered", False, "Pending", "waiting for the desired state and the first probe round")


def probes(o: Orchestrator) -> Condition:
    if "probes" in o.faults.errors:
        return Condition("ProbesConfigured", False, o.faults.reasons["probes"], o.faults.errors["probes"])
    return Condition("ProbesConfigured", True, "ProbesConfigured", "every node is probed as its pool says")


def nodes(o: Orchestrator) -> Condition:
    total = len(o.nodes)
    if total == 0:
        return Condition("NodesHealthy", False, "NoNodes", f"NodePool {o.pool_name} has no node")
    snap = o.monitor.snapshot()
    health = [snap.get(n.name, TargetHealth()) for n in o.nodes]
    healthy = sum(1 for h in health if h.state is State.HEALTHY)
    if healthy:
        return Condition("NodesHealthy", True, "NodesHealthy", f"{healthy} of {total} node(s) healthy")
    if len(o.view.probe_errors) == total:
        return Condition("NodesHealthy", False, "NotProbed", "no node is probed: see ProbesConfigured")
    if o.published.fail_open:
        return Condition("NodesHealthy", False, "AllNodesDown", "no node is healthy: every node of the pool is "
                                                                "published (fail open)")
    if all(h.checks == 0 for h in health):
        return Condition("NodesHealthy", False, "NotProbedYet", "no probe has finished yet")
    return Condition("NodesHealthy", False, "AllNodesDown", f"none of {total} node(s) is healthy")
