"""The `azure` provider: conformance on the HTTP fake of the Azure DNS API (tests/providers/
azure_fake.py) through the real ``azure-mgmt-dns`` client, ETag compare-and-swap, the
record + TXT window, error mapping, paging, routing refused, conversion and construction.

Without ``azure-mgmt-dns`` the tests that need it skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.records import Action, Change, RecordKey, RecordSet
from gitdns.errors import AuthError, ConfigError, RetryableError, ThrottledError, UnreachableError, UnsupportedError
from gitdns.providers.azure import api as azure_api
from gitdns.providers.azure import native as azure_native
from gitdns.providers.azure import provider as azure
from gitdns.providers.azure.api import SdkClient
from gitdns.providers.azure.native import from_native, to_native
from gitdns.providers.azure.provider import AzureProvider
from gitdns.providers.base import Routing
from gitdns.providers.fences import Fences
from tests.providers.azure_fake import FakeAzureDns, FakeCredential, Request
from tests.providers.conformance import Conformance, ProviderCase
from tests.providers.tls import server_context

ZONE = "example.com"
WWW = RecordKey(f"www.{ZONE}", "A")
INSTALL = "pip install 'gitdns[azure]' (azure-mgmt-dns, azure-identity)"


def require_sdk() -> None:
    try:
        for module in ("azure.mgmt.dns", "azure.identity"):
            importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the azure provider tests need {exc.name}: {INSTALL}")
        pytest.skip(f"{exc.name} is not installed: {INSTALL}")


@pytest.fixture
def fake() -> Iterator[FakeAzureDns]:
    require_sdk()
    server = FakeAzureDns(page_size=3)  # small pages: every zone read goes through nextLink
    server.add_zone(ZONE)
    server.start(tls=server_context())  # provider endpoints are HTTPS
    yield server
    server.stop()


def make_provider(fake: FakeAzureDns) -> AzureProvider:
    client = SdkClient(FakeCredential(), fake.subscription, fake.resource_group, fake.base_url, timeout=10)
    return AzureProvider(ZONE, client, account=f"azure:{fake.subscription}")


@pytest.fixture
def provider(fake: FakeAzureDns) -> AzureProvider:
    return make_provider(fake)


class TestAzureConformance(Conformance):
    @pytest.fixture
    def case(self, fake: FakeAzureDns) -> ProviderCase:
        return ProviderCase("azure", lambda tmp: make_provider(fake), ZONE)


# --- helpers ----------------------------------------------------------------------------------------

sync = Conformance().sync
plan = Conformance.plan


def a(name: str, *values: str, ttl: int = 60) -> RecordSet:
    return RecordSet(f"{name}.{ZONE}", "A", ttl, tuple(values))


def data(provider: AzureProvider) -> dict[RecordKey, tuple[str, ...]]:
    return Conformance.data(provider, ZONE)


def conditional(req: Request) -> bool:
    return bool(req.headers.get("if-match")) or req.headers.get("if-none-match") == "*"


# --- compare-and-swap --------------------------------------------------------------------------------


def test_every_write_is_conditional(fake: FakeAzureDns, provider: AzureProvider) -> None:
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.1")])
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.9", ttl=120)])
    sync(provider, ZONE, "owner-a", [])
    writes = fake.writes()
    assert len(writes) == 6 and all(conditional(r) for r in writes)
    creates = [r for r in writes if r.headers.get("if-none-match") == "*"]
    assert len(creates) == 2 and not any(r.headers.get("if-match") for r in creates)


def test_a_group_already_stale_is_refused_whole_before_any_write(fake: FakeAzureDns, provider: AzureProvider) -> None:
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.1")])
    stale = plan(provider, ZONE, "owner-a", [a("www", "192.0.2.5")])
    assert [c.key.type for c in stale.applicable] == ["TXT", "A"]
    sync(make_provider(fake), ZONE, "owner-b", [a("www", "192.0.2.2")])  # another agent joins after our read
    writes_before = len(fake.writes())
    result = provider.apply(ZONE, stale.applicable, stale.guards)
    assert [g for g, _ in result.refused] == [WWW] and not result.applied and not result.failed
    assert len(fake.writes()) == writes_before  # the pre-flight GET saw it: not even the TXT was written
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.5")])
    assert data(provider)[WWW] == ("192.0.2.2", "192.0.2.5")  # the other writer's value survived


def test_concurrent_writer_just_before_the_put_gets_412_and_nothing_is_lost(
        fake: FakeAzureDns, provider: AzureProvider) -> None:
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.1")])
    stale = plan(provider, ZONE, "owner-a", [a("www", "192.0.2.5")])
    etag = provider.etag_of(ZONE, WWW)
    data_only = [c for c in stale.applicable if c.key == WWW]

    def other_agent(req: Request) -> None:  # owner b writes between our read and our PUT
        if req.method == "PUT" and req.path.endswith("/A/www") and req.headers.get("if-match") == etag:
            fake.hooks.clear()
            sync(make_provider(fake), ZONE, "owner-b", [a("www", "192.0.2.2")])

    fake.hooks.append(other_agent)
    result = provider.apply(ZONE, data_only)
    assert result.refused and not result.applied and not result.failed
    assert "ETag precondition failed" in result.refused[0][1]
    ours = next(r for r in fake.writes() if r.headers.get("if-match") == etag)  # logged before b's PUT
    assert ours.body["properties"]["ARecords"] == [{"ipv4Address": "192.0.2.5"}]
    assert provider.etag_of(ZONE, WWW) == ""  # forgotten: the next write reads first
    assert data(provider)[WWW] == ("192.0.2.1", "192.0.2.2")
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.5")])
    assert data(provider)[WWW] == ("192.0.2.2", "192.0.2.5")


def test_delete_with_a_stale_etag_is_refused(fake: FakeAzureDns, provider: AzureProvider) -> None:
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.1")])
    leave = plan(provider, ZONE, "owner-a", [])
    fake.set_record(ZONE, "www", "A", {"TTL": 60, "ARecords": [{"ipv4Address": "192.0.2.1"}]})  # same, new etag
    result = provider.apply(ZONE, leave.applicable, leave.guards)
    assert result.refused and not result.applied
    assert fake.get_record(ZONE, "www", "A") is not None
    assert [r.method for r in fake.writes()][-1] == "DELETE"


def test_create_uses_if_none_match_and_is_refused_when_the_record_appeared(
        fake: FakeAzureDns, provider: AzureProvider) -> None:
    want = [a("api", "192.0.2.1")]
    p = plan(provider, ZONE, "owner-a", want)
    fake.set_record(ZONE, "api", "A", {"TTL": 60, "ARecords": [{"ipv4Address": "198.51.100.9"}]})
    data_only = [c for c in p.applicable if c.key.type == "A"]
    result = provider.apply(ZONE, data_only)
    assert result.refused and "already exists" in result.refused[0][1]
    put = fake.writes()[-1]
    assert put.headers.get("if-none-match") == "*" and "if-match" not in put.headers
    assert fake.get_record(ZONE, "api", "A")["properties"]["ARecords"] == [{"ipv4Address": "198.51.100.9"}]


def test_without_a_cached_etag_the_record_is_read_and_compared_first(fake: FakeAzureDns) -> None:
    reader, writer = make_provider(fake), make_provider(fake)  # writer never read the zone
    sync(reader, ZONE, "owner-a", [a("www", "192.0.2.1")])
    update = plan(reader, ZONE, "owner-a", [a("www", "192.0.2.2")])
    assert writer.apply(ZONE, update.applicable).ok
    assert data(reader)[WWW] == ("192.0.2.2",)
    stale = plan(reader, ZONE, "owner-a", [a("www", "192.0.2.3")])
    fresh = make_provider(fake)
    fake.set_record(ZONE, "www", "A", {"TTL": 60, "ARecords": [{"ipv4Address": "203.0.113.1"}]})
    writes_before = len(fake.writes())
    result = fresh.apply(ZONE, stale.applicable)
    assert result.refused and "changed since it was read" in result.refused[0][1]
    assert len(fake.writes()) == writes_before  # refused on the GET's content: nothing was sent


def test_a_newer_read_does_not_lend_its_etag_to_an_older_plan(fake: FakeAzureDns, provider: AzureProvider) -> None:
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.1")])
    old_plan = plan(provider, ZONE, "owner-a", [a("www", "192.0.2.5")])
    fake.set_record(ZONE, "www", "A", {"TTL": 60, "ARecords": [{"ipv4Address": "203.0.113.1"}]})
    provider.read(ZONE)  # the cache now holds the new etag, with the new content
    result = provider.apply(ZONE, old_plan.applicable)
    assert result.refused
    assert data(provider)[WWW] == ("203.0.113.1",)


def test_record_and_txt_window_the_txt_lands_the_data_is_refused_the_next_plan_recovers(
        fake: FakeAzureDns) -> None:
    agent_a, agent_b = make_provider(fake), make_provider(fake)
    want_a, want_b = [a("www", "192.0.2.1")], [a("www", "192.0.2.2")]
    p = plan(agent_a, ZONE, "owner-a", want_a)
    assert [(c.action, c.key.type) for c in p.applicable] == [(Action.CREATE, "TXT"), (Action.CREATE, "A")]

    def owner_b_writes_first(req: Request) -> None:  # between our TXT and our A
        if req.method == "PUT" and req.path.endswith("/A/www"):
            fake.hooks.clear()
            sync(agent_b, ZONE, "owner-b", want_b)

    fake.hooks.append(owner_b_writes_first)
    result = agent_a.apply(ZONE, p.applicable)
    assert [c.key.type for c in result.applied] == ["TXT"]  # the first half stays applied
    assert [g for g, _ in result.refused] == [WWW] and not result.failed
    # owner b saw our landed TXT and published our announced value with its own: nothing lost
    assert data(agent_a)[WWW] == ("192.0.2.1", "192.0.2.2")
    sync(agent_a, ZONE, "owner-a", want_a)  # the next plan of owner a converges
    assert data(agent_a)[WWW] == ("192.0.2.1", "192.0.2.2")
    assert plan(agent_b, ZONE, "owner-b", want_b).empty


def test_metadata_set_by_others_survives_an_update(fake: FakeAzureDns, provider: AzureProvider) -> None:
    fake.set_record(ZONE, "tagged", "A", {"TTL": 60, "metadata": {"team": "net"},
                                          "ARecords": [{"ipv4Address": "192.0.2.1"}]})
    old = next(r for r in provider.read(ZONE).records if r.name == f"tagged.{ZONE}")
    new = old.with_values(("192.0.2.1", "192.0.2.2"))
    assert provider.apply(ZONE, [Change(Action.UPDATE, old, new, old.key)]).ok
    assert fake.get_record(ZONE, "tagged", "A")["properties"]["metadata"] == {"team": "net"}


# --- routing -----------------------------------------------------------------------------------------


def test_capabilities() -> None:
    caps = azure.CAPABILITIES
    assert caps.routing is Routing.NONE and not caps.guards
    assert caps.record_types == {"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA", "NS"}
    assert (caps.reads_per_minute, caps.writes_per_minute) == (60, 40)


def test_a_loadbalanced_change_fails_its_group_with_the_clear_message(
        fake: FakeAzureDns, provider: AzureProvider) -> None:
    row = RecordSet(f"klb.api.{ZONE}", "CNAME", 300, (f"us.klb.api.{ZONE}",), set_id="US", geo="US")
    plain = a("www", "192.0.2.1")
    result = provider.apply(ZONE, [Change(Action.CREATE, None, row, row.key),
                                   Change(Action.CREATE, None, plain, plain.key)])
    assert result.failed == ((row.key, azure_native.ROUTING_REFUSED),)
    assert azure_native.ROUTING_REFUSED == ("azure: the loadbalanced strategy needs Traffic Manager, which gitdns does "
                                     "not drive yet; use the flattened form or another provider")
    assert [c.key for c in result.applied] == [plain.key]
    assert not any("/klb.api" in r.path for r in fake.writes())


# --- errors ------------------------------------------------------------------------------------------


def test_429_is_throttled_with_retry_after_and_the_sdk_does_not_retry(
        fake: FakeAzureDns, provider: AzureProvider) -> None:
    fake.fail_next(429, "TooManyRequests", "Too many requests", headers={"Retry-After": "7"})
    with pytest.raises(ThrottledError) as info:
        provider.read(ZONE)
    assert info.value.retry_after == 7.0
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_retryable_and_sent_once(fake: FakeAzureDns, provider: AzureProvider, status: int) -> None:
    fake.fail_next(status, "InternalServerError", "Something went wrong")
    with pytest.raises(RetryableError) as info:
        provider.read(ZONE)
    assert not isinstance(info.value, ThrottledError)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_carry_no_request_ids(fake: FakeAzureDns, provider: AzureProvider, status: int) -> None:
    fake.fail_next(status, "AuthorizationFailed", "The client 'x' does not have authorization "
                   "(correlation id: 0b7a9e8c-1d2e-4f3a-9b8c-7d6e5f4a3b2c)")
    with pytest.raises(AuthError) as info:
        provider.read(ZONE)
    text = str(info.value)
    assert "AuthorizationFailed" in text and "request id" not in text.lower()
    assert "correlation" not in text.lower() and "0b7a9e8c" not in text


def test_the_same_error_twice_gives_the_same_message(fake: FakeAzureDns, provider: AzureProvider) -> None:
    messages = []
    for _ in range(2):
        fake.fail_next(503, "ServiceUnavailable", "Try later")
        with pytest.raises(RetryableError) as info:
            provider.read(ZONE)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_write_errors(fake: FakeAzureDns, provider: AzureProvider) -> None:
    fake.fail_next(500, "InternalServerError", "boom", method="PUT")
    with pytest.raises(RetryableError):
        provider.apply(ZONE, [Change(Action.CREATE, None, a("x", "192.0.2.1"), RecordKey(f"x.{ZONE}", "A"))])
    fake.fail_next(429, "TooManyRequests", "slow down", method="PUT", headers={"Retry-After": "3"})
    with pytest.raises(ThrottledError) as info:
        provider.apply(ZONE, [Change(Action.CREATE, None, a("x", "192.0.2.1"), RecordKey(f"x.{ZONE}", "A"))])
    assert info.value.retry_after == 3.0


def test_one_bad_group_does_not_sink_the_batch(fake: FakeAzureDns, provider: AzureProvider) -> None:
    cname = RecordSet(f"www.{ZONE}", "CNAME", 60, (f"elsewhere.{ZONE}",))
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.1")])
    bad_mx = RecordSet(f"mail.{ZONE}", "MX", 60, ("not-a-number mail.example.net.",))
    good = a("ok", "192.0.2.3")
    changes = [Change(Action.CREATE, None, cname, cname.key),  # 409 at the service: a CNAME beside an A
               Change(Action.CREATE, None, bad_mx, bad_mx.key),  # does not convert
               Change(Action.CREATE, None, good, good.key)]
    result = provider.apply(ZONE, changes)
    failed = dict(result.failed)
    assert set(failed) == {cname.key, bad_mx.key}
    assert "HTTP 409 Conflict" in failed[cname.key] and "request id" not in failed[cname.key]
    assert [c.key for c in result.applied] == [good.key]


def test_missing_zone_is_a_config_error(fake: FakeAzureDns, provider: AzureProvider) -> None:
    with pytest.raises(ConfigError, match=r"zone nope\.example not found"):
        provider.read("nope.example")


def test_unreachable_endpoint() -> None:
    require_sdk()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = SdkClient(FakeCredential(), "sub", "rg", f"https://127.0.0.1:{port}", timeout=2)
    with pytest.raises(UnreachableError, match="cannot reach"):
        AzureProvider(ZONE, client).read(ZONE)


# --- paging and conversion ----------------------------------------------------------------------------


def test_paging_follows_next_link(fake: FakeAzureDns, provider: AzureProvider) -> None:
    for i in range(10):
        fake.set_record(ZONE, f"h{i}", "A", {"TTL": 60, "ARecords": [{"ipv4Address": f"192.0.2.{i}"}]})
    snap = provider.read(ZONE)
    assert sum(1 for r in snap.records if r.name.startswith("h")) == 10
    lists = [r for r in fake.requests if r.path.endswith("/recordsets")]
    assert len(lists) == 4 and [r.query.get("$skiptoken") for r in lists] == [None, "3", "6", "9"]
    part = provider.read(ZONE, names=[f"h3.{ZONE}"])
    assert [r.name for r in part.records] == [f"h3.{ZONE}"] and part.names == {f"h3.{ZONE}"}


ROUND_TRIP = [
    RecordSet(ZONE, "MX", 300, ("10 mail.example.com.", "20 backup.example.net.")),
    RecordSet(f"_sip._tcp.{ZONE}", "SRV", 60, ("10 60 5060 sip.example.com.",)),
    RecordSet(ZONE, "CAA", 3600, ('0 issue "letsencrypt.org"', '128 iodef "mailto:sec@example.com"')),
    RecordSet(f"sub.{ZONE}", "NS", 3600, ("ns1.example.net", "ns2.example.net")),
    RecordSet(f"v6.{ZONE}", "AAAA", 60, ("2001:db8::1",)),
    RecordSet(f"alias.{ZONE}", "CNAME", 60, ("target.example.net",)),
    RecordSet(f"*.wild.{ZONE}", "A", 60, ("192.0.2.4",)),
    RecordSet(f"kuadrant-1hrxiems-a-www.{ZONE}", "TXT", 60,
              ("heritage=external-dns,external-dns/owner=cluster-a-uid,external-dns/version=1", "x" * 255)),
]


@pytest.mark.parametrize("rec", ROUND_TRIP, ids=lambda r: str(r.key))
def test_values_survive_the_service(fake: FakeAzureDns, provider: AzureProvider, rec: RecordSet) -> None:
    assert provider.apply(ZONE, [Change(Action.CREATE, None, rec, rec.key)]).ok
    assert {r.key: r for r in provider.read(ZONE).records}[rec.key] == rec


def test_to_native_shapes() -> None:
    rel, body = to_native(RecordSet(ZONE, "MX", 300, ("10 mail.example.com.",)), ZONE)
    assert rel == "@" and body == {"properties": {"TTL": 300, "MXRecords": [
        {"preference": 10, "exchange": "mail.example.com"}]}}
    rel, body = to_native(RecordSet(f"t.{ZONE}", "TXT", 60, ("a" * 300,)), ZONE)
    assert rel == "t" and [len(s) for s in body["properties"]["TXTRecords"][0]["value"]] == [255, 45]
    rel, body = to_native(RecordSet(f"c.{ZONE}", "CNAME", 60, ("x.example.net",)), ZONE, {"k": "v"})
    assert body == {"properties": {"TTL": 60, "metadata": {"k": "v"}, "CNAMERecord": {"cname": "x.example.net"}}}
    with pytest.raises(ValueError, match="Traffic Manager"):
        to_native(RecordSet(f"c.{ZONE}", "CNAME", 60, ("x.example.net",), set_id="US", geo="US"), ZONE)


def test_from_native_skips_soa_ptr_and_empty_sets() -> None:
    assert from_native({"name": "@", "type": "Microsoft.Network/dnszones/SOA", "properties": {"TTL": 1}}, ZONE) is None
    assert from_native({"name": "1", "type": "Microsoft.Network/dnszones/PTR",
                        "properties": {"TTL": 1, "PTRRecords": [{"ptrdname": "x"}]}}, ZONE) is None
    assert from_native({"name": "e", "type": "Microsoft.Network/dnszones/A",
                        "properties": {"TTL": 1, "ARecords": []}}, ZONE) is None
    rec = from_native({"name": "MiXeD", "type": "Microsoft.Network/dnszones/CNAME",
                       "properties": {"TTL": 5, "CNAMERecord": {"cname": "Target.Example.NET."}}}, ZONE)
    assert rec == RecordSet(f"mixed.{ZONE}", "CNAME", 5, ("target.example.net",))


def test_clean_message_and_retry_after() -> None:
    text = ("Operation failed. (request id: 1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b) "
            "Correlation ID: 2f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b. Timestamp: 2024-01-01 10:00:00Z.")
    assert azure_api.clean_message(text) == "Operation failed."
    assert azure_api.retry_after("12") == 12.0 and azure_api.retry_after(None) is None
    assert azure_api.retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past


# --- construction -------------------------------------------------------------------------------------

SECRET = "not-a-real-secret-value"


def creds_in(tmp_path: Path, *endpoints: str) -> Fences:
    """The operator's fences: credentials files in ``tmp_path``, these endpoints."""
    return Fences.parse(credentials_dir=str(tmp_path), provider_endpoints=",".join(endpoints))


