"""Status pushes from a fleet at once: N processes, one local bare repository.

    python bench/bench_status_push.py [--clusters 50] [--zones 5] [--rounds 1|2|3]
    python bench/bench_status_push.py --quick     # 4 clusters, 1 zone, 3 rounds (for CI)

Each process has its own cluster id and cache directory, builds a status tree (a summary
and ``--zones`` zone files), waits at a barrier, then publishes; the landing time is from
the barrier to the push being accepted.  Round 0 is the first, orphan push; round 1 changes
every file (the steady state: tip already cached); round 2 repeats round 1, so nothing is
committed, which is what most agent cycles do.  Prints how many landed, p50/p99/max landing
time per round, and whether every branch tip on the remote is the commit its process
reported.  Asserts nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import subprocess
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path

from gitdns.adapters.status.branch import StatusBranch
from gitdns.core.status.doc import commit_message, dump


def status_files(i: int, rnd: int, zones: int) -> dict[str, str]:
    files = {"summary.yaml": dump({"cluster": f"c{i}", "clusterId": f"id-{i:04d}", "ready": True, "round": rnd,
                                   "policies": {"web": {"ready": True, "hosts": [f"api{i}.example.com"]}}})}
    for z in range(zones):
        zone = f"z{z}.example.com"
        owned = [{"name": f"h{k}.{zone}", "type": "A", "ttl": 60, "values": [f"10.{i % 250}.{k}.{rnd}"]}
                 for k in range(20)]
        files[f"zones/{zone}.yaml"] = dump({"zone": zone, "held": False, "owned": owned, "problems": []})
    return files


def worker(i: int, url: str, root: str, zones: int, rounds: int, barrier: Barrier, out: mp.Queue) -> None:  # type: ignore[type-arg]
    sb = StatusBranch(url, f"id-{i:04d}", workdir=Path(root) / f"w{i}", timeout=60.0)
    for rnd in range(rounds):
        files = status_files(i, min(rnd, 1), zones)  # round 2 repeats round 1: nothing to commit
        message = commit_message(f"c{i}", True, "abc1234", f"round {rnd}", {"Serial": str(rnd)})
        barrier.wait()
        start = time.perf_counter()
        try:
            sha = sb.publish(files, message)
            out.put((rnd, i, sha, time.perf_counter() - start, None))
        except Exception as exc:
            out.put((rnd, i, None, time.perf_counter() - start, f"{type(exc).__name__}: {exc}"))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=50)
    ap.add_argument("--zones", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, choices=(1, 2, 3))
    ap.add_argument("--quick", action="store_true", help="4 clusters, 1 zone, 3 rounds")
    args = ap.parse_args()
    if args.quick:
        args.clusters, args.zones, args.rounds = 4, 1, 3
    with tempfile.TemporaryDirectory(prefix="gitdns-bench-status-") as tmp:
        remote = Path(tmp) / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        subprocess.run(["git", "config", "receive.denyNonFastForwards", "true"], cwd=remote, check=True)
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(args.clusters)
        queue: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
        procs = [ctx.Process(target=worker, args=(i, str(remote), tmp, args.zones, args.rounds, barrier, queue))
                 for i in range(args.clusters)]
        for p in procs:
            p.start()
        results = [queue.get(timeout=600) for _ in range(args.clusters * args.rounds)]
        for p in procs:
            p.join()
        print(f"{args.clusters} processes, {args.zones} zone files of 20 records each, one bare repo at {remote.name}")
        for rnd in range(args.rounds):
            rows = [r for r in results if r[0] == rnd]
            ok = [r for r in rows if (r[2] is not None) == (rnd < 2) and not r[4]]
            times = [r[3] for r in ok]
            label = ("first push (orphan)", "changed content (fast-forward)", "unchanged (no commit)")[rnd]
            print(f"round {rnd} {label}: {'landed' if rnd < 2 else 'returned None'} {len(ok)}/{args.clusters}")
            if times:
                print(f"  landing time: p50 {pct(times, 0.5) * 1000:.0f} ms  p99 {pct(times, 0.99) * 1000:.0f} ms  "
                      f"max {max(times) * 1000:.0f} ms  mean {statistics.fmean(times) * 1000:.0f} ms")
            for r in rows:
                if r[4]:
                    print(f"  failed: cluster {r[1]}: {r[4]}")
        tips = subprocess.run(["git", "for-each-ref", "--format=%(refname:lstrip=3) %(objectname)",
                               "refs/heads/gitdns-status/"], cwd=remote, capture_output=True, text=True,
                              check=True).stdout.split("\n")
        remote_tips = dict(line.split() for line in tips if line)
        last = {f"id-{r[1]:04d}": r[2] for r in results if r[0] == min(args.rounds, 2) - 1 and r[2]}
        print(f"remote branches: {len(remote_tips)}; tips match what each process reported: "
              f"{all(remote_tips.get(k) == v for k, v in last.items()) and len(last) == args.clusters}")


if __name__ == "__main__":
    main()
