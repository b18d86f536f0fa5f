"""HTTP keep-alive in the prober (`gitdns.adapters.probes`): kept connections are reused per
(address, port), never when the answer forbids it, dropped when the peer closes, resets or stops
answering, and a probe on a kept connection still goes through the connection gate.

The servers are real sockets on loopback addresses, scripted per request: answer (keeping or
closing), close without answering, hang, answer late, stop in the middle of an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.adapters.probes import BODY_LIMIT, HealthMonitor, Prober, _Conn, _Target, body_length
from gitdns.core.health import HealthSettings, ProbeSpec, State
from gitdns.core.reach import ProbeReach
from tests.probe_kit import wait_until
from tests.serve_kit import ServerThread, read_head

LOOPBACK = ProbeReach.parse("127.0.0.0/8")
FAST = HealthSettings(interval=0.1, timeout=0.5, failure_threshold=2, success_threshold=1)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
OK_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

# what the server does with one request: answer (and keep or close), close at once, hang, or
# answer after a delay; (connection number, request number on it) -> action
Action = tuple[str, bytes, float]
Script = Callable[[int, int], Action]


def keep(_c: int, _r: int) -> Action:
    return ("answer", OK, 0.0)


@dataclass
class ScriptedServer:
    """An HTTP server on ``ip`` whose every answer ``script`` decides; counts connections and
    requests (and records the request lines).  Its threads are `tests.serve_kit.ServerThread`'s:
    `stop` leaves no listener and no thread behind."""

    ip: str
    script: Script = keep
    port: int = 0
    requests: list[tuple[int, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.server = ServerThread(self._serve, self.ip, self.port, name="scripted", reuse_address=True)
        self.port = self.server.port
        self.stopped = self.server.stopped

    @property
    def connections(self) -> int:
        return self.server.connections

    def _serve(self, conn: socket.socket, number: int) -> None:
        """One connection's requests; returning closes it."""
        buf = b""
        served = 0
        while not self.stopped.is_set():
            got = read_head(conn, buf)
            if got is None:
                return
            head, buf = got
            with self.lock:
                self.requests.append((number, head.split(b"\r\n", 1)[0]))
            kind, answer, delay = self.script(number, served)
            served += 1
            if kind == "close":
                return
            if kind == "hang":
                self.stopped.wait()
                return
            if delay:
                time.sleep(delay)
            if kind == "half":  # part of the answer, then silence with the connection open
                conn.sendall(answer)
                self.stopped.wait()
                return
            conn.sendall(answer)
            if kind == "answer-close":
                return
            if kind == "answer-linger":  # an idle timeout: closed a moment after the answer
                time.sleep(0.03)
                return

    def stop(self) -> None:
        """Stop listening and close every connection (as a process that exits): `ServerThread.stop`
        (the port refuses connections once it returns and no thread of this server is left)."""
        self.server.stop()


@pytest.fixture
def servers() -> Iterator[list[ScriptedServer]]:
    made: list[ScriptedServer] = []
    yield made
    for server in made:
        server.stop()


def serve(made: list[ScriptedServer], script: Script = keep, ip: str = "127.0.0.1", port: int = 0) -> ScriptedServer:
    server = ScriptedServer(ip, script, port)
    made.append(server)
    return server


@pytest.fixture
def monitor() -> Iterator[HealthMonitor]:
    m = HealthMonitor(reach=LOOPBACK)
    yield m
    m.stop()


def spec(tid: str, port: int, address: str = "127.0.0.1", timeout: float = FAST.timeout) -> ProbeSpec:
    return ProbeSpec(tid, "HTTP", address, port, path=f"/{tid}", timeout=timeout)


def checks(m: HealthMonitor, tid: str) -> int:
    h = m.snapshot().get(tid)
    return 0 if h is None else h.checks


def run(m: HealthMonitor, specs: dict[str, ProbeSpec], rounds: int, s: HealthSettings = FAST) -> None:
    m.set_targets({tid: (sp, s) for tid, sp in specs.items()})
    m.start()
    wait_until(lambda: all(checks(m, tid) >= rounds for tid in specs))


def test_a_stopped_server_leaves_no_listener_and_no_thread(servers: list[ScriptedServer]) -> None:
    """After `ScriptedServer.stop` its port refuses connections and its threads have ended (its
    listening socket, closed under the thread blocked in accept(), listened on, and that thread
    later accepted the connections of another test's server on the reused descriptor)."""
    server = serve(servers)
    with socket.create_connection((server.ip, server.port), timeout=5) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(4096) == OK
        server.stop()  # with the connection open: its thread is blocked in recv()
        assert conn.recv(4096) == b""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((server.ip, server.port), timeout=5).close()
    assert not [t.name for t in threading.enumerate() if t.name.startswith(f"{server.server.name} ")]


