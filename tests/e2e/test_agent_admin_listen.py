"""`gitdns agent` as a real process: /status and /metrics are served on --admin-listen and not
beside the webhook on --listen; the webhook is not served on the admin address; an address the
agent cannot bind refuses the start, naming it."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from gitdns.core.webhook import sign_github
from tests.e2e.agent_kit import AgentProcess, DesiredRepo, agent_cmd, free_port


@pytest.fixture
def repo(tmp_path: Path) -> DesiredRepo:
    return DesiredRepo(tmp_path)


def test_status_and_metrics_only_on_the_admin_address(repo: DesiredRepo, tmp_path: Path) -> None:
    secret = tmp_path / "github-secret"
    secret.write_text("e2e-secret\n")
    agent = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "600",
                         "--webhook-github-secret-file", str(secret))
    try:
        assert agent.wait(lambda: agent.get("/readyz")[0] == 200, 90), agent.log.read_text()
        webhook, admin = agent.port, agent.admin_port
        assert agent.get("/status", port=webhook)[0] == 404
        assert agent.get("/metrics", port=webhook)[0] == 404
        assert agent.get("/healthz", port=webhook)[0] == 200 and agent.get("/readyz", port=webhook)[0] == 200

        code, body = agent.get("/status", port=admin)
        assert code == 200 and json.loads(body)
        code, body = agent.get("/metrics", port=admin)
        assert code == 200 and b"gitdns_ready 1.0" in body
        assert agent.get("/healthz", port=admin)[0] == 200 and agent.get("/readyz", port=admin)[0] == 200

        payload = json.dumps({"ref": "refs/heads/main", "before": "0" * 40, "after": "a" * 40,
                              "repository": {"full_name": "acme/dns"}}).encode()
        headers = {"Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": "e2e-1",
                   "X-Hub-Signature-256": sign_github(b"e2e-secret", payload)}
        assert agent.post("/webhook", payload, headers) == 202
        agent.port = admin  # post() goes to `port`: the admin address has no webhook
        assert agent.post("/webhook", payload, {**headers, "X-GitHub-Delivery": "e2e-2"}) == 404
    finally:
        assert agent.stop() == 0


def test_an_address_in_use_refuses_the_start(repo: DesiredRepo, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            agent_cmd(repo, "eu-west-1", tmp_path / "a", "--listen", f"127.0.0.1:{free_port()}",
                      "--admin-listen", f"127.0.0.1:{port}"),
            capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"cannot listen on 127.0.0.1:{port} (admin)" in done.stderr
