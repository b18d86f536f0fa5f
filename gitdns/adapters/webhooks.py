"""What one webhook delivery means for this agent: which provider it is taken for, whether it
verifies under the secret configured for that provider, and whether it is a push the agent
follows. No sockets, no clock (``now`` comes in), no logging: `gitdns.adapters.http.server`
reads the request, calls :func:`judge` and answers with its :class:`Verdict`. The providers'
wire formats (signatures, headers, payloads) are `gitdns.core.webhook`'s.

Outcomes (``gitdns_webhook_deliveries_total{provider,result}``)
    ======= =========================================================== ==========
    status  when                                                        result
    ======= =========================================================== ==========
    202     a verified push, passed to ``on_push``                      accepted
    202     a verified push to another repository or branch than the    ignored
            agent follows (the body says which); nothing runs
    204     verified, but not a push, or a push to our own status branch ignored
    401     signature/token wrong or missing, or no secret configured   forged
            for that provider (fail closed)
    409     a delivery id seen before (only verified ones are recorded) replayed
    400     no provider header, GitLab's together with another's, or    (none)
            path and provider disagree
    400     a verified push whose body is not a push payload             ignored
    ======= =========================================================== ==========

Gitea and GitHub. Every Gitea delivery also carries GitHub's headers (``X-GitHub-Event``,
``X-Hub-Signature-256`` over the same body under the same secret). It is judged once, as one
provider, never as the other after a failure:

* as ``gitea`` when a Gitea secret is configured or it arrives on ``/webhook/gitea``:
  ``X-Gitea-Signature`` under the Gitea secret decides; a good ``X-Hub-Signature-256`` does
  not rescue a bad or missing ``X-Gitea-Signature``;
* else as ``github`` through its GitHub headers, under the GitHub secret (what an agent with
  only a GitHub secret has always done with Gitea deliveries).

Both read the same delivery UUID (``X-Gitea-Delivery`` = ``X-GitHub-Delivery``), so a
delivery taken as one provider and replayed without its Gitea headers is still a replay.

Status branches: the agent commits to ``<own_status_prefix><cluster_id>``. A push to that ref
is the agent's own and is ignored (204), so its status commits never wake it. A push to any
other status branch is passed on: primaries (delegation through git) are woken by their
remotes' status pushes. When ``cluster_id`` is not configured the agent cannot tell its
branch from the others and ignores every push under ``own_status_prefix``.

Secrets come in as values in :class:`WebhookConfig` (read by the caller from files) and are
never in a repr, a verdict or a message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gitdns.core.webhook import (
    GITEA,
    GITHUB,
    GITLAB,
    PushEvent,
    WebhookPayloadError,
    delivery_id,
    detect_provider,
    header,
    parse_push,
    verify_gitea,
    verify_github,
    verify_gitlab,
)

__all__ = ["PATHS", "Verdict", "WebhookConfig", "choose_provider", "judge", "repository_of",
           "same_repository", "verify"]

# the webhook paths and the provider each takes (None: any)
PATHS: Mapping[str, str | None] = {
    "/webhook": None,
    "/webhook/github": GITHUB,
    "/webhook/gitlab": GITLAB,
    "/webhook/gitea": GITEA,
}


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Webhook secrets (values, never paths) and what the agent follows.

    ``github_secret``: the GitHub hook secret. ``gitlab_token``: GitLab's secret token
    (``X-Gitlab-Token``). ``gitlab_signing_secret``: GitLab's signing token (``whsec_...``).
    ``gitea_secret``: the Gitea hook secret. A provider with nothing configured has all its
    deliveries refused (401).
    """

    github_secret: bytes | None = field(default=None, repr=False)
    gitlab_token: str | None = field(default=None, repr=False)
    gitlab_signing_secret: bytes | None = field(default=None, repr=False)
    gitea_secret: bytes | None = field(default=None, repr=False)
    own_status_prefix: str = "refs/heads/gitdns-status/"
    cluster_id: str | None = None
    timestamp_tolerance_seconds: int = 300
    replay_memory: int = 4096
    # what this agent follows: pushes elsewhere are answered 202 with the reason and start nothing
    branch: str | None = None  # the desired branch (None: any)
    repository: str | None = None  # "owner/name" of the desired repository (None: any)
    status_repository: str | None = None  # where the status branches live (default: ``repository``)

    @property
    def own_status_ref(self) -> str | None:
        return None if self.cluster_id is None else self.own_status_prefix + self.cluster_id

    def unfollowed(self, event: PushEvent) -> str:
        """Why this agent does not act on ``event`` ("" when it does): another repository, or a
        branch that is neither the desired branch nor another cluster's status branch."""
        status = event.ref.startswith(self.own_status_prefix)
        repo = (self.status_repository or self.repository) if status else self.repository
        if repo and not names_repository(event, repo):
            return f"ignored: a push to {event.repository or 'an unnamed repository'}, not {repo}"
        if not status and self.branch and event.ref != f"refs/heads/{self.branch}":
            return f"ignored: a push to {event.ref}, not refs/heads/{self.branch}"
        return ""

    def is_own_status_push(self, ref: str) -> bool:
        """True for a push the agent made itself (see the module docstring for the rule)."""
        if self.cluster_id is None:
            return ref.startswith(self.own_status_prefix)
        return ref == self.own_status_ref


