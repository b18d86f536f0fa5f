"""The health state machine, settings and probe specs (gitdns.core.health): tables."""

from __future__ import annotations

import pytest

from gitdns.core.health import (
    HealthSettings,
    ProbeSpec,
    State,
    TargetHealth,
    node_probe,
    observe,
    parse_endpoint,
    probe_spec,
    published,
    spec_error,
)
from gitdns.core.model import HealthCheck, Node, NodePool

U, H, X = State.UNKNOWN, State.HEALTHY, State.UNHEALTHY
SEED = HealthSettings(interval=5, timeout=2, failure_threshold=2, success_threshold=1)
SLOW = HealthSettings(interval=5, timeout=2, failure_threshold=3, success_threshold=2)


def run(results: str, s: HealthSettings) -> list[State]:
    """Feed ``results`` ("+" success, "-" failure) from a fresh target; the state after each."""
    h = TargetHealth.initial(0.0)
    states = []
    for i, r in enumerate(results, 1):
        h = observe(h, r == "+", float(i), "boom", s)
        states.append(h.state)
    return states


@pytest.mark.parametrize(
    ("results", "settings", "expected"),
    [
        ("", SEED, []),
        ("+", SEED, [H]),
        ("-", SEED, [U]),
        ("--", SEED, [U, X]),
        ("-+", SEED, [U, H]),
        ("+-", SEED, [H, H]),
        ("+--", SEED, [H, H, X]),
        ("+-+-", SEED, [H, H, H, H]),  # failures never consecutive: stays healthy
        ("+--+", SEED, [H, H, X, H]),  # success threshold 1: back at once
        ("---", SEED, [U, X, X]),
        ("+", SLOW, [U]),
        ("++", SLOW, [U, H]),
        ("++---", SLOW, [U, H, H, H, X]),
        ("++---+", SLOW, [U, H, H, H, X, X]),
        ("++---++", SLOW, [U, H, H, H, X, X, H]),
        ("++---+-+", SLOW, [U, H, H, H, X, X, X, X]),  # successes never consecutive: stays down
        ("-+-+-+", SLOW, [U, U, U, U, U, U]),
        ("--+--", SLOW, [U, U, U, U, U]),
        ("---", SLOW, [U, U, X]),
    ],
)
def test_state_machine(results: str, settings: HealthSettings, expected: list[State]) -> None:
    assert run(results, settings) == expected


def test_counters_since_and_error() -> None:
    h0 = TargetHealth.initial(10.0)
    assert (h0.state, h0.checks, h0.since) == (U, 0, 10.0)
    h1 = observe(h0, False, 11.0, "connection refused", SEED)
    assert (h1.state, h1.failures, h1.successes, h1.checks, h1.since, h1.last_error) == (
        U,
        1,
        0,
        1,
        10.0,
        "connection refused",
    )
    h2 = observe(h1, False, 12.0, "timeout after 2s", SEED)
    assert (h2.state, h2.failures, h2.since, h2.last_error) == (X, 2, 12.0, "timeout after 2s")
    h3 = observe(h2, False, 13.0, "", SEED)
    assert (h3.failures, h3.since, h3.last_error) == (3, 12.0, "probe failed")
    h4 = observe(h3, True, 14.0, "", SEED)
    assert (h4.state, h4.successes, h4.failures, h4.since, h4.last_error, h4.checks) == (H, 1, 0, 14.0, "", 4)


def test_long_errors_are_cut() -> None:
    h = observe(TargetHealth.initial(0), False, 1, "x" * 1000, SEED)
    assert len(h.last_error) == 160


@pytest.mark.parametrize(
    ("state", "publish_unknown", "expected"),
    [(H, True, True), (H, False, True), (X, True, False), (X, False, False), (U, True, True), (U, False, False)],
)
def test_published(state: State, publish_unknown: bool, expected: bool) -> None:
    s = HealthSettings(publish_unknown=publish_unknown)
    assert published(TargetHealth(state), s) is expected


def test_never_checked_is_published_by_default() -> None:
    assert published(TargetHealth.initial(0), HealthSettings()) is True
    assert published(TargetHealth.initial(0), HealthSettings.for_node_pool(NodePool("p", ()).health)) is True


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (NodePool("p", ()).health, HealthSettings(5.0, 2.0, 2, 1, True)),
        (HealthCheck(interval=10, timeout=3, failure_threshold=4, success_threshold=2), HealthSettings(10, 3, 4, 2)),
        (HealthCheck(interval=1, timeout=5), HealthSettings(1, 1, 2, 1)),  # timeout capped at the interval
    ],
)
def test_settings_for_node_pool(check: HealthCheck, expected: HealthSettings) -> None:
    assert HealthSettings.for_node_pool(check) == expected


def test_settings_for_policy_defaults() -> None:
    check = HealthCheck()  # what the loader gives a policy that says `healthCheck: {}`
    assert (check.protocol, check.port, check.path) == ("HTTPS", 443, "/")
    assert HealthSettings.for_policy(check) == HealthSettings(5.0, 2.0, 2, 1, True)
    assert HealthSettings.for_policy(check, publish_unknown=False).publish_unknown is False


@pytest.mark.parametrize(
    "kwargs",
    [{"interval": 0}, {"timeout": -1}, {"failure_threshold": 0}, {"success_threshold": 0}],
)
def test_settings_refuse_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        HealthSettings(**kwargs)  # type: ignore[arg-type]


