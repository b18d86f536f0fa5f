"""Three clusters serve one host; one commit switches its policy from simple to loadbalanced,
a later one switches it back.  Each cluster's pass is the real CLI (`gitdns apply --cluster X`
one cluster at a time, in several orders, or `gitdns agent --once`) on the `local` store.
After EVERY single pass the host must resolve — through the store's records following CNAMEs,
and, in the BIND cases, by a DNS query to a real BIND on loopback serving the store's rendered
default view — and after the switch the zone must hold exactly what the builder gives every
cluster for the new strategy (docs/records.md, "Switching a host's strategy").

Without ``named`` the BIND cases skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from gitdns.adapters.repo import load_repo
from gitdns.core import builder
from gitdns.core.records import RecordKey, RecordSet
from gitdns.core.registry import decode_entry, txt_name
from gitdns.providers.local import LocalProvider
from tests.e2e.agent_kit import WorkTree
from tests.e2e.dns_servers import ToolMissing, find_tool, free_port

ZONE = "example.com"
HOST = f"api.{ZONE}"
CLUSTERS = {f"c{i}": (f"cluster-{i}-uid", f"192.0.2.{i}") for i in range(1, 4)}
IPS = {ip for _, ip in CLUSTERS.values()}
ZONE_DOC = ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\n"
            f"spec:\n  domain: {ZONE}\n  provider:\n    type: local\n    settings: {{path: zones}}\n")


def policy_doc(strategy: str) -> str:
    return ("apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: api}\n"
            f"spec:\n  targetRef: {{gateway: gw, namespace: ingress}}\n  strategy: {strategy}\n")


def cluster_doc(name: str) -> str:
    ident, address = CLUSTERS[name]
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
            f"spec:\n  id: {ident}\n  gateways:\n    - name: gw\n      namespace: ingress\n"
            f"      addresses: [{address}]\n      listeners:\n        - hostname: {HOST}\n")


class Bind:
    """named serving the local store's rendered default view of ZONE, restarted to re-read it."""

    def __init__(self, directory: Path, zone_file: Path) -> None:
        self.named = find_tool("named")
        self.directory, self.zone_file, self.port = directory, zone_file, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        (directory / "named.conf").write_text(
            "options {\n"
            f'    directory "{directory}";\n    pid-file "{directory}/named.pid";\n'
            f'    session-keyfile "{directory}/session.key";\n    managed-keys-directory "{directory}";\n'
            f"    listen-on port {self.port} {{ 127.0.0.1; }};\n    listen-on-v6 {{ none; }};\n"
            "    recursion no;\n    dnssec-validation no;\n    notify no;\n};\ncontrols { };\n"
            f'zone "{ZONE}" {{ type primary; file "{zone_file}"; }};\n')

    def restart(self) -> None:
        self.stop()
        log = self.directory / "named.log"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([self.named, "-g", "-c", str(self.directory / "named.conf")],
                                         stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text()
            try:
                if self.ask(f"{ZONE}.", "SOA").rcode() == dns.rcode.NOERROR:
                    return
            except (OSError, dns.exception.Timeout):
                pass
            time.sleep(0.05)
        raise AssertionError(f"named did not answer:\n{log.read_text()}")

    def ask(self, name: str, rdtype: str) -> dns.message.Message:
        return dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=self.port, timeout=2)

    def addresses(self, name: str) -> set[str]:
        self.restart()
        response = self.ask(f"{name}.", "A")
        assert response.rcode() == dns.rcode.NOERROR, response
        return {rd.address for rrset in response.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Fleet(WorkTree):
    tmp: Path
    flow: str  # "apply" or "agent"
    with_bind: bool = False
    ran: dict[str, int] = field(default_factory=dict)
    bind: Bind | None = None

    def __post_init__(self) -> None:
        self.work, self.bare, self.store = self.tmp / "desired", self.tmp / "desired.git", self.tmp / "store"
        for path in (self.work, self.store):
            path.mkdir()
        WorkTree.__init__(self, self.work, self.bare)
        self.write("zones/example-com.yaml", ZONE_DOC)
        for name in CLUSTERS:
            self.write(f"clusters/{name}.yaml", cluster_doc(name))
        if self.with_bind:
            (self.tmp / "bind").mkdir()
            self.bind = Bind(self.tmp / "bind", self.provider().views_dir(ZONE) / "default.zone")

    def provider(self) -> LocalProvider:
        return LocalProvider(self.store / "zones")

    def switch(self, strategy: str) -> None:
        self.write("policies/api.yaml", policy_doc(strategy))
        self.commit(f"api: {strategy}")
        time.sleep(1.1)  # the next commit is on a later second: revisions compare by commit time

    def run(self, name: str) -> None:
        self.ran[name] = self.ran.get(name, 0) + 1
        if self.flow == "apply":
            args = ["apply", "--repo", str(self.work), "--cluster", name, "--store-dir", str(self.store)]
        else:
            state = self.tmp / f"state-{name}-{self.ran[name]}"
            args = ["agent", "--repo", str(self.bare), "--cluster", name, "--state-dir", str(state),
                    "--lease", "txt", "--once", "--listen", "", "--admin-listen", "", "--status", "false",
                    "--git-timeout", "20", "--store-dir", str(self.store)]
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *args], capture_output=True, text=True,
                              timeout=180, check=False)
        assert done.returncode == 0, f"{name}: gitdns {args[0]} exit {done.returncode}\n{done.stdout}\n{done.stderr}"

    def records(self) -> dict[RecordKey, RecordSet]:
        snap = self.provider().read(ZONE)
        return {r.key: r for r in snap.records}

    def resolve(self, name: str = HOST, depth: int = 0) -> set[str]:
        """What ``name`` answers in the store, following CNAMEs (every weighted row)."""
        assert depth < 8, f"CNAME loop at {name}"
        out: set[str] = set()
        for key, rec in self.records().items():
            if key.name == name and key.type == "A":
                out |= set(rec.values)
            elif key.name == name and key.type == "CNAME":
                out |= self.resolve(rec.values[0], depth + 1)
        return out

    def check_answers(self, after: str) -> None:
        found = self.resolve()
        assert found and found <= IPS, f"{HOST} answers {found} in the store after {after}"
        if self.bind is not None:
            served = self.bind.addresses(HOST)
            assert served and served <= IPS, f"BIND answers {served} for {HOST} after {after}"

    def expect_built(self) -> None:
        """The zone (heartbeats aside) is what the builder gives each cluster, merged, with one
        ownership TXT per cluster and record."""
        state = load_repo(self.work).state
        zone = next(z for z in state.zones if z.domain == ZONE)
        data: dict[RecordKey, RecordSet] = {}
        txt: set[tuple[str, str]] = set()
        for cluster in state.clusters:
            for rec in builder.desired_for_zone(state, cluster, zone):
                held = data.get(rec.key)
                data[rec.key] = rec if held is None else held.with_values({*held.values, *rec.values})
                txt.add((txt_name(cluster.id, rec.type, rec.name, ZONE), rec.set_id))
        got = {k: r for k, r in self.records().items() if not k.name.startswith(("kuadrant-", "gitdns-"))}
        got_txt = {(k.name, k.set_id) for k in self.records() if k.name.startswith("kuadrant-")}
        assert got == data
        assert got_txt == txt
        for key, rec in self.records().items():
            if key.name.startswith("kuadrant-"):
                entry = decode_entry(rec)
                assert entry is not None and entry.labels.rev, rec


