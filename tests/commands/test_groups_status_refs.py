"""`gitdns.commands.groups.status.local_status`: the status branches a repository already holds,
read for `failover simulate` (and for the groups verbs without origin): its local
``gitdns-status/*`` branches and its remote-tracking ``refs/remotes/<remote>/gitdns-status/*``,
the newest of them per cluster, untrusted files capped."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gitdns.commands.groups.status import MAX_FILE, local_status
from tests.commands.test_groups import GIT_ENV, _git_identity, git

__all__ = ["_git_identity"]


def status_commit(repo: Path, ref: str, health: str, when: int) -> str:
    """A commit holding ``health.yaml`` at ``ref``, committed at ``when`` (seconds)."""
    blob = _run(repo, ["hash-object", "-w", "--stdin"], health)
    tree = _run(repo, ["mktree"], f"100644 blob {blob}\thealth.yaml\n")
    env = {"GIT_COMMITTER_DATE": f"{when} +0000", "GIT_AUTHOR_DATE": f"{when} +0000"}
    sha = _run(repo, ["commit-tree", tree, "-m", "status"], "", env)
    git("update-ref", ref, sha, cwd=repo)
    return sha


def _run(repo: Path, args: list[str], stdin: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, text=True, capture_output=True, check=False,
                          env={**os.environ, **GIT_ENV, **(env or {})}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_newest_of_a_local_branch_and_its_remote_tracking_ref_is_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    old = "targets:\n  a|192.0.2.1: {state: unhealthy}\n"
    new = "targets:\n  a|192.0.2.1: {state: healthy}\n"
    status_commit(repo, "refs/heads/gitdns-status/one", old, 1_700_000_000)  # a stale local branch
    newest = status_commit(repo, "refs/remotes/origin/gitdns-status/one", new, 1_700_000_100)
    status_commit(repo, "refs/remotes/origin/gitdns-status/two", new, 1_700_000_000)
    local = status_commit(repo, "refs/heads/gitdns-status/two", old, 1_700_000_050)  # newer than origin's
    status_commit(repo, "refs/remotes/origin/gitdns-status/x/y", new, 1_700_000_000)  # not a cluster id
    status_commit(repo, "refs/remotes/origin/other/three", new, 1_700_000_000)  # not a status branch
    found = local_status(repo)
    assert not found.error and not found.fetched
    assert sorted(found.trees) == ["one", "two"]
    assert found.trees["one"].sha == newest and found.trees["one"].files["health.yaml"] == new
    assert found.trees["two"].sha == local and found.trees["two"].files["health.yaml"] == old


def test_a_file_over_the_cap_is_not_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    status_commit(repo, "refs/heads/gitdns-status/big", "#" * (MAX_FILE + 1) + "\n", 1_700_000_000)
    found = local_status(repo)
    assert not found.error and found.trees["big"].files == {}  # the branch is there; its file says nothing


def test_outside_a_repository_the_reason_is_given(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    found = local_status(plain)
    assert found.trees == {} and found.error == f"{plain} is not in a git repository"
