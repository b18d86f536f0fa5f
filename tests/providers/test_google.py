"""The `google` provider against the Cloud DNS HTTP fake (`gcp_fake`), driven through the real
google-cloud-dns client library: conformance, compare-and-swap (412), folding, errors, paging.

Without google-cloud-dns the tests skip, except under ``CI=true`` where that is a failure.
"""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitdns.core import builder
from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.records import Action, Change, RecordKey, RecordSet
from gitdns.errors import AuthError, ConfigError, RetryableError, ThrottledError
from gitdns.providers.base import Provider
from gitdns.providers.fences import Fences
from gitdns.providers.google import native as gn
from gitdns.providers.google import provider as g
from tests.core import worked_example as we
from tests.providers.conformance import Conformance, ProviderCase
from tests.providers.gcp_fake import CloudDnsFake, Server
from tests.providers.tls import client_context, server_context

ZONE = "example.com"
PROJECT = "test-project"


def need_library() -> None:
    try:
        import google.cloud.dns  # noqa: F401
    except ImportError:
        hint = "the google provider tests need google-cloud-dns: pip install 'gitdns[google]'"
        if os.environ.get("CI") == "true":
            pytest.fail(hint)
        pytest.skip(hint)


def allowing(url: str) -> Fences:
    """The operator's fences allowing the fake's endpoint."""
    return Fences.parse(provider_endpoints=url)


def make(url: str, **settings_: str) -> g.GoogleProvider:
    need_library()
    pairs = {"endpoint": url, "project": PROJECT, **settings_}
    return g.from_ref(ZONE, ProviderRef("google", tuple(sorted(pairs.items()))), Path("."), fences=allowing(url))


@pytest.fixture
def server() -> Iterator[Server]:
    fake = CloudDnsFake(PROJECT, page_size=3)
    fake.add_zone("example-com", ZONE)
    fake.add_zone("other-zone", "other.test")
    with Server(fake, tls=server_context()) as srv:  # provider endpoints are HTTPS
        yield srv


@pytest.fixture
def fake(server: Server) -> CloudDnsFake:
    return server.fake


@pytest.fixture
def provider(server: Server) -> g.GoogleProvider:
    return make(server.url)


# --- conformance ------------------------------------------------------------------------------
def variant_state() -> Any:
    """The worked example with Google region geo codes (GEO-EU/US are Route53 codes)."""
    a = we.cluster("cluster-a", "cluster-a-uid", "1.1.1.1", "europe-west1")
    b = we.cluster("cluster-b", "cluster-b-uid", "2.2.2.2", "us-east1")
    policy = dataclasses.replace(we.POLICY, default_geo="europe-west1")
    return dataclasses.replace(we.STATE, clusters=(a, b), policies=(policy,))


class TestConformance(Conformance):
    @pytest.fixture
    def case(self, server: Server) -> ProviderCase:
        # the default geo row needs a region of its own: the test clusters use europe-west1
        return ProviderCase("google", lambda tmp: make(server.url, defaultGeoLocation="us-central1"))

    def test_loadbalanced_layout_where_the_provider_routes(self, provider: Provider, zone: str) -> None:
        state = variant_state()
        for cluster in state.clusters:
            self.sync(provider, zone, cluster.id, builder.desired_for_zone(state, cluster, state.zones[0]))
        data = self.data(provider, zone)
        assert len(data) == 9  # 8 data records + the zone's own NS (foreign)
        assert data[RecordKey("klb.api.example.com", "CNAME", "default")] == ("europe-west1.klb.api.example.com",)
        assert data[RecordKey("europe-west1.klb.api.example.com", "CNAME", "1hrxie-30ics1.klb.api.example.com")] \
            == ("1hrxie-30ics1.klb.api.example.com",)
        txt = [r for r in provider.read(zone).records if r.name.startswith("kuadrant-")]
        assert len(txt) == 9
        # the zone as read back is what was written, and a fresh plan for each cluster is empty
        for cluster in state.clusters:
            want = builder.desired_for_zone(state, cluster, state.zones[0])
            assert self.plan(provider, zone, cluster.id, want).empty
            got = {r.key: r for r in provider.read(zone).records}
            for rec in want:
                assert got[rec.key] == rec


