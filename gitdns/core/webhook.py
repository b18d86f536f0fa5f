"""Webhook deliveries from git hosts: verify them, read the push out of them, spot replays.

Pure: bytes and strings in, values out; no clock (a caller that wants a timestamp window
passes ``now``), no I/O, no logging. ``gitdns.adapters.http.server`` is the only caller.

GitHub
    ``X-Hub-Signature-256: sha256=<hex>``, HMAC-SHA256 of the raw body under the hook's
    secret. ``X-GitHub-Event`` names the event (``push``, ``ping``, ...),
    ``X-GitHub-Delivery`` is a GUID per delivery. The signature covers the body only, so a
    captured delivery replays; the delivery id is not signed.

GitLab
    ``X-Gitlab-Token`` carries the hook's secret token itself (compared in constant time).
    Where a *signing token* is configured, GitLab also signs the delivery the Standard
    Webhooks way; see :func:`verify_gitlab`. ``X-Gitlab-Event`` names the event
    (``Push Hook``, ``Tag Push Hook``, ``System Hook``, ...); ``Idempotency-Key`` (equal to
    ``webhook-id`` when signing is on) stays the same across retries of one delivery, and
    ``X-Gitlab-Event-UUID`` identifies the event.

Gitea
    ``X-Gitea-Signature: <hex>``, HMAC-SHA256 of the raw body under the hook's secret, bare
    lowercase hex with no ``sha256=`` prefix (empty when the hook has no secret).
    ``X-Gitea-Event`` names the event (``push``, ``create``, ``delete``, ...),
    ``X-Gitea-Delivery`` is a UUID per delivery. For compatibility every Gitea delivery
    also carries ``X-Gogs-Event``/``X-Gogs-Signature`` and GitHub's ``X-GitHub-Event``,
    ``X-GitHub-Delivery`` (the same UUID) and ``X-Hub-Signature-256: sha256=<the same hex>``
    (Gitea's ``services/webhook/deliver.go``, ``addDefaultHeaders``), so one delivery reads as
    both; :func:`detect_provider` says which it is taken for. The push payload is GitHub's
    shape (``ref``, ``after``, ``repository.full_name``, ``clone_url``, ``ssh_url``,
    ``html_url``). The signature covers the payload, which is the body only with the hook's
    content type ``application/json`` (a form-encoded delivery never verifies); like
    GitHub's it covers no delivery id or timestamp.

Every delivery is only a hint to fetch now: the agent fetches and verifies the revision
itself, so a replayed push costs one fetch at most. Replays are still counted and refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from gitdns.core.jsonread import MAX_JSON_BYTES, MAX_JSON_DEPTH, JsonRefused, strict_loads

__all__ = [
    "GITEA",
    "GITHUB",
    "GITLAB",
    "PROVIDERS",
    "PushEvent",
    "ReplayGuard",
    "WebhookPayloadError",
    "delivery_id",
    "detect_provider",
    "header",
    "load_json",
    "parse_push",
    "sign_gitea",
    "sign_github",
    "sign_gitlab",
    "signing_key",
    "verify_gitea",
    "verify_github",
    "verify_gitlab",
]

GITHUB = "github"
GITLAB = "gitlab"
GITEA = "gitea"
PROVIDERS = (GITHUB, GITLAB, GITEA)

_GITHUB_PREFIX = "sha256="
_SHA256_HEX_LEN = 64
_WHSEC_PREFIX = b"whsec_"
DEFAULT_TOLERANCE_SECONDS = 300  # Standard Webhooks: a timestamp window against replays


class WebhookPayloadError(ValueError):
    """A verified delivery says it is a push but its body is not a push payload."""


@dataclass(frozen=True, slots=True)
class PushEvent:
    """What the agent needs from a push: which ref moved to which commit, in which repo."""

    ref: str  # "refs/heads/main"
    after: str  # the commit the ref now points at (all zeros when the ref was deleted)
    repository: str  # "owner/name" (GitHub and Gitea full_name, GitLab path_with_namespace)
    delivery_id: str | None
    # the repository's URLs as the delivery gives them (Gitea: clone_url, ssh_url, html_url),
    # for a forge served under a sub-path, where "owner/name" is not the URL's whole path
    urls: tuple[str, ...] = ()


# --- headers ----------------------------------------------------------------------------


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A header by case-insensitive name; None when absent."""
    value = headers.get(name)
    if value is not None:
        return value
    wanted = name.lower()
    for key, val in headers.items():
        if key.lower() == wanted:
            return val
    return None


