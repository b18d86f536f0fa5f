"""The route53 provider holds one page and one request at a time: a whole-zone read converts
each ``ListResourceRecordSets`` page before it asks for the next, and ``apply`` converts
change groups only as each request fills.  (The peak RSS these keep down is measured by
bench/bench_route53_octodns.py; here the behaviour that keeps it down is checked.)"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from gitdns.core.records import Action, Change, RecordSet
from gitdns.errors import ThrottledError
from gitdns.providers.route53 import api as route53_api
from gitdns.providers.route53 import apply as route53_apply
from gitdns.providers.route53 import batch as rb
from gitdns.providers.route53.provider import Route53Provider
from tests.providers.route53_fake import FakeRoute53

ZONE = "example.com"


class Row(dict[str, Any]):
    """A response rrset dict that can be watched with a weak reference."""


class WatchedFake(FakeRoute53):
    """Records, at every list call, how many rrset dicts of earlier responses are still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[weakref.ref[Row]] = []
        self.alive_at_call: list[int] = []

    def list_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
        gc.collect()
        self.alive_at_call.append(sum(1 for ref in self.refs if ref() is not None))
        out = super().list_resource_record_sets(**kw)
        rows = [Row(r) for r in out["ResourceRecordSets"]]
        self.refs.extend(weakref.ref(r) for r in rows)
        out["ResourceRecordSets"] = rows
        return out


def _a(i: int) -> RecordSet:
    return RecordSet(f"h{i:04d}.{ZONE}", "A", 60, (f"10.0.{i // 250}.{i % 250}",))


def _creates(recs: list[RecordSet]) -> list[Change]:
    return [Change(Action.CREATE, None, r, r.key) for r in recs]


def test_a_whole_zone_read_keeps_at_most_one_page_of_sdk_dicts() -> None:
    fake = WatchedFake()
    fake.add_zone(ZONE, apex=False)
    provider = Route53Provider(ZONE, fake)
    recs = [_a(i) for i in range(1500)]
    assert provider.apply(ZONE, _creates(recs)).ok
    snap = provider.read(ZONE)
    assert len(snap.records) == 1500 and fake.calls["list_resource_record_sets"] == 5
    # at each call the previous page may still be referenced, never more
    assert max(fake.alive_at_call) <= 300 and fake.alive_at_call[-1] > 0
    gc.collect()
    assert all(ref() is None for ref in fake.refs)  # nothing of the SDK's answer outlives the read


def test_apply_converts_groups_only_as_requests_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    seen_at_send: list[int] = []
    real_group_ops, real_change = rb.group_ops, FakeRoute53.change_resource_record_sets

    def counting_group_ops(*args: Any, **kw: Any) -> rb.GroupOps:
        made.append(1)
        return real_group_ops(*args, **kw)

    def watching_change(self: FakeRoute53, **kw: Any) -> dict[str, Any]:
        seen_at_send.append(len(made))
        return real_change(self, **kw)

    monkeypatch.setattr(route53_apply, "group_ops", counting_group_ops)
    monkeypatch.setattr(FakeRoute53, "change_resource_record_sets", watching_change)
    fake = FakeRoute53()
    fake.add_zone(ZONE, apex=False)
    result = Route53Provider(ZONE, fake).apply(ZONE, _creates([_a(i) for i in range(2500)]))
    assert result.ok and len(result.applied) == 2500
    # 1,000 values per request: the first request is sent when group 1,001 has been
    # converted, not after all 2,500
    assert seen_at_send == [1001, 2001, 2500]


def test_batches_are_yielded_as_they_fill() -> None:
    ops = rb.group_ops(_a(0).key, _creates([_a(0)]))
    pulled: list[int] = []

    def groups() -> Iterator[rb.GroupOps]:
        for i in range(10_000):
            pulled.append(i)
            yield ops

    first = next(rb.batches(groups(), max_values=3))
    assert len(first) == 3 and len(pulled) == 4


def test_lower_bound_is_the_larger_of_the_two_limits() -> None:
    assert rb.lower_bound(28_047, 2_127_717) == 67
    assert rb.lower_bound(28_047, 600_000) == 29
    assert rb.lower_bound(0, 0) == 0


def test_the_client_drops_botocore_s_endpoint_table_and_skips_parameter_validation() -> None:
    client = route53_api.boto3_client("us-east-1", "http://127.0.0.1:9", {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
                                                                    "AWS_SECRET_ACCESS_KEY": "x"})
    cache = client._loader._cache  # type: ignore[attr-defined]
    assert any(key[:2] == ("load_data_with_path", "partitions") for key in cache)  # the cache is as expected
    assert ("load_data_with_path", "endpoints") not in cache
    # no parameter validation: a malformed parameter goes out (here: to a closed port) unchecked
    with pytest.raises(EndpointConnectionError):
        client.list_resource_record_sets(HostedZoneId="Z1", MaxItems=300)  # an int where a str belongs


def test_an_error_on_a_later_page_is_raised_by_the_read_and_nothing_more_is_fetched() -> None:
    class FailingThird(FakeRoute53):
        def list_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
            if self.calls["list_resource_record_sets"] == 2:  # the third page
                self.throttle(1)
            return super().list_resource_record_sets(**kw)

    fake = FailingThird()
    fake.add_zone(ZONE, apex=False)
    provider = Route53Provider(ZONE, fake)
    assert provider.apply(ZONE, _creates([_a(i) for i in range(1500)])).ok
    fake.calls.clear()
    with pytest.raises(ThrottledError):
        provider.read(ZONE)
    assert fake.calls["list_resource_record_sets"] == 3  # nothing fetched after the failure
    assert len(provider.read(ZONE).records) == 1500  # and the next read is whole
