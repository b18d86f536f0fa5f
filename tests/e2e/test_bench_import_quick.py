"""Smoke run of bench/bench_import.py ``--quick``: `gitdns import` of a 300-record zone from a real
BIND (AXFR) and from moto Route53 (over the bench's TLS proxy), through the real CLI, measured
with os.wait4.  It checks that every row is there and sane (records written, CPU and RSS
measured, Route53 really asked); never a time.  Without ``named`` or moto it skips, except under
``CI=true`` where it fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import dns_servers
from tests.providers.moto_server import moto_missing

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "bench" / "bench_import.py"

pytestmark = pytest.mark.slow


def test_bench_import_quick_writes_sane_rows(tmp_path: Path) -> None:
    try:
        dns_servers.find_tool("named")
        missing = moto_missing()
        if missing:
            raise dns_servers.ToolMissing(missing)
    except dns_servers.ToolMissing as exc:
        dns_servers.require(exc)
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--json", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    result = json.loads(out.read_text())
    assert result["records"] == 300 and result["runs"] == 1
    rows = {(r["backend"], r["tool"]): r for r in result["rows"]}
    assert set(rows) == {("bind", "gitdns"), ("route53", "gitdns")}, output[-3000:]
    for key, row in rows.items():
        assert row["exit"] == 0 and not row["note"], (key, row)
        # zone_records(300): 300 hosts, 1 delegation, 1 wildcard; BIND also serves its own ns1 A
        assert 300 < row["records"] < 310, (key, row)
        assert row["cpu"] > 0 and row["wall"] > 0, (key, row)
        assert 10 < row["rss_mib"] < 1024, (key, row)
    assert rows[("bind", "gitdns")]["records"] == rows[("route53", "gitdns")]["records"] + 1
    assert rows[("route53", "gitdns")]["calls"].get("ListResourceRecordSets", 0) >= 1
    assert "| bind | gitdns | 1 |" in done.stdout and "| route53 | gitdns | 1 |" in done.stdout
