"""The agent side of bench/crash.py: three clusters (example-repo) writing two `local` zones,
whose rendered views a real BIND serves (one view per geo, by source address), and one
`rfc2136` zone on another real BIND; each cluster's status branch on a bare remote whose
hooks can hold a push.  No pytest here.

Each trial changes one cluster's desired records in all three zones (its gateway addresses,
a static record every cluster owns), runs that cluster's `gitdns agent --once` (or `gitdns
apply`) through the crash hook, kills it, checks what a reader sees at that moment, runs the
same command again to completion and checks what it left (`AgentRig.verify`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

from gitdns.core import builder
from gitdns.core.records import RecordKey, RecordSet
from gitdns.core.registry import decode_entry
from gitdns.core.status.doc import load as load_yaml
from gitdns.providers.local import LocalProvider
from gitdns.providers.rfc2136.provider import DnsPythonClient, Rfc2136Provider
from gitdns.reconcile.engine import load as load_desired
from tests.e2e import dns_servers
from tests.e2e.agent_kit import DesiredRepo, agent_cmd, git
from tests.e2e.crash_kit import hidden_temps, install_remote_hooks, state_problems, store_problems
from tests.e2e.faults_kit import CLUSTER_IDS, assert_fast_forward_chain, edit_cluster, enable_reflog

CLUSTERS = ("eu-west-1", "eu-central-1", "us-east-1")
LOCAL_ZONES = ("example.com", "example.org")
TEST_ZONE = dns_servers.ZONE  # example.test, on BIND through RFC 2136
PREFIX = {"eu-west-1": "192.0.2", "eu-central-1": "198.51.100", "us-east-1": "203.0.113"}
VIEW_CLIENTS = {"GEO-EU": "127.0.0.2", "US": "127.0.0.3"}
Rows = dict[RecordKey, set[str]]


def zone_doc(port: int, secret: Path) -> str:
    return ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-test}\nspec:\n"
            f"  domain: {TEST_ZONE}\n  provider:\n    type: rfc2136\n"
            f"    settings: {{server: 127.0.0.1, port: \"{port}\", tsigKeyName: {dns_servers.KEY_NAME}, "
            f"timeout: \"5\"}}\n    credentials: {{file: {secret}}}\n")


def static_doc(zone: str, name: str, value: str) -> str:
    return ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n"
            f"  name: {zone}-{name}\nspec:\n  zone: {zone}\n  records:\n"
            f"    - {{name: {name}, type: A, values: [{value}]}}\n")


class ViewsBind:
    """A real BIND serving the rendered views of the `local` zones: view GEO-EU for
    127.0.0.2, US for 127.0.0.3, the default view for everyone else; SIGHUP reloads."""

    def __init__(self, directory: Path, zones_dir: Path) -> None:
        named = dns_servers.find_tool("named")
        directory.mkdir(parents=True, exist_ok=True)
        self.port = dns_servers.free_port()
        self.zones_dir = zones_dir
        self.views = sorted({p.stem for z in LOCAL_ZONES for p in (zones_dir / f"{z}.views").glob("*.zone")},
                            key=lambda v: v == "default")
        blocks = []
        for view in self.views:
            clients = "any" if view == "default" else VIEW_CLIENTS[view]
            zones = "".join(f'    zone "{z}" {{ type primary; file "{self.file(z, view)}"; }};\n' for z in LOCAL_ZONES)
            blocks.append(f'view "{view}" {{\n    match-clients {{ {clients}; }};\n{zones}}};\n')
        conf = directory / "named.conf"
        conf.write_text(
            f'options {{\n    directory "{directory}";\n    pid-file "{directory}/named.pid";\n'
            f'    session-keyfile "{directory}/session.key";\n    managed-keys-directory "{directory}";\n'
            f"    listen-on port {self.port} {{ 127.0.0.1; }};\n    listen-on-v6 {{ none; }};\n"
            "    recursion no;\n    dnssec-validation no;\n    allow-query { 127.0.0.0/8; };\n    notify no;\n"
            "};\ncontrols { };\n" + "".join(blocks))
        self.log = directory / "named.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([named, "-g", "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT)
        if not self.wait_serials(20):
            self.stop()
            raise RuntimeError(f"named (views) did not serve the store's serials:\n{self.log.read_text()[-3000:]}")

    def file(self, zone: str, view: str) -> Path:
        views = self.zones_dir / f"{zone}.views"
        return views / f"{view}.zone" if (views / f"{view}.zone").exists() else views / "default.zone"

    def source(self, view: str) -> str:
        return VIEW_CLIENTS.get(view, "127.0.0.1")

    def ask(self, name: str, rdtype: str, view: str) -> dns.message.Message | None:
        query = dns.message.make_query(name, rdtype)
        try:
            return dns.query.udp(query, "127.0.0.1", port=self.port, source=self.source(view), timeout=1)
        except (OSError, dns.exception.DNSException):
            return None

    def serial(self, zone: str, view: str) -> int | None:
        reply = self.ask(zone, "SOA", view)
        if reply is None or reply.rcode() != dns.rcode.NOERROR:
            return None
        return next((rd.serial for rrset in reply.answer for rd in rrset if rrset.rdtype == dns.rdatatype.SOA), None)

    def wait_serials(self, limit: float) -> bool:
        """Every view serves each zone at the store's version (the SOA serial the views carry)."""
        want = {z: int(LocalProvider(self.zones_dir).read(z).version) for z in LOCAL_ZONES}
        pending = [(z, v) for z in LOCAL_ZONES for v in self.views]
        deadline = time.monotonic() + limit
        while pending and time.monotonic() < deadline:
            zone, view = pending[0]
            if self.serial(zone, view) == want[zone]:
                pending.pop(0)
            else:
                time.sleep(0.05)
        return not pending

    def reload(self) -> None:
        os.kill(self.proc.pid, signal.SIGHUP)

    def stop(self) -> None:
        dns_servers.stop_process(self.proc)


