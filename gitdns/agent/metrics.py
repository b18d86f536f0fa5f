"""The agent's Prometheus metrics, in a registry of its own (never the process-global one).

Every metric is named ``gitdns_*``. The agent calls the plain methods below; nothing else in
gitdns touches ``prometheus_client`` (the core stays free of metrics and I/O). The first four
count the events of Kuadrant's "Distributed DNS Load Balancing" RFC.

========================================== ======= =========================================
metric                                     type    set by
========================================== ======= =========================================
gitdns_zone_writes_total{zone}             counter record_apply (RFC event: writes)
gitdns_zone_deletes_total{zone}            counter record_apply (RFC event: deletes)
gitdns_zone_prunes_total{zone}             counter record_apply (RFC event: prunes)
gitdns_owned_desired_set_changes_total     counter record_desired_set_change (RFC event:
  {zone}                                           the owned desired set changed)
gitdns_conflicts{zone,reason}              gauge   set_conflicts (reasons not given again
                                                   are removed)
gitdns_stale_write_retries_total{zone}     counter record_stale_retries
gitdns_cycle_duration_seconds              hist.   observe_cycle
gitdns_cycle_last_duration_seconds         gauge   observe_cycle
gitdns_git_errors_total{reason}            counter record_git_error (the desired branch's fetch and verify)
gitdns_head_refusals_total{reason}         counter record_refusal (SignatureRefused|RollbackRefused; once per
                                                   head; both reasons start at 0)
gitdns_status_push_failures_total{reason}  counter record_status_push_failure (each failed push of the
                                                   status branch; reasons: STATUS_PUSH_REASONS, each
                                                   starting at 0)
gitdns_provider_errors_total{zone,kind}    counter record_provider_error (each fault a provider call met,
                                                   retried or not; kinds: PROVIDER_ERROR_KINDS)
gitdns_applied_revision_info{revision}     gauge   set_revision (=1; the old label goes)
gitdns_validation_problems{zone}           gauge   set_validation_problems
gitdns_zone_errors_total{zone,reason}      counter record_zone_error (a pass ended in an error; runner.error_reason)
gitdns_webhook_deliveries_total            counter record_webhook; result is one of
  {provider,result}                                accepted|forged|replayed|ignored
gitdns_provider_calls_total{zone,op}       counter record_provider_call (op: zones|read|apply)
gitdns_last_success_timestamp_seconds      gauge   mark_success
gitdns_ready                               gauge   set_ready (0/1: the Ready condition)
gitdns_condition{type,reason}              gauge   set_conditions (each condition of /status: 1 True,
                                                   0 False; one series per type, built at scrape time)
gitdns_health_all_targets_unhealthy        gauge   set_all_targets_unhealthy (=1 per host
  {zone,host}                                      whose every target, in every cluster, is
                                                   down: all published, fail open; hosts no
                                                   longer given are removed)
========================================== ======= =========================================

Every fault the agent can meet has a kind in `FAULT_KINDS` (docs/agent.md, "Faults and
alerts"), shown by the series named there; the shipped PrometheusRule has an alert naming each
(tests/agent/test_fault_alerts.py drives each kind and evaluates the rule on the scrape).  Label
values come from closed sets: never an error's text.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from gitdns.core.conditions import Condition

__all__ = ["CONTENT_TYPE", "FAULT_KINDS", "HEAD_REFUSAL_REASONS", "PROVIDER_ERROR_KINDS", "STATUS_PUSH_REASONS",
           "WEBHOOK_RESULTS", "Metrics"]

# The classic text format; generate_latest writes it for names that need no escaping (all ours).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
WEBHOOK_RESULTS = frozenset({"accepted", "forged", "replayed", "ignored"})
# what a provider call met (gitdns.agent.observed classifies it: by the error's type, never its text)
PROVIDER_ERROR_KINDS = (
    "timeout",         # TimedOutError: no answer in time (before or after the write took effect)
    "connection",      # UnreachableError: connection refused or reset, name resolution
    "server_error",    # RetryableError: the service failed (HTTP 5xx, SERVFAIL, a store lock held)
    "throttled",       # ThrottledError: Route53 Throttling, Google and Azure 429 (each answer, retried or not)
    "partial_batch",   # an apply that wrote some change groups and not the others
    "change_refused",  # a change group the provider refused for its content
    "stale_write",     # a compare-and-swap refused (the read was stale): re-read and re-planned
    "auth",            # AuthError: credentials refused
    "rejected",        # PermanentError: a request the service will not take (4xx, unsupported, bad settings)
    "unexpected",      # anything else the provider raised (a bug): the pass is taken back
)
# why a status push failed: the StatusPublished reasons (gitdns.agent.reporting)
STATUS_PUSH_REASONS = ("PushDeclined", "AuthenticationFailed", "HostKeyMismatch", "HostKeyUnknown", "KeyPermissions",
                       "KeyMissing", "RepositoryNotFound", "TLSVerificationFailed", "GitConnectionRefused",
                       "GitUnreachable", "GitTimeout", "StatusPushRaced", "StatusCacheError", "StatusPushFailed")
HEAD_REFUSAL_REASONS = ("SignatureRefused", "RollbackRefused")
# every fault kind the agent meets -> what shows it in /metrics (docs/agent.md, "Faults and alerts")
FAULT_KINDS: Mapping[str, str] = {
    **{f"provider:{kind}": f'gitdns_provider_errors_total{{zone,kind="{kind}"}}' for kind in PROVIDER_ERROR_KINDS},
    "zone-error": "gitdns_zone_errors_total{zone,reason}",
    "git-fetch": 'gitdns_git_errors_total{reason}, gitdns_condition{type="SourceAvailable"}',
    "head-refused": 'gitdns_head_refusals_total{reason}, gitdns_condition{type="SourceAvailable"}',
    "status-push": 'gitdns_status_push_failures_total{reason}, gitdns_condition{type="StatusPublished"}, '
                   "gitdns_ready",
    "lease-lost": 'gitdns_condition{type="LeaseHeld"}',
    "validation": "gitdns_validation_problems{zone}",
    "probe": 'gitdns_condition{type="Healthy"}',
}
CYCLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Metrics:
    """The agent's metrics. Thread-safe: handler threads and the cycle may call at once."""

    content_type = CONTENT_TYPE

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self._revision: str | None = None
        self._conflict_reasons: dict[str, set[str]] = {}
        self._problem_zones: set[str] = set()
        self._failing_open: set[tuple[str, str]] = set()
        r = self.registry
        self.zone_writes = Counter("gitdns_zone_writes", "Records written to a zone.", ["zone"], registry=r)
        self.zone_deletes = Counter("gitdns_zone_deletes", "Records deleted from a zone.", ["zone"], registry=r)
        self.zone_prunes = Counter(
            "gitdns_zone_prunes", "Shared records pruned of dead ends in a zone.", ["zone"], registry=r
        )
        self.desired_set_changes = Counter(
            "gitdns_owned_desired_set_changes",
            "Changes of the owned desired record set of a zone.",
            ["zone"],
            registry=r,
        )
        self.conflicts = Gauge(
            "gitdns_conflicts", "Current conflicts in a zone by reason.", ["zone", "reason"], registry=r
        )
        self.stale_write_retries = Counter(
            "gitdns_stale_write_retries",
            "Writes refused as stale and retried after a re-read.",
            ["zone"],
            registry=r,
        )
        self.cycle_duration = Histogram(
            "gitdns_cycle_duration_seconds", "Duration of agent cycles.", buckets=CYCLE_BUCKETS, registry=r
        )
        self.cycle_last_duration = Gauge(
            "gitdns_cycle_last_duration_seconds", "Duration of the last agent cycle.", registry=r
        )
        self.git_errors = Counter(
            "gitdns_git_errors", "Git fetch/verify/push errors by reason.", ["reason"], registry=r
        )
        self.zone_errors = Counter(
            "gitdns_zone_errors", "Zone passes that ended in an error, by reason.", ["zone", "reason"], registry=r
        )
        self.head_refusals = Counter(
            "gitdns_head_refusals", "Heads refused (unsigned or untrusted, or not a descendant of the applied "
            "revision), once per refused head.", ["reason"], registry=r
        )
        self.status_push_failures = Counter(
            "gitdns_status_push_failures", "Failed pushes of the status branch, by reason.", ["reason"], registry=r)
        self.provider_errors = Counter(
            "gitdns_provider_errors", "Faults provider calls met, retried or not, by zone and kind.",
            ["zone", "kind"], registry=r)
        # closed sets start at 0, so that increase() sees the first one (a series born at 1 shows none)
        for reason in HEAD_REFUSAL_REASONS:
            self.head_refusals.labels(reason)
        for reason in STATUS_PUSH_REASONS:
            self.status_push_failures.labels(reason)
        self.applied_revision = Gauge(
            "gitdns_applied_revision_info", "The desired revision applied last (value 1).", ["revision"], registry=r
        )
        self.validation_problems = Gauge(
            "gitdns_validation_problems", "Validation problems blocking or affecting a zone.", ["zone"], registry=r
        )
        self.webhook_deliveries = Counter(
            "gitdns_webhook_deliveries",
            "Webhook deliveries by provider and result.",
            ["provider", "result"],
            registry=r,
        )
        self.provider_calls = Counter(
            "gitdns_provider_calls", "Calls to DNS provider APIs by zone and operation.", ["zone", "op"], registry=r
        )
        self.last_success = Gauge(
            "gitdns_last_success_timestamp_seconds", "Unix time of the last fully successful cycle.", registry=r
        )
        self.ready = Gauge("gitdns_ready", "1 when the agent is ready, else 0.", registry=r)
        self.group_active = Gauge("gitdns_group_active", "1 when the failover group is active in the zone.",
                                  ["zone", "group"], registry=r)
        self.group_records = Gauge("gitdns_group_records", "Records this agent publishes for its group.",
                                   ["zone", "group"], registry=r)
        self.group_targets = Gauge("gitdns_group_targets", "Target values this agent publishes for its group.",
                                   ["zone", "group"], registry=r)
        self.all_targets_unhealthy = Gauge(
            "gitdns_health_all_targets_unhealthy", "1 while every target of the host, in every cluster, is "
            "unhealthy and all are published (fail open; condition Healthy AllTargetsUnhealthy).",
            ["zone", "host"], registry=r)
        self.ready.set(0)
        self._conditions: tuple[Condition, ...] = ()
        r.register(_ConditionCollector(self))

    # --- the load-balancing RFC's four events ----------------------------------------

    def record_apply(self, zone: str, writes: int = 0, deletes: int = 0, prunes: int = 0) -> None:
        """Count what one apply did to ``zone`` (counts of records; zeros are fine)."""
        self.zone_writes.labels(zone).inc(_count(writes))
        self.zone_deletes.labels(zone).inc(_count(deletes))
        self.zone_prunes.labels(zone).inc(_count(prunes))

    def record_desired_set_change(self, zone: str, n: int = 1) -> None:
        self.desired_set_changes.labels(zone).inc(_count(n))

    # --- conflicts, retries, problems --------------------------------------------------

    def set_conflicts(self, zone: str, counts: Mapping[str, int]) -> None:
        """Replace ``zone``'s conflict gauges; reasons absent from ``counts`` are removed."""
        with self._lock:
            old = self._conflict_reasons.get(zone, set())
            for reason in old - set(counts):
                self.conflicts.remove(zone, reason)
            for reason, n in counts.items():
                self.conflicts.labels(zone, reason).set(n)
            self._conflict_reasons[zone] = set(counts)

    def record_stale_retries(self, zone: str, n: int = 1) -> None:
        self.stale_write_retries.labels(zone).inc(_count(n))

    def set_validation_problems(self, counts: Mapping[str, int]) -> None:
        """Replace the per-zone problem counts; zones absent from ``counts`` are removed."""
        with self._lock:
            for zone in self._problem_zones - set(counts):
                self.validation_problems.remove(zone)
            for zone, n in counts.items():
                self.validation_problems.labels(zone).set(n)
            self._problem_zones = set(counts)

    # --- cycles, git, revision ---------------------------------------------------------

    def observe_cycle(self, seconds: float) -> None:
        self.cycle_duration.observe(seconds)
        self.cycle_last_duration.set(seconds)

    def record_git_error(self, reason: str) -> None:
        self.git_errors.labels(reason).inc()

    def record_zone_error(self, zone: str, reason: str) -> None:
        self.zone_errors.labels(zone, reason).inc()

    def record_refusal(self, reason: str) -> None:
        if reason not in HEAD_REFUSAL_REASONS:
            raise ValueError(f"head refusal reason {reason!r} is not one of {HEAD_REFUSAL_REASONS}")
        self.head_refusals.labels(reason).inc()

    def record_status_push_failure(self, reason: str) -> None:
        """One failed push of the status branch; a reason outside the set counts as StatusPushFailed."""
        self.status_push_failures.labels(reason if reason in STATUS_PUSH_REASONS else "StatusPushFailed").inc()

    def record_provider_error(self, zone: str, kind: str, n: int = 1) -> None:
        if kind not in PROVIDER_ERROR_KINDS:
            raise ValueError(f"provider error kind {kind!r} is not one of {PROVIDER_ERROR_KINDS}")
        self.provider_errors.labels(zone, kind).inc(_count(n))

    def set_conditions(self, conditions: Iterable[Condition]) -> None:
        """Replace the condition series (``gitdns_condition{type,reason}``): one per type, the
        first of each type as /status lists them; built at scrape time, so an old reason leaves
        no series behind."""
        seen: dict[str, Condition] = {}
        for condition in conditions:
            seen.setdefault(condition.type, condition)
        with self._lock:
            self._conditions = tuple(seen.values())

    def conditions(self) -> tuple[Condition, ...]:
        with self._lock:
            return self._conditions

    def set_revision(self, label: str) -> None:
        """Point ``gitdns_applied_revision_info`` at ``label``; the previous label is removed."""
        with self._lock:
            if self._revision == label:
                return
            if self._revision is not None:
                self.applied_revision.remove(self._revision)
            self.applied_revision.labels(label).set(1)
            self._revision = label

    @property
    def revision(self) -> str | None:
        return self._revision

    def mark_success(self, timestamp: float | None = None) -> None:
        """Record the unix time (seconds) of a fully successful cycle; now when not given."""
        if timestamp is None:
            self.last_success.set_to_current_time()
        else:
            self.last_success.set(timestamp)

    def set_ready(self, ready: bool) -> None:
        self.ready.set(1 if ready else 0)

    def set_group(self, zone: str, group: str, active: bool, records: int, targets: int) -> None:
        self.group_active.labels(zone=zone, group=group).set(1 if active else 0)
        self.group_records.labels(zone=zone, group=group).set(records)
        self.group_targets.labels(zone=zone, group=group).set(targets)

    def set_all_targets_unhealthy(self, hosts: Mapping[str, Iterable[str]]) -> None:
        """Replace the fail-open series: ``{zone: hosts whose every target is unhealthy}``
        (`HealthResult.fail_open` of each zone's last pass); hosts not given are removed."""
        wanted = {(zone, host) for zone, names in hosts.items() for host in names}
        with self._lock:
            for zone, host in self._failing_open - wanted:
                self.all_targets_unhealthy.remove(zone, host)
            for zone, host in wanted:
                self.all_targets_unhealthy.labels(zone, host).set(1)
            self._failing_open = wanted

    # --- webhook and provider calls ----------------------------------------------------

    def record_webhook(self, provider: str, result: str) -> None:
        if result not in WEBHOOK_RESULTS:
            raise ValueError(f"webhook result {result!r} is not one of {sorted(WEBHOOK_RESULTS)}")
        self.webhook_deliveries.labels(provider, result).inc()

    def record_provider_call(self, zone: str, op: str, n: int = 1) -> None:
        self.provider_calls.labels(zone, op).inc(_count(n))

    # --- exposition --------------------------------------------------------------------

    def render(self) -> bytes:
        """The registry in the Prometheus text format (serve with :attr:`content_type`)."""
        return bytes(generate_latest(self.registry))

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """One sample's current value by its exposed name (for tests and ``/status``)."""
        result = self.registry.get_sample_value(name, dict(labels or {}))
        return None if result is None else float(result)


class _ConditionCollector:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("gitdns_condition", "Conditions of /status: 1 True, 0 False (one series per "
                                   "type, labelled with its reason).", labels=["type", "reason"])
        for condition in self.metrics.conditions():
            family.add_metric([condition.type, condition.reason], 1 if condition.status else 0)
        yield family


def _count(n: int) -> int:
    if n < 0:
        raise ValueError("a counter only goes up")
    return n
