"""The rfc2136 provider without a server: conversion, message building, rcode mapping,
settings and credentials, and the conformance suite against `FakeServer`.

`FakeServer` implements the provider's `DnsClient` protocol: it decodes each UPDATE from the
wire and applies RFC 2136 §3.2 (prerequisites, all or nothing) and §3.4 (updates, in order,
CNAME exclusivity as BIND does: a conflicting add is silently ignored).  It does NOT check
TSIG, TTL handling beyond "last add wins", zone-cut/glue rules, SOA serial arithmetic,
message size limits or transport errors; tests/e2e/test_rfc2136.py runs the same suite
against real BIND and PowerDNS.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dns.exception
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.update
import pytest

from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet
from gitdns.errors import AuthError, ConfigError, RetryableError, UnreachableError
from gitdns.providers.base import CasGranularity, Provider, Routing
from gitdns.providers.fences import Fences
from gitdns.providers.registry import make_provider
from gitdns.providers.rfc2136 import provider as rfc2136
from gitdns.providers.rfc2136.native import StaleGroup, batches, build_update, from_native, to_native
from gitdns.providers.rfc2136.provider import DnsPythonClient, Rfc2136Provider, from_ref
from tests.providers.conformance import Conformance, ProviderCase

ZONE = "example.test"
SECRET = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY="
Key = tuple[dns.name.Name, int]


class FakeServer:
    """An in-memory primary for one zone speaking the `DnsClient` protocol."""

    def __init__(self, zone: str = ZONE) -> None:
        self.origin = dns.name.from_text(zone + ".")
        self.rrsets: dict[Key, tuple[int, frozenset[dns.rdata.Rdata]]] = {}
        self.messages: list[dns.message.Message] = []
        self.scripted: list[int] = []  # rcodes to answer instead of evaluating, first first
        self.serial = 1
        ns1 = dns.name.from_text("ns1", self.origin)
        self._put(self.origin, "SOA", 300, f"ns1.{zone}. hostmaster.{zone}. 1 3600 600 86400 300")
        self._put(self.origin, "NS", 300, f"ns1.{zone}.")
        self._put(ns1, "A", 300, "127.0.0.1")

    def _put(self, name: dns.name.Name, rdtype: str, ttl: int, *texts: str) -> None:
        t = dns.rdatatype.from_text(rdtype)
        self.rrsets[(name, t)] = (ttl, frozenset(dns.rdata.from_text("IN", t, x) for x in texts))

    # --- DnsClient ---------------------------------------------------------------------
    def transfer(self, zone: str) -> list[dns.rrset.RRset]:
        assert dns.name.from_text(zone if zone.endswith(".") else zone + ".") == self.origin
        return [dns.rrset.from_rdata_list(name, ttl, list(rdatas))
                for (name, _), (ttl, rdatas) in sorted(self.rrsets.items())]

    def update(self, message: dns.update.UpdateMessage) -> int:
        wire = dns.message.from_wire(message.to_wire())
        assert isinstance(wire, dns.update.UpdateMessage)
        self.messages.append(wire)
        if self.scripted:
            return self.scripted.pop(0)
        rcode = self._prerequisites(wire)
        if rcode == dns.rcode.NOERROR:
            self._updates(wire)
            self.serial += 1
        return int(rcode)

    # --- RFC 2136 ------------------------------------------------------------------------
    def _names(self) -> set[dns.name.Name]:
        return {name for name, _ in self.rrsets}

    def _prerequisites(self, m: dns.update.UpdateMessage) -> int:
        value_dependent: dict[Key, set[dns.rdata.Rdata]] = {}
        for rr in m.prerequisite:
            key = (rr.name, rr.rdtype)
            if rr.deleting == dns.rdataclass.ANY:
                if rr.rdtype == dns.rdatatype.ANY and rr.name not in self._names():
                    return dns.rcode.NXDOMAIN
                if rr.rdtype != dns.rdatatype.ANY and key not in self.rrsets:
                    return dns.rcode.NXRRSET
            elif rr.deleting == dns.rdataclass.NONE:
                if rr.rdtype == dns.rdatatype.ANY and rr.name in self._names():
                    return dns.rcode.YXDOMAIN
                if rr.rdtype != dns.rdatatype.ANY and key in self.rrsets:
                    return dns.rcode.YXRRSET
            else:
                value_dependent.setdefault(key, set()).update(rr)
        for key, want in value_dependent.items():
            if key not in self.rrsets or set(self.rrsets[key][1]) != want:
                return dns.rcode.NXRRSET
        return dns.rcode.NOERROR

    def _updates(self, m: dns.update.UpdateMessage) -> None:
        cname = dns.rdatatype.CNAME
        for rr in m.update:
            key = (rr.name, rr.rdtype)
            if rr.deleting == dns.rdataclass.ANY:
                if rr.rdtype == dns.rdatatype.ANY:
                    for k in [k for k in self.rrsets if k[0] == rr.name and k[0] != self.origin]:
                        del self.rrsets[k]
                else:
                    self.rrsets.pop(key, None)
            elif rr.deleting == dns.rdataclass.NONE:
                ttl, have = self.rrsets.get(key, (0, frozenset()))
                left = have - set(rr)
                if left:
                    self.rrsets[key] = (ttl, left)
                else:
                    self.rrsets.pop(key, None)
            else:
                types = {t for n, t in self.rrsets if n == rr.name}
                if (rr.rdtype == cname and types - {cname}) or (rr.rdtype != cname and cname in types):
                    continue  # RFC 2136 §3.4.2.2: silently ignored, as BIND does
                _, have = self.rrsets.get(key, (rr.ttl, frozenset()))
                self.rrsets[key] = (rr.ttl, have | frozenset(rr))


def provider(server: FakeServer | None = None, domain: str = ZONE, dns_zone: str | None = None) -> Rfc2136Provider:
    return Rfc2136Provider(domain, server or FakeServer(), dns_zone)


def a(name: str, *values: str, ttl: int = 60) -> RecordSet:
    return RecordSet(f"{name}.{ZONE}", "A", ttl, tuple(values))


def create(rec: RecordSet) -> Change:
    return Change(Action.CREATE, None, rec, rec.key)


# --- the conformance suite against the fake -----------------------------------------------------


class TestConformanceOnFake(Conformance):
    @pytest.fixture
    def case(self) -> ProviderCase:
        return ProviderCase("rfc2136-fake", lambda tmp: provider(), zone=ZONE)


def test_capabilities() -> None:
    caps = Rfc2136Provider.capabilities
    assert caps.routing is Routing.NONE and caps.cas is CasGranularity.RECORD and caps.guards
    assert caps.record_types == {"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA", "NS"}
    assert isinstance(provider(), Provider)


# --- conversion ----------------------------------------------------------------------------------

ROUND_TRIP = [
    RecordSet("www.example.test", "A", 60, ("192.0.2.1", "192.0.2.2")),
    RecordSet("www.example.test", "AAAA", 60, ("2001:db8::1",)),
    RecordSet("www.example.test", "CNAME", 300, ("klb.www.example.test",)),
    RecordSet("sub.example.test", "NS", 3600, ("ns1.other.test", "ns2.other.test")),
    RecordSet("example.test", "MX", 60, ("10 mail.example.test.", "20 mx2.example.test.")),
    RecordSet("_sip._tcp.example.test", "SRV", 60, ("10 60 5060 sip.example.test.",)),
    RecordSet("example.test", "CAA", 60, ('0 issue "letsencrypt.org"',)),
    RecordSet("kuadrant-x-a-www.example.test", "TXT", 60,
              ('heritage=external-dns,external-dns/owner=c1,external-dns/version=1', 'with "quotes" and \\')),
    RecordSet("*.example.test", "A", 60, ("192.0.2.9",)),
]


@pytest.mark.parametrize("rec", ROUND_TRIP, ids=[f"{r.type}-{r.name}" for r in ROUND_TRIP])
def test_to_native_from_native_round_trip(rec: RecordSet) -> None:
    native = to_native(rec)
    assert native.name == dns.name.from_text(rec.name + ".")
    assert from_native(native) == rec


def test_a_long_txt_value_is_split_in_255_octet_strings_and_joined_back() -> None:
    rec = RecordSet("t.example.test", "TXT", 60, ("x" * 300,))
    native = to_native(rec)
    assert [len(s) for s in native[0].strings] == [255, 45]
    assert from_native(native) == rec


def test_soa_and_unmanaged_types_are_not_converted() -> None:
    soa = dns.rrset.from_text("example.test.", 300, "IN", "SOA", "ns1. h. 1 2 3 4 5")
    ptr = dns.rrset.from_text("1.example.test.", 300, "IN", "PTR", "x.example.test.")
    assert from_native(soa) is None and from_native(ptr) is None


def test_read_excludes_soa_keeps_apex_ns_and_reports_the_serial() -> None:
    snap = provider().read(ZONE)
    assert {(r.name, r.type) for r in snap.records} == {(ZONE, "NS"), (f"ns1.{ZONE}", "A")}
    assert snap.version == "1" and snap.complete and snap.names is None


def test_read_with_names_filters_the_transfer() -> None:
    p = provider()
    assert p.apply(ZONE, [create(a("www", "192.0.2.1")), create(a("api", "192.0.2.2"))]).ok
    snap = p.read(ZONE, [f"WWW.{ZONE}."])
    assert [r.key for r in snap.records] == [RecordKey(f"www.{ZONE}", "A")]
    assert snap.names == frozenset({f"www.{ZONE}"})


def test_a_domain_inside_a_larger_server_zone() -> None:
    server = FakeServer()
    outer = provider(server)
    assert outer.apply(ZONE, [create(a("x", "192.0.2.1")), create(a("www.app", "192.0.2.2"))]).ok
    inner = provider(server, domain=f"app.{ZONE}", dns_zone=ZONE)
    assert inner.zones()[0].id == ZONE and inner.zones()[0].domain == f"app.{ZONE}"
    assert [r.name for r in inner.read(f"app.{ZONE}").records] == [f"www.app.{ZONE}"]
    rec = RecordSet(f"api.app.{ZONE}", "A", 60, ("192.0.2.3",))
    assert inner.apply(f"app.{ZONE}", [create(rec)]).ok
    assert server.messages[-1].zone[0].name == dns.name.from_text(ZONE + ".")
    with pytest.raises(ConfigError, match="does not contain"):
        provider(server, domain="other.test", dns_zone=ZONE)


# --- messages ------------------------------------------------------------------------------------


def _prereqs(m: dns.update.UpdateMessage) -> list[tuple[str, str, str, list[str]]]:
    """The prerequisite section as sent: (name, type, class, rdatas), value-dependent RRs merged."""
    wire = dns.message.from_wire(m.to_wire())
    out: dict[tuple[str, str, str], list[str]] = {}
    for rr in wire.prerequisite:
        cls = dns.rdataclass.to_text(rr.deleting) if rr.deleting else "IN"
        out.setdefault((str(rr.name), dns.rdatatype.to_text(rr.rdtype), cls), []).extend(x.to_text() for x in rr)
    return [(*k, sorted(v)) for k, v in out.items()]


def test_update_requires_the_whole_old_rrset_value_dependent() -> None:
    old, new = a("www", "192.0.2.1", "192.0.2.2"), a("www", "192.0.2.3", ttl=120)
    m = build_update(ZONE, [Change(Action.UPDATE, old, new, old.key)])
    assert _prereqs(m) == [("www.example.test.", "A", "IN", ["192.0.2.1", "192.0.2.2"])]
    wire = dns.message.from_wire(m.to_wire())
    ups = [(dns.rdataclass.to_text(rr.deleting) if rr.deleting else "IN", rr.ttl, sorted(x.to_text() for x in rr))
           for rr in wire.update]
    assert ups == [("ANY", 0, []), ("IN", 120, ["192.0.2.3"])]


def test_create_requires_absence_and_no_cname_a_cname_create_requires_an_unused_name() -> None:
    m = build_update(ZONE, [create(a("www", "192.0.2.1"))])
    assert _prereqs(m) == [("www.example.test.", "A", "NONE", []), ("www.example.test.", "CNAME", "NONE", [])]
    cname = RecordSet(f"www.{ZONE}", "CNAME", 60, (f"klb.www.{ZONE}",))
    assert _prereqs(build_update(ZONE, [create(cname)])) == [("www.example.test.", "ANY", "NONE", [])]


def test_guards_become_rrset_prerequisites() -> None:
    rec = a("www", "192.0.2.1")
    guards = [Guard(RecordKey(f"kuadrant-b-a-www.{ZONE}", "TXT"), False, rec.key),
              Guard(RecordKey(f"kuadrant-c-a-www.{ZONE}", "TXT"), True, rec.key)]
    m = build_update(ZONE, [Change(Action.DELETE, rec, None, rec.key)], guards)
    assert _prereqs(m)[1:] == [("kuadrant-b-a-www.example.test.", "TXT", "NONE", []),
                               ("kuadrant-c-a-www.example.test.", "TXT", "ANY", [])]


def test_a_group_whose_changes_contradict_each_other_is_stale() -> None:
    rec = a("www", "192.0.2.1")
    with pytest.raises(StaleGroup):
        build_update(ZONE, [create(rec), create(rec)])
    p = provider()
    result = p.apply(ZONE, [create(rec), create(rec)])
    assert result.refused and not result.applied


def test_batches_one_per_group_with_its_guards() -> None:
    x, y = a("x", "192.0.2.1"), a("y", "192.0.2.2")
    g = Guard(RecordKey(f"kuadrant-b-a-y.{ZONE}", "TXT"), False, y.key)
    out = batches([create(x), create(y)], [g])
    assert [(group, len(members), guards) for group, members, guards in out] == [(x.key, 1, []), (y.key, 1, [g])]


# --- apply: outcomes -----------------------------------------------------------------------------


@pytest.mark.parametrize("rcode", ["NXRRSET", "YXRRSET", "YXDOMAIN", "NXDOMAIN"])
def test_failed_prerequisites_refuse_that_group_only(rcode: str) -> None:
    server = FakeServer()
    server.scripted = [dns.rcode.from_text(rcode), dns.rcode.NOERROR]
    x, y = a("x", "192.0.2.1"), a("y", "192.0.2.2")
    result = provider(server).apply(ZONE, [create(x), create(y)])
    assert [k for k, _ in result.refused] == [x.key] and rcode in result.refused[0][1]
    assert [c.key for c in result.applied] == [y.key] and not result.failed


@pytest.mark.parametrize("rcode", ["FORMERR", "NOTZONE", "NOTIMP"])
def test_other_rejections_fail_that_group_only(rcode: str) -> None:
    server = FakeServer()
    server.scripted = [dns.rcode.from_text(rcode), dns.rcode.NOERROR]
    x, y = a("x", "192.0.2.1"), a("y", "192.0.2.2")
    result = provider(server).apply(ZONE, [create(x), create(y)])
    assert [k for k, _ in result.failed] == [x.key] and [c.key for c in result.applied] == [y.key]


@pytest.mark.parametrize(("rcode", "error"), [("REFUSED", AuthError), ("NOTAUTH", AuthError),
                                              ("SERVFAIL", RetryableError)])
def test_server_wide_rcodes_raise(rcode: str, error: type[Exception]) -> None:
    server = FakeServer()
    server.scripted = [dns.rcode.from_text(rcode), dns.rcode.from_text(rcode)]  # the update, the probe
    with pytest.raises(error, match=rcode):
        provider(server).apply(ZONE, [create(a("x", "192.0.2.1"))])


def test_refused_content_fails_its_group_when_the_key_may_update() -> None:
    """REFUSED, then an empty probe UPDATE accepted: the server refused this content only."""
    server = FakeServer()
    server.scripted = [dns.rcode.REFUSED, dns.rcode.NOERROR]
    x, y = a("x", "192.0.2.1"), a("y", "192.0.2.2")
    result = provider(server).apply(ZONE, [create(x), create(y)])
    assert [k for k, _ in result.failed] == [x.key] and [c.key for c in result.applied] == [y.key]
    probe = server.messages[1]
    assert not probe.prerequisite and not probe.update


def test_routing_out_of_zone_and_bad_values_fail_their_group_without_a_message() -> None:
    server = FakeServer()
    weighted = RecordSet(f"w.{ZONE}", "A", 60, ("192.0.2.1",), set_id="eu", weight=10)
    outside = RecordSet("www.other.test", "A", 60, ("192.0.2.1",))
    bad = RecordSet(f"bad.{ZONE}", "A", 60, ("not-an-ip",))
    ok = a("ok", "192.0.2.4")
    result = provider(server).apply(ZONE, [create(weighted), create(outside), create(bad), create(ok)])
    failed = dict(result.failed)
    assert "no routing policies" in failed[weighted.key] and "outside zone" in failed[outside.key]
    assert "not valid rdata" in failed[bad.key]
    assert [c.key for c in result.applied] == [ok.key] and len(server.messages) == 1


def test_a_ttl_only_change_by_someone_else_is_not_detected() -> None:
    """The documented window: DNS prerequisites compare values, never TTLs."""
    p = provider()
    assert p.apply(ZONE, [create(a("www", "192.0.2.1", ttl=60))]).ok
    assert p.apply(ZONE, [Change(Action.UPDATE, a("www", "192.0.2.1", ttl=60), a("www", "192.0.2.1", ttl=300),
                                 RecordKey(f"www.{ZONE}", "A"))]).ok  # someone else
    stale = Change(Action.UPDATE, a("www", "192.0.2.1", ttl=60), a("www", "192.0.2.7", ttl=60),
                   RecordKey(f"www.{ZONE}", "A"))
    assert p.apply(ZONE, [stale]).ok


def test_a_cname_create_beside_other_data_is_refused_not_silently_dropped() -> None:
    p = provider()
    assert p.apply(ZONE, [create(RecordSet(f"www.{ZONE}", "TXT", 60, ("v=foreign",)))]).ok
    cname = RecordSet(f"www.{ZONE}", "CNAME", 60, (f"klb.www.{ZONE}",))
    result = p.apply(ZONE, [create(cname)])
    assert result.refused and "YXDOMAIN" in result.refused[0][1]
    c2 = RecordSet(f"api.{ZONE}", "CNAME", 60, (f"x.{ZONE}",))
    assert p.apply(ZONE, [create(c2)]).ok
    result = p.apply(ZONE, [create(RecordSet(f"api.{ZONE}", "A", 60, ("192.0.2.1",)))])
    assert result.refused and "YXRRSET" in result.refused[0][1]


# --- the dnspython client's error mapping -------------------------------------------------------


def test_client_errors_map_to_the_error_tree_without_key_material() -> None:
    client = DnsPythonClient("127.0.0.1", 5353, 2.0, "ddns-key", "hmac-sha256", SECRET)
    cases: list[tuple[Exception, type[Exception]]] = [
        (dns.exception.Timeout(), UnreachableError),
        (ConnectionRefusedError(111, "Connection refused"), UnreachableError),
        (dns.tsig.PeerBadSignature(), AuthError),
        (dns.exception.FormError("response requires a TSIG but does not have one"), AuthError),
        (dns.exception.FormError("truncated"), RetryableError),
    ]
    for exc, expected in cases:
        err = client._error(exc, "UPDATE")
        assert isinstance(err, expected), (exc, err)
        assert SECRET not in str(err) and "127.0.0.1:5353" in str(err)


# --- construction --------------------------------------------------------------------------------


def ref(creds: CredentialsRef | None = None, **settings: str) -> ProviderRef:
    return ProviderRef("rfc2136", tuple(sorted(settings.items())), creds)


def allowing(tmp_path: Path, servers: str = "h", **more: str) -> Fences:
    """The operator's fences: these servers, credentials files in ``tmp_path``."""
    return Fences.parse(rfc2136_servers=servers, credentials_dir=str(tmp_path), **more)


