"""The orchestrator of one node pool: poll the desired state, keep the lease, probe the
nodes, render the CoreDNS files from the healthy ones and deliver only what changed.

`Orchestrator` runs the loop, keeps the lease and reports (metrics, /status, conditions); what
the desired state says about the pool is a `gitdns.orchestrator.pool.PoolView`, and health to
files to delivery a `gitdns.orchestrator.publisher.Publisher`, both created here.

Readiness means serving (docs/health.md, "Readiness and conditions"): ready once a revision
of the desired state holding the pool is loaded and the first delivery was tried — or, not
holding the lease, once another holder is seen (a standby waiting its turn) — and ready from
then on.  Failed deliveries, a lost lease, all nodes down, unreadable probe headers show in
the conditions of /status and in metrics, never as NotReady: the pod stays in its Service and
GitOps tools do not call the workload degraded for what the orchestrator itself reports."""

from __future__ import annotations

import gc
import logging
import math
import random
import threading
import time
from array import array
from collections.abc import Callable
from typing import Any

import jinja2

from gitdns.adapters.coredns_delivery import Delivery
from gitdns.adapters.leases import Lease, LeaseState, NoLease
from gitdns.adapters.probes import HealthMonitor
from gitdns.adapters.templates import load_template_sources
from gitdns.core.corefile import CorefileSettings, Layout
from gitdns.core.desired import Desired
from gitdns.core.health import State, TargetHealth
from gitdns.core.model import Node, NodePool
from gitdns.core.reach import ProbeReach
from gitdns.core.render import make_environment
from gitdns.errors import ConfigError
from gitdns.orchestrator.conditions import conditions
from gitdns.orchestrator.faults import Faults
from gitdns.orchestrator.kubeaccess import PoolLease
from gitdns.orchestrator.metrics import OrchestratorMetrics
from gitdns.orchestrator.pool import PoolView
from gitdns.orchestrator.publisher import Published, Publisher
from gitdns.orchestrator.sources import DesiredSource
from gitdns.providers.probeheaders import Headers

log = logging.getLogger(__name__)

TICK = 0.5  # seconds between housekeeping passes (lease, delivery retries)
METRICS_EVERY = 1.0  # seconds between metric refreshes (10,000 nodes cost ~10 ms each)
PUBLISH_GAP = 0.05  # seconds between two passes woken by health changes: the first change after a
# quiet spell is published at once, the rest of a burst waits out the gap and lands in one delivery


def wait_after_wake(woken: float, now: float) -> float:
    """Seconds a pass woken at ``now`` by a health change waits, the last pass woken so having
    started at ``woken`` (a pass of the housekeeping timer does not count): none after a quiet
    spell (the change is published at once), else the rest of `PUBLISH_GAP` (the changes of a
    burst land in one delivery, at most ~20 a second)."""
    return max(0.0, woken + PUBLISH_GAP - now)


class ReadAhead:
    """The desired source as the run loop reads it: read on a thread of its own (a git
    ``ls-remote`` and fetch take from a tenth of a second up to the git timeout, loading and
    checking 10,000 nodes about a second), each result handed to the loop, which a hand-over
    wakes.  So a health change is never kept waiting for a read.  Until `start` (``--once``, a
    loop stepped by hand) `read` reads in place."""

    def __init__(self, source: DesiredSource) -> None:
        self.source = source
        self.running = False
        self._lock = threading.Lock()
        self._handed: tuple[Desired | None, Exception | None] | None = None

    def start(self, every: Callable[[], float], stopped: threading.Event, wake: threading.Event) -> None:
        """Read now, then every ``every()`` seconds until ``stopped``; wake the loop each time."""
        self.running = True

        def loop() -> None:
            while not stopped.is_set():
                try:
                    result: tuple[Desired | None, Exception | None] = (self.source.read(), None)
                except Exception as exc:  # handed over: the loop's read raises it, as a read in place would
                    result = (None, exc)
                with self._lock:  # a state not taken yet is kept unless a newer one came
                    if self._handed is None or self._handed[0] is None or result[0] is not None:
                        self._handed = result
                wake.set()
                stopped.wait(every())

        threading.Thread(target=loop, name="gitdns-desired", daemon=True).start()

    def handed(self) -> bool:
        with self._lock:
            return self._handed is not None

    def read(self) -> Desired | None:
        if not self.running:
            return self.source.read()
        with self._lock:
            handed, self._handed = self._handed, None
        if handed is None:
            return None  # nothing read since the last hand-over: unchanged
        desired, error = handed
        if error is not None:
            raise error
        return desired


