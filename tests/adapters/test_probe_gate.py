"""The probes' connection gate (`gitdns.adapters.probes.Prober.destination`): every probe connection
goes to an address `gitdns.core.reach` allows with the operator's ranges, checked at the moment of
connecting, and to that very address.

Recording servers on loopback see whether anything arrived; a spy on the event loop's
``sock_connect`` and on ``asyncio.open_connection`` records every connection the prober attempts
and refuses anything outside loopback, so no packet leaves the machine whatever happens (the
metadata address is never actually connected to: it is refused before).
"""

from __future__ import annotations

import ast
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters import probes
from gitdns.adapters.probes import HealthMonitor
from gitdns.core.health import HealthSettings, ProbeSpec, State
from gitdns.core.reach import ProbeReach
from tests.probe_kit import RecordingServer, loopback_spy, wait_until

FAST = HealthSettings(interval=0.05, timeout=1.0, failure_threshold=1, success_threshold=1)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    return loopback_spy(monkeypatch, open_connection=True)  # the prober calls asyncio.open_connection


@pytest.fixture
def trap() -> Iterator[RecordingServer]:
    with RecordingServer("127.0.0.1") as server:
        yield server


def run(monitor: HealthMonitor, specs: dict[str, ProbeSpec], rounds: int = 4) -> dict[str, str]:
    """Probe ``specs`` for a few rounds; the last error of each."""
    monitor.set_targets({tid: (spec, FAST) for tid, spec in specs.items()})
    monitor.start()
    try:
        wait_until(lambda: all((h := monitor.snapshot().get(t)) is not None and h.checks >= rounds for t in specs))
        return {tid: h.last_error for tid, h in monitor.snapshot().items()}
    finally:
        monitor.stop()


@pytest.mark.parametrize("protocol", ["TCP", "HTTP", "HTTPS"])
@pytest.mark.parametrize("address", ["127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0"])
def test_a_loopback_target_is_refused_before_connecting(protocol: str, address: str, trap: RecordingServer,
                                                       connects: list[tuple[str, int]]) -> None:
    errors = run(HealthMonitor(), {"t": ProbeSpec("t", protocol, address, trap.port)})
    assert errors["t"].startswith("not probed: ") and "--probe-allow-ranges" in errors["t"]
    assert trap.connections == [] and connects == []


@pytest.mark.parametrize("protocol", ["TCP", "HTTP", "HTTPS"])
def test_metadata_by_name_or_address_is_refused_and_never_connected(protocol: str,
                                                                    connects: list[tuple[str, int]]) -> None:
    async def resolver(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
        return {"metadata.google.internal": [(socket.AF_INET, "169.254.169.254")],
                "imds.test": [(socket.AF_INET6, "fd00:ec2::254")]}[host]

    specs = {name: ProbeSpec(name, protocol, name, 80) for name in ("metadata.google.internal", "imds.test")}
    specs["literal"] = ProbeSpec("literal", protocol, "169.254.169.254", 80)
    specs["azure"] = ProbeSpec("azure", protocol, "168.63.129.16", 80)
    errors = run(HealthMonitor(resolver=resolver), specs)
    for tid, error in errors.items():
        assert "cloud metadata address" in error and error.startswith("not probed: "), (tid, error)
    assert connects == []


def test_an_allowed_range_is_probed() -> None:
    server = RecordingServer("127.0.0.2")
    try:
        errors = run(HealthMonitor(reach=ProbeReach.parse("127.0.0.2/32")),
                     {"ok": ProbeSpec("ok", "HTTP", "127.0.0.2", server.port),
                      "no": ProbeSpec("no", "HTTP", "127.0.0.3", server.port)})
    finally:
        server.stop()
    assert errors["ok"] == "" and len(server.connections) >= 4
    assert "127.0.0.3 is a loopback address" in errors["no"]


def test_a_name_is_judged_by_what_it_resolves_to_at_each_probe_and_that_address_is_connected(
        trap: RecordingServer, connects: list[tuple[str, int]]) -> None:
    """DNS rebinding: the name answers an allowed address, then a forbidden one, in turn.  Each
    probe checks the address it got and connects to that same address: the forbidden one never
    sees a connection, the allowed one does."""
    allowed = RecordingServer("127.0.0.2")
    answers: list[str] = []

    async def rebinding(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
        answer = "127.0.0.2" if len(answers) % 2 == 0 else "127.0.0.1"
        answers.append(answer)
        return [(socket.AF_INET, answer)]

    monitor = HealthMonitor(resolver=rebinding, reach=ProbeReach.parse("127.0.0.2/32"))
    seen_errors: set[str] = set()

    def on_change(tid: str, old: Any, new: Any) -> None:
        seen_errors.add(new.last_error)

    monitor._on_change = on_change
    try:
        # both servers listen on the same port number where they can: the answer alone decides
        errors = run(monitor, {"t": ProbeSpec("t", "HTTP", "rebind.test", allowed.port)}, rounds=8)
    finally:
        allowed.stop()
    assert len(answers) >= 8 and "127.0.0.1" in answers
    hosts = [host for host, _ in connects]
    assert set(hosts) == {"127.0.0.2"} and hosts.count("127.0.0.2") == answers.count("127.0.0.2")
    assert len(allowed.connections) == answers.count("127.0.0.2")
    assert any("127.0.0.1 is a loopback address" in e for e in {*seen_errors, *errors.values()})
    assert monitor.snapshot()["t"].state in (State.HEALTHY, State.UNHEALTHY)


def test_every_probe_connection_goes_through_the_gate() -> None:
    """The prober's source: one ``sock_connect`` and one ``open_connection``, both to the address
    `Prober.destination` returned, and nothing else connects."""
    modules = sorted(Path(probes.__file__).parent.glob("*.py"))  # every module of the package
    assert len(modules) >= 5
    nodes = [n for path in modules for n in ast.walk(ast.parse(path.read_text()))]
    names = ("sock_connect", "open_connection", "create_connection", "connect", "connect_ex")
    connecting = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and n.func.attr in names]
    assert sorted(ast.unparse(c.func).rsplit(".", 1)[1] for c in connecting) == ["open_connection", "sock_connect"]
    attempt = next(n for n in nodes if isinstance(n, ast.AsyncFunctionDef) and n.name == "_attempt")
    assert "family, address = await self.destination(target)" in ast.unparse(attempt)
    for call in connecting:
        where = call.args[0] if ast.unparse(call.func).endswith("open_connection") else call.args[1]
        assert "address" in ast.unparse(where)