def test_loadbalanced_rrsets_are_folded_routing_policies(server: Server) -> None:
    provider = make(server.url, defaultGeoLocation="us-central1")
    state = variant_state()
    for cluster in state.clusters:
        Conformance().sync(provider, ZONE, cluster.id, builder.desired_for_zone(state, cluster, state.zones[0]))
    rrsets = server.fake.zones["example-com"].rrsets
    klb = rrsets[("klb.api.example.com.", "CNAME")]
    assert "rrdatas" not in klb
    assert sorted((i["location"], i["rrdatas"]) for i in klb["routingPolicy"]["geo"]["items"]) == [
        ("europe-west1", ["europe-west1.klb.api.example.com."]),
        ("us-central1", ["europe-west1.klb.api.example.com."]),
        ("us-east1", ["us-east1.klb.api.example.com."]),
    ]
    weighted = rrsets[("us-east1.klb.api.example.com.", "CNAME")]["routingPolicy"]["wrr"]["items"]
    assert weighted == [{"weight": 120.0, "rrdatas": ["17ol5y-30ics1.klb.api.example.com."]}]
    assert rrsets[("api.example.com.", "CNAME")]["rrdatas"] == ["klb.api.example.com."]


def test_default_row_on_a_cluster_region_fails_that_group_only(server: Server) -> None:
    provider = make(server.url)  # defaultGeoLocation europe-west1, and cluster A is in europe-west1
    state = variant_state()
    a = state.clusters[0]
    p = Conformance.plan(provider, ZONE, a.id, builder.desired_for_zone(state, a, state.zones[0]))
    result = provider.apply(ZONE, p.applicable, p.guards)
    # the two klb rows land in one rrset: whichever group comes second cannot be folded
    assert len(result.failed) == 1 and result.failed[0][0] in {
        RecordKey("klb.api.example.com", "CNAME", "europe-west1"), RecordKey("klb.api.example.com", "CNAME", "default")}
    assert "defaultGeoLocation" in result.failed[0][1]
    assert result.applied and not result.refused


# --- compare-and-swap -------------------------------------------------------------------------
A1 = RecordSet("www.example.com", "A", 60, ("192.0.2.1",))
A2 = RecordSet("www.example.com", "A", 60, ("192.0.2.1", "192.0.2.2"))


def create(rec: RecordSet) -> Change:
    return Change(Action.CREATE, None, rec, rec.key)


def test_a_write_racing_between_read_and_change_is_refused_by_412(provider: g.GoogleProvider,
                                                                    fake: CloudDnsFake) -> None:
    assert provider.apply(ZONE, [create(A1)]).ok
    fake.before_next_change(lambda f: f.put("example-com", {"name": "www.example.com.", "type": "A", "ttl": 60,
                                                            "rrdatas": ["192.0.2.1", "192.0.2.9"]}))
    result = provider.apply(ZONE, [Change(Action.UPDATE, A1, A2, A1.key)])
    assert not result.applied and result.refused[0][0] == A1.key
    assert "412 conditionNotMet" in result.refused[0][1] and "request id" not in result.refused[0][1]
    assert provider.read(ZONE, ["www.example.com"]).records[0].values == ("192.0.2.1", "192.0.2.9")