def azure_secret(tmp_path: Path, **extra: str) -> CredentialsRef:
    cfg = {"tenantId": "t-1", "subscriptionId": "sub-1", "resourceGroup": "rg-1", "aadClientId": "app-1",
           "aadClientSecret": SECRET, **extra}
    b64 = base64.b64encode(json.dumps(cfg).encode()).decode()
    path = tmp_path / "secret.yaml"
    path.write_text(f"apiVersion: v1\nkind: Secret\ntype: kuadrant.io/azure\ndata:\n  azure.json: {b64}\n")
    return CredentialsRef(file=str(path))


def test_from_ref_reads_kuadrant_azure_json(tmp_path: Path) -> None:
    require_sdk()
    from azure.identity import ClientSecretCredential

    ref = ProviderRef("azure", (("endpoint", "https://127.0.0.1:1"),), azure_secret(tmp_path))
    provider = azure.from_ref(ZONE, ref, tmp_path, fences=creds_in(tmp_path, "https://127.0.0.1:1"))
    assert provider.account == "azure:sub-1" and provider.name == "azure"
    client = provider._client
    assert isinstance(client, SdkClient) and client.resource_group == "rg-1"
    assert isinstance(client._client._config.credential, ClientSecretCredential)
    assert SECRET not in repr(provider.__dict__)


