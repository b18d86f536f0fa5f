"""Provider request budgets: the agent owns them, providers report throttling.

A fleet shares an account's budget (Route53: 5 requests/s per account, reads and writes
together; Google: 240 reads and 60 writes per minute; Azure: 60 lists and 40 writes per
minute), so each agent takes ``budget ÷ fleet size`` (the fleet is known from git, and the
rate follows it) as a token bucket per account.  Every read and apply waits for the requests
it will send before it sends them (a whole-zone read: as many as the zone's last one sent; a
read by name: one per name) and is charged the difference once the provider counted them;
a throttled call waits what the service asked (Retry-After) or backs off, and is tried again:
throttling is never fatal.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gitdns.core.records import Change, Guard, ZoneSnapshot
from gitdns.errors import ThrottledError
from gitdns.providers.base import ApplyResult, Capabilities, Provider, ZoneInfo, request_gate
from gitdns.providers.memory import snapshot_names

log = logging.getLogger(__name__)

T = TypeVar("T")
THROTTLE_RETRIES = 6
THROTTLE_BACKOFF_CAP = 60.0
HEADROOM = 0.8  # the share of the account a fleet plans to use: arrivals at its full rate collide
PASS_BURST = 8.0  # requests an idle agent may send at once: a pass (its reads by name and a write)
RESERVE = 5  # requests a quiet validation leaves in the bucket for a change that comes after it
PHASE_JITTER = 0.2  # a wait for a token is longer by up to this share of one token's interval


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up, one at the start (a fleet rolled
    out at once does not send every agent's burst together); a bucket may go into debt
    (`charge`), which the next `take` waits out."""

    rate: float
    burst: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    tokens: float | None = None
    stamp: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    waited: float = 0.0  # seconds spent waiting, for metrics and tests
    hold: float = 0.0  # tokens the bucket may save up beyond ``burst`` (`until`: a validation and a reserve)
    jitter: Callable[[float, float], float] | None = None  # a wait's extra (`PHASE_JITTER`); None: exact

    def _refill(self, now: float) -> float:
        cap = max(self.burst, self.hold)
        if self.tokens is None:  # a new bucket: one token, and a burst is earned by waiting from then
            return min(cap, 1.0 + max(0.0, now - self.stamp) * self.rate)
        return min(cap, self.tokens + (now - self.stamp) * self.rate)

    def until(self, n: float) -> float:
        """Seconds until the bucket holds ``n`` tokens (0: it does now); from now on it may save up
        that many."""
        if self.rate <= 0:
            return 0.0
        with self.lock:
            self.hold = max(self.hold, n)
            have = self._refill(self.clock())
            short = n - have
            return 0.0 if short <= 1e-6 else max(short / self.rate, 0.001)  # never a wait the clock cannot tell

    def take(self, n: float = 1.0) -> None:
        if self.rate <= 0:
            return
        with self.lock:
            now = self.clock()
            tokens = self._refill(now) - n
            self.tokens, self.stamp = tokens, now
            wait = -tokens / self.rate if tokens < 0 else 0.0
        if wait > 0 and self.jitter is not None:
            # a little longer, at random: what the extra earns is kept (the rate is unchanged), but
            # agents paced at one token per interval no longer send at the same point of every
            # interval for good (at 1,000 Route53 agents, 3 % of them met a throttled slot every
            # 250 s and never synced)
            wait += self.jitter(0.0, PHASE_JITTER / self.rate)
        if wait > 0:
            self.waited += wait
            self.sleep(wait)

    def charge(self, n: float) -> None:
        """Spend ``n`` more tokens without waiting (what a call cost beyond what it paid first):
        the next `take` waits for the debt.  A negative ``n`` gives back what was paid for and
        not sent (up to the burst)."""
        if self.rate <= 0 or n == 0:
            return
        with self.lock:
            now = self.clock()
            self.tokens, self.stamp = self._refill(now) - n, now

    def resize(self, rate: float, account: float = PASS_BURST) -> None:
        """A new rate (the fleet grew or shrank); tokens saved up stay within the new burst."""
        with self.lock:
            if rate != self.rate:
                if self.tokens is not None and self.rate > 0:
                    self.tokens = self._refill(self.clock())
                    self.stamp = self.clock()
                self.rate, self.burst = rate, burst_for(rate, account)
                if self.tokens is not None:
                    self.tokens = min(self.tokens, self.burst)




