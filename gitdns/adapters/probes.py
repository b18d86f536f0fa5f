"""Health probes: a callback-driven prober on its own event loop in a daemon thread.

    monitor = HealthMonitor(on_change=lambda tid, old, new: ...)
    monitor.set_targets({tid: (ProbeSpec(...), HealthSettings(...)), ...})  # any time, any thread
    monitor.start()
    monitor.snapshot()  # {target_id: TargetHealth}
    monitor.stop()

Each target runs on its own fixed-rate schedule (``interval``), first started at a random
phase inside its interval so that 10,000 targets do not fire together.  The schedule is a
timer wheel: targets due in the same `TICK` wait in one list behind one ``loop.call_at``
(no task, future, coroutine or timer handle per target and round); a round starts at most a
`TICK` after it is due.  A round that overruns its slot by less than an interval starts the next
one late, as soon as it can (at the next tick); slots whose whole interval passed before a
round could start are skipped (counted in `stats`).  Probes:

- TCP: connect, then close.
- HTTP: a minimal hand-written HTTP/1.1 client with **keep-alive**: ``GET <path>``, ``Host``
  (the record's host, else the address), extra headers, the request bytes built once per
  target.  The status line decides the probe.  A connection is kept, per (address connected
  to, port), when the answer allows it (HTTP/1.1, no ``Connection: close``, a
  ``Content-Length`` body of at most `BODY_LIMIT` bytes, read whole within the probe's
  timeout); the next probe of any target to that same address and port sends its request on
  it.  A kept connection is a bare non-blocking socket registered for reading the whole time,
  so a peer that closes it or half-closes it (EOF), resets it, or sends unasked bytes while it
  is idle is seen at once and the connection dropped.  A probe whose request went on a
  kept connection that ended before the first byte of an answer (the server's idle close
  racing the request) is sent again, once, on a new connection, inside the same timeout;
  anything else that goes wrong is the probe's error as on a new connection.  Kept
  connections are bounded (`HealthMonitor`'s ``max_idle``, by default half the file limit),
  closed after `IDLE_MAX` seconds unused, and all closed by `stop`.
- HTTPS: asyncio streams with an ``ssl.SSLContext``, one connection per probe, verifying the
  certificate against ``ProbeSpec.tls_name`` (also the SNI) unless ``insecure``; the request
  carries ``Connection: close``.

Every probe, resolution included, is bounded by its timeout (``asyncio.timeout_at`` while
connecting, a deadline on a wheel like the schedule's while waiting for the answer: seen at
most a `TICK` late).  Hostnames are resolved by the
monitor's ``resolver``, at every probe: by default `system_resolver`, the system's
``getaddrinfo`` in the loop's executor (never blocking the loop); tests pass their own.

A timeout is only evidence when the loop was running to see the answer.  A *stall* is a wheel
tick (the schedule's or the deadlines') or a timeout observed later than its time; a probe's
timeout is **inconclusive** when a stall longer than ``max(STALL_MIN, timeout / 2)`` ended
between the probe's start and the moment its timeout was observed (the timeout's own lateness
included): the loop did not run for that long, and an answer may have sat unread.  An
inconclusive probe changes neither the target's state nor its counts (it is counted in
``stats().stalled``) and the target is probed again at the next tick, its schedule's phase
kept.  After ``failure_threshold`` consecutive inconclusive probes a target's late timeouts
count as failures again, until it gets a result that is not a late timeout, so a black-holed
target on a machine that stalls for good is still withdrawn.

Every connection goes through `Prober.destination`, the probes' connection gate: the address
connected to (an IP literal as given, or the first address a host name resolved to, at that
very probe) must pass `gitdns.core.reach.ProbeReach.refusal` with the operator's ranges
(``reach``: none by default), else the probe is not sent and its error says why — no loopback,
link-local, cloud metadata, unspecified, multicast or broadcast address is ever connected to
unless the operator allowed its range (``--probe-allow-ranges``).  The address checked is the
address connected to: no second resolution happens in between.  A kept connection is reused
only for a probe whose gate gave that same address: for an IP literal the gate's verdict is
the same at every probe (given once, at the target's first probe, which always goes through
`Prober.destination`; a refused literal is never sent on a kept connection), and a host name is resolved and
judged again at every probe, its connection looked up by the address it resolved to now — a
name that moved never reuses a connection to its old address.
A bound (``max_in_flight``) on probes in flight bounds the file descriptors of probes; a
round due while the bound is reached waits its turn.  Errors are short strings
built from the exception's kind, never from request data: header values (which may be
secrets) appear in no error and no log line.  ``on_change`` runs on the monitor's thread
whenever a target's *state* changes; it must be quick and thread-safe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import random
import resource
import socket
import ssl
import threading
import time
from array import array
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from gitdns.core.health import HealthSettings, ProbeSpec, TargetHealth, is_ip, observe, spec_error
from gitdns.core.reach import ProbeReach

log = logging.getLogger(__name__)

OnChange = Callable[[str, TargetHealth, TargetHealth], None]
# (hostname, port) -> the addresses to try, best first, each (family, address literal); raises
# socket.gaierror when the name does not resolve.  Called on the monitor's event loop.
Resolver = Callable[[str, int], Awaitable[Sequence[tuple[socket.AddressFamily, str]]]]
DEFAULT_MAX_IN_FLIGHT = 2048
STATUS_LINE_LIMIT = 1024  # bytes read for the status line
HEAD_LIMIT = 8192  # a longer response head is not read on: its connection is closed, not kept
BODY_LIMIT = 65536  # a longer body (Content-Length) is not read: its connection is closed, not kept
RECV_SIZE = 16384
TICK = 0.01  # seconds: the scheduler's granularity (targets due in one tick start together)
STALL_MIN = 0.05  # seconds: the least lateness of a tick or a timeout that is a stall of the loop
STALLS_KEPT = 64  # the latest stalls remembered (each one's end and length)
MAX_IDLE = 16384  # kept connections at most (also at most half the process's file limit)
IDLE_MAX = 60.0  # seconds a kept connection may stay unused before it is closed
USER_AGENT = "gitdns-probe/1"

# the phases of a kept connection
_IDLE, _STATUS, _HEAD, _BODY, _CLOSED = range(5)


@dataclass(frozen=True, slots=True)
class ProbeTiming:
    """The last round of one target: how long it took and when it ended (monitor clock)."""

    last_round_duration: float
    last_check_time: float


@dataclass(frozen=True, slots=True)
class MonitorStats:
    targets: int
    in_flight: int
    completed: int  # probes finished since start
    skipped_slots: int  # scheduled rounds not run because an earlier one overran
    max_start_lag: float  # the latest a round started after its due time (seconds)
    stalled: int = 0  # probes whose timeout was inconclusive: the loop stalled during them


class _Target:
    """One target on the monitor's loop: its probe, built once, and its schedule."""

    __slots__ = ("begun", "due", "duration", "ended", "ends", "error", "fast", "health", "host", "late", "live",
                 "refusal", "request_size", "resolve", "retry", "settings", "spec", "stalls", "started", "tid")

    def __init__(self, tid: str, spec: ProbeSpec, settings: HealthSettings) -> None:
        self.tid = tid
        self.spec = spec
        self.settings = settings
        # the request, built once (`request_parts`): its ends shared with other targets, the Host value its own
        head, self.host, tail = request_parts(spec)
        self.ends = _request_ends(spec.path, spec.protocol, spec.headers)
        self.request_size = len(head) + len(self.host) + len(tail)
        self.error = spec_error(spec)  # reported instead of probing
        self.resolve = not is_ip(spec.address)  # a host name: resolved (and judged) at every probe
        # an IP literal: the connection gate's verdict ("" allowed), the same at every probe (the reach is
        # fixed), given by `Prober.destination` at the target's first probe; None until then
        self.refusal: str | None = None
        self.fast = spec.protocol == "HTTP" and not self.resolve  # a kept connection may serve it directly
        self.health = TargetHealth()  # what is known of it (`observe`), read under the monitor's lock
        self.due = 0.0
        self.live = True  # False once removed or replaced: a round due or a probe in flight is then ignored
        self.started = 0.0
        self.duration = 0.0
        self.ended = 0.0
        self.begun = 0.0  # loop time the current probe started
        self.late = False  # the current probe timed out after a stall of the loop (`Prober.timed_out`)
        self.stalls = 0  # consecutive inconclusive probes (late timeouts)
        self.retry = False  # the current round is a probe again after an inconclusive one