def test_settings_override_azure_json(tmp_path: Path) -> None:
    require_sdk()
    ref = ProviderRef("azure", (("resourceGroup", "rg-2"), ("subscriptionId", "sub-2")), azure_secret(tmp_path))
    provider = azure.from_ref(ZONE, ref, tmp_path, fences=creds_in(tmp_path))
    assert provider.account == "azure:sub-2" and provider._client.resource_group == "rg-2"  # type: ignore[attr-defined]


def test_from_ref_errors(tmp_path: Path) -> None:
    require_sdk()
    with pytest.raises(UnsupportedError, match="Traffic Manager"):
        azure.from_ref(ZONE, ProviderRef("azure", (("trafficManager", "true"),)), tmp_path)
    with pytest.raises(ConfigError, match=r"needs spec\.provider\.settings subscriptionId") as info:
        azure.from_ref(ZONE, ProviderRef("azure", (("resourceGroup", "rg"),)), tmp_path)
    assert SECRET not in str(info.value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"azure.json": "{not json"}))
    with pytest.raises(ConfigError, match=r"azure\.json is not valid JSON"):
        azure.from_ref(ZONE, ProviderRef("azure", (), CredentialsRef(file=str(bad))), tmp_path,
                       fences=creds_in(tmp_path))


def test_registry_builds_the_azure_provider(tmp_path: Path) -> None:
    require_sdk()
    from gitdns.providers.registry import make_provider as build

    ref = ProviderRef("azure", (("resourceGroup", "rg"), ("subscriptionId", "sub")), azure_secret(tmp_path))
    assert isinstance(build(ZONE, ref, tmp_path, fences=creds_in(tmp_path)), AzureProvider)


