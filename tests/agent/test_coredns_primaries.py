"""CoreDNS primaries in-process: two primaries with separate stores serve identical views, the
parent delegates to both, and a primary removed from git leaves the apex and the parent."""

from __future__ import annotations

from pathlib import Path

import dns.zone
import pytest

from gitdns.core.names import short_hash
from tests.agent.coredns_kit import COREDNS_DIR, PARENT, SERVED, PrimariesFleet, files, start


@pytest.fixture
def fleet(tmp_path: Path) -> PrimariesFleet:
    return start(tmp_path)


def master(fleet: PrimariesFleet, name: str, view: str) -> dns.zone.Zone:
    return dns.zone.from_file(str(fleet.views_dir(name) / f"{view}.zone"), origin=SERVED, relativize=False)


def values(zone: dns.zone.Zone, name: str, rdtype: str) -> list[str]:
    rrset = zone.get_rdataset(f"{name}.", rdtype)
    return sorted(rd.to_text() for rd in rrset) if rrset is not None else []


def test_both_primaries_render_byte_identical_views(fleet: PrimariesFleet) -> None:
    p1, p2 = fleet.rendered("p1"), fleet.rendered("p2")
    assert sorted(p1) == ["GEO-EU.weights", "GEO-EU.zone", "US.weights", "US.zone", "app.example.com.server",
                          "default.weights", "default.zone"]
    assert p1 == p2
    assert fleet.views_dir("p1") != fleet.views_dir("p2")  # two stores, two directories
    locks = [r.name for r in fleet.served("p1") if r.name.startswith("gitdns-lock-")]
    assert len(locks) == 1  # p1's TXT lease lives in the served zone, yet the views match


def test_views_answer_by_geo_with_every_primary_as_nameserver(fleet: PrimariesFleet) -> None:
    eu, default = master(fleet, "p1", "GEO-EU"), master(fleet, "p1", "default")
    for zone in (eu, default):
        assert values(zone, SERVED, "NS") == ["ns-p1.example.com.", "ns-p2.example.com."]
        assert values(zone, SERVED, "SOA")[0].startswith("ns-p1.example.com. ")  # MNAME: the first NS
        assert values(zone, f"www.{SERVED}", "CNAME") == [f"klb.www.{SERVED}."]
    assert values(eu, f"klb.api.{SERVED}", "CNAME") == [f"geo-eu.klb.api.{SERVED}."]
    assert values(default, f"klb.api.{SERVED}", "CNAME") == [f"us.klb.api.{SERVED}."]
    assert values(eu, f"api.{SERVED}", "CNAME") == [f"klb.api.{SERVED}."]
    text = (fleet.views_dir("p1") / "GEO-EU.zone").read_text()
    assert "kuadrant-" not in text and "gitdns-heartbeat" not in text  # the registry is not served


def test_the_corefile_snippet_serves_the_views_from_the_mounted_directory(fleet: PrimariesFleet) -> None:
    text = (fleet.views_dir("p1") / "app.example.com.server").read_text()
    assert "expr incidr(client_ip(), '127.0.0.2/32')" in text
    assert f"file {COREDNS_DIR}/GEO-EU.zone" in text and f"file {COREDNS_DIR}/default.zone" in text
    assert text.index("GEO-EU.zone") < text.index("default.zone") and "forward" not in text


def test_the_parent_delegates_to_both_primaries_with_glue(fleet: PrimariesFleet) -> None:
    parent = fleet.parent()
    assert parent[(SERVED, "NS")] == ("ns-p1.example.com", "ns-p2.example.com")
    assert parent[("ns-p1.example.com", "A")] == ("192.0.2.1",)
    assert parent[("ns-p2.example.com", "A")] == ("192.0.2.2",)
    owners = {r.name.split("-")[1] for r in fleet.zone.read(PARENT).records
              if r.type == "TXT" and r.name.endswith(f"ns-{SERVED}")}
    assert owners == {short_hash("id-p1", 8), short_hash("id-p2", 8)}  # each primary under its own id


def test_each_store_holds_the_same_records(fleet: PrimariesFleet) -> None:
    def data(name: str) -> set[tuple[str, str, tuple[str, ...]]]:
        return {(r.name, r.type, r.values) for r in fleet.served(name) if r.type != "TXT"}
    assert data("p1") == data("p2")
    assert (SERVED, "NS", ("ns-p1.example.com", "ns-p2.example.com")) in data("p1")


