"""Webhook deliveries to a real `gitdns agent` process.

The agent polls every 600 s, so within a test only a delivery (or its own validation job,
which never fetches git) can make it apply a new commit: an applied commit means a
delivery woke it. Cycles are counted through ``/status`` → ``cycles`` (one per poll,
including the first).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.core.records import RecordKey
from tests.e2e.agent_kit import AgentProcess, DesiredRepo
from tests.e2e.faults_kit import (
    CLUSTER_IDS,
    add_record,
    cycles,
    data,
    gitea_push,
    github_push,
    gitlab_push,
    metric,
)

SECRET = b"correct horse battery staple"
TOKEN = "gitlab-hook-token-123"
GITEA_SECRET = b"gitea hook secret 456"
MAIN = "refs/heads/main"
OWN_STATUS = f"refs/heads/gitdns-status/{CLUSTER_IDS['eu-west-1']}"
OTHER_STATUS = f"refs/heads/gitdns-status/{CLUSTER_IDS['us-east-1']}"
QUIET = 3.0  # how long "nothing happens" is watched for (a negative check, never a timing assertion)


@pytest.fixture
def repo(tmp_path: Path) -> DesiredRepo:
    return DesiredRepo(tmp_path)


@pytest.fixture
def agent(repo: DesiredRepo, tmp_path: Path) -> Iterator[AgentProcess]:
    secret = tmp_path / "github-secret"
    secret.write_bytes(SECRET + b"\n")  # a trailing newline, as `echo` writes it, is stripped
    token = tmp_path / "gitlab-token"
    token.write_text(TOKEN + "\n")
    proc = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "600",
                        "--webhook-github-secret-file", str(secret),
                        "--webhook-gitlab-token-file", str(token))
    try:
        assert proc.wait(lambda: proc.get("/readyz")[0] == 200, 90), proc.log.read_text()
        assert cycles(proc) == 1
        yield proc
    finally:
        assert proc.stop() == 0, proc.log.read_text()[-3000:]


def present(repo: DesiredRepo, name: str) -> bool:
    return RecordKey(f"{name}.example.com", "A") in data(repo)


def stays_unchanged(agent: AgentProcess, repo: DesiredRepo, name: str, count: int) -> None:
    """For QUIET seconds: the record stays absent and no cycle runs."""
    assert not agent.wait(lambda: present(repo, name) or cycles(agent) != count, QUIET), (
        f"cycles {cycles(agent)} (was {count}), {name} present: {present(repo, name)}")


def test_github_signed_push_applies_a_forged_one_is_refused(agent: AgentProcess, repo: DesiredRepo) -> None:
    sha = add_record(repo, "hook1", "192.0.2.41")
    assert not present(repo, "hook1")
    body, headers = github_push(MAIN, sha, secret=SECRET)
    assert agent.post("/webhook", body, headers) == 202
    assert agent.wait(lambda: present(repo, "hook1"), 90), agent.log.read_text()[-3000:]
    assert agent.wait(lambda: cycles(agent) == 2, 60)

    sha2 = add_record(repo, "hook2", "192.0.2.42")
    forged, forged_headers = github_push(MAIN, sha2, secret=b"not the secret")
    assert agent.post("/webhook", forged, forged_headers) == 401
    unsigned = {k: v for k, v in forged_headers.items() if k != "X-Hub-Signature-256"}
    assert agent.post("/webhook/github", forged, unsigned) == 401
    stays_unchanged(agent, repo, "hook2", 2)
    # a forged delivery is not remembered: the same id, correctly signed, is accepted
    body2, headers2 = github_push(MAIN, sha2, secret=SECRET, delivery=forged_headers["X-GitHub-Delivery"])
    assert agent.post("/webhook/github", body2, headers2) == 202
    assert agent.wait(lambda: present(repo, "hook2"), 90), agent.log.read_text()[-3000:]
    assert agent.wait(lambda: sha2 in str(agent.status().get("summary.yaml")), 60)
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="github",result="forged"}') == 2
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="github",result="accepted"}') == 2


def test_replayed_delivery_is_refused_and_wakes_nothing(agent: AgentProcess, repo: DesiredRepo) -> None:
    sha = add_record(repo, "hook1", "192.0.2.41")
    body, headers = github_push(MAIN, sha, secret=SECRET)
    assert agent.post("/webhook", body, headers) == 202
    assert agent.wait(lambda: present(repo, "hook1") and cycles(agent) == 2, 90), agent.log.read_text()[-3000:]

    sha2 = add_record(repo, "hook2", "192.0.2.42")
    assert agent.post("/webhook", body, headers) == 409  # the captured delivery, byte for byte
    # the same delivery id on a new, correctly signed body is still a replay
    body2, _ = github_push(MAIN, sha2, secret=SECRET)
    assert agent.post("/webhook", body2, {**headers, "X-Hub-Signature-256": github_push(
        MAIN, sha2, secret=SECRET)[1]["X-Hub-Signature-256"]}) == 409
    stays_unchanged(agent, repo, "hook2", 2)
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="github",result="replayed"}') == 2


def test_own_status_branch_push_is_ignored_another_clusters_is_accepted(
        agent: AgentProcess, repo: DesiredRepo) -> None:
    sha = add_record(repo, "hook1", "192.0.2.41")
    own, own_headers = github_push(OWN_STATUS, "1" * 40, secret=SECRET)
    assert agent.post("/webhook", own, own_headers) == 204
    stays_unchanged(agent, repo, "hook1", 1)

    other, other_headers = github_push(OTHER_STATUS, "2" * 40, secret=SECRET)
    assert agent.post("/webhook", other, other_headers) == 202
    # accepted: it wakes the agent, which fetches main and applies the waiting commit
    assert agent.wait(lambda: cycles(agent) == 2 and present(repo, "hook1"), 90), agent.log.read_text()[-3000:]
    assert agent.wait(lambda: sha in str(agent.status().get("summary.yaml")), 60)
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="github",result="ignored"}') == 1


def test_gitlab_token(agent: AgentProcess, repo: DesiredRepo) -> None:
    sha = add_record(repo, "hook3", "192.0.2.43")
    body, headers = gitlab_push(MAIN, sha, token="wrong-token")
    assert agent.post("/webhook/gitlab", body, headers) == 401
    no_token = {k: v for k, v in headers.items() if k != "X-Gitlab-Token"}
    assert agent.post("/webhook", body, no_token) == 401
    # a GitLab delivery on the GitHub path is refused before any verification
    assert agent.post("/webhook/github", body, {**headers, "X-Gitlab-Token": TOKEN}) == 400
    stays_unchanged(agent, repo, "hook3", 1)

    body, headers = gitlab_push(MAIN, sha, token=TOKEN)
    assert agent.post("/webhook/gitlab", body, headers) == 202
    assert agent.wait(lambda: present(repo, "hook3"), 90), agent.log.read_text()[-3000:]
    assert agent.wait(lambda: cycles(agent) == 2, 60)
    assert agent.post("/webhook/gitlab", body, headers) == 409  # same Idempotency-Key
    own, own_headers = gitlab_push(OWN_STATUS, "1" * 40, token=TOKEN)
    assert agent.post("/webhook", own, own_headers) == 204
    # a GitHub signature does not stand in for the GitLab token
    gh_body, gh_headers = github_push(MAIN, sha, secret=SECRET)
    gl_headers = {k: v for k, v in gitlab_push(MAIN, sha, token="x")[1].items() if k != "X-Gitlab-Token"}
    assert agent.post("/webhook/gitlab", gh_body, {**gl_headers,
                                                    "X-Hub-Signature-256": gh_headers["X-Hub-Signature-256"]}) == 401
    stays_unchanged(agent, repo, "nothing", 2)
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="gitlab",result="forged"}') == 3
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="gitlab",result="accepted"}') == 1


@pytest.fixture
def gitea_agent(repo: DesiredRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AgentProcess]:
    """An agent with a GitHub secret (flag) and a Gitea secret (environment variable)."""
    github, gitea = tmp_path / "github-secret", tmp_path / "gitea-secret"
    github.write_bytes(SECRET + b"\n")
    gitea.write_bytes(GITEA_SECRET + b"\n")
    monkeypatch.setenv("GITDNS_WEBHOOK_GITEA_SECRET_FILE", str(gitea))
    proc = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "600",
                        "--webhook-github-secret-file", str(github))
    try:
        assert proc.wait(lambda: proc.get("/readyz")[0] == 200, 90), proc.log.read_text()
        assert cycles(proc) == 1
        yield proc
    finally:
        assert proc.stop() == 0, proc.log.read_text()[-3000:]


def test_gitea_signed_push_applies_forged_and_unfollowed_ones_start_nothing(
        gitea_agent: AgentProcess, repo: DesiredRepo) -> None:
    agent = gitea_agent
    sha = add_record(repo, "hook5", "192.0.2.45")
    body, headers = gitea_push(MAIN, sha, secret=b"not the secret")
    assert agent.post("/webhook", body, headers) == 401
    unsigned = {k: v for k, v in gitea_push(MAIN, sha, secret=GITEA_SECRET)[1].items() if k != "X-Gitea-Signature"}
    assert agent.post("/webhook/gitea", body, unsigned) == 401
    # signed with the GitHub secret: X-Hub-Signature-256 is good, but a Gitea delivery is judged by Gitea's
    body, headers = gitea_push(MAIN, sha, secret=SECRET)
    assert agent.post("/webhook", body, headers) == 401
    other, other_headers = gitea_push("refs/heads/feature", sha, secret=GITEA_SECRET)
    assert agent.post("/webhook/gitea", other, other_headers) == 202  # ignored, with the reason
    stays_unchanged(agent, repo, "hook5", 1)

    body, headers = gitea_push(MAIN, sha, secret=GITEA_SECRET)
    assert agent.post("/webhook/gitea", body, headers) == 202
    assert agent.wait(lambda: present(repo, "hook5"), 90), agent.log.read_text()[-3000:]
    assert agent.wait(lambda: cycles(agent) == 2, 60)
    assert agent.post("/webhook", body, headers) == 409
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="gitea",result="forged"}') == 3
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="gitea",result="ignored"}') == 1
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="gitea",result="accepted"}') == 1
    assert metric(agent, 'gitdns_webhook_deliveries_total{provider="github"') == 0
    assert GITEA_SECRET.decode() not in agent.log.read_text()
