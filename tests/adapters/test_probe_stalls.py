"""Stalls of the prober's event loop (`gitdns.adapters.probes`): a timeout observed after the loop
did not run is inconclusive, not a failure; a black hole is still withdrawn (after its failure
threshold of on-time timeouts, or anyway after that many consecutive inconclusive ones); a round
that overruns its slot by less than an interval starts the next one late instead of skipping it.

The stalls are made on purpose: a callback on the monitor's loop blocks it (``time.sleep``) while
probes are in flight, against real loopback servers (one that answers, one that never does).
Nothing here asserts how long anything took.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from gitdns.adapters.probes import TICK, HealthMonitor
from gitdns.core.health import HealthSettings, ProbeSpec, State, TargetHealth
from gitdns.core.reach import ProbeReach
from tests.probe_kit import wait_until
from tests.serve_kit import ServerThread, read_head

LOOPBACK = ProbeReach.parse("127.0.0.0/8")
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
STALL = 0.5  # seconds the loop is blocked: longer than any interval plus timeout here


class HeldServer:
    """An HTTP/1.1 server on 127.0.0.1 that keeps its connections and answers every request after
    ``delay``, except while held (the whole machine stalled): a request waiting then is answered
    only once released.  ``pending``: requests read and not answered yet."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.cond = threading.Condition()
        self.held = False
        self.pending = 0
        self.stopped = False
        self.server = ServerThread(self._serve, name="held", backlog=128)
        self.port = self.server.port

    def _serve(self, conn: socket.socket, _number: int) -> None:
        buf = b""
        while not self.stopped:
            got = read_head(conn, buf)
            if got is None:
                return
            buf = got[1]
            with self.cond:
                self.pending += 1
            time.sleep(self.delay)
            with self.cond:
                self.cond.wait_for(lambda: not self.held or self.stopped)
                self.pending -= 1
                conn.sendall(OK)

    def hold(self) -> int:
        """Hold every answer from now on; the requests then waiting (none: not held)."""
        with self.cond:
            if self.pending:
                self.held = True
            return self.pending

    def release(self) -> None:
        with self.cond:
            self.held = False
            self.cond.notify_all()

    def stop(self) -> None:
        """Every waiting answer let go, then `ServerThread.stop`: no listener, no thread left."""
        self.stopped = True
        self.release()
        self.server.stop()


class BlackHole:
    """A listening socket nobody accepts on: connections complete (the kernel's backlog), requests
    are never answered."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]

    def stop(self) -> None:
        self.sock.close()


@pytest.fixture
def held() -> Iterator[HeldServer]:
    server = HeldServer()
    yield server
    server.stop()


@pytest.fixture
def hole() -> Iterator[BlackHole]:
    server = BlackHole()
    yield server
    server.stop()


def spec(tid: str, port: int, timeout: float) -> ProbeSpec:
    return ProbeSpec(tid, "HTTP", "127.0.0.1", port, path=f"/{tid}", timeout=timeout)


def on_loop(m: HealthMonitor, fn: Callable[[], None]) -> None:
    loop = m._loop
    assert loop is not None
    loop.call_soon_threadsafe(fn)


class Changes:
    """``on_change`` recorder; also keeps the monitor's stats at each change (taken on its thread)."""

    def __init__(self) -> None:
        self.monitor: HealthMonitor | None = None
        self.seen: list[tuple[str, TargetHealth, int]] = []

    def __call__(self, tid: str, _old: TargetHealth, new: TargetHealth) -> None:
        assert self.monitor is not None
        self.seen.append((tid, new, self.monitor.stats().stalled))

    def went(self, tid: str, state: State) -> list[tuple[TargetHealth, int]]:
        return [(h, stalled) for t, h, stalled in self.seen if t == tid and h.state is state]


def make(changes: Changes) -> HealthMonitor:
    m = HealthMonitor(on_change=changes, reach=LOOPBACK)
    changes.monitor = m
    return m


def machine_stall(m: HealthMonitor, held: HeldServer) -> None:
    """Stall "the machine" once, while at least one request is waiting for its answer: hold the
    server's answers and block the monitor's loop for `STALL`; release the answers only after
    the loop has run the deadlines that passed meanwhile."""
    loop = m._loop
    assert loop is not None
    done = threading.Event()

    def stall() -> None:
        if not held.hold():  # no answer outstanding right now: try again shortly
            loop.call_later(0.005, stall)
            return
        time.sleep(STALL)  # the loop does not run: every deadline in flight passes
        # timers due earlier (the overdue deadlines) run before these
        loop.call_at(loop.time(), held.release)
        loop.call_at(loop.time(), done.set)

    loop.call_soon_threadsafe(stall)
    assert done.wait(10)


def test_a_stall_of_the_whole_machine_withdraws_no_healthy_target(held: HeldServer) -> None:
    """Answers held while the loop is blocked (the machine stalled): every probe in flight then
    times out long after its deadline.  None counts: no failure, no healthy target withdrawn."""
    changes = Changes()
    m = make(changes)
    settings = HealthSettings(interval=0.2, timeout=0.15, failure_threshold=1, success_threshold=1)
    tids = [f"n{i}" for i in range(20)]
    try:
        m.set_targets({tid: (spec(tid, held.port, 0.15), settings) for tid in tids})
        m.start()
        wait_until(lambda: all(h.state is State.HEALTHY for h in m.snapshot().values()) and len(m.snapshot()) == 20)
        for _ in range(2):
            before = {tid: h.checks for tid, h in m.snapshot().items()}
            machine_stall(m, held)

            def probed_twice_more(before: dict[str, int] = before) -> bool:  # on-time results again
                return all(m.snapshot()[tid].checks > before[tid] + 1 for tid in tids)

            wait_until(probed_twice_more)
        assert m.stats().stalled >= 2  # at least one probe in flight at each stall
        assert not any(h.state is State.UNHEALTHY for _, h, _ in changes.seen)
        assert all(h.state is State.HEALTHY and h.failures == 0 for h in m.snapshot().values())
    finally:
        m.stop()


