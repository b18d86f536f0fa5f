"""Read + decode time and peak RSS of the `local` record store with 10,000 records.

    python bench/bench_local_read.py [--records N] [--runs R]
    python bench/bench_local_read.py --quick     # 1,000 records, 3 runs (for CI)

Builds a store shaped like the loadbalanced layout (per host: H, 3 geo rows on klb.H,
2 weighted rows, 2 cluster A names, and ownership TXT for each), then times
`LocalProvider.read` (file read + JSON decode + RecordSet construction) and, for
comparison, the bare ``json.loads`` of the same bytes.  Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from gitdns.core.records import RecordKey, RecordSet
from gitdns.providers.local import LocalProvider, encode_store

ZONE = "example.com"


def host_records(i: int) -> list[RecordSet]:
    host = f"app{i}.{ZONE}"
    klb = f"klb.{host}"
    eu, us = f"geo-eu.{klb}", f"us.{klb}"
    a_eu, a_us = f"1hrxie-30ics1.{klb}", f"17ol5y-30ics1.{klb}"
    data = [
        RecordSet(host, "CNAME", 300, (klb,)),
        RecordSet(klb, "CNAME", 300, (eu,), set_id="GEO-EU", geo="GEO-EU"),
        RecordSet(klb, "CNAME", 300, (us,), set_id="US", geo="US"),
        RecordSet(klb, "CNAME", 300, (eu,), set_id="default", geo="*"),
        RecordSet(eu, "CNAME", 60, (a_eu,), set_id=a_eu, weight=120),
        RecordSet(us, "CNAME", 60, (a_us,), set_id=a_us, weight=120),
        RecordSet(a_eu, "A", 60, (f"10.{i // 250 % 250}.{i % 250}.1",)),
        RecordSet(a_us, "A", 60, (f"10.{i // 250 % 250}.{i % 250}.2",)),
    ]
    owner = "heritage=external-dns,external-dns/owner=cluster-a-uid,external-dns/version=1"
    txt = [
        RecordSet(f"kuadrant-1hrxiems-{r.type.lower()}-{r.name}", "TXT", r.ttl, (f'"{owner}"',),
                  set_id=r.set_id, weight=r.weight, geo=r.geo)
        for r in data
    ]
    return data + txt


def build(n: int) -> dict[RecordKey, RecordSet]:
    records: dict[RecordKey, RecordSet] = {}
    i = 0
    while len(records) < n:
        for rec in host_records(i):
            if len(records) < n:
                records[rec.key] = rec
        i += 1
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="1,000 records, 3 runs")
    args = parser.parse_args()
    if args.quick:
        args.records, args.runs = 1_000, 3
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        records = build(args.records)
        path = directory / f"{ZONE}.json"
        path.write_bytes(encode_store(ZONE, 1, records))
        provider = LocalProvider(directory)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        reads, decodes = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            snap = provider.read(ZONE)
            reads.append(time.perf_counter() - t0)
            assert len(snap.records) == args.records
            t0 = time.perf_counter()
            json.loads(path.read_bytes())
            decodes.append(time.perf_counter() - t0)
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    size = len(encode_store(ZONE, 1, records))
    print(f"records:               {args.records}")
    print(f"file size:             {size / 1024:.0f} KiB")
    print(f"read (read+decode+RecordSet), median of {args.runs}: {statistics.median(reads) * 1000:.1f} ms "
          f"(min {min(reads) * 1000:.1f} ms, max {max(reads) * 1000:.1f} ms)")
    print(f"bare json.loads,       median of {args.runs}: {statistics.median(decodes) * 1000:.1f} ms")
    print(f"peak RSS:              {rss_after / 1024:.1f} MiB (before reads: {rss_before / 1024:.1f} MiB)")


if __name__ == "__main__":
    main()
