"""`gitdns status` on a real history: applied at, lag, last error, a retired cluster, --revision."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.status.branch import StatusBranch
from gitdns.cli import main
from gitdns.commands.status.command import fleet_status, iso
from gitdns.core.conditions import Condition
from gitdns.core.status.doc import dump
from gitdns.core.status.report import ClusterReport, documents

IDS = {"a": "0a0a0a0a-0000-4000-8000-00000000000a", "b": "0b0b0b0b-0000-4000-8000-00000000000b",
       "c": "0c0c0c0c-0000-4000-8000-00000000000c", "e": "0e0e0e0e-0000-4000-8000-00000000000e",
       "d": "0d0d0d0d-0000-4000-8000-00000000000d"}  # d: never in git


def git(*args: str, cwd: Path, when: int = 1_700_000_000) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
           "GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": "alice@example.com",
           "GIT_COMMITTER_NAME": "Alice", "GIT_COMMITTER_EMAIL": "alice@example.com",
           "GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def clusters(*names: str) -> str:
    return "---\n".join(f"kind: Cluster\nmetadata: {{name: {n}}}\nspec: {{id: {IDS[n]}}}\n" for n in names)


def push(url: str, root: Path, name: str, *, applied: str, attempted: str, ready: bool) -> None:
    cond = (Condition("Ready", True, "ReconcileSucceeded", f"applied {applied[:7]}") if ready
            else Condition("Ready", False, "ProviderError", "example.com: the provider refused the change"))
    rep = ClusterReport(cluster=name, cluster_id=IDS[name], mode="default", group=None, desired_revision=attempted,
                        applied_revision=applied, attempted_revision=attempted, conditions=(cond,), zones=(),
                        policies={}, heartbeat=1_700_000_000.0)
    files = {path: dump(doc) for path, doc in documents(rep).items()}
    assert StatusBranch(url, IDS[name], workdir=root / f"agent-{name}").publish(files, f"status({name})")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Desired c1..c4 (c3 removes Cluster c); a applied c1 then c4; b applied c1 and failed c4;
    c applied c1 then c3 (its removal); e applied c1 only; d was never in git."""
    root = tmp_path_factory.mktemp("statushist")
    bare, work = root / "remote.git", root / "work"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=root)
    git("init", "-q", "-b", "main", str(work), cwd=root)
    shas = []
    for i, names in enumerate((("a", "b", "c", "e"), ("a", "b", "c", "e"), ("a", "b", "e"), ("a", "b", "e"))):
        (work / "clusters.yaml").write_text(clusters(*names), encoding="utf-8")
        (work / "zone.yaml").write_text(f"kind: Zone\n# {i}\n", encoding="utf-8")
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", f"c{i + 1}", cwd=work, when=1_700_000_000 + 3600 * i)
        shas.append(git("rev-parse", "HEAD", cwd=work))
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=work)
    c1, _, c3, c4 = shas
    url = bare.as_uri()
    push(url, root, "a", applied=c1, attempted=c1, ready=True)
    push(url, root, "a", applied=c4, attempted=c4, ready=True)
    push(url, root, "b", applied=c1, attempted=c1, ready=True)
    push(url, root, "b", applied=c1, attempted=c4, ready=False)
    push(url, root, "c", applied=c1, attempted=c1, ready=True)
    push(url, root, "c", applied=c3, attempted=c3, ready=True)
    push(url, root, "e", applied=c1, attempted=c1, ready=True)
    push(url, root, "d", applied=c1, attempted=c1, ready=True)
    return bare, shas


def test_history_fields(fleet: tuple[Path, list[str]]) -> None:
    bare, (_, _, c3, _) = fleet
    now = 1_700_000_000 + 3600 * 10
    agg: dict[str, Any] = fleet_status(str(bare), now=now)
    cl = {c["cluster"]: c for c in agg["clusters"].values()}
    assert cl["a"]["lag"] == {"commits": 0, "since": None, "seconds": 0} and cl["a"]["lastError"] is None
    assert cl["a"]["appliedAt"] is not None
    # b: three commits behind, since c2 (1 h after c1), and its last error is the current one
    assert cl["b"]["lag"] == {"commits": 3, "since": iso(1_700_003_600), "seconds": now - 1_700_003_600}
    assert cl["b"]["lastError"]["reason"] == "ProviderError" and cl["b"]["lastError"]["current"] is True
    # e: applied c1 in its only push: behind by 3, no error
    assert cl["e"]["lag"]["commits"] == 3 and cl["e"]["lastError"] is None
    # c: retired in c3, and its agent applied c3 (the removal) in its second push
    assert cl["c"]["retired"] is True and cl["c"]["lag"] is None
    assert cl["c"]["removedFromGit"]["revision"] == c3 and cl["c"]["removedFromGit"]["subject"] == "c3"
    assert cl["c"]["recordsRemoved"]["appliedRevision"] == c3
    # d: never named by git: retired, removal not found, records not removed by its agent
    assert cl["d"]["retired"] is True and cl["d"]["removedFromGit"] is None and cl["d"]["recordsRemoved"] is None
    # retired clusters are out of the counts and readiness; b is NotReady
    assert agg["counts"]["clusters"] == 3 and agg["counts"]["clustersRetired"] == 2
    assert agg["ready"] is False


