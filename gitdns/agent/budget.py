"""Provider request budgets: the agent owns them, providers report throttling.

A fleet shares an account's budget (Route53: 5 requests/s per account; Google: 240 reads and
60 writes per minute; Azure: 60 lists and 40 writes per minute), so each agent takes
``budget ÷ fleet size`` (the fleet is known from git) as a token bucket per account.  Every
read and apply waits for a token; a throttled call waits what the service asked
(Retry-After) or backs off, and is tried again: throttling is never fatal.
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
    """``rate`` tokens per second, at most ``burst`` saved up."""

    rate: float
    burst: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    tokens: float | None = None
    stamp: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    waited: float = 0.0  # seconds spent waiting, for metrics and tests

    def take(self, n: float = 1.0) -> None:
        if self.rate <= 0:
            return
        with self.lock:
            now = self.clock()
            tokens = self.burst if self.tokens is None else self.tokens
            tokens = min(self.burst, tokens + (now - self.stamp) * self.rate) - n
            self.tokens, self.stamp = tokens, now
            wait = -tokens / self.rate if tokens < 0 else 0.0
        if wait > 0:
            self.waited += wait
            self.sleep(wait)


class Budgets:
    """One read bucket and one write bucket per (provider, account), shared by every zone."""

    def __init__(self, fleet_size: Callable[[], int], clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.fleet_size = fleet_size
        self.clock = clock
        self.sleep = sleep
        self.buckets: dict[tuple[str, str, str], TokenBucket] = {}

    def bucket(self, provider: Provider, kind: str) -> TokenBucket:
        account = str(getattr(provider, "account", provider.name))
        key = (provider.name, account, kind)
        if key not in self.buckets:
            caps = provider.capabilities
            per_minute = caps.reads_per_minute if kind == "read" else caps.writes_per_minute
            rate = per_minute / 60.0 / max(self.fleet_size(), 1)
            self.buckets[key] = TokenBucket(rate, max(1.0, rate * 5), self.clock, self.sleep)
        return self.buckets[key]

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

    def _call(self, kind: str, fn: Callable[[], T]) -> T:
        bucket = self.budgets.bucket(self.inner, kind)
        for attempt in range(THROTTLE_RETRIES + 1):
            bucket.take()
            try:
                return fn()
            except ThrottledError as exc:
                if attempt == THROTTLE_RETRIES:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else min(0.75 * 2 ** attempt,
                                                                                THROTTLE_BACKOFF_CAP)
                log.warning("throttled: provider=%s kind=%s retry_in=%.2fs", self.name, kind, wait)
                self.budgets.sleep(wait)
        raise AssertionError("unreachable")

    def zones(self) -> list[ZoneInfo]:
        return self._call("read", self.inner.zones)

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        if names is None:
            return self._call("read", lambda: self.inner.read(zone))
        return self._call("read", lambda: self.inner.read(zone, names))

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        return self._call("write", lambda: self.inner.apply(zone, changes, guards))
