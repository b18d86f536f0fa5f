"""gitdns.adapters.http.server on 127.0.0.1, port 0, driven with urllib.request."""

from __future__ import annotations

import http.client
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from gitdns.adapters.http.server import HttpServer, WebhookConfig
from gitdns.agent.metrics import Metrics
from gitdns.core.webhook import PushEvent, sign_gitea, sign_github, sign_gitlab

GITHUB_SECRET = b"gh-secret-value"
GITLAB_TOKEN = "gl-token-value"
GITEA_SECRET = b"gitea-secret-value"
GITLAB_SIGNING = b"whsec_" + b"c2lnbmluZy1rZXktb2YtdGhpcnR5LXR3by1ieXRlcyE="
CLUSTER = "3f1e5c1a-0000-4000-8000-000000000001"
SHA = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"
NOW = 1_767_225_600


@dataclass
class Agent:
    """What the server calls back into, as plain state a test flips."""

    ready: bool = False
    live: bool = True
    pushes: list[PushEvent] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        return {"cluster": CLUSTER, "ready": self.ready, "zones": {"example.com": {"applied": SHA}}}


@dataclass
class Running:
    server: HttpServer
    agent: Agent
    metrics: Metrics

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"


@pytest.fixture
def running() -> Iterator[Running]:
    agent, metrics = Agent(), Metrics()
    config = WebhookConfig(
        github_secret=GITHUB_SECRET,
        gitlab_token=GITLAB_TOKEN,
        gitlab_signing_secret=GITLAB_SIGNING,
        gitea_secret=GITEA_SECRET,
        cluster_id=CLUSTER,
    )
    server = HttpServer(
        "127.0.0.1",
        0,
        metrics=metrics,
        status=agent.status,
        ready=lambda: agent.ready,
        live=lambda: agent.live,
        webhook=config,
        on_push=agent.pushes.append,
        clock=lambda: NOW,
    )
    server.start()
    try:
        yield Running(server, agent, metrics)
    finally:
        server.stop()


def call(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.headers.get("Content-Type", ""), err.read()


def github_push(ref: str = "refs/heads/main") -> bytes:
    payload = {"ref": ref, "before": "0" * 40, "after": SHA, "repository": {"full_name": "acme/dns"}}
    return json.dumps(payload).encode()


def github_headers(body: bytes, delivery: str, event: str = "push", secret: bytes = GITHUB_SECRET) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign_github(secret, body),
    }


def deliveries(metrics: Metrics, provider: str, result: str) -> float:
    return metrics.value("gitdns_webhook_deliveries_total", {"provider": provider, "result": result}) or 0.0


# --- health, readiness, status, metrics ------------------------------------------------------


def test_healthz_follows_live(running: Running) -> None:
    assert call(running.base + "/healthz")[::2] == (200, b"ok\n")
    running.agent.live = False
    assert call(running.base + "/healthz")[0] == 503


def test_readyz_503_then_200(running: Running) -> None:
    assert call(running.base + "/readyz")[0] == 503
    running.agent.ready = True
    assert call(running.base + "/readyz")[0] == 200


def test_status_is_json(running: Running) -> None:
    status, ctype, body = call(running.base + "/status")
    assert status == 200 and ctype == "application/json"
    assert json.loads(body) == running.agent.status()


def test_metrics_text(running: Running) -> None:
    running.metrics.record_apply("example.com", writes=2)
    status, ctype, body = call(running.base + "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4")
    text = body.decode()
    assert 'gitdns_zone_writes_total{zone="example.com"} 2.0' in text
    assert "gitdns_ready" in text and "gitdns_webhook_deliveries_total" in text


def test_unknown_paths_and_methods(running: Running) -> None:
    assert call(running.base + "/nope")[0] == 404
    assert call(running.base + "/webhook")[0] == 405
    assert call(running.base + "/healthz", data=b"x")[0] == 404


# --- webhooks -----------------------------------------------------------------------------


def test_signed_github_push_is_accepted(running: Running) -> None:
    body = github_push()
    status, _, _ = call(running.base + "/webhook", data=body, headers=github_headers(body, "d-1"))
    assert status == 202
    assert running.agent.pushes == [PushEvent("refs/heads/main", SHA, "acme/dns", "d-1")]
    assert deliveries(running.metrics, "github", "accepted") == 1


