"""External-dns Endpoints <-> record sets, and Kuadrant's delegation names."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gitdns.adapters.templates import load_template_sources
from gitdns.core import endpoints as ep
from gitdns.core.model import Cluster
from gitdns.core.names import short_hash
from gitdns.core.records import RecordSet
from gitdns.core.registry import OwnerLabels, ownership_record
from gitdns.core.render import make_environment, render_dnsrecords

LAYOUT = (
    RecordSet("api.example.com", "CNAME", 300, ("klb.api.example.com",)),
    RecordSet("klb.api.example.com", "CNAME", 300, ("geo-eu.klb.api.example.com",), "GEO-EU", geo="GEO-EU"),
    RecordSet("klb.api.example.com", "CNAME", 300, ("geo-eu.klb.api.example.com",), "default", geo="*"),
    RecordSet("geo-eu.klb.api.example.com", "CNAME", 60, ("t1.klb.api.example.com",), "t1.klb.api.example.com",
              weight=120),
    RecordSet("t1.klb.api.example.com", "A", 60, ("192.0.2.1", "192.0.2.2")),
)


def test_render_and_parse_never_drift() -> None:
    env = make_environment(load_template_sources())
    _, text = render_dnsrecords(env, cluster=Cluster(name="c", id="c-uid"), root_host="api.example.com",
                                zone_domain="example.com", namespace="ns", records=LAYOUT, health=None,
                                provider_ref=None)
    rendered = YAML(typ="safe").load(text)["spec"]["endpoints"]
    assert set(ep.records_from_endpoints(rendered)) == set(LAYOUT)
    assert rendered == ep.endpoints_from_records(LAYOUT)


names = st.from_regex(r"[a-z][a-z0-9]{0,8}\.api\.example\.com", fullmatch=True)
records = st.builds(
    RecordSet, names, st.sampled_from(["A", "AAAA", "TXT"]), st.integers(0, 86400),
    st.lists(st.from_regex(r"[a-z0-9.:=,]{1,20}", fullmatch=True), min_size=1, max_size=3).map(tuple),
    st.sampled_from(["", "eu", "us"]), st.one_of(st.none(), st.integers(0, 255)),
    st.one_of(st.none(), st.sampled_from(["GEO-EU", "US", "*"])))


@given(st.lists(records, max_size=6, unique_by=lambda r: r.key))
def test_round_trip(recs: list[RecordSet]) -> None:
    assert set(ep.records_from_endpoints(ep.endpoints_from_records(recs))) == set(recs)


def test_endpoint_defaults_and_errors() -> None:
    rec = ep.record_from_endpoint({"dnsName": "WWW.Example.com.", "recordType": "cname", "targets": ["T.example.com."]})
    assert rec == RecordSet("www.example.com", "CNAME", ep.DEFAULT_TTL, ("t.example.com",))
    for bad, why in (({"recordType": "A", "targets": ["1.2.3.4"]}, "dnsName"),
                     ({"dnsName": "a.example.com", "recordType": "PTR", "targets": ["x"]}, "recordType"),
                     ({"dnsName": "a.example.com", "recordType": "A", "targets": []}, "targets"),
                     ({"dnsName": "a.example.com", "recordType": "A", "targets": ["1.2.3.4"], "recordTTL": "x"},
                      "recordTTL"),
                     ({"dnsName": "a.example.com", "recordType": "CNAME", "targets": ["a.b", "c.d"]}, "one target"),
                     ({"dnsName": "a.example.com", "recordType": "A", "targets": ["1.2.3.4"],
                       "providerSpecific": [{"name": "weight", "value": "heavy"}]}, "weight")):
        with pytest.raises(ValueError, match=why):
            ep.record_from_endpoint(bad)
    one = {"dnsName": "a.example.com", "recordType": "A", "targets": ["192.0.2.1"]}
    with pytest.raises(ValueError, match="twice"):
        ep.records_from_endpoints([one, one])


def test_kuadrant_hash_matches_dns_operator() -> None:
    # Values from Kuadrant's dns-operator tests and docs: hash8 of the root host.
    assert ep.kuadrant_hash("example.com") == "1jbcyj4z"
    assert ep.authoritative_record_name("simple.k.example.com") == "authoritative-record-1c8db9d0"
    assert ep.authoritative_record_name("*.example.com") == "authoritative-record-1jbcyj4z"
    # Kuadrant's base-36 codec writes one "0" per leading zero byte; short_hash (the one hash of
    # klb names, TXT names and these) does the same.
    value = next(f"h{i}" for i in range(100_000) if hashlib.sha224(f"h{i}".encode()).digest()[0] == 0)
    number = int.from_bytes(hashlib.sha224(value.encode()).digest(), "big")
    digits = ""
    while number:
        number, rem = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[rem] + digits
    assert ep.kuadrant_hash(value) == ("0" + digits)[:8] == short_hash(value, 8)


def test_authoritative_labels_carry_both_spellings() -> None:
    labels = ep.authoritative_labels("api.example.com")
    assert labels == {"kuadrant.io/authoritative-record": "true",
                      "kuadrant.io/authoritative-record-hash": ep.kuadrant_hash("api.example.com"),
                      "kuadrant.io/primary-authoritative-zone-record": "api.example.com"}
    assert ep.PRIMARY_ZONE_LABEL not in ep.authoritative_labels(("a" * 60) + ".example.com")
    assert ep.is_authoritative(labels) and not ep.is_authoritative({"app": "x"})


def test_source_endpoints_are_checked_as_kuadrant_does() -> None:
    good = ep.source_endpoints("*.apps.example.com", [
        {"dnsName": "*.apps.example.com", "recordType": "CNAME", "targets": ["klb.apps.example.com"]},
        {"dnsName": "t.klb.apps.example.com", "recordType": "A", "targets": ["192.0.2.1"]}])
    assert good.ok and len(good.records) == 2
    outside = ep.source_endpoints("api.example.com", [
        {"dnsName": "api.example.com", "recordType": "A", "targets": ["192.0.2.1"]},
        {"dnsName": "www.example.org", "recordType": "A", "targets": ["192.0.2.1"]}])
    assert not outside.ok and outside.records == () and "rootHost" in outside.problems[0]
    txt, _ = ownership_record(RecordSet("api.example.com", "A", 60, ("192.0.2.1",)), OwnerLabels("o"))
    owned = ep.source_endpoints("api.example.com", ep.endpoints_from_records([txt]))
    assert not owned.ok and any("ownership" in p for p in owned.problems)
    assert not ep.source_endpoints("api.example.com", "x").ok
    assert not ep.source_endpoints("localhost", []).ok
    assert not ep.source_endpoints("api.example.com", [
        {"dnsName": "api.example.com", "recordType": "A", "targets": ["192.0.2.1"]}], zone="example.org").ok


def test_data_names() -> None:
    rec = RecordSet("api.example.com", "A", 60, ("192.0.2.1",))
    txt, _ = ownership_record(rec, OwnerLabels("o"))
    assert ep.data_names([rec, txt]) == {"api.example.com"}
