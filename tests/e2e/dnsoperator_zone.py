"""A zone as Kuadrant's dns-operator writes it, on real BIND (RFC 2136) and on Route53's API (moto).

The fixture is built from dns-operator's own unit-test literals, the ones
tests/core/test_kuadrant_compat.py copies (github.com/Kuadrant/dns-operator commit
57b9db50acedff236622b5529e4e8f1c515e4ec6), and written with the backends' own clients
(dnspython UPDATE for BIND, boto3 ``ChangeResourceRecordSets`` for Route53), never with gitdns's
writer:

- ``api``: an ungrouped simple host, owner ``owner1`` (txt_test.go TestGenerateTXT's value),
  the addresses of endpoints_test.go "Should generate endpoint" (127.0.0.1, 127.0.0.2);
- ``lb``: a loadbalanced host of endpoints_test.go "With default geo" (cluster id fbf71c44…,
  gateway TestName/TestNamespace: target ``2q5hyv-a8xcra.klb.lb``, geo IE, weight 120, TTLs
  60/300); on Route53 with set identifiers, weights and geo, on BIND as plain rrsets (one
  ``klb`` CNAME, no routing);
- ``grouped``: a grouped owner with ``;``-joined targets (inmemory_test.go "real-world
  example", owner ``abc12345``, group ``group1``), and the active-groups TXT
  (shared_test.go "generates valid record with one group": ``"version=1;groups=group1"``, TTL 60);
- ``legacy``: an unversioned owner (txt_test.go EP6: ``"heritage=external-dns,external-dns/owner=owner1"``);
- ``joint``: a legacy TXT naming two owners with ``&&`` (``owner=o1&&o2``);
- ``foo`` CNAME and ``qux`` TXT ``"random"``: unowned (txt_test.go EP1, EP3);
- ``tar`` CNAME with a TXT whose hash is not its owner's (txt_test.go EP10, ``b1e3677c`` for owner2).

An ownership TXT gets TTL 300: dns-operator gives it none, so the provider's default applies
(external-dns's 300).

`Backend` reads a zone back as rows, each with its native form (the rdata text on BIND, the
whole ``ResourceRecordSet`` on Route53) so that "untouched" means byte for byte.

moto (5.2) is not Route53 where it matters here: a DELETE with a set identifier removes every
rrset of the zone with that identifier, whatever its name and type (so deleting one ``IE`` geo
row deletes every host's ``IE`` rows, foreign ones included), a DELETE of a plain rrset removes
every rrset of its name and type (set identifiers included) without comparing values, and a
CREATE of an existing rrset is accepted.  `serve_moto` (``python -m tests.e2e.dnsoperator_zone
moto ...``) runs moto with ``ChangeResourceRecordSets`` as Route53 documents it: the batch is
checked whole before anything is written, a DELETE must name an existing rrset by name, type and
set identifier with its exact TTL, values and routing, a CREATE must not exist
(``InvalidChangeBatch`` otherwise), an UPSERT replaces by name, type and set identifier.
"""

from __future__ import annotations

import secrets
import ssl
import sys
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.update

from gitdns.core.names import short_hash
from gitdns.core.records import RecordKey, RecordSet
from tests.e2e import dns_servers
from tests.e2e.dns_servers import DnsServer
from tests.providers.moto_server import MotoServer

ZONE = dns_servers.ZONE  # example.test
COMMIT = "57b9db50acedff236622b5529e4e8f1c515e4ec6"
TXT_TTL = 300  # dns-operator writes no TTL on its TXT: the provider's default
H = "heritage=external-dns,external-dns/"

# --- the literals (tests/core/test_kuadrant_compat.py cites each) -----------------------------
GENERATED = f'"{H}owner=owner1,{H}version=1"'  # txt_test.go TestGenerateTXT
GROUPED = (f'"{H}owner=abc12345,{H}targets=192.168.1.1;192.168.1.2;192.168.1.3,'
           f'{H}group=group1,{H}version=1"')  # inmemory_test.go "real-world example"
LEGACY = f'"{H}owner=owner1"'  # txt_test.go testTXTRegistryRecordsPrefixed EP6
JOINT = f'"{H}owner=o1&&o2"'  # legacy TXT of two owners (registry.go SplitLabels)
BAD_HASH = f'"{H}owner=owner2,{H}version=1,{H}resource=ingress/default/my-ingress"'  # EP10
ACTIVE_GROUPS = '"version=1;groups=group1"'  # shared_test.go "generates valid record with one group"
IP1, IP2 = "127.0.0.1", "127.0.0.2"  # pkg/builder/suite_test.go
DNSOP_ID, DNSOP_TARGET_HASH = "fbf71c44-6b37-4962-ace6-801912e769be", "a8xcra"  # endpoints_test.go
OWNER1_HASH = "2tqs20a7"  # name_mapper_test.go TestToTXTName: owner1
ABC_HASH = short_hash("abc12345", 8)


