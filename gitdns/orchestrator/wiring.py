"""Wiring for `gitdns orchestrator`: the one place that picks its concrete adapters (desired
source and its git transport, delivery, lease, probe headers, node discovery) and runs it
with its HTTP endpoints."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from gitdns.adapters import logs
from gitdns.adapters.coredns_delivery import ConfigMapDelivery, Delivery, DirectoryDelivery
from gitdns.adapters.http.server import HttpServer, MetricsPage
from gitdns.adapters.leases import FileLease, Lease, NoLease
from gitdns.adapters.probes import HealthMonitor
from gitdns.core.corefile import CorefileSettings
from gitdns.errors import ConfigError
from gitdns.orchestrator.config import OrchestratorConfig, is_url, setting
from gitdns.orchestrator.kubeaccess import CheckedConfigMap, PoolLease, service_account
from gitdns.orchestrator.metrics import OrchestratorMetrics
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DesiredSource, DirectorySource, GitDesiredSource, discover_nodes
from gitdns.providers.probeheaders import Headers, ProbeHeaders

log = logging.getLogger(__name__)

HeaderSource = Callable[[str], Headers]
# build the servers: make(host, port, route groups, name) for each address (the agent's rule,
# `gitdns.adapters.listen.endpoints`, handed in by the command)
Make = Callable[[str, int, frozenset[str], str], HttpServer]
Endpoints = Callable[[Make], list[HttpServer]]


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


# glibc's mallopt parameters (<malloc.h>), each set unless the operator's environment sets it
_MALLOPT = (
    ("MALLOC_ARENA_MAX", -8, 1),  # M_ARENA_MAX: one heap for every thread
    ("MALLOC_MMAP_THRESHOLD_", -3, 128 * 1024),  # M_MMAP_THRESHOLD: 128 KiB and up mapped on their own
    ("MALLOC_TRIM_THRESHOLD_", -1, 128 * 1024),  # M_TRIM_THRESHOLD: free space over 128 KiB at the top returned
)


def tune_malloc() -> list[str]:
    """Tune the C library's allocator for a long-running process holding 10^4 nodes, and say
    which settings it took (none elsewhere than Linux, or where the C library has no
    ``mallopt`` or ignores it, as musl does).  Each is left alone when its environment variable
    is set (the operator's choice wins):

    - one heap ("arena") for every thread (``MALLOC_ARENA_MAX``): glibc gives each thread that
      allocates its own, and what one frees is not reused by the others; the prober's event
      loop, the main loop and the HTTP servers each kept a few MiB apart.  Python threads
      allocate under the GIL, so one heap adds no lock contention worth counting;
    - blocks of 128 KiB and more mapped on their own (``MALLOC_MMAP_THRESHOLD_``): a publish
      and a metrics refresh of 10,000 nodes make and drop texts, lists and tables of a few
      hundred KiB each; mapped, each goes back to the system when freed.  glibc's own threshold
      starts there but rises to the largest such block freed, after which they stay in the heap
      as holes (10,000 nodes: about 1.2 MiB more resident at the peak);
    - free space at the heap's top given back past 128 KiB (``MALLOC_TRIM_THRESHOLD_``):
      glibc's dynamic rule raises it along with the mapping threshold."""
    if sys.platform != "linux":
        return []
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return []
    return [name for name, param, value in _MALLOPT
            if name not in os.environ and mallopt(ctypes.c_int(param), ctypes.c_int(value))]


def build(config: OrchestratorConfig, metrics: OrchestratorMetrics | None = None,
          headers: HeaderSource | None = None, monitor: HealthMonitor | None = None) -> Orchestrator:
    """An Orchestrator from its configuration; the kubernetes client is imported only for
    ConfigMap delivery, a Kubernetes Lease, node discovery or a headersSecret in a cluster.
    The threads started from here on share one C heap, tuned by `tune_malloc`.
    ``headers`` gives the probe headers of a pool's ``healthCheck.headersSecret`` (default:
    `ProbeHeaders` in the orchestrator's own namespace, for the Secrets ``--headers-secrets``
    lists); ``monitor``: the prober (tests; else one whose connection gate takes
    ``--probe-allow-ranges``)."""
    tune_malloc()
    source: DesiredSource
    if is_url(config.repo):
        from gitdns.adapters.git.source import GitSource

        git = GitSource(config.repo, branch=config.branch, path=config.path, workdir=config.state_dir / "git",
                        auth=config.auth, timeout=config.git_timeout)
        source = GitDesiredSource(git, config.state_dir, config.probe_reach.ranges)
    else:
        source = DirectorySource(Path(config.repo) / config.path if config.path else Path(config.repo),
                                 config.probe_reach.ranges)
    owner = config.node_pool
    delivery: Delivery
    if config.out is not None:
        delivery = DirectoryDelivery(config.out, owner, pid_file=config.signal_pid_file)
    else:
        assert config.configmap is not None
        delivery = CheckedConfigMap(ConfigMapDelivery(config.configmap[0], config.configmap[1], owner),
                                    account=lambda: service_account(config.pod_namespace))
    discovery = None
    if config.discover_nodes:
        from gitdns.adapters.coredns_delivery import load_core_api

        api = load_core_api()
        discovery = lambda pool: discover_nodes(api, pool)  # noqa: E731
    if headers is None:
        headers = ProbeHeaders(config.headers_secrets, config.pod_namespace, config.state_dir, in_cluster=in_cluster(),
                               account=lambda: service_account(config.pod_namespace),
                               setting=setting("headers_secrets")).read
    return Orchestrator(config.node_pool, source, delivery, metrics=metrics, lease=make_lease(config),
                        headers=headers, monitor=monitor, reach=config.probe_reach,
                        settings=CorefileSettings(custom_dir=config.coredns_dir), discovery=discovery,
                        poll_interval=config.poll_interval, lease_duration=config.lease_duration)


def make_lease(config: OrchestratorConfig) -> Lease:
    kind = config.lease
    if kind == "auto":
        kind = "kubernetes" if config.configmap is not None and in_cluster() else "file"
    if kind == "none":
        return NoLease()
    if kind == "file":
        return FileLease(config.state_dir / f"orchestrator-{config.node_pool}.lock")
    return PoolLease(config.pod_namespace, config.node_pool, duration=config.lease_duration, clock=time.time,
                     identity=config.identity)


class Endpoint(HttpServer):
    """`gitdns.adapters.http.server.HttpServer` whose /readyz body says why it answers as it does
    (one line: the Ready condition's reason and message)."""

    def __init__(self, *args: Any, why: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.why = why

    def handle_get(self, path: str) -> Any:
        reply = super().handle_get(path)
        if path == "/readyz" and self.serves(path):
            return dataclasses.replace(reply, body=(self.why() + "\n").encode("utf-8"))
        return reply


def servers(orchestrator: Orchestrator, endpoints: Endpoints) -> list[HttpServer]:
    """The orchestrator's HTTP servers, not started: ``endpoints`` decides the addresses and
    route groups (--listen: /healthz /readyz; --admin-listen: /status /metrics and both)."""

    def make(host: str, port: int, routes: frozenset[str], name: str) -> HttpServer:
        # no webhook here: without its route group every webhook path is 404
        return Endpoint(host, port, metrics=cast(MetricsPage, orchestrator.metrics), status=orchestrator.status,
                        ready=lambda: orchestrator.ready, live=orchestrator.alive, routes=routes - {"webhook"},
                        name="probes" if name == "webhook" else name, why=orchestrator.readiness)

    return endpoints(make)


def serve(orchestrator: Orchestrator, endpoints: Endpoints) -> int:
    """Run until SIGTERM/SIGINT with the HTTP servers of ``endpoints`` (none: no HTTP)."""
    import signal

    from gitdns.adapters.listen import start_all

    started: list[HttpServer] = start_all(servers(orchestrator, endpoints))  # ConfigError when one cannot listen

    def on_signal(signum: int, _frame: object) -> None:
        log.info("stopping: signal=%d", signum)
        orchestrator.stopped.set()
        orchestrator.wake.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        orchestrator.run()
    finally:
        for server in started:
            server.stop()
    return 0


def setup_logging(level: str = "info", fmt: str = "text") -> None:
    """The root logger's handler: ``fmt`` json or text (`gitdns.adapters.logs`, the agent's
    formats), at ``level``."""
    if level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"--log-level (GITDNS_LOG_LEVEL) {level[:20]!r}: use debug, info, warning or error")
    logs.install(logs.handler(logs.check_format(fmt, "--log-format (GITDNS_LOG_FORMAT)")), level, keep=True)
    with contextlib.suppress(Exception):
        logging.getLogger("kubernetes").setLevel(logging.WARNING)
