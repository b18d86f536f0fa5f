"""A throttle in the middle of a call sends again only the throttled request.

Every cloud provider's apply is several requests where a zone's changes do not fit one:
Route53 one change batch per 1,000 values, Google Cloud DNS one change per 100 groups, Azure DNS
one record set at a time.  The service throttles one of them (it did nothing); the requests before
it landed.  The agent's budget waits and sends **that request** again
(`gitdns.providers.base.send`), never the call: a whole apply sent again would send the landed
requests a second time, and compare-and-swap refuses them (Route53's CREATE of a record that
exists, Google's ``alreadyExists``, Azure's ``If-None-Match: *``), so the pass failed as stale
on its own writes.  Each provider runs here on its strict fake, through its real client, with
the throttle injected by the fake as the service answers it; ``GITDNS`` budgets on a fake clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gitdns.agent.budget import Budgets
from gitdns.core.records import Action, Change, RecordSet
from gitdns.errors import ThrottledError

ZONE = "example.com"


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class After:
    """The client, with ``throttle`` armed once right after the first successful call of
    ``method`` (`arm`): the service throttles the call's next request, as a busy one does."""

    def __init__(self, client: Any, throttle: Callable[[str], None]) -> None:
        self._client, self._throttle = client, throttle
        self._method = ""
        self.calls = 0

    def arm(self, method: str) -> After:
        self._method, self.calls = method, 0
        return self

    def __getattr__(self, name: str) -> Any:
        inner = getattr(self._client, name)
        if name != self._method:
            return inner

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            result = inner(*args, **kwargs)
            if self.calls == 1:
                self._throttle(name)
            return result
        return call


@dataclass
class Case:
    provider: Any
    client: After
    write: str  # the client method of one write request
    listing: str  # the client method of one page of a listing
    values: int  # values per record
    groups: int  # records created by one apply: enough for more than one request
    writes: int  # the requests that apply sends
    records: int  # records for a listing of more than one page


def creates(groups: int, values: int, prefix: str = "h") -> list[Change]:
    out = []
    for i in range(groups):
        rec = RecordSet(f"{prefix}{i}.{ZONE}", "A", 60,
                        tuple(f"10.{i % 250}.{v // 250}.{v % 250 + 1}" for v in range(values)))
        out.append(Change(Action.CREATE, None, rec, rec.key))
    return out


@pytest.fixture
def route53() -> Iterator[Case]:
    from gitdns.providers.route53.provider import Route53Provider
    from tests.providers.route53_fake import FakeRoute53

    fake = FakeRoute53()
    zone_id = fake.add_zone(ZONE, apex=False)
    client = After(fake, lambda method: fake.throttle(1))
    # 3 records of 400 values: 1,200 values, two batches of at most 1,000; pages of 300 names
    yield Case(Route53Provider(ZONE, client, hosted_zone_id=zone_id), client,  # type: ignore[arg-type]
               "change_resource_record_sets", "list_resource_record_sets", 400, 3, 2, 400)


@pytest.fixture
def google() -> Iterator[Case]:
    from gitdns.providers.google.provider import GROUPS_PER_CHANGE
    from tests.providers.gcp_fake import CloudDnsFake, Server
    from tests.providers.test_google import PROJECT, make
    from tests.providers.tls import server_context

    fake = CloudDnsFake(PROJECT, page_size=3)
    fake.add_zone("example-com", ZONE)
    with Server(fake, tls=server_context()) as srv:
        provider = make(srv.url)
        client = After(provider._api, lambda method: fake.fail_next(
            429, "rateLimitExceeded", "Rate Limit Exceeded", method="POST" if method == "create_change" else "GET"))
        provider._api = client
        # the fresh groups of an apply go in one change, at most GROUPS_PER_CHANGE of them
        yield Case(provider, client, "create_change", "list_rrsets", 1, GROUPS_PER_CHANGE + 1, 2, 5)


@pytest.fixture
def azure() -> Iterator[Case]:
    from gitdns.providers.azure.api import SdkClient
    from gitdns.providers.azure.provider import AzureProvider
    from tests.providers.azure_fake import FakeAzureDns, FakeCredential
    from tests.providers.test_azure import require_sdk
    from tests.providers.tls import server_context

    require_sdk()
    fake = FakeAzureDns(page_size=3)
    fake.add_zone(ZONE)
    fake.start(tls=server_context())
    try:
        sdk = SdkClient(FakeCredential(), fake.subscription, fake.resource_group, fake.base_url, timeout=10)
        client = After(sdk, lambda method: fake.fail_next(429, "TooManyRequests", headers={"Retry-After": "3"},
                                                         method="PUT" if method == "put" else "GET"))
        yield Case(AzureProvider(ZONE, client, account="azure:test"), client,  # type: ignore[arg-type]
                   "put", "list_record_sets", 1, 3, 3, 5)
    finally:
        fake.stop()


PROVIDERS = ["route53", "google", "azure"]


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_throttled_write_is_sent_again_alone_not_the_apply(name: str, request: pytest.FixtureRequest) -> None:
    case: Case = request.getfixturevalue(name)
    t = FakeTime()
    budgeted = Budgets(lambda: 1, t.clock, t.sleep).wrap(case.provider)
    changes = creates(case.groups, case.values)
    case.client.arm(case.write)
    result = budgeted.apply(ZONE, changes)
    assert not result.refused and not result.failed, (result.refused, result.failed)
    assert {c.key for c in result.applied} == {c.key for c in changes}
    held = {r.key: r for r in case.provider.read(ZONE).records}
    assert all(held.get(c.key) == c.new for c in changes)
    # one request per batch/group, plus the throttled one sent again: nothing that landed twice
    assert case.client.calls == case.writes + 1
    assert t.now > 0  # it waited before sending the throttled request again


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_throttled_page_is_sent_again_alone_not_the_listing(name: str, request: pytest.FixtureRequest) -> None:
    case: Case = request.getfixturevalue(name)
    case.provider.apply(ZONE, creates(case.records, 1, prefix="r"))
    pages = After(case.client._client, lambda method: None).arm(case.listing)
    case.client._client = pages  # count the pages of an unthrottled listing first
    whole = case.provider.read(ZONE)
    case.client._client = pages._client
    assert pages.calls >= 2, "the listing must have more than one page"
    t = FakeTime()
    budgeted = Budgets(lambda: 1, t.clock, t.sleep).wrap(case.provider)
    case.client.arm(case.listing)
    again = budgeted.read(ZONE)
    assert sorted(again.records, key=str) == sorted(whole.records, key=str)
    assert case.client.calls == pages.calls + 1  # the throttled page again, not the pages before it


@pytest.mark.parametrize("name", PROVIDERS)
def test_without_a_budget_the_throttle_reaches_the_caller(name: str, request: pytest.FixtureRequest) -> None:
    """The CLI has no budget: the throttle is raised (the caller reads again and re-plans)."""
    case: Case = request.getfixturevalue(name)
    case.client.arm(case.write)
    with pytest.raises(ThrottledError):
        case.provider.apply(ZONE, creates(case.groups, case.values))
    assert case.client.calls == 2
