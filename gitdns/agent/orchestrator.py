"""`gitdns orchestrator`: seed 004's health orchestrator for one node pool (docs/health.md).

    desired repo ──poll──▶ NodePool + Tenants ──▶ ProbeSpecs ──▶ HealthMonitor
                                    │                                  │ on_change (wake)
                                    ▼                                  ▼
                              Layout (zone blocks) ──render──▶ hosts files + gitdns-<pool>.server
                                                                       │ only what changed
                                                                       ▼
                                              DirectoryDelivery (+SIGHUP) | ConfigMapDelivery

* One orchestrator per node pool at a time: a Kubernetes Lease (ConfigMap delivery in a
  cluster) or an ``flock`` on ``<state-dir>/orchestrator-<pool>.lock``.  Only the holder
  delivers; the monitor runs either way.
* The desired state is re-read every ``poll_interval`` (a directory, or a git remote through
  GitSource); a new tenant, node or setting takes effect then, without a restart.  A revision
  that does not parse, or that rejects the pool, keeps the last good one; a rejected tenant
  keeps its last good version.
* Fail open: when no node of the pool is published by its health (all unhealthy) the last
  published set stays (before any, every node), ``health_orchestrator_fail_open`` is 1 and
  /status says so.  An empty hosts file is never written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, cast

import jinja2

from gitdns.adapters.coredns_delivery import ConfigMapDelivery, Delivery, DirectoryDelivery
from gitdns.adapters.leases import FileLease, KubeLease, Lease, LeaseState, NoLease
from gitdns.adapters.probes import HealthMonitor
from gitdns.adapters.repo import read_tree
from gitdns.adapters.templates import load_template_sources
from gitdns.agent.health import secret_headers
from gitdns.agent.orchestrator_metrics import NodeSample, OrchestratorMetrics
from gitdns.core.corefile import CorefileSettings, Layout, ZoneBlock, layout, render_hosts, render_server, sort_ips
from gitdns.core.desired import Desired
from gitdns.core.health import HealthSettings, ProbeSpec, State, TargetHealth, node_probe, published
from gitdns.core.model import DesiredState, Node, NodePool
from gitdns.core.render import make_environment
from gitdns.errors import ConfigError, GitdnsError
from gitdns.reconcile.engine import from_files

log = logging.getLogger(__name__)

TICK = 0.5  # seconds between housekeeping passes (lease, delivery retries)
METRICS_EVERY = 1.0  # seconds between metric refreshes (10,000 nodes cost ~10 ms each)
DEBOUNCE = 0.05  # after a wake-up, let a burst of health changes land before publishing
RETRY_DELIVERY = 5.0  # seconds before a failed delivery is tried again
HOLD_CODES = frozenset({"ParseError", "InvalidDocument", "NoKind", "UnknownKind", "WrongApiVersion"})
Targets = dict[str, tuple[ProbeSpec, HealthSettings]]


@dataclass(frozen=True, slots=True)
class OrchestratorConfig:
    repo: str
    node_pool: str
    out: Path | None = None
    configmap: tuple[str, str] | None = None  # (namespace, name)
    listen: str = "0.0.0.0:8080"
    state_dir: Path = Path("/var/lib/gitdns")
    poll_interval: float = 30.0
    lease: str = "auto"  # auto | kubernetes | file | none
    lease_duration: float = 30.0
    discover_nodes: bool = False
    branch: str = "main"
    path: str = ""
    signal_pid_file: Path | None = None
    coredns_dir: str = "/etc/coredns/custom"
    pod_name: str = ""
    pod_namespace: str = "dns-failover"

    def __post_init__(self) -> None:
        if (self.out is None) == (self.configmap is None):
            raise ConfigError("orchestrator: give exactly one of --out DIR and --configmap NS/NAME")
        if self.lease not in ("auto", "kubernetes", "file", "none"):
            raise ConfigError(f"--lease {self.lease}: expected auto, kubernetes, file or none")
        if self.poll_interval <= 0:
            raise ConfigError("--poll-interval must be positive")


# --- the desired state ---------------------------------------------------------------------------


class DesiredSource(Protocol):
    def read(self) -> Desired | None: ...  # None: unchanged since the last read


class DirectorySource:
    """A plain directory, re-read every poll (only a change of its YAML files counts)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: dict[str, str] | None = None

    def read(self) -> Desired | None:
        if not self.root.is_dir():
            raise ConfigError(f"desired repository {self.root} is not a directory")
        files = read_tree(self.root)
        if files == self._files:
            return None
        self._files = files
        return from_files(self.root, files, None)