async def system_resolver(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
    """The system's resolver: ``getaddrinfo`` (``/etc/hosts``, DNS, ...) in the running loop's
    default executor."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(socket.AddressFamily(family), str(sockaddr[0])) for family, _, _, _, sockaddr in infos]


class ProbeRefused(Exception):
    """The connection gate refused the address: nothing was sent (the message is the probe's error)."""


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


@lru_cache(maxsize=64)
def _timeout_text(timeout: float) -> str:
    """A timed-out probe's error: one string per timeout, not one per probe (a black hole of
    10,000 nodes keeps 10,000 of them in the nodes' health)."""
    return f"timeout after {timeout:g}s"


def build_request(spec: ProbeSpec) -> bytes:
    """The probe's request: HTTP keeps its connection (HTTP/1.1's default), HTTPS asks
    ``Connection: close``."""
    return b"".join(request_parts(spec))


@lru_cache(maxsize=1024)
def _request_ends(path: str, protocol: str, headers: tuple[tuple[str, str], ...]) -> tuple[bytes, bytes]:
    """What comes before and after the ``Host`` header's value: the same bytes objects for every
    target with the same path, protocol and headers (10,000 nodes: one copy, not 10,000)."""
    tail = [
        f"User-Agent: {USER_AGENT}",
        "Accept: */*",
        *(["Connection: close"] if protocol == "HTTPS" else []),
        *(f"{name}: {value}" for name, value in headers),
    ]
    return (f"GET {path} HTTP/1.1\r\nHost: ".encode("latin-1", "replace"),
            ("\r\n" + "\r\n".join(tail) + "\r\n\r\n").encode("latin-1", "replace"))


def request_parts(spec: ProbeSpec) -> tuple[bytes, bytes, bytes]:
    """`build_request` in three pieces, sent as one (``sendmsg``): the two shared by every target
    with the same path, protocol and headers, and between them the ``Host`` header's value."""
    head, tail = _request_ends(spec.path, spec.protocol, spec.headers)
    return head, spec.request_host.encode("latin-1", "replace"), tail


def parse_status(line: bytes) -> int | None:
    """The status code of ``HTTP/1.x NNN reason``, or None."""
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        return None
    return int(parts[1])


def body_length(head: bytes) -> int | None:
    """The body length of an HTTP/1.1 response head (status line and header lines, without the
    empty line) when its connection can be kept after that many bytes, else None: an HTTP/1.0
    answer, ``Connection: close``, a ``Transfer-Encoding``, no or an unclear ``Content-Length``,
    a body over `BODY_LIMIT`, an interim (1xx) answer."""
    lines = head.split(b"\r\n")
    status = lines[0]
    if not status.startswith(b"HTTP/1.1 ") or status[9:10] == b"1":
        return None
    length: int | None = 0 if status[9:12] in (b"204", b"304") else None
    seen = False
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            return None
        name = name.strip().lower()
        if name == b"content-length":
            value = value.strip()
            if not value.isdigit() or (seen and int(value) != length):
                return None
            length, seen = int(value), True
        elif name == b"transfer-encoding" or (name == b"connection" and b"close" in value.lower()):
            return None
    if length is None or length > BODY_LIMIT:
        return None
    return length


def _error_of(exc: BaseException, spec: ProbeSpec) -> str:
    """A probe's error from what it raised: short, from the exception's kind."""
    if isinstance(exc, ProbeRefused):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return _timeout_text(spec.timeout)
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {spec.address}: {exc.strerror or exc}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"tls: certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"tls: {exc.reason or type(exc).__name__}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    log.debug("health: probe error target=%s kind=%s", spec.target_id, type(exc).__name__)
    return f"probe error: {type(exc).__name__}"  # a probe never takes the monitor down


class _Conn:
    """One HTTP connection to (address, port) on a bare non-blocking socket, registered for
    reading as long as it is open.  `start` sends a probe's request; the status line decides the
    probe (`Prober.done`); the rest of the answer is read so that the connection can be kept
    (`Prober.keep`), else it is closed."""

    __slots__ = ("buf", "deadline", "fd", "got", "idle_since", "key", "left", "phase", "prober", "served", "sock",
                 "target")

    def __init__(self, prober: Prober, sock: socket.socket, key: tuple[str, int]) -> None:
        self.prober = prober
        self.sock = sock
        self.fd = sock.fileno()
        self.key = key
        self.target: _Target | None = None
        self.deadline = 0.0  # the current probe's (loop clock), and the time to have read its answer by
        self.buf = b""
        self.phase = _IDLE
        self.left = 0
        self.served = 0  # answers read whole on it (0: a new connection)
        self.got = False  # a byte of the current answer came
        self.idle_since = 0.0
        prober.loop.add_reader(self.fd, self._readable)
        prober.conns.add(self)

    def start(self, target: _Target, deadline: float) -> str:
        """Send ``target``'s request; "" when sent (the answer, the deadline or the connection's
        end decide the probe from now on), else the error, the connection closed."""
        self.target, self.buf, self.got, self.phase = target, b"", False, _STATUS
        try:
            head, tail = target.ends
            sent = self.sock.sendmsg((head, target.host, tail))
        except OSError as exc:
            self.close()
            return _error_of(exc, target.spec)
        if sent != target.request_size:  # a new or idle connection's buffer takes a whole request
            self.close()
            return "request not sent whole"
        self.deadline = deadline
        self.prober.expire_at(self, deadline)
        return ""

    def close(self) -> None:
        if self.phase == _CLOSED:
            return
        if self.phase == _IDLE:
            self.prober.forget(self)
        self.phase = _CLOSED
        self.prober.loop.remove_reader(self.fd)
        self.prober.conns.discard(self)
        self.sock.close()
        self.target = None

    def _report(self, error: str) -> None:
        target, self.target = self.target, None
        if target is not None:
            self.prober.done(target, error)

    def expired(self) -> None:
        """The deadline passed before the answer was read whole."""
        target = self.target
        self.close()
        if target is not None:  # still waiting for the status line
            self.prober.done(target, self.prober.timed_out(target, self.deadline))

    def _readable(self) -> None:
        try:
            data = self.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._ended(exc)
            return
        if not data:
            self._ended(None)
            return
        phase = self.phase
        if phase == _IDLE:  # bytes nobody asked for: the connection is not in a known state
            self.close()
            return
        self.got = True
        buf = self.buf + data if self.buf else data
        if phase == _STATUS:
            end = buf.find(b"\n")
            if end < 0:
                if len(buf) >= STATUS_LINE_LIMIT:
                    self._report("malformed status line")
                    self.close()
                else:
                    self.buf = buf
                return
            target = self.target
            assert target is not None
            self._report(_status_error(buf[:end], target.spec))
            if not buf.startswith(b"HTTP/1.1 "):  # no other answer is kept (nor one not HTTP at all)
                self.close()
                return
            phase = self.phase = _HEAD
        if phase == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > HEAD_LIMIT:
                    self.close()
                else:
                    self.buf = buf
                return
            length = body_length(buf[:end])
            if length is None:
                self.close()
                return
            self.left = length - (len(buf) - end - 4)
            self.buf = b""
            self.phase = _BODY
        else:  # _BODY
            self.left -= len(data)
        if self.left == 0:
            self._idle()
        elif self.left < 0:  # more than the answer: not a state to send another request in
            self.close()

    def _idle(self) -> None:
        self.served += 1
        self.phase = _IDLE
        self.prober.keep(self)

    def _ended(self, exc: OSError | None) -> None:
        """The peer closed (EOF, half-close included) or reset the connection."""
        target, phase, buf = self.target, self.phase, self.buf
        deadline = self.deadline
        self.close()
        if target is None or phase != _STATUS:
            return
        if self.served and not self.got:  # a kept connection ended under the request: once more, anew
            self.prober.again(target, deadline)
        elif exc is not None:
            self.prober.done(target, _error_of(exc, target.spec))
        else:
            self.prober.done(target, _status_error(buf, target.spec))


class Prober:
    """Probes of targets: connect (resolving a hostname first) through the connection gate, send
    the request, read the status line; HTTP connections are kept and reused per (address, port).
    Bare non-blocking sockets for TCP and HTTP, asyncio streams for HTTPS.  Results go to
    ``done(target, error)`` ("" when healthy), on the loop."""

    def __init__(self, resolver: Resolver, verify_context: ssl.SSLContext | None,
                 reach: ProbeReach = ProbeReach(), *,  # noqa: B008 - frozen value
                 done: Callable[[_Target, str], None] | None = None, max_idle: int = MAX_IDLE) -> None:
        self.resolve = resolver
        self.reach = reach
        self._verify_ctx = verify_context  # made at the first verified HTTPS probe (the CAs: ~2.3 MB)
        self._insecure_ctx: ssl.SSLContext | None = None
        self.done = done or (lambda target, error: None)
        self.max_idle = max_idle
        self.idle: dict[tuple[str, int], list[_Conn]] = {}  # kept connections by (address, port), newest last
        self.idle_count = 0
        self.conns: set[_Conn] = set()  # every open connection
        self.expiring: dict[int, list[_Conn]] = {}  # tick -> connections whose probe's deadline falls in it
        self.tasks: set[asyncio.Task[None]] = set()
        # the latest stalls of the loop: (loop time seen, seconds late), oldest first
        self.stalls: collections.deque[tuple[float, float]] = collections.deque(maxlen=STALLS_KEPT)
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def verify_ctx(self) -> ssl.SSLContext:
        """The verifying TLS context: the monitor's ``verify_context``, else the system CAs."""
        if self._verify_ctx is None:
            self._verify_ctx = ssl.create_default_context()
        return self._verify_ctx

    @property
    def insecure_ctx(self) -> ssl.SSLContext:
        """The unverified context.  No CA store: with OpenSSL 3.0 a context holding the system CA
        bundle costs ~2.5x the CPU per handshake even when nothing is verified."""
        if self._insecure_ctx is None:
            self._insecure_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            self._insecure_ctx.check_hostname = False
            self._insecure_ctx.verify_mode = ssl.CERT_NONE
        return self._insecure_ctx

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    # -- kept connections ----------------------------------------------------------------

    def take(self, key: tuple[str, int]) -> _Conn | None:
        """A kept connection to ``key`` (address, port), no longer kept; None when there is none."""
        kept = self.idle.get(key)
        if not kept:
            return None
        conn = kept.pop()
        if not kept:
            del self.idle[key]
        self.idle_count -= 1
        conn.phase = _STATUS  # not idle: `forget` has nothing to do
        return conn

    def keep(self, conn: _Conn) -> None:
        if self.idle_count >= self.max_idle or self._loop is None:
            conn.close()
            return
        conn.idle_since = self.loop.time()
        self.idle.setdefault(conn.key, []).append(conn)
        self.idle_count += 1

    def forget(self, conn: _Conn) -> None:
        kept = self.idle.get(conn.key)
        if kept and conn in kept:
            kept.remove(conn)
            self.idle_count -= 1
            if not kept:
                del self.idle[conn.key]

    def sweep(self, older: float) -> None:
        """Close the kept connections unused since ``older`` (loop time)."""
        for kept in list(self.idle.values()):
            for conn in [c for c in kept if c.idle_since < older]:
                conn.close()

    def expire_at(self, conn: _Conn, deadline: float) -> None:
        """Check ``conn`` at ``deadline`` (at most a `TICK` later): a wheel like the schedule's, so
        that a probe costs no timer handle (nor a heap entry to cancel)."""
        tick = math.ceil(deadline / TICK)
        due = self.expiring.get(tick)
        if due is None:
            self.expiring[tick] = [conn]
            self.loop.call_at(tick * TICK, self._expire, tick)
        else:
            due.append(conn)

    # -- stalls of the loop ---------------------------------------------------------------

    def note(self, late: float, now: float) -> None:
        """Something due at ``now - late`` (loop time) ran at ``now``: a stall when `STALL_MIN` or more."""
        if late >= STALL_MIN:
            self.stalls.append((now, late))

    def stalled(self, since: float, longer: float) -> bool:
        """A stall longer than ``longer`` seconds was seen after ``since`` (loop time; the tick that
        started a probe late saw its stall before the probe began)."""
        for seen, late in reversed(self.stalls):
            if seen <= since:
                return False
            if late > longer:
                return True
        return False

    def timed_out(self, target: _Target, deadline: float) -> str:
        """``target``'s probe with ``deadline`` timed out (observed now): its error, and
        ``target.late`` set when the loop stalled during the probe — a stall longer than
        ``max(STALL_MIN, timeout / 2)`` seen after the probe's start (``target.begun``) and by
        now, this observation's own lateness included."""
        now = self.loop.time()
        self.note(now - deadline, now)
        target.late = self.stalled(target.begun, max(STALL_MIN, target.spec.timeout / 2))
        return _timeout_text(target.spec.timeout)

    def _expire(self, tick: int) -> None:
        end = tick * TICK
        self.note(self.loop.time() - end, self.loop.time())
        for conn in self.expiring.pop(tick, ()):
            # still reading the answer of the probe that was due by then (not a later one, not idle)
            if conn.phase in (_STATUS, _HEAD, _BODY) and conn.deadline <= end:
                conn.expired()

    def close_all(self) -> None:
        for conn in list(self.conns):
            conn.close()

    # -- probes --------------------------------------------------------------------------

    def start(self, target: _Target, deadline: float) -> None:
        """Probe ``target``: an IP literal the gate let through before on a kept connection to its
        address and port when there is one, anything else in a task (through the gate)."""
        if target.fast and target.refusal == "":  # the gate let this address through before
            conn = self.take((target.spec.address, target.spec.port))
            if conn is not None and not conn.start(target, deadline):
                return
        self.spawn(target, deadline, fresh=False)

    def again(self, target: _Target, deadline: float) -> None:
        """Probe ``target`` once more on a new connection (its kept one ended under the request)."""
        self.spawn(target, deadline, fresh=True)

    def spawn(self, target: _Target, deadline: float, *, fresh: bool) -> None:
        task = self.loop.create_task(self._probe(target, deadline, fresh))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _probe(self, target: _Target, deadline: float, fresh: bool) -> None:
        try:
            async with asyncio.timeout_at(deadline):
                error = await self._attempt(target, deadline, fresh)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            error = self.timed_out(target, deadline)
        except Exception as exc:
            error = _error_of(exc, target.spec)
        if error is not None:
            self.done(target, error)

    async def destination(self, target: _Target) -> tuple[socket.AddressFamily, str]:
        """The connection gate: the address this probe connects to — the spec's IP literal, or the
        first address its host name resolves to now — once `ProbeReach.refusal` allows it;
        `ProbeRefused` (nothing sent) otherwise.  Every probe connection is made to what this
        returns, and only to that; a kept connection serves a probe only when it goes to the
        address and port this returned for it."""
        spec = target.spec
        if not target.resolve:
            if target.refusal is None:
                target.refusal = self.reach.refusal(spec.address)
            if target.refusal:
                raise ProbeRefused(target.refusal)
            return _family(spec.address), spec.address
        found = await self.resolve(spec.address, spec.port)
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, "no address")
        family, address = found[0]
        why = self.reach.refusal(address)
        if why:
            raise ProbeRefused(why)
        return family, address

    async def _attempt(self, target: _Target, deadline: float, fresh: bool) -> str | None:
        """The probe's error ("" healthy), or None when a connection took the request (its answer
        decides through ``done``)."""
        spec = target.spec
        family, address = await self.destination(target)
        if spec.protocol == "HTTPS":
            return await self._https(target, address)
        key = (address, spec.port)
        if spec.protocol == "HTTP" and not fresh:
            conn = self.take(key)  # kept for this very address (what the gate let through now)
            if conn is not None and not conn.start(target, deadline):
                return None
        loop = self.loop
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, (address, spec.port))
        except BaseException:
            sock.close()
            raise
        if spec.protocol == "TCP":
            sock.close()
            return ""
        return _Conn(self, sock, key).start(target, deadline) or None

    async def _https(self, target: _Target, address: str) -> str:
        spec = target.spec
        tls = self.insecure_ctx if spec.insecure else self.verify_ctx
        reader, writer = await asyncio.open_connection(
            address,
            spec.port,
            ssl=tls,
            server_hostname=spec.tls_name,
            ssl_shutdown_timeout=1.0,
            limit=STATUS_LINE_LIMIT,
        )
        try:
            writer.write(target.ends[0] + target.host + target.ends[1])
            try:
                line = await reader.readline()
            except ValueError:  # longer than the limit
                return "malformed status line"
        finally:
            writer.close()
        return _status_error(line, spec)