def same_repository(configured: str, pushed: str) -> bool:
    """Whether a delivery's repository ("owner/name"; GitLab: the full namespace path) is the
    configured one: exact, ignoring case and a ``.git`` suffix."""
    def norm(name: str) -> str:
        name = name.strip().strip("/").lower()
        return name[:-4] if name.endswith(".git") else name
    return bool(pushed) and norm(configured) == norm(pushed)


def names_repository(event: PushEvent, configured: str) -> bool:
    """Whether ``event`` is a push to ``configured``: by its "owner/name", or by the path of one
    of its URLs (Gitea sends them; a forge under a sub-path, ``https://host/git/owner/name``,
    gives ``git/owner/name`` for a remote URL where the payload's name is ``owner/name``)."""
    if same_repository(configured, event.repository):
        return True
    return any(same_repository(configured, path) for path in map(repository_of, event.urls) if path)


def repository_of(url: str) -> str | None:
    """The "owner/name" path of a remote URL (https://host/owner/name.git, ssh://git@host:22/
    owner/name.git, git@host:owner/name.git); None for a local path, which a webhook never names."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme == "file":
            return None
        path = parts.path
    elif ":" in url and not url.startswith(("/", ".")):
        path = url.split(":", 1)[1]
    else:
        return None
    path = path.strip("/")
    path = path[:-4] if path.endswith(".git") else path
    return path or None


def choose_provider(cfg: WebhookConfig, headers: Mapping[str, str], path_provider: str | None) -> str | None:
    """The provider a delivery is judged as (see the module docstring for Gitea's), None when
    its headers name none or are ambiguous."""
    return detect_provider(headers, gitea_first=bool(cfg.gitea_secret) or path_provider == GITEA)


def verify(cfg: WebhookConfig, provider: str, headers: Mapping[str, str], body: bytes, now: int) -> bool:
    """Whether a delivery verifies under the secrets configured for ``provider``, and only those."""
    if provider == GITHUB:
        return verify_github(cfg.github_secret or b"", body, header(headers, "X-Hub-Signature-256"))
    if provider == GITEA:
        return verify_gitea(cfg.gitea_secret or b"", body, header(headers, "X-Gitea-Signature"))
    if provider == GITLAB:
        return verify_gitlab(
            cfg.gitlab_token,
            header(headers, "X-Gitlab-Token"),
            signing_secret=cfg.gitlab_signing_secret,
            body=body,
            signature_header=header(headers, "webhook-signature"),
            timestamp_header=header(headers, "webhook-timestamp"),
            webhook_id_header=header(headers, "webhook-id"),
            now=now,
            tolerance_seconds=cfg.timestamp_tolerance_seconds,
        )
    return False


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to one delivery. ``provider`` and ``result`` label the deliveries metric
    (None: not counted); ``event`` is set when the push is to be passed to ``on_push``."""

    status: int
    text: str = ""  # the body's one line ("" with 204)
    provider: str | None = None
    result: str | None = None
    event: PushEvent | None = None


def judge(
    cfg: WebhookConfig,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: int,
    seen: Callable[[str], bool],
) -> Verdict:
    """The verdict on a delivery to ``path`` (one of :data:`PATHS`). ``seen(id)`` records a
    verified delivery's id and says whether it was there already (the caller's replay guard,
    under its lock); it is called only after the delivery verified."""
    expected = PATHS[path]
    provider = choose_provider(cfg, headers, expected)
    if provider is None:
        return Verdict(400, "expected one provider: X-GitHub-Event, X-Gitea-Event or X-Gitlab-Event "
                           "(GitLab's not with another's)")
    if expected is not None and expected != provider:
        return Verdict(400, f"{path} takes {expected} deliveries")
    if not verify(cfg, provider, headers, body, now):
        return Verdict(401, "signature or token does not verify", provider, "forged")
    ident = delivery_id(provider, headers)
    if ident is not None and seen(ident):
        return Verdict(409, "delivery already seen", provider, "replayed")
    try:
        event = parse_push(provider, headers, body)
    except WebhookPayloadError as exc:
        return Verdict(400, str(exc), provider, "ignored")
    if event is None or cfg.is_own_status_push(event.ref):
        return Verdict(204, "", provider, "ignored")
    why = cfg.unfollowed(event)
    if why:
        return Verdict(202, why, provider, "ignored")
    return Verdict(202, "accepted", provider, "accepted", event)