def test_forged_github_push_is_refused(running: Running) -> None:
    body = github_push()
    forged = github_headers(body, "d-2", secret=b"not the secret")
    assert call(running.base + "/webhook/github", data=body, headers=forged)[0] == 401
    unsigned = {k: v for k, v in github_headers(body, "d-3").items() if k != "X-Hub-Signature-256"}
    assert call(running.base + "/webhook/github", data=body, headers=unsigned)[0] == 401
    assert running.agent.pushes == []
    assert deliveries(running.metrics, "github", "forged") == 2
    # A forged delivery's id is not remembered: the real one still gets through.
    assert call(running.base + "/webhook", data=body, headers=github_headers(body, "d-2"))[0] == 202


def test_replayed_delivery_is_409_and_not_passed_on(running: Running) -> None:
    body = github_push()
    headers = github_headers(body, "d-4")
    assert call(running.base + "/webhook", data=body, headers=headers)[0] == 202
    assert call(running.base + "/webhook", data=body, headers=headers)[0] == 409
    assert len(running.agent.pushes) == 1
    assert deliveries(running.metrics, "github", "replayed") == 1


def test_ping_is_204(running: Running) -> None:
    body = b'{"zen": "Design for failure.", "hook_id": 1}'
    status, _, payload = call(running.base + "/webhook", data=body, headers=github_headers(body, "p-1", event="ping"))
    assert (status, payload) == (204, b"")
    assert running.agent.pushes == []
    assert deliveries(running.metrics, "github", "ignored") == 1


def test_own_status_branch_push_is_ignored_others_pass(running: Running) -> None:
    own = github_push(f"refs/heads/gitdns-status/{CLUSTER}")
    assert call(running.base + "/webhook", data=own, headers=github_headers(own, "s-1"))[0] == 204
    assert running.agent.pushes == []
    remote = github_push("refs/heads/gitdns-status/another-cluster")
    assert call(running.base + "/webhook", data=remote, headers=github_headers(remote, "s-2"))[0] == 202
    assert [e.ref for e in running.agent.pushes] == ["refs/heads/gitdns-status/another-cluster"]


def test_oversize_body_is_413(running: Running) -> None:
    body = b"x" * (1024 * 1024 + 1)
    status, _, _ = call(running.base + "/webhook", data=body, headers=github_headers(body, "big"))
    assert status == 413
    assert running.agent.pushes == []


def test_missing_content_length_is_411(running: Running) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", running.server.port, timeout=5)
    try:
        conn.putrequest("POST", "/webhook")
        conn.putheader("X-GitHub-Event", "push")
        conn.endheaders()
        assert conn.getresponse().status == 411
    finally:
        conn.close()


def test_path_and_header_must_agree(running: Running) -> None:
    body = github_push()
    assert call(running.base + "/webhook/gitlab", data=body, headers=github_headers(body, "m-1"))[0] == 400
    assert call(running.base + "/webhook", data=body, headers={"Content-Type": "application/json"})[0] == 400


def test_malformed_push_from_a_verified_sender_is_400(running: Running) -> None:
    body = b'{"ref": "refs/heads/main"}'
    assert call(running.base + "/webhook", data=body, headers=github_headers(body, "bad-1"))[0] == 400
    assert running.agent.pushes == []


def gitlab_push() -> bytes:
    payload = {
        "object_kind": "push",
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": SHA,
        "project": {"path_with_namespace": "platform/dns"},
    }
    return json.dumps(payload).encode()


def gitlab_headers(body: bytes, ident: str, *, token: str = GITLAB_TOKEN, ts: int = NOW) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Token": token,
        "X-Gitlab-Event-UUID": "uuid-" + ident,
        "Idempotency-Key": ident,
        "webhook-id": ident,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_gitlab(GITLAB_SIGNING, ident, str(ts), body),
    }


def test_gitlab_push_with_token_and_signature(running: Running) -> None:
    body = gitlab_push()
    assert call(running.base + "/webhook/gitlab", data=body, headers=gitlab_headers(body, "g-1"))[0] == 202
    assert running.agent.pushes == [PushEvent("refs/heads/main", SHA, "platform/dns", "g-1")]
    assert call(running.base + "/webhook/gitlab", data=body, headers=gitlab_headers(body, "g-1"))[0] == 409


