"""The long-running agent: apscheduler drives the cycle, the HTTP endpoint pokes it.

One executor thread runs every job, so cycles never overlap; a webhook or a newer revision
moves the poll job to "now" (coalesced), which pre-empts waiting validation work.  Git and
provider failures back off exponentially from 0.75 s to 15 min while the last good
revision stays in force.  SIGTERM lets the running step finish, then stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent, Cycle
from gitdns.agent.metrics import Metrics
from gitdns.errors import GitdnsError, PermanentError

log = logging.getLogger(__name__)

BACKOFF_START = 0.75
BACKOFF_MAX = 900.0


def backoff(failures: int) -> float:
    """0.75 s, 1.5 s, 3 s, ... capped at 15 min."""
    return float(min(BACKOFF_START * (2 ** max(failures - 1, 0)), BACKOFF_MAX))


class Runner:
    def __init__(self, agent: Agent, config: AgentConfig, metrics: Metrics,
                 wall: Callable[[], float] = time.time) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.agent = agent
        self.config = config
        self.metrics = metrics
        self.wall = wall
        self.failures = 0
        self.cycles = 0
        self.alive = True
        self.stopped = threading.Event()
        # set before the scheduler shuts down: apscheduler's shutdown holds its job-store lock
        # while it waits for the running job, so that job must not touch the scheduler then
        self.stopping = False
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=UTC,
        )
        agent.ports.wake.listen(self.poke)  # probes and webhooks: run a pass now
        self._poll_lock = threading.Lock()
        self._polling = False  # a poll is running: a poke then asks for another right after it
        self._again = False

    # --- jobs --------------------------------------------------------------------
    def poke(self, why: str = "webhook") -> None:
        """Fetch now.  Coalesced with a poll already due; while one is running (apscheduler would
        skip a second instance), another runs as soon as it ends, so no push is left waiting for
        the next poll interval."""
        log.info("poke: why=%s", why)
        with self._poll_lock:
            if self._polling:
                self._again = True
                return
        self._reschedule("poll", 0.0)

    def first(self) -> Cycle | None:
        """The first cycle, before the scheduler starts: a permanent error (a refused
        cluster identity, a bad configuration) propagates so the agent refuses to start."""
        started = time.monotonic()
        try:
            cycle = self.agent.run("start", force=True)
        except PermanentError:
            raise
        except GitdnsError as exc:
            self.failures = 1
            self.metrics.record_git_error(exc.reason)
            log.warning("first cycle failed: reason=%s error=%s; retrying", exc.reason, exc)
            return None
        self.cycles += 1
        self._after_cycle(cycle, time.monotonic() - started)
        return cycle

    def start(self, first_delay: float | None = None) -> None:
        """Schedule the poll (first run after ``first_delay``; default now) and start."""
        from apscheduler.triggers.interval import IntervalTrigger

        poll = self.config.poll_interval
        delay = backoff(self.failures) if self.failures else (poll if first_delay is None else first_delay)
        self.scheduler.add_job(self.poll, IntervalTrigger(seconds=poll, jitter=max(poll * 0.05, 0.0)),
                               id="poll", next_run_time=datetime.now(UTC) + timedelta(seconds=delay))
        self.scheduler.start()
        self._schedule_validation()
        log.info("agent started: cluster=%s repo=%s poll=%ss", self.config.cluster, _safe(self.config.repo), poll)

    def poll(self, force: bool = False) -> Cycle | None:
        with self._poll_lock:
            self._polling, self._again = True, False
        try:
            return self._poll(force)
        finally:
            with self._poll_lock:
                self._polling, again = False, self._again
            if again:
                self._reschedule("poll", 0.0)

    def _poll(self, force: bool) -> Cycle | None:
        started = time.monotonic()
        try:
            cycle = self.agent.run("poll", force=force)
        except GitdnsError as exc:
            self.failures += 1
            delay = backoff(self.failures)
            self.metrics.record_git_error(exc.reason)
            log.warning("cycle failed: reason=%s retry_in=%.2fs error=%s", exc.reason, delay, exc)
            self._reschedule("poll", delay)
            self._publish_state()
            return None
        self.failures = 0
        self.cycles += 1
        self._after_cycle(cycle, time.monotonic() - started)
        if cycle.yielded:
            self._reschedule("poll", 1.0)  # a co-owner applied a newer revision: fetch again soon
        return cycle

    def validate(self) -> None:
        try:
            self.agent.validate()
        except GitdnsError as exc:
            log.warning("validation failed: reason=%s error=%s", exc.reason, exc)
        self._schedule_validation()
        self._publish_state()

    def _after_cycle(self, cycle: Cycle, seconds: float) -> None:
        if cycle.desired is not None or cycle.outcomes:
            self.metrics.observe_cycle(seconds)
        pushed = self.agent.state.status_push
        if cycle.desired is not None and pushed is not None and not pushed.status:
            self.metrics.record_git_error(pushed.reason)
        for outcome in cycle.outcomes:
            zone = outcome.zone.domain
            if outcome.plan is not None:
                counts: dict[str, int] = {}
                for conflict in outcome.plan.real_conflicts:
                    counts[conflict.reason] = counts.get(conflict.reason, 0) + 1
                self.metrics.set_conflicts(zone, counts)
                if outcome.applied:
                    summary = outcome.plan.summary()
                    self.metrics.record_apply(zone, writes=summary["create"] + summary["update"],
                                              deletes=summary["delete"])
                    self.metrics.record_desired_set_change(zone)
            if outcome.refused_retries:
                self.metrics.record_stale_retries(zone, outcome.refused_retries)
        if self.agent.state.applied_sha:
            self.metrics.set_revision(self.agent.state.applied_sha[:12])
        for zone, verdict in self.agent.state.group_results.items():
            if verdict.get("group"):
                self.metrics.set_group(zone, str(verdict["group"]), bool(verdict["active"]),
                                       int(verdict["records"]), int(verdict["targets"]))
        if self.agent.state.current is not None:
            problems: dict[str, int] = {}
            for problem in self.agent.state.current.problems:
                for zone_name in problem.zones or ("*",):
                    problems[zone_name] = problems.get(zone_name, 0) + 1
            self.metrics.set_validation_problems(problems)
        self._schedule_validation()
        self._publish_state()

    def _publish_state(self) -> None:
        report = self.agent.last_report
        ready = report is not None and report.ready
        self.metrics.set_ready(ready)
        if ready:
            self.metrics.mark_success(self.wall())

    def _schedule_validation(self) -> None:
        due = self.agent.next_validation()
        if due is None or self.stopping:
            return
        delay = max(due - self.agent.ports.clock(), 0.0)
        job = self.scheduler.get_job("validate")
        when = datetime.now(UTC) + timedelta(seconds=delay)
        if job is None:
            from apscheduler.triggers.date import DateTrigger

            self.scheduler.add_job(self.validate, DateTrigger(run_date=when), id="validate")
        else:
            job.modify(next_run_time=when)

    def _reschedule(self, job_id: str, delay: float) -> None:
        if self.stopping:
            return
        job = self.scheduler.get_job(job_id)
        if job is not None:
            job.modify(next_run_time=datetime.now(UTC) + timedelta(seconds=delay))

    # --- lifecycle ---------------------------------------------------------------
    def stop(self) -> None:
        """Let the running step finish, then stop (SIGTERM)."""
        log.info("agent stopping: waiting for the running step")
        self.stopping = True
        self.scheduler.shutdown(wait=True)
        try:
            self.agent.lease.release()
        except GitdnsError as exc:
            log.warning("lease release failed: error=%s", exc)
        self.alive = False
        self.stopped.set()

    def status(self) -> dict[str, Any]:
        from gitdns.core.status import documents

        report = self.agent.last_report
        out: dict[str, Any] = {"cycles": self.cycles, "gitFailures": self.failures}
        if report is not None:
            out.update(documents(report))
        return out


def _safe(url: str) -> str:
    """A repository URL without credentials, for logs."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://{rest.split('@', 1)[1]}"
    return url