class GitDesiredSource:
    """A git remote through GitSource: ``ls-remote`` each poll, a fetch only for a new head."""

    def __init__(self, source: Any, root: Path) -> None:
        self.source = source
        self.root = root
        self._sha: str | None = None

    def read(self) -> Desired | None:
        sha = self.source.remote_head()
        if sha == self._sha:
            return None
        fetched = self.source.fetch(sha)
        self._sha = sha
        return from_files(self.root, fetched.files, None)


def hold_good(desired: Desired, previous: DesiredState | None, pool: str) -> tuple[DesiredState, list[str]]:
    """The state to act on and notes on what was held back (ARCHITECTURE.md §1: a failure
    never destroys what the last good revision built)."""
    notes = [p.format() for p in desired.problems if p.code in HOLD_CODES]
    if previous is not None and notes:
        return previous, ["held the last good desired state: " + n for n in notes]
    state = desired.state
    if ("NodePool", pool) in desired.rejected and previous is not None:
        kept = tuple(p for p in previous.node_pools if p.name == pool)
        state = replace(state, node_pools=(*state.node_pools, *kept))
        notes.append(f"NodePool {pool} does not validate: its last good version is kept")
    if previous is not None:
        held = tuple(t for t in previous.tenants if ("Tenant", t.name) in desired.rejected and t.node_pool == pool)
        if held:
            state = replace(state, tenants=(*state.tenants, *held))
            notes += [f"Tenant {t.name} does not validate: its last good version is kept" for t in held]
    return state, notes


def pool_targets(pool: NodePool, nodes: tuple[Node, ...],
                 headers: tuple[tuple[str, str], ...] = ()) -> tuple[Targets, list[str]]:
    """One probe per node (target id: the node name; the first of a duplicated name wins);
    ``headers`` come from the pool's ``healthCheck.headersSecret``."""
    settings = HealthSettings.for_node_pool(pool.health)
    targets: Targets = {}
    notes: list[str] = []
    for node in nodes:
        if node.name in targets:
            notes.append(f"node {node.name}: listed twice; the first is probed")
            continue
        try:
            targets[node.name] = (node_probe(node.name, node, pool.health, headers=headers), settings)
        except ValueError as exc:
            notes.append(str(exc))
    return targets, notes


def discover_nodes(api: Any, pool: NodePool) -> tuple[Node, ...]:
    """Kubernetes Nodes matching the pool's label selector, by InternalIP; their health
    endpoint from the pool's check (``http://<ip>:15021/healthz/ready`` by default)."""
    if not pool.discovery_selector:
        return ()
    found = []
    for item in api.list_node(label_selector=pool.discovery_selector, _request_timeout=10).items:
        addresses = (item.status.addresses or []) if item.status is not None else []
        ip = next((a.address for a in addresses if a.type == "InternalIP"), None)
        if ip is None:
            continue
        host = f"[{ip}]" if ":" in ip else ip
        check = pool.health
        found.append(Node(item.metadata.name, ip, f"{check.protocol.lower()}://{host}:{check.port}{check.path}"))
    return tuple(sorted(found, key=lambda n: n.name))


# --- one writer per node pool ------------------------------------------------------------------


# --- the orchestrator ----------------------------------------------------------------------------


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


# --- wiring (the CLI calls these) -----------------------------------------------------------------


def is_url(repo: str) -> bool:
    return "://" in repo or (":" in repo and "@" in repo.split(":", 1)[0])