# -- reuse -------------------------------------------------------------------------------------


def test_one_connection_serves_every_probe_of_targets_on_the_same_address_and_port(
        monitor: HealthMonitor, servers: list[ScriptedServer]) -> None:
    server = serve(servers)
    run(monitor, {"a": spec("a", server.port), "b": spec("b", server.port)}, rounds=8)
    assert len(server.requests) >= 16
    assert server.connections <= 2  # the two targets' first probes may overlap; then one is kept
    assert {h.state for h in monitor.snapshot().values()} == {State.HEALTHY}
    assert {line for _, line in server.requests} == {b"GET /a HTTP/1.1", b"GET /b HTTP/1.1"}


def test_first_probes_of_new_targets_reuse_a_kept_connection_too(monitor: HealthMonitor,
                                                                  servers: list[ScriptedServer]) -> None:
    """A target's first probe goes through the connection gate, then takes a connection kept by
    another target to the same address and port: twenty targets need far fewer connections."""
    server = serve(servers)
    slow = HealthSettings(interval=1.0, timeout=0.5, failure_threshold=2, success_threshold=1)
    run(monitor, {f"t{i}": spec(f"t{i}", server.port) for i in range(20)}, rounds=2, s=slow)
    assert len(server.requests) >= 40
    assert server.connections <= 10, server.connections


def test_no_reuse_when_keep_alive_is_off(servers: list[ScriptedServer]) -> None:
    server = serve(servers)
    m = HealthMonitor(reach=LOOPBACK, max_idle=0)
    try:
        run(m, {"a": spec("a", server.port)}, rounds=4)
    finally:
        m.stop()
    assert server.connections == len(server.requests) >= 4


@pytest.mark.parametrize("answer", [
    ("answer", OK_CLOSE, 0.0),  # says Connection: close, and closes
    ("answer-close", OK, 0.0),  # says nothing, closes after the answer
    ("answer", b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0.0),  # HTTP/1.0: closed by the prober
    ("answer-close", b"HTTP/1.1 200 OK\r\n\r\nok", 0.0),  # body until the close: never kept
    ("answer-close", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 0.0),
])
def test_a_server_closing_after_each_answer_is_healthy_on_a_new_connection_each_time(
        monitor: HealthMonitor, servers: list[ScriptedServer], answer: Action) -> None:
    server = serve(servers, lambda c, r: answer)
    run(monitor, {"a": spec("a", server.port)}, rounds=6)
    h = monitor.snapshot()["a"]
    assert h.state is State.HEALTHY and h.failures == 0, h
    assert server.connections == len(server.requests)  # one request per connection


def test_a_server_closing_kept_connections_while_idle_never_fails_a_probe(
        monitor: HealthMonitor, servers: list[ScriptedServer]) -> None:
    """Keep-alive answers, then the server closes the connection a moment later (an idle timeout
    shorter than the interval): the prober sees the close while idle and connects anew."""

    server = serve(servers, lambda c, r: ("answer-linger", OK, 0.0))
    slow = HealthSettings(interval=0.15, timeout=0.5, failure_threshold=1, success_threshold=1)
    run(monitor, {"a": spec("a", server.port)}, rounds=6, s=slow)
    h = monitor.snapshot()["a"]
    assert h.state is State.HEALTHY and h.failures == 0 and h.successes == h.checks, h


def test_a_kept_connection_closed_under_the_request_is_tried_once_more_on_a_new_one(
        monitor: HealthMonitor, servers: list[ScriptedServer]) -> None:
    """The server's idle close racing the next request: the second request on every connection
    is dropped unanswered.  Each such probe is sent again on a new connection and answered; no
    probe fails."""

    def script(c: int, r: int) -> Action:
        return ("close", b"", 0.0) if r == 1 else ("answer", OK, 0.0)

    server = serve(servers, script)
    run(monitor, {"a": spec("a", server.port)}, rounds=6)
    h = monitor.snapshot()["a"]
    assert h.state is State.HEALTHY and h.failures == 0 and h.successes == h.checks, h
    assert server.connections >= 3


def test_a_new_connection_closed_unanswered_is_a_failure(monitor: HealthMonitor,
                                                          servers: list[ScriptedServer]) -> None:
    server = serve(servers, lambda c, r: ("close", b"", 0.0))
    run(monitor, {"a": spec("a", server.port)}, rounds=3)
    h = monitor.snapshot()["a"]
    assert h.state is State.UNHEALTHY and h.last_error == "connection closed before the status line"


