"""Wiring for `gitdns orchestrator`: the one place that picks its concrete adapters (desired
source, delivery, lease, node discovery) and runs it with its HTTP endpoint."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from gitdns.adapters.coredns_delivery import ConfigMapDelivery, Delivery, DirectoryDelivery
from gitdns.adapters.leases import FileLease, KubeLease, Lease, NoLease
from gitdns.core.corefile import CorefileSettings
from gitdns.orchestrator.config import OrchestratorConfig, is_url
from gitdns.orchestrator.metrics import OrchestratorMetrics
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DesiredSource, DirectorySource, GitDesiredSource, discover_nodes

log = logging.getLogger(__name__)

HeaderSource = Callable[[str], tuple[tuple[str, str], ...]]


def build(config: OrchestratorConfig, metrics: OrchestratorMetrics | None = None,
          headers: HeaderSource | None = None) -> Orchestrator:
    """An Orchestrator from its configuration; the kubernetes client is imported only for
    ConfigMap delivery, a Kubernetes Lease or node discovery.  ``headers`` gives the probe
    headers of a pool's ``healthCheck.headersSecret`` (None: probes send none)."""
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
                        headers=headers,
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

    from gitdns.adapters.httpserver import HttpServer, MetricsPage

    http = None
    if listen:
        host, _, port = listen.rpartition(":")
        # HttpServer only renders metrics (no webhook here): the orchestrator's registry serves.
        http = HttpServer(host or "0.0.0.0", int(port), metrics=cast(MetricsPage, orchestrator.metrics),
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


def setup_logging(level: str = "info") -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(Exception):
        logging.getLogger("kubernetes").setLevel(logging.WARNING)
