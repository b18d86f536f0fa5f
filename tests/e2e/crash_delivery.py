"""The orchestrator side of bench/crash.py: a node pool of four real HTTP nodes on
127.0.0.61-64, tenants in a desired directory, `gitdns orchestrator --once --out DIR` delivering
hosts files that a real dnsmasq serves (SIGHUP after each change).  No pytest here.

Each trial changes what the pool publishes (a node stops or comes back, a tenant comes, goes
or changes its names), runs the orchestrator through the crash hook, kills it, records the
files and what dnsmasq answers at that moment, runs it again to completion and checks: every
file at the kill was its old or its new content (never a mix, never cut), every name dnsmasq
answered was the old or the new set, and after the rerun the files are exactly the pool's.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.crash_kit import delivery_problems, hidden_temps, snapshot_files
from tests.e2e.orchestrator_kit import Dnsmasq, NodeServer, dnsmasq_path, nodepool_yaml, start_nodes, tenant_yaml

POOL = "edge"
OWNED = f".gitdns-{POOL}.owned"
SNIPPET = f"gitdns-{POOL}.server"
Answers = dict[str, set[str]]


@dataclass
class Published:
    """What the pool publishes: tenant -> its domains, and the addresses served."""

    tenants: dict[str, tuple[str, ...]]
    ips: frozenset[str]

    def answers(self) -> Answers:
        return {d: set(self.ips) for names in self.tenants.values() for d in names}


class DeliveryRig:
    def __init__(self, root: Path) -> None:
        binary = dnsmasq_path()
        if binary is None:
            raise FileNotFoundError("dnsmasq not found: apt-get install -y --no-install-recommends dnsmasq-base")
        self.root = root
        self.desired, self.out, self.state = root / "desired", root / "out", root / "state"
        self.desired.mkdir(parents=True)
        self.nodes: list[NodeServer] = start_nodes(4, first=61)
        self.tenants: dict[str, tuple[str, ...]] = {"tenant-a": ("api.tenant-a.test",),
                                                   "tenant-b": ("shop.tenant-b.test", "www.tenant-b.test")}
        self.next_tenant = 0
        self.write_desired()
        self.dnsmasq = Dnsmasq(self.out, root, binary).start()

    def argv(self) -> list[str]:
        return ["orchestrator", "--repo", str(self.desired), "--node-pool", POOL, "--out", str(self.out),
                "--listen", "", "--admin-listen", "", "--state-dir", str(self.state), "--once",
                "--probe-allow-ranges", "127.0.0.0/8", "--signal-pid-file", str(self.dnsmasq.pid_file)]

    def stop(self) -> None:
        self.dnsmasq.stop()
        for node in self.nodes:
            node.stop()

    # --- desired changes -----------------------------------------------------------------------

    def write_desired(self) -> None:
        (self.desired / "nodepool.yaml").write_text(
            nodepool_yaml(POOL, self.nodes, interval=0.2, timeout=0.5, failure_threshold=1, success_threshold=1))
        for old in self.desired.glob("tenant-*.yaml"):
            old.unlink()
        for name, domains in self.tenants.items():
            (self.desired / f"{name}.yaml").write_text(tenant_yaml(name, POOL, domains))

    def published(self) -> Published:
        return Published(dict(self.tenants), frozenset(n.ip for n in self.nodes if n.running))

    def change(self, rng: random.Random) -> str:
        """One change to what the pool publishes (always a change to some file)."""
        running = [n for n in self.nodes if n.running]
        stopped = [n for n in self.nodes if not n.running]
        moves = ["tenant-add", "tenant-names"]
        if len(running) > 1:
            moves.append("node-down")
        if stopped:
            moves.append("node-up")
        if len(self.tenants) > 1:
            moves.append("tenant-remove")
        move = rng.choice(moves)
        if move == "node-down":
            rng.choice(running).stop()
        elif move == "node-up":
            rng.choice(stopped).start()
        elif move == "tenant-add":
            self.next_tenant += 1
            name = f"tenant-x{self.next_tenant}"
            self.tenants[name] = (f"api.{name}.test",)
        elif move == "tenant-remove":
            del self.tenants[rng.choice(sorted(self.tenants))]
        else:
            name = rng.choice(sorted(self.tenants))
            zone = f"{name}.test"
            count = rng.randint(1, 3)
            self.tenants[name] = tuple(f"{rng.choice(['api', 'www', 'shop', 'img'])}{i}.{zone}" for i in range(count))
        self.write_desired()
        return move

    # --- checks --------------------------------------------------------------------------------

    def files(self) -> dict[str, str]:
        """The delivered files (visible ones) and the manifest."""
        files = snapshot_files(self.out)
        manifest = self.out / OWNED
        if manifest.exists():
            files[OWNED] = manifest.read_text()
        return files

    def answers(self, names: set[str]) -> Answers | None:
        """dnsmasq's answers after it re-read the directory (as CoreDNS's reload would)."""
        pid = int(self.dnsmasq.pid_file.read_text())
        os.kill(pid, signal.SIGHUP)
        time.sleep(0.05)
        out: Answers = {}
        for name in sorted(names):
            for _ in range(20):
                got = self.dnsmasq.answers(name)
                if got is not None:
                    out[name] = got
                    break
                time.sleep(0.05)
            else:
                return None
        return out

    def torn(self) -> list[str]:
        return delivery_problems(self.out)

    def stray_temps(self) -> list[str]:
        return [p.name for p in hidden_temps(self.out)]

    def exact(self, want: Published) -> list[str]:
        """The files are exactly the pool's: a hosts file per tenant listing the published
        addresses with the tenant's names, the snippet naming each tenant's zone, the manifest
        naming these files and nothing else of ours."""
        problems = []
        files = snapshot_files(self.out)
        expected = {f"{t}.hosts" for t in want.tenants} | {SNIPPET}
        if set(files) != expected:
            problems.append(f"files {sorted(files)}, expected {sorted(expected)}")
        for tenant, names in want.tenants.items():
            text = files.get(f"{tenant}.hosts", "")
            lines = {(w[0], tuple(sorted(w[1:]))) for w in (ln.split() for ln in text.splitlines())
                     if w and not w[0].startswith("#")}
            if lines != {(ip, tuple(sorted(names))) for ip in want.ips}:
                problems.append(f"{tenant}.hosts lists {sorted(lines)}, the pool publishes {sorted(want.ips)} "
                                f"for {sorted(names)}")
        snippet = files.get(SNIPPET, "")
        for tenant in want.tenants:
            if f"/{tenant}.hosts " not in snippet:
                problems.append(f"{SNIPPET} does not serve {tenant}.hosts")
        try:
            owned = json.loads((self.out / OWNED).read_text())
        except (OSError, ValueError) as exc:
            owned = f"unreadable: {exc}"
        if owned != sorted(expected):
            problems.append(f"{OWNED} names {owned}, expected {sorted(expected)}")
        return problems


def whole_at_kill(at_kill: dict[str, str], before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Every file a reader saw at the kill was its content before or after, or absent where it
    was absent before or after: never a mix, never cut short.  (The manifest is not compared:
    between the two it names the old and the new files together, by design.)"""
    problems = []
    for name in sorted((set(at_kill) | set(before) | set(after)) - {OWNED}):
        seen = at_kill.get(name)
        allowed = {before.get(name), after.get(name)}
        if seen not in allowed:
            problems.append(f"{name} at the kill was neither its old nor its new content: {seen!r:.300}")
    return problems


def answered_at_kill(at_kill: Answers | None, before: Answers, after: Answers) -> list[str]:
    """Every name dnsmasq answered at the kill got its old or its new address set (nothing
    where the name was not served before or after)."""
    if at_kill is None:
        return ["dnsmasq did not answer after the kill"]
    problems = []
    for name, got in sorted(at_kill.items()):
        allowed = [before.get(name, set()), after.get(name, set())]
        if got not in allowed:
            problems.append(f"dnsmasq answered {name} {sorted(got)} at the kill, neither "
                            f"{sorted(allowed[0])} nor {sorted(allowed[1])}")
    return problems