def build(config: OrchestratorConfig, metrics: OrchestratorMetrics | None = None) -> Orchestrator:
    """An Orchestrator from its configuration; the kubernetes client is imported only for
    ConfigMap delivery, a Kubernetes Lease or node discovery."""
    source: DesiredSource
    if is_url(config.repo):
        from gitdns.adapters.gitsource import GitSource

        git = GitSource(config.repo, branch=config.branch, path=config.path, workdir=config.state_dir / "git")
        source = GitDesiredSource(git, config.state_dir)
    else:
        source = DirectorySource(Path(config.repo) / config.path if config.path else Path(config.repo))
    owner = config.node_pool
    delivery: Delivery
    if config.out is not None:
        delivery = DirectoryDelivery(config.out, owner, pid_file=config.signal_pid_file)
    else:
        assert config.configmap is not None
        delivery = ConfigMapDelivery(config.configmap[0], config.configmap[1], owner)
    discovery = None
    if config.discover_nodes:
        from gitdns.adapters.coredns_delivery import load_core_api

        api = load_core_api()
        discovery = lambda pool: discover_nodes(api, pool)  # noqa: E731
    return Orchestrator(config.node_pool, source, delivery, metrics=metrics, lease=make_lease(config),
                        headers=secret_headers(str(config.state_dir)),
                        settings=CorefileSettings(custom_dir=config.coredns_dir), discovery=discovery,
                        poll_interval=config.poll_interval, lease_duration=config.lease_duration)


def make_lease(config: OrchestratorConfig) -> Lease:
    kind = config.lease
    if kind == "auto":
        kind = "kubernetes" if config.configmap is not None and os.environ.get("KUBERNETES_SERVICE_HOST") else "file"
    if kind == "none":
        return NoLease()
    if kind == "file":
        return FileLease(config.state_dir / f"orchestrator-{config.node_pool}.lock")
    identity = config.pod_name or f"{socket.gethostname()}-{os.getpid()}"
    return KubeLease(config.pod_namespace, f"orchestrator/{config.node_pool}", duration=config.lease_duration,
                     clock=time.time, identity=identity)


def serve(orchestrator: Orchestrator, listen: str) -> int:
    """Run until SIGTERM/SIGINT, with the HTTP endpoint on ``listen`` ('' for none)."""
    import signal

    from gitdns.agent.httpserver import HttpServer
    from gitdns.agent.metrics import Metrics

    http = None
    if listen:
        host, _, port = listen.rpartition(":")
        # HttpServer only renders metrics (no webhook here): the orchestrator's registry serves.
        http = HttpServer(host or "0.0.0.0", int(port), metrics=cast(Metrics, orchestrator.metrics),
                          status=orchestrator.status, ready=lambda: orchestrator.ready, live=orchestrator.alive)
        http.start()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("stopping: signal=%d", signum)
        orchestrator.stopped.set()
        orchestrator.wake.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        orchestrator.run()
    finally:
        if http is not None:
            http.stop()
    return 0


def config_from_flags(flags: Mapping[str, Any]) -> OrchestratorConfig:
    """Flags (argparse names) -> OrchestratorConfig; POD_NAME / POD_NAMESPACE from the environment."""
    from gitdns.agent.config import parse_duration

    configmap = None
    if flags.get("configmap"):
        namespace, sep, name = str(flags["configmap"]).partition("/")
        if not sep or not namespace or not name:
            raise ConfigError(f"--configmap {flags['configmap']}: expected NAMESPACE/NAME")
        configmap = (namespace, name)
    values: dict[str, Any] = {
        "repo": flags["repo"], "node_pool": flags["node_pool"], "configmap": configmap,
        "out": Path(flags["out"]) if flags.get("out") else None,
        "signal_pid_file": Path(flags["signal_pid_file"]) if flags.get("signal_pid_file") else None,
        "discover_nodes": bool(flags.get("discover_nodes")),
        "pod_name": os.environ.get("POD_NAME", ""),
        "pod_namespace": os.environ.get("POD_NAMESPACE", "dns-failover"),
    }
    for key in ("listen", "lease", "branch", "path", "coredns_dir"):
        if flags.get(key) is not None:
            values[key] = flags[key]
    if flags.get("state_dir"):
        values["state_dir"] = Path(flags["state_dir"])
    for key in ("poll_interval", "lease_duration"):
        if flags.get(key) is not None:
            values[key] = parse_duration(flags[key])
    return OrchestratorConfig(**values)


def setup_logging(level: str = "info") -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(Exception):
        logging.getLogger("kubernetes").setLevel(logging.WARNING)
