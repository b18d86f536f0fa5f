"""The rfc2136 provider against real servers: BIND 9 and PowerDNS Authoritative (gsqlite3).

Each server is started once per session on a free loopback port (tests/e2e/dns_servers.py)
with zone ``example.test`` and TSIG key ``ddns-key``; before each test the zone is brought
back to what it held at start.  The conformance suite runs on both, plus the stale-write and
join/leave checks read back with plain DNS queries.

Without ``named`` / ``pdns_server`` the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.records import Action, Change, RecordKey, RecordSet
from gitdns.errors import AuthError
from gitdns.providers.base import Provider
from gitdns.providers.fences import Fences
from gitdns.providers.rfc2136.provider import DnsPythonClient, Rfc2136Provider, from_ref
from tests.e2e import dns_servers
from tests.e2e.dns_servers import DnsServer, ToolMissing
from tests.providers.conformance import Conformance, ProviderCase

ZONE = dns_servers.ZONE
KINDS = ("bind", "pdns")


def _start(kind: str, directory: Path) -> DnsServer:
    try:
        return dns_servers.STARTERS[kind](directory)
    except ToolMissing as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session", params=KINDS)
def dns_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DnsServer]:
    server = _start(request.param, tmp_path_factory.mktemp(f"rfc2136-{request.param}"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(dns_server: DnsServer) -> DnsServer:
    dns_server.reset_zone()
    return dns_server


def make_provider(server: DnsServer, tmp: Path) -> Provider:
    """Through `from_ref`, as an agent builds it: settings plus a credentials file."""
    secret = tmp / "tsig.env"
    secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
    ref = ProviderRef("rfc2136", (("port", str(server.port)), ("server", server.host), ("timeout", "5"),
                                  ("tsigKeyName", dns_servers.KEY_NAME)), CredentialsRef(file=str(secret)))
    fences = Fences.parse(rfc2136_servers=f"{server.host}:{server.port}", credentials_dir=str(tmp))  # the operator's
    return from_ref(ZONE, ref, tmp, fences=fences)


class TestConformanceOnRealServers(Conformance):
    @pytest.fixture
    def case(self, server: DnsServer) -> ProviderCase:
        return ProviderCase(f"rfc2136-{server.kind}", lambda tmp: make_provider(server, tmp), zone=ZONE)


def a(name: str, *values: str) -> RecordSet:
    return RecordSet(f"{name}.{ZONE}", "A", 60, tuple(values))


def test_a_stale_write_is_refused_with_nxrrset_and_the_record_stays(server: DnsServer, tmp_path: Path) -> None:
    p = make_provider(server, tmp_path)
    assert p.apply(ZONE, [Change(Action.CREATE, None, a("www", "192.0.2.1"), a("www").key)]).ok
    read = a("www", "192.0.2.1")
    assert p.apply(ZONE, [Change(Action.UPDATE, read, a("www", "192.0.2.2"), read.key)]).ok  # someone else
    result = p.apply(ZONE, [Change(Action.UPDATE, read, a("www", "192.0.2.9"), read.key)])
    assert not result.applied and "NXRRSET" in result.refused[0][1]
    assert server.query(f"www.{ZONE}.", "A") == ["192.0.2.2"]
    gone = p.apply(ZONE, [Change(Action.DELETE, read, None, read.key)])
    assert "NXRRSET" in gone.refused[0][1] and server.query(f"www.{ZONE}.", "A") == ["192.0.2.2"]


def test_join_leave_race_the_leavers_delete_is_refused_when_the_joiner_announced(
        server: DnsServer, tmp_path: Path) -> None:
    p = make_provider(server, tmp_path)
    conf = Conformance()
    conf.sync(p, ZONE, "owner-a", [a("www", "192.0.2.1")])
    leave = conf.plan(p, ZONE, "owner-a", [])
    assert leave.guards, "the leaver's delete must be conditional on the co-owners' TXT names"
    join = conf.plan(p, ZONE, "owner-b", [a("www", "192.0.2.1", "192.0.2.2")])
    assert p.apply(ZONE, [c for c in join.changes if c.key.type == "TXT"]).ok
    result = p.apply(ZONE, leave.applicable, leave.guards)
    assert result.refused and not result.applied and "YXRRSET" in result.refused[0][1]
    assert server.query(f"www.{ZONE}.", "A") == ["192.0.2.1"]  # the leaver removed nothing
    conf.sync(p, ZONE, "owner-b", [a("www", "192.0.2.1", "192.0.2.2")])
    conf.sync(p, ZONE, "owner-a", [])
    assert server.query(f"www.{ZONE}.", "A") == ["192.0.2.1", "192.0.2.2"]


def test_every_record_type_round_trips(server: DnsServer, tmp_path: Path) -> None:
    p = make_provider(server, tmp_path)
    records = [
        RecordSet(f"www.{ZONE}", "A", 60, ("192.0.2.1", "192.0.2.2")),
        RecordSet(f"mx.{ZONE}", "A", 60, ("192.0.2.25",)),
        RecordSet(f"sip.{ZONE}", "A", 60, ("192.0.2.26",)),
        RecordSet(f"www.{ZONE}", "AAAA", 60, ("2001:db8::1",)),
        RecordSet(f"alias.{ZONE}", "CNAME", 300, (f"www.{ZONE}",)),
        RecordSet(f"sub.{ZONE}", "NS", 3600, ("ns1.other.test",)),
        RecordSet(f"mail.{ZONE}", "MX", 60, (f"10 mx.{ZONE}.",)),
        RecordSet(f"_sip._tcp.{ZONE}", "SRV", 60, (f"10 60 5060 sip.{ZONE}.",)),
        RecordSet(f"www.{ZONE}", "CAA", 60, ('0 issue "letsencrypt.org"',)),
        RecordSet(f"kuadrant-x-a-www.{ZONE}", "TXT", 60,
                  ("heritage=external-dns,external-dns/owner=c1,external-dns/version=1", "y" * 300)),
    ]
    result = p.apply(ZONE, [Change(Action.CREATE, None, r, r.key) for r in records])
    assert result.ok, (result.refused, result.failed)
    read = p.read(ZONE).by_key()
    for rec in records:
        assert read[rec.key] == rec


def test_a_wrong_secret_is_an_auth_error_without_the_secret(server: DnsServer) -> None:
    wrong = "d3Jvbmcta2V5LWZvci10ZXN0cy1vbmx5LTEyMzQ1Ng=="
    p = Rfc2136Provider(ZONE, DnsPythonClient(server.host, server.port, 5, dns_servers.KEY_NAME,
                                              "hmac-sha256", wrong))
    with pytest.raises(AuthError) as info:
        p.apply(ZONE, [Change(Action.CREATE, None, a("x", "192.0.2.1"), RecordKey(f"x.{ZONE}", "A"))])
    assert wrong not in str(info.value)
    assert server.query(f"x.{ZONE}.", "A") == []


def test_content_the_server_refuses_fails_that_group_only(server: DnsServer, tmp_path: Path) -> None:
    """BIND refuses an MX whose target has no address (check-mx on updates) with REFUSED; the
    key is allowed, so that is the group's failure, not an AuthError for the batch."""
    p = make_provider(server, tmp_path)
    mx = RecordSet(f"mail.{ZONE}", "MX", 60, (f"10 nowhere.{ZONE}.",))
    ok = a("ok", "192.0.2.3")
    result = p.apply(ZONE, [Change(Action.CREATE, None, mx, mx.key), Change(Action.CREATE, None, ok, ok.key)])
    assert [c.key for c in result.applied][-1] == ok.key
    if server.kind == "bind":
        assert [k for k, _ in result.failed] == [mx.key] and "REFUSED" in result.failed[0][1]
    else:  # PowerDNS takes it
        assert result.ok
