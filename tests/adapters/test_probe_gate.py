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
import asyncio
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters import probes
from gitdns.adapters.probes import HealthMonitor
from gitdns.core.health import HealthSettings, ProbeSpec, State
from gitdns.core.reach import ProbeReach

FAST = HealthSettings(interval=0.05, timeout=1.0, failure_threshold=1, success_threshold=1)


class Recorder:
    """An HTTP server on ``ip`` recording every connection it accepts."""

    def __init__(self, ip: str) -> None:
        self.connections = 0
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def server_bind(self) -> None:
                socketserver.TCPServer.server_bind(self)

            def verify_request(self, request: Any, client_address: Any) -> bool:
                rec.connections += 1
                return True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.httpd = Server((ip, 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    sock_connect = asyncio.selector_events.BaseSelectorEventLoop.sock_connect
    open_connection = asyncio.open_connection

    def check(host: str) -> None:
        seen.append(host)
        if not (host.startswith("127.") or host == "::1"):
            raise ConnectionRefusedError("outside loopback: refused by the test")

    async def spy_sock(loop: Any, sock: Any, address: Any) -> None:
        check(str(address[0]))
        await sock_connect(loop, sock, address)

    async def spy_open(host: str, *args: Any, **kwargs: Any) -> Any:
        check(str(host))
        return await open_connection(host, *args, **kwargs)

    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "sock_connect", spy_sock)
    monkeypatch.setattr(asyncio, "open_connection", spy_open)  # the prober calls asyncio.open_connection
    return seen


@pytest.fixture
def trap() -> Iterator[Recorder]:
    server = Recorder("127.0.0.1")
    yield server
    server.stop()


def wait_until(cond: Callable[[], bool], deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


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
def test_a_loopback_target_is_refused_before_connecting(protocol: str, address: str, trap: Recorder,
                                                       connects: list[str]) -> None:
    errors = run(HealthMonitor(), {"t": ProbeSpec("t", protocol, address, trap.port)})
    assert errors["t"].startswith("not probed: ") and "--probe-allow-ranges" in errors["t"]
    assert trap.connections == 0 and connects == []


@pytest.mark.parametrize("protocol", ["TCP", "HTTP", "HTTPS"])
def test_metadata_by_name_or_address_is_refused_and_never_connected(protocol: str, connects: list[str]) -> None:
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
    server = Recorder("127.0.0.2")
    try:
        errors = run(HealthMonitor(reach=ProbeReach.parse("127.0.0.2/32")),
                     {"ok": ProbeSpec("ok", "HTTP", "127.0.0.2", server.port),
                      "no": ProbeSpec("no", "HTTP", "127.0.0.3", server.port)})
    finally:
        server.stop()
    assert errors["ok"] == "" and server.connections >= 4
    assert "127.0.0.3 is a loopback address" in errors["no"]


def test_a_name_is_judged_by_what_it_resolves_to_at_each_probe_and_that_address_is_connected(
        trap: Recorder, connects: list[str]) -> None:
    """DNS rebinding: the name answers an allowed address, then a forbidden one, in turn.  Each
    probe checks the address it got and connects to that same address: the forbidden one never
    sees a connection, the allowed one does."""
    allowed = Recorder("127.0.0.2")
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
    assert set(connects) == {"127.0.0.2"} and connects.count("127.0.0.2") == answers.count("127.0.0.2")
    assert allowed.connections == answers.count("127.0.0.2")
    assert any("127.0.0.1 is a loopback address" in e for e in {*seen_errors, *errors.values()})
    assert monitor.snapshot()["t"].state in (State.HEALTHY, State.UNHEALTHY)


def test_every_probe_connection_goes_through_the_gate() -> None:
    """The prober's source: one ``sock_connect`` and one ``open_connection``, both to the address
    `Prober.destination` returned, and nothing else connects."""
    tree = ast.parse(Path(probes.__file__).read_text())
    names = ("sock_connect", "open_connection", "create_connection", "connect", "connect_ex")
    connecting = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and n.func.attr in names]
    assert sorted(ast.unparse(c.func).rsplit(".", 1)[1] for c in connecting) == ["open_connection", "sock_connect"]
    attempt = next(n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef) and n.name == "_attempt")
    assert "family, address = await self.destination(target)" in ast.unparse(attempt)
    for call in connecting:
        where = call.args[0] if ast.unparse(call.func).endswith("open_connection") else call.args[1]
        assert "address" in ast.unparse(where)
