"""The health monitor (`HealthMonitor`): the targets' schedules on a timer wheel, the prober on
its own event loop in a daemon thread, each result through `gitdns.core.health.observe`."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import random
import ssl
import threading
import time
from array import array
from collections.abc import Callable, Mapping, Sequence

from gitdns.adapters.probes.prober import IDLE_MAX, TICK, Prober, Resolver, _idle_cap, system_resolver
from gitdns.adapters.probes.target import MonitorStats, _Target
from gitdns.core.health import HealthSettings, ProbeSpec, TargetHealth, observe
from gitdns.core.reach import ProbeReach

log = logging.getLogger("gitdns.adapters.probes")  # one logger for the whole prober, as before it was a package

OnChange = Callable[[str, TargetHealth, TargetHealth], None]
DEFAULT_MAX_IN_FLIGHT = 2048


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

    def rounds(self, target_ids: Sequence[str]) -> tuple[array[float], array[float]]:
        """In the order of ``target_ids``: each one's latest round's
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
