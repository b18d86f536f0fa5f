"""Health checks: what to probe, how often, and the per-target state machine (pure).

A *target* is one thing whose health decides whether it is published: a NodePool node
(`gitdns orchestrator`) or a DNSPolicy target (a gateway address serving a listener host).
This module holds values and functions only; `gitdns.adapters.probes` runs the probes and feeds
their results through `observe`.

State machine (one per target)::

                 success_threshold consecutive successes
        UNKNOWN ─────────────────────────────────────────▶ HEALTHY
           │                                              ▲   │
           │ failure_threshold consecutive failures       │   │ failure_threshold
           ▼                                              │   ▼ consecutive failures
        UNHEALTHY ◀───────────────────────────────────────┴─ (and back with
                                                              success_threshold successes)

A success resets the failure run and a failure resets the success run, so the thresholds
count *consecutive* results.  Never-checked targets are UNKNOWN; whether UNKNOWN is
published is `HealthSettings.publish_unknown` (default True, see docs/health-probes.md).

The package's other module: `filter` — DNSPolicy health in the records a cluster publishes
(docs/health.md, "DNSPolicy targets").
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TypeVar

from gitdns.core.model import HealthCheck, Node
from gitdns.core.reach import own_address_refusal

T = TypeVar("T")

PROTOCOLS = ("HTTP", "HTTPS", "TCP")
DEFAULT_PORTS = {"HTTP": 80, "HTTPS": 443}
MAX_ERROR = 160  # characters kept of a probe error


class State(StrEnum):
    UNKNOWN = "unknown"
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"


@dataclass(frozen=True, slots=True, repr=False)
class ProbeSpec:
    """One probe: where to connect and what counts as healthy.

    ``address`` is where the connection goes (an IP address or a hostname, resolved at probe
    time); ``host`` is the name the request is for: the HTTP ``Host`` header and the TLS SNI
    / certificate name (the record's host).  ``headers`` may carry secrets (from a Secret
    named by ``headersSecret``): their values never appear in ``repr``, errors or logs.
    """

    target_id: str
    protocol: str  # HTTP | HTTPS | TCP
    address: str
    port: int
    path: str = "/"
    host: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 2.0
    insecure: bool = False
    expected_codes: tuple[int, ...] = (200,)

    def __repr__(self) -> str:
        names = ",".join(name for name, _ in self.headers)
        return (
            f"ProbeSpec({self.target_id!r}, {self.protocol} {self.address}:{self.port}{self.path}"
            f" host={self.host!r} headers=[{names}] timeout={self.timeout} insecure={self.insecure}"
            f" expected={list(self.expected_codes)})"
        )

    @property
    def request_host(self) -> str:
        """The ``Host`` header: the record's host, else the address (IPv6 in brackets)."""
        if self.host:
            return self.host
        return f"[{self.address}]" if ":" in self.address else self.address

    @property
    def tls_name(self) -> str:
        """The TLS server name: SNI and the name the certificate must carry."""
        return self.host or self.address


