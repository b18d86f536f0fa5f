"""gitdns.adapters.webhooks: which provider a delivery is judged as, under which secret, and
what the agent does with it. Gitea deliveries are built as Gitea sends them: its own headers,
Gogs' and GitHub's, and both signatures (``X-Gitea-Signature`` and ``X-Hub-Signature-256``)."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from gitdns.adapters.webhooks import (
    PATHS,
    Verdict,
    WebhookConfig,
    choose_provider,
    judge,
    names_repository,
    repository_of,
)
from gitdns.core.webhook import GITEA, GITHUB, GITLAB, PushEvent, ReplayGuard, sign_gitea, sign_github

GITEA_SECRET = b"gitea-hook-secret"
GITHUB_SECRET = b"github-hook-secret"
SHA = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"
CLUSTER = "3f1e5c1a-0000-4000-8000-000000000001"
NOW = 1_767_225_600

CONFIG = WebhookConfig(gitea_secret=GITEA_SECRET, github_secret=GITHUB_SECRET, cluster_id=CLUSTER,
                       branch="main", repository="acme/dns")


def gitea_body(ref: str = "refs/heads/main", full_name: str = "acme/dns",
               host: str = "https://git.example.com") -> bytes:
    repo = {"id": 140, "name": full_name.rsplit("/", 1)[-1], "full_name": full_name,
            "html_url": f"{host}/{full_name}", "ssh_url": f"git@git.example.com:{full_name}.git",
            "clone_url": f"{host}/{full_name}.git"}
    payload = {"ref": ref, "before": "0" * 40, "after": SHA, "repository": repo, "pusher": {"login": "gitea"}}
    return json.dumps(payload).encode()


def gitea_headers(body: bytes, secret: bytes = GITEA_SECRET, *, event: str = "push",
                  delivery: str | None = None) -> dict[str, str]:
    """Gitea's headers for ``body`` (services/webhook/deliver.go, addDefaultHeaders)."""
    ident = delivery or str(uuid.uuid4())
    hexsig = sign_gitea(secret, body)
    headers = {"Content-Type": "application/json"}
    for family in ("Gitea", "Gogs"):
        headers |= {f"X-{family}-Delivery": ident, f"X-{family}-Event": event,
                    f"X-{family}-Event-Type": event, f"X-{family}-Signature": hexsig}
    return headers | {"X-Hub-Signature-256": "sha256=" + hexsig, "X-GitHub-Delivery": ident,
                      "X-GitHub-Event": event, "X-GitHub-Event-Type": event}


class Guard:
    """The caller's replay guard, recording what ``judge`` asked."""

    def __init__(self) -> None:
        self.guard = ReplayGuard()
        self.asked: list[str] = []

    def __call__(self, ident: str) -> bool:
        self.asked.append(ident)
        return self.guard.seen(ident)


def run(headers: dict[str, str], body: bytes, *, cfg: WebhookConfig = CONFIG, path: str = "/webhook",
        guard: Guard | None = None) -> Verdict:
    return judge(cfg, path, headers, body, now=NOW, seen=guard if guard is not None else Guard())


# --- Gitea deliveries ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/webhook", "/webhook/gitea"])
def test_signed_gitea_push_is_accepted(path: str) -> None:
    body = gitea_body()
    guard = Guard()
    verdict = run(gitea_headers(body, delivery="d-1"), body, path=path, guard=guard)
    assert (verdict.status, verdict.text, verdict.provider, verdict.result) == (202, "accepted", GITEA, "accepted")
    assert verdict.event is not None
    assert (verdict.event.ref, verdict.event.after, verdict.event.repository) == ("refs/heads/main", SHA, "acme/dns")
    assert guard.asked == ["d-1"]
    assert run(gitea_headers(body, delivery="d-1"), body, path=path, guard=guard) == Verdict(
        409, "delivery already seen", GITEA, "replayed")


def test_gitea_push_with_a_wrong_signature_is_forged() -> None:
    body = gitea_body()
    guard = Guard()
    assert run(gitea_headers(body, b"not the secret"), body, guard=guard) == Verdict(
        401, "signature or token does not verify", GITEA, "forged")
    # a signature over another body
    assert run(gitea_headers(gitea_body("refs/heads/other")), body).result == "forged"
    assert guard.asked == []  # a forged delivery's id is never recorded


@pytest.mark.parametrize("value", [None, "", "sha256=SIG"], ids=["absent", "empty (hook without secret)",
                                                                  "GitHub's shape"])
