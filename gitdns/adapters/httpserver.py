"""The HTTP endpoint of the agent and the orchestrator: health, readiness, status, metrics and
git-host webhooks (the agent's; the orchestrator serves no webhook).

Routes
    ``GET /healthz``   200 ``ok`` while ``live()`` is true (the process loop is alive), else 503
    ``GET /readyz``    200 ``ready`` when ``ready()`` is true, else 503
    ``GET /status``    200, ``status()`` as JSON (sorted keys)
    ``GET /metrics``   200, Prometheus text format
    ``POST /webhook``, ``/webhook/github``, ``/webhook/gitlab``
                       a delivery from GitHub (``X-GitHub-Event``) or GitLab (``X-Gitlab-Event``)

Webhook outcomes (``gitdns_webhook_deliveries_total{provider,result}``)
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
    400     no/both provider headers, or path and header disagree       (none)
    400     a verified push whose body is not a push payload             ignored
    411/413 no Content-Length / body over ``max_body`` (1 MiB)           (none)
    404     ``webhook`` is None (the endpoint is off)                    (none)
    ======= =========================================================== ==========

Status branches: the agent commits to ``<own_status_prefix><cluster_id>``. A push to that ref
is the agent's own and is ignored (204), so its status commits never wake it. A push to any
other status branch is passed on: primaries (delegation through git) are woken by their remotes' status
pushes. When ``cluster_id`` is not configured the server cannot tell its branch from the
others and ignores every push under ``own_status_prefix``.

``on_push`` runs on the request thread and must be cheap (set a "fetch now" flag); it is
called for every accepted delivery and the caller coalesces. Secrets come in as values in
:class:`WebhookConfig` (read by the caller from the environment or a file) and are never
logged; requests are logged at debug as method, path (no query) and status, never headers.
"""

from __future__ import annotations

import json
import logging
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from gitdns.core.webhook import (
    GITHUB,
    GITLAB,
    PushEvent,
    ReplayGuard,
    WebhookPayloadError,
    delivery_id,
    detect_provider,
    header,
    parse_push,
    verify_github,
    verify_gitlab,
)

__all__ = ["MAX_BODY", "HttpServer", "MetricsPage", "WebhookConfig"]

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
WEBHOOK_PATHS = {"/webhook": None, "/webhook/github": GITHUB, "/webhook/gitlab": GITLAB}
READ_TIMEOUT_SECONDS = 10.0
LINGER_BYTES = 4 * MAX_BODY  # a refused body up to this size is read and dropped, not reset
POLL_SECONDS = 0.1  # how soon stop() is noticed


