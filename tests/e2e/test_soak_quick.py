"""CI's run of the soak (bench/soak.py --quick): agents as separate processes on `local`, real
BIND and moto's Route53, random desired-state commits and injected provider faults.  It checks
the counts the soak prints — faults were injected, no invariant was violated, no agent crashed,
the faults were stopped and the zone checked after, each agent's peak memory was read — never a
time.

Without ``named`` or moto it skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.dns_servers import ToolMissing, find_tool

ROOT = Path(__file__).resolve().parents[2]
SEED = 30

pytestmark = pytest.mark.slow


def _servers() -> None:
    try:
        find_tool("named")
        if not all(importlib.util.find_spec(m) for m in ("moto", "flask", "flask_cors", "boto3")):
            raise ToolMissing("moto is not installed: pip install moto flask flask-cors boto3")
    except ToolMissing as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def test_the_quick_soak_finds_no_violation_and_no_crash() -> None:
    _servers()
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "soak.py"), "--quick", "--seed", str(SEED)],
                          cwd=ROOT, capture_output=True, text=True, timeout=420, check=False,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    out = done.stdout + done.stderr
    for backend in ("local", "bind", "route53"):
        cycles = re.search(rf"^\[{backend}\] cycles: (\d+)", done.stdout, re.M)
        faults = re.search(rf"^\[{backend}\] faults injected: (\d+)", done.stdout, re.M)
        assert cycles and faults, f"{backend}: no report\n{out[-6000:]}"
        assert int(cycles.group(1)) >= 5 and int(faults.group(1)) > 0, out[-6000:]
        assert f"[{backend}] invariant violations: 0" in done.stdout, out[-6000:]
        assert f"[{backend}] crashes: 0" in done.stdout, out[-6000:]
        assert f"[{backend}] seed: {SEED}" in done.stdout
        stops = re.search(rf"^\[{backend}\] after faults stopped: .* over (\d+) stop\(s\)", done.stdout, re.M)
        assert stops and int(stops.group(1)) >= 1, out[-6000:]
        peak = re.search(rf"^\[{backend}\] agent peak memory \(VmHWM before SIGTERM\): max ([\d.]+) MiB",
                         done.stdout, re.M)
        assert peak and float(peak.group(1)) > 0, out[-6000:]
    assert done.returncode == 0, out[-6000:]
    assert re.search(r"^soak total: .*invariant violations 0, crashes 0", done.stdout, re.M), out[-6000:]
