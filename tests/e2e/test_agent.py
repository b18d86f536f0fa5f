"""`gitdns agent` as real processes against a local bare repository and one `local` zone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitdns.core.records import RecordKey
from gitdns.providers.local import LocalProvider
from tests.e2e.agent_kit import AgentProcess, DesiredRepo, git, run_once

CLUSTERS = ("eu-west-1", "eu-central-1", "us-east-1")


@pytest.fixture
def repo(tmp_path: Path) -> DesiredRepo:
    return DesiredRepo(tmp_path)


def data(repo: DesiredRepo, zone: str = "example.com") -> dict[RecordKey, tuple[str, ...]]:
    return {r.key: r.values for r in LocalProvider(repo.zones).read(zone).records
            if not r.name.startswith(("kuadrant-", "gitdns-"))}


def test_once_applies_pushes_status_and_is_idempotent(repo: DesiredRepo, tmp_path: Path) -> None:
    done = run_once(repo, "eu-west-1", tmp_path / "a")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ready" in done.stdout
    assert RecordKey("api.example.com", "CNAME") in data(repo)
    branches = git("branch", "--list", "gitdns-status/*", cwd=repo.bare)
    assert "gitdns-status/" in branches
    status_sha = git("rev-parse", f"refs/heads/{branches.split()[-1]}", cwd=repo.bare)
    again = run_once(repo, "eu-west-1", tmp_path / "a")
    assert again.returncode == 0
    assert git("rev-parse", f"refs/heads/{branches.split()[-1]}", cwd=repo.bare) == status_sha  # unchanged
    assert git("rev-parse", "refs/heads/main", cwd=repo.bare) == git("rev-parse", "HEAD", cwd=repo.work)


def test_three_agents_share_one_zone(repo: DesiredRepo, tmp_path: Path) -> None:
    for cluster in CLUSTERS:
        done = run_once(repo, cluster, tmp_path / cluster)
        assert done.returncode == 0, done.stdout + done.stderr
    zone = data(repo)
    assert zone[RecordKey("klb.api.example.com", "CNAME", "US")] == ("us.klb.api.example.com",)
    assert len([k for k in zone if k.name == "geo-eu.klb.api.example.com"]) == 2


def test_invalid_commit_holds_its_zone_and_reports_file_and_line(repo: DesiredRepo, tmp_path: Path) -> None:
    assert run_once(repo, "eu-west-1", tmp_path / "a").returncode == 0
    before = data(repo)
    policy = next(p for p in (repo.work / "policies").glob("*.yaml") if "loadbalanced" in p.read_text())
    policy.write_text(policy.read_text().replace("defaultWeight: 120", "defaultWeight: -1"))
    repo.commit("break a policy")
    done = run_once(repo, "eu-west-1", tmp_path / "a")
    assert done.returncode == 1
    assert "NotReady" in done.stdout
    assert data(repo) == before
    summary = git("show", "refs/heads/gitdns-status/3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63:zones/example.com.yaml",
                  cwd=repo.bare)
    assert "held: true" in summary and f"policies/{policy.name}:" in summary


def test_force_push_to_an_older_commit_is_refused(repo: DesiredRepo, tmp_path: Path) -> None:
    first = git("rev-parse", "HEAD", cwd=repo.work)
    assert run_once(repo, "eu-west-1", tmp_path / "a").returncode == 0
    repo.write("records/extra.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n  name: extra\n"
                                     "spec:\n  zone: example-com\n  records:\n"
                                     "    - {name: extra, type: A, values: [192.0.2.99]}\n")
    repo.commit("extra record")
    assert run_once(repo, "eu-west-1", tmp_path / "a").returncode == 0
    repo.force_push(first)
    done = run_once(repo, "eu-west-1", tmp_path / "a")
    assert "RollbackRefused" in done.stdout
    assert RecordKey("extra.example.com", "A") in data(repo)


def test_two_agents_with_one_cluster_id_one_waits(repo: DesiredRepo, tmp_path: Path) -> None:
    first = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "1")
    try:
        assert first.wait(lambda: first.get("/readyz")[0] == 200, 60), first.log.read_text()
        second = run_once(repo, "eu-west-1", tmp_path / "b")
        assert second.returncode == 1
        assert "LeaseHeld" in second.stdout and "held by" in second.stdout
    finally:
        assert first.stop() == 0


def test_long_running_agent_follows_git_and_serves_endpoints(repo: DesiredRepo, tmp_path: Path) -> None:
    agent = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "1")
    try:
        assert agent.wait(lambda: agent.get("/readyz")[0] == 200, 60), agent.log.read_text()
        assert agent.get("/healthz")[0] == 200
        code, metrics = agent.get("/metrics")
        assert code == 200 and b"gitdns_ready 1.0" in metrics
        repo.write("records/extra.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n"
                                         "  name: extra\nspec:\n  zone: example-com\n  records:\n"
                                         "    - {name: extra, type: A, values: [192.0.2.99]}\n")
        sha = repo.commit("add extra")
        assert agent.wait(lambda: RecordKey("extra.example.com", "A") in data(repo), 30)
        assert agent.wait(lambda: sha in json.dumps(agent.status()), 30)
        summary = agent.status()["summary.yaml"]
        assert isinstance(summary, dict) and summary["appliedRevision"] == sha and summary["ready"]
    finally:
        assert agent.stop() == 0
