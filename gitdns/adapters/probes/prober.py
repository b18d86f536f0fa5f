"""The prober (`Prober`): every probe connection through its gate (`Prober.destination`), HTTP
connections kept per (address, port), deadlines and stalls on a timer wheel."""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import resource
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence

from gitdns.adapters.probes.conn import _BODY, _HEAD, _STATUS, _Conn
from gitdns.adapters.probes.target import _Target
from gitdns.adapters.probes.wire import (
    STATUS_LINE_LIMIT,
    ProbeRefused,
    _error_of,
    _family,
    _status_error,
    _timeout_text,
)
from gitdns.core.reach import ProbeReach

log = logging.getLogger("gitdns.adapters.probes")  # one logger for the whole prober, as before it was a package

# (hostname, port) -> the addresses to try, best first, each (family, address literal); raises
# socket.gaierror when the name does not resolve.  Called on the monitor's event loop.
Resolver = Callable[[str, int], Awaitable[Sequence[tuple[socket.AddressFamily, str]]]]
TICK = 0.01  # seconds: the scheduler's granularity (targets due in one tick start together)
STALL_MIN = 0.05  # seconds: the least lateness of a tick or a timeout that is a stall of the loop
STALLS_KEPT = 64  # the latest stalls remembered (each one's end and length)
MAX_IDLE = 16384  # kept connections at most (also at most half the process's file limit)
IDLE_MAX = 60.0  # seconds a kept connection may stay unused before it is closed


async def system_resolver(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
    """The system's resolver: ``getaddrinfo`` (``/etc/hosts``, DNS, ...) in the running loop's
    default executor."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(socket.AddressFamily(family), str(sockaddr[0])) for family, _, _, _, sockaddr in infos]


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