def test_gitea_push_without_its_signature_is_forged(value: str | None) -> None:
    body = gitea_body()
    headers = gitea_headers(body)
    del headers["X-Gitea-Signature"]
    if value is not None:
        headers["X-Gitea-Signature"] = value.replace("SIG", sign_gitea(GITEA_SECRET, body))
    # X-Hub-Signature-256 and X-Gogs-Signature are still there and good: they do not stand in
    verdict = run(headers, body)
    assert (verdict.status, verdict.provider, verdict.result, verdict.event) == (401, GITEA, "forged", None)


def test_gitea_push_to_another_branch_is_ignored_with_the_reason() -> None:
    body = gitea_body("refs/heads/feature")
    assert run(gitea_headers(body), body) == Verdict(
        202, "ignored: a push to refs/heads/feature, not refs/heads/main", GITEA, "ignored")


def test_gitea_push_to_another_repository_is_ignored_with_the_reason() -> None:
    body = gitea_body(full_name="acme/other")
    assert run(gitea_headers(body), body) == Verdict(202, "ignored: a push to acme/other, not acme/dns",
                                                     GITEA, "ignored")


def test_gitea_status_pushes_own_ignored_other_clusters_passed_on() -> None:
    own = gitea_body(f"refs/heads/gitdns-status/{CLUSTER}")
    assert run(gitea_headers(own), own) == Verdict(204, "", GITEA, "ignored")
    other = gitea_body("refs/heads/gitdns-status/another")
    assert run(gitea_headers(other), other).result == "accepted"


def test_gitea_non_push_event_is_204() -> None:
    body = b'{"ref": "v1", "ref_type": "tag", "repository": {"full_name": "acme/dns"}}'
    assert run(gitea_headers(body, event="create"), body) == Verdict(204, "", GITEA, "ignored")


def test_gitea_under_a_sub_path_matches_by_its_urls() -> None:
    """Gitea served at https://host/git/: the configured remote's path is git/acme/dns while the
    payload's full_name is acme/dns; the clone URL in the payload names the same path."""
    cfg = replace(CONFIG, repository=repository_of("https://git.example.com/git/acme/dns.git"))
    body = gitea_body(host="https://git.example.com/git")
    assert run(gitea_headers(body), body, cfg=cfg).result == "accepted"
    elsewhere = gitea_body(full_name="acme/other", host="https://git.example.com/git")
    verdict = run(gitea_headers(elsewhere), elsewhere, cfg=cfg)
    assert verdict.status == 202 and verdict.text == "ignored: a push to acme/other, not git/acme/dns"


# --- Gitea and GitHub: one delivery, one judgement ----------------------------------------------


def test_without_a_gitea_secret_a_gitea_delivery_is_judged_as_github() -> None:
    """Before Gitea had its own secret an operator gave Gitea's hook the GitHub secret; that
    still works, through the GitHub headers and the GitHub secret."""
    cfg = replace(CONFIG, gitea_secret=None)
    body = gitea_body()
    verdict = run(gitea_headers(body, GITHUB_SECRET), body, cfg=cfg)
    assert (verdict.status, verdict.provider, verdict.result) == (202, GITHUB, "accepted")
    assert run(gitea_headers(body, b"not the secret"), body, cfg=cfg).result == "forged"
    # on its own path Gitea is asked for, and with no Gitea secret nothing verifies (fail closed)
    assert run(gitea_headers(body, GITHUB_SECRET), body, cfg=cfg, path="/webhook/gitea") == Verdict(
        401, "signature or token does not verify", GITEA, "forged")


def test_with_a_gitea_secret_the_github_secret_never_admits_a_gitea_delivery() -> None:
    body = gitea_body()
    # signed by a hook holding the GitHub secret: both signatures good under it, neither under Gitea's
    assert run(gitea_headers(body, GITHUB_SECRET), body).result == "forged"
    # a bad Gitea signature next to a good GitHub one is not rescued by it
    headers = gitea_headers(body) | {"X-Gitea-Signature": sign_gitea(b"not the secret", body),
                                     "X-Hub-Signature-256": sign_github(GITHUB_SECRET, body)}
    assert run(headers, body) == Verdict(401, "signature or token does not verify", GITEA, "forged")
    # and a Gitea delivery on the GitHub path is refused before any check
    assert run(gitea_headers(body), body, path="/webhook/github") == Verdict(
        400, "/webhook/github takes github deliveries")


