"""The scheduler around the cycle: a poke while a poll is running is not lost."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from gitdns.agent.cycle import Cycle
from gitdns.agent.metrics import Metrics
from gitdns.agent.runner import Runner
from tests.agent.fakes import Clock, FakeSource, example_files
from tests.agent.test_cycle import CountingProvider, make_agent


def test_a_poke_during_a_running_poll_runs_another_right_after(tmp_path: Path) -> None:
    source = FakeSource()
    source.commit(example_files(), "initial")
    world: tuple[FakeSource, dict[str, CountingProvider], Clock] = (source, {}, Clock())
    agent = make_agent(world, tmp_path, poll_interval=3600.0, listen="")
    started, release, done = threading.Event(), threading.Event(), threading.Semaphore(0)
    runs: list[str] = []
    real_run = agent.run

    def run(trigger: str = "poll", *, force: bool = False) -> Cycle:
        runs.append(trigger)
        if len(runs) == 1:
            started.set()
            assert release.wait(10)
        try:
            return real_run(trigger, force=force)
        finally:
            done.release()

    agent.run = run  # type: ignore[method-assign]
    runner = Runner(agent, agent.config, Metrics())
    runner.start(first_delay=0.0)
    try:
        assert started.wait(10)  # the first poll is running
        source.commit({**example_files(), "records/extra.yaml": ""}, "a push")
        runner.poke("push refs/heads/main")  # apscheduler would skip a second instance now
        release.set()
        assert done.acquire(timeout=10)
        # the next scheduled poll is an hour away: only the poke can run the second one
        assert done.acquire(timeout=10), "the poke during the running poll was lost"
        assert len(runs) == 2
    finally:
        release.set()
        runner.stop()


def test_a_pushed_ref_reaches_the_log_escaped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A webhook's ref comes from its JSON body, where any character can be written escaped."""
    source = FakeSource()
    source.commit(example_files(), "initial")
    agent = make_agent((source, {}, Clock()), tmp_path, poll_interval=3600.0, listen="")
    runner = Runner(agent, agent.config, Metrics())  # not started: the poke only logs and flags
    caplog.set_level(logging.INFO, logger="gitdns.agent.runner")
    runner.poke("push refs/heads/a\x1b[2J\nlevel=ERROR forged\u202e")
    messages = [record.getMessage() for record in caplog.records]
    assert "poke: why=push refs/heads/a\\x1b[2J\\nlevel=ERROR forged\\u202e" in messages
