"""What the desired state says about an orchestrator's node pool: the last good state, the
pool, its nodes (static and discovered), the zone layout with the tenants it refuses
(`gitdns.core.checks.tenants`) and its notes, and the probe targets set on the health
monitor.

Probe headers (``healthCheck.headersSecret``) are read again at every poll.  When they cannot
be read and never were, the pool's nodes are not probed at all: a probe without its headers
would answer for the wrong request (a 401 withdrawing a healthy node, or an unauthenticated
page answering for a dead one).  They are listed in ``probe_errors`` and published as long as
that lasts (never withdrawn for it); the fault "probes" says why.  Headers read before are kept
while a later read fails.

A node whose probe the repository may not name (`gitdns.core.reach`: a healthEndpoint whose host
is not the node's ip, or an address in a class the operator's ``--probe-allow-ranges`` does not
allow) is not probed either, for the same reasons: listed in ``probe_errors``, published as a
node not yet probed, the fault "probes" with reason ``ProbeTargetRefused``."""

from __future__ import annotations

import logging
from collections.abc import Callable

from gitdns.adapters.probes import HealthMonitor
from gitdns.core.corefile import Layout, layout
from gitdns.core.corefile.check import shown
from gitdns.core.desired import Desired
from gitdns.core.health import HealthSettings, ProbeSpec
from gitdns.core.model import DesiredState, Node, NodePool
from gitdns.core.reach import ProbeReach
from gitdns.errors import GitdnsError
from gitdns.orchestrator.faults import Faults
from gitdns.orchestrator.metrics import OrchestratorMetrics
from gitdns.orchestrator.sources import (
    DesiredSource,
    hold_addresses,
    hold_fenced,
    hold_good,
    pool_targets,
)
from gitdns.providers.probeheaders import Headers

log = logging.getLogger(__name__)