def test_gitlab_wrong_token_or_stale_timestamp_is_forged(running: Running) -> None:
    body = gitlab_push()
    assert call(running.base + "/webhook", data=body, headers=gitlab_headers(body, "g-2", token="nope"))[0] == 401
    stale = gitlab_headers(body, "g-3", ts=NOW - 3600)
    assert call(running.base + "/webhook", data=body, headers=stale)[0] == 401
    assert running.agent.pushes == []
    assert deliveries(running.metrics, "gitlab", "forged") == 2


def gitea_headers(body: bytes, delivery: str, secret: bytes = GITEA_SECRET) -> dict[str, str]:
    """As Gitea sends them: its own headers plus the Gogs and GitHub ones, both signatures."""
    sig = sign_gitea(secret, body)
    return {
        "Content-Type": "application/json",
        "X-Gitea-Event": "push", "X-Gitea-Delivery": delivery, "X-Gitea-Signature": sig,
        "X-Gogs-Event": "push", "X-Gogs-Delivery": delivery, "X-Gogs-Signature": sig,
        "X-GitHub-Event": "push", "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": "sha256=" + sig,
    }


def test_gitea_push_over_http(running: Running) -> None:
    body = github_push()  # Gitea's push payload has GitHub's shape
    assert call(running.base + "/webhook/gitea", data=body, headers=gitea_headers(body, "t-1"))[0] == 202
    assert running.agent.pushes == [PushEvent("refs/heads/main", SHA, "acme/dns", "t-1")]
    assert call(running.base + "/webhook", data=body, headers=gitea_headers(body, "t-1"))[0] == 409
    forged = gitea_headers(body, "t-2", secret=GITHUB_SECRET)  # the GitHub secret does not admit Gitea's
    assert call(running.base + "/webhook", data=body, headers=forged)[0] == 401
    unsigned = {k: v for k, v in gitea_headers(body, "t-3").items() if k != "X-Gitea-Signature"}
    assert call(running.base + "/webhook", data=body, headers=unsigned)[0] == 401
    assert call(running.base + "/webhook/github", data=body, headers=gitea_headers(body, "t-4"))[0] == 400
    assert len(running.agent.pushes) == 1
    assert [deliveries(running.metrics, "gitea", r) for r in ("accepted", "replayed", "forged")] == [1, 1, 2]
    assert deliveries(running.metrics, "github", "forged") == 0


def test_provider_without_secret_fails_closed() -> None:
    metrics, pushes = Metrics(), []
    server = HttpServer(
        "127.0.0.1", 0, metrics=metrics, status=dict, ready=lambda: True,
        webhook=WebhookConfig(gitlab_token=GITLAB_TOKEN), on_push=pushes.append,
    )  # fmt: skip
    with server:
        body = github_push()
        headers = github_headers(body, "n-1")
        assert call(f"http://127.0.0.1:{server.port}/webhook", data=body, headers=headers)[0] == 401
    assert pushes == []


def test_webhook_off_is_404() -> None:
    with HttpServer("127.0.0.1", 0, metrics=Metrics(), status=dict, ready=lambda: True, webhook=None) as server:
        body = github_push()
        assert call(f"http://127.0.0.1:{server.port}/webhook", data=body, headers=github_headers(body, "x"))[0] == 404


def test_secrets_never_reach_the_log(running: Running, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gitdns.adapters.http.server")
    body = gitlab_push()
    call(running.base + "/webhook?token=" + GITLAB_TOKEN, data=body, headers=gitlab_headers(body, "l-1"))
    call(running.base + "/webhook", data=body, headers=gitlab_headers(body, "l-2", token="guess"))
    assert caplog.records, "requests are logged at debug"
    text = caplog.text
    assert GITLAB_TOKEN not in text and "guess" not in text and GITLAB_SIGNING.decode() not in text
    assert "webhook-signature" not in text.lower()
    assert GITHUB_SECRET.decode() not in repr(running.server.webhook)


def test_status_error_is_500_and_server_keeps_serving() -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("boom")

    with HttpServer("127.0.0.1", 0, metrics=Metrics(), status=broken, ready=lambda: True) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert call(base + "/status")[0] == 500
        assert call(base + "/healthz")[0] == 200


def test_port_zero_binds_a_real_port_and_stop_is_idempotent() -> None:
    server = HttpServer("127.0.0.1", 0, metrics=Metrics(), status=dict, ready=lambda: True)
    server.start()
    assert server.port > 0
    server.stop()
    server.stop()


def test_concurrent_copies_of_one_delivery_pass_once(running: Running) -> None:
    from concurrent.futures import ThreadPoolExecutor

    body = github_push()
    headers = github_headers(body, "race-1")
    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(lambda _: call(running.base + "/webhook", data=body, headers=headers)[0], range(8)))
    assert sorted(codes) == [202] + [409] * 7
    assert len(running.agent.pushes) == 1


