"""Smoke run of bench/bench_route53_octodns.py ``--quick``: gitdns against a loopback moto_server
behind the counting proxy, which serves HTTPS with the test CA, reached through
``--provider-endpoints`` as an operator allows it.  It checks that gitdns really talked to the
service and that every first-sync and change request is as few as the characters and values
sent allow (Route53: 32,000 characters, 1,000 values per request); it never checks a time."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "bench" / "bench_route53_octodns.py"

pytestmark = pytest.mark.slow


def test_bench_route53_quick_reaches_the_service_in_the_fewest_requests(tmp_path: Path) -> None:
    pytest.importorskip("moto.server")
    if not Path("/usr/bin/time").exists() or shutil.which("git") is None:
        pytest.skip("the bench needs /usr/bin/time and git")
    out = tmp_path / "quick.json"
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--initial-repeat", "2", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    result = json.loads(out.read_text())
    rows = {r["step"]: r for r in result["rows"] if r["tool"] == "gitdns"}
    assert set(rows) >= {"floor", "initial", "initial#2", "noop", "change1pct", "change1rec"}, output[-3000:]
    # the second initial sync went into a fresh, empty zone: it created every record again
    assert rows["initial#2"]["plan"] == rows["initial"]["plan"], (rows["initial#2"]["plan"], rows["initial"]["plan"])
    for step, row in rows.items():
        assert row["exit"] == 0, (step, output[-3000:])
    initial = rows["initial"]
    assert "applied=" in initial["plan"] and "errors" not in initial["plan"], initial["plan"]
    creates = int(initial["plan"].split("create=")[1].split(",")[0])
    assert creates == result["records"]  # every record (its ownership TXT counted apart)
    sizes = initial["sizes"]
    values, chars = sum(v for v, _ in sizes), sum(c for _, c in sizes)
    assert chars > 32_000  # more than one request's worth: the bound is exercised
    fewest = max(math.ceil(values / 1000), math.ceil(chars / 32_000))
    assert len(sizes) == fewest == initial["calls"]["ChangeResourceRecordSets"]
    assert all(v <= 1000 and c <= 32_000 for v, c in sizes)
    assert rows["noop"]["calls"].get("ChangeResourceRecordSets", 0) == 0
    verdicts = {target: verdict for target, _, _, verdict in result["verdicts"]}
    assert all(v == "PASS" for t, v in verdicts.items() if "fewest possible" in t or "over Route53" in t), verdicts
    second = result["agent"]["second"]
    assert second["calls"]["ChangeResourceRecordSets"] == 1 and not any(second["errors"]), second


def test_bench_route53_profiles_moto_single_threaded(tmp_path: Path) -> None:
    """``--profile-moto``: each moto runs under "moto_profiled.py" (one thread, cProfile) and the
    bench prints where its CPU went while serving each tool."""
    pytest.importorskip("moto.server")
    if not Path("/usr/bin/time").exists() or shutil.which("git") is None:
        pytest.skip("the bench needs /usr/bin/time and git")
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--no-agent", "--profile-moto"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    block = output.split("== moto serving gitdns:", 1)[1].split("\n==", 1)[0]
    assert " s busy" in block, block
    lines = [line for line in block.splitlines() if line.strip().startswith("own")]
    assert len(lines) == 10 and any("moto/" in line for line in lines), block  # moto's own code was profiled