def test_a_primary_removed_from_git_leaves_the_apex_and_the_parent(fleet: PrimariesFleet) -> None:
    fleet.source.commit(files("p1"), "p2 leaves")
    fleet.clock.advance(1)
    fleet.run("r1", "r2", "p1")  # p2 is gone: nobody runs it
    parent = fleet.parent()
    assert parent[(SERVED, "NS")] == ("ns-p1.example.com",)
    assert ("ns-p2.example.com", "A") not in parent
    assert parent[("ns-p1.example.com", "A")] == ("192.0.2.1",)
    for view in ("GEO-EU", "default"):
        assert values(master(fleet, "p1", view), SERVED, "NS") == ["ns-p1.example.com."]
    gone = short_hash("id-p2", 8)
    assert not [r for r in fleet.served("p1") if gone in r.name]  # its claims in p1's store retired
    assert not [r for r in fleet.zone.read(PARENT).records if r.name.startswith(f"kuadrant-{gone}")]
    assert values(master(fleet, "p1", "GEO-EU"), f"geo-eu.klb.api.{SERVED}", "A") == ["10.0.0.1"]  # the rest stays


def test_an_idle_primary_reads_nothing_more(fleet: PrimariesFleet) -> None:
    fleet.clock.advance(1)
    before = fleet.rendered("p1")
    result = fleet.agents["p1"].run()
    assert result.outcomes == [] and fleet.rendered("p1") == before


def test_a_fleet_without_nameservers_renders_as_before(tmp_path: Path) -> None:
    fleet = PrimariesFleet(tmp_path)
    plain = files("p1", "p2")
    for name in ("p1", "p2"):
        plain[f"clusters/{name}.yaml"] = plain[f"clusters/{name}.yaml"].split("  nameserver:")[0]
    # no primary delegates the served zone from its parent now: git does (ZoneInsideZone otherwise)
    plain["records/cut.yaml"] = ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata: {name: cut}\nspec:\n"
                                 "  zone: example-com\n  records: [{name: app, type: NS, values: [ns1.example.net]}]\n")
    fleet.source.commit(plain, "no nameservers")
    for name in ("r1", "r2"):
        fleet.agent(name, remote=True)
    fleet.agent("p1")
    fleet.run("r1", "r2", "p1")
    text = (fleet.views_dir("p1") / "default.zone").read_text()
    assert "ns1" in values(master(fleet, "p1", "default"), SERVED, "NS")[0]  # the generated NS
    assert "kuadrant-" in text  # the registry stays in views of zones not served by primaries
    assert fleet.parent()[(SERVED, "NS")] == ("ns1.example.net",)  # git's delegation; no primary's


def test_served_views_leave_out_every_bookkeeping_record(tmp_path: Path) -> None:
    from gitdns.adapters.zonefile import Serving, write_views
    from gitdns.core.owner.zone import heartbeat_record
    from gitdns.core.records import Action, Change, RecordSet
    from gitdns.core.registry import OwnerLabels, ownership_record
    from gitdns.providers.local import LocalProvider

    store = LocalProvider(tmp_path)
    www = RecordSet(f"www.{SERVED}", "A", 60, ("10.0.0.1",))
    bookkeeping = [ownership_record(www, OwnerLabels("id-p1"), SERVED)[0], heartbeat_record("id-p1", SERVED, 5.0),
                   RecordSet(f"gitdns-lock-12345678.{SERVED}", "TXT", 60, ("holder=x,expires=9",))]
    kept = RecordSet(f"www.{SERVED}", "TXT", 60, ("v=spf1 -all",))
    assert store.apply(SERVED, [Change(Action.CREATE, None, r, r.key) for r in [www, kept, *bookkeeping]]).ok
    served = write_views(tmp_path / "served", SERVED, store.read, serving=Serving(registry=False,
                                                                                  content_serial=True))
    plain = write_views(tmp_path / "plain", SERVED, store.read)
    assert "v=spf1 -all" in served["default"] and "10.0.0.1" in served["default"]
    assert not any(word in served["default"] for word in ("kuadrant-", "heartbeat", "gitdns-lock", "holder"))
    assert "kuadrant-" in plain["default"] and "gitdns-lock" in plain["default"]
    store.apply(SERVED, [Change(Action.DELETE, bookkeeping[2], None, bookkeeping[2].key)])  # version moves
    again = write_views(tmp_path / "served", SERVED, store.read, serving=Serving(registry=False,
                                                                                 content_serial=True))
    assert again == served  # same content, same serial, whatever the store version
