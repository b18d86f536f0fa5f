"""gitdns clusters join a zone Kuadrant's dns-operator already serves, change weights, and leave
one by one, on real BIND (rfc2136) and on Route53's API (moto, made to check deletes as Route53
does: tests/e2e/dnsoperator_zone.py).

The zone starts as dns-operator writes it (tests/e2e/dnsoperator_zone.py: an ungrouped simple
host, a loadbalanced host, a grouped owner with ``;``-joined targets, a legacy unversioned owner,
a legacy ``&&`` owner, the active-groups TXT, unowned records and a TXT whose hash is not its
owner's), written with the backends' own clients.  Two gitdns clusters (g1: geo IE, g2: geo US)
then join the simple host, the loadbalanced host (on BIND, where records carry no routing, a
flattened host of their own: dns-operator's tree there is plain CNAMEs gitdns must not touch),
the grouped, legacy and joint hosts; a commit changes the weights; g2 drops its listeners, g1's
Cluster document is removed and ``gitdns prune-owner`` takes its records (g1 is in the
policy's default geo, IE, which a gitdns cluster must serve while one serves the host).

After every pass the zone is read back without gitdns and must be exactly: every record of the
fixture (and the server's own) plus what the gitdns clusters still in the zone want, computed here
from the desired state with ``gitdns.core.builder`` (multi-value records: the union of values;
routed rows and CNAMEs: the same content co-owned), plus one ownership TXT per gitdns record
(its name from the owner's hash, its set identifier and routing the record's, its value naming
the owner, version 1, and for an address record exactly the cluster's own targets).  A record
whose content the expectation leaves as the fixture wrote it must be byte for byte what was
written (the rdata text on BIND; the whole ResourceRecordSet on Route53).  At the end the zone
is the fixture again, byte for byte.

Without ``named`` / moto the cases skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gitdns.adapters.repo import load_repo
from gitdns.core import builder, registry
from gitdns.core.model import DesiredState
from gitdns.core.names import short_hash
from gitdns.core.records import MULTI_VALUE_TYPES, RecordKey, RecordSet
from tests.e2e import dns_servers
from tests.e2e import dnsoperator_zone as dz
from tests.e2e.agent_kit import WorkTree
from tests.e2e.dns_servers import DnsServer

ZONE = dz.ZONE
FLAT = f"flat.{ZONE}"
CLUSTERS = {"g1": ("gitdns-g1-uid", "IE", "192.0.2.1"), "g2": ("gitdns-g2-uid", "US", "192.0.2.2")}


@pytest.fixture(scope="module")
def bind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DnsServer]:
    with dns_servers.bind_server(tmp_path_factory.mktemp("dnsop-bind")) as server:
        yield server


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dz.MotoRoute53]:
    with dz.running_moto(tmp_path_factory.mktemp("dnsop-moto")) as server:
        yield server


def cluster_doc(name: str, hosts: list[str]) -> str:
    ident, geo, address = CLUSTERS[name]
    listeners = "".join(f"\n        - hostname: {h}" for h in hosts) if hosts else " []"
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
            f"spec:\n  id: {ident}\n  geo: {geo}\n  gateways:\n    - name: gw\n      namespace: ingress\n"
            f"      addresses: [{address}]\n      listeners:{listeners}\n")


def policies(lb_host: str, flattened: bool, weight: int) -> str:
    simple = [dz.API, dz.GROUPED_HOST, dz.LEGACY_HOST, dz.JOINT_HOST]
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {{name: simple}}\n"
            f"spec:\n  targetRef: {{hosts: [{', '.join(simple)}]}}\n  strategy: simple\n---\n"
            f"apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {{name: lb}}\n"
            f"spec:\n  targetRef: {{hosts: [{lb_host}]}}\n  strategy: loadbalanced\n"
            f"  flattened: {'true' if flattened else 'false'}\n"
            f"  loadBalancing:\n    weighted: {{defaultWeight: {weight}}}\n    geo: {{defaultGeo: IE}}\n")


@dataclass
class Fleet(WorkTree):
    tmp: Path
    backend: dz.Backend
    env: dict[str, str] = field(default_factory=dict)
    initial: dict[RecordKey, dz.Row] = field(default_factory=dict)
    seen: dict[str, DesiredState] = field(default_factory=dict)  # the revision each cluster last applied

    def __post_init__(self) -> None:
        self.work = self.tmp / "desired"
        self.secrets = self.tmp / "secrets"
        self.work.mkdir()
        self.secrets.mkdir()
        self.lb_host = dz.LB if self.backend.routing else FLAT
        WorkTree.__init__(self, self.work)
        if isinstance(self.backend, dz.BindBackend):
            secret = self.secrets / "tsig.env"
            secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
            provider = (f"type: rfc2136\n    settings: {{server: 127.0.0.1, port: \"{self.backend.server.port}\", "
                        f"tsigKeyName: {dns_servers.KEY_NAME}, timeout: \"5\"}}\n    credentials: {{file: {secret}}}")
            self.fences = ["--rfc2136-servers", f"127.0.0.1:{self.backend.server.port}"]
        else:
            assert isinstance(self.backend, dz.MotoRoute53)
            secret = self.secrets / "aws.env"
            secret.write_text("AWS_ACCESS_KEY_ID=testing\nAWS_SECRET_ACCESS_KEY=testing\n")
            provider = (f"type: route53\n    settings: {{endpoint: \"{self.backend.endpoint}\", "
                        f"waitInsync: \"false\"}}\n    credentials: {{file: {secret}}}")
            self.fences = ["--provider-endpoints", self.backend.endpoint]
            self.env = {"AWS_CA_BUNDLE": str(self.backend.tls.ca_file)}
        self.fences += ["--credentials-dir", str(self.secrets), "--store-dir", str(self.tmp / "store")]
        self.write("zones/example-test.yaml",
                   "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-test}\n"
                   f"spec:\n  domain: {ZONE}\n  provider:\n    {provider}\n")
        self.write("policies/policies.yaml", policies(self.lb_host, not self.backend.routing, 120))
        self.write("clusters/g1.yaml", cluster_doc("g1", [dz.API, self.lb_host, dz.JOINT_HOST, dz.GROUPED_HOST]))
        self.write("clusters/g2.yaml", cluster_doc("g2", [dz.API, self.lb_host, dz.LEGACY_HOST]))
        self.commit("g1 and g2 join the zone dns-operator serves")

    def cli(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(self.env)
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *args], capture_output=True, text=True,
                              timeout=180, check=False, env=env)
        assert done.returncode == 0, f"gitdns {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def apply(self, name: str) -> str:
        self.seen[name] = load_repo(self.work).state
        return self.cli("apply", "--repo", str(self.work), "--cluster", name, *self.fences)

    # --- the expectation ------------------------------------------------------------------
    def expect(self, staying: list[str], step: str) -> None:
        """The zone is the fixture plus what ``staying`` want at the revision each last applied
        (module doc), nothing else."""
        want = {k: row.rec for k, row in self.initial.items()}
        txts: dict[RecordKey, tuple[str, RecordSet]] = {}
        for name in staying:
            state = self.seen[name]
            zone = next(z for z in state.zones if z.domain == ZONE)
            cluster = next(c for c in state.clusters if c.name == name)
            for rec in builder.desired_for_zone(state, cluster, zone):
                held = want.get(rec.key)
                if held is None:
                    want[rec.key] = rec
                elif rec.type in MULTI_VALUE_TYPES and not rec.set_id:
                    assert held.ttl == rec.ttl, (step, held, rec)  # the fixture's TTLs are dns-operator's defaults
                    want[rec.key] = held.with_values(held.values + rec.values)
                else:
                    assert held == rec, f"{step}: the scenario co-owns {rec.key} with other content: {held} / {rec}"
                txt = RecordKey(f"kuadrant-{short_hash(cluster.id, 8)}-{rec.type.lower()}-{rec.name}", "TXT",
                                rec.set_id)
                txts[txt] = (cluster.id, rec)
        rows = self.backend.rows()
        got = set(rows)
        assert got == set(want) | set(txts), (
            f"{step}: missing {sorted(set(want) | set(txts) - got)}, unexpected {sorted(got - set(want) - set(txts))}")
        for key, rec in want.items():
            if key.type == "SOA" and not self.backend.routing:
                continue  # BIND's serial counts the updates
            assert rows[key].rec == rec, f"{step}: {key}\n got  {rows[key].rec}\n want {rec}"
            first = self.initial.get(key)
            if first is not None and first.rec == rec:
                assert rows[key].native == first.native, (
                    f"{step}: {key} rewritten: {first.native} -> {rows[key].native}")
        for key, (owner, data) in txts.items():
            rec = rows[key].rec
            assert (rec.ttl, rec.weight, rec.geo, len(rec.values)) == (data.ttl, data.weight, data.geo, 1), (step, rec)
            labels = registry.decode(rec.values[0])
            assert labels is not None and labels.owner == owner and labels.version == "1" and labels.rev, (step, rec)
            if data.type in ("A", "AAAA"):
                assert labels.targets == data.values, (step, rec, data)


def start(fleet: Fleet) -> None:
    records = [dz.quoted(r) for r in [*dz.dnsoperator_records(fleet.backend.routing), *dz.foreign_records()]]
    fleet.backend.write(records)
    fleet.initial = fleet.backend.rows()
    for rec in records:  # the fixture reads back as written
        assert fleet.initial[rec.key].rec == rec, (fleet.initial[rec.key].rec, rec)


def play(fleet: Fleet) -> None:
    start(fleet)
    fleet.expect([], "the fixture")

    fleet.apply("g1")
    fleet.expect(["g1"], "g1 joined")
    fleet.apply("g2")
    fleet.expect(["g1", "g2"], "g2 joined")
    fleet.apply("g1")
    fleet.expect(["g1", "g2"], "g1 again")

    fleet.write("policies/policies.yaml", policies(fleet.lb_host, not fleet.backend.routing, 60))
    fleet.commit("weights 120 -> 60")
    fleet.apply("g1")
    fleet.expect(["g1", "g2"], "weights changed, g1 applied")
    fleet.apply("g2")
    fleet.expect(["g1", "g2"], "weights changed, g2 applied")

    fleet.write("clusters/g2.yaml", cluster_doc("g2", []))
    fleet.commit("g2 leaves the zone")
    fleet.apply("g2")
    fleet.expect(["g1"], "g2 left")
    fleet.apply("g1")
    fleet.expect(["g1"], "g2 left, g1 applied")

    (fleet.work / "clusters" / "g1.yaml").unlink()
    fleet.commit("g1 removed from git")
    fleet.cli("prune-owner", CLUSTERS["g1"][0], "--zone", ZONE, "--repo", str(fleet.work), "--yes", *fleet.fences)
    fleet.expect([], "g1 pruned")
    fleet.apply("g2")
    fleet.expect([], "g2 applied with nothing to publish")

    final = fleet.backend.rows()
    ids = {short_hash(c[0], 8) for c in CLUSTERS.values()}
    assert not [k for k in final if any(h in k.name for h in ids)], "a gitdns TXT is left"
    soa = not fleet.backend.routing
    assert {k: r.native for k, r in final.items() if not (soa and k.type == "SOA")} == {
        k: r.native for k, r in fleet.initial.items() if not (soa and k.type == "SOA")}


def test_join_leave_on_bind(tmp_path: Path, bind: DnsServer) -> None:
    bind.reset_zone()
    play(Fleet(tmp_path, dz.BindBackend(bind)))


def test_join_leave_on_route53(tmp_path: Path, moto: dz.MotoRoute53) -> None:
    moto.fresh_zone()
    play(Fleet(tmp_path, moto))
