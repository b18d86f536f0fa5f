"""Four clusters share a simple host, then leave its zone one by one: after every step the zone
holds exactly what the remaining clusters want, and nothing of a cluster that left — neither
its address, nor its ownership TXT, nor its heartbeat.

Played through the real CLI (`gitdns apply`, and `gitdns agent --once` as an agent that keeps
no state between runs and publishes no status), on the `local` record store and on a real BIND
(rfc2136, tests/e2e/dns_servers.py).  The zone is read back without gitdns: the store file as
docs/providers.md documents it, or BIND by zone transfer.

The steps: all four join; c2 drops its listener there (it keeps a host in another zone) and an
unrelated commit follows, so the previous commit no longer names it in the zone either; c3
drops its listener too; c4's Cluster document is removed and ``gitdns prune-owner`` takes its
records out (on the `local` store the rendered views are fresh at once); c1 leaves last and the
zone is empty again.

Without ``named`` the BIND cases skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dns.rdatatype
import pytest

from gitdns.adapters.zonefile import write_views
from gitdns.core.names import short_hash
from gitdns.providers.local import LocalProvider
from tests.e2e import dns_servers
from tests.e2e.agent_kit import WorkTree
from tests.e2e.dns_servers import DnsServer

ZONE = dns_servers.ZONE  # example.test: BIND's zone, and the local store's under test
OTHER = "other.test"  # c2 keeps a host here (local store) while it leaves ZONE
HOST = f"www.{ZONE}"
CLUSTERS = {f"c{i}": (f"cluster-{i}-uid", f"192.0.2.{i}") for i in range(1, 5)}
OWNER_RE = re.compile(r"external-dns/owner=([^,\"]+)")
BEAT_RE = re.compile(r"owner=([^,\"]+),time=")


@pytest.fixture(scope="module")
def bind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DnsServer]:
    with dns_servers.bind_server(tmp_path_factory.mktemp("leave-bind")) as server:
        yield server


def zone_doc(store: str, bind: DnsServer | None, secret: Path | None) -> str:
    if bind is None:
        provider = f"type: local\n    settings: {{path: {store}}}"
    else:
        provider = (f"type: rfc2136\n    settings: {{server: 127.0.0.1, port: \"{bind.port}\", "
                    f"tsigKeyName: {dns_servers.KEY_NAME}, timeout: \"5\"}}\n    credentials: {{file: {secret}}}")
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {{name: example-test}}\n"
            f"spec:\n  domain: {ZONE}\n  provider:\n    {provider}\n")


OTHER_ZONE = ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: other-test}\n"
              f"spec:\n  domain: {OTHER}\n  provider:\n    type: local\n    settings: {{path: zones}}\n")
POLICY = ("apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: web}\n"
          "spec:\n  targetRef: {gateway: gw, namespace: ingress}\n  strategy: simple\n")


def cluster_doc(name: str, hosts: list[str]) -> str:
    ident, address = CLUSTERS[name]
    listeners = "".join(f"\n        - hostname: {h}" for h in hosts) if hosts else " []"
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
            f"spec:\n  id: {ident}\n  gateways:\n    - name: gw\n      namespace: ingress\n"
            f"      addresses: [{address}]\n      listeners:{listeners}\n")


@dataclass
class Fleet(WorkTree):
    """The desired repository (a work tree and its bare remote), the one store directory of
    every `local` zone, and how each cluster's pass is run (``flow``: apply or agent)."""

    tmp: Path
    flow: str
    bind: DnsServer | None
    ran: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.work, self.bare, self.store = self.tmp / "desired", self.tmp / "desired.git", self.tmp / "store"
        self.secrets = self.tmp / "secrets"
        for path in (self.work, self.store, self.secrets):
            path.mkdir()
        secret = self.secrets / "tsig.env"
        secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        WorkTree.__init__(self, self.work, self.bare)
        self.write("zones/example-test.yaml", zone_doc("zones", self.bind, secret if self.bind else None))
        self.write("zones/other-test.yaml", OTHER_ZONE)
        self.write("policies/web.yaml", POLICY)
        for name in CLUSTERS:
            hosts = [HOST, f"app.{OTHER}"] if name == "c2" else [HOST]
            self.write(f"clusters/{name}.yaml", cluster_doc(name, hosts))
        self.commit("four clusters share www")

    def fences(self) -> list[str]:
        out = ["--store-dir", str(self.store)]
        if self.bind is not None:
            out += ["--rfc2136-servers", f"127.0.0.1:{self.bind.port}", "--credentials-dir", str(self.secrets)]
        return out

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *args], capture_output=True, text=True,
                              timeout=180, check=False)
        assert done.returncode == 0, f"gitdns {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def run(self, name: str) -> None:
        """The cluster's pass: `gitdns apply`, or `gitdns agent --once` from an empty state
        directory (nothing kept from its last run) publishing no status branch."""
        self.ran[name] = self.ran.get(name, 0) + 1
        if self.flow == "apply":
            self.cli("apply", "--repo", str(self.work), "--cluster", name, *self.fences())
            return
        state = self.tmp / f"state-{name}-{self.ran[name]}"
        self.cli("agent", "--repo", str(self.bare), "--cluster", name, "--state-dir", str(state), "--lease", "txt",
                 "--once", "--listen", "", "--admin-listen", "", "--status", "false", "--git-timeout", "20",
                 *self.fences())

    def run_all(self, names: list[str]) -> None:
        for name in names:
            self.run(name)

    # --- the zone as read without gitdns -------------------------------------------------
    def records(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """Every record of ZONE but the server's own (SOA, apex NS and its address)."""
        if self.bind is None:
            path = self.store / "zones" / f"{ZONE}.json"
            rows = json.loads(path.read_text())["records"] if path.exists() else []
            return sorted((name, rtype, tuple(values)) for name, rtype, _, _, _, _, values in rows)
        out = []
        for name, rdataset in self.bind.transfer().iterate_rdatasets():
            rtype = dns.rdatatype.to_text(rdataset.rdtype)
            if (str(name), rtype) in self.bind.pristine:
                continue
            values = tuple(sorted(rd.to_text().replace('" "', "").strip('"') if rtype == "TXT" else rd.to_text()
                                  for rd in rdataset))
            out.append((str(name).rstrip("."), rtype, values))
        return sorted(out)

    def expect(self, staying: list[str], beats: list[str] | None = None) -> None:
        """The zone holds exactly ``staying``'s address at the host, one ownership TXT for each
        of them, their heartbeats (agents only) — and nothing else."""
        beats = staying if beats is None else beats
        data, owners, hearts, other = [], set(), set(), []
        for name, rtype, values in self.records():
            if rtype != "TXT":
                data.append((name, rtype, values))
            elif name.startswith("kuadrant-"):
                owner = OWNER_RE.search(values[0])
                assert owner is not None, (name, values)
                assert name == f"kuadrant-{short_hash(owner.group(1), 8)}-a-{HOST}", name
                owners.add(owner.group(1))
            elif name.startswith("gitdns-heartbeat-"):
                beat = BEAT_RE.search(values[0])
                assert beat is not None, (name, values)
                hearts.add(beat.group(1))
            else:
                other.append((name, rtype, values))
        want = tuple(sorted(CLUSTERS[c][1] for c in staying))
        assert data == ([(HOST, "A", want)] if want else []), self.records()
        assert owners == {CLUSTERS[c][0] for c in staying}, self.records()
        assert hearts == ({CLUSTERS[c][0] for c in beats} if self.flow == "agent" else set()), self.records()
        assert other == [], other

    def views_follow_the_store(self) -> None:
        """The local store's rendered default view is what the store holds now."""
        zones = self.store / "zones"
        served = (zones / f"{ZONE}.views" / "default.zone").read_text()
        fresh = write_views(self.tmp / "fresh-views", ZONE, LocalProvider(zones).read)["default"]
        assert served == fresh


Step = Callable[[Fleet], None]


def leave(fleet: Fleet, name: str, hosts: list[str]) -> None:
    fleet.write(f"clusters/{name}.yaml", cluster_doc(name, hosts))
    fleet.commit(f"{name} leaves {ZONE}")
    fleet.write("README.md", f"after {name} left\n")
    fleet.commit("an unrelated change")


def play(fleet: Fleet) -> None:
    fleet.run_all(["c1", "c2", "c3", "c4"])
    fleet.expect(["c1", "c2", "c3", "c4"])

    leave(fleet, "c2", [f"app.{OTHER}"])  # still publishes in other.test
    fleet.run_all(["c1", "c2", "c3", "c4"])
    fleet.expect(["c1", "c3", "c4"])

    leave(fleet, "c3", [])
    fleet.run_all(["c1", "c2", "c3", "c4"])
    fleet.expect(["c1", "c4"])

    (fleet.work / "clusters" / "c4.yaml").unlink()
    fleet.commit("c4 removed from git")
    fleet.cli("prune-owner", CLUSTERS["c4"][0], "--zone", ZONE, "--repo", str(fleet.work), "--yes", *fleet.fences())
    fleet.expect(["c1"])
    if fleet.bind is None:
        fleet.views_follow_the_store()
    fleet.run_all(["c1", "c2", "c3"])
    fleet.expect(["c1"])

    leave(fleet, "c1", [])
    fleet.run_all(["c1", "c2", "c3"])
    fleet.expect([])
    if fleet.bind is None:
        fleet.views_follow_the_store()


@pytest.mark.parametrize("flow", ["apply", "agent"])
def test_leaving_on_the_local_store(tmp_path: Path, flow: str) -> None:
    play(Fleet(tmp_path, flow, None))


@pytest.mark.parametrize("flow", ["apply", "agent"])
def test_leaving_on_bind(tmp_path: Path, bind: DnsServer, flow: str) -> None:
    bind.reset_zone()
    play(Fleet(tmp_path, flow, bind))
