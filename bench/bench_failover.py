"""The orchestrator's failover time and memory (docs/health.md, "Failover time budget").

    python bench/bench_failover.py [--reps 5] [--targets 10000] [--only failover,rss]
    python bench/bench_failover.py --quick   # 1 rep, 200 targets, 6 s of probing (for CI)

failover  3 nodes (HTTP servers on 127.0.0.11-13), health check interval 1 s, timeout 1 s,
          failure threshold 2, success threshold 1; an in-process orchestrator delivers to a
          directory served by a real dnsmasq (addn-hosts, SIGHUP after each write).  Each
          repetition stops node-2's HTTP server (it stops answering) and queries dnsmasq every
          50 ms until node-2's IP is gone (target <= interval x failure threshold + timeout +
          1 s = 4 s), then starts it again and waits for the IP to come back (target <=
          interval x success threshold + 1 s = 2 s).  The OpenOva failover spec claimed 10 s best case (5 s x 2);
          with its 2 s timeout and sequential checks it is really 7-12 s, plus its ConfigMap
          path (about a minute of kubelet projection).
rss       a `gitdns orchestrator` process (--out, file lease) with a NodePool of N nodes whose
          health endpoints refuse connections (each node's own loopback address, 127.1.x.y, a
          closed port: a node is probed at its own address only), interval 5 s; after
          three intervals: VmRSS / VmHWM (target < 100 MiB), probes completed, and whether the
          kubernetes client was loaded (it must not be for --out).

Prints figures and PASS/MISS; asserts nothing.  Exits 1 when a part could not run (no dnsmasq,
the RSS child failed, an IP never withdrawn or back within 30 s); a missed target is printed only.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gitdns.adapters.coredns_delivery import DirectoryDelivery  # noqa: E402
from gitdns.core.reach import ProbeReach  # noqa: E402
from gitdns.orchestrator.service import Orchestrator  # noqa: E402
from gitdns.orchestrator.sources import DirectorySource  # noqa: E402
from tests.e2e.orchestrator_kit import Dnsmasq, dnsmasq_path, free_port, start_nodes, write_desired  # noqa: E402

INTERVAL, TIMEOUT, FAILURES, SUCCESSES = 1.0, 1.0, 2, 1
NAME = "api.tenant-a.test"
QUERY_EVERY = 0.05


def until(predicate, limit: float = 30.0) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if predicate():
            return time.monotonic() - start
        time.sleep(QUERY_EVERY)
    return float("inf")


def bench_failover(reps: int) -> bool:
    """False when it could not run or an IP never moved within 30 s."""
    binary = dnsmasq_path()
    if binary is None:
        print("failover: dnsmasq not installed; skipped")
        return False
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        work = Path(tmp)
        nodes = start_nodes(3)
        write_desired(work / "desired", "edge", nodes, {"tenant-a": [NAME]}, interval=INTERVAL, timeout=TIMEOUT,
                      failure_threshold=FAILURES, success_threshold=SUCCESSES)
        dnsmasq = Dnsmasq(work / "out", work, binary).start()
        orch = Orchestrator("edge", DirectorySource(work / "desired"),
                            DirectoryDelivery(work / "out", "edge", pid_file=dnsmasq.pid_file), poll_interval=5,
                            reach=ProbeReach.parse("127.0.0.0/8"))  # the nodes are on loopback
        thread = threading.Thread(target=orch.run, daemon=True)
        thread.start()
        everyone = {n.ip for n in nodes}
        victim = nodes[1]
        down: list[float] = []
        up: list[float] = []
        try:
            until(lambda: dnsmasq.answers(NAME) == everyone)
            for rep in range(reps):
                time.sleep(0.37 * rep % INTERVAL)  # land at different points of the probe phase
                victim.stop()
                down.append(until(lambda: victim.ip not in (dnsmasq.answers(NAME) or {victim.ip})))
                victim.start()
                up.append(until(lambda: dnsmasq.answers(NAME) == everyone))
                print(f"  rep {rep + 1}: withdrawn after {down[-1]:.2f} s, back after {up[-1]:.2f} s")
        finally:
            orch.stopped.set()
            orch.wake.set()
            thread.join(10)
            dnsmasq.stop()
            for n in nodes:
                n.stop()
    down_target = INTERVAL * FAILURES + TIMEOUT + 1
    up_target = INTERVAL * SUCCESSES + 1
    print(f"failover (interval {INTERVAL:g}s, timeout {TIMEOUT:g}s, thresholds {FAILURES}/{SUCCESSES}, "
          f"dnsmasq queried every {QUERY_EVERY * 1000:.0f} ms, {reps} reps):")
    print(f"  node down -> IP gone : median {statistics.median(down):.2f} s, max {max(down):.2f} s "
          f"(target <= {down_target:g} s) {'PASS' if max(down) <= down_target else 'MISS'}")
    print(f"  node back -> IP back : median {statistics.median(up):.2f} s, max {max(up):.2f} s "
          f"(target <= {up_target:g} s) {'PASS' if max(up) <= up_target else 'MISS'}")
    print("  the OpenOva failover spec claimed: 10 s best case (5 s interval x 2 failures); really 7-12 s "
          "with its 2 s timeout and nodes checked one after another, plus ~60 s of ConfigMap projection "
          "on its delivery path")
    return max(down + up) < float("inf")


RSS_CHILD = r"""
import json, resource, sys, threading, time
from pathlib import Path
from gitdns.core.reach import ProbeReach
from gitdns.orchestrator.config import OrchestratorConfig
from gitdns.orchestrator.wiring import build
root, targets, wait = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
config = OrchestratorConfig(repo=str(root / "desired"), node_pool="big", out=root / "out", listen="",
                            state_dir=root / "state", poll_interval=30, probe_reach=ProbeReach.parse("127.0.0.0/8"))
