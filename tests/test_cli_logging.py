"""A one-shot command says a failure once (its error line); the modules' log lines of the same
failure (here: git cannot fetch from a repository that does not exist) show only at GITDNS_LOG_LEVEL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, **env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k != "GITDNS_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-m", "gitdns", "history", "api.example.com", "--repo",
                           str(tmp_path / "no-such-repo")], capture_output=True, text=True, timeout=60, check=False,
                          env={**base, "PYTHONPATH": str(ROOT), **env})
    assert done.returncode == 1
    return done.stderr.splitlines()


def test_a_failure_is_said_once(tmp_path: Path) -> None:
    lines = _run(tmp_path)
    assert len(lines) == 1, lines
    assert lines[0].startswith("gitdns: git fetch ") and "(reason: RepositoryNotFound)" in lines[0]


def test_the_log_shows_at_gitdns_log_level(tmp_path: Path) -> None:
    lines = _run(tmp_path, GITDNS_LOG_LEVEL="warning")
    assert len(lines) == 2, lines
    assert lines[0].startswith("gitdns: log: WARNING gitdns.adapters.git.cache: failed: command=fetch")
    assert lines[1].endswith("(reason: RepositoryNotFound)")
