"""The HTTP endpoint of the agent and the orchestrator: health, readiness, status, metrics and
git-host webhooks (the agent's; the orchestrator serves no webhook).

Routes
    ``GET /healthz``   200 ``ok`` while ``live()`` is true (the process loop is alive), else 503
    ``GET /readyz``    200 ``ready`` when ``ready()`` is true, else 503
    ``GET /status``    200, ``status()`` as JSON (sorted keys)
    ``GET /metrics``   200, Prometheus text format
    ``POST /webhook``, ``/webhook/github``, ``/webhook/gitlab``, ``/webhook/gitea``
                       a delivery from GitHub, GitLab or Gitea, answered as
                       `gitdns.adapters.webhooks` judges it (its docstring has the table)
    411/413            no Content-Length / body over ``max_body`` (1 MiB)
    404                an unknown path, or a webhook path while ``webhook`` is None (off)

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
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from gitdns.adapters.webhooks import PATHS as WEBHOOK_PATHS
from gitdns.adapters.webhooks import WebhookConfig, judge, repository_of
from gitdns.core.webhook import PushEvent, ReplayGuard

__all__ = ["MAX_BODY", "HttpServer", "MetricsPage", "WebhookConfig", "repository_of"]

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
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
        if self.webhook is None:
            return _text(404, "webhook endpoint is off")
        verdict = judge(self.webhook, path, headers, body, now=int(self.clock()), seen=self._seen)
        if verdict.event is not None:
            self.on_push(verdict.event)  # raising: 500, and the delivery is not counted accepted
            log.debug("webhook push: provider=%s ref=%s after=%s",
                      verdict.provider, verdict.event.ref, verdict.event.after[:12])
        reply = _Reply(204) if verdict.status == HTTPStatus.NO_CONTENT else _text(verdict.status, verdict.text)
        if verdict.provider is None or verdict.result is None:
            return reply
        return self._count(verdict.provider, verdict.result, reply)

    def _seen(self, ident: str) -> bool:
        with self._guard_lock:
            return self._guard.seen(ident)

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