def detect_provider(headers: Mapping[str, str], *, gitea_first: bool = True) -> str | None:
    """``github`` for ``X-GitHub-Event``, ``gitlab`` for ``X-Gitlab-Event``, ``gitea`` for
    ``X-Gitea-Event``, else None.

    A Gitea delivery also carries ``X-GitHub-Event``: it is ``gitea`` when ``gitea_first``
    (or when it lacks ``X-GitHub-Event``), else ``github`` (read through its GitHub headers).
    A request that carries ``X-Gitlab-Event`` and either of the others is ambiguous and gets
    None.
    """
    is_github = header(headers, "X-GitHub-Event") is not None
    is_gitlab = header(headers, "X-Gitlab-Event") is not None
    is_gitea = header(headers, "X-Gitea-Event") is not None
    if is_gitlab:
        return None if is_github or is_gitea else GITLAB
    if is_gitea and (gitea_first or not is_github):
        return GITEA
    return GITHUB if is_github else None


def delivery_id(provider: str, headers: Mapping[str, str]) -> str | None:
    """The id a replay guard keys on: ``X-GitHub-Delivery``; for GitLab ``Idempotency-Key``
    (stable across retries), else ``webhook-id``, else ``X-Gitlab-Event-UUID``; for Gitea
    ``X-Gitea-Delivery`` (the same UUID as its ``X-GitHub-Delivery``, so one delivery is one
    id whichever provider it is taken for)."""
    if provider == GITHUB:
        names: tuple[str, ...] = ("X-GitHub-Delivery",)
    elif provider == GITEA:
        names = ("X-Gitea-Delivery",)
    elif provider == GITLAB:
        names = ("Idempotency-Key", "webhook-id", "X-Gitlab-Event-UUID")
    else:
        return None
    for name in names:
        value = header(headers, name)
        if value:
            return value.strip()
    return None


# --- GitHub -----------------------------------------------------------------------------


