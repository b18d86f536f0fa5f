"""`gitdns validate` on a directory with no desired state warns (the wrong path, most likely)
instead of saying a bare "valid"; a real repository gets no such warning."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gitdns.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "example-repo"


def test_an_empty_directory_and_a_bare_repository_are_warned(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("not the desired state\n")
    assert main(["validate", str(tmp_path / "empty")]) == 0
    out = capsys.readouterr().out
    assert f"warning: {tmp_path / 'empty'}: .: no desired state here" in out
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "origin.git")], check=True)
    assert main(["validate", str(tmp_path / "origin.git"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [w["code"] for w in doc["warnings"]] == ["NoDesiredState"]
    assert "(a bare git repository)" in doc["warnings"][0]["message"]


def test_a_desired_repository_is_not_warned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE), "--format", "json"]) == 0
    assert "NoDesiredState" not in capsys.readouterr().out