@pytest.fixture(params=["apply", "agent"])
def flow(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def play(fleet: Fleet, orders: list[list[str]]) -> None:
    fleet.switch("simple")
    for name in CLUSTERS:
        fleet.run(name)
    fleet.check_answers("the first passes")
    fleet.expect_built()
    assert fleet.resolve() == IPS
    for round_, target in enumerate(["loadbalanced", "simple"]):
        fleet.switch(target)
        for name in orders[round_]:
            fleet.run(name)
            fleet.check_answers(f"{name}'s pass towards {target}")
        fleet.expect_built()
        assert fleet.resolve() == IPS
        assert any(k.type == "CNAME" and k.name == HOST for k in fleet.records()) == (target == "loadbalanced")


ORDERS = {
    "one-pass-each": [["c1", "c2", "c3"], ["c3", "c1", "c2"]],
    "two-passes-each": [["c2", "c2", "c3", "c1", "c3", "c1"], ["c1", "c1", "c2", "c2", "c3", "c3"]],
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_switch_on_the_local_store(tmp_path: Path, flow: str, order: str) -> None:
    play(Fleet(tmp_path, flow), ORDERS[order])


@pytest.fixture
def bind_fleet(tmp_path: Path, flow: str) -> Iterator[Fleet]:
    try:
        find_tool("named")
    except ToolMissing as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    fleet = Fleet(tmp_path, flow, with_bind=True)
    try:
        yield fleet
    finally:
        assert fleet.bind is not None
        fleet.bind.stop()


def test_switch_answered_by_bind_after_every_pass(bind_fleet: Fleet) -> None:
    play(bind_fleet, [["c3", "c2", "c1", "c2"], ["c2", "c3", "c1", "c1"]])
