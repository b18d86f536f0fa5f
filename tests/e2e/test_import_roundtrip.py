"""`gitdns import` round trips on real servers: a zone of every record type the providers hold,
imported from a real BIND (AXFR, rfc2136) and from moto Route53 through the real CLI, committed,
and `gitdns plan` changes nothing; `gitdns adopt --all` then takes the records over and the plan
is clean.  The same zone exported as an RFC 1035 master file imports to the same YAML.

Also in the zone, and never imported as data: a record another owner manages (its Kuadrant
ownership TXT lists it as managed by that owner), types gitdns does not hold (PTR, SSHFP:
reported by name), a TTL of 0 (reported), and on Route53 a weighted row (reported).

The full size (10,000 records) runs the import and the zero-change plan; the adopt and the clean
plan after it run on a smaller zone (every adopted record is one ownership TXT written).
Without ``named`` or moto the cases skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.update
import pytest
from ruamel.yaml import YAML

from gitdns.core.records import RecordSet
from gitdns.core.registry import OwnerLabels, ownership_record
from tests.e2e import dns_servers
from tests.e2e import dnsoperator_zone as dz
from tests.e2e.agent_kit import WorkTree
from tests.e2e.dns_servers import DnsServer

ZONE = dns_servers.ZONE
FULL = 10_000
SMALL = 300
FOREIGN_OWNER = "dnsop-7f3c"  # a Kuadrant dns-operator owner id
CLUSTER = ("c1", "c1-cluster-uid")


def zone_records(n: int, routing: bool = False) -> tuple[list[RecordSet], list[RecordSet], list[tuple[str, str]]]:
    """(importable records, records that must not be imported, (name, type) of unsupported
    types to put in the zone separately).  Every type a RecordSet holds: A, AAAA, CNAME, TXT,
    MX, SRV, CAA and NS (a delegation below the apex)."""
    out: list[RecordSet] = []
    for i in range(n):
        kind = i % 10
        host = f"h{i}.{ZONE}"
        ttl = (60, 300, 3600, 86400)[i % 4]
        if kind <= 3:
            values = tuple(f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{(i + k) & 255}" for k in range(1 + i % 3))
            out.append(RecordSet(host, "A", ttl, values))
        elif kind == 4:
            out.append(RecordSet(host, "AAAA", ttl, (f"2001:db8::{i:x}",)))
        elif kind == 5:
            out.append(RecordSet(f"alias{i}.{ZONE}", "CNAME", ttl, (f"h{i - 5}.{ZONE}",)))
        elif kind == 6:
            text = f"text {i} " + ("x" * 300 if i % 20 == 6 else 'with "quotes" and spaces')
            out.append(RecordSet(host, "TXT", ttl, (text, f"v=spf1 ip4:10.0.0.{i & 255} -all")))
        elif kind == 7:
            out.append(RecordSet(host, "MX", ttl, (f"10 mx{i}.example.net.", f"20 mx{i}b.example.net.")))
        elif kind == 8:
            out.append(RecordSet(f"_svc{i}._tcp.{ZONE}", "SRV", ttl, (f"10 5 {1000 + i % 50000} h{i}.{ZONE}.",)))
        else:
            out.append(RecordSet(host, "CAA", ttl, ('0 issue "letsencrypt.org"',)))
        if i % 1000 == 0:
            out.append(RecordSet(f"sub{i}.{ZONE}", "NS", 3600, ("ns1.example.net", "ns2.example.net")))
    out.append(RecordSet(f"*.wild.{ZONE}", "A", 300, ("192.0.2.80",)))
    managed = RecordSet(f"owned.{ZONE}", "A", 60, ("192.0.2.99",))
    txt, _ = ownership_record(managed, OwnerLabels(owner=FOREIGN_OWNER, targets=managed.values), ZONE)
    refused = [managed, txt, RecordSet(f"zero.{ZONE}", "A", 0, ("192.0.2.98",))]
    if routing:
        refused.append(RecordSet(f"weighted.{ZONE}", "A", 60, ("192.0.2.97",), set_id="w1", weight=10))
    unsupported = [(f"ptr.{ZONE}", "PTR"), (f"host.{ZONE}", "SSHFP")]
    return out, refused, unsupported


UNSUPPORTED_RDATA = {"PTR": "target.example.net.", "SSHFP": "1 1 " + "ab" * 20}


def _rrset(rec: RecordSet) -> dns.rrset.RRset:
    from gitdns.providers.rfc2136.native import to_native

    return to_native(rec)


def reset(server: DnsServer) -> None:
    """The zone back to what the server held at start, in updates of 500 deletions (one update
    of 10,000 would not fit in a DNS message)."""
    extra = sorted(server.rrsets() - server.pristine)
    for start in range(0, len(extra), 500):
        message = server.new_update()
        for name, rdtype in extra[start:start + 500]:
            message.delete(name, rdtype)
        assert server.update(message) == "NOERROR"


def fill_bind(server: DnsServer, records: list[RecordSet], unsupported: list[tuple[str, str]]) -> None:
    rrsets = [_rrset(r) for r in records]
    rrsets += [dns.rrset.from_rdata_list(dns.name.from_text(name + "."), 300, [
        dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(t), UNSUPPORTED_RDATA[t])])
        for name, t in unsupported]
    for start in range(0, len(rrsets), 500):
        message = server.new_update()
        for rrset in rrsets[start:start + 500]:
            message.add(rrset.name, rrset)
        assert server.update(message) == "NOERROR"


def fill_route53(moto: dz.MotoRoute53, records: list[RecordSet], unsupported: list[tuple[str, str]]) -> None:
    from gitdns.providers.route53.batch import to_native

    natives = [to_native(r) for r in records]
    natives += [{"Name": f"{name}.", "Type": t, "TTL": 300, "ResourceRecords": [{"Value": UNSUPPORTED_RDATA[t]}]}
                for name, t in unsupported]
    client = moto.client()
    for start in range(0, len(natives), 400):
        client.change_resource_record_sets(HostedZoneId=moto.zone_id, ChangeBatch={"Changes": [
            {"Action": "CREATE", "ResourceRecordSet": n} for n in natives[start:start + 400]]})


@pytest.fixture(scope="module")
def bind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DnsServer]:
    with dns_servers.bind_server(tmp_path_factory.mktemp("import-bind")) as server:
        yield server


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dz.MotoRoute53]:
    with dz.running_moto(tmp_path_factory.mktemp("import-moto")) as server:
        yield server


class Repo(WorkTree):
    """A desired-state repository with one Zone on the server under test and one Cluster."""

    def __init__(self, tmp: Path, provider: str, fences: list[str], env: dict[str, str]) -> None:
        self.work, self.secrets = tmp / "desired", tmp / "secrets"
        self.work.mkdir()
        WorkTree.__init__(self, self.work)
        self.fences = [*fences, "--store-dir", str(tmp / "store")]
        self.env = env
        self.write("zones/example-test.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: Zone\n"
                   f"metadata: {{name: example-test}}\nspec:\n  domain: {ZONE}\n  provider:\n    {provider}\n"
                   "  safety: {maxChangeFraction: 1}\n")
        name, ident = CLUSTER
        self.write(f"clusters/{name}.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: Cluster\n"
                   f"metadata: {{name: {name}}}\nspec:\n  id: {ident}\n  gateways: []\n")
        self.commit("the zone and a cluster")

    def cli(self, *args: str, code: int | tuple[int, ...] = 0) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(self.env)
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *args], capture_output=True, text=True,
                              timeout=600, check=False, env=env)
        codes = code if isinstance(code, tuple) else (code,)
        assert done.returncode in codes, (f"gitdns {' '.join(args)}: exit {done.returncode}\n"
                                          f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def plan(self) -> dict[str, Any]:
        done = self.cli("plan", "--repo", str(self.work), "--cluster", CLUSTER[0], "--format", "json",
                        *self.fences, code=(0, 5))
        plans = json.loads(done.stdout)["plans"]
        assert len(plans) == 1
        return dict(plans[0])


def bind_repo(tmp: Path, server: DnsServer) -> Repo:
    (tmp / "secrets").mkdir()
    secret = tmp / "secrets" / "tsig.env"
    secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
    provider = (f"type: rfc2136\n    settings: {{server: 127.0.0.1, port: \"{server.port}\", "
                f"tsigKeyName: {dns_servers.KEY_NAME}, timeout: \"20\"}}\n    credentials: {{file: {secret}}}")
    return Repo(tmp, provider, ["--rfc2136-servers", f"127.0.0.1:{server.port}",
                                "--credentials-dir", str(tmp / "secrets")], {})


def route53_repo(tmp: Path, moto: dz.MotoRoute53) -> Repo:
    (tmp / "secrets").mkdir()
    secret = tmp / "secrets" / "aws.env"
    secret.write_text("AWS_ACCESS_KEY_ID=testing\nAWS_SECRET_ACCESS_KEY=testing\n")
    provider = (f"type: route53\n    settings: {{endpoint: \"{moto.endpoint}\", waitInsync: \"false\"}}\n"
                f"    credentials: {{file: {secret}}}")
    return Repo(tmp, provider, ["--provider-endpoints", moto.endpoint, "--credentials-dir", str(tmp / "secrets")],
                {"AWS_CA_BUNDLE": str(moto.tls.ca_file)})


def imported_records(path: Path) -> dict[tuple[str, str], tuple[int, tuple[str, ...]]]:
    out: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
    for doc in YAML(typ="safe").load_all(path.read_text()):
        for rec in doc["spec"]["records"]:
            name = ZONE if rec["name"] == "@" else f"{rec['name']}.{ZONE}"
            out[(name, rec["type"])] = (rec["ttl"], tuple(rec["values"]))
    return out


def round_trip(repo: Repo, records: list[RecordSet], routing: bool, adopt: bool) -> None:
    out = repo.work / "records" / "example-test.yaml"
    done = repo.cli("import", "example-test", "--from", "provider", "--repo", str(repo.work), "--out", str(out),
                    *repo.fences)
    report = done.stderr
    assert f"imported {len(records)} record set(s)" in report, report[-2000:]
    assert f"managed by {FOREIGN_OWNER}: 1 record set(s)" in report, report
    assert f"ptr.{ZONE} PTR: record type PTR is not supported" in report
    assert f"host.{ZONE} SSHFP: record type SSHFP is not supported" in report
    assert f"zero.{ZONE} A: TTL 0 is outside" in report
    if routing:
        assert f"weighted.{ZONE} A [w1]: a weighted row" in report
    got = imported_records(out)
    assert got == {(r.name, r.type): (r.ttl, r.values) for r in records}
    assert f"owned.{ZONE}" not in out.read_text() and "heritage=" not in out.read_text()
    repo.cli("validate", str(repo.work))
    repo.commit("import the zone")

    plan = repo.plan()
    assert plan["summary"] == {"create": 0, "update": 0, "delete": 0}, plan["summary"]
    assert plan["changes"] == [], plan["changes"][:5]
    # what is in the way is each imported record without its ownership record, and nothing else
    assert {c["reason"] for c in plan["conflicts"]} <= {"ForeignRecordInTheWay"}
    assert len(plan["conflicts"]) == len(records)
    if not adopt:
        return
    repo.cli("adopt", "--all", "--zone", "example-test", "--cluster", CLUSTER[0], "--repo", str(repo.work),
             *repo.fences)
    plan = repo.plan()
    assert plan["summary"] == {"create": 0, "update": 0, "delete": 0}, plan["summary"]
    assert plan["conflicts"] == [], plan["conflicts"][:5]


@pytest.mark.slow
@pytest.mark.parametrize("size", [SMALL, FULL])
def test_import_round_trip_on_bind(tmp_path: Path, bind: DnsServer, size: int) -> None:
    reset(bind)
    records, refused, unsupported = zone_records(size)
    fill_bind(bind, records + refused, unsupported)
    served = [*records, RecordSet(f"ns1.{ZONE}", "A", 300, ("127.0.0.1",))]  # the server's own, from its start
    round_trip(bind_repo(tmp_path, bind), served, routing=False, adopt=size == SMALL)


@pytest.mark.slow
@pytest.mark.parametrize("size", [SMALL, FULL])
def test_import_round_trip_on_route53(tmp_path: Path, moto: dz.MotoRoute53, size: int) -> None:
    moto.fresh_zone()
    records, refused, unsupported = zone_records(size, routing=True)
    fill_route53(moto, records + refused, unsupported)
    round_trip(route53_repo(tmp_path, moto), records, routing=True, adopt=size == SMALL)


def test_a_master_file_imports_as_its_server_does(tmp_path: Path, bind: DnsServer) -> None:
    """The zone BIND serves, written as a master file, imports to the same YAML as from BIND."""
    reset(bind)
    records, refused, unsupported = zone_records(200)
    fill_bind(bind, records + refused, unsupported)
    repo = bind_repo(tmp_path, bind)
    from_server = repo.work / "from-server.yaml"
    repo.cli("import", "example-test", "--from", "provider", "--repo", str(repo.work), "--out", str(from_server),
             *repo.fences)
    server_text = from_server.read_text()
    master = tmp_path / "db.example.test"
    master.write_text(bind.transfer().to_text())
    # in the first import's place (it is replaced, so not checked against): the same YAML
    repo.cli("import", "example-test", "--from", str(master), "--repo", str(repo.work), "--out", str(from_server),
             "--force")
    assert from_server.read_text() == server_text
    # in a second file beside it: every record is in the repository already, none is written twice
    from_file = repo.work / "from-file.yaml"
    done = repo.cli("import", "example-test", "--from", str(master), "--repo", str(repo.work), "--out",
                    str(from_file))
    assert "imported 0 record set(s)" in done.stderr and "into no file" in done.stderr and not from_file.exists()
    assert f"already in the repository's RecordSets: {len(records) + 1} record set(s)" in done.stderr
    # no overwrite without --force; nothing changed by the refusal
    before = from_server.read_text()
    done = repo.cli("import", ZONE, "--from", str(master), "--out", str(from_server), code=1)
    assert "exists; nothing written" in done.stderr and from_server.read_text() == before