# -- down is seen ------------------------------------------------------------------------------


def down_within(m: HealthMonitor, tid: str, s: HealthSettings, timeout: float) -> float:
    """Seconds until ``tid`` is unhealthy; fails past interval x threshold + timeout (+ slack for a
    shared machine)."""
    start = time.monotonic()
    limit = s.interval * s.failure_threshold + timeout + 1.0
    wait_until(lambda: m.snapshot()[tid].state is State.UNHEALTHY, deadline=limit)
    return time.monotonic() - start


@pytest.mark.parametrize("mode", ["hang", "half", "slow"])
def test_a_server_that_stops_answering_on_a_kept_connection_is_seen_down_in_time(
        monitor: HealthMonitor, servers: list[ScriptedServer], mode: str) -> None:
    """Answers on one kept connection, then: hangs (reads, never answers), sends half an answer
    and stops, or answers later than the timeout.  Every probe after that times out."""
    switch = threading.Event()

    def script(c: int, r: int) -> Action:
        if not switch.is_set():
            return ("answer", OK, 0.0)
        if mode == "half":
            return ("half", b"HTTP/1.1 2", 0.0)
        if mode == "slow":
            return ("answer", OK, 1.5)
        return ("hang", b"", 0.0)

    server = serve(servers, script)
    run(monitor, {"a": spec("a", server.port)}, rounds=3)
    assert server.connections == 1
    switch.set()
    down_within(monitor, "a", FAST, FAST.timeout)
    assert monitor.snapshot()["a"].last_error == "timeout after 0.5s"