def test_from_ref_reads_settings_and_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "tsig.env"
    path.write_text(f"TSIG_SECRET={SECRET}\n")
    fences = allowing(tmp_path, "192.0.2.53:5353, h")
    p = from_ref(ZONE, ref(CredentialsRef(file=str(path)), server="192.0.2.53", port="5353",
                           tsigKeyName="ddns-key", timeout="3"), tmp_path, fences=fences)
    client = p._client
    assert isinstance(client, DnsPythonClient)
    assert (client.server, client.port, client.timeout) == ("192.0.2.53", 5353, 3.0)
    assert p.account == "rfc2136:192.0.2.53:5353" and p.dns_zone == ZONE
    built = make_provider(ZONE, ref(CredentialsRef(file=str(path)), server="h", tsigKeyName="k"), tmp_path,
                          fences=fences)
    assert built.name == "rfc2136"


@pytest.mark.parametrize("creds", [{"TSIG_SECRET": SECRET}, {"secret": SECRET}, {"DNS_TSIG_SECRET": SECRET},
                                   {"ANYTHING": SECRET}])
def test_the_secret_keys_accepted(creds: dict[str, str]) -> None:
    assert rfc2136.tsig_secret(creds) == SECRET


def test_the_secret_from_an_env_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITDNS_TEST_TSIG_SECRET", SECRET)
    p = from_ref(ZONE, ref(CredentialsRef(env="GITDNS_TEST_TSIG_SECRET"), server="h", tsigKeyName="k"), tmp_path,
                 fences=allowing(tmp_path, credentials_env_prefixes="GITDNS_TEST"))
    assert p.name == "rfc2136"