def test_delete_window_the_data_goes_the_txt_is_refused_the_next_plan_removes_it(fake: FakeAzureDns) -> None:
    provider = make_provider(fake)
    sync(provider, ZONE, "owner-a", [a("www", "192.0.2.1")])
    leave = plan(provider, ZONE, "owner-a", [])
    assert [(c.action, c.key.type) for c in leave.applicable] == [(Action.DELETE, "A"), (Action.DELETE, "TXT")]
    txt = leave.applicable[1].key

    def touch_txt(req: Request) -> None:  # between our data delete and our TXT delete
        if req.method == "DELETE" and req.path.endswith("/TXT/" + txt.name.removesuffix("." + ZONE)):
            fake.hooks.clear()
            current = fake.get_record(ZONE, txt.name.removesuffix("." + ZONE), "TXT")
            assert current is not None
            fake.set_record(ZONE, current["name"], "TXT", current["properties"])  # same content, new etag

    fake.hooks.append(touch_txt)
    result = provider.apply(ZONE, leave.applicable)
    assert [c.key.type for c in result.applied] == ["A"] and [g for g, _ in result.refused] == [WWW]
    assert txt in {r.key for r in provider.read(ZONE).records}
    sync(provider, ZONE, "owner-a", [])
    assert not any(r.name.startswith("kuadrant-") for r in provider.read(ZONE).records)


