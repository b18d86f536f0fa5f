"""What `gitdns status` and `gitdns history` check alike before reading anything: --branch,
--state-dir, and history's --path (they accepted an empty or unusable value and failed later, or
wrote into the current directory)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands.git.read import check_branch, scratch_dir
from gitdns.errors import ConfigError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, timeout=30)
    return path


@pytest.mark.parametrize("verb", [["status"], ["history", "api.example.com"]])
@pytest.mark.parametrize(("flags", "said"), [
    (["--branch", ""], "--branch is empty"),
    (["--branch", "a..b"], "--branch a..b: not a branch name git accepts"),
    (["--state-dir", ""], "--state-dir is empty"),
])
def test_unusable_values_are_refused_naming_the_flag(repo: Path, verb: list[str], flags: list[str], said: str,
                                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main([*verb, "--repo", str(repo), *flags]) == 1
    err = capsys.readouterr().err
    assert said in err and "(reason: InvalidConfiguration)" in err, err
    assert list(cwd.iterdir()) == []  # nothing written where the command ran


def test_history_refuses_an_absolute_path(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "api.example.com", "--repo", str(repo), "--path", "/abs"]) == 1
    assert "--path /abs: a directory inside the repository is wanted, relative to its top (not an absolute " \
           "path)" in capsys.readouterr().err


def test_the_shared_checks(tmp_path: Path) -> None:
    for good in ("main", "release/2024", "feature-x"):
        check_branch(good)
    for bad in (" ", "-x", "a b", "x.lock", "@", "a~1"):
        with pytest.raises(ConfigError, match="--branch"):
            check_branch(bad)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"--state-dir .*file/status cannot be created"), \
            scratch_dir(tmp_path / "file", "status"):
        pass
    with scratch_dir(tmp_path / "kept", "status") as kept:
        assert kept == tmp_path / "kept" / "status" and kept.is_dir()
