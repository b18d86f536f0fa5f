"""The fleet simulation (bench/fleet.py) in its quick form: 10 and 100 real agents against one
Route53 account (the strict fake, 5 requests/s with Throttling) in virtual time: the steady
rate, one cluster's change with the rest of the fleet quiet, a fleet-wide change, a join and a
leave.  Every bound is in virtual seconds and request counts; nothing here measures
wall-clock time."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import fleet  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _small_stacks() -> Iterator[None]:
    old = threading.stack_size(512 * 1024)
    yield
    threading.stack_size(old)


def test_kernel_runs_one_thread_at_a_time_in_virtual_order() -> None:
    kernel = fleet.Kernel()
    seen: list[tuple[str, float]] = []

    def worker(name: str, pause: float) -> None:
        for _ in range(3):
            seen.append((name, kernel.now))
            kernel.sleep(pause)

    kernel.spawn("a", lambda: worker("a", 10.0), 0.0)
    kernel.spawn("b", lambda: worker("b", 15.0), 1.0)
    kernel.run(100.0)
    kernel.stop()
    assert seen == [("a", 0.0), ("b", 1.0), ("a", 10.0), ("b", 16.0), ("a", 20.0), ("b", 31.0)]


def test_the_service_limit_refuses_past_its_rate() -> None:
    limit = fleet.Limit(rate=5.0, burst=5.0)
    assert sum(limit.admit(0.0) for _ in range(8)) == 5  # the burst
    assert limit.admit(0.1) is False and limit.admit(0.2) is True  # 5 a second after it


@pytest.mark.parametrize("agents", [10, 100])
def test_route53_fleet_stays_within_the_account_and_converges(agents: int) -> None:
    fig = fleet.scenario("route53", agents, quick=True, seed=30)
    assert fig.initial_sync_s is not None, fig.notes
    # steady state: under the account's 5 requests/s, and no throttling storm (agents saving up
    # a pass's worth of requests meet now and then: a throttled request is retried, jittered)
    assert fig.steady_rps <= 5.0
    # (validation passes of agents rolled out together still meet in the first minutes: at 100
    # agents 27 of 892 requests in the window, 12 in its busiest minute)
    assert fig.steady_throttles <= 0.05 * fig.steady_rps * fig.steady_window_s, fig
    assert fig.steady_throttles_per_min_max <= 15, fig
    # one cluster's weight change reaches the zone within 60 s (a quiet validation leaves its
    # agent a change's reserve of requests), and the agents whose intent did not change stay
    # quiet: under 2 requests each over the window (their validation goes on), where reacting to
    # the revision would cost each its names read (4 or more)
    assert fig.one_change_s is not None and fig.one_change_s <= 60.0, fig
    assert fig.one_change_requests <= 12, fig
    assert fig.one_change_others <= 2 * (agents - 1), fig
    # a cluster joining publishes its records, and one leaving takes them away, each within a
    # bounded number of requests
    assert fig.join_s is not None and fig.join_requests <= 40, fig
    # the leave's write is conditional on two co-owners' TXT, not on all of them (Route53 reads
    # each guard inside the write, at the agent's share)
    assert fig.leave_s is not None and fig.leave_requests <= 40, fig
    if agents <= 10:
        # a fleet-wide weight change reaches the zone from every agent within 60 s; at 100 agents
        # it takes the account's budget for 100 writes and their reads (docs/topologies.md)
        assert fig.change_convergence_s is not None and fig.change_convergence_s <= 60.0, fig