def test_a_black_hole_is_withdrawn_after_its_failure_threshold(hole: BlackHole, held: HeldServer) -> None:
    """Timeouts seen on time count: the black hole goes unhealthy at its F-th failed probe; the
    answering target beside it stays healthy."""
    changes = Changes()
    m = make(changes)
    settings = HealthSettings(interval=0.2, timeout=0.1, failure_threshold=2, success_threshold=1)
    held.delay = 0.0
    try:
        m.set_targets({"hole": (spec("hole", hole.port, 0.1), settings), "ok": (spec("ok", held.port, 0.1), settings)})
        m.start()
        wait_until(lambda: bool(changes.went("hole", State.UNHEALTHY)))
        (h, _), *_ = changes.went("hole", State.UNHEALTHY)
        assert h.failures == 2
        assert h.last_error == "timeout after 0.1s"
        assert m.snapshot()["ok"].state is State.HEALTHY
    finally:
        m.stop()


def test_a_black_hole_is_withdrawn_anyway_after_consecutive_stalls(hole: BlackHole) -> None:
    """The loop stalls during every probe (a machine overloaded for good): the first F timeouts
    are inconclusive, each probed again at once; the ones after them count, so the black hole is
    still withdrawn after F more."""
    changes = Changes()
    m = make(changes)
    settings = HealthSettings(interval=0.2, timeout=0.1, failure_threshold=2, success_threshold=1)
    stop = threading.Event()
    try:
        m.set_targets({"hole": (spec("hole", hole.port, 0.1), settings)})
        m.start()
        loop = m._loop
        assert loop is not None

        def stall_while_probing() -> None:
            if stop.is_set():
                return
            if m._prober.expiring:  # the black hole's request is out: block past its deadline
                time.sleep(0.3)
            loop.call_later(0.005, stall_while_probing)

        on_loop(m, stall_while_probing)
        wait_until(lambda: bool(changes.went("hole", State.UNHEALTHY)))
        stop.set()
        (h, stalled), *_ = changes.went("hole", State.UNHEALTHY)
        assert stalled == settings.failure_threshold  # N = F inconclusive first ...
        assert h.failures == settings.failure_threshold  # ... then F counted
        assert h.checks == settings.failure_threshold  # inconclusive probes are not recorded
    finally:
        stop.set()
        m.stop()


def test_an_inconclusive_probe_changes_nothing_and_goes_again_at_the_next_tick(hole: BlackHole) -> None:
    """One stall during a probe: its timeout leaves the target as it was and the target is due
    again at once (before its next slot), its slot kept."""
    m = HealthMonitor(reach=LOOPBACK)
    settings = HealthSettings(interval=10.0, timeout=0.1, failure_threshold=2, success_threshold=1)
    try:
        m.set_targets({"hole": (spec("hole", hole.port, 0.1), settings)})
        m.start()
        loop = m._loop
        assert loop is not None
        target = m._targets["hole"]
        found: list[tuple[float, float, int, int]] = []
        done = threading.Event()

        def stall_while_probing() -> None:
            if not m._prober.expiring:  # the request is not out yet (its deadline not on the wheel)
                loop.call_later(0.005, stall_while_probing)
                return
            slot = target.due
            time.sleep(0.3)
            loop.call_at(loop.time(), look, slot)  # after the overdue deadline (due earlier)

        def look(slot: float) -> None:
            ticks = [tick for tick, due in m._wheel.items() if target in due]
            found.append((slot, target.due, min(ticks), math.ceil(loop.time() / TICK)))
            done.set()

        on_loop(m, stall_while_probing)
        assert done.wait(25)  # the first round starts anywhere in the 10 s interval, then a 0.3 s stall
        slot, due_now, tick, now_tick = found[0]
        assert due_now == slot  # the slot (the schedule's phase) is kept
        assert tick <= now_tick + 1  # due again at the next tick, not at slot + interval
        assert m.stats().stalled == 1
        assert m.snapshot()["hole"].checks == 0  # nothing recorded
        assert m.snapshot()["hole"].state is State.UNKNOWN
    finally:
        m.stop()


def test_a_round_overrunning_its_slot_by_less_than_an_interval_is_not_skipped(hole: BlackHole) -> None:
    """Timeout = interval: every probe of a black hole ends just after its next slot began.  The
    next round starts then, late, instead of skipping a whole interval."""
    changes = Changes()
    m = make(changes)
    settings = HealthSettings(interval=0.3, timeout=0.3, failure_threshold=3, success_threshold=1)
    try:
        m.set_targets({"hole": (spec("hole", hole.port, 0.3), settings)})
        m.start()
        wait_until(lambda: bool(changes.went("hole", State.UNHEALTHY)))
        stats = m.stats()
        assert stats.skipped_slots == 0
        assert stats.completed >= 3
    finally:
        m.stop()
