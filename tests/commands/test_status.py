"""`gitdns status`: status branches published to a local bare repository, read back and aggregated."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from gitdns.adapters.status.branch import StatusBranch
from gitdns.cli import main
from gitdns.commands.status.command import lag_text, same_commit, with_lag
from gitdns.core.conditions import Condition
from gitdns.core.records import RecordSet
from gitdns.core.status.doc import dump
from gitdns.core.status.report import ClusterReport, ZoneReport, documents

A_ID, B_ID = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63", "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"
CLUSTERS = (f"kind: Cluster\nmetadata: {{name: eu-west-1}}\nspec: {{id: {A_ID}}}\n---\n"
            f"kind: Cluster\nmetadata: {{name: us-east-1}}\nspec: {{id: {B_ID}}}\n")


def git(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    base = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": "alice@example.com",
            "GIT_COMMITTER_NAME": "Alice", "GIT_COMMITTER_EMAIL": "alice@example.com",
            "GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000"}
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **base, **(env or {})},
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def report(name: str, cid: str, *, ready: bool, applied: str, desired: str) -> ClusterReport:
    zone = ZoneReport("example.com", "local", held=not ready,
                      problems=() if ready else ("policies/api.yaml:10: not valid YAML",),
                      owned=(RecordSet("api.example.com", "CNAME", 300, ("klb.api.example.com",)),),
                      applied_revision=applied)
    conditions = (Condition("Ready", True, "ReconcileSucceeded") if ready
                  else Condition("Ready", False, "ZoneHeld", "zone example.com is held"),)
    return ClusterReport(cluster=name, cluster_id=cid, mode="default", group="site-a",
                         desired_revision=desired, applied_revision=applied, attempted_revision=desired,
                         conditions=conditions, zones=(zone,), policies={"api": ["api.example.com"]},
                         heartbeat=1_700_000_000.0)


def publish(url: str, workdir: Path, rep: ClusterReport) -> None:
    files = {path: dump(doc) for path, doc in documents(rep).items()}
    branch = StatusBranch(url, rep.cluster_id, workdir=workdir)
    assert branch.publish(files, f"status({rep.cluster}): {'Ready' if rep.ready else 'NotReady'}") is not None


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A bare repo with two desired commits on main; eu-west-1 applied the head and is Ready,
    us-east-1 is still on the first commit and NotReady."""
    root = tmp_path_factory.mktemp("status")
    bare, work = root / "remote.git", root / "work"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=root)
    git("init", "-q", "-b", "main", str(work), cwd=root)
    (work / "zone.yaml").write_text("kind: Zone\n", encoding="utf-8")
    (work / "clusters.yaml").write_text(CLUSTERS, encoding="utf-8")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "first", cwd=work)
    old = git("rev-parse", "HEAD", cwd=work)
    (work / "zone.yaml").write_text("kind: Zone\n# second\n", encoding="utf-8")
    git("commit", "-q", "-am", "second", cwd=work)
    head = git("rev-parse", "HEAD", cwd=work)
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=work)
    publish(bare.as_uri(), root / "agent-a", report("eu-west-1", A_ID, ready=True, applied=head, desired=head))
    publish(bare.as_uri(), root / "agent-b", report("us-east-1", B_ID, ready=False, applied=old, desired=head))
    return bare, old, head


def test_status_of_a_fleet_not_ready(fleet: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    bare, old, head = fleet
    assert main(["status", "--repo", str(bare)]) == 1
    out = capsys.readouterr().out
    assert "eu-west-1" in out and "us-east-1" in out
    assert "1/2 clusters ready" in out and "NOT READY" in out
    assert "held:example.com" in out
    assert f"desired head (main): {head[:7]}" in out
    assert f"behind {head[:7]}: us-east-1 (applied {old[:7]})" in out
    assert "eu-west-1 (applied" not in out


def test_status_json_and_one_cluster(fleet: tuple[Path, str, str], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    bare, old, head = fleet
    state = tmp_path / "state"
    assert main(["status", "--repo", bare.as_uri(), "--format", "json", "--state-dir", str(state)]) == 1
    agg = json.loads(capsys.readouterr().out)
    assert agg["ready"] is False and agg["desiredHead"] == head
    assert agg["clusters"][A_ID]["ready"] is True and agg["clusters"][A_ID]["behindHead"] is None
    assert agg["clusters"][B_ID]["behindHead"] == head
    assert agg["clusters"][B_ID]["appliedRevision"] == old
    assert agg["policies"]["api"]["lagging"] == [B_ID]
    assert (state / "status").is_dir()  # the cache is kept under --state-dir

    assert main(["status", "--repo", str(bare), "--cluster", "eu-west-1", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out
    assert "1/1 clusters ready" in out and "us-east-1" not in out
    assert f"every cluster has applied {head[:7]}" in out


def test_unknown_cluster_and_branch(fleet: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    bare, _, _ = fleet
    assert main(["status", "--repo", str(bare), "--cluster", "nowhere"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (f"--cluster nowhere: no cluster has that id or name; the clusters: eu-west-1 ({A_ID}), "
            f"us-east-1 ({B_ID})") in captured.err
    for repo in (str(bare), bare.as_uri()):
        assert main(["status", "--repo", repo, "--branch", "no-such-branch"]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert f"--branch no-such-branch: branch no-such-branch does not exist on {repo}" in captured.err


def test_unreachable_repository_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--repo", (tmp_path / "missing.git").as_uri()]) == 1
    assert "gitdns:" in capsys.readouterr().err


def test_lag_helpers() -> None:
    sha = "a" * 40
    assert same_commit(sha, sha) and same_commit("1700000000.aaaaaaa", sha) and not same_commit("aaa", sha)
    assert not same_commit(None, sha)
    agg = {"clusters": {"x": {"cluster": "x", "appliedRevision": None}}, "ready": False}
    lagged = with_lag(agg, sha, "main")
    assert lagged["clusters"]["x"]["behindHead"] == sha
    assert lag_text(lagged) == "\ndesired head (main): aaaaaaa\nbehind aaaaaaa: x (applied nothing yet)\n"
    assert lag_text(with_lag(agg, None, "main")) == ""
