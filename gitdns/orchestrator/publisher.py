"""Health to files to delivery, for an orchestrator: the IPs of its pool to publish now (fail
open: when health publishes none, the last set stays), the CoreDNS files rendered from them
(a zone's hosts file re-rendered only when its published set changed), delivered only when
they changed, and retried after a failed delivery."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import jinja2

from gitdns.adapters.coredns_delivery import Delivery
from gitdns.adapters.probes import HealthMonitor
from gitdns.core.corefile import CorefileSettings, ZoneBlock, render_hosts, render_server, sort_ips
from gitdns.core.health import HealthSettings, State, TargetHealth, published
from gitdns.errors import GitdnsError
from gitdns.orchestrator.faults import Faults
from gitdns.orchestrator.metrics import OrchestratorMetrics
from gitdns.orchestrator.pool import PoolView

log = logging.getLogger(__name__)

RETRY_DELIVERY = 5.0  # seconds before a failed delivery is tried again


@dataclass(slots=True)
class Published:
    ips: list[str] = field(default_factory=list)
    fail_open: bool = False
    healthy: list[str] = field(default_factory=list)


class Publisher:
    """Publishes the pool ``view`` describes through ``delivery`` (see the module docstring)."""

    def __init__(self, view: PoolView, monitor: HealthMonitor, delivery: Delivery, env: jinja2.Environment,
                 settings: CorefileSettings, metrics: OrchestratorMetrics, faults: Faults,
                 clock: Callable[[], float]) -> None:
        self.view = view
        self.monitor = monitor
        self.delivery = delivery
        self.env = env
        self.settings = settings
        self.metrics = metrics
        self.faults = faults
        self.clock = clock
        self.published = Published()
        self.delivered: dict[str, str] | None = None
        self.ready = False
        self.retry_at = 0.0
        self._started = clock()
        self._hosts_cache: dict[tuple[ZoneBlock, tuple[str, ...], int], str] = {}

    def forget_rendered(self) -> None:
        """The layout changed: drop the hosts files rendered for the old one."""
        self._hosts_cache.clear()

    def compute(self) -> Published:
        """The IPs to publish now.  Fail open: none published by health -> the last set."""
        settings = self.view.health or HealthSettings()
        snap = self.monitor.snapshot()
        health = {n.name: snap.get(n.name, TargetHealth()) for n in self.view.nodes}
        chosen = [n.ip for n in self.view.nodes if published(health[n.name], settings)]
        healthy = [n.ip for n in self.view.nodes if health[n.name].state is State.HEALTHY]
        if chosen:
            return Published(sort_ips(chosen), False, sort_ips(healthy))
        fallback = self.published.ips or [n.ip for n in self.view.nodes]
        return Published(sort_ips(fallback), bool(self.view.nodes), sort_ips(healthy))

    def first_round_done(self) -> bool:
        """Every node checked once, or one interval plus a timeout since start."""
        snap = self.monitor.snapshot()
        if all(snap.get(n.name, TargetHealth()).checks > 0 for n in self.view.nodes):
            return True
        settings = self.view.health or HealthSettings()
        return self.clock() - self._started > settings.interval + settings.timeout

    def render(self, ips: list[str]) -> dict[str, str]:
        assert self.view.plan is not None
        if not self.view.plan.blocks or not ips:
            return {}
        total = len(self.view.nodes)
        files: dict[str, str] = {}
        for block in self.view.plan.blocks:
            key = (block, tuple(ips), total)
            if key not in self._hosts_cache:  # re-rendered only when its published set changed
                self._hosts_cache[key] = render_hosts(self.env, self.view.pool_name, block, ips, total)
            files[block.hosts_file] = self._hosts_cache[key]
        files[self.view.plan.server_file] = render_server(self.env, self.view.plan, self.settings)
        if len(self._hosts_cache) > 4 * len(self.view.plan.blocks):
            self._hosts_cache = {k: v for k, v in self._hosts_cache.items() if k[1] == tuple(ips)}
        return files

    def publish(self) -> None:
        if self.view.plan is None or not self.view.nodes or not self.first_round_done():
            return
        current = self.compute()
        if current.fail_open and not self.published.fail_open:
            log.warning("fail open: pool=%s no node is healthy; keeping %s", self.view.pool_name,
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
            self.faults.fail("delivery", exc.reason, f"delivery to {self.delivery.target} failed: {exc}")
            self.metrics.delivery_errors.labels(exc.reason).inc()
            self.retry_at = self.clock() + RETRY_DELIVERY
            return
        except OSError as exc:
            self.faults.fail("delivery", "WriteFailed", f"delivery to {self.delivery.target} failed: {exc}")
            self.metrics.delivery_errors.labels("WriteFailed").inc()
            self.retry_at = self.clock() + RETRY_DELIVERY
            return
        self.faults.clear("delivery")
        self.delivered = files
        if result.changed:
            self.metrics.dns_updates.inc()
            log.info("published: pool=%s ips=%s fail_open=%s", self.view.pool_name, ",".join(current.ips),
                     current.fail_open)
        self.ready = True
        self.metrics.ready.set(1)