def burst_for(rate: float, account: float = PASS_BURST) -> float:
    """Five seconds' worth of requests, and at least a pass's worth (`PASS_BURST`), so one agent
    whose change the rest of the fleet does not share reaches the zone at once even when its
    share of the account is one request in minutes (no more than the account's own rate per
    second: ``account``; Azure's 1 list a second is a burst of one); the fleet's own bursts are
    spread by the webhook's wake-up (`gitdns.agent.runner.wake_delay`) and by unchanged agents
    reading nothing."""
    return max(1.0, rate * 5, min(PASS_BURST, account))


class Budgets:
    """One read bucket and one write bucket per (provider, account), shared by every zone (one
    bucket for both where the service counts reads and writes together: Route53).  Each bucket's
    rate is the service's budget divided by the fleet size *now*: it follows git as Clusters
    join and leave."""

    def __init__(self, fleet_size: Callable[[], int], clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 uniform: Callable[[float, float], float] = random.uniform) -> None:
        self.fleet_size = fleet_size
        self.clock = clock
        self.sleep = sleep
        self.uniform = uniform  # the jitter of throttling backoff
        self.buckets: dict[tuple[str, str, str], TokenBucket] = {}

    def bucket(self, provider: Provider, kind: str) -> TokenBucket:
        account = str(getattr(provider, "account", provider.name))
        caps = provider.capabilities
        if caps.one_budget:
            kind = "all"
        per_minute = caps.writes_per_minute if kind == "write" else caps.reads_per_minute
        rate = per_minute / 60.0 * HEADROOM / max(self.fleet_size(), 1)
        key = (provider.name, account, kind)
        found = self.buckets.get(key)
        if found is None:
            # in a fleet, the first token comes at a random point of one token's interval: agents
            # rolled out together would otherwise send together at every interval for good
            start = 1.0 - self.uniform(0.0, 1.0) if self.fleet_size() > 1 and rate > 0 else None
            found = self.buckets[key] = TokenBucket(rate, burst_for(rate, per_minute / 60.0), self.clock,
                                                    self.sleep, tokens=start, stamp=self.clock(),
                                                    jitter=self.uniform if self.fleet_size() > 1 else None)
        else:
            found.resize(rate, per_minute / 60.0)
        return found

    def gap(self, provider: Provider, kind: str) -> float:
        """The shortest time between two requests of one call: the account's rate for the kind."""
        caps = provider.capabilities
        per_minute = caps.writes_per_minute if kind == "write" and not caps.one_budget else caps.reads_per_minute
        return 60.0 / per_minute if per_minute > 0 else 0.0

    def wrap(self, provider: Provider) -> Provider:
        return BudgetedProvider(provider, self)


class _Gate:
    """Called by the provider before each request of one call: the requests past those paid for
    before the call wait for their token first, and no two of this agent's requests follow
    closer than the account's own rate allows (``gap``, kept across calls in ``spacing``: a
    27-page listing, or a validation's dozen reads by name on saved-up tokens, sent back to back
    is throttled by itself)."""

    def __init__(self, bucket: TokenBucket, paid: int, gap: float, spacing: list[float | None]) -> None:
        self.bucket, self.paid, self.gap, self.sent = bucket, paid, gap, 0
        self.spacing = spacing  # [the instant of this agent's last request], shared by its calls

    def __call__(self) -> None:
        self.sent += 1
        if self.sent > self.paid:
            self.bucket.take()
        now = self.bucket.clock()
        last = self.spacing[0]
        if last is not None and now - last < self.gap:
            self.bucket.sleep(self.gap - (now - last))
        self.spacing[0] = self.bucket.clock()


