"""The route53 provider against `FakeRoute53` (which enforces Route53's write rules): the
conformance suite, batching, paging, TXT quoting, error mapping and stale-name isolation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from hypothesis import given
from hypothesis import strategies as st

from gitdns.core import builder
from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.records import Action, Change, RecordKey, RecordSet
from gitdns.errors import AuthError, ConfigError, RetryableError, ThrottledError, UnreachableError
from gitdns.providers.fences import Fences
from gitdns.providers.route53 import batch as rb
from gitdns.providers.route53.provider import Route53Provider, account_of, from_ref
from tests.core import worked_example as we
from tests.providers.conformance import Conformance, ProviderCase
from tests.providers.route53_fake import FakeRoute53

ZONE = "example.com"


def _provider(fake: FakeRoute53 | None = None, **kw: Any) -> tuple[Route53Provider, FakeRoute53]:
    if fake is None:
        fake = FakeRoute53()
        fake.add_zone(ZONE, apex=False)
    return Route53Provider(ZONE, fake, **kw), fake


class TestRoute53Conformance(Conformance):
    @pytest.fixture(params=[False, True], ids=["plain", "health-checks"])
    def case(self, request: pytest.FixtureRequest) -> ProviderCase:
        return ProviderCase("route53-fake", lambda tmp: _provider(health_checks=request.param)[0])


# --- helpers ------------------------------------------------------------------------------------------------


def a(name: str, *values: str, ttl: int = 60, **kw: Any) -> RecordSet:
    return RecordSet(f"{name}.{ZONE}", "A", ttl, values, **kw)


def txt(name: str, value: str, **kw: Any) -> RecordSet:
    return RecordSet(f"{name}.{ZONE}", "TXT", 60, (value,), **kw)


def create(*recs: RecordSet, group: RecordKey | None = None) -> list[Change]:
    return [Change(Action.CREATE, None, r, group or recs[-1].key) for r in recs]


def sizes(fake: FakeRoute53) -> list[tuple[int, int]]:
    return [rb.request_size(req) for req in fake.requests]


# --- the fake enforces Route53's rules ---------------------------------------------------------------------------


def _native(rec: RecordSet, **extra: Any) -> dict[str, Any]:
    out = rb.to_native(rec)
    out.update(extra)
    return out


def _change(fake: FakeRoute53, zid: str, *changes: tuple[str, dict[str, Any]]) -> str:
    try:
        fake.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": [
            {"Action": act, "ResourceRecordSet": rrs} for act, rrs in changes]})
    except ClientError as exc:
        return f"{exc.response['Error']['Code']}: {exc.response['Error']['Message']}"
    return "ok"


def test_fake_delete_must_match_exactly_and_batches_are_atomic() -> None:
    fake = FakeRoute53()
    zid = fake.add_zone(ZONE)
    w = a("w", "192.0.2.1", set_id="blue", weight=10)
    assert _change(fake, zid, ("CREATE", _native(w))) == "ok"
    for wrong in (dataclasses.replace(w, ttl=61), dataclasses.replace(w, weight=11), w.with_values(["192.0.2.9"])):
        assert "do not match the current values" in _change(fake, zid, ("DELETE", _native(wrong)))
    assert "but it was not found" in _change(fake, zid, ("DELETE", _native(a("x", "192.0.2.1"))))
    assert "but it already exists" in _change(fake, zid, ("CREATE", _native(w)))
    # atomic: a good CREATE beside a stale DELETE does not land
    msg = _change(fake, zid, ("CREATE", _native(a("n", "192.0.2.3"))), ("DELETE", _native(a("gone", "192.0.2.4"))))
    assert msg.startswith("InvalidChangeBatch: [Tried to delete resource record set [name='gone.example.com.'")
    assert not [r for r in fake.records(zid) if r["Name"] == "n.example.com."]
    assert _change(fake, zid, ("DELETE", _native(w)), ("CREATE", _native(w.with_values(["192.0.2.2"])))) == "ok"


def test_fake_routing_cname_and_limit_rules() -> None:
    fake = FakeRoute53()
    zid = fake.add_zone(ZONE)
    geo = RecordSet(f"g.{ZONE}", "CNAME", 60, ("x.example.com",), set_id="EU", geo="GEO-EU")
    assert _change(fake, zid, ("CREATE", _native(geo))) == "ok"
    mixed = RecordSet(f"g.{ZONE}", "CNAME", 60, ("y.example.com",), set_id="w", weight=1)
    assert "cannot mix routing policies" in _change(fake, zid, ("CREATE", _native(mixed)))
    same_geo = dataclasses.replace(geo, set_id="EU2")
    assert "repeats a geo location" in _change(fake, zid, ("CREATE", _native(same_geo)))
    assert "conflicts with other records" in _change(fake, zid, ("CREATE", _native(a("g", "192.0.2.1"))))
    assert "quotation marks" in _change(fake, zid, ("CREATE", {**_native(txt("t", "x")),
                                                               "ResourceRecords": [{"Value": "x"}]}))
    many = [("CREATE", _native(a(f"h{i}", f"10.0.{i // 250}.{i % 250}"))) for i in range(1001)]
    assert "limit of 1000 exceeded" in _change(fake, zid, *many)
    assert "limit of 1000 exceeded" in _change(fake, zid, *[("UPSERT", r) for _, r in many[:501]])
    big = [("CREATE", _native(txt(f"t{i}", "v" * 250))) for i in range(130)]
    assert "32000" in _change(fake, zid, *big)


# --- conversion ---------------------------------------------------------------------------------------------


@given(st.text(max_size=600))
def test_txt_quoting_round_trips(value: str) -> None:
    quoted = rb.quote_txt(value)
    assert rb.unquote_txt(quoted) == value
    assert all(ch.isprintable() and ord(ch) < 0x7F for ch in quoted)
    assert quoted == rb.quote_octets(value)  # the fast path for plain values changes nothing


@given(st.text(alphabet=st.characters(min_codepoint=0x1F, max_codepoint=0x80), max_size=300))
def test_txt_fast_path_matches_the_octet_quoting_near_its_edges(value: str) -> None:
    assert rb.quote_txt(value) == rb.quote_octets(value)


@given(st.text(alphabet='ab "\\\x01é', max_size=300))
def test_txt_values_round_trip_through_the_fake(value: str) -> None:
    provider, _ = _provider()
    rec = txt("t", value)
    assert provider.apply(ZONE, create(rec)).ok
    assert provider.read(ZONE, [rec.name]).records == (rec,)


def test_conversion_of_names_geo_weights_and_alias() -> None:
    rec = RecordSet(f"*.{ZONE}", "CNAME", 300, ("target.example.com",), set_id="default", geo="*")
    native = rb.to_native(rec)
    assert native["Name"] == "*.example.com." and native["GeoLocation"] == {"CountryCode": "*"}
    assert native["ResourceRecords"] == [{"Value": "target.example.com."}]
    assert rb.from_native({**native, "Name": "\\052.example.com."}) == rec
    assert rb.geo_to_native("GEO-EU") == {"ContinentCode": "EU"}
    assert rb.geo_to_native("us") == {"CountryCode": "US"}
    for code in ("GEO-EU", "US", "*", "US-CA"):
        assert rb.geo_from_native(rb.geo_to_native(code)) == code
    alias = {"Name": "x.example.com.", "Type": "A", "AliasTarget": {
        "HostedZoneId": "Z2FDTNDATAQYW2", "DNSName": "d1.cloudfront.net.", "EvaluateTargetHealth": False}}
    read = rb.from_native(alias)
    assert read is not None and read.values == ("ALIAS Z2FDTNDATAQYW2 d1.cloudfront.net false",)
    assert rb.to_native(read) == alias
    assert rb.from_native({"Name": "example.com.", "Type": "SOA", "TTL": 1, "ResourceRecords": []}) is None
    assert "weight or a geo" in rb.unsupported(a("x", "192.0.2.1", set_id="s"))
    assert "0..255" in rb.unsupported(a("x", "192.0.2.1", set_id="s", weight=256))


def test_wildcard_and_the_apex_ns_read_back() -> None:
    fake = FakeRoute53()
    fake.add_zone(ZONE)  # with the NS and SOA Route53 creates
    provider, _ = _provider(fake)
    star = RecordSet(f"*.{ZONE}", "A", 60, ("192.0.2.1",))
    assert provider.apply(ZONE, create(star)).ok
    keys = {r.key for r in provider.read(ZONE).records}
    assert keys == {star.key, RecordKey(ZONE, "NS")}
    assert provider.read(ZONE, [f"*.{ZONE}"]).records == (star,)


# --- batching -----------------------------------------------------------------------------------------------


def test_a_record_and_its_txt_are_never_split_and_limits_hold() -> None:
    provider, fake = _provider()
    changes: list[Change] = []
    for i in range(700):
        data = a(f"h{i}", f"10.0.{i // 250}.{i % 250}")
        changes += create(txt(f"kuadrant-h{i}", "o" * (i % 90)), data, group=data.key)
    result = provider.apply(ZONE, changes)
    assert result.ok and len(result.applied) == 1400
    assert len(fake.requests) >= 2 and fake.calls["change_resource_record_sets"] == len(fake.requests)
    for req in fake.requests:
        values, chars = rb.request_size(req)
        assert values <= 1000 and chars <= 32000
        names = {c["ResourceRecordSet"]["Name"] for c in req}
        for name in names:
            twin = name.replace("kuadrant-", "") if name.startswith("kuadrant-") else "kuadrant-" + name
            assert twin in names, f"{name} split from {twin}"


def test_update_counts_delete_and_create_and_upsert_counts_twice() -> None:
    old, new = a("w", "192.0.2.1", "192.0.2.2"), a("w", "192.0.2.3")
    ops = rb.group_ops(old.key, [Change(Action.UPDATE, old, new, old.key)])
    assert [d["Name"] for d in ops.deletes] == ["w.example.com."] and ops.values == 3
    assert rb.request_changes([ops])[0]["Action"] == "DELETE"
    assert rb.request_size([{"Action": "UPSERT", "ResourceRecordSet": rb.to_native(old)}]) == (4, 36)
    groups = [dataclasses.replace(ops, group=RecordKey(str(i), "A"), values=400, chars=10) for i in range(5)]
    assert [len(b) for b in rb.batches(groups)] == [2, 2, 1]
    groups = [dataclasses.replace(ops, group=RecordKey(str(i), "A"), values=1, chars=20_000) for i in range(3)]
    assert [len(b) for b in rb.batches(groups)] == [1, 1, 1]


def test_a_group_too_big_for_one_request_fails_alone() -> None:
    provider, _ = _provider()
    huge = a("big", *[f"10.1.{i // 250}.{i % 250}" for i in range(1001)])
    result = provider.apply(ZONE, create(huge) + create(a("ok", "192.0.2.1")))
    assert [k for k, _ in result.failed] == [huge.key] and len(result.applied) == 1


def test_one_stale_name_does_not_sink_a_1000_change_batch() -> None:
    provider, fake = _provider()
    assert provider.apply(ZONE, create(a("h7", "192.0.2.99"))).ok  # someone wrote h7 meanwhile
    fake.requests.clear()
    changes = [c for i in range(1000) for c in create(a(f"h{i}", f"10.0.{i // 250}.{i % 250}"))]
    result = provider.apply(ZONE, changes)
    assert [k for k, _ in result.refused] == [RecordKey(f"h7.{ZONE}", "A")]
    assert "already exists" in result.refused[0][1] and not result.failed
    assert len(result.applied) == 999 and len(fake.requests) == 2  # the batch, then the rest


def test_a_batch_error_naming_no_record_is_bisected_to_the_bad_group() -> None:
    provider, _ = _provider()
    changes = [c for i in range(16) for c in create(a(f"h{i}", f"10.0.0.{i}"))]
    changes[11] = create(a("h11", "10.0.0"))[0]  # not an address: Route53's message names no rrset
    result = provider.apply(ZONE, changes)
    assert [k for k, _ in result.failed] == [RecordKey(f"h11.{ZONE}", "A")] and not result.refused
    assert "IllegalIPv4Address" in result.failed[0][1] and len(result.applied) == 15


def test_message_parsing() -> None:
    msg = ("[Tried to delete resource record set [name='a.example.com.', type='A', set-identifier='x'] but it "
           "was not found, Tried to create resource record set [name='\\052.example.com.', type='TXT'] but it "
           "already exists]")
    problems = rb.parse_batch_error(msg)
    assert [(p.key, p.stale) for p in problems] == [(RecordKey("a.example.com", "A", "x"), True),
                                                    (RecordKey("*.example.com", "TXT"), True)]
    other = rb.parse_batch_error("RRSet of type CNAME with DNS name c.example.com. is not permitted as it conflicts")
    assert [(p.name, p.key, p.stale) for p in other] == [("c.example.com", None, False)]


# --- reads and paging ---------------------------------------------------------------------------------------


def test_whole_zone_read_pages_and_per_name_read_costs_one_call_per_name() -> None:
    provider, fake = _provider()
    recs = [a(f"h{i:03d}", f"10.0.{i // 250}.{i % 250}") for i in range(650)]
    recs += [a("w", f"10.9.0.{i}", set_id=f"s{i:03d}", weight=1) for i in range(150)]
    assert provider.apply(ZONE, [c for r in recs for c in create(r)]).ok
    fake.calls.clear()
    assert len(provider.read(ZONE).records) == 800
    assert fake.calls["list_resource_record_sets"] == 3  # 300 per page
    fake.calls.clear()
    snap = provider.read(ZONE, [f"h001.{ZONE}", f"h649.{ZONE}", f"missing.{ZONE}", "outside.example.org"])
    assert [r.name for r in snap.records] == [f"h001.{ZONE}", f"h649.{ZONE}"]
    assert fake.calls["list_resource_record_sets"] == 3 and snap.names is not None
    fake.calls.clear()
    assert len(provider.read(ZONE, [f"w.{ZONE}"]).records) == 150
    assert fake.calls["list_resource_record_sets"] == 2  # 100, then the rest: NextRecordIdentifier followed


def test_a_name_of_many_rows_is_read_in_pages_of_300_after_its_first() -> None:
    """A weighted name of a large fleet (1,000 rows): 100 rows, then pages of 300 — 4 calls,
    not 10 — and every row, none of the next name's."""
    provider, fake = _provider()
    recs = [a("w", f"10.9.{i // 250}.{i % 250}", set_id=f"s{i:04d}", weight=1) for i in range(1000)]
    recs += [a("x", "10.8.0.1")]
    assert provider.apply(ZONE, [c for r in recs for c in create(r)]).ok
    fake.calls.clear()
    rows = provider.read(ZONE, [f"w.{ZONE}"]).records
    assert len(rows) == 1000 and {r.name for r in rows} == {f"w.{ZONE}"}
    assert len({r.set_id for r in rows}) == 1000
    assert fake.calls["list_resource_record_sets"] == 4