class Orchestrator:
    def __init__(self, pool_name: str, source: DesiredSource, delivery: Delivery, *,
                 metrics: OrchestratorMetrics | None = None, lease: Lease | None = None,
                 monitor: HealthMonitor | None = None, env: jinja2.Environment | None = None,
                 settings: CorefileSettings = CorefileSettings(),  # noqa: B008 - frozen value
                 discovery: Callable[[NodePool], tuple[Node, ...]] | None = None,
                 poll_interval: float = 30.0, lease_duration: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 headers: Callable[[str], Headers] | None = None,
                 reach: ProbeReach = ProbeReach()) -> None:  # noqa: B008 - frozen value
        self.pool_name = pool_name
        self.source = source
        self.delivery = delivery
        self.metrics = metrics or OrchestratorMetrics()
        self.lease = lease or NoLease()
        # the probes' connection gate takes the operator's ranges (``--probe-allow-ranges``)
        self.monitor = monitor or HealthMonitor(on_change=self._on_change, reach=reach)
        self.poll_interval = poll_interval
        self.lease_duration = lease_duration
        self.clock = clock
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.faults = Faults()
        self.lease_state = LeaseState(False, "", 0.0, "not tried yet")
        self.lease_reason = "NotTried"
        self._ready = False
        self.last_tick = clock()
        self.reader = ReadAhead(source)
        self.view = PoolView(pool_name, self.reader, self.monitor, self.metrics, self.faults,
                             discovery=discovery, headers=headers, reach=reach)
        self.publisher = Publisher(self.view, self.monitor, delivery, env or make_environment(load_template_sources()),
                                   settings, self.metrics, self.faults, clock)
        self._checks_seen_until = -math.inf  # the latest end of a probe round the histogram observed
        # the nodes' names and addresses as metric columns, and whether no name is there twice
        self._columns: tuple[tuple[Node, ...] | None, tuple[str, ...], tuple[str, ...], bool] = (None, (), (), True)
        self._next_poll = 0.0
        self._next_lease = 0.0
        self._metrics_at = -METRICS_EVERY

    # --- what the parts hold ----------------------------------------------------------------

    @property
    def errors(self) -> dict[str, str]:
        """Step -> the last error (cleared on success)."""
        return self.faults.errors

    @property
    def pool(self) -> NodePool | None:
        return self.view.pool

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.view.nodes

    @property
    def plan(self) -> Layout | None:
        return self.view.plan

    @property
    def notes(self) -> list[str]:
        return self.view.notes

    @property
    def published(self) -> Published:
        return self.publisher.published

    @property
    def ready(self) -> bool:
        """/readyz: see the module docstring."""
        return self._ready or self._ready_now()

    def _ready_now(self) -> bool:
        if self.view.pool is None:
            return False
        return self.publisher.attempted or (not self.lease_state.held and self.lease_reason == "LeaseHeldByAnother")

    def readiness(self) -> str:
        """Why /readyz answers as it does, in a line."""
        ready = next(c for c in self.conditions() if c["type"] == "Ready")
        return f"{'ready' if self.ready else 'not ready'}: {ready['reason']}: {ready['message']}"

    # --- lifecycle --------------------------------------------------------------------------


    def _on_change(self, _tid: str, _old: TargetHealth, _new: TargetHealth) -> None:
        self.wake.set()

    def run(self) -> None:
        """Until ``stopped`` is set: poll the desired state, keep the lease, publish on
        every health change (woken by the monitor) and retry failed deliveries."""
        self.monitor.start()
        self.reader.start(lambda: self.poll_interval * random.uniform(0.95, 1.05), self.stopped, self.wake)
        try:
            frozen = False
            woken = -PUBLISH_GAP  # when the last pass woken by a health change started
            while not self.stopped.is_set():
                self.step()
                if not frozen and self.publisher.attempted:
                    frozen = self._freeze()
                if self.wake.wait(TICK):
                    rest = wait_after_wake(woken, time.monotonic())
                    if rest > 0:
                        self.stopped.wait(rest)
                    woken = time.monotonic()
                self.wake.clear()
        finally:
            self.monitor.stop()
            self.lease.release()
            self.reader.running = False

    @staticmethod
    def _freeze() -> bool:
        """Once the first delivery was tried, move every object alive (the modules, the desired
        state, the templates: some 10^5 of them) out of the cyclic collector's reach.  Its full
        collections then walk only what came after: at 4,000 probes a second they came every few
        seconds and took 30-40 ms, holding up every thread, the probes' timeouts included (and a
        third of the process's CPU).  No collection first: it would take 150-250 ms, once, for
        about a dozen objects (what stays frozen is never freed; a later desired state is not
        frozen)."""
        gc.freeze()
        return True

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
            while not self.publisher.landed and self.clock() < deadline and not self.errors.get("desired"):
                self.publish()
                if self.errors.get("delivery"):
                    break
                self.wake.wait(0.05)
                self.wake.clear()
            self.refresh_metrics()
            return self.publisher.landed
        finally:
            self.monitor.stop()
            self.lease.release()

    def step(self) -> None:
        now = self.clock()
        self.last_tick = now
        polled = False
        if self.reader.running:
            if self.reader.handed():  # read on its own thread, at the poll interval
                self.poll()
                polled = True
        elif now >= self._next_poll:
            self.poll()
            polled = True
            self._next_poll = now + self.poll_interval * random.uniform(0.95, 1.05)
        if now >= self._next_lease:
            self._renew_lease(now)
        if self.lease_state.held and now >= self.publisher.retry_at:
            self.publish()  # before the metrics: a health change is not kept waiting for them
        if polled or now - self._metrics_at >= METRICS_EVERY:  # a poll may bring other nodes
            self._metrics_at = now
            self.refresh_metrics()
        if not self._ready and self._ready_now():
            self._ready = True
            self.metrics.ready.set(1)
            log.info("ready: pool=%s", self.pool_name)

    def _renew_lease(self, now: float) -> None:
        try:
            state = self.lease.acquire()
        except Exception as exc:  # an API or file error: not held, try again soon
            state = LeaseState(False, "unknown", 0.0, f"lease error: {type(exc).__name__}: {exc}")
        reason = self._lease_reason(state)
        if state.held != self.lease_state.held or state.message != self.lease_state.message:
            level = logging.WARNING if reason in ("LeaseForbidden", "LeaseError") else logging.INFO
            log.log(level, "lease: held=%s reason=%s message=%s", state.held, reason, state.message)
        if self.lease_state.held and not state.held:
            self.publisher.delivered = None  # another holder may write meanwhile: deliver in full again
        self.lease_state, self.lease_reason = state, reason
        self.metrics.lease_held.set(1 if state.held else 0)
        self._next_lease = now + (self.lease_duration / 3 if state.held else 2.0)

    def _lease_reason(self, state: LeaseState) -> str:
        if state.held:
            return "LeaseAcquired"
        if isinstance(self.lease, PoolLease) and self.lease.forbidden:
            return "LeaseForbidden"
        if state.holder not in ("", "unknown"):
            return "LeaseHeldByAnother"
        return "LeaseError"

    # --- the desired state and the files ----------------------------------------------------

    def poll(self) -> None:
        layout = self.view.plan
        if self.view.poll():
            self.wake.set()
        if self.view.plan != layout:
            self.publisher.forget_rendered()

    def publish(self) -> None:
        self.publisher.publish()

    # --- metrics and status -------------------------------------------------------------------

    def refresh_metrics(self) -> None:
        """The metrics of the nodes and of the run, once a second: the per-node series as
        columns in one pass over the nodes (no mapping of samples built to be turned into them,
        no object per node), each probe round that ended since the last refresh observed once."""
        snap = self.monitor.snapshot()
        nodes = self.nodes
        if self._columns[0] is not nodes:  # the names and addresses, once per set of nodes
            names = tuple(n.name for n in nodes)
            self._columns = (nodes, names, tuple(n.ip for n in nodes), len(set(names)) == len(names))
        _, names, ips, unique = self._columns
        last, ends = self.monitor.rounds(names)
        seen_until, slowest, unknown = self._checks_seen_until, 0.0, TargetHealth()
        healthy, failures = bytearray(len(names)), array("q", [0]) * len(names)
        for i, name in enumerate(names):
            health = snap.get(name, unknown)
            healthy[i] = health.state is State.HEALTHY
            failures[i] = health.failures
            duration = last[i]
            if duration != duration:  # NaN: no round ended yet
                continue
            slowest = max(slowest, duration)
            if ends[i] > seen_until:  # ended after the rounds the last refresh observed
                self._checks_seen_until = max(self._checks_seen_until, ends[i])
                self.metrics.check_duration.observe(duration)
        if unique:
            self.metrics.set_node_columns(names, ips, bytes(healthy), failures, last)
        else:  # a name twice (a discovered node): the last one's series
            self.metrics.set_nodes({name: (ips[i], healthy[i] == 1, failures[i],
                                           None if math.isnan(last[i]) else last[i]) for i, name in enumerate(names)})
        self.metrics.last_check_duration.set(slowest)
        if self.monitor.last_check_time is not None:
            self.metrics.last_check_time.set(self._wall(self.monitor.last_check_time))
        self.metrics.set_counts(healthy=self.metrics.healthy_count(), total=len(self.nodes),
                                published=len(self.published.ips), fail_open=self.published.fail_open)
        self.metrics.ready.set(1 if self.ready else 0)
        self.metrics.set_conditions(tuple((c["type"], c["status"] == "True", c["reason"]) for c in self.conditions()))
        self.metrics.set_faults(self.faults.reasons)

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
            "nodes": {n.name: self._node_status(n, snap.get(n.name, TargetHealth())) for n in self.nodes},
            "zones": [{"zone": b.zone, "tenants": list(b.tenants), "file": b.hosts_file}
                      for b in (self.plan.blocks if self.plan else ())],
            "delivery": self.delivery.target,
            "lease": {"held": self.lease_state.held, "reason": self.lease_reason, "message": self.lease_state.message},
            "ready": self.ready,
            "conditions": self.conditions(),
            "notes": [*self.notes, *self.view.target_notes],
            "refused": [{"tenant": tenant, "file": file, "reason": reason}
                        for tenant, (file, reason) in sorted({**self.view.refused, **self.publisher.refused}.items())],
            "errors": dict(self.errors),
        }

    def _node_status(self, node: Node, health: TargetHealth) -> dict[str, Any]:
        doc: dict[str, Any] = {"ip": node.ip, "state": str(health.state), "failures": health.failures,
                               "error": health.last_error}
        if node.name in self.view.probe_errors:
            doc["probe_error"] = self.view.probe_errors[node.name]
        return doc

    def conditions(self) -> list[dict[str, str]]:
        """The conditions of /status (`gitdns.orchestrator.conditions`)."""
        return conditions(self)

    def alive(self, now: float | None = None) -> bool:
        return (now if now is not None else self.clock()) - self.last_tick < max(30.0, 10 * TICK)
