"""Delegation through Kubernetes: time and API calls of a primary's pass.

A primary and R remotes, each a fake API server on loopback (tests/fakes/kube_apiserver.py),
every remote holding H delegating DNSRecords (one A record each, one root host per record,
the same hosts on every remote). Measured, per pass: wall time, API requests by method on
every fake, and provider writes to the `local` zone:

* the first pass (every authoritative record created, merged and published),
* a steady pass (nothing changed: list calls only, nothing written),
* a pass after one remote record changed.

    python3 bench/bench_kube_delegation.py --remotes 2 --hosts 50
    python3 bench/bench_kube_delegation.py --quick      # 2 remotes of 10 hosts (for CI)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.kubedelegation.kube_fleet import DNSR, NS, Fleet, a_endpoint, record


def counts(fleet: Fleet) -> Counter[str]:
    out: Counter[str] = Counter()
    for fake in [*fleet.primaries.values(), *fleet.remotes.values()]:
        out.update(r.method for r in fake.requests)
        fake.requests.clear()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--remotes", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="2 remotes of 10 hosts")
    args = parser.parse_args()
    if args.quick:
        args.remotes, args.hosts = 2, 10
    with tempfile.TemporaryDirectory() as tmp:
        fleet = Fleet(store=Path(tmp) / "store")
        try:
            for i in range(args.remotes):
                remote = fleet.add_remote(f"remote-{i}")
                for h in range(args.hosts):
                    host = f"h{h}.example.com"
                    record(remote, f"h{h}", host, [a_endpoint(host, f"10.{i}.{h // 250}.{h % 250 + 1}")],
                           owner=f"r{i}-h{h}")
            fleet.add_primary("primary")
            delegation = fleet.delegation("primary")
            counts(fleet)
            rows = []
            for label in ("first pass", "steady pass", "one record changed"):
                if label == "one record changed":
                    fleet.remotes["remote-0"].mutate(*DNSR, "h0", lambda o: o["spec"]["endpoints"][0].__setitem__(
                        "targets", ["192.0.2.99"]), namespace=NS)
                    counts(fleet)
                started = time.perf_counter()
                result = delegation.run_once()
                seconds = time.perf_counter() - started
                if not result.ok:
                    print(f"{label}: not ok: {result}", file=sys.stderr)
                    return 1
                calls = counts(fleet)
                rows.append((label, seconds, calls, result.status_writes))
        finally:
            fleet.stop()
    print(f"remotes={args.remotes} hosts per remote={args.hosts} records={args.remotes * args.hosts}")
    print(f"{'pass':<20} {'seconds':>8} {'GET':>6} {'PUT':>6} {'PATCH':>6} {'POST':>6} {'DELETE':>7} {'status':>7}")
    for label, seconds, calls, writes in rows:
        print(f"{label:<20} {seconds:8.3f} {calls['GET']:6d} {calls['PUT']:6d} {calls['PATCH']:6d} "
              f"{calls['POST']:6d} {calls['DELETE']:7d} {writes:7d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
