"""Health probes: an asyncio prober on its own event loop in a daemon thread.

    monitor = HealthMonitor(on_change=lambda tid, old, new: ...)
    monitor.set_targets({tid: (ProbeSpec(...), HealthSettings(...)), ...})  # any time, any thread
    monitor.start()
    monitor.snapshot()  # {target_id: TargetHealth}
    monitor.stop()

Each target runs on its own fixed-rate schedule (``interval``), first started at a random
phase inside its interval so that 10,000 targets do not fire together.  A round that
overruns its slot skips the missed slots (counted in `stats`).  Probes:

- TCP: connect, then close.
- HTTP / HTTPS: a minimal hand-written HTTP/1.1 client — ``GET <path>``, ``Host`` (the
  record's host, else the address), ``Connection: close``, extra headers; the status line
  is read and the connection closed (no body).  HTTPS runs on asyncio streams with an
  ``ssl.SSLContext`` and verifies the certificate against ``ProbeSpec.tls_name`` (also the
  SNI) unless ``insecure``.  TCP and plain HTTP use the loop's non-blocking socket calls
  (``sock_connect``/``sock_sendall``/``sock_recv``): the same bytes for ~40% less CPU.

Every probe, resolution included, is bounded by its timeout (``asyncio.timeout``).
Hostnames are resolved by the monitor's ``resolver``: by default `system_resolver`, the
system's ``getaddrinfo`` in the loop's executor (never blocking the loop); tests pass their own.

Every connection goes through `Prober.destination`, the probes' connection gate: the address
connected to (an IP literal as given, or the first address a host name resolved to, at that
very probe) must pass `gitdns.core.reach.ProbeReach.refusal` with the operator's ranges
(``reach``: none by default), else the probe is not sent and its error says why — no loopback,
link-local, cloud metadata, unspecified, multicast or broadcast address is ever connected to
unless the operator allowed its range (``--probe-allow-ranges``).  The address checked is the
address connected to: no second resolution happens in between.
A semaphore bounds probes in flight (and so file descriptors).  Errors are short strings
built from the exception's kind, never from request data: header values (which may be
secrets) appear in no error and no log line.  ``on_change`` runs on the monitor's thread
whenever a target's *state* changes; it must be quick and thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from gitdns.core.health import HealthSettings, ProbeSpec, TargetHealth, is_ip, observe, spec_error
from gitdns.core.reach import ProbeReach

log = logging.getLogger(__name__)

OnChange = Callable[[str, TargetHealth, TargetHealth], None]
# (hostname, port) -> the addresses to try, best first, each (family, address literal); raises
# socket.gaierror when the name does not resolve.  Called on the monitor's event loop.
Resolver = Callable[[str, int], Awaitable[Sequence[tuple[socket.AddressFamily, str]]]]
DEFAULT_MAX_IN_FLIGHT = 2048
STATUS_LINE_LIMIT = 1024  # bytes read for the status line
USER_AGENT = "gitdns-probe/1"


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


@dataclass(slots=True)
class _Target:
    spec: ProbeSpec
    settings: HealthSettings
    request: bytes  # the HTTP request, built once
    error: str  # spec_error(spec): reported instead of probing
    resolve: bool  # the address is a hostname
    family: socket.AddressFamily
    task: asyncio.Task[None] | None = None


async def system_resolver(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
    """The system's resolver: ``getaddrinfo`` (``/etc/hosts``, DNS, ...) in the running loop's
    default executor."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(socket.AddressFamily(family), str(sockaddr[0])) for family, _, _, _, sockaddr in infos]