def _n(label: str) -> str:
    return f"{label}.{ZONE}" if label else ZONE


API, LB, GROUPED_HOST, LEGACY_HOST, JOINT_HOST = _n("api"), _n("lb"), _n("grouped"), _n("legacy"), _n("joint")
KLB = f"klb.{LB}"
LB_TARGET = f"{short_hash(DNSOP_ID, 6)}-{DNSOP_TARGET_HASH}.{KLB}"  # 2q5hyv-a8xcra.klb.lb.example.test
LB_GEO = f"ie.{KLB}"


def _txt(owner_hash: str | None, rtype: str, name: str) -> str:
    middle = f"{owner_hash}-" if owner_hash else ""
    return f"kuadrant-{middle}{rtype.lower()}-{name}"


def _with_txt(data: RecordSet, value: str, owner_hash: str | None = OWNER1_HASH) -> list[RecordSet]:
    """A dns-operator record and its TXT (same set identifier and routing: generateTXTRecord)."""
    txt = RecordSet(_txt(owner_hash, data.type, data.name), "TXT", TXT_TTL, (value,), data.set_id,
                    data.weight, data.geo)
    return [data, txt]


def dnsoperator_records(routing: bool) -> list[RecordSet]:
    """Every record of the fixture that a dns-operator owner holds (data and TXT); ``routing``:
    the loadbalanced host with set identifiers, weights and geo (Route53), else plain rrsets."""
    out = [*_with_txt(RecordSet(API, "A", 60, (IP1, IP2)), GENERATED),
           *_with_txt(RecordSet(GROUPED_HOST, "A", 60, ("192.168.1.1", "192.168.1.2", "192.168.1.3")),
                      GROUPED, ABC_HASH),
           *_with_txt(RecordSet(LEGACY_HOST, "A", 60, ("127.0.0.3",)), LEGACY, None),
           *_with_txt(RecordSet(JOINT_HOST, "A", 60, ("127.0.0.4", "127.0.0.5")), JOINT, None),
           *_with_txt(RecordSet(LB_TARGET, "A", 60, (IP1, IP2)), GENERATED),
           *_with_txt(RecordSet(LB, "CNAME", 300, (KLB,)), GENERATED)]
    if routing:
        out += [*_with_txt(RecordSet(LB_GEO, "CNAME", 60, (LB_TARGET,), set_id=LB_TARGET, weight=120), GENERATED),
                *_with_txt(RecordSet(KLB, "CNAME", 300, (LB_GEO,), set_id="IE", geo="IE"), GENERATED),
                *_with_txt(RecordSet(KLB, "CNAME", 300, (LB_GEO,), set_id="default", geo="*"), GENERATED)]
    else:
        out += [*_with_txt(RecordSet(LB_GEO, "CNAME", 60, (LB_TARGET,)), GENERATED),
                *_with_txt(RecordSet(KLB, "CNAME", 300, (LB_GEO,)), GENERATED)]
    return out


def foreign_records() -> list[RecordSet]:
    """Records no owner gitdns reads holds: never to be changed."""
    tar = _n("tar")
    return [
        RecordSet(_n("foo"), "CNAME", 300, ("foo.loadbalancer.com",)),  # EP1: no TXT
        RecordSet(_n("qux"), "TXT", 300, ('"random"',)),  # EP3
        RecordSet(tar, "CNAME", 300, ("tar.loadbalancer.com",)),
        RecordSet(_txt("b1e3677c", "CNAME", tar), "TXT", TXT_TTL, (BAD_HASH,)),  # hash not owner2's
        RecordSet(f"kuadrant-active-groups.{ZONE}", "TXT", 60, (ACTIVE_GROUPS,)),
    ]


