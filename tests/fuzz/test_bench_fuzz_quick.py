"""Smoke run of bench/fuzz.py: ``--quick`` in a subprocess, every must-be-zero count at 0."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "fuzz.py"

pytestmark = pytest.mark.slow


def test_quick_run_prints_the_counts_and_passes() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--quick"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    counts = dict(re.findall(r"^\[fuzz\] (.+?): (\d+)$", done.stdout, re.MULTILINE))
    assert int(counts["documents: examples run"]) == 30 and int(counts["ownership TXT: examples run"]) == 20
    assert int(counts["ownership TXT: malformed TXT records put into zones"]) > 0
    zero = [label for label, value in counts.items() if "must be 0" in label and value != "0"]
    assert zero == [] and done.stdout.rstrip().endswith("[fuzz] PASS"), done.stdout