orch = build(config)
thread = threading.Thread(target=orch.run, daemon=True)
thread.start()
time.sleep(max(0.0, wait - 5))
t0, c0, done0 = time.monotonic(), time.process_time(), orch.monitor.stats().completed
time.sleep(5)
cpu = (time.process_time() - c0) / (time.monotonic() - t0)
rate = (orch.monitor.stats().completed - done0) / (time.monotonic() - t0)
status = {k: v for k, v in (l.split(":", 1) for l in Path("/proc/self/status").read_text().splitlines())}
stats = orch.monitor.stats()
print(json.dumps({"rss_kib": int(status["VmRSS"].split()[0]), "hwm_kib": int(status["VmHWM"].split()[0]),
                  "completed": stats.completed, "skipped": stats.skipped_slots, "lag": stats.max_start_lag,
                  "kubernetes": "kubernetes" in sys.modules, "published": len(orch.published.ips),
                  "delivered": orch.publisher.landed, "targets": len(orch.nodes), "cpu": cpu, "rate": rate}))
orch.stopped.set(); orch.wake.set(); thread.join(20)
"""


def bench_rss(targets: int, wait: float) -> bool:
    closed = free_port()  # nothing listens there: every probe is refused at once
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as tmp:
        root = Path(tmp)
        (root / "desired").mkdir()
        lines = ["apiVersion: gitdns.io/v1alpha1", "kind: NodePool", "metadata: {name: big}", "spec:", "  nodes:"]
        for i in range(targets):  # a node is probed at its own address only: each its own on loopback
            ip = f"127.{1 + i // 62_500 % 250}.{i // 250 % 250}.{i % 250 + 1}"
            lines.append(f"    - {{name: n{i}, ip: {ip}, healthEndpoint: \"http://{ip}:{closed}/healthz/ready\"}}")
        lines.append("  healthCheck: {interval: 5, timeout: 2, failureThreshold: 2, successThreshold: 1}")
        (root / "desired" / "pool.yaml").write_text("\n".join(lines) + "\n")
        (root / "desired" / "tenant.yaml").write_text(
            "apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata: {name: big-tenant}\n"
            "spec: {nodePool: big, domains: [api.big.test, app.big.test]}\n")
        out = subprocess.run([sys.executable, "-c", RSS_CHILD, str(root), str(targets), str(wait)],
                             capture_output=True, text=True, cwd=ROOT, timeout=wait + 300)
    if out.returncode != 0:
        print(f"rss: child failed: {out.stderr[-2000:]}")
        return False
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    mib = result["hwm_kib"] / 1024
    print(f"rss ({targets} targets, interval 5 s, {wait:g} s of probing, --out delivery):")
    print(f"  VmRSS {result['rss_kib'] / 1024:.1f} MiB, VmHWM {mib:.1f} MiB (target < 100 MiB) "
          f"{'PASS' if mib < 100 else 'MISS'}")
    print(f"  probes completed {result['completed']}, skipped slots {result['skipped']}, "
          f"max start lag {result['lag']:.2f} s, nodes {result['targets']}, published {result['published']}, "
          f"delivered {result['delivered']}")
    print(f"  steady state (last 5 s): {result['rate']:.0f} probes/s (expected {targets / 5:.0f}), "
          f"CPU {result['cpu'] * 100:.0f}% of one core")
    print(f"  kubernetes client loaded: {result['kubernetes']} ({'PASS' if not result['kubernetes'] else 'MISS'})")
    if not result["completed"]:
        print("rss: no probe completed: the figures above are of an idle orchestrator, not of one probing")
    return bool(result["completed"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--targets", type=int, default=10000)
    parser.add_argument("--wait", type=float, default=15.0, help="seconds of probing before RSS is read")
    parser.add_argument("--only", default="failover,rss")
    parser.add_argument("--quick", action="store_true", help="1 rep, 200 targets, 6 s of probing: a run of seconds")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.targets, args.wait = 1, 200, 6.0
    parts = set(args.only.split(","))
    ran = True
    if "failover" in parts:
        ran &= bench_failover(args.reps)
    if "rss" in parts:
        ran &= bench_rss(args.targets, args.wait)
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
