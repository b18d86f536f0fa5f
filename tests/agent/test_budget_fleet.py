"""The account's budget shared by a fleet: the rate follows git's fleet size, every request a
call sent is paid for, and Route53's reads and writes spend one budget."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gitdns.agent.budget import HEADROOM, PASS_BURST, Budgets, TokenBucket
from gitdns.core.records import ZoneSnapshot
from gitdns.providers.memory import MemoryProvider
from gitdns.providers.route53.provider import CAPABILITIES as ROUTE53
from tests.providers.route53_fake import FakeRoute53


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Paged(MemoryProvider):
    """A provider whose whole-zone read sends ``pages`` requests (as a paged listing does)."""

    def __init__(self, pages: int, *, one_budget: bool = False) -> None:
        super().__init__()
        self.pages = pages
        self.requests = 0
        self.capabilities = dataclasses.replace(  # type: ignore[misc]
            self.capabilities, reads_per_minute=60.0, writes_per_minute=60.0, one_budget=one_budget)

    def read(self, zone: str, names: Any = None) -> ZoneSnapshot:
        self.requests += self.pages if names is None else len(names)
        return super().read(zone, names)

    def apply(self, zone: str, changes: Any, guards: Any = ()) -> Any:
        self.requests += 1
        return super().apply(zone, changes, guards)


def test_the_rate_follows_the_fleet_size_after_the_bucket_exists() -> None:
    """The first call of an agent comes before it knows the fleet (git not loaded yet: size 1);
    the bucket made then must not keep the whole account's budget once git says 100."""
    t, size = FakeTime(), [1]
    budgets = Budgets(lambda: size[0], t.clock, t.sleep)
    prov = Paged(1)
    assert budgets.bucket(prov, "read").rate == pytest.approx(HEADROOM)
    size[0] = 100
    bucket = budgets.bucket(prov, "read")
    # saving up at most a pass's worth, and no more than the account's own second (1 here)
    assert bucket.rate == pytest.approx(HEADROOM / 100) and bucket.burst == min(PASS_BURST, 1.0)
    wrapped = budgets.wrap(prov)
    for _ in range(10):
        wrapped.read("example.com")
    # a new bucket holds one token: the 9 reads after it wait 125 s each (0.8 of 1 a second ÷ 100)
    assert sum(t.slept) == pytest.approx(9 * 100 / HEADROOM)


def test_each_request_a_call_sent_is_paid_for() -> None:
    """A whole-zone read of 20 pages is 20 of the account's requests, not one; once the zone's
    size is known, the next is paid for before it is sent."""
    t = FakeTime()
    budgets = Budgets(lambda: 1, t.clock, t.sleep)
    wrapped = budgets.wrap(Paged(20))
    wrapped.read("example.com")
    assert t.slept == []  # the first call's pages are not known yet: its debt is paid by the next
    wrapped.read("example.com")
    # 0.8 tokens a second, one to start with: the first read leaves 1 - 20 = -19; the second
    # pays its 20 pages before it is sent: it waits 39 tokens' worth
    assert sum(t.slept) == pytest.approx(39 / HEADROOM)


def test_a_provider_that_counts_no_requests_costs_one_per_call() -> None:
    t = FakeTime()
    prov = MemoryProvider()
    prov.capabilities = dataclasses.replace(prov.capabilities, reads_per_minute=60.0)  # type: ignore[misc]
    wrapped = Budgets(lambda: 1, t.clock, t.sleep).wrap(prov)
    for _ in range(3):
        wrapped.read("example.com")
    assert sum(t.slept) == pytest.approx(2 / HEADROOM)


def test_route53_reads_and_writes_spend_one_budget() -> None:
    assert ROUTE53.one_budget
    t = FakeTime()
    budgets = Budgets(lambda: 1, t.clock, t.sleep)
    prov = Paged(1, one_budget=True)
    assert budgets.bucket(prov, "read") is budgets.bucket(prov, "write")
    wrapped = budgets.wrap(prov)
    wrapped.read("example.com")
    wrapped.apply("example.com", [])
    assert sum(t.slept) == pytest.approx(1 / HEADROOM)  # the second request of either kind waits
    split = Budgets(lambda: 1, t.clock, t.sleep)
    other = Paged(1)
    assert split.bucket(other, "read") is not split.bucket(other, "write")