class MetricsPage(Protocol):
    """What the server needs of the process's metrics: the /metrics page and a count of
    webhook deliveries by provider and result (`gitdns.agent.metrics.Metrics`)."""

    content_type: str

    def render(self) -> bytes: ...

    def record_webhook(self, provider: str, result: str) -> None: ...


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Webhook secrets (values, never paths) and the status-branch rule.

    ``github_secret``: the GitHub hook secret. ``gitlab_token``: GitLab's secret token
    (``X-Gitlab-Token``). ``gitlab_signing_secret``: GitLab's signing token (``whsec_...``).
    A provider with nothing configured has all its deliveries refused (401).
    """

    github_secret: bytes | None = field(default=None, repr=False)
    gitlab_token: str | None = field(default=None, repr=False)
    gitlab_signing_secret: bytes | None = field(default=None, repr=False)
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
        if repo and not same_repository(repo, event.repository):
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


def repository_of(url: str) -> str | None:
    """The "owner/name" path of a remote URL (https://host/owner/name.git, ssh://git@host:22/
    owner/name.git, git@host:owner/name.git); None for a local path, which a webhook never names."""
    from urllib.parse import urlsplit

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


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"


class HttpServer:
    """A stdlib ``ThreadingHTTPServer`` on a daemon thread; ``start()``, ``stop()``, ``port``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        metrics: MetricsPage,
        status: Callable[[], Mapping[str, Any]],
        ready: Callable[[], bool],
        live: Callable[[], bool] | None = None,
        webhook: WebhookConfig | None = None,
        on_push: Callable[[PushEvent], None] | None = None,
        max_body: int = MAX_BODY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host = host
        self._port = port
        self.metrics = metrics
        self.status = status
        self.ready = ready
        self.live = live if live is not None else (lambda: True)
        self.webhook = webhook
        self.on_push = on_push if on_push is not None else (lambda _event: None)
        self.max_body = max_body
        self.clock = clock
        self._guard = ReplayGuard(webhook.replay_memory if webhook is not None else 1)
        self._guard_lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (the real one after ``start()`` when 0 was asked for)."""
        return self._httpd.server_address[1] if self._httpd is not None else self._port

    def start(self) -> None:
        if self._httpd is not None:
            raise RuntimeError("HttpServer already started")
        httpd = _Server((self.host, self._port), _Handler)
        httpd.app = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(POLL_SECONDS,), name="gitdns-http", daemon=True
        )
        self._thread.start()
        log.info("listening: host=%s port=%d", self.host, self.port)

    def stop(self, timeout: float = 5.0) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        port = self.port
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout)
        self._httpd = None
        self._thread = None
        log.info("stopped: port=%d", port)

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- routes ------------------------------------------------------------------------

    def handle_get(self, path: str) -> _Reply:
        if path == "/healthz":
            return _text(200, "ok") if self.live() else _text(503, "not live")
        if path == "/readyz":
            return _text(200, "ready") if self.ready() else _text(503, "not ready")
        if path == "/status":
            body = json.dumps(self.status(), sort_keys=True, indent=2, default=str) + "\n"
            return _Reply(200, body.encode("utf-8"), "application/json")
        if path == "/metrics":
            return _Reply(200, self.metrics.render(), self.metrics.content_type)
        if path in WEBHOOK_PATHS:
            return _text(405, "use POST")
        return _text(404, "not found")

    def handle_webhook(self, path: str, headers: Mapping[str, str], body: bytes) -> _Reply:
        cfg = self.webhook
        if cfg is None:
            return _text(404, "webhook endpoint is off")
        provider = detect_provider(headers)
        if provider is None:
            return _text(400, "expected exactly one of X-GitHub-Event or X-Gitlab-Event")
        expected = WEBHOOK_PATHS[path]
        if expected is not None and expected != provider:
            return _text(400, f"{path} takes {expected} deliveries")
        if not self._verify(cfg, provider, headers, body):
            return self._count(provider, "forged", _text(401, "signature or token does not verify"))
        ident = delivery_id(provider, headers)
        if ident is not None:
            with self._guard_lock:
                replayed = self._guard.seen(ident)
            if replayed:
                return self._count(provider, "replayed", _text(409, "delivery already seen"))
        try:
            event = parse_push(provider, headers, body)
        except WebhookPayloadError as exc:
            return self._count(provider, "ignored", _text(400, str(exc)))
        if event is None:
            return self._count(provider, "ignored", _Reply(204))
        if cfg.is_own_status_push(event.ref):
            return self._count(provider, "ignored", _Reply(204))
        why = cfg.unfollowed(event)
        if why:
            return self._count(provider, "ignored", _text(202, why))
        self.on_push(event)
        log.debug("webhook push: provider=%s ref=%s after=%s", provider, event.ref, event.after[:12])
        return self._count(provider, "accepted", _text(202, "accepted"))

    def _verify(self, cfg: WebhookConfig, provider: str, headers: Mapping[str, str], body: bytes) -> bool:
        if provider == GITHUB:
            return verify_github(cfg.github_secret or b"", body, header(headers, "X-Hub-Signature-256"))
        return verify_gitlab(
            cfg.gitlab_token,
            header(headers, "X-Gitlab-Token"),
            signing_secret=cfg.gitlab_signing_secret,
            body=body,
            signature_header=header(headers, "webhook-signature"),
            timestamp_header=header(headers, "webhook-timestamp"),
            webhook_id_header=header(headers, "webhook-id"),
            now=int(self.clock()),
            tolerance_seconds=cfg.timestamp_tolerance_seconds,
        )

    def _count(self, provider: str, result: str, reply: _Reply) -> _Reply:
        self.metrics.record_webhook(provider, result)
        log.debug("webhook: provider=%s result=%s status=%d", provider, result, reply.status)
        return reply


def _text(status: int, text: str) -> _Reply:
    return _Reply(status, (text + "\n").encode("utf-8"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: HttpServer

    def server_bind(self) -> None:
        """Bind without http.server's reverse lookup of the listen address (``getfqdn``),
        which would ask the resolver about ``0.0.0.0`` at every start."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT_SECONDS  # a slow or stalled client cannot hold a thread for ever
    server_version = "gitdns"
    sys_version = ""

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        try:
            reply = self.server.app.handle_get(path)
        except Exception:
            log.exception("request failed: method=GET path=%s", path)
            reply = _text(500, "internal error")
        self._send(reply)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path not in WEBHOOK_PATHS:
            self._read_body()  # consumed (or dropped) so the 404 reaches the client
            self.close_connection = True
            self._send(_text(404, "not found"))
            return
        body = self._read_body()
        if isinstance(body, _Reply):
            self._send(body)
            return
        headers = dict(self.headers.items())
        try:
            reply = self.server.app.handle_webhook(path, headers, body)
        except Exception:
            log.exception("request failed: method=POST path=%s", path)
            reply = _text(500, "internal error")
        self._send(reply)

    def _read_body(self) -> bytes | _Reply:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            return _text(411, "Content-Length required (no chunked bodies)")
        raw = self.headers.get("Content-Length")
        if raw is None:
            self.close_connection = True
            return _text(411, "Content-Length required")
        try:
            length = int(raw)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            return _text(400, "bad Content-Length")
        if length > self.server.app.max_body:
            self._discard(length)
            return _text(413, f"body over {self.server.app.max_body} bytes")
        return self.rfile.read(length)

    def _discard(self, length: int) -> None:
        """Read and drop a refused body up to LINGER_BYTES so the client gets to read the
        refusal (closing on unread data resets the connection); then close."""
        self.close_connection = True
        if length > LINGER_BYTES:
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 64 * 1024))
            if not chunk:
                return
            length -= len(chunk)

    def _send(self, reply: _Reply) -> None:
        self.send_response(reply.status)
        if reply.status != HTTPStatus.NO_CONTENT:
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
        if reply.status == HTTPStatus.METHOD_NOT_ALLOWED:
            self.send_header("Allow", "POST")
        self.send_header("Cache-Control", "no-store")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and reply.status != HTTPStatus.NO_CONTENT:
            self.wfile.write(reply.body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # The request line may carry a query string; log the path only, and never headers.
        log.debug("request: method=%s path=%s status=%s", self.command, urlsplit(self.path).path, code)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: %s", format % args)
