"""Geo views rendered from the record store (gitdns.core.views), and their serialisation
(gitdns.adapters.zonefile: master file text, CoreDNS weight file)."""

from __future__ import annotations

from dataclasses import replace

import dns.zone
import pytest

from gitdns.adapters.zonefile import rdata_text, to_master_file, weights_file
from gitdns.core.records import RecordSet
from gitdns.core.views import View, render_views

ZONE = "example.com"
KLB = "klb.api.example.com"


def resolve(view: View, name: str, rtype: str = "A") -> tuple[str, ...]:
    """Follow CNAMEs inside the view, like an authoritative server answering."""
    by_key = {(r.name, r.type): r for r in view.records}
    for _ in range(10):
        if (name, rtype) in by_key:
            return by_key[(name, rtype)].values
        if (name, "CNAME") not in by_key:
            return ()
        name = by_key[(name, "CNAME")].values[0]
    raise AssertionError("CNAME loop")


def test_worked_example_answers_per_view(worked_example: tuple[RecordSet, ...]) -> None:
    views = render_views(ZONE, worked_example)
    assert sorted(views) == ["GEO-EU", "US", "default"]
    assert resolve(views["GEO-EU"], "api.example.com") == ("1.1.1.1",)
    assert resolve(views["US"], "api.example.com") == ("2.2.2.2",)
    assert resolve(views["default"], "api.example.com") == ("1.1.1.1",)
    for view in views.values():
        assert view.notes == ()
        assert all(r.set_id == "" and r.weight is None and r.geo is None for r in view.records)
        names = [(r.name, r.type) for r in view.records]
        assert len(names) == len(set(names))


def test_worked_example_flattens_weighted_hop(worked_example: tuple[RecordSet, ...]) -> None:
    us = render_views(ZONE, worked_example)["US"]
    by_key = {(r.name, r.type): r for r in us.records}
    assert by_key[(KLB, "CNAME")].values == (f"us.{KLB}",)
    assert by_key[(f"us.{KLB}", "A")] == RecordSet(f"us.{KLB}", "A", 60, ("2.2.2.2",))
    assert (f"us.{KLB}", "CNAME") not in by_key
    assert us.weights == ((f"geo-eu.{KLB}", "1.1.1.1", 120), (f"us.{KLB}", "2.2.2.2", 120))


def _weighted(*rows: tuple[str, int, tuple[str, ...]]) -> list[RecordSet]:
    """rows of (cluster prefix, weight, addresses) under geo-eu.klb.api."""
    out: list[RecordSet] = []
    for prefix, weight, addrs in rows:
        target = f"{prefix}.{KLB}"
        out.append(RecordSet(f"geo-eu.{KLB}", "CNAME", 60, (target,), set_id=target, weight=weight))
        v4 = tuple(a for a in addrs if ":" not in a)
        v6 = tuple(a for a in addrs if ":" in a)
        out += [RecordSet(target, t, 60, vals) for t, vals in (("A", v4), ("AAAA", v6)) if vals]
    return out


def _flat(records: list[RecordSet]) -> View:
    return render_views(ZONE, records)["default"]


def test_weight_zero_rows_are_left_out() -> None:
    view = _flat(_weighted(("a", 120, ("192.0.2.1",)), ("b", 0, ("192.0.2.2",))))
    assert resolve(view, f"geo-eu.{KLB}") == ("192.0.2.1",)
    assert view.weights == ((f"geo-eu.{KLB}", "192.0.2.1", 120),)


def test_all_rows_at_weight_zero_fail_open() -> None:
    view = _flat(_weighted(("a", 0, ("192.0.2.1",)), ("b", 0, ("192.0.2.2",))))
    assert resolve(view, f"geo-eu.{KLB}") == ("192.0.2.1", "192.0.2.2")
    assert {w for _, _, w in view.weights} == {1}  # CoreDNS takes weights 1..255 only


def test_row_weight_is_shared_among_its_addresses() -> None:
    view = _flat(_weighted(("a", 120, ("192.0.2.1", "192.0.2.2", "192.0.2.3")), ("b", 120, ("192.0.2.9",))))
    weights = {addr: w for _, addr, w in view.weights}
    assert weights == {"192.0.2.1": 40, "192.0.2.2": 40, "192.0.2.3": 40, "192.0.2.9": 120}


def test_ipv6_targets_flatten_to_aaaa() -> None:
    view = _flat(_weighted(("a", 10, ("192.0.2.1", "2001:db8::1")), ("b", 10, ("2001:db8::2",))))
    assert resolve(view, f"geo-eu.{KLB}", "AAAA") == ("2001:db8::1", "2001:db8::2")
    assert resolve(view, f"geo-eu.{KLB}", "A") == ("192.0.2.1",)


def _hostname_row(set_id: str, weight: int) -> RecordSet:
    return RecordSet(f"geo-eu.{KLB}", "CNAME", 60, (set_id,), set_id=set_id, weight=weight)


def test_single_hostname_row_stays_a_cname() -> None:
    view = _flat([_hostname_row("lb-1.aws.example.net", 120)])
    assert {(r.name, r.type): r.values for r in view.records}[(f"geo-eu.{KLB}", "CNAME")] == (
        "lb-1.aws.example.net",
    )
    assert view.notes == () and view.weights == ()


