"""Smoke run of bench/bench_history.py: ``--quick`` in a subprocess (a fast-import repository,
status branches, `gitdns history` cold and warm), so that CI keeps the bench working.  It
checks that the run is whole and prints its figures; it never checks a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "bench" / "bench_history.py"

pytestmark = pytest.mark.slow


def test_bench_history_quick_runs_whole_and_prints_its_figures() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--quick"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    for figure in ("[setup] 2000 commits (50 touching YAML), 3 status branches", "[history/cold] api.example.com:",
                   "[history/warm] api.example.com:", "| history api.example.com, 2000 commits, 3 status branches"):
        assert figure in done.stdout, output[-5000:]
    warm = [line for line in done.stdout.splitlines() if line.startswith("[history/warm]")]
    assert all("51 YAML commits walked" in line and "3 status branches" in line for line in warm), output
    assert all(" 0 applied-at marks" not in line and " 0 health entries" not in line for line in warm), output
