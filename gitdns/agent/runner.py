"""The long-running agent: apscheduler drives the cycle, the HTTP endpoint pokes it.

One executor thread runs every job, so cycles never overlap; a webhook or a newer revision
moves the poll job to "now" (coalesced), which pre-empts waiting validation work.  Only git
operations back off when git fails (`gitdns.agent.gitwait`: 0.75 s doubling to 15 min): the
poll keeps its interval, so zone-side work (validation, health withdrawals, a break-glass
active-groups switch in the zone) goes on from the last good revision.  A webhook delivery ends
the wait.  SIGTERM lets the running step finish, then stops.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent, Cycle
from gitdns.agent.gitwait import BACKOFF_MAX, BACKOFF_START, backoff
from gitdns.agent.metrics import Metrics
from gitdns.agent.ports import AgentView
from gitdns.agent.zones.work import fleet_phase
from gitdns.core.text import inline
from gitdns.errors import ConfigError, GitdnsError, ValidationError
from gitdns.reconcile.zonepass import ZoneOutcome

log = logging.getLogger(__name__)

__all__ = ["BACKOFF_MAX", "BACKOFF_START", "Runner", "backoff"]


class Runner:
    def __init__(self, agent: Agent, config: AgentConfig, metrics: Metrics,
                 wall: Callable[[], float] = time.time) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.agent = agent
        self.config = config
        self.metrics = metrics
        self.wall = wall
        self.cycles = 0
        self._refusal: tuple[str, str] | None = None  # the head refusal last counted
        self._push_failures = 0  # the status push failures counted so far
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
        log.info("poke: why=%s", inline(why))  # a push names its ref: outside text
        if why.startswith("push"):  # a webhook delivery: git is tried at once, whatever the backoff
            self.agent.git_kicked(desired_branch=why == f"push refs/heads/{self.config.branch}")
        with self._poll_lock:
            if self._polling:
                self._again = True
                return
        self._reschedule("poll", wake_delay(self.agent.view()) if why.startswith("push") else 0.0)

    def first(self) -> Cycle | None:
        """The first cycle, before the scheduler starts: a bad configuration (a refused cluster
        identity) propagates so the agent refuses to start.  Git failing or refusing the head
        does not: the agent stays up, reports it and tries again (a rotated credential, a new
        signed head)."""
        started = time.monotonic()
        try:
            cycle = self.agent.run("start", force=True)
        except (ConfigError, ValidationError):
            raise
        except GitdnsError as exc:
            self.metrics.record_git_error(exc.reason)
            log.warning("first cycle failed: reason=%s error=%s; retrying", exc.reason, exc)
            self._publish_state()
            return None
        self.cycles += 1
        self._after_cycle(cycle, time.monotonic() - started)
        return cycle

    @property
    def failures(self) -> int:
        """Consecutive failures of the desired branch's git operations."""
        return self.agent.state.git_wait.failures

    def _next_poll(self) -> float:
        """Seconds to the next poll: the poll interval, or sooner when a git retry is due first."""
        poll = self.config.poll_interval
        retry = self.agent.next_git_attempt()
        return poll if retry is None else min(retry, poll)

    def start(self, first_delay: float | None = None) -> None:
        """Schedule the poll (first run after ``first_delay``; default the poll interval, or
        sooner when git is to be retried) and start."""
        from apscheduler.triggers.interval import IntervalTrigger

        poll = self.config.poll_interval
        delay = self._next_poll() if first_delay is None else first_delay
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
        started, failures = time.monotonic(), self.failures
        try:
            cycle = self.agent.run("poll", force=force)
        except GitdnsError as exc:  # git failed with no revision in force yet: nothing else to do
            self.metrics.record_git_error(exc.reason)
            log.warning("cycle failed: reason=%s error=%s", exc.reason, exc)
            self._reschedule("poll", self._next_poll())
            self._publish_state()
            return None
        self.cycles += 1
        if self.failures > failures:  # git failed; the pass went on from the last good revision
            self.metrics.record_git_error(self.agent.state.source_condition.reason)
        self._after_cycle(cycle, time.monotonic() - started)
        if cycle.yielded:
            self._reschedule("poll", 1.0)  # a co-owner applied a newer revision: fetch again soon
        elif self.agent.next_git_attempt() is not None:
            self._reschedule("poll", self._next_poll())  # git backs off; the poll keeps its interval
        return cycle

    def validate(self) -> None:
        outcomes: list[ZoneOutcome] = []
        try:
            self.agent.validate(outcomes)
        except GitdnsError as exc:
            log.warning("validation failed: reason=%s error=%s", exc.reason, exc)
        self._zone_metrics(outcomes)  # a failing zone is retried here: each pass counts
        self._schedule_validation()
        self._publish_state()

    def _after_cycle(self, cycle: Cycle, seconds: float) -> None:
        source = self.agent.state.source_condition
        refusal = (source.reason, source.message) if source.reason in ("SignatureRefused", "RollbackRefused") else None
        if refusal is not None and refusal != self._refusal:
            self.metrics.record_refusal(source.reason)
        self._refusal = refusal
        if cycle.desired is not None or cycle.outcomes:
            self.metrics.observe_cycle(seconds)
        current = self.agent.state.current
        domains = {z.name: z.domain for z in current.state.zones} if current is not None else {}
        self.metrics.set_all_targets_unhealthy({domains.get(name, name): result.fail_open
                                                for name, result in self.agent.state.health_results.items()})
        self._zone_metrics(cycle.outcomes)
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

    def _zone_metrics(self, outcomes: list[ZoneOutcome]) -> None:
        """What each zone pass did and met (a poll's passes, and the validation loop's)."""
        for outcome in outcomes:
            zone = outcome.zone.domain
            refused = {f.error for f in outcome.failed}
            for error in outcome.errors:
                self.metrics.record_zone_error(zone, error_reason(error, refused))
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

    def _publish_state(self) -> None:
        state = self.agent.state
        if state.push_failures > self._push_failures and state.status_push is not None:
            for _ in range(state.push_failures - self._push_failures):
                self.metrics.record_status_push_failure(state.status_push.reason)
        self._push_failures = state.push_failures
        report = self.agent.last_report
        ready = report is not None and report.ready
        self.metrics.set_ready(ready)
        self.metrics.set_conditions(report.conditions if report is not None else ())
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
        from gitdns.core.status.report import documents

        report = self.agent.last_report
        out: dict[str, Any] = {"cycles": self.cycles, "gitFailures": self.failures}
        if report is not None:
            out.update(documents(report))
        return out


