"""The account's budget shared by a fleet: the rate follows git's fleet size, every request a
call sent is paid for, and Route53's reads and writes spend one budget."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gitdns.agent.budget import Budgets, TokenBucket
from gitdns.core.records import ZoneSnapshot
from gitdns.providers.memory import MemoryProvider
from gitdns.providers.route53 import CAPABILITIES as ROUTE53
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
    assert budgets.bucket(prov, "read").rate == pytest.approx(1.0)
    size[0] = 100
    bucket = budgets.bucket(prov, "read")
    assert bucket.rate == pytest.approx(0.01) and bucket.burst == 1.0
    wrapped = budgets.wrap(prov)
    for _ in range(3):
        wrapped.read("example.com")
    assert sum(t.slept) == pytest.approx(200.0, abs=1.0)  # 3 reads at 1 per 100 s, 1 saved up


def test_each_request_a_call_sent_is_paid_for() -> None:
    """A whole-zone read of 20 pages is 20 of the account's requests, not one."""
    t = FakeTime()
    budgets = Budgets(lambda: 1, t.clock, t.sleep)
    wrapped = budgets.wrap(Paged(20))
    wrapped.read("example.com")
    assert t.slept == []  # the first call is not delayed: its debt is paid by the next
    wrapped.read("example.com")
    # 1 token a second, 5 saved up: the first read leaves 5 - 20 = -15, the second waits 16 s
    assert sum(t.slept) == pytest.approx(16.0)


def test_a_provider_that_counts_no_requests_costs_one_per_call() -> None:
    t = FakeTime()
    prov = MemoryProvider()
    prov.capabilities = dataclasses.replace(prov.capabilities, reads_per_minute=60.0)  # type: ignore[misc]
    wrapped = Budgets(lambda: 1, t.clock, t.sleep).wrap(prov)
    for _ in range(6):
        wrapped.read("example.com")
    assert sum(t.slept) == pytest.approx(1.0)


def test_route53_reads_and_writes_spend_one_budget() -> None:
    assert ROUTE53.one_budget
    t = FakeTime()
    budgets = Budgets(lambda: 1, t.clock, t.sleep)
    prov = Paged(1, one_budget=True)
    assert budgets.bucket(prov, "read") is budgets.bucket(prov, "write")
    wrapped = budgets.wrap(prov)
    for _ in range(5):
        wrapped.read("example.com")
    wrapped.apply("example.com", [])
    assert sum(t.slept) == pytest.approx(1.0)  # the sixth request of either kind waits
    split = Budgets(lambda: 1, t.clock, t.sleep)
    other = Paged(1)
    assert split.bucket(other, "read") is not split.bucket(other, "write")


def test_route53_provider_counts_every_page() -> None:
    from gitdns.core.records import Action, Change, RecordSet
    from gitdns.providers.route53 import Route53Provider

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
    assert t.slept == [pytest.approx(1.5)]  # 2 - 1 - 3 - 1 = -3 tokens at 2 a second