def test_a_gitea_delivery_replayed_as_github_is_still_a_replay() -> None:
    """Same secret on both hooks: the captured Gitea delivery, its Gitea headers stripped,
    reads as GitHub and verifies; its delivery id (one UUID under both names) gives it away."""
    cfg = replace(CONFIG, github_secret=GITEA_SECRET)
    body = gitea_body()
    headers = gitea_headers(body, delivery="d-1")
    guard = Guard()
    assert run(headers, body, cfg=cfg, guard=guard).result == "accepted"
    stripped = {k: v for k, v in headers.items() if not k.startswith(("X-Gitea-", "X-Gogs-"))}
    assert run(stripped, body, cfg=cfg, guard=guard) == Verdict(409, "delivery already seen", GITHUB, "replayed")


@pytest.mark.parametrize(
    ("gitea_secret", "path", "provider"),
    [
        (GITEA_SECRET, None, GITEA),
        (None, None, GITHUB),
        (None, GITEA, GITEA),
        (b"", None, GITHUB),  # an empty secret file is no secret
    ],
)
def test_choose_provider_for_gitea_headers(gitea_secret: bytes | None, path: str | None, provider: str) -> None:
    body = gitea_body()
    assert choose_provider(replace(CONFIG, gitea_secret=gitea_secret), gitea_headers(body), path) == provider


def test_choose_provider_leaves_github_and_gitlab_as_they_were() -> None:
    assert choose_provider(CONFIG, {"X-GitHub-Event": "push"}, None) == GITHUB
    assert choose_provider(CONFIG, {"X-Gitlab-Event": "Push Hook"}, None) == GITLAB
    assert choose_provider(CONFIG, {"X-GitHub-Event": "push", "X-Gitlab-Event": "Push Hook"}, None) is None
    assert choose_provider(CONFIG, {"X-Gitea-Event": "push", "X-Gitlab-Event": "Push Hook"}, None) is None
    assert choose_provider(CONFIG, {}, None) is None
    assert PATHS["/webhook/gitea"] == GITEA and PATHS["/webhook"] is None


def test_no_provider_header_is_400_and_not_counted() -> None:
    verdict = run({"Content-Type": "application/json", "X-Gogs-Event": "push"}, gitea_body())
    assert verdict.status == 400 and verdict.provider is None and verdict.result is None


def test_gitea_secret_stays_out_of_repr() -> None:
    assert GITEA_SECRET.decode() not in repr(CONFIG)


# --- repositories --------------------------------------------------------------------------------


def test_names_repository_by_name_or_by_url_path() -> None:
    event = PushEvent("refs/heads/main", SHA, "acme/dns", None,
                      urls=("https://git.example.com/git/acme/dns.git", "git@git.example.com:acme/dns.git"))
    assert names_repository(event, "acme/dns")
    assert names_repository(event, "GIT/acme/dns.git")
    assert not names_repository(event, "acme/other")
    assert not names_repository(replace(event, urls=()), "git/acme/dns")


# --- payloads read strictly ----------------------------------------------------------------------


def test_a_signed_deep_payload_is_400_not_a_recursion_error() -> None:
    body = b'{"ref": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    assert run(gitea_headers(body), body) == Verdict(400, "push payload nests deeper than 32 levels", GITEA,
                                                     "ignored")
    for lists, status in ((31, 202), (32, 400)):  # inside the payload's object: 32 deep, 33 deep
        pad: object = "[" * 100  # brackets in a string count for nothing
        for _ in range(lists):
            pad = [pad]
        body = json.dumps(json.loads(gitea_body()) | {"pad": pad}).encode()
        assert run(gitea_headers(body), body).status == status


@pytest.mark.parametrize(("constant", "reason"), [("NaN", "NaN"), ("Infinity", "Infinity"),
                                                  ("-Infinity", "-Infinity")])
def test_a_payload_with_nan_or_infinity_is_400(constant: str, reason: str) -> None:
    body = gitea_body()[:-1] + b', "size": ' + constant.encode() + b"}"
    assert run(gitea_headers(body), body) == Verdict(
        400, f"push payload is not JSON: {reason} is not a JSON value", GITEA, "ignored")


def test_a_payload_naming_a_key_twice_is_400() -> None:
    """Which ref did the sender mean?  Python's json keeps the last, another reader the first."""
    body = b'{"ref": "refs/heads/feature", ' + gitea_body()[1:]
    assert run(gitea_headers(body), body) == Verdict(
        400, "push payload is not JSON: an object names a key twice", GITEA, "ignored")
