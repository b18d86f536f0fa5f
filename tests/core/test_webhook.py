"""gitdns.core.webhook: signatures, tokens, push payloads and the replay guard."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest

from gitdns.core.webhook import (
    GITEA,
    GITHUB,
    GITLAB,
    PushEvent,
    ReplayGuard,
    WebhookPayloadError,
    delivery_id,
    detect_provider,
    header,
    parse_push,
    sign_gitea,
    sign_github,
    sign_gitlab,
    signing_key,
    verify_gitea,
    verify_github,
    verify_gitlab,
)

SECRET = b"It's a Secret to Everybody"
SHA = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"
BEFORE = "95790bf891e76fee5e1747ab589903a6a1f80f22"

# Shapes follow the real payloads (fields the agent does not read trimmed).
GITHUB_PUSH = {
    "ref": "refs/heads/main",
    "before": BEFORE,
    "after": SHA,
    "created": False,
    "deleted": False,
    "forced": False,
    "repository": {"id": 186853002, "name": "dns", "full_name": "acme/dns", "private": True},
    "pusher": {"name": "octocat", "email": "octocat@example.com"},
    "head_commit": {"id": SHA, "message": "Shift weights to eu"},
    "commits": [{"id": SHA, "message": "Shift weights to eu"}],
}
GITLAB_PUSH = {
    "object_kind": "push",
    "event_name": "push",
    "before": BEFORE,
    "after": SHA,
    "ref": "refs/heads/main",
    "ref_protected": True,
    "checkout_sha": SHA,
    "user_username": "jsmith",
    "project_id": 15,
    "project": {"id": 15, "name": "dns", "path_with_namespace": "platform/dns", "default_branch": "main"},
    "commits": [{"id": SHA, "message": "Shift weights to eu"}],
    "total_commits_count": 1,
}

GITEA_PUSH = {
    "ref": "refs/heads/main",
    "before": BEFORE,
    "after": SHA,
    "compare_url": "https://git.example.com/git/acme/dns/compare/95790bf8...0d1a26e6",
    "commits": [{"id": SHA, "message": "Shift weights to eu"}],
    "repository": {
        "id": 140,
        "name": "dns",
        "full_name": "acme/dns",
        "html_url": "https://git.example.com/git/acme/dns",
        "ssh_url": "git@git.example.com:acme/dns.git",
        "clone_url": "https://git.example.com/git/acme/dns.git",
        "default_branch": "main",
    },
    "pusher": {"login": "gitea"},
}
GITEA_DELIVERY = "f6266f16-1bf3-46a5-9ea4-602e06ead473"


def gitea_headers(event: str = "push") -> dict[str, str]:
    """The event headers every Gitea delivery carries (Gitea, Gogs and GitHub names)."""
    return {
        "X-Gitea-Delivery": GITEA_DELIVERY, "X-Gitea-Event": event, "X-Gitea-Event-Type": event,
        "X-Gogs-Delivery": GITEA_DELIVERY, "X-Gogs-Event": event, "X-Gogs-Event-Type": event,
        "X-GitHub-Delivery": GITEA_DELIVERY, "X-GitHub-Event": event, "X-GitHub-Event-Type": event,
    }


def body_of(payload: object) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


# --- GitHub ---------------------------------------------------------------------------


def test_github_signature_matches_hmac_sha256_hex() -> None:
    body = b"Hello, World!"
    expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    assert sign_github(SECRET, body) == expected
    # GitHub's documented example for this secret and body.
    assert expected == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


@pytest.mark.parametrize(
    ("signature", "ok"),
    [
        pytest.param("VALID", True, id="valid"),
        pytest.param("VALID_UPPER", True, id="hex case does not matter"),
        pytest.param(None, False, id="missing header"),
        pytest.param("", False, id="empty header"),
        pytest.param("sha256=" + "0" * 64, False, id="forged"),
        pytest.param("sha256=abc", False, id="wrong length"),
        pytest.param("sha256=" + "0" * 65, False, id="too long"),
        pytest.param("sha1=" + "0" * 40, False, id="sha1 header shape"),
        pytest.param("sha256=" + "zz" * 32, False, id="not hex"),
        pytest.param("sha256=" + "é" * 64, False, id="non-ascii"),
    ],
)
def test_verify_github(signature: str | None, ok: bool) -> None:
    body = body_of(GITHUB_PUSH)
    if signature == "VALID":
        signature = sign_github(SECRET, body)
    elif signature == "VALID_UPPER":
        signature = "sha256=" + sign_github(SECRET, body).removeprefix("sha256=").upper()
    assert verify_github(SECRET, body, signature) is ok


def test_verify_github_refuses_other_body_other_secret_and_empty_secret() -> None:
    body = body_of(GITHUB_PUSH)
    sig = sign_github(SECRET, body)
    assert not verify_github(SECRET, body + b" ", sig)
    assert not verify_github(b"another secret", body, sig)
    assert not verify_github(b"", body, sign_github(b"", body))


# --- Gitea --------------------------------------------------------------------------------


def test_gitea_signature_is_bare_hex_hmac_sha256() -> None:
    body = b"Hello, World!"
    assert sign_gitea(SECRET, body) == hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    # the same digest GitHub sends, without its prefix
    assert "sha256=" + sign_gitea(SECRET, body) == sign_github(SECRET, body)


@pytest.mark.parametrize(
    ("signature", "ok"),
    [
        pytest.param("VALID", True, id="valid"),
        pytest.param("VALID_UPPER", True, id="hex case does not matter"),
        pytest.param("VALID_PADDED", True, id="surrounding whitespace"),
        pytest.param("GITHUB_SHAPE", False, id="sha256= prefix is GitHub's header, not Gitea's"),
        pytest.param(None, False, id="missing header"),
        pytest.param("", False, id="empty header (a hook without a secret)"),
        pytest.param("0" * 64, False, id="forged"),
        pytest.param("abc", False, id="wrong length"),
        pytest.param("0" * 65, False, id="too long"),
        pytest.param("zz" * 32, False, id="not hex"),
        pytest.param("é" * 64, False, id="non-ascii"),
    ],
)
def test_verify_gitea(signature: str | None, ok: bool) -> None:
    body = body_of(GITEA_PUSH)
    good = sign_gitea(SECRET, body)
    signature = {"VALID": good, "VALID_UPPER": good.upper(), "VALID_PADDED": f" {good}\t",
                 "GITHUB_SHAPE": sign_github(SECRET, body)}.get(signature or "", signature)
    assert verify_gitea(SECRET, body, signature) is ok


def test_verify_gitea_refuses_other_body_other_secret_and_empty_secret() -> None:
    body = body_of(GITEA_PUSH)
    sig = sign_gitea(SECRET, body)
    assert verify_gitea(SECRET, body, sig)
    assert not verify_gitea(SECRET, body + b" ", sig)
    assert not verify_gitea(b"another secret", body, sig)
    assert not verify_gitea(b"", body, sign_gitea(b"", body))


@pytest.mark.parametrize(
    ("headers", "gitea_first", "provider"),
    [
        pytest.param(gitea_headers(), True, GITEA, id="gitea first"),
        pytest.param(gitea_headers(), False, GITHUB, id="read through its GitHub headers"),
        pytest.param({"X-Gitea-Event": "push"}, False, GITEA, id="no GitHub headers: gitea anyway"),
        pytest.param({"X-GitHub-Event": "push"}, True, GITHUB, id="plain GitHub"),
        pytest.param({"X-Gogs-Event": "push"}, True, None, id="Gogs alone is not taken"),
        pytest.param({**gitea_headers(), "X-Gitlab-Event": "Push Hook"}, True, None, id="with GitLab's: ambiguous"),
        pytest.param({"X-Gitea-Event": "push", "X-Gitlab-Event": "Push Hook"}, False, None, id="gitea+gitlab"),
        pytest.param({"x-gitea-event": "push"}, True, GITEA, id="any case"),
    ],
)
def test_detect_provider_gitea(headers: dict[str, str], gitea_first: bool, provider: str | None) -> None:
    assert detect_provider(headers, gitea_first=gitea_first) == provider


def test_parse_gitea_push_keeps_the_repository_urls() -> None:
    event = parse_push(GITEA, gitea_headers(), body_of(GITEA_PUSH))
    assert event == PushEvent(
        "refs/heads/main", SHA, "acme/dns", GITEA_DELIVERY,
        urls=("https://git.example.com/git/acme/dns.git", "git@git.example.com:acme/dns.git",
              "https://git.example.com/git/acme/dns"),
    )
    assert delivery_id(GITEA, {"X-Gitea-Delivery": "d-1", "X-GitHub-Delivery": "d-2"}) == "d-1"
    assert delivery_id(GITEA, {"X-GitHub-Delivery": "d-2"}) is None
    # the URLs are optional; GitHub's pushes keep none
    bare = dict(GITEA_PUSH, repository={"full_name": "acme/dns", "clone_url": "", "ssh_url": 7})
    assert parse_push(GITEA, gitea_headers(), body_of(bare)) == PushEvent("refs/heads/main", SHA, "acme/dns",
                                                                          GITEA_DELIVERY)
    github = parse_push(GITHUB, gitea_headers(), body_of(GITEA_PUSH))
    assert github is not None and github.urls == ()


def test_parse_gitea_non_pushes_and_malformed_pushes() -> None:
    assert parse_push(GITEA, gitea_headers("create"), body_of(GITEA_PUSH)) is None
    assert parse_push(GITEA, gitea_headers("delete"), b"{}") is None
    # only X-Gitea-Event counts for a delivery taken as Gitea
    assert parse_push(GITEA, {"X-GitHub-Event": "push"}, body_of(GITEA_PUSH)) is None
    with pytest.raises(WebhookPayloadError):
        parse_push(GITEA, gitea_headers(), body_of({"ref": "refs/heads/main", "after": SHA}))
    with pytest.raises(WebhookPayloadError):
        parse_push(GITEA, gitea_headers(), b"payload=%7B%7D")  # the form content type


# --- GitLab token and signing -------------------------------------------------------------


def test_gitlab_token() -> None:
    assert verify_gitlab("tok3n", "tok3n")
    assert not verify_gitlab("tok3n", "tok3N")
    assert not verify_gitlab("tok3n", None)
    assert not verify_gitlab("tok3n", "")
    assert not verify_gitlab("tok3n", "tok3n-and-more")
    assert not verify_gitlab("tök3n", "tok3n")


def test_gitlab_nothing_configured_fails_closed() -> None:
    assert not verify_gitlab(None, None)
    assert not verify_gitlab("", "")


WHSEC = b"whsec_" + base64.b64encode(bytes(range(32)))
WEBHOOK_ID = "8b4a7c3e-6c1f-4f5a-9d9e-2d0a1b3c4d5e"
TS = "1767225600"


def test_signing_key_decodes_whsec_and_passes_raw_keys_through() -> None:
    assert signing_key(WHSEC) == bytes(range(32))
    assert signing_key(b"raw key") == b"raw key"
    assert signing_key(b"whsec_not base64!") == b""


def test_gitlab_signature_is_standard_webhooks_v1() -> None:
    body = body_of(GITLAB_PUSH)
    content = f"{WEBHOOK_ID}.{TS}.".encode() + body
    digest = hmac.new(bytes(range(32)), content, hashlib.sha256).digest()
    assert sign_gitlab(WHSEC, WEBHOOK_ID, TS, body) == "v1," + base64.b64encode(digest).decode()


def check_signed(
    *,
    token: str | None = None,
    header_token: str | None = None,
    secret: bytes = WHSEC,
    body: bytes | None = None,
    signature: str | None = "",
    timestamp: str | None = TS,
    webhook_id: str | None = WEBHOOK_ID,
    now: int | None = None,
) -> bool:
    """verify_gitlab on a delivery of GITLAB_PUSH signed with WHSEC, with one thing changed."""
    signed_body = body_of(GITLAB_PUSH)
    if signature == "":
        signature = sign_gitlab(WHSEC, WEBHOOK_ID, TS, signed_body)
    return verify_gitlab(
        token,
        header_token,
        signing_secret=secret,
        body=signed_body if body is None else body,
        signature_header=signature,
        timestamp_header=timestamp,
        webhook_id_header=webhook_id,
        now=now,
    )


def test_gitlab_signing_only() -> None:
    assert check_signed()
    assert check_signed(now=int(TS) + 299)
    assert check_signed(now=int(TS) - 299)


OTHER_WHSEC = b"whsec_" + base64.b64encode(b"k" * 32)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"body": b"{}"}, id="body changed"),
        pytest.param({"webhook_id": "other-id"}, id="id changed"),
        pytest.param({"timestamp": "1767225601"}, id="timestamp changed"),
        pytest.param({"timestamp": None}, id="timestamp missing"),
        pytest.param({"timestamp": "17e8"}, id="timestamp not an integer"),
        pytest.param({"webhook_id": None}, id="id missing"),
        pytest.param({"signature": None}, id="signature missing"),
        pytest.param({"signature": "v1,"}, id="signature empty"),
        pytest.param({"signature": "v1a,AAAA"}, id="asymmetric only"),
        pytest.param({"signature": "v1," + base64.b64encode(b"x" * 32).decode()}, id="forged"),
        pytest.param({"secret": OTHER_WHSEC}, id="other secret"),
        pytest.param({"secret": b"whsec_%%%"}, id="undecodable secret"),
        pytest.param({"now": int(TS) + 301}, id="too old"),
        pytest.param({"now": int(TS) - 301}, id="from the future"),
    ],
)
def test_gitlab_signing_refusals(change: dict[str, Any]) -> None:
    assert not check_signed(**change)


def test_gitlab_signing_accepts_any_of_several_signatures_during_rotation() -> None:
    body = body_of(GITLAB_PUSH)
    good = sign_gitlab(WHSEC, WEBHOOK_ID, TS, body)
    old = sign_gitlab(OTHER_WHSEC, WEBHOOK_ID, TS, body)
    assert check_signed(signature=f"{old} {good}")
    assert check_signed(signature=f"v1a,xyz {good}")
    assert not check_signed(signature=old)


def test_gitlab_token_and_signing_both_required_when_both_configured() -> None:
    assert check_signed(token="tok3n", header_token="tok3n")
    assert not check_signed(token="tok3n", header_token="wrong")
    assert not check_signed(token="tok3n", header_token="tok3n", signature=None)


# --- headers and payloads -------------------------------------------------------------------


def test_header_lookup_is_case_insensitive() -> None:
    headers = {"x-github-event": "push"}
    assert header(headers, "X-GitHub-Event") == "push"
    assert header(headers, "X-Other") is None


@pytest.mark.parametrize(
    ("headers", "provider"),
    [
        ({"X-GitHub-Event": "push"}, GITHUB),
        ({"X-Gitlab-Event": "Push Hook"}, GITLAB),
        ({}, None),
        ({"X-GitHub-Event": "push", "X-Gitlab-Event": "Push Hook"}, None),
    ],
)
def test_detect_provider(headers: dict[str, str], provider: str | None) -> None:
    assert detect_provider(headers) == provider


def test_parse_github_push() -> None:
    headers = {"X-GitHub-Event": "push", "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}
    event = parse_push(GITHUB, headers, body_of(GITHUB_PUSH))
    assert event == PushEvent("refs/heads/main", SHA, "acme/dns", "72d3162e-cc78-11e3-81ab-4c9367dc0958")


def test_parse_github_ping_and_others_are_not_pushes() -> None:
    ping = {"zen": "Keep it logically awesome.", "hook_id": 1, "hook": {"type": "Repository"}}
    assert parse_push(GITHUB, {"X-GitHub-Event": "ping"}, body_of(ping)) is None
    assert parse_push(GITHUB, {"X-GitHub-Event": "pull_request"}, b"{}") is None
    assert parse_push(GITHUB, {}, body_of(GITHUB_PUSH)) is None


def test_parse_gitlab_push_and_delivery_id_preference() -> None:
    headers = {
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Event-UUID": "event-uuid",
        "Idempotency-Key": "idem-key",
    }
    event = parse_push(GITLAB, headers, body_of(GITLAB_PUSH))
    assert event == PushEvent("refs/heads/main", SHA, "platform/dns", "idem-key")
    assert delivery_id(GITLAB, {"X-Gitlab-Event-UUID": "event-uuid"}) == "event-uuid"
    assert delivery_id(GITLAB, {"webhook-id": "wh-id", "X-Gitlab-Event-UUID": "u"}) == "wh-id"
    assert delivery_id(GITLAB, {}) is None
    assert delivery_id("bitbucket", {"X-GitHub-Delivery": "x"}) is None


def test_parse_gitlab_system_hook_push_and_non_pushes() -> None:
    assert parse_push(GITLAB, {"X-Gitlab-Event": "System Hook"}, body_of(GITLAB_PUSH)) is not None
    mr = {"object_kind": "merge_request", "project": {"path_with_namespace": "platform/dns"}}
    assert parse_push(GITLAB, {"X-Gitlab-Event": "System Hook"}, body_of(mr)) is None
    tag = dict(GITLAB_PUSH, object_kind="tag_push", ref="refs/tags/v1")
    assert parse_push(GITLAB, {"X-Gitlab-Event": "Tag Push Hook"}, body_of(tag)) is None
    assert parse_push(GITLAB, {"X-Gitlab-Event": "Merge Request Hook"}, body_of(mr)) is None
    assert parse_push("bitbucket", {"X-Gitlab-Event": "Push Hook"}, body_of(GITLAB_PUSH)) is None


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        body_of({"ref": "refs/heads/main", "after": SHA}),
        body_of({"ref": "refs/heads/main", "after": SHA, "repository": {"full_name": 7}}),
        body_of({"ref": "", "after": SHA, "repository": {"full_name": "acme/dns"}}),
        body_of({"after": SHA, "repository": "acme/dns"}),
    ],
)
def test_parse_push_refuses_malformed_push_bodies(body: bytes) -> None:
    with pytest.raises(WebhookPayloadError):
        parse_push(GITHUB, {"X-GitHub-Event": "push"}, body)


# --- replay guard ---------------------------------------------------------------------------


def test_replay_guard_reports_replays() -> None:
    guard = ReplayGuard()
    assert not guard.seen("a")
    assert guard.seen("a")
    assert not guard.seen("b")
    assert "a" in guard and len(guard) == 2


def test_replay_guard_is_bounded_and_forgets_the_oldest() -> None:
    guard = ReplayGuard(max_ids=3)
    for ident in "abc":
        assert not guard.seen(ident)
    assert guard.seen("a")  # refreshes a: b is now the oldest
    assert not guard.seen("d")
    assert len(guard) == 3
    assert "b" not in guard
    assert guard.seen("a") and guard.seen("c") and guard.seen("d")
    assert not guard.seen("b")  # forgotten, so new again


def test_replay_guard_holds_many_ids_within_its_bound() -> None:
    guard = ReplayGuard(max_ids=100)
    for i in range(1000):
        guard.seen(str(i))
    assert len(guard) == 100
    assert guard.seen("999") and not guard.seen("0")


def test_replay_guard_needs_room_for_one_id() -> None:
    with pytest.raises(ValueError):
        ReplayGuard(max_ids=0)


# --- load_json: a body read strictly --------------------------------------------------------


def test_load_json_bounds_depth_size_and_encoding() -> None:
    from gitdns.core.webhook import WebhookPayloadError, load_json

    assert load_json(b"[" * 32 + b"]" * 32) is not None
    for body, reason in [
        (b"[" * 33 + b"]" * 33, "payload nests deeper than 32 levels"),
        (b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, "payload nests deeper than 32 levels"),
        (b"[" * 200_000, "payload nests deeper than 32 levels"),  # not even JSON: still no recursion
        (b'"' + b"[" * 200_000, "payload is not JSON: Unterminated string starting at: line 1 column 1 (char 0)"),
        (b'["\xff"]', "payload is not UTF-8"),
        (b" " * (1024 * 1024 + 1), "payload over 1048576 bytes"),
    ]:
        with pytest.raises(WebhookPayloadError) as caught:
            load_json(body)
        assert str(caught.value) == reason
    assert load_json(b'["]]]]' + b"[" * 100 + b'\\"", {"a": "\\\\"}]') == ["]]]]" + "[" * 100 + '"', {"a": "\\"}]
