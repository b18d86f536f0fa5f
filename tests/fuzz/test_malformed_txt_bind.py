"""Malformed TXT on a real server (issue 30, item 4): BIND 9 over RFC 2136, TSIG and AXFR.

TXT records no gitdns owner wrote are put into the zone with raw DNS updates, as bytes (cut
short, another version or heritage, huge, no UTF-8, another owner's id under this owner's hash,
a name in upper case); then the rfc2136 provider reads the zone, the registry reader decodes it
and this owner plans and applies twice (a value changed, a record added).  No exception, the
owner's own record and TXT follow git, and every planted TXT is left as it was, byte for byte
(read back by zone transfer); the one where the new record's ownership TXT goes stops that
record with a conflict instead of being overwritten.

Without ``named`` the test skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

from pathlib import Path

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import pytest

from gitdns.core.model import CredentialsRef, ProviderRef, Revision
from gitdns.core.plan.planner import decode_zone, plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import RecordSet
from gitdns.core.registry import decode_entries, txt_name
from gitdns.providers.base import Provider
from gitdns.providers.fences import Fences
from gitdns.providers.rfc2136.provider import from_ref
from tests.e2e import dns_servers
from tests.e2e.dns_servers import DnsServer

ZONE = dns_servers.ZONE
OWNER = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"
OTHER = "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34"
APP, WWW = f"app.{ZONE}", f"www.{ZONE}"

pytestmark = pytest.mark.bind


def _label(owner: str, *more: str, heritage: str = "heritage=external-dns") -> bytes:
    return ",".join([heritage, f"external-dns/owner={owner}", *more, "external-dns/version=1"]).encode()


# name -> the TXT's strings, as bytes on the wire
PLANTED: dict[str, list[bytes]] = {
    txt_name(OWNER, "A", WWW, ZONE): [_label(OWNER)[:40]],  # where www's ownership TXT goes: cut short
    txt_name(OTHER, "A", APP, ZONE): [_label(OTHER, "external-dns/targets=192.0.2.99")[:-3] + b"\xff\xfe"],
    f"kuadrant-a-{APP}": [_label(OWNER).replace(b"version=1", b"version=2") + b"\xc3"],  # no UTF-8 at the end
    txt_name(OTHER, "A", f"legacy.{ZONE}", ZONE): [_label(OTHER, heritage="heritage=kuadrant")],
    f"huge.{ZONE}": [bytes([65 + i % 26]) * 255 for i in range(40)],  # 10 KiB in 40 strings
    f"bytes.{ZONE}": [bytes(range(256))[:255], b"\x80\x81\xed\xa0\x80", b""],
}


def _provider(server: DnsServer, tmp: Path) -> Provider:
    secret = tmp / "tsig.env"
    secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
    ref = ProviderRef("rfc2136", (("port", str(server.port)), ("server", server.host), ("timeout", "5"),
                                  ("tsigKeyName", dns_servers.KEY_NAME)), CredentialsRef(file=str(secret)))
    fences = Fences.parse(rfc2136_servers=f"{server.host}:{server.port}", credentials_dir=str(tmp))
    return from_ref(ZONE, ref, tmp, fences=fences)


def _txt_wire(server: DnsServer) -> dict[str, list[tuple[bytes, ...]]]:
    zone = server.transfer()
    return {str(name).rstrip(".").lower(): sorted(tuple(rd.strings) for rd in rds)
            for name, rds in zone.iterate_rdatasets() if rds.rdtype == dns.rdatatype.TXT}


def _cycle(provider: Provider, records: tuple[RecordSet, ...], when: int) -> list[str]:
    """Read, decode, plan and apply as an agent's zone pass does; the plan's conflict reasons."""
    snapshot = provider.read(ZONE)
    decode_zone(snapshot)
    for record in snapshot.records:
        decode_entries(record)
    done = plan(Intent(OWNER, records, Revision(when, "0" * 40)), snapshot,
                PlanPolicy(zone=ZONE, known_owners=(OWNER, OTHER)))
    assert provider.apply(ZONE, done.changes).ok
    return [c.reason for c in done.conflicts]


def test_malformed_txt_on_bind_are_read_and_left_alone(tmp_path: Path) -> None:
    with dns_servers.bind_server(tmp_path / "bind") as server:
        provider = _provider(server, tmp_path)
        assert _cycle(provider, (RecordSet(APP, "A", 60, ("192.0.2.10",)),), 1_700_000_000) == []
        update = server.new_update()
        for name, strings in PLANTED.items():
            rdata = dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.TXT,
                                        b"".join(bytes([len(s)]) + s for s in strings), 0,
                                        sum(1 + len(s) for s in strings))
            update.add(dns.name.from_text(name + "."), 300, rdata)
        assert server.update(update) == "NOERROR"
        planted = {n: v for n, v in _txt_wire(server).items() if n in PLANTED}
        assert len(planted) == len(PLANTED)
        own = txt_name(OWNER, "A", APP, ZONE)
        records = (RecordSet(APP, "A", 60, ("192.0.2.11",)), RecordSet(WWW, "A", 60, ("192.0.2.12",)))
        for when in (1_700_000_100, 1_700_000_200):
            assert _cycle(provider, records, when) == ["ForeignRecordInTheWay"]  # www: its TXT's name is taken
        assert server.query(APP + ".", "A") == ["192.0.2.11"]
        assert server.query(WWW + ".", "A") == []
        after = _txt_wire(server)
        assert {n: after.get(n) for n in planted} == planted
        assert any(b"external-dns/owner=" + OWNER.encode() in b"".join(s) for s in after[own])