class BudgetedProvider:
    """The provider protocol, each call paid for from the account's buckets."""

    def __init__(self, inner: Provider, budgets: Budgets) -> None:
        self.inner = inner
        self.budgets = budgets
        self.name = inner.name
        self.capabilities: Capabilities = inner.capabilities
        self.account = getattr(inner, "account", inner.name)
        self.pages: dict[str, int] = {}  # zone -> requests its last whole-zone read sent
        self.sent = 0  # requests paid for so far (what a pass cost: the difference)
        self.spacing: dict[str, list[float | None]] = {}  # per kind: the instant of the last request

    def __getattr__(self, item: str) -> object:  # views_dir and other extras of the inner provider
        return getattr(self.inner, item)

    def _sent(self) -> int | None:
        count = getattr(self.inner, "requests", None)
        return count if isinstance(count, int) else None

    def _call(self, kind: str, fn: Callable[[], T], estimate: int = 1, whole: str = "") -> T:
        """One call of the provider protocol, paid for before it is sent: ``estimate`` tokens
        (a whole-zone read: the requests the last one of the zone sent, its pages; a read by
        name: one per name), then the difference once the provider counted what it sent
        (``requests``; a provider that counts none costs one per call)."""
        bucket = self.budgets.bucket(self.inner, kind)
        estimate = max(1, estimate)
        for attempt in range(THROTTLE_RETRIES + 1):
            bucket.take(estimate)
            before = self._sent()
            spacing = self.spacing.setdefault("all" if self.capabilities.one_budget else kind, [None])
            gate = _Gate(bucket, estimate, self.budgets.gap(self.inner, kind), spacing)
            try:
                with request_gate(gate):
                    result = fn()
                if whole and before is not None:
                    sent = self._sent()
                    if sent is not None:
                        self.pages[whole] = max(1, sent - before)
                return result
            except ThrottledError as exc:
                if attempt == THROTTLE_RETRIES:
                    raise
                # jittered: agents throttled together must not come back together (they would
                # be throttled together again, every time)
                wait = (exc.retry_after if exc.retry_after is not None
                        else min(0.75 * 2 ** attempt, THROTTLE_BACKOFF_CAP)) * self.budgets.uniform(1.0, 2.0)
                log.warning("throttled: provider=%s kind=%s retry_in=%.2fs", self.name, kind, wait)
                self.budgets.sleep(wait)
            finally:
                after = self._sent()
                if before is not None and after is not None:
                    bucket.charge(after - before - max(estimate, gate.sent))
                    self.sent += after - before
                else:
                    self.sent += estimate
        raise AssertionError("unreachable")


    def wait_for(self, requests: int) -> float:
        """Seconds until this agent's share holds ``requests`` (a quiet validation waits for its
        cost and a change's reserve, `RESERVE`, so a change arriving after it is not queued behind
        its debt); 0 when it does now or the provider has no limit."""
        return self.budgets.bucket(self.inner, "read").until(requests)

    def seconds_for(self, requests: int) -> float:
        """How long this agent's share of the account takes to pay for ``requests`` (0: no limit)."""
        rate = self.budgets.bucket(self.inner, "read").rate
        return requests / rate if rate > 0 else 0.0

    def zones(self) -> list[ZoneInfo]:
        return self._call("read", self.inner.zones)

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        if names is None:
            return self._call("read", lambda: self.inner.read(zone), self.pages.get(zone, 1), whole=zone)
        wanted = sorted(set(names))
        if len(wanted) <= 1 or self.capabilities.page_size <= 0 or self.budgets.bucket(self.inner, "read").rate <= 0:
            return self._call("read", lambda: self.inner.read(zone, wanted), len(wanted))
        # a read by name is one request per name (Route53): each is paid for before it is sent,
        # and a throttled one is tried again alone, not with every name before it
        parts = [self._call("read", lambda name=name: self.inner.read(zone, [name])) for name in wanted]  # type: ignore[misc]
        return ZoneSnapshot(zone=parts[0].zone, records=tuple(r for p in parts for r in p.records),
                            complete=all(p.complete for p in parts), version="", names=snapshot_names(wanted))

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        return self._call("write", lambda: self.inner.apply(zone, changes, guards))
