"""The preview fails open as the agents do: a health-checked host whose every target some
cluster's status branch reports unhealthy keeps all of them (nothing withdrawn); one target
down in a host that still has a healthy one is withdrawn.  Status branches written by hand in
a copy of example-repo (nothing is probed)."""

from __future__ import annotations

import shutil
from pathlib import Path

from gitdns.core.health.filter import fail_open_id, host_targets
from gitdns.reconcile.engine import load
from gitdns.reconcile.run import published
from tests.e2e.agent_kit import ROOT, git

HOST = "api.example.com"


def repo_with_status(tmp_path: Path, down: dict[str, list[str]]) -> Path:
    """example-repo, committed, with a status branch per cluster of ``down`` whose health.yaml
    reports those target ids unhealthy."""
    work = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", work, ignore=shutil.ignore_patterns(".gitdns"))
    git("init", "-q", "-b", "main", str(work))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "desired", cwd=work)
    for cluster_id, targets in down.items():
        git("checkout", "-q", "--orphan", f"gitdns-status/{cluster_id}", cwd=work)
        git("rm", "-rq", "--cached", ".", cwd=work)
        rows = "".join(f"  '{t}': {{state: unhealthy}}\n" for t in targets)
        body = "targets:\n" + rows if targets else "targets: {}\n"
        (work / "health.yaml").write_text(body)
        git("add", "health.yaml", cwd=work)
        git("commit", "-q", "-m", "status", cwd=work)
        (work / "health.yaml").unlink()
        git("checkout", "-q", "-f", "main", cwd=work)
    return work


def api_targets(work: Path) -> dict[str, list[str]]:
    state = load(work).state
    out: dict[str, list[str]] = {}
    for cluster in state.clusters:
        fleet = host_targets(state, cluster)
        if HOST in fleet:
            out[cluster.id] = [t.target_id for t in fleet[HOST].targets if t.own]
    return out


def test_every_target_down_fails_open_in_the_preview(tmp_path: Path) -> None:
    probe = repo_with_status(tmp_path / "probe", {})
    mine = api_targets(probe)
    assert len(mine) >= 2 and all(mine.values()), mine  # several clusters serve the host
    work = repo_with_status(tmp_path / "all", mine)  # each reports its own targets down
    result = published(load(work))
    for cluster_id in mine:
        assert fail_open_id(HOST) in result.unhealthy[cluster_id], result.unhealthy[cluster_id]


def test_one_cluster_down_is_withdrawn_not_failed_open(tmp_path: Path) -> None:
    mine = api_targets(repo_with_status(tmp_path / "probe", {}))
    first = sorted(mine)[0]
    work = repo_with_status(tmp_path / "one", {cid: (mine[cid] if cid == first else []) for cid in mine})
    result = published(load(work))
    assert set(mine[first]) <= result.unhealthy[first]
    assert all(fail_open_id(HOST) not in result.unhealthy[cid] for cid in mine)
