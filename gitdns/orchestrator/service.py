"""The orchestrator of one node pool: poll the desired state, keep the lease, probe the
nodes, render the CoreDNS files from the healthy ones and deliver only what changed."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jinja2

from gitdns.adapters.coredns_delivery import Delivery
from gitdns.adapters.leases import Lease, LeaseState, NoLease
from gitdns.adapters.probes import HealthMonitor
from gitdns.adapters.templates import load_template_sources
from gitdns.core.corefile import CorefileSettings, Layout, ZoneBlock, layout, render_hosts, render_server, sort_ips
from gitdns.core.desired import Desired
from gitdns.core.health import HealthSettings, State, TargetHealth, published
from gitdns.core.model import DesiredState, Node, NodePool
from gitdns.core.render import make_environment
from gitdns.errors import ConfigError, GitdnsError
from gitdns.orchestrator.metrics import NodeSample, OrchestratorMetrics
from gitdns.orchestrator.sources import DesiredSource, hold_good, pool_targets

log = logging.getLogger(__name__)

TICK = 0.5  # seconds between housekeeping passes (lease, delivery retries)
METRICS_EVERY = 1.0  # seconds between metric refreshes (10,000 nodes cost ~10 ms each)
DEBOUNCE = 0.05  # after a wake-up, let a burst of health changes land before publishing
RETRY_DELIVERY = 5.0  # seconds before a failed delivery is tried again


@dataclass(slots=True)
class _Published:
    ips: list[str] = field(default_factory=list)
    fail_open: bool = False
    healthy: list[str] = field(default_factory=list)


class Orchestrator:
    def __init__(self, pool_name: str, source: DesiredSource, delivery: Delivery, *,
                 metrics: OrchestratorMetrics | None = None, lease: Lease | None = None,
                 monitor: HealthMonitor | None = None, env: jinja2.Environment | None = None,
                 settings: CorefileSettings = CorefileSettings(),  # noqa: B008 - frozen value
                 discovery: Callable[[NodePool], tuple[Node, ...]] | None = None,
                 poll_interval: float = 30.0, lease_duration: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 headers: Callable[[str], tuple[tuple[str, str], ...]] | None = None) -> None:
        self.pool_name = pool_name
        self.headers = headers  # probe headers by headersSecret name (None: no headers)
        self.source = source
        self.delivery = delivery
        self.metrics = metrics or OrchestratorMetrics()
        self.lease = lease or NoLease()
        self.monitor = monitor or HealthMonitor(on_change=self._on_change)
        self.env = env or make_environment(load_template_sources())
        self.settings = settings
        self.discovery = discovery
        self.poll_interval = poll_interval
        self.lease_duration = lease_duration
        self.clock = clock
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.state: DesiredState | None = None
        self.pool: NodePool | None = None
        self.nodes: tuple[Node, ...] = ()
        self.plan: Layout | None = None
        self.notes: list[str] = []
        self.target_notes: list[str] = []
        self.errors: dict[str, str] = {}  # step -> the last error (cleared on success)
        self.published = _Published()
        self.delivered: dict[str, str] | None = None
        self.ready = False
        self.lease_state = LeaseState(False, "", 0.0, "not tried yet")
        self.last_tick = clock()
        self._started = clock()
        self._settings: HealthSettings | None = None
        self._hosts_cache: dict[tuple[ZoneBlock, tuple[str, ...], int], str] = {}
        self._seen_checks: dict[str, float] = {}
        self._next_poll = 0.0
        self._next_lease = 0.0
        self._retry_at = 0.0
        self._metrics_at = -METRICS_EVERY

    # --- lifecycle --------------------------------------------------------------------------

    def _on_change(self, _tid: str, _old: TargetHealth, _new: TargetHealth) -> None:
        self.wake.set()

    def run(self) -> None:
        """Until ``stopped`` is set: poll the desired state, keep the lease, publish on
        every health change (woken by the monitor) and retry failed deliveries."""
        self.monitor.start()
        try:
            while not self.stopped.is_set():
                self.step()
                if self.wake.wait(TICK):
                    time.sleep(DEBOUNCE)
                self.wake.clear()
        finally:
            self.monitor.stop()
            self.lease.release()

    def run_once(self, timeout: float = 60.0) -> bool:
        """One pass for ``--once``: take the lease (refused: ConfigError), read the desired
        state, wait for the first round of probes, deliver, release.  True when delivered."""
        self._renew_lease(self.clock())
        if not self.lease_state.held:
            raise ConfigError(f"node pool {self.pool_name}: {self.lease_state.message}")
        self.monitor.start()
        try:
            self.poll()
            deadline = self.clock() + timeout
            while not self.ready and self.clock() < deadline and not self.errors.get("desired"):
                self.publish()
                if self.errors.get("delivery"):
                    break
                self.wake.wait(0.05)
                self.wake.clear()
            self.refresh_metrics()
            return self.ready
        finally:
            self.monitor.stop()
            self.lease.release()

    def step(self) -> None:
        now = self.clock()
        self.last_tick = now
        if now >= self._next_poll:
            self.poll()
            self._next_poll = now + self.poll_interval * random.uniform(0.95, 1.05)
        if now >= self._next_lease:
            self._renew_lease(now)
        if now - self._metrics_at >= METRICS_EVERY:
            self._metrics_at = now
            self.refresh_metrics()
        if self.lease_state.held and now >= self._retry_at:
            self.publish()

    def _renew_lease(self, now: float) -> None:
        try:
            state = self.lease.acquire()
        except Exception as exc:  # an API or file error: not held, try again soon
            state = LeaseState(False, "unknown", 0.0, f"lease error: {type(exc).__name__}: {exc}")
        if state.held != self.lease_state.held or state.message != self.lease_state.message:
            log.info("lease: held=%s message=%s", state.held, state.message)
        self.lease_state = state
        self.metrics.lease_held.set(1 if state.held else 0)
        if not state.held:
            self.ready = False
        self._next_lease = now + (self.lease_duration / 3 if state.held else 2.0)

    # --- the desired state ------------------------------------------------------------------

    def poll(self) -> None:
        try:
            desired = self.source.read()
        except GitdnsError as exc:
            self._fail("desired", exc.reason, f"desired state not read: {exc}")
            self.metrics.desired_errors.labels(exc.reason).inc()
            desired = None
        else:
            self.errors.pop("desired", None)
        if desired is not None:
            self._take(desired)
        if self.pool is not None and (self._refresh_nodes() or desired is not None):
            self._apply_targets()
            self.wake.set()

    def _take(self, desired: Desired) -> None:
        state, notes = hold_good(desired, self.state, self.pool_name)
        self.state = state
        pool = next((p for p in state.node_pools if p.name == self.pool_name), None)
        if pool is None and self.pool is not None:
            notes.append(f"NodePool {self.pool_name} is gone from the desired state: the last one is kept")
            pool = self.pool
        if pool is None:
            self._fail("desired", "NodePoolNotFound", f"no NodePool {self.pool_name} in the desired state")
            self.notes = notes
            return
        self.pool = pool
        plan = layout(state, self.pool_name)
        self.notes = notes + [f"tenant {s.tenant}: {s.reason}" for s in plan.skipped]
        if plan != self.plan:
            log.info("layout: pool=%s zones=%s skipped=%d", self.pool_name,
                     ",".join(b.zone for b in plan.blocks) or "-", len(plan.skipped))
            self._hosts_cache.clear()
        self.plan = plan
        self.metrics.set_tenants(sum(len(b.tenants) for b in plan.blocks), len({s.tenant for s in plan.skipped}))

    def _refresh_nodes(self) -> bool:
        assert self.pool is not None
        nodes = self.pool.nodes
        if self.discovery is not None and self.pool.discovery_selector:
            try:
                found = self.discovery(self.pool)
                self.errors.pop("discovery", None)
            except Exception as exc:  # keep the last discovered set
                self._fail("discovery", "DiscoveryFailed", f"node discovery failed: {type(exc).__name__}: {exc}")
                found = tuple(n for n in self.nodes if n not in self.pool.nodes)
            static = {n.name for n in nodes}
            nodes = (*nodes, *(n for n in found if n.name not in static))
        changed = nodes != self.nodes
        self.nodes = nodes
        return changed

    def _apply_targets(self) -> None:
        assert self.pool is not None
        secret = self.pool.health.headers_secret
        headers = self.headers(secret) if secret and self.headers is not None else ()
        targets, self.target_notes = pool_targets(self.pool, self.nodes, headers)
        self._settings = HealthSettings.for_node_pool(self.pool.health)
        self.monitor.set_targets(targets)

    def _fail(self, step: str, reason: str, message: str) -> None:
        if self.errors.get(step) != message:
            log.warning("%s: reason=%s %s", step, reason, message)
        self.errors[step] = message

    # --- health -> files ---------------------------------------------------------------------

    def compute(self) -> _Published:
        """The IPs to publish now.  Fail open: none published by health -> the last set."""
        settings = self._settings or HealthSettings()
        snap = self.monitor.snapshot()
        health = {n.name: snap.get(n.name, TargetHealth()) for n in self.nodes}
        chosen = [n.ip for n in self.nodes if published(health[n.name], settings)]
        healthy = [n.ip for n in self.nodes if health[n.name].state is State.HEALTHY]
        if chosen:
            return _Published(sort_ips(chosen), False, sort_ips(healthy))
        fallback = self.published.ips or [n.ip for n in self.nodes]
        return _Published(sort_ips(fallback), bool(self.nodes), sort_ips(healthy))

    def first_round_done(self) -> bool:
        """Every node checked once, or one interval plus a timeout since start."""
        snap = self.monitor.snapshot()
        if all(snap.get(n.name, TargetHealth()).checks > 0 for n in self.nodes):
            return True
        settings = self._settings or HealthSettings()
        return self.clock() - self._started > settings.interval + settings.timeout

    def render(self, ips: list[str]) -> dict[str, str]:
        assert self.plan is not None
        if not self.plan.blocks or not ips:
            return {}
        total = len(self.nodes)
        files: dict[str, str] = {}
        for block in self.plan.blocks:
            key = (block, tuple(ips), total)
            if key not in self._hosts_cache:  # re-rendered only when its published set changed
                self._hosts_cache[key] = render_hosts(self.env, self.pool_name, block, ips, total)
            files[block.hosts_file] = self._hosts_cache[key]
        files[self.plan.server_file] = render_server(self.env, self.plan, self.settings)
        if len(self._hosts_cache) > 4 * len(self.plan.blocks):
            self._hosts_cache = {k: v for k, v in self._hosts_cache.items() if k[1] == tuple(ips)}
        return files

    def publish(self) -> None:
        if self.plan is None or not self.nodes or not self.first_round_done():
            return
        current = self.compute()
        if current.fail_open and not self.published.fail_open:
            log.warning("fail open: pool=%s no node is healthy; keeping %s", self.pool_name,
                        ",".join(current.ips) or "-")
        self.published = current
        self.metrics.published_nodes.set(len(current.ips))
        self.metrics.fail_open.set(1 if current.fail_open else 0)
        files = self.render(current.ips)
        if files == self.delivered:
            return
        try:
            result = self.delivery.deliver(files)
        except GitdnsError as exc:
            self._fail("delivery", exc.reason, f"delivery to {self.delivery.target} failed: {exc}")
            self.metrics.delivery_errors.labels(exc.reason).inc()
            self._retry_at = self.clock() + RETRY_DELIVERY
            return
        except OSError as exc:
            self._fail("delivery", "WriteFailed", f"delivery to {self.delivery.target} failed: {exc}")
            self.metrics.delivery_errors.labels("WriteFailed").inc()
            self._retry_at = self.clock() + RETRY_DELIVERY
            return
        self.errors.pop("delivery", None)
        self.delivered = files
        if result.changed:
            self.metrics.dns_updates.inc()
            log.info("published: pool=%s ips=%s fail_open=%s", self.pool_name, ",".join(current.ips),
                     current.fail_open)
        self.ready = True
        self.metrics.ready.set(1)

    # --- metrics and status -------------------------------------------------------------------

    def refresh_metrics(self) -> None:
        snap = self.monitor.snapshot()
        timings = self.monitor.timings()
        samples: dict[str, NodeSample] = {}
        slowest = 0.0
        for node in self.nodes:
            health = snap.get(node.name, TargetHealth())
            timing = timings.get(node.name)
            duration = timing.last_round_duration if timing is not None else None
            if timing is not None:
                slowest = max(slowest, timing.last_round_duration)
                if self._seen_checks.get(node.name) != timing.last_check_time:
                    self._seen_checks[node.name] = timing.last_check_time
                    self.metrics.check_duration.observe(timing.last_round_duration)
            samples[node.name] = (node.ip, health.state is State.HEALTHY, health.failures, duration)
        self.metrics.set_nodes(samples)
        self.metrics.last_check_duration.set(slowest)
        if self.monitor.last_check_time is not None:
            self.metrics.last_check_time.set(self._wall(self.monitor.last_check_time))
        healthy = sum(1 for s in samples.values() if s[1])
        self.metrics.set_counts(healthy=healthy, total=len(self.nodes), published=len(self.published.ips),
                                fail_open=self.published.fail_open)

    @staticmethod
    def _wall(monotonic_time: float) -> float:
        return time.time() - (time.monotonic() - monotonic_time)

    def status(self) -> dict[str, Any]:
        snap = self.monitor.snapshot()
        last = self.monitor.last_check_time
        return {
            "node_pool": self.pool_name,
            "healthy_nodes": [n.name for n in self.nodes if snap.get(n.name, TargetHealth()).state is State.HEALTHY],
            "total_nodes": len(self.nodes),
            "last_check": None if last is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._wall(last))),
            "published_ips": list(self.published.ips),
            "fail_open": self.published.fail_open,
            "nodes": {n.name: {"ip": n.ip, "state": str(snap.get(n.name, TargetHealth()).state),
                               "failures": snap.get(n.name, TargetHealth()).failures,
                               "error": snap.get(n.name, TargetHealth()).last_error} for n in self.nodes},
            "zones": [{"zone": b.zone, "tenants": list(b.tenants), "file": b.hosts_file}
                      for b in (self.plan.blocks if self.plan else ())],
            "delivery": self.delivery.target,
            "lease": {"held": self.lease_state.held, "message": self.lease_state.message},
            "ready": self.ready,
            "notes": [*self.notes, *self.target_notes],
            "errors": dict(self.errors),
        }

    def alive(self, now: float | None = None) -> bool:
        return (now if now is not None else self.clock()) - self.last_tick < max(30.0, 10 * TICK)