def _idle_cap() -> int:
    """Kept connections at most: `MAX_IDLE`, and half the process's file limit."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ValueError, OSError):
        soft = 1024
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(0, min(MAX_IDLE, soft // 2 - 64))


class HealthMonitor:
    def __init__(
        self,
        on_change: OnChange | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        verify_context: ssl.SSLContext | None = None,
        rng: random.Random | None = None,
        resolver: Resolver = system_resolver,
        reach: ProbeReach = ProbeReach(),  # noqa: B008 - frozen value
        max_idle: int | None = None,
    ) -> None:
        """``verify_context`` replaces the default verifying TLS context (the system CAs),
        e.g. to trust a private CA; ``insecure`` probes never verify.  ``resolver`` turns a
        target's hostname into addresses (IP literals are never resolved); the first is probed.
        ``reach``: the operator's probe ranges (`gitdns.core.reach`; default: none, so no
        loopback, link-local, metadata, unspecified, multicast or broadcast address).
        ``max_idle``: HTTP connections kept at most (0: none, every probe connects anew; default
        `MAX_IDLE`, at most half the process's file limit)."""
        self._on_change = on_change
        self._prober = Prober(resolver, verify_context, reach, done=self._done,
                              max_idle=_idle_cap() if max_idle is None else max_idle)
        self._clock = clock
        self._loop_clock = clock is time.monotonic  # what asyncio's loop.time() reads
        self._max_in_flight = max_in_flight
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._wheel: dict[int, list[_Target]] = {}  # tick number -> the targets due in it
        self._targets: dict[str, _Target] = {}
        self._waiting: collections.deque[_Target] = collections.deque()  # due while max_in_flight were out
        self._pending: dict[str, tuple[ProbeSpec, HealthSettings]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._in_flight = 0
        self._completed = 0
        self._skipped = 0
        self._stalled = 0
        self._max_lag = 0.0
        self.last_check_time: float | None = None  # the end of the latest probe of any target

    # -- the public surface (any thread) ---------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._thread_main, name="gitdns-probes", daemon=True)
        self._thread.start()
        self._ready.wait()

    def stop(self, timeout: float = 10.0) -> None:
        loop, thread, stopping = self._loop, self._thread, self._stopping
        if loop is None or thread is None or stopping is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(stopping.set)
        thread.join(timeout)
        self._thread = None

    def set_targets(self, specs: Mapping[str, tuple[ProbeSpec, HealthSettings]]) -> None:
        """Probe exactly ``specs`` from now on: new targets start (unknown), removed ones stop
        and leave the snapshot, changed ones restart.  A target whose probe changed starts
        over as unknown; one whose settings alone changed keeps its health."""
        wanted = dict(specs)
        with self._lock:
            loop = self._loop
            if loop is None:
                self._pending = wanted
                return
        loop.call_soon_threadsafe(self._apply, wanted)

    def snapshot(self) -> dict[str, TargetHealth]:
        with self._lock:
            return {tid: target.health for tid, target in self._targets.items()}

    def timings(self) -> dict[str, ProbeTiming]:
        """Per target: ``last_round_duration`` and ``last_check_time`` of its latest probe."""
        with self._lock:
            return {tid: ProbeTiming(t.duration, t.ended) for tid, t in self._targets.items() if t.ended}

    def rounds(self, target_ids: Sequence[str]) -> tuple[array[float], array[float]]:
        """`timings` as two columns, in the order of ``target_ids``: each one's latest round's
        duration and end (monitor clock), NaN where none ended yet or no such target.  No object
        per target: a metrics refresh of 10,000 nodes once a second made 10,000 of them."""
        durations, ends = array("d"), array("d")
        nan = math.nan
        with self._lock:
            targets = self._targets
            for tid in target_ids:
                target = targets.get(tid)
                if target is None or not target.ended:
                    durations.append(nan)
                    ends.append(nan)
                else:
                    durations.append(target.duration)
                    ends.append(target.ended)
        return durations, ends

    def last_round_duration(self, target_id: str) -> float | None:
        with self._lock:
            target = self._targets.get(target_id)
            return None if target is None or not target.ended else target.duration

    def stats(self) -> MonitorStats:
        return MonitorStats(len(self._targets), self._in_flight, self._completed, self._skipped, self._max_lag,
                            self._stalled)

    # -- the loop thread ---------------------------------------------------------------------

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(loop))
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        self._stopping = asyncio.Event()
        self._prober.bind(loop)
        with self._lock:
            self._loop = loop
            pending, self._pending = self._pending, None
        if pending is not None:
            self._apply(pending)
        self._ready.set()
        sweeper = loop.create_task(self._sweep())
        await self._stopping.wait()
        sweeper.cancel()
        for target in self._targets.values():
            target.live = False
        self._wheel.clear()
        tasks = list(self._prober.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(sweeper, *tasks, return_exceptions=True)
        self._prober.close_all()

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(IDLE_MAX / 2)
            self._prober.sweep(loop.time() - IDLE_MAX)

    def _apply(self, wanted: dict[str, tuple[ProbeSpec, HealthSettings]]) -> None:
        now = self._clock()
        loop = asyncio.get_running_loop()
        for tid in [tid for tid in self._targets if tid not in wanted]:
            self._drop(tid)
        for tid, (spec, settings) in wanted.items():
            old = self._targets.get(tid)
            if old is not None and old.spec == spec and old.settings == settings:
                continue
            target = _Target(tid, spec, settings)
            target.health = TargetHealth.initial(now)
            if old is not None:
                self._drop(tid)
                if old.spec == spec:  # its settings alone changed: what is known of it stays
                    target.duration, target.ended, target.health = old.duration, old.ended, old.health
            with self._lock:
                self._targets[tid] = target
            target.due = loop.time() + self._rng.uniform(0.0, target.settings.interval)
            self._at(target)

    def _drop(self, tid: str) -> None:
        with self._lock:
            target = self._targets.pop(tid)
        target.live = False  # its next round is skipped; a probe in flight ends as it would, unrecorded

    def _at(self, target: _Target, when: float | None = None) -> None:
        """Start ``target``'s round at ``when`` (loop clock; its ``due`` time by default), at most a
        `TICK` later; a time already past: at the next tick."""
        loop = self._prober.loop
        tick = math.ceil(max(target.due if when is None else when, loop.time()) / TICK)
        due = self._wheel.get(tick)
        if due is None:
            self._wheel[tick] = [target]
            loop.call_at(tick * TICK, self._tick, tick)
        else:
            due.append(target)

    def _tick(self, tick: int) -> None:
        now = self._prober.loop.time()
        self._prober.note(now - tick * TICK, now)
        for target in self._wheel.pop(tick, ()):
            if not target.live:
                continue
            if self._in_flight >= self._max_in_flight:
                self._waiting.append(target)
            else:
                self._start(target)

    def _start(self, target: _Target) -> None:
        now = self._prober.loop.time()
        lag = now - target.due
        if lag > self._max_lag and not target.retry:
            self._max_lag = lag
        self._in_flight += 1
        target.late = False
        target.begun = now
        # the monitor's clock is the loop's unless a test gave its own: then one float for both
        target.started = now if self._loop_clock else self._clock()
        if target.error:
            self._prober.loop.call_soon(self._done, target, target.error)
        else:
            self._prober.start(target, now + target.spec.timeout)

    def _done(self, target: _Target, error: str) -> None:
        """A probe of ``target`` ended ("" healthy): record it, schedule the next round."""
        self._in_flight -= 1
        self._completed += 1
        if target.live:
            now = self._clock()
            self.last_check_time = now
            loop = self._prober.loop
            if target.late and target.stalls < target.settings.failure_threshold:
                # inconclusive: the loop stalled during the probe; again at the next tick, the slot kept
                target.stalls += 1
                self._stalled += 1
                target.retry = True
                self._at(target, loop.time())
            else:
                if not target.late:
                    target.stalls = 0
                target.retry = False
                self._record(target, error, now)
                interval = target.settings.interval
                due = target.due + interval
                behind = loop.time() - due
                if behind >= interval:  # slots whose whole interval passed: skipped, the phase kept
                    missed = math.floor(behind / interval)
                    self._skipped += missed
                    due += missed * interval
                target.due = due  # a slot already begun (the round overran it): started late, at the next tick
                self._at(target)
        waiting = self._waiting
        while waiting and self._in_flight < self._max_in_flight:
            nxt = waiting.popleft()
            if nxt.live:
                self._start(nxt)

    def _record(self, target: _Target, error: str, now: float) -> None:
        tid = target.tid
        with self._lock:
            old = target.health
            new = observe(old, not error, now, error, target.settings)
            target.health = new
            target.duration, target.ended = now - target.started, now
        if new.state is not old.state:
            log.info("health: target=%s state=%s->%s error=%s", tid, old.state, new.state, new.last_error or "-")
            if self._on_change is not None:
                try:
                    self._on_change(tid, old, new)
                except Exception:
                    log.exception("health: on_change failed target=%s", tid)


def _status_error(line: bytes, spec: ProbeSpec) -> str:
    if not line:
        return "connection closed before the status line"
    code = parse_status(line)
    if code is None:
        return "malformed status line"
    if code not in spec.expected_codes:
        return f"status {code}"
    return ""
