"""Smoke run of bench/bench_git_hosts.py: ``--quick`` in a subprocess (real sshd, nginx + git
http-backend, agents), so that CI keeps the bench working.  It checks that the run is whole
(exit 0) and prints every figure; it never checks a time or a target's verdict.

Without the server binaries it skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.git_servers import ToolMissing, find_tool

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "bench" / "bench_git_hosts.py"
TOOLS = ("sshd", "ssh", "ssh-keygen", "git", "git-shell", "nginx", "fcgiwrap", "openssl")
FIGURES = (
    "[latency] one plain `git ls-remote` over this sshd",
    "[latency/webhook] push returned -> value in the zone: p50",
    "[latency/webhook] push returned -> status commit naming it on the remote: p50",
    "[latency/poll] push returned -> value in the zone: p50",
    "[latency/poll] push returned -> status commit naming it on the remote: p50",
    "[idle] per poll:",
    "[fleet] round 1 first push (orphan): landed ",
    "[fleet] remote tips are the commits the processes returned last: yes",
    "| webhook: push -> zone, p50 |",
    "| webhook: push -> status commit on the remote, p50 |",
    "| fleet round 1: 20 status pushes land |",
)

pytestmark = pytest.mark.slow


def test_bench_git_hosts_quick_runs_whole_and_prints_its_figures() -> None:
    try:
        for tool in TOOLS:
            find_tool(tool)
    except ToolMissing as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    done = subprocess.run([sys.executable, str(BENCH), "--quick"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    missing = [line for line in FIGURES if line not in done.stdout]
    assert not missing, f"figures not printed: {missing}\n{output[-5000:]}"
    assert "BROKEN" not in done.stdout, output[-5000:]