GOOD = ProbeSpec("t", "HTTP", "10.0.0.1", 80, "/healthz", host="api.example.com", headers=(("X-Token", "s3cret"),))


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({}, ""),
        ({"protocol": "UDP"}, "protocol 'UDP'"),
        ({"protocol": "http"}, "protocol 'http'"),
        ({"address": ""}, "malformed address"),
        ({"address": "http://x"}, "malformed address"),
        ({"address": "a b"}, "malformed address"),
        ({"port": 0}, "port 0"),
        ({"port": 70000}, "port 70000"),
        ({"timeout": 0}, "timeout 0"),
        ({"path": "healthz"}, "malformed path"),
        ({"path": "/a\r\nX: y"}, "malformed path"),
        ({"path": "/a b"}, "malformed path"),
        ({"host": ""}, "malformed host"),
        ({"host": "a\nb"}, "malformed host"),
        ({"headers": (("X:Y", "v"),)}, "malformed header name"),
        ({"headers": (("", "v"),)}, "malformed header name"),
        ({"headers": (("X-Token", "s3cret\r\nEvil: 1"),)}, "X-Token has a control character"),
        ({"expected_codes": ()}, "no expected status codes"),
        ({"protocol": "TCP", "path": "ignored"}, ""),  # TCP has no path
        ({"address": "::1"}, ""),
        ({"address": "gw.example.net"}, ""),
    ],
)
def test_spec_error(changes: dict[str, object], fragment: str) -> None:
    from dataclasses import replace

    error = spec_error(replace(GOOD, **changes))  # type: ignore[arg-type]
    assert (fragment in error) if fragment else error == ""
    assert "s3cret" not in error


def test_spec_repr_hides_header_values() -> None:
    text = repr(GOOD)
    assert "X-Token" in text and "s3cret" not in text


@pytest.mark.parametrize(
    ("spec", "host_header", "tls_name"),
    [
        (ProbeSpec("t", "HTTPS", "10.0.0.1", 443, host="api.example.com"), "api.example.com", "api.example.com"),
        (ProbeSpec("t", "HTTP", "10.0.0.1", 80), "10.0.0.1", "10.0.0.1"),
        (ProbeSpec("t", "HTTP", "::1", 80), "[::1]", "::1"),
        (ProbeSpec("t", "HTTPS", "gw.example.net", 443), "gw.example.net", "gw.example.net"),
    ],
)
def test_host_header_and_tls_name(spec: ProbeSpec, host_header: str, tls_name: str) -> None:
    assert (spec.request_host, spec.tls_name) == (host_header, tls_name)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://10.0.0.1:15021/healthz/ready", ("HTTP", "10.0.0.1", 15021, "/healthz/ready")),
        ("https://gw.example.net/healthz", ("HTTPS", "gw.example.net", 443, "/healthz")),
        ("http://10.0.0.1", ("HTTP", "10.0.0.1", 80, "/")),
        ("HTTP://10.0.0.1:8080", ("HTTP", "10.0.0.1", 8080, "/")),
        ("http://[fd00::1]:15021/healthz/ready", ("HTTP", "fd00::1", 15021, "/healthz/ready")),
        ("tcp://10.0.0.1:15021", ("TCP", "10.0.0.1", 15021, "/")),
        ("10.0.0.1:15021", "expected http://"),
        ("ftp://10.0.0.1/", "expected http://"),
        ("tcp://10.0.0.1", "needs a port"),
        ("http://10.0.0.1:0/", "bad port"),
        ("http://10.0.0.1:x/", "bad port"),
        ("http://[fd00::1/", "unclosed"),
        ("http://[fd00::1]x/", "malformed address"),
        ("http:///healthz", "no address"),
    ],
)
def test_parse_endpoint(url: str, expected: tuple[str, str, int, str] | str) -> None:
    got = parse_endpoint(url)
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got
    else:
        assert got == expected


def test_node_probe() -> None:
    pool = NodePool("edge", (Node("n1", "10.0.0.1", "http://10.0.0.1:15021/healthz/ready"),))
    spec = node_probe("nodepool/edge/n1", pool.nodes[0], pool.health)
    assert spec == ProbeSpec("nodepool/edge/n1", "HTTP", "10.0.0.1", 15021, "/healthz/ready", timeout=2.0)
    assert spec_error(spec) == ""
    with pytest.raises(ValueError, match="node n2"):
        node_probe("x", Node("n2", "10.0.0.2", "10.0.0.2:15021"), pool.health)


def test_probe_spec_for_a_policy_target() -> None:
    check = HealthCheck(path="/ready", insecure=True, expected_codes=(200, 204))
    spec = probe_spec("policy/api/10.0.0.1", check, "10.0.0.1", host="api.example.com", headers=(("A", "b"),))
    assert spec == ProbeSpec(
        "policy/api/10.0.0.1",
        "HTTPS",
        "10.0.0.1",
        443,
        "/ready",
        host="api.example.com",
        headers=(("A", "b"),),
        timeout=2.0,
        insecure=True,
        expected_codes=(200, 204),
    )


def test_long_runs_of_counts_are_shared_between_targets() -> None:
    """Past 256 an int is an object of its own: two targets at the same counts hold the same ones."""
    s = HealthSettings(interval=1.0, timeout=1.0, failure_threshold=3, success_threshold=1)
    a, b = TargetHealth(), TargetHealth()
    for i in range(300):
        a = observe(a, True, float(i), "", s)
        b = observe(b, True, float(i), "", s)
    assert (a.checks, a.successes) == (300, 300) == (b.checks, b.successes)
    assert a.checks is b.checks and a.successes is b.successes