# --- reads by name: a GET per record set, from the GET quota -------------------------------------
_LABEL = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)


@given(keys=st.lists(st.tuples(st.lists(_LABEL, min_size=0, max_size=2), st.sampled_from(
    sorted(azure.CAPABILITIES.record_types))), min_size=1, max_size=6),
       owners=st.lists(st.uuids().map(str), min_size=1, max_size=3, unique=True))
def test_a_read_by_name_probes_every_record_set_a_pass_reads(keys: list[tuple[list[str], str]],
                                                              owners: list[str]) -> None:
    """What a pass reads by name (`gitdns.reconcile.readset`: each key's data name, the owners'
    ownership TXT names for it) is GET as: each key's own type and the address types at its data
    name, TXT at every ownership name; nothing at a name it did not ask for."""
    from gitdns.core.registry import txt_name

    names: set[str] = set()
    needed: set[tuple[str, str]] = set()
    for labels, rtype in keys:
        name = ".".join([*labels, ZONE])
        names.add(name)
        needed.add((name, rtype))
        needed.update((name, t) for t in ("A", "AAAA", "CNAME"))
        for owner in owners:
            txt = txt_name(owner, rtype, name, ZONE)
            names.add(txt)
            needed.add((txt, "TXT"))
    got = set(azure.probes(names))
    assert needed <= got
    assert {n for n, _ in got} <= names


