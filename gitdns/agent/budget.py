"""Provider request budgets: the agent owns them, providers report throttling.

A fleet shares an account's budget (Route53: 5 requests/s per account, reads and writes
together; Google: 240 reads and 60 writes per minute; Azure: 60 lists and 40 writes per
minute), so each agent takes ``budget ÷ fleet size`` (the fleet is known from git, and the
rate follows it) as a token bucket per account.  Every read and apply waits for a token and is
charged every further request it sent (a paged read: one per page; the provider counts them);
a throttled call waits what the service asked (Retry-After) or backs off, and is tried again:
throttling is never fatal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gitdns.core.records import Change, Guard, ZoneSnapshot
from gitdns.errors import ThrottledError
from gitdns.providers.base import ApplyResult, Capabilities, Provider, ZoneInfo

log = logging.getLogger(__name__)

T = TypeVar("T")
THROTTLE_RETRIES = 6
THROTTLE_BACKOFF_CAP = 60.0


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up; a bucket may go into debt
    (`charge`), which the next `take` waits out."""

    rate: float
    burst: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    tokens: float | None = None
    stamp: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    waited: float = 0.0  # seconds spent waiting, for metrics and tests

    def _refill(self, now: float) -> float:
        tokens = self.burst if self.tokens is None else self.tokens
        return min(self.burst, tokens + (now - self.stamp) * self.rate)

    def take(self, n: float = 1.0) -> None:
        if self.rate <= 0:
            return
        with self.lock:
            now = self.clock()
            tokens = self._refill(now) - n
            self.tokens, self.stamp = tokens, now
            wait = -tokens / self.rate if tokens < 0 else 0.0
        if wait > 0:
            self.waited += wait
            self.sleep(wait)

    def charge(self, n: float) -> None:
        """Spend ``n`` more tokens without waiting (what a call cost beyond the one it took):
        the next `take` waits for the debt."""
        if self.rate <= 0 or n <= 0:
            return
        with self.lock:
            now = self.clock()
            self.tokens, self.stamp = self._refill(now) - n, now

    def resize(self, rate: float) -> None:
        """A new rate (the fleet grew or shrank); tokens saved up stay within the new burst."""
        with self.lock:
            if rate != self.rate:
                if self.tokens is not None and self.rate > 0:
                    self.tokens = self._refill(self.clock())
                    self.stamp = self.clock()
                self.rate, self.burst = rate, burst_for(rate)
                if self.tokens is not None:
                    self.tokens = min(self.tokens, self.burst)


def burst_for(rate: float) -> float:
    """Five seconds' worth of calls, at least one."""
    return max(1.0, rate * 5)


class Budgets:
    """One read bucket and one write bucket per (provider, account), shared by every zone (one
    bucket for both where the service counts reads and writes together: Route53).  Each bucket's
    rate is the service's budget divided by the fleet size *now*: it follows git as Clusters
    join and leave."""

    def __init__(self, fleet_size: Callable[[], int], clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.fleet_size = fleet_size
        self.clock = clock
        self.sleep = sleep
        self.buckets: dict[tuple[str, str, str], TokenBucket] = {}

    def bucket(self, provider: Provider, kind: str) -> TokenBucket:
        account = str(getattr(provider, "account", provider.name))
        caps = provider.capabilities
        if caps.one_budget:
            kind = "all"
        per_minute = caps.writes_per_minute if kind == "write" else caps.reads_per_minute
        rate = per_minute / 60.0 / max(self.fleet_size(), 1)
        key = (provider.name, account, kind)
        found = self.buckets.get(key)
        if found is None:
            found = self.buckets[key] = TokenBucket(rate, burst_for(rate), self.clock, self.sleep)
        else:
            found.resize(rate)
        return found

    def wrap(self, provider: Provider) -> Provider:
        return BudgetedProvider(provider, self)


class BudgetedProvider:
    """The provider protocol, each call paid for from the account's buckets."""

    def __init__(self, inner: Provider, budgets: Budgets) -> None:
        self.inner = inner
        self.budgets = budgets
        self.name = inner.name
        self.capabilities: Capabilities = inner.capabilities
        self.account = getattr(inner, "account", inner.name)

    def __getattr__(self, item: str) -> object:  # views_dir and other extras of the inner provider
        return getattr(self.inner, item)

    def _sent(self) -> int | None:
        count = getattr(self.inner, "requests", None)
        return count if isinstance(count, int) else None

    def _call(self, kind: str, fn: Callable[[], T]) -> T:
        """One call of the provider protocol: one token first, then one for every further
        request it sent to the service (a paged read, a write in several batches), as the
        provider counts them (``requests``); a provider that counts none costs one per call."""
        bucket = self.budgets.bucket(self.inner, kind)
        for attempt in range(THROTTLE_RETRIES + 1):
            bucket.take()
            before = self._sent()
            try:
                return fn()
            except ThrottledError as exc:
                if attempt == THROTTLE_RETRIES:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else min(0.75 * 2 ** attempt,
                                                                                THROTTLE_BACKOFF_CAP)
                log.warning("throttled: provider=%s kind=%s retry_in=%.2fs", self.name, kind, wait)
                self.budgets.sleep(wait)
            finally:
                after = self._sent()
                if before is not None and after is not None:
                    bucket.charge(after - before - 1)
        raise AssertionError("unreachable")


    def zones(self) -> list[ZoneInfo]:
        return self._call("read", self.inner.zones)

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        if names is None:
            return self._call("read", lambda: self.inner.read(zone))
        return self._call("read", lambda: self.inner.read(zone, names))

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        return self._call("write", lambda: self.inner.apply(zone, changes, guards))
