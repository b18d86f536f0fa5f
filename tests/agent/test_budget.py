"""Request budgets: a token bucket per account shared by the fleet; throttling never fatal."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitdns.agent.budget import HEADROOM, Budgets, TokenBucket
from gitdns.errors import ThrottledError
from gitdns.providers.memory import MemoryProvider


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_bucket_spends_burst_then_waits_at_the_rate() -> None:
    t = FakeTime()
    bucket = TokenBucket(rate=2.0, burst=2.0, clock=t.clock, sleep=t.sleep)
    for _ in range(4):
        bucket.take()
    assert t.slept == [0.5, 0.5, 0.5]  # a new bucket holds one token: a burst is earned by waiting
    t.now += 10.0
    t.slept.clear()
    for _ in range(3):
        bucket.take()
    assert t.slept == [0.5]  # quiet for a while: the burst saved up, then the rate again


def test_fleet_shares_the_account_budget() -> None:
    t = FakeTime()
    prov = MemoryProvider()
    prov.capabilities = dataclasses.replace(prov.capabilities, reads_per_minute=300.0)  # type: ignore[misc]
    budgets = Budgets(lambda: 10, t.clock, t.sleep)
    bucket = budgets.bucket(prov, "read")
    assert bucket.rate == pytest.approx(0.5 * HEADROOM)  # 5/s shared by 10 agents, a fifth kept as headroom
    assert budgets.bucket(prov, "read") is bucket  # one bucket per account


class Throttling(MemoryProvider):
    def __init__(self, fail: int) -> None:
        super().__init__()
        self.fail = fail

    def read(self, zone, names=None):  # type: ignore[no-untyped-def,override]
        if self.fail:
            self.fail -= 1
            raise ThrottledError("Throttling: Rate exceeded", retry_after=3.0)
        return super().read(zone, names)


def test_throttling_waits_retry_after_and_succeeds() -> None:
    t = FakeTime()
    wrapped = Budgets(lambda: 1, t.clock, t.sleep, uniform=lambda low, high: low).wrap(Throttling(fail=2))
    assert wrapped.read("example.com").records == ()
    assert t.slept[:1] == [3.0] and t.slept[-1] == 3.0  # what the service asked (the least jitter)
    jittered = FakeTime()
    wrapped = Budgets(lambda: 1, jittered.clock, jittered.sleep, uniform=lambda low, high: high).wrap(
        Throttling(fail=1))
    wrapped.read("example.com")
    assert 3.0 < max(jittered.slept) <= 6.0  # never sooner than asked, spread up to twice that


@pytest.mark.parametrize(("window", "first"), [(1.0, 0.75), (60.0, 7.5)])
def test_without_retry_after_the_backoff_starts_at_an_eighth_of_the_quota_window(window: float, first: float) -> None:
    """A quota per second (Route53) is retried after 0.75 s; a quota per minute (Google) frees
    its slots as the minute's requests age out, so a retry within the second is refused again:
    its backoff starts at an eighth of the minute."""

    class Unasked(Throttling):
        def read(self, zone, names=None):  # type: ignore[no-untyped-def,override]
            if self.fail:
                self.fail -= 1
                raise ThrottledError("rateLimitExceeded")
            return MemoryProvider.read(self, zone, names)

    inner = Unasked(fail=2)
    inner.capabilities = dataclasses.replace(inner.capabilities, quota_window=window)  # type: ignore[misc]
    t = FakeTime()
    wrapped = Budgets(lambda: 1, t.clock, t.sleep, uniform=lambda low, high: low).wrap(inner)
    wrapped.read("example.com")
    assert t.slept == [first, 2 * first]


def test_throttling_gives_up_after_bounded_retries() -> None:
    t = FakeTime()
    wrapped = Budgets(lambda: 1, t.clock, t.sleep).wrap(Throttling(fail=100))
    with pytest.raises(ThrottledError):
        wrapped.read("example.com")


@given(st.floats(0.0001, 10.0), st.floats(1.0, 50.0), st.floats(0.0, 1e5), st.floats(0.0, 1e4))
def test_until_says_when_the_bucket_holds_n_and_never_a_wait_the_clock_cannot_tell(
        rate: float, n: float, start: float, elapsed: float) -> None:
    """`TokenBucket.until(n)`: 0 when it holds ``n`` now, else a wait after which it does; a
    wait is never so small that ``now + wait == now`` (a caller rescheduling on it would spin)."""
    t = FakeTime()
    t.now = start
    bucket = TokenBucket(rate=rate, burst=1.0, clock=t.clock, sleep=t.sleep)
    bucket.take()
    t.now += elapsed
    wait = bucket.until(n)
    assert bucket.hold >= n  # from now on it may save up n
    if wait == 0.0:
        assert bucket._refill(t.now) >= n - 1e-6
    else:
        assert t.now + wait > t.now
        t.now += wait
        assert bucket._refill(t.now) >= n - 1e-6
        assert bucket.until(n) == 0.0


def test_agents_paced_in_step_drift_apart_and_keep_their_rate() -> None:
    """Two agents whose buckets would send at the same instants for good (one token per 250 s,
    from the same moment) drift apart with the phase jitter, and each still sends at its rate:
    the extra wait is kept as tokens, not lost."""
    import random

    from gitdns.agent.budget import PHASE_JITTER

    sent: list[list[float]] = []
    for seed in (1, 2):
        t = FakeTime()
        rng = random.Random(seed)
        bucket = TokenBucket(rate=1 / 250, burst=1.0, clock=t.clock, sleep=t.sleep, jitter=rng.uniform)
        times = []
        for _ in range(40):
            bucket.take()
            times.append(t.now)
        sent.append(times)
    assert sum(1 for a, b in zip(*sent, strict=True) if abs(a - b) < 1.0) <= 5  # without the jitter: all 40
    for times in sent:
        # 39 intervals: at least 250 s each on average, at most one jitter more in all
        assert 39 * 250 - 1e-6 <= times[-1] - times[0] <= 39 * 250 + PHASE_JITTER * 250 + 1e-6
