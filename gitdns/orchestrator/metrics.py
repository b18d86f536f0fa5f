"""The orchestrator's Prometheus metrics, in a registry of its own.

The names of the OpenOva "DNS Failover Service" specification, kept so its dashboards and alerts
work, plus what its alerts needed:

=============================================== ======= =========================================
metric                                          type    meaning
=============================================== ======= =========================================
health_orchestrator_healthy_nodes               gauge   nodes of the pool in state healthy
health_orchestrator_total_nodes                 gauge   nodes of the pool (static + discovered)
health_orchestrator_published_nodes             gauge   IPs in the hosts files now (fail open
                                                        publishes every node when none is healthy)
health_orchestrator_fail_open                   gauge   1 while every node of the pool is down
                                                        (none published by its health) and every
                                                        node is published: the all-nodes-down
                                                        signal (alerts FailOpen, AllNodesDown)
health_orchestrator_check_duration_seconds      hist.   one probe round of one node
health_orchestrator_last_check_duration_seconds gauge   the slowest node's latest round (a plain
                                                        series for the spec's HealthCheckSlow)
health_orchestrator_last_check_timestamp_seconds gauge  unix time of the latest probe of any node
health_orchestrator_dns_updates_total           counter deliveries that changed a file or key
health_orchestrator_delivery_errors_total       counter failed deliveries by reason
  {reason}
health_orchestrator_desired_errors_total        counter failed reads of the desired state by reason
  {reason}
health_orchestrator_node_status                 gauge   1 healthy, 0 unhealthy or not yet known
  {node_name,node_ip}
health_orchestrator_probe_consecutive_failures  gauge   the node's current failure run
  {node_name}
health_orchestrator_probe_last_duration_seconds gauge   the node's latest probe round
  {node_name}
health_orchestrator_tenants{state}              gauge   tenants served / skipped / refused (fenced
                                                        off, or their rendered files failed the
                                                        CoreDNS parse check)
health_orchestrator_render_refusals_total       counter rendered files refused before delivery:
  {reason}                                              tenant (its block left out) or snippet
                                                        (nothing delivered, the last stays)
health_orchestrator_lease_held                  gauge   1 while this process holds the pool lease
health_orchestrator_ready                       gauge   1 while /readyz answers 200 (a desired
                                                        revision loaded and the first delivery
                                                        tried, or standing by for the lease)
health_orchestrator_probe_config_errors         gauge   nodes not probed for a configuration
                                                        error (headersSecret unreadable)
health_orchestrator_condition{type,reason}      gauge   each condition of /status: 1 True, 0
                                                        False (one series per type)
health_orchestrator_faults{step,reason}         gauge   1 for each step whose last try failed
                                                        (desired, discovery, probes, render,
                                                        delivery), with its reason; none when
                                                        every step went well
=============================================== ======= =========================================

Every fault the orchestrator can meet has a kind in `FAULT_KINDS` (docs/health.md, "Faults and
alerts"), shown by the series named there; the shipped PrometheusRule has an alert naming each
(tests/orchestrator/test_fault_alerts.py drives each kind and evaluates the rule on the scrape).
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

__all__ = ["CONTENT_TYPE", "FAULT_KINDS", "NodeSample", "OrchestratorMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CHECK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
NodeSample = tuple[str, bool, int, float | None]  # (ip, healthy, consecutive failures, last round)
# every fault kind the orchestrator meets -> what shows it in /metrics (docs/health.md, "Faults and alerts")
FAULT_KINDS: Mapping[str, str] = {
    "desired": 'health_orchestrator_desired_errors_total{reason}, health_orchestrator_faults{step="desired"}',
    "discovery": 'health_orchestrator_faults{step="discovery"}',
    "probe-config": 'health_orchestrator_probe_config_errors, health_orchestrator_condition{type="ProbesConfigured"}',
    "probe": "health_orchestrator_probe_consecutive_failures{node_name}, health_orchestrator_node_status",
    "all-nodes-down": "health_orchestrator_healthy_nodes, health_orchestrator_fail_open",
    "render": 'health_orchestrator_tenants{state="refused"}, health_orchestrator_render_refusals_total{reason}, '
              'health_orchestrator_faults{step="render"}',
    "delivery": 'health_orchestrator_delivery_errors_total{reason}, health_orchestrator_faults{step="delivery"}',
    "lease-lost": "health_orchestrator_lease_held",
}


class OrchestratorMetrics:
    content_type = CONTENT_TYPE

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self._lock = threading.Lock()
        self._nodes: dict[str, str] = {}  # node name -> ip labelled
        p = "health_orchestrator_"
        self.healthy_nodes = Gauge(p + "healthy_nodes", "Number of currently healthy nodes.", registry=r)
        self.total_nodes = Gauge(p + "total_nodes", "Number of nodes in the node pool.", registry=r)
        self.published_nodes = Gauge(p + "published_nodes", "Node IPs in the published hosts files.", registry=r)
        self.fail_open = Gauge(p + "fail_open", "1 while every node of the pool is down and every node is "
                               "published (fail open).", registry=r)
        self.check_duration = Histogram(p + "check_duration_seconds", "Duration of one node's health check round.",
                                        buckets=CHECK_BUCKETS, registry=r)
        self.last_check_duration = Gauge(p + "last_check_duration_seconds",
                                         "Duration of the slowest node's latest health check round.", registry=r)
        self.last_check_time = Gauge(p + "last_check_timestamp_seconds", "Unix time of the latest health check.",
                                     registry=r)
        self.dns_updates = Counter(p + "dns_updates", "Deliveries that changed a hosts file or the Corefile snippet.",
                                   registry=r)
        self.delivery_errors = Counter(p + "delivery_errors", "Failed deliveries by reason.", ["reason"], registry=r)
        self.desired_errors = Counter(p + "desired_errors", "Failed reads of the desired state by reason.",
                                      ["reason"], registry=r)
        self._samples = _NodeTable.of({})
        r.register(_NodeCollector(self))
        self.tenants = Gauge(p + "tenants", "Tenants of the node pool by state (served, skipped, refused).",
                             ["state"], registry=r)
        self.render_refusals = Counter(p + "render_refusals", "Rendered files refused before delivery, by what "
                                       "was left out (tenant: its block; snippet: the whole delivery).", ["reason"],
                                       registry=r)
        self.lease_held = Gauge(p + "lease_held", "1 while this process holds the node pool's lease.", registry=r)
        self.ready = Gauge(p + "ready", "1 while /readyz answers 200.", registry=r)
        self.probe_config_errors = Gauge(p + "probe_config_errors", "Nodes not probed for a probe configuration "
                                         "error (headersSecret unreadable).", registry=r)
        self._conditions: tuple[tuple[str, bool, str], ...] = ()
        r.register(_ConditionCollector(self))
        self._faults: tuple[tuple[str, str], ...] = ()
        r.register(_FaultCollector(self))

    def set_nodes(self, samples: Mapping[str, NodeSample]) -> None:
        """Replace the per-node series: ``{node name: (ip, healthy, failures, last round)}``.
        They are built at scrape time (no labelled children kept: 10,000 nodes would hold
        ~20 MiB of them), so nodes not given any more simply disappear.  Kept as columns
        (`_NodeTable`), not as the mapping given: 10,000 nodes' tuples and floats held between
        two refreshes cost ~1.2 MB, the columns ~0.3 MB."""
        table = _NodeTable.of(samples)
        with self._lock:
            self._samples = table

    def set_node_columns(self, names: tuple[str, ...], ips: tuple[str, ...], healthy: bytes, failures: array[int],
                         last: array[float]) -> None:
        """`set_nodes` given as columns (each name once; ``healthy`` 1 or 0 per node, ``last``
        NaN where no round ended yet): what the orchestrator builds in one pass over its nodes."""
        table = _NodeTable(names, ips, healthy, failures, last)
        with self._lock:
            self._samples = table

    def healthy_count(self) -> int:
        """How many nodes the latest samples call healthy."""
        return self.node_table().healthy.count(1)

    def node_samples(self) -> Mapping[str, NodeSample]:
        """The latest samples, as `set_nodes` was given them."""
        return dict(self.node_table().rows())

    def node_table(self) -> _NodeTable:
        with self._lock:
            return self._samples

    def set_conditions(self, conditions: tuple[tuple[str, bool, str], ...]) -> None:
        """Replace the condition series: ``(type, status, reason)`` each (built at scrape time,
        so a reason that changed leaves no series behind)."""
        with self._lock:
            self._conditions = conditions

    def conditions(self) -> tuple[tuple[str, bool, str], ...]:
        with self._lock:
            return self._conditions

    def set_faults(self, faults: Mapping[str, str]) -> None:
        """Replace the fault series: ``{step: reason}`` of the steps whose last try failed."""
        with self._lock:
            self._faults = tuple(sorted(faults.items()))

    def faults(self) -> tuple[tuple[str, str], ...]:
        with self._lock:
            return self._faults

    def set_counts(self, *, healthy: int, total: int, published: int, fail_open: bool) -> None:
        self.healthy_nodes.set(healthy)
        self.total_nodes.set(total)
        self.published_nodes.set(published)
        self.fail_open.set(1 if fail_open else 0)

    def set_tenants(self, served: int, skipped: int, refused: int = 0) -> None:
        self.tenants.labels("served").set(served)
        self.tenants.labels("skipped").set(skipped)
        self.tenants.labels("refused").set(refused)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        result = self.registry.get_sample_value(name, dict(labels or {}))
        return None if result is None else float(result)


@dataclass(frozen=True, slots=True)
class _NodeTable:
    """Per-node samples as columns: the names and IPs (the strings the caller holds already),
    health as bytes, failure runs and last rounds as C arrays (NaN: no round yet)."""

    names: tuple[str, ...]
    ips: tuple[str, ...]
    healthy: bytes
    failures: array[int]
    last: array[float]

    @classmethod
    def of(cls, samples: Mapping[str, NodeSample]) -> _NodeTable:
        values = samples.values()
        return cls(tuple(samples), tuple(ip for ip, _, _, _ in values), bytes(h for _, h, _, _ in values),
                   array("q", (f for _, _, f, _ in values)),
                   array("d", (math.nan if d is None else d for _, _, _, d in values)))

    def rows(self) -> Iterator[tuple[str, NodeSample]]:
        """``(name, (ip, healthy, failures, last round))`` in name order."""
        names, ips, healthy, failures, last = self.names, self.ips, self.healthy, self.failures, self.last
        for i in sorted(range(len(names)), key=names.__getitem__):
            d = last[i]
            yield names[i], (ips[i], healthy[i] == 1, failures[i], None if d != d else d)  # NaN: no round yet


class _NodeCollector:
    """The per-node families, generated from the latest samples on every scrape."""

    def __init__(self, metrics: OrchestratorMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        p = "health_orchestrator_"
        status = GaugeMetricFamily(p + "node_status", "Node health status (1=healthy, 0=unhealthy or unknown).",
                                   labels=["node_name", "node_ip"])
        failures = GaugeMetricFamily(p + "probe_consecutive_failures", "Current run of failed probes of a node.",
                                     labels=["node_name"])
        duration = GaugeMetricFamily(p + "probe_last_duration_seconds", "Duration of a node's latest probe round.",
                                     labels=["node_name"])
        for name, (ip, healthy, fails, last) in self.metrics.node_table().rows():
            status.add_metric([name, ip], 1 if healthy else 0)
            failures.add_metric([name], fails)
            if last is not None:
                duration.add_metric([name], last)
        yield status
        yield failures
        yield duration


class _ConditionCollector:
    def __init__(self, metrics: OrchestratorMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("health_orchestrator_condition", "Conditions of /status: 1 True, 0 False.",
                                   labels=["type", "reason"])
        for kind, status, reason in self.metrics.conditions():
            family.add_metric([kind, reason], 1 if status else 0)
        yield family


class _FaultCollector:
    def __init__(self, metrics: OrchestratorMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("health_orchestrator_faults", "1 for each step whose last try failed, with its "
                                   "reason.", labels=["step", "reason"])
        for step, reason in self.metrics.faults():
            family.add_metric([step, reason], 1)
        yield family
