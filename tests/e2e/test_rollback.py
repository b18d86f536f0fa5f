"""Rollback protection fails closed, with real `gitdns agent` processes and a real bare remote:
delete the cluster's status branch, force-push the desired branch back, restart the agent with
a new state directory — the older head is still refused, because the cluster's own ownership
records in the zone carry the revision it applied last."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.agent_kit import AgentProcess, DesiredRepo, git, run_once
from tests.e2e.faults_kit import conditions, data, metric

CLUSTER_ID = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # example-repo/clusters/eu-west-1.yaml


def advance(repo: DesiredRepo) -> tuple[str, str]:
    """The first commit, and a second one changing eu-west-1's addresses (pushed)."""
    first = git("rev-parse", "HEAD", cwd=repo.work)
    cluster = repo.work / "clusters" / "eu-west-1.yaml"
    cluster.write_text(cluster.read_text().replace("192.0.2.", "203.0.113."))
    return first, repo.commit("new addresses for eu-west-1")


def delete_status_branch(repo: DesiredRepo) -> None:
    subprocess.run(["git", "--git-dir", str(repo.bare), "update-ref", "-d", f"refs/heads/gitdns-status/{CLUSTER_ID}"],
                   check=True, timeout=30)


def test_force_push_back_is_refused_after_status_and_state_are_lost(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    first, second = advance(repo)
    done = run_once(repo, "eu-west-1", tmp_path / "state-1")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    after = data(repo)
    delete_status_branch(repo)
    repo.force_push(first)
    again = run_once(repo, "eu-west-1", tmp_path / "state-2")  # a new state directory
    assert again.returncode == 1, again.stdout + again.stderr[-3000:]
    assert "SourceAvailable: RollbackRefused" in again.stdout, again.stdout
    assert second[:7] in again.stdout and "example.com" in again.stdout
    assert data(repo) == after  # nothing of the older head reached the zone
    # the same restart, with the state directory kept: its own record refuses it too
    kept = run_once(repo, "eu-west-1", tmp_path / "state-1")
    assert kept.returncode == 1 and "RollbackRefused" in kept.stdout, kept.stdout
    assert data(repo) == after
    # an operator who means it
    allowed = run_once(repo, "eu-west-1", tmp_path / "state-3", "--allow-rollback")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr[-3000:]
    assert data(repo) != after


def test_a_long_running_agent_reports_and_counts_the_refusal(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    first, _second = advance(repo)
    done = run_once(repo, "eu-west-1", tmp_path / "state-1")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    delete_status_branch(repo)
    repo.force_push(first)
    agent = AgentProcess(repo, "eu-west-1", tmp_path / "state-2", "--poll-interval", "1")
    try:
        assert agent.wait(lambda: conditions(agent.status()).get("SourceAvailable")
                          == ("False", "RollbackRefused"), 90), agent.log.read_text()[-3000:]
        assert agent.wait(lambda: metric(agent, 'gitdns_head_refusals_total{reason="RollbackRefused"}') == 1, 30)
        assert agent.get("/healthz")[0] == 200 and agent.get("/readyz")[0] == 503
    finally:
        assert agent.stop() == 0