def test_zone_lookup_most_specific_public_unless_private() -> None:
    fake = FakeRoute53()
    fake.add_zone("com", zone_id="ZCOM")
    fake.add_zone(ZONE, zone_id="ZPUB")
    fake.add_zone(ZONE, zone_id="ZPRIV", private=True)
    for i in range(120):
        fake.add_zone(f"other{i}.org")
    assert Route53Provider("api.example.com", fake).zone_id("api.example.com") == "ZPUB"
    assert Route53Provider(ZONE, fake, private=True).zone_id(ZONE) == "ZPRIV"
    assert Route53Provider(ZONE, fake, hosted_zone_id="/hostedzone/ZX").zone_id(ZONE) == "ZX"
    fake.add_zone(ZONE, zone_id="ZPUB2")
    with pytest.raises(ConfigError, match="ZPUB, ZPUB2"):
        Route53Provider(ZONE, fake).zone_id(ZONE)
    with pytest.raises(ConfigError, match="no public hosted zone"):
        Route53Provider("example.net", fake).zone_id("example.net")
    fake.calls.clear()
    assert len(Route53Provider(ZONE, fake).zones()) == 124
    assert fake.calls["list_hosted_zones"] == 2  # 100 per page


# --- errors -------------------------------------------------------------------------------------------------