@pytest.mark.parametrize(
    ("weights", "winner"),
    [((50, 200), "lb-2.example.net"), ((100, 100), "lb-1.example.net")],
    ids=["highest-weight", "tie-by-set-id"],
)
def test_several_rows_with_a_hostname_publish_one_cname_and_a_note(
    weights: tuple[int, int], winner: str
) -> None:
    rows = [_hostname_row("lb-1.example.net", weights[0]), _hostname_row("lb-2.example.net", weights[1])]
    view = _flat(rows)
    assert resolve(view, f"geo-eu.{KLB}", "CNAME") == (winner,)
    assert len(view.notes) == 1 and "cannot be flattened" in view.notes[0]


def test_missing_default_geo_row_uses_first_row_with_a_note(worked_example: tuple[RecordSet, ...]) -> None:
    records = [r for r in worked_example if r.geo != "*"]
    default = render_views(ZONE, records)["default"]
    assert resolve(default, "api.example.com") == ("1.1.1.1",)  # GEO-EU sorts first
    assert any("no default row" in n for n in default.notes)


def test_ownership_txt_rows_merge_into_one_rrset(worked_example: tuple[RecordSet, ...]) -> None:
    name = f"kuadrant-1hrxiems-cname-{KLB}"
    txts = [
        RecordSet(name, "TXT", 300, ('"heritage=external-dns,owner=a"',), set_id="GEO-EU", geo="GEO-EU"),
        RecordSet(name, "TXT", 300, ('"heritage=external-dns,owner=a"',), set_id="default", geo="*"),
        RecordSet(name, "TXT", 300, ('"heritage=external-dns,owner=b"',), set_id="US", geo="US"),
    ]
    merged = ('"heritage=external-dns,owner=a"', '"heritage=external-dns,owner=b"')
    for view in render_views(ZONE, [*worked_example, *txts]).values():
        assert resolve(view, name, "TXT") == merged


def test_plain_records_pass_through_and_out_of_zone_is_ignored() -> None:
    mx = RecordSet("example.com", "MX", 300, ("10 mail.example.com",))
    other = RecordSet("www.example.org", "A", 60, ("192.0.2.1",))
    views = render_views(ZONE, [mx, other])
    assert list(views) == ["default"] and views["default"].records == (mx,)


def test_weighted_a_rows_merge_directly() -> None:
    rows = [
        RecordSet("w.example.com", "A", 60, ("192.0.2.1",), set_id="one", weight=3),
        RecordSet("w.example.com", "A", 60, ("192.0.2.2",), set_id="two", weight=1),
    ]
    view = render_views(ZONE, rows)["default"]
    assert view.records == (RecordSet("w.example.com", "A", 60, ("192.0.2.1", "192.0.2.2")),)
    assert view.weights == (("w.example.com", "192.0.2.1", 3), ("w.example.com", "192.0.2.2", 1))


# --- serialisation (gitdns.adapters.zonefile) -----------------------------------------


@pytest.mark.parametrize(
    ("rtype", "value", "text"),
    [
        ("CNAME", "klb.api.example.com", "klb.api.example.com."),
        ("MX", "10 mail.example.com", "10 mail.example.com."),
        ("SRV", "0 5 443 svc.example.com", "0 5 443 svc.example.com."),
        ("TXT", "heritage=external-dns,x", '"heritage=external-dns,x"'),
        ("TXT", '"already quoted"', '"already quoted"'),
        ("TXT", 'say "hi"', '"say \\"hi\\""'),
        ("A", "192.0.2.1", "192.0.2.1"),
    ],
)
def test_rdata_text(rtype: str, value: str, text: str) -> None:
    assert rdata_text(rtype, value) == text


def test_master_file_round_trips_through_dnspython(worked_example: tuple[RecordSet, ...]) -> None:
    view = render_views(ZONE, worked_example)["US"]
    text = to_master_file(ZONE, view, serial=42)
    zone = dns.zone.from_text(text, origin=ZONE, relativize=False)
    soa = zone.get_rdataset(f"{ZONE}.", "SOA")
    assert soa is not None and soa[0].serial == 42
    assert zone.get_rdataset(f"{KLB}.", "CNAME")[0].target.to_text() == f"us.{KLB}."
    assert zone.get_rdataset(f"us.{KLB}.", "A")[0].address == "2.2.2.2"
    assert zone.get_rdataset(f"{ZONE}.", "NS") is not None
    assert to_master_file(ZONE, view, serial=42) == text  # deterministic


def test_master_file_keeps_store_ns_and_derives_serial_from_content() -> None:
    ns = RecordSet(ZONE, "NS", 3600, ("ns.provider.net",))
    view = render_views(ZONE, [ns])["default"]
    text = to_master_file(ZONE, view)
    zone = dns.zone.from_text(text, origin=ZONE, relativize=False)
    assert [r.target.to_text() for r in zone.get_rdataset(f"{ZONE}.", "NS")] == ["ns.provider.net."]
    other = to_master_file(ZONE, replace(view, records=(ns.with_values(["ns2.provider.net"]),)))
    assert text.splitlines()[2] != other.splitlines()[2]  # the SOA line: a new serial


def test_weights_file_format(worked_example: tuple[RecordSet, ...]) -> None:
    text = weights_file(render_views(ZONE, worked_example)["GEO-EU"])
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == [f"geo-eu.{KLB}.", "1.1.1.1 120", f"us.{KLB}.", "2.2.2.2 120"]