def sign_github(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body`` (for tests and tools)."""
    return _GITHUB_PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_github(secret: bytes, body: bytes, signature_header: str | None) -> bool:
    """True when ``signature_header`` is ``sha256=<hex>`` of ``body`` under ``secret``.

    An empty secret never verifies (fail closed). The comparison is constant-time over the
    64 hex digits; a header of another shape is refused before any comparison.
    """
    if not secret or signature_header is None:
        return False
    value = signature_header.strip()
    if not value.startswith(_GITHUB_PREFIX):
        return False
    given = value[len(_GITHUB_PREFIX) :].lower()
    if len(given) != _SHA256_HEX_LEN:
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode("ascii"), given.encode("ascii", "replace"))


# --- Gitea ------------------------------------------------------------------------------


def sign_gitea(secret: bytes, body: bytes) -> str:
    """The ``X-Gitea-Signature`` value Gitea sends for ``body`` (for tests and tools)."""
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_gitea(secret: bytes, body: bytes, signature_header: str | None) -> bool:
    """True when ``signature_header`` is the bare hex HMAC-SHA256 of ``body`` under ``secret``.

    An empty secret never verifies (fail closed), nor does an empty header (what Gitea sends
    for a hook without a secret). The comparison is constant-time over the 64 hex digits; a
    header of another shape (a ``sha256=`` prefix included) is refused before any comparison.
    """
    if not secret or signature_header is None:
        return False
    given = signature_header.strip().lower()
    if len(given) != _SHA256_HEX_LEN:
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode("ascii"), given.encode("ascii", "replace"))


# --- GitLab -----------------------------------------------------------------------------


def signing_key(secret: bytes) -> bytes:
    """The HMAC key of a Standard Webhooks secret: ``whsec_<base64>`` decodes to its bytes;
    anything else is used as given. An undecodable ``whsec_`` secret gives ``b""``."""
    if secret.startswith(_WHSEC_PREFIX):
        try:
            return base64.b64decode(secret[len(_WHSEC_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            return b""
    return secret


def _gitlab_signed_content(webhook_id: str, timestamp: str, body: bytes) -> bytes:
    return webhook_id.encode("utf-8") + b"." + timestamp.encode("ascii") + b"." + body


def sign_gitlab(secret: bytes, webhook_id: str, timestamp: str, body: bytes) -> str:
    """The ``webhook-signature`` value (``v1,<base64>``) for one delivery (tests and tools)."""
    mac = hmac.new(signing_key(secret), _gitlab_signed_content(webhook_id, timestamp, body), hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode("ascii")


def _token_ok(token: str, header_token: str | None) -> bool:
    if header_token is None:
        return False
    return hmac.compare_digest(token.encode("utf-8"), header_token.encode("utf-8"))


def _timestamp_ok(timestamp: str, now: int | None, tolerance: int) -> bool:
    if not timestamp.isascii() or not timestamp.isdigit():
        return False
    return now is None or abs(now - int(timestamp)) <= tolerance


def _signature_ok(
    secret: bytes,
    body: bytes,
    signature_header: str | None,
    timestamp_header: str | None,
    webhook_id_header: str | None,
    now: int | None,
    tolerance: int,
) -> bool:
    key = signing_key(secret)
    if not key or not signature_header or not timestamp_header or not webhook_id_header:
        return False
    timestamp = timestamp_header.strip()
    if not _timestamp_ok(timestamp, now, tolerance):
        return False
    content = _gitlab_signed_content(webhook_id_header.strip(), timestamp, body)
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest())
    matched = False
    for item in signature_header.split():  # several during a key rotation, space separated
        version, _, sig = item.partition(",")
        if version == "v1" and sig:
            # No early exit: every candidate is compared, so timing says nothing about which.
            matched |= hmac.compare_digest(expected, sig.encode("ascii", "replace"))
    return matched


def verify_gitlab(
    token: str | None,
    header_token: str | None,
    *,
    signing_secret: bytes | None = None,
    body: bytes = b"",
    signature_header: str | None = None,
    timestamp_header: str | None = None,
    webhook_id_header: str | None = None,
    now: int | None = None,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """True when a GitLab delivery passes every check that is configured.

    * ``token`` (the hook's secret token): ``X-Gitlab-Token`` must equal it (constant time).
      ``None`` or ``""`` means no token is configured.
    * ``signing_secret`` (the hook's signing token, ``whsec_<base64>`` or raw key bytes):
      ``webhook-signature`` must hold a ``v1,<base64 HMAC-SHA256>`` over
      ``<webhook-id>.<webhook-timestamp>.<body>``; with ``now`` (unix seconds) given, the
      timestamp must also lie within ``tolerance_seconds`` of it.

    With neither configured nothing verifies (fail closed).

    The signing part follows the Standard Webhooks specification (v1.0.0) and the
    description in GitLab merge request 230944 (signed content ``{webhook-id}.{timestamp}.
    {body}``, header ``webhook-signature: v1,<base64>``, ``webhook-id`` equal to
    ``Idempotency-Key``), which GitLab shipped behind the ``webhook_signing_token`` feature
    flag. It was not checked against deliveries from a real GitLab instance.
    """
    has_token = bool(token)
    has_signing = bool(signing_secret)
    if not has_token and not has_signing:
        return False
    ok = True
    if token:
        ok &= _token_ok(token, header_token)
    if signing_secret:
        ok &= _signature_ok(
            signing_secret, body, signature_header, timestamp_header, webhook_id_header, now, tolerance_seconds
        )
    return ok


# --- payloads ---------------------------------------------------------------------------


def load_json(body: bytes, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> object:
    """A webhook body's JSON value, read strictly by `gitdns.core.jsonread.strict_loads` (UTF-8,
    at most ``max_bytes``, nested at most ``max_depth`` deep, no ``NaN``/``Infinity``, no key
    twice).  Raises :class:`WebhookPayloadError` with a short reason, never ``RecursionError``."""
    try:
        return strict_loads(body, max_bytes=max_bytes, max_depth=max_depth)
    except JsonRefused as exc:
        raise WebhookPayloadError(f"payload {exc}") from exc


def _load_json(body: bytes) -> dict[str, object]:
    try:
        data = load_json(body)
    except WebhookPayloadError as exc:
        raise WebhookPayloadError(f"push {exc}") from exc
    if not isinstance(data, dict):
        raise WebhookPayloadError("push payload is not a JSON object")
    return data


def _text(data: Mapping[str, object], *path: str) -> str:
    node: object = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            raise WebhookPayloadError(f"push payload has no {'.'.join(path)}")
        node = node[key]
    if not isinstance(node, str) or not node:
        raise WebhookPayloadError(f"push payload field {'.'.join(path)} is not a non-empty string")
    return node


def _gitlab_is_push(event: str, data: Mapping[str, object]) -> bool:
    # "Push Hook" for project hooks; system hooks send "System Hook" with object_kind push.
    if event == "Push Hook":
        return data.get("object_kind", "push") == "push"
    return event == "System Hook" and data.get("object_kind") == "push"


def _urls(data: Mapping[str, object]) -> tuple[str, ...]:
    repo = data.get("repository")
    if not isinstance(repo, Mapping):
        return ()
    found = (repo.get(key) for key in ("clone_url", "ssh_url", "html_url"))
    return tuple(url for url in found if isinstance(url, str) and url)


def parse_push(provider: str, headers: Mapping[str, str], body: bytes) -> PushEvent | None:
    """The push a (verified) delivery announces; None for any other event.

    GitHub: ``X-GitHub-Event: push`` (``ping`` and the rest give None), fields ``ref``,
    ``after``, ``repository.full_name``. GitLab: ``X-Gitlab-Event: Push Hook`` (or a system
    hook whose ``object_kind`` is ``push``; tag pushes give None), fields ``ref``, ``after``,
    ``project.path_with_namespace``. Gitea: ``X-Gitea-Event: push``, GitHub's fields, and the
    optional ``repository.clone_url``, ``ssh_url`` and ``html_url`` as ``urls``. Raises
    :class:`WebhookPayloadError` when a push's body lacks the required fields.
    """
    urls: tuple[str, ...] = ()
    if provider == GITHUB:
        if (header(headers, "X-GitHub-Event") or "").strip() != "push":
            return None
        data = _load_json(body)
        repo = _text(data, "repository", "full_name")
    elif provider == GITEA:
        if (header(headers, "X-Gitea-Event") or "").strip() != "push":
            return None
        data = _load_json(body)
        repo = _text(data, "repository", "full_name")
        urls = _urls(data)
    elif provider == GITLAB:
        event = (header(headers, "X-Gitlab-Event") or "").strip()
        if event not in ("Push Hook", "System Hook"):
            return None
        data = _load_json(body)
        if not _gitlab_is_push(event, data):
            return None
        repo = _text(data, "project", "path_with_namespace")
    else:
        return None
    return PushEvent(
        ref=_text(data, "ref"),
        after=_text(data, "after"),
        repository=repo,
        delivery_id=delivery_id(provider, headers),
        urls=urls,
    )


# --- replays ----------------------------------------------------------------------------


class ReplayGuard:
    """A bounded record of delivery ids already seen, oldest forgotten first.

    ``seen(id)`` records ``id`` and says whether it was there already (a replay). Seeing an
    id again refreshes it, so an id replayed over and over stays remembered. Not
    thread-safe: a caller with threads holds a lock around it. Record only deliveries that
    verified, or a forger could fill the record and push real ids out.
    """

    __slots__ = ("_ids", "_max")

    def __init__(self, max_ids: int = 4096) -> None:
        if max_ids < 1:
            raise ValueError("max_ids must be at least 1")
        self._max = max_ids
        self._ids: OrderedDict[str, None] = OrderedDict()

    @property
    def max_ids(self) -> int:
        return self._max

    def seen(self, delivery_id: str) -> bool:
        if delivery_id in self._ids:
            self._ids.move_to_end(delivery_id)
            return True
        self._ids[delivery_id] = None
        while len(self._ids) > self._max:
            self._ids.popitem(last=False)
        return False

    def __contains__(self, delivery_id: object) -> bool:
        return delivery_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)