def test_route53_provider_counts_every_page() -> None:
    from gitdns.core.records import Action, Change, RecordSet
    from gitdns.providers.route53.provider import Route53Provider

    fake = FakeRoute53()
    zid = fake.add_zone("example.com")
    prov = Route53Provider("example.com", fake, hosted_zone_id=zid)
    records = [RecordSet(f"h{i:04d}.example.com", "A", 60, ("192.0.2.1",)) for i in range(700)]
    changes = [Change(Action.CREATE, None, rec, rec.key) for rec in records]
    prov.apply("example.com", changes)
    sent = prov.requests
    assert sent == fake.calls["change_resource_record_sets"] == 1
    prov.read("example.com")
    assert prov.requests - sent == fake.calls["list_resource_record_sets"] == 3  # 702 rrsets, 300 a page


def test_bucket_debt_is_waited_out_by_the_next_take() -> None:
    t = FakeTime()
    bucket = TokenBucket(rate=2.0, burst=2.0, clock=t.clock, sleep=t.sleep)
    bucket.take()
    bucket.charge(3)
    assert t.slept == []
    bucket.take()
    assert t.slept == [pytest.approx(2.0)]  # 1 to start with - 1 - 3 - 1 = -4 tokens at 2 a second


class Pages(MemoryProvider):
    """A provider whose whole-zone read sends ``pages`` requests, each announced to the budget
    before it is sent (as the Route53 and Google providers do), and whose reads by name are one
    request per name, one of them throttled once."""

    def __init__(self, pages: int, clock: FakeTime, throttle: str = "") -> None:
        super().__init__()
        self.pages, self.time, self.throttle = pages, clock, throttle
        self.requests = 0
        self.sent_at: list[float] = []
        self.by_name: list[list[str]] = []
        self.capabilities = dataclasses.replace(  # type: ignore[misc]
            self.capabilities, reads_per_minute=60.0, writes_per_minute=60.0, page_size=300)

    def read(self, zone: str, names: Any = None) -> ZoneSnapshot:
        from gitdns.errors import ThrottledError
        from gitdns.providers.base import send

        def request() -> None:
            self.requests += 1
            self.sent_at.append(self.time.now)
            if names is not None and self.throttle in names:
                self.throttle = ""
                raise ThrottledError("Rate exceeded")

        if names is not None:
            self.by_name.append(list(names))
            send(request)
            return super().read(zone, names)
        for _ in range(self.pages):
            send(request)
        return super().read(zone)


def test_each_page_waits_for_its_token_before_it_is_sent() -> None:
    """Reads paid before they are sent: past what a call paid up front, every page of it waits
    for its own token, so one call never sends more than the agent's share allows."""
    t = FakeTime()
    prov = Pages(12, t)
    wrapped = Budgets(lambda: 1, t.clock, t.sleep).wrap(prov)
    wrapped.read("example.com")
    step = 1 / HEADROOM
    assert prov.sent_at == pytest.approx([i * step for i in range(12)])  # one to start with, then paced
    prov.sent_at.clear()
    wrapped.read("example.com")  # 12 pages known now: paid before the first is sent, then sent
    # no closer than the account's own rate (1 a second): never a burst the service throttles
    assert prov.sent_at == pytest.approx([23 * step + i for i in range(12)])


def test_a_read_by_name_is_sent_name_by_name_and_a_throttled_name_is_tried_alone() -> None:
    t = FakeTime()
    prov = Pages(1, t, throttle="c.example.com")
    wrapped = Budgets(lambda: 1, t.clock, t.sleep).wrap(prov)
    snap = wrapped.read("example.com", ["a.example.com", "b.example.com", "c.example.com", "d.example.com"])
    assert prov.by_name == [["a.example.com"], ["b.example.com"], ["c.example.com"], ["d.example.com"]]
    assert prov.requests == 5  # c's request, throttled, was sent again alone: a, b before it were not
    assert snap.names == frozenset({"a.example.com", "b.example.com", "c.example.com", "d.example.com"})


def test_reads_by_name_on_saved_up_tokens_are_spaced_at_the_accounts_rate() -> None:
    """A validation's dozen reads by name, paid from tokens saved up while the agent was quiet,
    go no closer than the account's own rate (here 1 a second) across calls: back to back they
    would be throttled by the service on their own."""
    t = FakeTime()
    prov = Pages(1, t)
    budgets = Budgets(lambda: 1, t.clock, t.sleep)
    wrapped = budgets.wrap(prov)
    bucket = budgets.bucket(prov, "read")
    assert bucket.until(14) > 0  # let it save up 14 tokens
    t.now += 100.0
    assert bucket.until(14) == 0.0
    names = [f"n{i:02d}.example.com" for i in range(12)]
    wrapped.read("example.com", names)
    gaps = [b - a for a, b in zip(prov.sent_at, prov.sent_at[1:], strict=False)]
    assert len(gaps) == 11 and min(gaps) >= 1.0 - 1e-9, gaps
    assert max(gaps) <= 1.0 + 1e-9  # and no slower: the tokens were there
