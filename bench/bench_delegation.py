"""How fast a remote's change reaches the zone through delegation in git (issue 7's target).

    python bench/bench_delegation.py [--rounds 5] [--remote-poll 5] [--primary-poll 10] [--only wake,poll]
    python bench/bench_delegation.py --quick   # wake only, 1 round, remote poll 1 s (for CI; --only wake,poll: both)

Two primaries and two remotes run as real `gitdns agent` processes on one real BIND zone and one
bare git repository.  Each round commits a change of remote r1's addresses to git (one more or
one fewer) and measures the time from the push until BIND answers exactly the new address set.

wake   primaries poll every 600 s; the git host's webhook wakes them: a post-receive hook in the
       bare repository posts a signed GitHub push event to both primaries' /webhook for every
       push to a ``gitdns-status/*`` branch (pushes to main are not delivered: the remote finds
       the change by polling).  Target: within the remote's poll + its cycle + 2 s.
poll   no webhook; primaries poll every --primary-poll seconds.  Target: within the remote's
       poll + its cycle + 2 s + the primary's poll.

The remote's cycle is read from its ``gitdns_cycle_last_duration_seconds`` after each round.
Rounds start at random offsets so that the change lands at any phase of the polls.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agent.delegation_kit import POLICY, cluster_doc  # noqa: E402
from tests.e2e import dns_servers  # noqa: E402
from tests.e2e.agent_kit import AgentProcess, git  # noqa: E402

ZONE = dns_servers.ZONE
HOST = f"app.{ZONE}"
SECRET = "bench-delegation-webhook-secret"
BASE = ["10.0.0.1"]
MORE = ["10.0.0.1", "10.0.0.11"]
R2 = "10.0.0.2"
QUERY_EVERY = 0.05
SLACK = 2.0

HOOK = r'''#!{python}
"""post-receive: deliver a signed GitHub push event for every gitdns-status/* push."""
import hashlib, hmac, json, sys, urllib.request, uuid
secret = {secret!r}.encode()
targets = open({targets!r}).read().split()
for line in sys.stdin:
    old, new, ref = line.split()
    if not ref.startswith("refs/heads/gitdns-status/"):
        continue
    body = json.dumps({{"ref": ref, "before": old, "after": new,
                       "repository": {{"full_name": "platform/dns"}}}}).encode()
    sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    for url in targets:
        req = urllib.request.Request(url, data=body, method="POST", headers={{
            "Content-Type": "application/json", "X-GitHub-Event": "push",
            "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": sig}})
        try:
            urllib.request.urlopen(req, timeout=2).read()
        except Exception:
            pass
'''


def zone_doc(port: int, secret: Path) -> str:
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {{name: example-test}}\nspec:\n"
            f"  domain: {ZONE}\n  provider:\n    type: rfc2136\n"
            f"    settings: {{server: 127.0.0.1, port: \"{port}\", tsigKeyName: {dns_servers.KEY_NAME}, "
            f"timeout: \"5\"}}\n    credentials: {{file: {secret}}}\n")


class Repo:
    def __init__(self, root: Path, port: int) -> None:
        self.bare = root / "desired.git"
        self.work = root / "desired"
        self.zones = root / "zones"  # DesiredRepo's shape: the agents' --store-dir is its parent (no local zone here)
        self.port = port
        git("init", "-q", "--bare", "-b", "main", str(self.bare))
        git("init", "-q", "-b", "main", str(self.work))
        git("remote", "add", "origin", str(self.bare), cwd=self.work)
        secret = self.secret = root / "primary-only" / "tsig.env"
        secret.parent.mkdir()
        secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        self.write("zones/example-test.yaml", zone_doc(port, secret))
        self.write("policies/app.yaml", POLICY % {"name": "app", "gateway": "gw", "strategy": "simple"})
        for name in ("p1", "p2"):
            self.write(f"clusters/{name}.yaml", cluster_doc(name, "primary"))
        self.write("clusters/r2.yaml", cluster_doc("r2", "remote", [R2], (HOST,)))
        self.set_r1(BASE)

    def write(self, rel: str, text: str) -> None:
        (self.work / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.work / rel).write_text(text)

    def set_r1(self, addresses: list[str]) -> None:
        self.r1 = addresses
        self.write("clusters/r1.yaml", cluster_doc("r1", "remote", addresses, (HOST,)))

    def commit(self, message: str) -> None:
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", message, cwd=self.work)
        git("push", "-q", "origin", "main", cwd=self.work)

    def install_hook(self, targets: list[str]) -> None:
        listing = self.bare / "webhook-targets"
        listing.write_text("\n".join(targets) + "\n")
        hook = self.bare / "hooks" / "post-receive"
        hook.write_text(HOOK.format(python=sys.executable, secret=SECRET, targets=str(listing)))
        hook.chmod(0o755)

    def remove_hook(self) -> None:
        (self.bare / "hooks" / "post-receive").unlink(missing_ok=True)


@dataclass
class Round:
    latency: float | None
    remote_cycle: float
    bound: float


def metric(agent: AgentProcess, name: str) -> float:
    code, body = agent.get("/metrics")
    found = re.search(rf"^{name} ([0-9.e+-]+)$", body.decode(), re.M) if code == 200 else None
    return float(found.group(1)) if found else 0.0


def answers(server: dns_servers.DnsServer) -> frozenset[str]:
    try:
        return frozenset(server.query(HOST, "A"))
    except Exception:
        return frozenset()


def wait_answer(server: dns_servers.DnsServer, want: frozenset[str], timeout: float) -> float | None:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if answers(server) == want:
            return time.perf_counter() - start
        time.sleep(QUERY_EVERY)
    return None


def start(repo: Repo, root: Path, tag: str, remote_poll: float, primary_extra: list[str]) -> dict[str, AgentProcess]:
    agents = {}
    fences = ["--rfc2136-servers", f"127.0.0.1:{repo.port}", "--credentials-dir", str(repo.secret.parent)]
    for name in ("p1", "p2"):
        agents[name] = AgentProcess(repo, name, root / f"{tag}-{name}", "--poll-interval",  # type: ignore[arg-type]
                                    *primary_extra, "--stale-after", "60", "--log-level", "warning", *fences)
    for name in ("r1", "r2"):
        agents[name] = AgentProcess(repo, name, root / f"{tag}-{name}", "--poll-interval",  # type: ignore[arg-type]
                                    str(remote_poll), "--log-level", "warning")
    return agents


def run_mode(server: dns_servers.DnsServer, repo: Repo, root: Path, mode: str, rounds: int, remote_poll: float,
             primary_poll: float, rng: random.Random) -> list[Round]:
    if mode == "wake":
        secret_file = root / "webhook-secret"
        secret_file.write_text(SECRET)
        extra = ["600", "--webhook-github-secret-file", str(secret_file)]
    else:
        repo.remove_hook()
        extra = [str(primary_poll)]
    agents = start(repo, root, mode, remote_poll, extra)
    if mode == "wake":
        repo.install_hook([f"http://127.0.0.1:{agents[p].port}/webhook" for p in ("p1", "p2")])
    try:
        current = repo.r1
        want = frozenset(current) | {R2}
        if wait_answer(server, want, 120) is None:
            raise SystemExit(f"[{mode}] the fleet never converged: {sorted(answers(server))}")
        out: list[Round] = []
        for i in range(rounds):
            time.sleep(rng.uniform(0.5, remote_poll + 0.5))
            current = MORE if current == BASE else BASE
            repo.set_r1(current)
            repo.commit(f"r1 addresses {current}")
            want = frozenset(current) | {R2}
            budget = remote_poll + SLACK + 5 + (primary_poll if mode == "poll" else 0)
            latency = wait_answer(server, want, budget + 30)
            cycle = metric(agents["r1"], "gitdns_cycle_last_duration_seconds")
            bound = remote_poll + cycle + SLACK + (primary_poll if mode == "poll" else 0)
            out.append(Round(latency, cycle, bound))
            shown = f"{latency:.2f} s" if latency is not None else "never"
            print(f"  [{mode}] round {i + 1}: {shown} (bound {bound:.2f} s; remote cycle {cycle:.2f} s)", flush=True)
        return out
    finally:
        for agent in agents.values():
            agent.stop()


def report(mode: str, runs: list[Round]) -> bool:
    got = [r.latency for r in runs if r.latency is not None]
    ok = len(got) == len(runs) and all(r.latency is not None and r.latency <= r.bound for r in runs)
    if got:
        print(f"[{mode}] {len(got)}/{len(runs)} rounds: median {statistics.median(got):.2f} s, "
              f"max {max(got):.2f} s; bound per round {min(r.bound for r in runs):.2f}-"
              f"{max(r.bound for r in runs):.2f} s -> {'PASS' if ok else 'FAIL'}")
    else:
        print(f"[{mode}] no round converged -> FAIL")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--remote-poll", type=float, default=5.0)
    ap.add_argument("--primary-poll", type=float, default=10.0)
    ap.add_argument("--only", help="comma-separated: wake, poll (default both; --quick: wake)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--quick", action="store_true",
                    help="wake only, 1 round, remote poll 1 s, primary poll 2 s; the exit status says only whether "
                         "every round converged (a missed bound is printed, not an error)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.remote_poll, args.primary_poll = 1, 1.0, 2.0
    args.only = args.only or ("wake" if args.quick else "wake,poll")
    root = Path(tempfile.mkdtemp(prefix="gitdns-bench-delegation-"))
    rng = random.Random(7)
    ok = converged = True
    try:
        server = dns_servers.start_bind(root / "bind")
        try:
            repo = Repo(root, server.port)
            repo.commit("two primaries, two remotes")
            print(f"BIND on 127.0.0.1:{server.port}; remote poll {args.remote_poll:g} s, "
                  f"primary poll {args.primary_poll:g} s (poll mode), {args.rounds} rounds per mode", flush=True)
            for mode in args.only.split(","):
                runs = run_mode(server, repo, root, mode, args.rounds, args.remote_poll, args.primary_poll, rng)
                ok &= report(mode, runs)
                converged &= all(r.latency is not None for r in runs)
        finally:
            server.stop()
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"pass": ok, "converged": converged}))
    return 0 if (converged if args.quick else ok) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