def spec_error(spec: ProbeSpec) -> str:
    """Why ``spec`` cannot be probed ("" when it can).  The prober reports this as the
    target's error on every round instead of probing, so one bad target never stops others."""
    if spec.protocol not in PROTOCOLS:
        return f"protocol {spec.protocol!r} is not one of {'/'.join(PROTOCOLS)}"
    if not spec.address or any(c.isspace() or c in "/?#@" for c in spec.address):
        return f"malformed address {spec.address!r}"
    if not 1 <= spec.port <= 65535:
        return f"port {spec.port} is out of range 1-65535"
    if not spec.timeout > 0:
        return f"timeout {spec.timeout} must be positive"
    if spec.protocol != "TCP":
        if not spec.path.startswith("/") or _has_control(spec.path) or " " in spec.path:
            return f"malformed path {spec.path!r}"
        if spec.host is not None and (not spec.host or _has_control(spec.host) or " " in spec.host):
            return f"malformed host {spec.host!r}"
        for name, value in spec.headers:
            if not name or _has_control(name) or ":" in name or " " in name:
                return f"malformed header name {name!r}"
            if _has_control(value):
                return f"header {name} has a control character in its value"  # never the value
        if not spec.expected_codes:
            return "no expected status codes"
    return ""


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def is_ip(address: str) -> bool:
    """An IP literal (no resolution needed)."""
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class HealthSettings:
    """How often a target is probed and how results turn into a state."""

    interval: float = 5.0
    timeout: float = 2.0
    failure_threshold: int = 2
    success_threshold: int = 1
    publish_unknown: bool = True

    def __post_init__(self) -> None:
        if not self.interval > 0:
            raise ValueError(f"health: interval must be positive, not {self.interval}")
        if not self.timeout > 0:
            raise ValueError(f"health: timeout must be positive, not {self.timeout}")
        if self.failure_threshold < 1 or self.success_threshold < 1:
            raise ValueError("health: thresholds must be at least 1")

    @staticmethod
    def for_node_pool(check: HealthCheck, *, publish_unknown: bool | None = None) -> HealthSettings:
        """A NodePool's settings, those of the orchestrator in the OpenOva "DNS Failover Service"
        specification: every 5 s, 2 s timeout, unhealthy after 2 consecutive failures, healthy
        again after 1 success (the NodePool default
        `HealthCheck(protocol="HTTP", port=15021, path="/healthz/ready")` carries these)."""
        return _settings(check, publish_unknown)

    @staticmethod
    def for_policy(check: HealthCheck, *, publish_unknown: bool | None = None) -> HealthSettings:
        """A DNSPolicy's settings.  Where the policy is silent the model's defaults apply
        (HTTPS on port 443 and path ``/``, as Kuadrant's DNSRecord health check; interval,
        timeout and thresholds as the OpenOva failover spec — Kuadrant's own are 5 min and 5
        failures, see docs/health-probes.md)."""
        return _settings(check, publish_unknown)


def _settings(check: HealthCheck, publish_unknown: bool | None) -> HealthSettings:
    """``publish_unknown`` None: the check's ``publishUnchecked`` setting (default true)."""
    if publish_unknown is None:
        publish_unknown = check.publish_unchecked
    # A probe never outlives its interval: the next one would start before it ended.
    timeout = min(float(check.timeout), float(check.interval))
    return HealthSettings(
        interval=float(check.interval),
        timeout=timeout,
        failure_threshold=max(1, check.failure_threshold),
        success_threshold=max(1, check.success_threshold),
        publish_unknown=publish_unknown,
    )


