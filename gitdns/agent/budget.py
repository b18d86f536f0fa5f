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
    share of the account is one request in minutes; no more than the service takes at once
    (``account``: its quota over its window, `Capabilities.quota_window`: Route53's 5 a second;
    Google's and Azure's quotas are per minute, so a pass's worth).  A pass of two writes
    (Azure writes a record and its TXT one by one) with a burst of one waited a whole token
    interval between them (three minutes at 100 agents).  The fleet's own bursts are spread by
    the webhook's wake-up (`gitdns.agent.runner.wake_delay`), by unchanged agents reading
    nothing, and an agent's requests within a burst by the account's own rate (`Budgets.gap`)."""
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
        kind = _kind(caps, kind)
        per_minute = _per_minute(caps, kind)
        rate = per_minute / 60.0 * HEADROOM / max(self.fleet_size(), 1)
        key = (provider.name, account, kind)
        found = self.buckets.get(key)
        if found is None:
            # in a fleet, the first token comes at a random point of one token's interval: agents
            # rolled out together would otherwise send together at every interval for good
            start = 1.0 - self.uniform(0.0, 1.0) if self.fleet_size() > 1 and rate > 0 else None
            window = per_minute / 60.0 * caps.quota_window  # what the service takes at once
            found = self.buckets[key] = TokenBucket(rate, burst_for(rate, window), self.clock,
                                                    self.sleep, tokens=start, stamp=self.clock(),
                                                    jitter=self.uniform if self.fleet_size() > 1 else None)
        else:
            found.resize(rate, per_minute / 60.0 * caps.quota_window)
        return found

    def gap(self, provider: Provider, kind: str) -> float:
        """The shortest time between two requests of one call: the account's rate for the kind."""
        per_minute = _per_minute(provider.capabilities, _kind(provider.capabilities, kind))
        return 60.0 / per_minute if per_minute > 0 else 0.0

    def wrap(self, provider: Provider) -> Provider:
        return BudgetedProvider(provider, self)


def _kind(caps: Capabilities, kind: str) -> str:
    """The bucket a request kind spends: "all" where the service counts everything together
    (Route53); "name" (a read by name) spends "read" unless it has its own quota (Azure's GETs)."""
    if caps.one_budget:
        return "all"
    if kind == "name" and caps.name_reads_per_minute <= 0:
        return "read"
    return kind


def _per_minute(caps: Capabilities, kind: str) -> float:
    if kind == "write":
        return caps.writes_per_minute
    if kind == "name":
        return caps.name_reads_per_minute
    return caps.reads_per_minute


class _Gate:
    """Called by the provider before each request of one call: the requests past those paid for
    before the call wait for their token first, and no two of this agent's requests follow
    closer than the account's own rate allows (``gap``, kept across calls in ``spacing``: a
    27-page listing, or a validation's dozen reads by name on saved-up tokens, sent back to back
    is throttled by itself).  A request of another kind inside the call (Google reads the rrsets
    a change replaces inside its apply) is paid from that kind's bucket (``lend``), not from the
    call's: at 100 agents a Google write token is two minutes of an agent's share, a read 30 s."""

    def __init__(self, bucket: TokenBucket, paid: int, gap: float, spacing: list[float | None],
                 backoff: Callable[[ThrottledError, int], float], kind: str = "",
                 lend: Callable[[str], tuple[TokenBucket, float, list[float | None]]] | None = None) -> None:
        self.bucket, self.paid, self.gap, self.sent = bucket, paid, gap, 0
        self.spacing = spacing  # [the instant of this agent's last request], shared by its calls
        self.backoff = backoff
        self.kind, self.lend = kind, lend
        self.other = 0  # requests of another kind, paid from their own bucket
        self._refund: TokenBucket | None = None  # the other kind's bucket, when its request was throttled
        self._last_other: TokenBucket | None = None  # the bucket of the last request, if another kind's
        self.gave_up = False  # a request throttled past THROTTLE_RETRIES: the call is not tried again

    def __call__(self, kind: str | None = None) -> None:
        if kind is not None and kind != self.kind and self.lend is not None:
            bucket, gap, spacing = self.lend(kind)
            if bucket is not self.bucket:
                self.other += 1
                self._last_other = bucket
                if self._refund is bucket:
                    self._refund = None  # a throttled request sent again: its token paid for it
                else:
                    bucket.take()
                _space(bucket, gap, spacing)
                return
        self._last_other = None
        self.sent += 1
        if self.sent > self.paid:
            self.bucket.take()
        _space(self.bucket, self.gap, self.spacing)

    def again(self, exc: ThrottledError, attempt: int) -> bool:
        """The service throttled one request of this call: wait, then send that request again
        (`gitdns.providers.base.send`), never the call's requests that landed before it."""
        if attempt >= THROTTLE_RETRIES:
            self.gave_up = True
            return False
        self.bucket.sleep(self.backoff(exc, attempt))
        # the service refused it, so its token pays for it again: the wait is the service's
        if self._last_other is not None:
            self._refund = self._last_other
        else:
            self.paid += 1
        return True


def _space(bucket: TokenBucket, gap: float, spacing: list[float | None]) -> None:
    """No two of this agent's requests of one kind closer than ``gap``."""
    now = bucket.clock()
    last = spacing[0]
    if last is not None and now - last < gap:
        bucket.sleep(gap - (now - last))
    spacing[0] = bucket.clock()


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
            spacing = self.spacing.setdefault(_kind(self.capabilities, kind), [None])
            gate = _Gate(bucket, estimate, self.budgets.gap(self.inner, kind), spacing, self._backoff, kind,
                         self._lend)
            try:
                with request_gate(gate):
                    result = fn()
                if whole and before is not None:
                    sent = self._sent()
                    if sent is not None:
                        self.pages[whole] = max(1, sent - before)
                return result
            except ThrottledError as exc:
                # a provider whose requests go through the gate (`send`) was already tried again
                # request by request: the whole call is not sent again (its landed requests
                # would be); one that throttles the call before any request is
                if attempt == THROTTLE_RETRIES or gate.sent or gate.gave_up:
                    raise
                self.budgets.sleep(self._backoff(exc, attempt))
            finally:
                after = self._sent()
                if before is not None and after is not None:
                    bucket.charge(after - before - max(estimate, gate.sent) - gate.other)
                    self.sent += after - before
                else:
                    self.sent += estimate
        raise AssertionError("unreachable")

    def _lend(self, kind: str) -> tuple[TokenBucket, float, list[float | None]]:
        """The bucket, gap and spacing a request of ``kind`` is paid from."""
        spacing = self.spacing.setdefault(_kind(self.capabilities, kind), [None])
        return self.budgets.bucket(self.inner, kind), self.budgets.gap(self.inner, kind), spacing

    def _backoff(self, exc: ThrottledError, attempt: int) -> float:
        """Seconds to wait after a throttle: what the service asked (Retry-After) or an
        exponential backoff, jittered (agents throttled together must not come back together:
        they would be throttled together again, every time)."""
        # a quota per minute frees its slots as the minute's requests age out: a retry within the
        # second is refused again, so the backoff starts at an eighth of the window
        base = max(0.75, self.capabilities.quota_window / 8)
        wait = (exc.retry_after if exc.retry_after is not None
                else min(base * 2 ** attempt, THROTTLE_BACKOFF_CAP)) * self.budgets.uniform(1.0, 2.0)
        log.warning("throttled: provider=%s retry_in=%.2fs", self.name, wait)
        return wait

    def wait_for(self, requests: int) -> float:
        """Seconds until this agent's share holds ``requests`` (a quiet validation waits for its
        cost and a change's reserve, `RESERVE`, so a change arriving after it is not queued behind
        its debt); 0 when it does now or the provider has no limit."""
        return self.budgets.bucket(self.inner, "read").until(requests)

    def seconds_for(self, requests: int) -> float:
        """How long this agent's share of the account takes to pay for ``requests`` (0: no limit)."""
        rate = self.budgets.bucket(self.inner, "read").rate
        return requests / rate if rate > 0 else 0.0

    def ready_to_write(self, zone: str, names: Collection[str] | None = None) -> float:
        """Before a read whose plan is meant to be written (a pass after a change, a re-plan
        after a stale refusal): wait until this agent's share holds that read's requests and a
        write's, so the write follows its read at once; returns the seconds waited.

        Paid for one by one, the write waited for its own token after the read: at 100 agents
        on one Google project a change token is two minutes of an agent's share, and a record
        set the fleet shares (a weighted answer's items) had always moved by then, so the write
        was refused as stale, read again and waited again: the fleet never converged.  Waiting
        first costs no more time, and the read it plans from is a fraction of a second old."""
        read = self.budgets.bucket(self.inner, "read" if names is None else "name")
        write = self.budgets.bucket(self.inner, "write")
        if read is write:
            # one bucket (Route53): the write's token is the next after the reads' anyway, and
            # waiting for all of them first made each agent send them as one burst: at 1,000
            # agents on 5 requests/s those bursts collided (7,466 throttled in a fleet-wide change)
            return 0.0
        reads = self._read_estimate(zone, names)
        waited = 0.0
        for _ in range(THROTTLE_RETRIES + 1):  # the buckets fill together: one wait, rarely two
            wait = max(read.until(reads), write.until(1))
            if wait <= 0:
                break
            self.budgets.sleep(wait)
            waited += wait
        return waited

    def _read_estimate(self, zone: str, names: Collection[str] | None) -> int:
        """The requests a `read` of ``names`` (None: the whole zone) is paid for before it is sent."""
        if names is None:
            return self.pages.get(zone, 1)
        return max(1, len(set(names)))

    def zones(self) -> list[ZoneInfo]:
        return self._call("read", self.inner.zones)

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        if names is None:
            return self._call("read", lambda: self.inner.read(zone), self.pages.get(zone, 1), whole=zone)
        wanted = sorted(set(names))
        caps = self.capabilities
        if (len(wanted) <= 1 or caps.page_size <= 0 or caps.name_reads_per_minute > 0
                or self.budgets.bucket(self.inner, "name").rate <= 0):
            # one call: where a name is several requests (Azure GETs each record set the names
            # read together announce: `gitdns.providers.azure.provider.probes`), each is paid as it is sent
            return self._call("name", lambda: self.inner.read(zone, wanted), len(wanted))
        # a read by name is one request per name (Route53; Azure: a GET per record set probed):
        # each name is paid for before it is sent
        parts = [self._call("name", lambda name=name: self.inner.read(zone, [name])) for name in wanted]  # type: ignore[misc]
        return ZoneSnapshot(zone=parts[0].zone, records=tuple(r for p in parts for r in p.records),
                            complete=all(p.complete for p in parts), version="", names=snapshot_names(wanted))

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        return self._call("write", lambda: self.inner.apply(zone, changes, guards))