class AgentRig:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bind = dns_servers.start_bind(root / "bind")
        self.repo = DesiredRepo(root / "repo")
        enable_reflog(self.repo)
        install_remote_hooks(self.repo.bare)
        secret = root / "credentials" / "tsig.env"
        secret.parent.mkdir(parents=True)
        secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        self.flags = ["--rfc2136-servers", f"127.0.0.1:{self.bind.port}", "--credentials-dir", str(secret.parent)]
        self.repo.write("zones/example-test.yaml", zone_doc(self.bind.port, secret))
        for cluster in ("eu-west-1", "us-east-1"):
            edit_cluster(self.repo, cluster, lambda doc: next(
                gw for gw in doc["spec"]["gateways"] if gw["name"] == "web-gw")["listeners"].append(
                    {"hostname": f"app.{TEST_ZONE}"}))
        self.bumps = dict.fromkeys(CLUSTERS, 0)
        self.flip(0)
        self.repo.commit("crash rig: an rfc2136 zone on BIND beside the local ones")
        self.state = {c: root / "state" / c for c in CLUSTERS}
        self.wants: dict[str, dict[str, Rows]] = {}
        self.views: ViewsBind | None = None
        self.rfc2136 = Rfc2136Provider(TEST_ZONE, DnsPythonClient(
            "127.0.0.1", self.bind.port, 5, dns_servers.KEY_NAME, dns_servers.ALGORITHM, dns_servers.SECRET))

    def start_views(self) -> None:
        """After the first cycles rendered the views: BIND serving them."""
        self.views = ViewsBind(self.root / "bind-views", self.repo.zones)

    def stop(self) -> None:
        if self.views is not None:
            self.views.stop()
        self.bind.stop()

    # --- the commands --------------------------------------------------------------------------

    def argv(self, cluster: str, kind: str) -> list[str]:
        if kind == "apply":
            return ["apply", "--repo", str(self.repo.work), "--cluster", cluster, "--store-dir",
                    str(self.repo.zones.parent), *self.flags]
        return [*agent_cmd(self.repo, cluster, self.state[cluster], "--once", "--listen", "", *self.flags)[3:]]

    def fresh_state(self, cluster: str) -> None:
        """A new pod with an empty state volume."""
        shutil.rmtree(self.state[cluster], ignore_errors=True)

    # --- desired changes -----------------------------------------------------------------------

    def flip(self, n: int) -> None:
        """The static records every cluster owns, one in each zone with an A record to flip."""
        self.repo.write("records/flip-test.yaml", static_doc("example-test", "flip", f"192.0.2.{100 + n % 100}"))
        self.repo.write("records/flip-com.yaml", static_doc("example-com", "flip", f"198.51.100.{100 + n % 100}"))

    def change(self, cluster: str, n: int) -> str:
        """New addresses for ``cluster``'s gateways (and the static records): a write in every
        zone it publishes in; the new head."""
        self.bumps[cluster] += 1
        k = self.bumps[cluster]
        prefix = PREFIX[cluster]

        def edit(doc: dict[str, object]) -> None:
            for gw in doc["spec"]["gateways"]:  # type: ignore[index]
                if gw["name"] == "api-gw":
                    gw["addresses"] = [f"{prefix}.{10 + k % 80}", f"{prefix}.{11 + k % 80}"][: 1 + k % 2]
                elif gw["name"] == "web-gw":
                    gw["addresses"] = [f"{prefix}.{120 + k % 80}"]
        edit_cluster(self.repo, cluster, edit)
        self.flip(n)
        return self.repo.commit(f"{cluster}: addresses #{k}, static records #{n}")

    # --- what the zones hold and what they should --------------------------------------------------

    def want_now(self, cluster: str) -> dict[str, Rows]:
        """What ``cluster`` publishes at the work tree's head, per zone."""
        state = load_desired(self.repo.work).state
        member = state.cluster(cluster)
        assert member is not None
        return {z.domain: {r.key: set(r.values) for r in builder.desired_for_zone(state, member, z)}
                for z in builder.zones_for_cluster(state, member)}

    def records(self, zone: str) -> tuple[RecordSet, ...]:
        if zone == TEST_ZONE:
            return self.rfc2136.read(zone).records
        return LocalProvider(self.repo.zones).read(zone).records

    def zone_state(self, zone: str) -> tuple[Rows, set[tuple[str, RecordKey]]]:
        """(data rows, ownership claims) of ``zone`` as a reader sees it."""
        rows: Rows = {}
        claims: set[tuple[str, RecordKey]] = set()
        for rec in self.records(zone):
            entry = decode_entry(rec)
            if entry is not None:
                claims.add((entry.owner, entry.key))
            elif not rec.name.startswith(("kuadrant-", "gitdns-")) and rec.type not in ("SOA", "NS") \
                    and rec.name != f"ns1.{TEST_ZONE}":
                rows[rec.key] = set(rec.values)
        return rows, claims

    def union(self) -> tuple[dict[str, Rows], dict[str, set[tuple[str, RecordKey]]]]:
        rows: dict[str, Rows] = {}
        claims: dict[str, set[tuple[str, RecordKey]]] = {}
        for cluster, zones in self.wants.items():
            for zone, wanted in zones.items():
                for key, values in wanted.items():
                    rows.setdefault(zone, {}).setdefault(key, set()).update(values)
                    claims.setdefault(zone, set()).add((CLUSTER_IDS[cluster], key))
        return rows, claims

    # --- checks --------------------------------------------------------------------------------

    def files_whole(self, cluster: str) -> list[str]:
        return store_problems(self.repo.zones) + state_problems(self.state[cluster])

    def kept_at_kill(self, cluster: str, new: dict[str, Rows]) -> list[str]:
        """What a reader sees the moment ``cluster`` died while moving from what it applied last
        to ``new``: every other cluster's values and claims, and ``cluster``'s own values that
        stay the same in ``new``, are all there (a crash never removes, even for a moment, a
        value nobody meant to change)."""
        lost = []
        for owner, zones in self.wants.items():
            for zone, wanted in zones.items():
                rows, claims = self.zone_state(zone)
                for key, values in wanted.items():
                    if owner == cluster and new.get(zone, {}).get(key) != values:
                        continue  # changing: the old or the new value may be there
                    if not values <= rows.get(key, set()):
                        lost.append(f"{zone}: {owner}'s {key} {sorted(values)} lost: {sorted(rows.get(key, ()))}")
                    if (CLUSTER_IDS[owner], key) not in claims:
                        lost.append(f"{zone}: {owner}'s ownership of {key} lost")
        return lost

    def converged(self) -> list[str]:
        """Each zone holds exactly the union of what every cluster wants at the revision it last
        applied: no value lost, none left behind; the same for the ownership claims."""
        rows, claims = self.union()
        lost = []
        for zone in (*LOCAL_ZONES, TEST_ZONE):
            have, owned = self.zone_state(zone)
            want = rows.get(zone, {})
            for key in sorted(set(have) | set(want)):
                if have.get(key, set()) != want.get(key, set()):
                    lost.append(f"{zone} {key}: holds {sorted(have.get(key, ()))}, wants {sorted(want.get(key, ()))}")
            for claim in sorted(owned ^ claims.get(zone, set())):
                lost.append(f"{zone}: ownership {claim} {'left behind' if claim in owned else 'missing'}")
        return lost

    def stray_temps(self) -> list[str]:
        dirs = [self.repo.zones, *self.repo.zones.glob("*.views")]
        return [f"{p.parent.name}/{p.name}" for p in hidden_temps(*dirs)]

    def status_problems(self, cluster: str, head: str) -> tuple[list[str], list[str]]:
        """(duplicate commits, other problems) of ``cluster``'s status branch: two commits in a
        row with one tree, a push that was no fast forward, a tip not naming ``head``."""
        branch = f"gitdns-status/{CLUSTER_IDS[cluster]}"
        pairs = [line.split() for line in git("log", "--format=%H %T", branch, cwd=self.repo.bare).splitlines()]
        dups = [f"{branch}: {a[0][:7]} and {b[0][:7]} hold one tree {a[1][:7]}"
                for a, b in itertools.pairwise(pairs) if a[1] == b[1]]
        other = []
        try:
            assert_fast_forward_chain(self.repo, branch)
        except AssertionError as exc:
            other.append(str(exc))
        summary = load_yaml(git("show", f"{branch}:summary.yaml", cwd=self.repo.bare))
        if summary.get("appliedRevision") != head:
            other.append(f"{branch}: appliedRevision {summary.get('appliedRevision')} is not the head {head[:7]}")
        return dups, other

    def served(self) -> list[str]:
        """BIND, reloaded, serves every view of every local zone at the store's version, and
        answers the store's values for a name a cluster publishes."""
        assert self.views is not None
        self.views.reload()
        if not self.views.wait_serials(15):
            want = {z: LocalProvider(self.repo.zones).read(z).version for z in LOCAL_ZONES}
            got = {f"{z}/{v}": self.views.serial(z, v) for z in LOCAL_ZONES for v in self.views.views}
            return [f"BIND serves serials {got}, the store is at {want}"]
        name = "app.example.org"
        want_values = next((set(r.values) for r in self.records("example.org") if r.key == RecordKey(name, "A")), set())
        reply = self.views.ask(name, "A", "default")
        got_values = {rd.to_text() for rrset in (reply.answer if reply else []) for rd in rrset}
        return [] if got_values == want_values else [f"BIND answers {name} {sorted(got_values)}, "
                                                     f"the store holds {sorted(want_values)}"]