def test_failing_callback_is_500_and_not_counted_accepted() -> None:
    def explode(_event: PushEvent) -> None:
        raise RuntimeError("queue full")

    metrics = Metrics()
    config = WebhookConfig(github_secret=GITHUB_SECRET)
    with HttpServer(
        "127.0.0.1", 0, metrics=metrics, status=dict, ready=lambda: True, webhook=config, on_push=explode
    ) as server:
        body = github_push()
        headers = github_headers(body, "cb-1")
        assert call(f"http://127.0.0.1:{server.port}/webhook", data=body, headers=headers)[0] == 500
    assert deliveries(metrics, "github", "accepted") == 0


def test_binding_asks_no_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """http.server would look the listen address up (socket.getfqdn) at every start: in a pod
    that is a resolver query for 0.0.0.0.  The endpoint binds without it."""
    import socket

    from gitdns.adapters.http import handler as httphandler

    asked: list[str] = []
    monkeypatch.setattr(socket, "getfqdn", lambda name="": asked.append(name) or name)
    httpd = httphandler.Server(("127.0.0.1", 0), httphandler.Handler)
    try:
        assert asked == []
        assert httpd.server_name == "127.0.0.1" and httpd.server_port > 0
    finally:
        httpd.server_close()


# --- pushes to what the agent does not follow --------------------------------------------------


def following(repository: str | None = "acme/dns", status_repository: str | None = None) -> Running:
    agent, metrics = Agent(), Metrics()
    config = WebhookConfig(github_secret=GITHUB_SECRET, cluster_id=CLUSTER, branch="main",
                           repository=repository, status_repository=status_repository)
    server = HttpServer("127.0.0.1", 0, metrics=metrics, status=agent.status, ready=lambda: agent.ready,
                        webhook=config, on_push=agent.pushes.append, clock=lambda: NOW)
    return Running(server, agent, metrics)


def push_to(run: Running, ref: str, repository: str, delivery: str) -> tuple[int, bytes]:
    payload = {"ref": ref, "before": "0" * 40, "after": SHA, "repository": {"full_name": repository}}
    body = json.dumps(payload).encode()
    status, _, text = call(run.base + "/webhook", data=body, headers=github_headers(body, delivery))
    return status, text


def test_pushes_to_another_branch_or_repository_start_nothing() -> None:
    run = following(status_repository="acme/dns-status")
    run.server.start()
    try:
        assert push_to(run, "refs/heads/feature", "acme/dns", "d-1") == (
            202, b"ignored: a push to refs/heads/feature, not refs/heads/main\n")
        status, text = push_to(run, "refs/heads/main", "acme/other", "d-2")
        assert status == 202 and b"not acme/dns" in text
        status, text = push_to(run, "refs/heads/gitdns-status/another", "acme/dns", "d-3")
        assert status == 202 and b"not acme/dns-status" in text  # status branches live elsewhere
        assert run.agent.pushes == []
        assert deliveries(run.metrics, "github", "ignored") == 3
        assert push_to(run, "refs/heads/main", "ACME/dns.git", "d-4") == (202, b"accepted\n")
        assert push_to(run, "refs/heads/gitdns-status/another", "acme/dns-status", "d-5") == (202, b"accepted\n")
        assert [p.ref for p in run.agent.pushes] == ["refs/heads/main", "refs/heads/gitdns-status/another"]
    finally:
        run.server.stop()


def test_repository_of_remote_urls() -> None:
    from gitdns.adapters.http.server import repository_of

    assert repository_of("https://github.com/acme/dns.git") == "acme/dns"
    assert repository_of("ssh://git@gitlab.example:2222/group/sub/dns.git") == "group/sub/dns"
    assert repository_of("git@github.com:acme/dns.git") == "acme/dns"
    assert repository_of("/srv/git/dns.git") is None
    assert repository_of("file:///srv/git/dns.git") is None