class PoolView:
    """The node pool ``pool_name`` as the desired state read from ``source`` describes it."""

    def __init__(self, pool_name: str, source: DesiredSource, monitor: HealthMonitor, metrics: OrchestratorMetrics,
                 faults: Faults, *, discovery: Callable[[NodePool], tuple[Node, ...]] | None = None,
                 headers: Callable[[str], Headers] | None = None,
                 reach: ProbeReach = ProbeReach()) -> None:  # noqa: B008 - frozen value
        self.pool_name = pool_name
        self.source = source
        self.monitor = monitor
        self.metrics = metrics
        self.faults = faults
        self.discovery = discovery
        self.headers = headers  # probe headers by headersSecret name (None: no headers)
        self.reach = reach  # the operator's probe ranges
        self.probe_errors: dict[str, str] = {}  # node name -> why it is not probed (headers, a refused target)
        self.state: DesiredState | None = None
        self.pool: NodePool | None = None
        self.nodes: tuple[Node, ...] = ()
        self.plan: Layout | None = None
        self.notes: list[str] = []
        self.refused: dict[str, tuple[str, str]] = {}  # tenant -> (its file, why it is refused)
        self.target_notes: list[str] = []
        self.health: HealthSettings | None = None  # the pool's probe settings, once it is known
        # the probes last set, by node name, with the settings they were set with: what tells a
        # new set of targets from the last (the specs alone: 10,000 (spec, settings) pairs kept
        # here cost ~0.6 MB for nothing, as every target of a pool shares its settings)
        self._specs: tuple[ProbeSpec, ...] = ()  # the targets last set, in order (each names its node)
        # The Public Suffix List (~1.9 MB) is not read up front: validation reads the list's rule
        # tokens (milliseconds) and builds the list only for a zone name that could be a suffix.

    def poll(self) -> bool:
        """Read the desired state; True when the probe targets were set again (a new state or
        a new set of nodes), so the files may change."""
        try:
            desired = self.source.read()
        except GitdnsError as exc:
            self.faults.fail("desired", exc.reason, f"desired state not read: {exc}")
            self.metrics.desired_errors.labels(exc.reason).inc()
            desired = None
        else:
            self.faults.clear("desired")
        if desired is not None:
            self._take(desired)
        if self.pool is None:
            return False
        changed = self._refresh_nodes() or desired is not None
        if changed or (self.headers is not None and self.pool.health.headers_secret):
            return self._apply_targets() or changed
        return False

    def _take(self, desired: Desired) -> None:
        state, notes = hold_good(desired, self.state, self.pool_name)
        state, more = hold_addresses(state, self.state, self.pool_name)
        state, refused, fenced = hold_fenced(state, self.state, self.pool_name)
        notes += more + fenced
        self.state = state
        pool = next((p for p in state.node_pools if p.name == self.pool_name), None)
        if pool is None and self.pool is not None:
            notes.append(f"NodePool {self.pool_name} is gone from the desired state: the last one is kept")
            pool = self.pool
        if pool is None:
            self.faults.fail("desired", "NodePoolNotFound", f"no NodePool {self.pool_name} in the desired state")
            self.notes = notes
            return
        self.pool = pool
        plan = layout(state, self.pool_name, refused)
        self.notes = notes + [f"tenant {s.tenant}: {s.reason}" for s in plan.skipped]
        self.notes += [f"tenant {shown(s.tenant)} refused: {s.reason}" for s in plan.refused]
        origins = {t.name: t.origin.file for t in state.tenants}
        self.refused = {s.tenant: (origins.get(s.tenant, ""), s.reason) for s in plan.refused}
        if plan != self.plan:
            log.info("layout: pool=%s zones=%s skipped=%d refused=%d", self.pool_name,
                     ",".join(b.zone for b in plan.blocks) or "-", len(plan.skipped), len(plan.refused))
            for s in plan.refused:
                log.warning("tenant refused: pool=%s tenant=%r file=%s reason=%s", self.pool_name, s.tenant,
                            origins.get(s.tenant, ""), s.reason)
        self.plan = plan
        self.metrics.set_tenants(sum(len(b.tenants) for b in plan.blocks), len({s.tenant for s in plan.skipped}),
                                 len(plan.refused))

    def _refresh_nodes(self) -> bool:
        assert self.pool is not None
        nodes = self.pool.nodes
        if self.discovery is not None and self.pool.discovery_selector:
            try:
                found = self.discovery(self.pool)
                self.faults.clear("discovery")
            except Exception as exc:  # keep the last discovered set
                self.faults.fail("discovery", "DiscoveryFailed", f"node discovery failed: {type(exc).__name__}: {exc}")
                found = tuple(n for n in self.nodes if n not in self.pool.nodes)
            static = {n.name for n in nodes}
            nodes = (*nodes, *(n for n in found if n.name not in static))
        changed = nodes != self.nodes
        self.nodes = nodes
        return changed

    def _probe_headers(self) -> tuple[Headers, str | None]:
        """The pool's probe headers, and why its nodes cannot be probed (None: they can)."""
        assert self.pool is not None
        secret = self.pool.health.headers_secret
        if not secret or self.headers is None:
            self.faults.clear("probes")
            return (), None
        try:
            headers = self.headers(secret)
        except GitdnsError as exc:
            kept = getattr(exc, "kept", None)
            if kept is not None:
                self.faults.fail("probes", exc.reason, f"NodePool {self.pool_name}: {exc}; probing with the "
                                                       "headers read before")
                return kept, None
            why = f"NodePool {self.pool_name}: {exc}; its nodes are not probed, and not withdrawn for it"
            self.faults.fail("probes", exc.reason, why)
            return (), why
        self.faults.clear("probes")
        return headers, None

    def _apply_targets(self) -> bool:
        """Set the probe targets; True when they (or the nodes left unprobed) changed."""
        assert self.pool is not None
        headers, why = self._probe_headers()
        targets, self.target_notes, refused = pool_targets(self.pool, self.nodes, headers, self.reach)
        errors = {name: why for name in targets} if why is not None else {}
        errors.update(refused)
        for name in errors:
            targets.pop(name, None)
        if refused and "probes" not in self.faults.errors:
            first = next(iter(refused.values()))
            more = f" (and {len(refused) - 1} more node(s))" if len(refused) > 1 else ""
            self.faults.fail("probes", "ProbeTargetRefused", f"NodePool {self.pool_name}: {first}{more}; not probed, "
                                                             "and not withdrawn for it")
        # as a tuple (each spec's target id is its node's name): a quarter of a mapping's size
        specs = tuple(spec for spec, _ in targets.values())
        health = HealthSettings.for_node_pool(self.pool.health)
        changed = errors != self.probe_errors or specs != self._specs or (bool(specs) and health != self.health)
        self.probe_errors, self._specs = errors, specs
        self.metrics.probe_config_errors.set(len(errors))
        self.health = health
        if changed:
            self.monitor.set_targets(targets)
        return changed