def test_a_read_by_name_gets_record_sets_and_lists_nothing(fake: FakeAzureDns, provider: AzureProvider) -> None:
    from gitdns.core.registry import txt_name

    owner = "00000000-0000-4000-8000-000000000001"
    www = RecordSet(f"www.{ZONE}", "A", 60, ("192.0.2.1",))
    txt = RecordSet(txt_name(owner, "A", www.name, ZONE), "TXT", 60, ("heritage=external-dns",))
    other = RecordSet(f"other.{ZONE}", "A", 60, ("192.0.2.2",))
    assert provider.apply(ZONE, [Change(Action.CREATE, None, r, r.key) for r in (txt, www, other)]).ok
    fake.requests.clear()
    part = provider.read(ZONE, names=[www.name, txt.name])
    assert sorted(part.records, key=str) == sorted([www, txt], key=str) and part.names == {www.name, txt.name}
    assert not [r for r in fake.requests if r.path.endswith("/recordsets")]  # no listing
    gets = sorted((r.path.rsplit("/", 2)[-2], r.path.rsplit("/", 1)[-1]) for r in fake.requests if r.method == "GET")
    assert gets == sorted([("A", "www"), ("AAAA", "www"), ("CNAME", "www"), ("TXT", txt.name[:-len(ZONE) - 1])])


def test_a_listing_names_the_record_sets_of_types_gitdns_does_not_hold(fake: FakeAzureDns,
                                                                        provider: AzureProvider) -> None:
    """A PTR record set is not a record to plan on, but a whole-zone read names it in
    ``skipped`` (what `gitdns import` reports by name); the SOA is never among them."""
    fake.set_record(ZONE, "ptr", "PTR", {"TTL": 300, "PTRRecords": [{"ptrdname": "host.example.net"}]})
    fake.set_record(ZONE, "www", "A", {"TTL": 60, "ARecords": [{"ipv4Address": "192.0.2.1"}]})
    snap = provider.read(ZONE)
    assert [(k.name, k.type) for k in snap.skipped] == [(f"ptr.{ZONE}", "PTR")]
    assert [(r.name, r.type) for r in snap.records if r.name == f"www.{ZONE}"] == [(f"www.{ZONE}", "A")]
