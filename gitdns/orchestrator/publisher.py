"""Health to files to delivery, for an orchestrator: the IPs of its pool to publish now (fail
open: when health publishes none, every node of the pool), the CoreDNS files rendered from them
(a zone's hosts file re-rendered only when its published set changed) and checked with
CoreDNS's parse rules (a failing zone block is left out, a failing snippet not delivered),
delivered only when they changed, and retried after a failed delivery.

``attempted`` turns true at the first delivery decision (files delivered, refused, failed, or
a pool with no node: nothing to deliver) and stays so; ``landed`` when a delivery succeeded.
Nodes the pool view could not probe (``probe_errors``) are published: a configuration error is
no reason to withdraw a node."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import jinja2

from gitdns.adapters.coredns_delivery import Delivery
from gitdns.adapters.probes import HealthMonitor
from gitdns.core.corefile import (
    HOSTS_TEMPLATE,
    CorefileSettings,
    Layout,
    ZoneBlock,
    check_hosts,
    check_server,
    ip_order,
    render_server,
)
from gitdns.core.corefile.check import shown
from gitdns.core.health import HealthSettings, State, TargetHealth, published
from gitdns.core.model import Node
from gitdns.errors import GitdnsError
from gitdns.orchestrator.faults import Faults
from gitdns.orchestrator.metrics import OrchestratorMetrics
from gitdns.orchestrator.pool import PoolView

log = logging.getLogger(__name__)

RETRY_DELIVERY = 5.0  # seconds before a failed delivery is tried again



LOGGED_IPS = 20  # a log line names this many addresses, then how many more (a pool of 10,000: not 150 KB a line)


def ips_shown(ips: Sequence[str]) -> str:
    """The published addresses for a log line: the first `LOGGED_IPS`, then ``(+N more)``; ``-`` for none."""
    if not ips:
        return "-"
    more = len(ips) - LOGGED_IPS
    return ",".join(ips[:LOGGED_IPS]) + (f" (+{more} more, {len(ips)} in all)" if more > 0 else "")


def _ip_order(node: Node) -> int:
    """`sort_ips`'s order of ``node``'s address (`ip_order`).  Raises ValueError for a non-IP, as
    `sort_ips`."""
    return ip_order(ipaddress.ip_address(node.ip))

class RenderRefused(Exception):
    """A rendered snippet that must not be delivered."""

    def __init__(self, file: str, message: str) -> None:
        super().__init__(message)
        self.file = file


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
        self.attempted = False  # the first delivery decision was made
        self.landed = False  # a delivery succeeded
        self.retry_at = 0.0
        self._started = clock()
        self._first_round = False  # one interval and a timeout passed since start
        self._hosts_cache: dict[tuple[ZoneBlock, tuple[str, ...], int], tuple[str, list[str]]] = {}
        self._block_checks: dict[ZoneBlock, list[str]] = {}
        self._server_cache: tuple[tuple[ZoneBlock, ...], str, list[str]] | None = None
        self._order: tuple[tuple[Node, ...], tuple[str, ...], tuple[str, ...]] | None = None  # nodes, names, ips
        self.refused: dict[str, tuple[str, str]] = {}  # tenant -> (rendered file, problem): left out

    def forget_rendered(self) -> None:
        """The layout changed: drop the hosts files rendered and the blocks checked for the old one."""
        self._hosts_cache.clear()
        self._block_checks.clear()
        self._server_cache = None

    def _ordered(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The pool's node names and addresses, each address as `sort_ips` writes it, in
        `sort_ips` order (IPv4 before IPv6, numerically): parsed and sorted once per set of
        nodes, as parsing 1,000 addresses costs ~20 ms and a health change needs none of it.
        Two columns, not a pair per node (10,000 nodes: 0.6 MiB less).  Raises ValueError for
        a non-IP, as `sort_ips`."""
        nodes = self.view.nodes
        if self._order is None or self._order[0] != nodes:
            # one int per node while sorting, each address parsed and dropped in turn: 10,000 parsed
            # addresses and pairs alive at once left ~1.6 MiB of the allocator's pools behind
            order = sorted(nodes, key=_ip_order)
            # the node's own string where it is already the canonical text (10,000 nodes: no second copy)
            self._order = (nodes, tuple(node.name for node in order),
                           tuple(node.ip if node.ip == (text := str(ipaddress.ip_address(node.ip))) else text
                                 for node in order))
        return self._order[1], self._order[2]

    def compute(self) -> Published:
        """The IPs to publish now: those health publishes; when it publishes none, every node
        of the pool (fail open, as Route53 answers when every record is unhealthy).  A pure
        function of the nodes' states: the order the failures were seen in never matters, and
        as nodes recover they alone are published again while the others stay down.  Each
        list in `sort_ips` order, without duplicates."""
        settings = self.view.health or HealthSettings()
        snap = self.monitor.snapshot()
        names, ips = self._ordered()
        unknown = TargetHealth()
        states = [snap.get(name, unknown) for name in names]
        unprobed = self.view.probe_errors
        chosen = [ip for name, ip, health in zip(names, ips, states, strict=True)
                  if name in unprobed or published(health, settings)]
        healthy = list(dict.fromkeys(ip for ip, health in zip(ips, states, strict=True)
                                     if health.state is State.HEALTHY))
        if chosen:
            return Published(list(dict.fromkeys(chosen)), False, healthy)
        every = list(dict.fromkeys(ips))
        return Published(every, bool(every), healthy)

    def first_round_done(self) -> bool:
        """Every node checked once, or one interval plus a timeout since start."""
        if self._first_round:
            return True
        snap = self.monitor.snapshot()
        probed = [n for n in self.view.nodes if n.name not in self.view.probe_errors]
        if all(snap.get(n.name, TargetHealth()).checks > 0 for n in probed):
            return True
        settings = self.view.health or HealthSettings()
        # past one interval and a timeout since start it stays done, whatever the nodes
        self._first_round = self.clock() - self._started > settings.interval + settings.timeout
        return self._first_round

    def _block_problems(self, block: ZoneBlock) -> list[str]:
        """The block's server block rendered alone and checked (once per layout)."""
        if block not in self._block_checks:
            alone = Layout(self.view.pool_name, (block,))
            self._block_checks[block] = check_server(render_server(self.env, alone, self.settings), (block,),
                                                     self.settings)
        return self._block_checks[block]

    def _hosts(self, block: ZoneBlock, ips: list[str], total: int) -> tuple[str, list[str]]:
        """The block's hosts file for ``ips`` (in `sort_ips` order, as `compute` gives them) and
        its problems (`check_hosts`): rendered as `gitdns.core.corefile.render_hosts` renders it,
        without sorting the addresses again (~20 ms for 1,000 nodes, on the failover path)."""
        key = (block, tuple(ips), total)
        if key not in self._hosts_cache:  # re-rendered (and checked) only when its published set changed
            if not ips:
                raise ValueError(f"render: refusing an empty hosts file for zone {block.zone} "
                                 f"(node pool {self.view.pool_name})")
            text = self.env.get_template(HOSTS_TEMPLATE).render(
                pool=self.view.pool_name, zone=block.zone, tenants=list(block.tenants), total=total, ips=ips,
                domains=list(block.domains), names=" ".join(block.domains))
            self._hosts_cache[key] = (text, check_hosts(text, block, ips, ordered=True))
        return self._hosts_cache[key]

    def render(self, ips: list[str]) -> dict[str, str]:
        """The pool's files, each checked with CoreDNS's parse rules (`check_server`,
        `check_hosts`): a zone block whose server block or hosts file fails is left out (its
        tenants in ``refused``), the rest delivered; a snippet failing as a whole, or every
        block failing, raises `RenderRefused` (nothing is delivered, the last delivery stays)."""
        plan = self.view.plan
        assert plan is not None
        self.refused = {}
        if not plan.blocks or not ips:
            return {}
        total = len(self.view.nodes)
        files: dict[str, str] = {}
        kept: list[ZoneBlock] = []
        for block in plan.blocks:
            wrong, file = self._block_problems(block), plan.server_file
            if not wrong:
                text, wrong = self._hosts(block, ips, total)
                file = block.hosts_file
            if wrong:
                self.refused.update({tenant: (file, wrong[0]) for tenant in block.tenants})
                continue
            kept.append(block)
            files[block.hosts_file] = text
        if len(self._hosts_cache) > len(plan.blocks):  # the latest file of each block kept, no older
            self._hosts_cache = {k: v for k, v in self._hosts_cache.items() if k[1] == tuple(ips)}
        if not kept:
            raise RenderRefused(plan.server_file, "every zone block fails its check: " + self._refusals())
        if self._server_cache is None or self._server_cache[0] != tuple(kept):  # once per set of blocks
            server = render_server(self.env, replace(plan, blocks=tuple(kept)), self.settings)
            self._server_cache = (tuple(kept), server, check_server(server, kept, self.settings))
        server, wrong = self._server_cache[1], self._server_cache[2]
        if wrong:
            raise RenderRefused(plan.server_file, "; ".join(wrong[:3]))
        files[plan.server_file] = server
        return files

    def _refusals(self) -> str:
        return "; ".join(f"tenant {shown(t)}: {f}: {why}" for t, (f, why) in sorted(self.refused.items()))

    def _checked(self, ips: list[str]) -> dict[str, str] | None:
        """`render`, its refusals reported (fault "render", metric, log); None: deliver nothing."""
        try:
            files = self.render(ips)
        except (RenderRefused, ValueError) as exc:
            file = exc.file if isinstance(exc, RenderRefused) else "-"
            message = f"nothing delivered, the last delivery stays: {file}: {exc}"
            if self.faults.errors.get("render") != message:
                self.metrics.render_refusals.labels("snippet").inc()
            self.faults.fail("render", "RenderRefused", message)
            return None
        if self.refused:
            message = "left out: " + self._refusals()
            if self.faults.errors.get("render") != message:
                self.metrics.render_refusals.labels("tenant").inc(len(self.refused))
            self.faults.fail("render", "TenantRefused", message)
        else:
            self.faults.clear("render")
        plan = self.view.plan
        if plan is not None:
            served = sum(len(b.tenants) for b in plan.blocks) - len(self.refused)
            self.metrics.set_tenants(served, len({s.tenant for s in plan.skipped}),
                                     len(plan.refused) + len(self.refused))
        return files

    def publish(self) -> None:
        if self.view.plan is None:
            return
        if not self.view.nodes:
            self.attempted = True  # nothing to deliver: the pool has no node (yet)
            return
        if not self.first_round_done():
            return
        self.attempted = True
        try:
            current = self.compute()
        except ValueError as exc:  # an address no check caught: deliver nothing, keep running
            self.faults.fail("render", "InvalidAddress", f"nothing delivered, the last delivery stays: {exc}")
            return
        if current.fail_open and not self.published.fail_open:
            log.warning("fail open: pool=%s no node is healthy; publishing every node: %s", self.view.pool_name,
                        ips_shown(current.ips))
        elif self.published.fail_open and not current.fail_open:
            log.warning("fail open ends: pool=%s publishing the healthy nodes: %s", self.view.pool_name,
                        ips_shown(current.ips))
        self.published = current
        self.metrics.published_nodes.set(len(current.ips))
        self.metrics.fail_open.set(1 if current.fail_open else 0)
        files = self._checked(current.ips)
        if files is None or files == self.delivered:
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
            log.info("published: pool=%s ips=%s fail_open=%s", self.view.pool_name, ips_shown(current.ips),
                     current.fail_open)
        self.landed = True