def test_a_body_that_stops_midway_keeps_the_status_but_not_the_connection(
        monitor: HealthMonitor, servers: list[ScriptedServer]) -> None:
    """The status line decides the probe; an answer whose body never ends is not a connection
    to send the next request on."""
    server = serve(servers, lambda c, r: ("half", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok", 0.0))
    run(monitor, {"a": spec("a", server.port)}, rounds=4)
    assert monitor.snapshot()["a"].state is State.HEALTHY
    assert server.connections == len(server.requests) >= 4


def test_a_server_that_exits_is_seen_down_in_time(monitor: HealthMonitor, servers: list[ScriptedServer]) -> None:
    """Refused, as a port nobody listens on is.  ("connection closed before the status line" was
    accepted too while `stop` closed the listening socket under its accepting thread: the next
    connection was still accepted, by that thread, and closed unanswered.)"""
    server = serve(servers)
    run(monitor, {"a": spec("a", server.port)}, rounds=3)
    server.stop()  # closes the kept connection and stops listening: refused from now on
    down_within(monitor, "a", FAST, FAST.timeout)
    assert monitor.snapshot()["a"].last_error == "connection refused"


def test_a_server_that_sends_unasked_bytes_on_an_idle_connection_loses_it(
        monitor: HealthMonitor, servers: list[ScriptedServer]) -> None:
    """Two answers to one request: the second arrives on an idle connection, which is then not
    in a known state and is closed; probes go on healthy on new connections."""
    server = serve(servers, lambda c, r: ("answer", OK + OK, 0.0))
    run(monitor, {"a": spec("a", server.port)}, rounds=4)
    assert monitor.snapshot()["a"].failures == 0
    assert server.connections == len(server.requests)


# -- the connection gate on reuse -------------------------------------------------------------


def test_a_name_that_moves_never_reuses_the_connection_to_its_old_address(servers: list[ScriptedServer]) -> None:
    """The name resolves to .2, then .3 (allowed), then .1 (refused): each probe connects only
    where the name resolves now; the kept connection to .2 serves no probe after the move, and
    nothing reaches .1."""
    old = serve(servers, ip="127.0.0.2")
    new = serve(servers, ip="127.0.0.3", port=old.port)
    trap = serve(servers, ip="127.0.0.1", port=old.port)
    answer = ["127.0.0.2"]

    async def resolver(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
        return [(socket.AF_INET, answer[0])]

    m = HealthMonitor(resolver=resolver, reach=ProbeReach.parse("127.0.0.2/32,127.0.0.3/32"))
    try:
        run(m, {"a": spec("a", old.port, address="moving.test")}, rounds=4)
        assert old.connections == 1 and len(old.requests) >= 4  # kept and reused
        before = len(old.requests)
        answer[0] = "127.0.0.3"
        seen = checks(m, "a")
        wait_until(lambda: checks(m, "a") >= seen + 4)
        assert len(old.requests) <= before + 1  # at most the probe in flight at the move
        assert new.connections == 1 and len(new.requests) >= 3
        answer[0] = "127.0.0.1"
        wait_until(lambda: m.snapshot()["a"].state is State.UNHEALTHY)
        moved = len(new.requests)
        seen = checks(m, "a")
        wait_until(lambda: checks(m, "a") >= seen + 3)
        assert len(new.requests) == moved  # the kept connection to .3 is not where the name points now
        assert "127.0.0.1 is a loopback address" in m.snapshot()["a"].last_error
    finally:
        m.stop()
    assert trap.connections == 0 and trap.requests == []


# -- properties ------------------------------------------------------------------------------


HEADERS = st.lists(st.sampled_from([
    b"Content-Length: 2", b"content-length:2", b"Content-Length: 3", b"Connection: close", b"Connection: keep-alive",
    b"Transfer-Encoding: chunked", b"Server: x", b"Date: Mon, 01 Jan 2024 00:00:00 GMT", b"X-Odd:",
]), max_size=4)


@given(version=st.sampled_from([b"HTTP/1.1", b"HTTP/1.0"]), code=st.sampled_from([b"200", b"204", b"304", b"101",
                                                                                   b"503"]), headers=HEADERS)
def test_body_length_keeps_only_a_clear_http11_answer(version: bytes, code: bytes, headers: list[bytes]) -> None:
    head = b"\r\n".join([version + b" " + code + b" X", *headers])
    got = body_length(head)
    lengths = {int(h.split(b":")[1]) for h in headers if h.lower().startswith(b"content-length")}
    lowered = [h.lower() for h in headers]
    never = (version != b"HTTP/1.1" or code == b"101" or any(h.startswith(b"transfer-encoding") for h in lowered)
             or b"connection: close" in lowered or len(lengths) > 1)
    if never:
        assert got is None
    elif lengths:
        assert got == lengths.pop()
    else:
        assert got == (0 if code in (b"204", b"304") else None)


def test_body_length_refuses_a_body_too_long_to_drain() -> None:
    assert body_length(f"HTTP/1.1 200 OK\r\nContent-Length: {BODY_LIMIT + 1}".encode()) is None
    assert body_length(f"HTTP/1.1 200 OK\r\nContent-Length: {BODY_LIMIT}".encode()) == BODY_LIMIT
    assert body_length(b"HTTP/1.1 200 OK\r\nContent-Length: -1") is None
    assert body_length(b"HTTP/1.1 200 OK\r\nno colon") is None


ANSWERS = st.sampled_from([
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "", True),
    (b"HTTP/1.1 200 OK\r\nServer: a\r\nContent-Length: 0\r\n\r\n", "", True),
    (b"HTTP/1.1 204 No Content\r\n\r\n", "status 204", True),
    (b"HTTP/1.1 503 Unavailable\r\nContent-Length: 4\r\n\r\ndown", "status 503", True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "", False),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok+more", "", False),  # more than the answer
    (b"SSH-2.0-OpenSSH_9.6\r\n", "malformed status line", False),
])


async def no_names(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
    raise socket.gaierror(socket.EAI_NONAME, "no names here")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=ANSWERS, cuts=st.lists(st.integers(min_value=1, max_value=60), max_size=5))
def test_an_answer_in_any_pieces_decides_the_same_and_keeps_the_connection_only_when_allowed(
        answer: tuple[bytes, str, bool], cuts: list[int]) -> None:
    """A real socket pair on the loop: the answer arrives cut at arbitrary places; the probe's
    result and whether its connection is kept do not depend on the cuts."""
    data, error, kept = answer

    async def main() -> tuple[list[str], bool]:
        loop = asyncio.get_running_loop()
        results: list[str] = []
        prober = Prober(no_names, None, LOOPBACK, done=lambda t, e: results.append(e))
        prober.bind(loop)
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        conn = _Conn(prober, ours, ("127.0.0.1", 80))
        target = _Target("t", ProbeSpec("t", "HTTP", "127.0.0.1", 80), FAST)
        assert conn.start(target, loop.time() + 5.0) == ""
        assert theirs.recv(4096).startswith(b"GET / HTTP/1.1\r\n")
        pieces, rest = [], data
        for cut in cuts:
            pieces.append(rest[:cut])
            rest = rest[cut:]
        pieces.append(rest)
        for piece in (p for p in pieces if p):
            with contextlib.suppress(OSError):  # the prober may have closed already (an answer not kept)
                theirs.sendall(piece)
            await asyncio.sleep(0.002)
        for _ in range(50):
            if results and (conn.phase in (0, 4)):
                break
            await asyncio.sleep(0.002)
        is_kept = prober.idle_count == 1
        prober.close_all()
        theirs.close()
        return results, is_kept

    results, is_kept = asyncio.run(main())
    assert results == [error]
    assert is_kept is kept