WAKE_SPREAD = 5.0  # seconds a fleet's webhook wake-ups are spread over (at 100 Clusters and more)


def wake_delay(view: AgentView) -> float:
    """How long after a webhook delivery this agent fetches: its point, by hash(cluster), in a
    window of 0.05 s per Cluster in git up to `WAKE_SPREAD`, so a push does not wake a whole
    fleet in the same instant (a fleet-wide change then reaches the provider account spread)."""
    if view.cluster is None or view.current is None:
        return 0.0
    window = min(WAKE_SPREAD, 0.05 * len(view.current.state.clusters))
    return window * fleet_phase(view.cluster.id)


def _safe(url: str) -> str:
    """A repository URL without credentials, for logs."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://{rest.split('@', 1)[1]}"
    return url


_REASON = re.compile(r"[A-Z][A-Za-z]{2,47}")


def error_reason(error: str, refused: Collection[str] = ()) -> str:
    """The ``reason`` label of a zone error, from a closed set of words: ``ChangeRefused`` for a
    change group the provider refused (its text starts with the record's name, which must not
    become a label value), the error's own reason (``ProviderError: …``), else ``Other``."""
    if error in refused:
        return "ChangeRefused"
    head = error.split(":", 1)[0]
    return head if _REASON.fullmatch(head) else "Other"