def test_retired_are_not_ready_blockers(fleet: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    bare, _ = fleet
    assert main(["status", "--repo", str(bare), "--cluster", "c"]) == 0  # a retired cluster is not a failure
    out = capsys.readouterr().out
    assert "Retired" in out and "RETIRED" in out and "0/0 clusters ready, 0/0 policies ready, 1 retired\n" in out
    assert "NOT READY" not in out and "every cluster has applied" not in out
    assert main(["status", "--repo", str(bare), "--cluster", "a"]) == 0
    out = capsys.readouterr().out
    assert "a " in out and "Ready" in out


def test_text_shows_lag_and_errors(fleet: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    bare, _ = fleet
    assert main(["status", "--repo", str(bare)]) == 1
    out = capsys.readouterr().out
    assert "APPLIED AT" in out and "LAG" in out and "3 commits, " in out
    assert "LAST ERROR" in out and "ProviderError: example.com: the provider refused the change" in out
    assert "not by its agent: gitdns prune-owner " + IDS["d"] in out
    behind = next(line for line in out.splitlines() if line.startswith("behind "))
    assert "b (applied" in behind and "e (applied" in behind and "c (applied" not in behind  # retired: not lagging


def test_revision_across_the_fleet(fleet: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    bare, (c1, c2, _, _) = fleet
    assert main(["status", "--repo", str(bare), "--revision", c2[:9], "--format", "json"]) == 1
    rev = json.loads(capsys.readouterr().out)
    states = {r["cluster"]: r["state"] for r in rev["clusters"].values()}
    assert rev["revision"] == c2
    assert states == {"a": "applied", "b": "failed", "c": "retired", "d": "retired", "e": "pending"}
    assert rev["clusters"][IDS["b"]]["reason"] == "ProviderError"
    assert rev["counts"] == {"applied": 1, "pending": 1, "held": 0, "failed": 1, "retired": 2, "unpublished": 0}
    retired_c, retired_d = rev["clusters"][IDS["c"]], rev["clusters"][IDS["d"]]
    assert retired_c["at"] and retired_c["appliedRevision"]  # c applied it before it left: when is kept
    assert "at" not in retired_d  # d never did
    assert main(["status", "--repo", str(bare), "--revision", c2[:9]]) == 1
    text = capsys.readouterr().out
    assert f"retired  {retired_c['at']}  no longer in git; had applied it" in text
    assert "no longer in git; never applied it" in text
    assert main(["status", "--repo", str(bare), "--revision", c1]) == 0  # every active cluster applied c1
    out = capsys.readouterr().out
    assert f"revision {c1[:7]}" in out and "3 applied, 2 retired" in out


def test_revision_not_on_the_branch(fleet: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    bare, _ = fleet
    assert main(["status", "--repo", str(bare), "--revision", "f" * 40]) == 1
    assert "--revision ffffffffffffffffffffffffffffffffffffffff: no commit of the desired branch main of " in (
        capsys.readouterr().err)


def test_helpers_are_used_as_documented() -> None:
    assert iso(0) == "1970-01-01T00:00:00Z" and iso(None) is None


def test_a_held_zone_at_a_later_good_revision_has_applied_it(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A held zone stays at its last good revision (its document's appliedRevision label): a commit
    that revision contains is applied there, a later one is held."""
    from gitdns.core.status.report import ZoneReport

    bare, work = tmp_path / "remote.git", tmp_path / "work"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    shas = []
    for i in range(3):
        (work / "clusters.yaml").write_text(clusters("a"), encoding="utf-8")
        (work / "zone.yaml").write_text(f"kind: Zone\n# {i}\n", encoding="utf-8")
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", f"d{i + 1}", cwd=work, when=1_700_000_000 + 60 * i)
        shas.append(git("rev-parse", "HEAD", cwd=work))
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=work)
    d1, d2, d3 = shas
    for applied, zone in ((d1, ZoneReport("example.com", "local", applied_revision=f"1700000000.{d1[:7]}")),
                          (d3, ZoneReport("example.com", "local", held=True, problems=("zone.yaml:2: broken",),
                                          applied_revision=f"1700000060.{d2[:7]}"))):
        cond = Condition("Ready", not zone.held, "ValidationFailed" if zone.held else "ReconcileSucceeded")
        rep = ClusterReport(cluster="a", cluster_id=IDS["a"], mode="default", group=None, desired_revision=applied,
                            applied_revision=applied, attempted_revision=applied, conditions=(cond,), zones=(zone,))
        files = {path: dump(doc) for path, doc in documents(rep).items()}
        assert StatusBranch(bare.as_uri(), IDS["a"], workdir=tmp_path / "agent").publish(files, "status(a)")
    assert main(["status", "--repo", str(bare), "--revision", d2[:7], "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)["clusters"][IDS["a"]]
    assert row["state"] == "applied" and row["appliedRevision"] == d3
    assert main(["status", "--repo", str(bare), "--revision", d3]) == 1
    out = capsys.readouterr().out
    assert f"zone example.com stays at {d2[:7]}: zone.yaml:2: broken" in out and "1 held" in out