@pytest.mark.parametrize(("settings", "message"), [
    ({}, r"needs spec\.provider\.settings server"),
    ({"server": "h", "port": "x"}, "settings.port"),
    ({"server": "h", "port": "70000"}, "settings.port"),
    ({"server": "h", "timeout": "-1"}, "settings.timeout"),
    ({"server": "h", "tsigAlgorithm": "rot13"}, "settings.tsigAlgorithm"),
    ({"server": "h", "zone": "other.test"}, "does not contain"),
])
def test_bad_settings_are_config_errors(settings: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        from_ref(ZONE, ref(None, **settings), tmp_path, fences=allowing(tmp_path))


def test_secret_problems_never_quote_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "tsig.env"
    path.write_text("TSIG_SECRET=not*base64*at-all\nOTHER=1\n")
    with pytest.raises(ConfigError) as info:
        from_ref(ZONE, ref(CredentialsRef(file=str(path)), server="h", tsigKeyName="k"), tmp_path,
                 fences=allowing(tmp_path))
    assert "not valid base64" in str(info.value) and "not*base64" not in str(info.value)
    path.write_text("A=1\nB=2\n")
    with pytest.raises(ConfigError, match="no TSIG secret") as info:
        from_ref(ZONE, ref(CredentialsRef(file=str(path)), server="h", tsigKeyName="k"), tmp_path,
                 fences=allowing(tmp_path))
    assert "=1" not in str(info.value)


def test_importing_the_module_does_not_import_dnspython() -> None:
    code = ("import sys, gitdns.providers.rfc2136.provider; "
            "print(any(m == 'dns' or m.startswith('dns.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.stdout.strip() == "False"