# --- rows as read back ------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One rrset as read: its content (CNAME targets without the final dot, TXT values as their
    zone-file text with quotes) and its native form (what the server returned, for byte checks)."""

    rec: RecordSet
    native: Any = field(compare=False)

    @property
    def key(self) -> RecordKey:
        return self.rec.key


def geo_native(code: str) -> dict[str, str]:
    """dns-operator's geo code as Route53's GeoLocation (its aws provider: GEO-XX a continent)."""
    if code == "*":
        return {"CountryCode": "*"}
    if code.startswith("GEO-"):
        return {"ContinentCode": code[4:]}
    return {"CountryCode": code}


def geo_code(location: Mapping[str, str]) -> str:
    if "ContinentCode" in location:
        return "GEO-" + location["ContinentCode"]
    return location.get("CountryCode", "*")


class Backend:
    name = ""
    routing = False

    def write(self, records: Iterable[RecordSet]) -> None:
        raise NotImplementedError

    def rows(self) -> dict[RecordKey, Row]:
        raise NotImplementedError


class BindBackend(Backend):
    """BIND over RFC 2136 (tests/e2e/dns_servers.py), written with plain dnspython UPDATEs."""

    name = "bind"
    routing = False

    def __init__(self, server: DnsServer) -> None:
        self.server = server

    def write(self, records: Iterable[RecordSet]) -> None:
        message = self.server.new_update()
        for rec in records:
            assert not rec.set_id, f"BIND has no set identifiers: {rec}"
            rdtype = dns.rdatatype.from_text(rec.type)
            for value in rec.values:
                text = value + "." if rec.type == "CNAME" else value
                rdata = dns.rdata.from_text(dns.rdataclass.IN, rdtype, text)
                message.add(dns.name.from_text(rec.name), rec.ttl, rdata)
        rcode = self.server.update(message)
        assert rcode == "NOERROR", f"writing the dns-operator fixture to BIND: {rcode}"

    def rows(self) -> dict[RecordKey, Row]:
        out: dict[RecordKey, Row] = {}
        for name, rdataset in self.server.transfer().iterate_rdatasets():
            rtype = dns.rdatatype.to_text(rdataset.rdtype)
            texts = tuple(sorted(rd.to_text() for rd in rdataset))
            values = tuple(t.rstrip(".") for t in texts) if rtype == "CNAME" else texts
            rec = RecordSet(str(name).rstrip(".").lower(), rtype, rdataset.ttl, values)
            out[rec.key] = Row(rec, (rdataset.ttl, texts))
        return out


# --- Route53 through moto ---------------------------------------------------------------------



class ToolMissing(Exception):
    pass


def _change_resource_record_sets(self: Any, zoneid: str, change_list: list[dict[str, Any]]) -> None:
    """Route53's ChangeResourceRecordSets: checked whole, then applied (see the module doc)."""
    import copy

    from moto.route53.exceptions import Route53ClientError
    from moto.route53.models import RecordSet as MotoRecordSet

    def refuse(message: str) -> Exception:
        return Route53ClientError("InvalidChangeBatch", message)

    def ident(rrset: Mapping[str, Any]) -> tuple[str, str, str]:
        return (str(rrset["Name"]).rstrip(".").lower(), str(rrset["Type"]), str(rrset.get("SetIdentifier") or ""))

    def content(rrset: Mapping[str, Any]) -> tuple[Any, ...]:
        values = sorted(v["Value"] if isinstance(v, dict) else v for v in rrset.get("ResourceRecords") or [])
        return (int(rrset.get("TTL", 0)), values, rrset.get("Weight"), rrset.get("GeoLocation") or None,
                rrset.get("AliasTarget"))

    def stored(rec: MotoRecordSet) -> dict[str, Any]:
        return {"Name": rec.name, "Type": rec.type, "TTL": rec.ttl, "ResourceRecords": list(rec.records),
                "SetIdentifier": rec.set_identifier, "Weight": rec.weight, "GeoLocation": rec.geo_location,
                "AliasTarget": rec.alias_target}

    zone = self.get_hosted_zone(zoneid)
    current: dict[tuple[str, str, str], Any] = {ident(stored(r)): r for r in zone.rrsets}
    for change in change_list:
        action, rrset = change["Action"], change["ResourceRecordSet"]
        key = ident(rrset)
        if not key[0].endswith(zone.name.rstrip(".").lower()):
            raise refuse(f"RRSet with DNS name {rrset['Name']} is not permitted in zone {zone.name}")
        if action == "CREATE":
            if key in current:
                raise refuse(f"Tried to create resource record set [name='{key[0]}.', type='{key[1]}', "
                             f"set-identifier='{key[2]}'] but it already exists")
            current[key] = None
        elif action == "DELETE":
            held = current.get(key)
            if held is None:
                raise refuse(f"Tried to delete resource record set [name='{key[0]}.', type='{key[1]}', "
                             f"set-identifier='{key[2]}'] but it was not found")
            if content(stored(held)) != content(rrset):
                raise refuse(f"Tried to delete resource record set [name='{key[0]}.', type='{key[1]}', "
                             f"set-identifier='{key[2]}'] but the values provided do not match the current values")
            del current[key]
        elif action == "UPSERT":
            current[key] = None
        else:
            raise refuse(f"unknown action {action}")
    for change in change_list:
        action, rrset = change["Action"], copy.deepcopy(change["ResourceRecordSet"])
        key = ident(rrset)
        zone.rrsets = [r for r in zone.rrsets if ident(stored(r)) != key]
        if action in ("CREATE", "UPSERT"):
            if not rrset["Name"].endswith("."):
                rrset["Name"] += "."
            if "ResourceRecords" in rrset:
                rrset["ResourceRecords"] = [v["Value"] for v in rrset["ResourceRecords"]]
            zone.rrsets.append(MotoRecordSet(rrset))  # type: ignore[abstract]
        zone.rr_changes.append(copy.deepcopy(change))


