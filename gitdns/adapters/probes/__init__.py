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

The package's modules: `wire` (the request, the status line and head, a probe's error),
`target` (a target on the loop), `conn` (a kept connection), `prober` (the connection gate,
kept connections, deadlines and stalls) and `monitor` (the schedules and the results).
"""

from gitdns.adapters.probes.conn import _Conn
from gitdns.adapters.probes.monitor import DEFAULT_MAX_IN_FLIGHT, HealthMonitor, OnChange
from gitdns.adapters.probes.prober import IDLE_MAX, MAX_IDLE, STALL_MIN, TICK, Prober, Resolver, system_resolver
from gitdns.adapters.probes.target import MonitorStats, ProbeTiming, _Target
from gitdns.adapters.probes.wire import (
    BODY_LIMIT,
    HEAD_LIMIT,
    STATUS_LINE_LIMIT,
    USER_AGENT,
    ProbeRefused,
    body_length,
    build_request,
    parse_status,
    request_parts,
)

__all__ = [
    "BODY_LIMIT", "DEFAULT_MAX_IN_FLIGHT", "HEAD_LIMIT", "IDLE_MAX", "MAX_IDLE", "STALL_MIN", "STATUS_LINE_LIMIT",
    "TICK", "USER_AGENT", "HealthMonitor", "MonitorStats", "OnChange", "ProbeRefused", "ProbeTiming", "Prober",
    "Resolver", "_Conn", "_Target", "body_length", "build_request", "parse_status", "request_parts",
    "system_resolver",
]