class ProbeRefused(Exception):
    """The connection gate refused the address: nothing was sent (the message is the probe's error)."""


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def build_request(spec: ProbeSpec) -> bytes:
    lines = [
        f"GET {spec.path} HTTP/1.1",
        f"Host: {spec.request_host}",
        f"User-Agent: {USER_AGENT}",
        "Accept: */*",
        "Connection: close",
        *(f"{name}: {value}" for name, value in spec.headers),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


def parse_status(line: bytes) -> int | None:
    """The status code of ``HTTP/1.x NNN reason``, or None."""
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        return None
    return int(parts[1])


class Prober:
    """One probe of one target: connect (resolving a hostname first), send the request, read the
    status line.  Bare non-blocking sockets for TCP and HTTP, asyncio streams for HTTPS."""

    def __init__(self, resolver: Resolver, verify_context: ssl.SSLContext | None,
                 reach: ProbeReach = ProbeReach()) -> None:  # noqa: B008 - frozen value
        self.resolve = resolver
        self.reach = reach
        self.verify_ctx = verify_context or ssl.create_default_context()
        # No CA store for the unverified context: with OpenSSL 3.0 a context holding the
        # system CA bundle costs ~2.5x the CPU per handshake even when nothing is verified.
        self.insecure_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.insecure_ctx.check_hostname = False
        self.insecure_ctx.verify_mode = ssl.CERT_NONE

    async def probe(self, target: _Target) -> str:
        """ "" when healthy, else a short error."""
        spec = target.spec
        try:
            async with asyncio.timeout(spec.timeout):
                return await self._attempt(target)
        except ProbeRefused as refused:
            return str(refused)
        except TimeoutError:
            return f"timeout after {spec.timeout:g}s"
        except socket.gaierror as e:
            return f"cannot resolve {spec.address}: {e.strerror or e}"
        except ssl.SSLCertVerificationError as e:
            return f"tls: certificate verify failed: {e.verify_message}"
        except ssl.SSLError as e:
            return f"tls: {e.reason or type(e).__name__}"
        except ConnectionRefusedError:
            return "connection refused"
        except ConnectionResetError:
            return "connection reset"
        except OSError as e:
            return e.strerror or type(e).__name__
        except Exception as e:  # a probe never takes the monitor down
            log.debug("health: probe error target=%s kind=%s", spec.target_id, type(e).__name__)
            return f"probe error: {type(e).__name__}"

    async def destination(self, target: _Target) -> tuple[socket.AddressFamily, str]:
        """The connection gate: the address this probe connects to — the spec's IP literal, or the
        first address its host name resolves to now — once `ProbeReach.refusal` allows it;
        `ProbeRefused` (nothing sent) otherwise.  Every probe connection is made to what this
        returns, and only to that."""
        spec = target.spec
        address, family = spec.address, target.family
        if target.resolve:
            found = await self.resolve(address, spec.port)
            if not found:
                raise socket.gaierror(socket.EAI_NONAME, "no address")
            family, address = found[0]
        why = self.reach.refusal(address)
        if why:
            raise ProbeRefused(why)
        return family, address

    async def _attempt(self, target: _Target) -> str:
        spec = target.spec
        loop = asyncio.get_running_loop()
        family, address = await self.destination(target)
        if spec.protocol == "HTTPS":
            return await self._https(target, address)
        # TCP and plain HTTP on bare non-blocking sockets: no transport, protocol or stream
        # objects per probe (~40% less CPU than asyncio streams, see docs/health-probes.md).
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, (address, spec.port))
            if spec.protocol == "TCP":
                return ""
            await loop.sock_sendall(sock, target.request)
            line = b""
            while b"\n" not in line:
                chunk = await loop.sock_recv(sock, STATUS_LINE_LIMIT)
                if not chunk:
                    break
                line += chunk
                if len(line) >= STATUS_LINE_LIMIT:
                    break
        finally:
            sock.close()
        return _status_error(line.partition(b"\n")[0], spec)

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
            writer.write(target.request)
            try:
                line = await reader.readline()
            except ValueError:  # longer than the limit
                return "malformed status line"
        finally:
            writer.close()
        return _status_error(line, spec)


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
    ) -> None:
        """``verify_context`` replaces the default verifying TLS context (the system CAs),
        e.g. to trust a private CA; ``insecure`` probes never verify.  ``resolver`` turns a
        target's hostname into addresses (IP literals are never resolved); the first is probed.
        ``reach``: the operator's probe ranges (`gitdns.core.reach`; default: none, so no
        loopback, link-local, metadata, unspecified, multicast or broadcast address)."""
        self._on_change = on_change
        self._prober = Prober(resolver, verify_context, reach)
        self._clock = clock
        self._max_in_flight = max_in_flight
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._health: dict[str, TargetHealth] = {}
        self._timing: dict[str, ProbeTiming] = {}
        self._targets: dict[str, _Target] = {}
        self._pending: dict[str, tuple[ProbeSpec, HealthSettings]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._sem: asyncio.Semaphore | None = None
        self._in_flight = 0
        self._completed = 0
        self._skipped = 0
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
            return dict(self._health)

    def timings(self) -> dict[str, ProbeTiming]:
        """Per target: ``last_round_duration`` and ``last_check_time`` of its latest probe."""
        with self._lock:
            return dict(self._timing)

    def last_round_duration(self, target_id: str) -> float | None:
        with self._lock:
            timing = self._timing.get(target_id)
        return None if timing is None else timing.last_round_duration

    def stats(self) -> MonitorStats:
        return MonitorStats(len(self._targets), self._in_flight, self._completed, self._skipped, self._max_lag)

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
        self._sem = asyncio.Semaphore(self._max_in_flight)
        with self._lock:
            self._loop = loop
            pending, self._pending = self._pending, None
        if pending is not None:
            self._apply(pending)
        self._ready.set()
        await self._stopping.wait()
        tasks = [t.task for t in self._targets.values() if t.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _apply(self, wanted: dict[str, tuple[ProbeSpec, HealthSettings]]) -> None:
        now = self._clock()
        for tid in [tid for tid in self._targets if tid not in wanted]:
            self._drop(tid)
        for tid, (spec, settings) in wanted.items():
            old = self._targets.get(tid)
            if old is not None and old.spec == spec and old.settings == settings:
                continue
            if old is not None:
                self._drop(tid, keep_health=old.spec == spec)
            target = _Target(
                spec, settings, build_request(spec), spec_error(spec), not is_ip(spec.address), _family(spec.address)
            )
            self._targets[tid] = target
            with self._lock:
                self._health.setdefault(tid, TargetHealth.initial(now))
            target.task = asyncio.get_running_loop().create_task(self._run(tid, target), name=f"probe:{tid}")

    def _drop(self, tid: str, keep_health: bool = False) -> None:
        target = self._targets.pop(tid)
        if target.task is not None:
            target.task.cancel()
        if not keep_health:
            with self._lock:
                self._health.pop(tid, None)
                self._timing.pop(tid, None)

    async def _run(self, tid: str, target: _Target) -> None:
        loop = asyncio.get_running_loop()
        interval = target.settings.interval
        due = loop.time() + self._rng.uniform(0.0, interval)
        while True:
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            assert self._sem is not None
            async with self._sem:
                lag = loop.time() - due
                if lag > self._max_lag:
                    self._max_lag = lag
                self._in_flight += 1
                started = self._clock()
                try:
                    error = target.error or await self._prober.probe(target)
                finally:
                    self._in_flight -= 1
            self._record(tid, target, error, started)
            due += interval
            behind = loop.time() - due
            if behind > 0:  # the round overran its slot: skip what was missed, keep the phase
                missed = math.ceil(behind / interval)
                self._skipped += missed
                due += missed * interval

    def _record(self, tid: str, target: _Target, error: str, started: float) -> None:
        now = self._clock()
        self._completed += 1
        self.last_check_time = now
        with self._lock:
            if self._targets.get(tid) is not target:  # replaced or removed meanwhile
                return
            old = self._health.get(tid) or TargetHealth.initial(started)
            new = observe(old, not error, now, error, target.settings)
            self._health[tid] = new
            self._timing[tid] = ProbeTiming(now - started, now)
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