def test_fresh_groups_go_in_one_change(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    rows = [RecordSet(f"n{i}.example.com", "A", 60, (f"192.0.2.{i + 1}",)) for i in range(5)]
    sent = len(fake.zones["example-com"].changes)
    result = provider.apply(ZONE, [create(r) for r in rows])
    assert result.ok and len(result.applied) == 5
    assert len(fake.zones["example-com"].changes) == sent + 1  # one change, not one per group


def test_a_combined_change_refused_sends_each_group_alone(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    """Another writer between the read and the change: Cloud DNS refuses the whole change; each
    group is read again and sent alone, so only the group that moved is refused."""
    rows = [RecordSet(f"n{i}.example.com", "A", 60, (f"192.0.2.{i + 1}",)) for i in range(3)]
    fake.before_next_change(lambda f: f.put("example-com", {"name": "n1.example.com.", "type": "A", "ttl": 60,
                                                            "rrdatas": ["192.0.2.77"]}))
    sent = len(fake.zones["example-com"].changes)
    result = provider.apply(ZONE, [create(r) for r in rows])
    assert [k for k, _ in result.refused] == [rows[1].key]
    assert sorted(c.key for c in result.applied) == sorted([rows[0].key, rows[2].key])
    held = {r.key: r for r in provider.read(ZONE).records}
    assert held[rows[1].key].values == ("192.0.2.77",)  # the other writer's, untouched
    assert held[rows[0].key] == rows[0] and held[rows[2].key] == rows[2]
    assert len(fake.zones["example-com"].changes) == sent + 2  # the two fresh groups, each alone


def test_a_create_racing_another_create_is_refused_by_409(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    fake.before_next_change(lambda f: f.put("example-com", {"name": "www.example.com.", "type": "A", "ttl": 60,
                                                            "rrdatas": ["192.0.2.7"]}))
    result = provider.apply(ZONE, [create(A1)])
    assert result.refused and "409 alreadyExists" in result.refused[0][1]


def test_a_stale_old_is_refused_before_sending(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    assert provider.apply(ZONE, [create(A2)]).ok
    sent = len(fake.zones["example-com"].changes)
    result = provider.apply(ZONE, [Change(Action.DELETE, A1, None, A1.key)])
    assert result.refused and "changed since it was read" in result.refused[0][1]
    assert len(fake.zones["example-com"].changes) == sent


def test_one_stale_group_does_not_sink_the_others(provider: g.GoogleProvider) -> None:
    other = RecordSet("api.example.com", "A", 60, ("192.0.2.3",))
    result = provider.apply(ZONE, [Change(Action.DELETE, A1, None, A1.key), create(other)])
    assert result.applied == (create(other),) and result.refused[0][0] == A1.key


def test_a_group_lands_atomically_as_one_change(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    txt = RecordSet("kuadrant-1hrxiems-a-www.example.com", "TXT", 60, ("heritage=external-dns,x",))
    changes = [Change(Action.CREATE, None, txt, A1.key), create(A1)]
    result = provider.apply(ZONE, changes)
    assert result.ok and len(result.change_ids) == 1
    change = fake.zones["example-com"].changes[-1]
    assert {a["type"] for a in change["additions"]} == {"A", "TXT"}
    assert fake.zones["example-com"].rrsets[("kuadrant-1hrxiems-a-www.example.com.", "TXT")]["rrdatas"] == \
        ['"heritage=external-dns,x"']


def test_unmodelled_rrset_is_never_rewritten(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    fake.put("example-com", {"name": "hc.example.com.", "type": "A", "ttl": 60, "routingPolicy": {
        "wrr": {"items": [{"weight": 1.5, "rrdatas": ["192.0.2.1"]}]}}})
    row = provider.read(ZONE, ["hc.example.com"]).records[0]
    result = provider.apply(ZONE, [Change(Action.UPDATE, row, dataclasses.replace(row, weight=3), row.key)])
    assert result.failed and "does not model" in result.failed[0][1]


# --- folding ------------------------------------------------------------------------------------
_host = st.from_regex(r"[a-z][a-z0-9]{0,8}\.example\.com", fullmatch=True)
_ip = st.ip_addresses(v=4).map(str)


@st.composite
def rowsets(draw: st.DrawFn) -> list[RecordSet]:
    name = draw(_host)
    ttl = draw(st.integers(0, 86400))
    mode = draw(st.sampled_from(["plain", "wrr", "geo", "txt-wrr"]))
    if mode == "plain":
        rtype = draw(st.sampled_from(["A", "TXT", "MX"]))
        vals = {"A": _ip, "TXT": st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1,
                                         max_size=40), "MX": st.just("10 mail.example.com.")}[rtype]
        return [RecordSet(name, rtype, ttl, tuple(draw(st.lists(vals, min_size=1, max_size=4))))]
    if mode == "wrr":
        targets = draw(st.lists(_host, min_size=1, max_size=4, unique=True))
        return [RecordSet(name, "CNAME", ttl, (t,), set_id=t, weight=draw(st.integers(0, 1000))) for t in targets]
    if mode == "txt-wrr":
        targets = draw(st.lists(_host, min_size=1, max_size=3, unique=True))
        return [RecordSet(name, "TXT", ttl, (f"heritage=external-dns,external-dns/owner=o,external-dns/targets={t}",),
                          set_id=t, weight=draw(st.integers(0, 255))) for t in targets]
    regions = draw(st.lists(st.sampled_from(["europe-west2", "us-east1", "asia-east1", "us-west1"]), min_size=1,
                            max_size=4, unique=True))
    rows = [RecordSet(name, "CNAME", ttl, (f"{r}.{name}",), set_id=r, geo=r) for r in regions]
    if draw(st.booleans()):
        rows.append(RecordSet(name, "CNAME", ttl, (f"{regions[0]}.{name}",), set_id="default", geo="*"))
    return rows


def KEY(rec: RecordSet) -> RecordKey:
    return rec.key


@given(rowsets())
@settings(max_examples=200, deadline=None)
def test_fold_then_unfold_gives_the_rows_back(rows: list[RecordSet]) -> None:
    native = gn.to_native(rows)
    assert sorted(gn.from_native(json.loads(json.dumps(native))), key=KEY) == sorted(rows, key=KEY)
    assert gn.representable(native)


@given(rowsets())
@settings(max_examples=100, deadline=None)
def test_unfold_then_fold_gives_the_rrset_back(rows: list[RecordSet]) -> None:
    native = gn.to_native(rows)
    assert gn.canonical(gn.to_native(gn.from_native(native))) == gn.canonical(native)


@pytest.mark.parametrize("rows, why", [
    ([RecordSet("a.example.com", "A", 60, ("192.0.2.1",)),
      RecordSet("a.example.com", "A", 60, ("192.0.2.2",), set_id="x", weight=1)], "different routing"),
    ([RecordSet("a.example.com", "CNAME", 60, ("b.example.com",), set_id="b.example.com", weight=1),
      RecordSet("a.example.com", "CNAME", 300, ("c.example.com",), set_id="c.example.com", weight=1)], "one TTL"),
    ([RecordSet("a.example.com", "CNAME", 60, ("b.example.com",), set_id="blue", weight=1)], "recover"),
    ([RecordSet("a.example.com", "A", 60, ("192.0.2.1",), set_id="x", weight=1, geo="us-east1")], "not both"),
    ([RecordSet("a.example.com", "CNAME", 60, ("b.example.com",), set_id="europe-west1", geo="europe-west1")],
     "reserved"),
])
def test_rows_cloud_dns_cannot_hold_are_refused_by_the_fold(rows: list[RecordSet], why: str) -> None:
    with pytest.raises(gn.FoldError, match=why):
        gn.to_native(rows)


def test_values_are_converted_both_ways() -> None:
    assert gn.rdata("CNAME", "klb.api.example.com") == "klb.api.example.com."
    assert gn.rdata("TXT", 'say "hi"') == '"say \\"hi\\""'
    assert gn.value("TXT", '"say \\"hi\\""') == 'say "hi"'
    assert gn.value("TXT", '"ab" "cd"') == "abcd"
    assert gn.value("TXT", "bare") == "bare"
    assert gn.value("CNAME", "KLB.Example.COM.") == "klb.example.com"
    assert gn.rdata("MX", "10 mail.example.com.") == "10 mail.example.com."


# --- errors, paging, settings ---------------------------------------------------------------------
def test_rate_limit_is_throttling_with_retry_after(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    fake.fail_next(429, "rateLimitExceeded", retry_after=7)
    with pytest.raises(ThrottledError) as info:
        provider.read(ZONE)
    assert info.value.retry_after == 7.0 and "request id" not in str(info.value)


def test_403_rate_limit_reason_is_throttling(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    provider.read(ZONE)  # zone found and cached
    fake.fail_next(403, "userRateLimitExceeded")
    with pytest.raises(ThrottledError):
        provider.apply(ZONE, [create(A1)])


@pytest.mark.parametrize("status, reason, error", [
    (503, "backendError", RetryableError), (500, "internalError", RetryableError),
    (401, "authError", AuthError), (403, "forbidden", AuthError),
])
def test_service_errors_are_mapped(provider: g.GoogleProvider, fake: CloudDnsFake, status: int, reason: str,
                                   error: type[Exception]) -> None:
    fake.fail_next(status, reason)
    with pytest.raises(error) as info:
        provider.read(ZONE)
    assert "request id" not in str(info.value)


def test_a_400_fails_that_group_only(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    other = RecordSet("api.example.com", "A", 60, ("192.0.2.3",))
    bad = RecordSet("www.example.com", "A", 60, ("192.0.2.1",))
    # the service fails the change of both groups, then the bad group's own: the groups go alone
    # after a failed change, and only the bad one fails
    fake.fail_next(400, "invalid", "Invalid value for 'entity.change.additions[0].rrdatas[0]'", method="POST",
                   times=2)
    result = provider.apply(ZONE, [create(bad), create(other)])
    assert [k for k, _ in result.failed] == [bad.key] and "400 invalid" in result.failed[0][1]
    assert [c.key for c in result.applied] == [other.key]


def test_unreachable_api(tmp_path: Path) -> None:
    provider = make("https://127.0.0.1:9", managedZone="example-com")
    with pytest.raises(RetryableError):
        provider.read(ZONE)


def test_reads_follow_pages(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    rows = [RecordSet(f"h{i}.example.com", "A", 60, (f"192.0.2.{i}",)) for i in range(8)]
    assert provider.apply(ZONE, [create(r) for r in rows]).ok
    got = provider.read(ZONE)
    assert {r.key for r in rows} <= {r.key for r in got.records}
    assert sum(1 for m, p in fake.requests if m == "GET" and "rrsets" in p and "pageToken" in p) >= 3
    assert provider.read(ZONE, ["h3.example.com"]).records == (rows[3],)


def test_zone_is_found_by_dns_name_or_pinned(server: Server) -> None:
    assert [z.domain for z in make(server.url).zones()] == ["example.com", "other.test"]
    with pytest.raises(ConfigError, match="managedZone"):
        g.from_ref("nope.test", ProviderRef("google", (("endpoint", server.url), ("project", PROJECT))),
                   Path("."), fences=allowing(server.url)).read("nope.test")
    pinned = make(server.url, managedZone="example-com")
    assert pinned.read(ZONE).complete


def test_settings_and_credentials(server: Server, tmp_path: Path) -> None:
    need_library()
    secret = tmp_path / "gcp.json"
    secret.write_text(json.dumps({"PROJECT_ID": PROJECT}))
    fences = Fences.parse(provider_endpoints=server.url, credentials_dir=str(tmp_path))
    ref = ProviderRef("google", (("endpoint", server.url),), CredentialsRef(file=str(secret)))
    assert g.from_ref(ZONE, ref, tmp_path, fences=fences).account == PROJECT
    secret.write_text(json.dumps({"GOOGLE": "not-json-SECRET", "PROJECT_ID": PROJECT}))
    with pytest.raises(ConfigError) as info:
        g.from_ref(ZONE, ref, tmp_path, fences=fences)
    assert "SECRET" not in str(info.value)
    with pytest.raises(ConfigError, match="project"):
        g.from_ref(ZONE, ProviderRef("google", (("endpoint", server.url),)), tmp_path, fences=fences)


def test_the_registry_builds_it(server: Server) -> None:
    need_library()
    from gitdns.providers.registry import make_provider

    ref = ProviderRef("google", (("endpoint", server.url), ("project", PROJECT)))
    provider = make_provider(ZONE, ref, Path("."), fences=allowing(server.url))
    assert provider.name == "google" and provider.capabilities.geo.name == "google"
    assert provider.capabilities.reads_per_minute == 240 and provider.capabilities.writes_per_minute == 60


# --- the fake itself --------------------------------------------------------------------------------
def post(server: Server, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{server.url}/dns/v1/projects/{PROJECT}/managedZones/example-com/changes",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=client_context()) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


RR = {"name": "x.example.com.", "type": "A", "ttl": 60, "rrdatas": ["192.0.2.1"]}


@pytest.mark.parametrize("body, status, reason", [
    ({"deletions": [RR]}, 404, "notFound"),
    ({"additions": [{**RR, "routingPolicy": {"wrr": {"items": [{"weight": 1, "rrdatas": ["192.0.2.1"]}]}}}]},
     400, "invalid"),
    ({"additions": [{**RR, "rrdatas": None, "routingPolicy": {"wrr": {"items": [{"weight": -1,
                                                                                 "rrdatas": ["192.0.2.1"]}]}}}]},
     400, "invalid"),
    ({"additions": [{**RR, "rrdatas": None, "routingPolicy": {"geo": {"items": [{"location": "GEO-EU",
                                                                                 "rrdatas": ["192.0.2.1"]}]}}}]},
     400, "invalid"),
    ({"additions": [{**RR, "name": "x.other.test."}]}, 400, "invalid"),
])
def test_fake_checks_shapes(server: Server, body: dict[str, Any], status: int, reason: str) -> None:
    code, answer = post(server, body)
    assert (code, answer["error"]["errors"][0]["reason"]) == (status, reason)


def test_fake_enforces_exact_deletions_and_atomicity(server: Server) -> None:
    assert post(server, {"additions": [RR]})[0] == 200
    assert post(server, {"additions": [RR]})[1]["error"]["errors"][0]["reason"] == "alreadyExists"
    stale = {**RR, "ttl": 300}
    code, answer = post(server, {"deletions": [stale], "additions": [{**RR, "name": "y.example.com."}]})
    assert (code, answer["error"]["errors"][0]["reason"]) == (412, "conditionNotMet")
    assert ("y.example.com.", "A") not in server.fake.zones["example-com"].rrsets
    assert post(server, {"deletions": [RR], "additions": [{**RR, "rrdatas": ["192.0.2.2"]}]})[0] == 200


def test_a_read_names_the_rrsets_of_types_gitdns_does_not_hold(provider: g.GoogleProvider, fake: CloudDnsFake) -> None:
    """A PTR and an SSHFP rrset are not records to plan on, but a read names them in
    ``skipped`` (what `gitdns import` reports by name); the SOA is never among them."""
    fake.put("example-com", {"kind": "dns#resourceRecordSet", "name": f"ptr.{ZONE}.", "type": "PTR", "ttl": 300,
                             "rrdatas": ["host.example.net."]})
    fake.put("example-com", {"kind": "dns#resourceRecordSet", "name": f"h.{ZONE}.", "type": "SSHFP", "ttl": 300,
                             "rrdatas": ["1 1 " + "ab" * 20]})
    snap = provider.read(ZONE)
    assert sorted((k.name, k.type) for k in snap.skipped) == [(f"h.{ZONE}", "SSHFP"), (f"ptr.{ZONE}", "PTR")]
    assert all(r.type not in ("PTR", "SSHFP", "SOA") for r in snap.records)
    assert [k.type for k in provider.read(ZONE, names=[f"ptr.{ZONE}"]).skipped] == ["PTR"]