def test_throttling_is_reported_with_retry_after_and_without_request_ids() -> None:
    provider, fake = _provider()
    fake.throttle(code="Throttling", retry_after="3")
    with pytest.raises(ThrottledError) as info:
        provider.read(ZONE)
    assert info.value.retry_after == 3.0
    fake.throttle(code="PriorRequestNotComplete")
    with pytest.raises(ThrottledError) as info:
        provider.apply(ZONE, create(a("x", "192.0.2.1")))
    assert info.value.retry_after is None
    fake.fail_next(ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded (Request ID: "
                                          "0b9f7d3e-1a2b-4c5d-8e9f-aabbccddeeff)"},
                                "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "0b9f7d3e"}}, "X"))
    with pytest.raises(ThrottledError) as info:
        provider.read(ZONE)
    assert "0b9f7d3e" not in str(info.value) and "Rate exceeded" in str(info.value)


@pytest.mark.parametrize(("code", "status", "error"), [
    ("ServiceUnavailable", 503, RetryableError), ("InternalFailure", 500, RetryableError),
    ("AccessDenied", 403, AuthError), ("InvalidClientTokenId", 403, AuthError),
    ("SignatureDoesNotMatch", 403, AuthError), ("NoSuchHostedZone", 404, ConfigError),
])
def test_error_mapping(code: str, status: int, error: type[Exception]) -> None:
    provider, fake = _provider()
    fake.fail_next(ClientError({"Error": {"Code": code, "Message": "m RequestId: abc-123"},
                                "ResponseMetadata": {"HTTPStatusCode": status}}, "ListResourceRecordSets"))
    with pytest.raises(error) as info:
        provider.read(ZONE)
    assert "abc-123" not in str(info.value)


def test_invalid_input_fails_the_group_and_connection_errors_are_unreachable() -> None:
    provider, fake = _provider()
    provider.zone_id(ZONE)
    fake.fail_next(ClientError({"Error": {"Code": "InvalidInput", "Message": "bad"},
                                "ResponseMetadata": {"HTTPStatusCode": 400}}, "ChangeResourceRecordSets"))
    result = provider.apply(ZONE, create(a("x", "192.0.2.1")))
    assert [k for k, _ in result.failed] == [RecordKey(f"x.{ZONE}", "A")] and "InvalidInput" in result.failed[0][1]
    fake.fail_next(EndpointConnectionError(endpoint_url="https://route53.amazonaws.com"))  # type: ignore[arg-type]
    with pytest.raises(UnreachableError):
        provider.read(ZONE)


# --- waitInsync, health checks, construction ----------------------------------------------------------------


def test_wait_insync_polls_get_change_with_an_injected_clock() -> None:
    fake = FakeRoute53(insync_after=2)
    fake.add_zone(ZONE, apex=False)
    slept: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    provider, _ = _provider(fake, wait_insync=True, sleep=sleep, clock=lambda: now[0])
    result = provider.apply(ZONE, create(a("x", "192.0.2.1")))
    assert result.ok and result.change_ids and fake.calls["get_change"] == 2
    provider.insync_timeout = 1.0
    fake.insync_after = 100
    assert provider.apply(ZONE, create(a("y", "192.0.2.1"))).ok  # gives up waiting, not an error
    assert fake.calls["get_change"] == 3


def test_health_checks_follow_the_weighted_rows_and_go_with_the_owner() -> None:
    provider, fake = _provider(health_checks=True)
    state = we.STATE
    for cluster in (we.CLUSTER_A, we.CLUSTER_B):
        Conformance().sync(provider, ZONE, cluster.id, builder.desired_for_zone(state, cluster, state.zones[0]))
    rows = [r for r in fake.records(next(iter(fake.zones))) if r.get("HealthCheckId")]
    assert sorted(r["Name"] for r in rows) == ["geo-eu.klb.api.example.com.", "us.klb.api.example.com."]
    assert {c["HealthCheckConfig"]["IPAddress"] for c in fake.health_checks.values()} == {"1.1.1.1", "2.2.2.2"}
    assert {t["gitdns-owner"] for t in fake.tags.values()} == {"cluster-a-uid", "cluster-b-uid"}
    Conformance().sync(provider, ZONE, we.CLUSTER_B.id, [])  # B leaves (as prune-owner would remove it)
    assert {c["HealthCheckConfig"]["IPAddress"] for c in fake.health_checks.values()} == {"1.1.1.1"}


def test_from_ref_reads_settings_and_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("R53_AWS_ACCESS_KEY_ID", "ASIAY34FZKBOKMUTVV7A")
    monkeypatch.setenv("R53_AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    ref = ProviderRef("route53", (("endpoint", "https://127.0.0.1:1"), ("hostedZoneId", "/hostedzone/Z1"),
                                  ("region", "eu-west-1"), ("waitInsync", "true")), CredentialsRef(env="R53"))
    fences = Fences.parse(provider_endpoints="https://127.0.0.1:1", credentials_env_prefixes="R53")
    provider = from_ref(ZONE, ref, tmp_path, fences=fences)  # an env prefix keeps the full names: R53_AWS_...
    assert provider.zone_id(ZONE) == "Z1" and provider.wait_insync and provider.health is None
    assert provider.account == "aws:609629065308"
    assert "not-a-real-secret" not in repr(vars(provider))
    monkeypatch.delenv("R53_AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ConfigError, match="both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        from_ref(ZONE, ref, tmp_path, fences=fences)
    with pytest.raises(ConfigError, match="healthChecks"):
        from_ref(ZONE, ProviderRef("route53", (("healthChecks", "yes"),)), tmp_path)
    assert account_of("AKIDEXAMPLE").startswith("aws-key:") and account_of(None, "us-east-1") == "aws:default:us-east-1"