def serve_moto(argv: list[str]) -> None:
    """moto_server with Route53's ChangeResourceRecordSets semantics (module doc)."""
    from moto.route53.models import Route53Backend
    from moto.server import main

    Route53Backend.change_resource_record_sets = _change_resource_record_sets  # type: ignore[method-assign]
    main(argv)


class MotoRoute53(Backend):
    """moto on 127.0.0.1 over TLS (the test CA of tests/providers/tls.py), Route53 made faithful."""

    name = "route53"
    routing = True

    def __init__(self, directory: Path) -> None:
        root = Path(__file__).resolve().parents[2]
        self.server = MotoServer(directory, [sys.executable, "-m", "tests.e2e.dnsoperator_zone", "moto"], cwd=root,
                                 pythonpath=root)
        self.tls, self.port, self.proc = self.server.tls, self.server.port, self.server.proc
        self.zone_id = ""

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def client(self) -> Any:
        return self.server.client()

    def fresh_zone(self) -> None:
        """Forget everything, and make the hosted zone ``example.test`` anew."""
        context = ssl.create_default_context(cafile=str(self.tls.ca_file))
        request = urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10, context=context):
            pass
        made = self.client().create_hosted_zone(Name=ZONE + ".", CallerReference=secrets.token_hex(8))
        self.zone_id = str(made["HostedZone"]["Id"]).rsplit("/", 1)[-1]

    def write(self, records: Iterable[RecordSet]) -> None:
        changes = []
        for rec in records:
            rrset: dict[str, Any] = {"Name": rec.name, "Type": rec.type, "TTL": rec.ttl,
                                     "ResourceRecords": [{"Value": v} for v in rec.values]}
            if rec.set_id:
                rrset["SetIdentifier"] = rec.set_id
            if rec.weight is not None:
                rrset["Weight"] = rec.weight
            if rec.geo is not None:
                rrset["GeoLocation"] = geo_native(rec.geo)
            changes.append({"Action": "CREATE", "ResourceRecordSet": rrset})
        self.client().change_resource_record_sets(HostedZoneId=self.zone_id, ChangeBatch={"Changes": changes})

    def rows(self) -> dict[RecordKey, Row]:
        out: dict[RecordKey, Row] = {}
        pages = self.client().get_paginator("list_resource_record_sets").paginate(HostedZoneId=self.zone_id)
        for page in pages:
            for rrset in page["ResourceRecordSets"]:
                values = tuple(r["Value"] for r in rrset.get("ResourceRecords", []))
                if rrset["Type"] == "CNAME":
                    values = tuple(v.rstrip(".") for v in values)
                geo = rrset.get("GeoLocation")
                rec = RecordSet(str(rrset["Name"]).rstrip(".").lower(), str(rrset["Type"]), int(rrset["TTL"]), values,
                                str(rrset.get("SetIdentifier", "")), rrset.get("Weight"),
                                geo_code(geo) if geo else None)
                assert rec.key not in out, f"two rrsets {rec.key} in the hosted zone"
                out[rec.key] = Row(rec, rrset)
        return out

    def stop(self) -> None:
        self.server.stop()



@contextmanager
def running_moto(directory: Path) -> Iterator[MotoRoute53]:
    """A `MotoRoute53` for a test module's fixture: a missing moto fails under CI=true (else skips)."""
    try:
        server = MotoRoute53(directory)
    except ToolMissing as exc:
        dns_servers.require(exc)
        raise
    try:
        yield server
    finally:
        server.stop()

def quoted(rec: RecordSet) -> RecordSet:
    """A TXT value as the zone-file text both backends return (one quoted string)."""
    if rec.type != "TXT":
        return rec
    return replace(rec, values=tuple(v if v.startswith('"') else f'"{v}"' for v in rec.values))




if __name__ == "__main__":
    if sys.argv[1:2] == ["moto"]:
        serve_moto(sys.argv[2:])
    else:
        raise SystemExit("usage: python -m tests.e2e.dnsoperator_zone moto [moto_server arguments]")