def probe_spec(
    target_id: str,
    check: HealthCheck,
    address: str,
    *,
    host: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> ProbeSpec:
    """The probe of one DNSPolicy target: ``address`` (a gateway IP or hostname) checked
    with the policy's protocol, port and path, for the listener ``host``."""
    return ProbeSpec(
        target_id=target_id,
        protocol=check.protocol.upper(),
        address=address,
        port=check.port,
        path=check.path,
        host=host,
        headers=headers,
        timeout=min(float(check.timeout), float(check.interval)),
        insecure=check.insecure,
        expected_codes=check.expected_codes,
    )


@lru_cache(maxsize=256, typed=True)
def _one(value: T) -> T:
    """The first object seen equal to ``value`` (of its type): one per distinct port or timeout."""
    return value


class TargetRefused(ValueError):
    """A probe target the repository may not name (`gitdns.core.reach`): nothing is probed."""


def node_probe(
    target_id: str, node: Node, check: HealthCheck, *, headers: tuple[tuple[str, str], ...] = ()
) -> ProbeSpec:
    """The probe of one NodePool node, from its health endpoint URL
    (``http://10.0.0.1:15021/healthz/ready``; ``tcp://10.0.0.1:15021`` for a TCP check).
    Raises ValueError, naming the endpoint, when it does not parse, and `TargetRefused` when its
    host is not the node's own ``ip`` (a node is probed at its own address only)."""
    parsed = parse_endpoint(node.health_endpoint)
    if isinstance(parsed, str):
        raise ValueError(f"health: node {node.name}: {parsed}")
    protocol, address, port, path = parsed
    refused = own_address_refusal(node.ip, address)
    if refused:
        raise TargetRefused(f"node {node.name}: {refused}")
    # the strings the node and its pool hold already, where equal (10,000 nodes: ~1.2 MB less),
    # and one object for each port and timeout (numbers past 256 are objects of their own: ~0.6 MB)
    address = node.ip if address == node.ip else address
    path = check.path if path == check.path else path
    return ProbeSpec(
        target_id=target_id,
        protocol=protocol,
        address=address,
        port=_one(port),
        path=path,
        host=None,
        headers=headers,
        timeout=_one(min(float(check.timeout), float(check.interval))),
        insecure=check.insecure,
        expected_codes=check.expected_codes,
    )


def parse_endpoint(url: str) -> tuple[str, str, int, str] | str:
    """``scheme://address[:port][/path]`` as ``(PROTOCOL, address, port, path)``, or a
    message saying why it does not parse.  IPv6 addresses go in brackets."""
    scheme, sep, rest = url.partition("://")
    protocol = scheme.upper()
    if not sep or protocol not in PROTOCOLS:
        return f"endpoint {url!r}: expected http://, https:// or tcp://"
    protocol = PROTOCOLS[PROTOCOLS.index(protocol)]  # the constant, not a new string per node
    slash = rest.find("/")
    authority, path = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return f"endpoint {url!r}: unclosed '[' in the address"
        address, port_text = authority[1:end], authority[end + 1 :]
        if port_text and not port_text.startswith(":"):
            return f"endpoint {url!r}: malformed address"
        port_text = port_text[1:]
    else:
        address, _, port_text = authority.partition(":")
    if not address:
        return f"endpoint {url!r}: no address"
    if port_text:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            return f"endpoint {url!r}: bad port {port_text!r}"
        port = int(port_text)
    elif protocol in DEFAULT_PORTS:
        port = DEFAULT_PORTS[protocol]
    else:
        return f"endpoint {url!r}: a tcp endpoint needs a port"
    return protocol, address, port, path


@dataclass(frozen=True, slots=True)
class TargetHealth:
    """What is known about one target.  ``successes``/``failures`` are the current runs of
    consecutive results; ``since`` is when ``state`` was entered (the prober's clock);
    ``last_error`` is the last probe's error ("" after a success); ``checks`` counts probes."""

    state: State = State.UNKNOWN
    successes: int = 0
    failures: int = 0
    since: float = 0.0
    last_error: str = ""
    checks: int = 0

    @staticmethod
    def initial(now: float) -> TargetHealth:
        return TargetHealth(State.UNKNOWN, 0, 0, now, "", 0)


def observe(h: TargetHealth, ok: bool, now: float, error: str, s: HealthSettings) -> TargetHealth:
    """``h`` after one probe result."""
    if ok:
        successes, failures, last_error = h.successes + 1, 0, ""
        promote = h.state is not State.HEALTHY and successes >= s.success_threshold
        state = State.HEALTHY if promote else h.state
    else:
        successes, failures = 0, h.failures + 1
        last_error = (error or "probe failed")[:MAX_ERROR]
        demote = h.state is not State.UNHEALTHY and failures >= s.failure_threshold
        state = State.UNHEALTHY if demote else h.state
    since = now if state is not h.state else h.since
    return TargetHealth(state, _count(successes), _count(failures), since, last_error, _count(h.checks + 1))


def _count(n: int) -> int:
    """``n`` as the one object every target with that count shares: past 256 each int is an
    object of its own, and the targets of a pool probe at the same pace, so after some twenty
    minutes 10,000 nodes would hold 10,000 copies of each of their counts (~0.6 MB)."""
    return n if n <= 256 else _one(n)


def published(h: TargetHealth, s: HealthSettings) -> bool:
    """Whether the target's records are published: healthy yes, unhealthy no, unknown
    (never checked, or not yet past a threshold) as ``s.publish_unknown``."""
    if h.state is State.HEALTHY:
        return True
    if h.state is State.UNHEALTHY:
        return False
    return s.publish_unknown
