"""The HTTP endpoint of the agent and the orchestrator: health, readiness, status, metrics and
git-host webhooks (the agent's; the orchestrator serves no webhook).

Routes (each server serves the groups in its ``routes``; a path of another group is 404)
    ``GET /healthz``   200 ``ok`` while ``live()`` is true (the process loop is alive), else 503
    ``GET /readyz``    200 ``ready`` when ``ready()`` is true, else 503            (health)
    ``GET /status``    200, ``status()`` as JSON (sorted keys)                     (status)
    ``GET /metrics``   200, Prometheus text format                                (metrics)
    ``POST /webhook``, ``/webhook/github``, ``/webhook/gitlab``, ``/webhook/gitea``  (webhook)
                       a delivery from GitHub, GitLab or Gitea, answered as
                       `gitdns.adapters.webhooks` judges it (its docstring has the table)
    411/413            no Content-Length / body over ``max_body`` (1 MiB)
    400/417/431/501/505  a request framed doubtfully (`gitdns.adapters.http.framing`'s table)
    404                an unknown path, a path outside ``routes``, or a webhook path while
                       ``webhook`` is None (off)

The agent runs two: ``WEBHOOK_ROUTES`` on its webhook address and ``ADMIN_ROUTES`` on its
admin address (`gitdns.agent.main.serve`), so what exposes the webhook exposes nothing else.

Hostile clients (`Limits`)
    * request line and headers must arrive within ``header_seconds`` in total, the body within
      ``body_seconds``, whatever the pace (one byte a second renews no deadline); any one read
      or write waits at most ``read_seconds``; a keep-alive connection idle for
      ``header_seconds`` is closed, and serves at most ``requests_per_connection`` requests;
    * at most ``connections`` connections are served at once, ``per_peer`` of them from one
      address; one more is answered 503 and closed by the accepting thread, without a thread
      of its own, and never waits.
    Each served connection has one daemon thread; ``stop()`` closes them all.  The connection
    handling that enforces them is `gitdns.adapters.http.handler`.

``on_push`` runs on the request thread and must be cheap (set a "fetch now" flag); it is
called for every accepted delivery and the caller coalesces. Secrets come in as values in
:class:`WebhookConfig` (read by the caller from the environment or a file) and are never
logged; requests are logged at debug as method, path (no query) and status, never headers
but a delivery id; every piece of a request in a log line goes through
`gitdns.core.text.inline`, so a control character, a line break or a bidi control in it is
written escaped.  A request is framed strictly before any route sees it
(`gitdns.adapters.http.framing.frame_request`: 400 and the connection closed for a doubtful
Content-Length, Transfer-Encoding, Host or field line), and a webhook body is read with
`gitdns.core.webhook.load_json`, which reads it with `gitdns.core.jsonread.strict_loads` (depth,
size, NaN and duplicate keys bounded: 400).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

from gitdns.adapters.http.handler import MAX_BODY, Handler, Reply, Server, text_reply
from gitdns.adapters.webhooks import PATHS as WEBHOOK_PATHS
from gitdns.adapters.webhooks import WebhookConfig, judge, repository_of
from gitdns.core.text import inline
from gitdns.core.webhook import PushEvent, ReplayGuard, delivery_id

__all__ = ["ADMIN_ROUTES", "ALL_ROUTES", "MAX_BODY", "WEBHOOK_ROUTES", "HttpServer", "Limits", "MetricsPage",
           "WebhookConfig", "repository_of"]

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # how soon stop() is noticed

ALL_ROUTES = frozenset({"health", "status", "metrics", "webhook"})
WEBHOOK_ROUTES = frozenset({"health", "webhook"})
ADMIN_ROUTES = frozenset({"health", "status", "metrics"})


@dataclass(frozen=True, slots=True)
class Limits:
    """What one server gives its clients (the module docstring says how each is enforced)."""

    header_seconds: float = 10.0  # request line + headers, in total
    body_seconds: float = 30.0  # the body, in total (1 MiB at 35 kB/s)
    read_seconds: float = 10.0  # any one read or write
    connections: int = 64  # served at once
    per_peer: int = 32  # served at once from one client address
    requests_per_connection: int = 100  # keep-alive


class MetricsPage(Protocol):
    """What the server needs of the process's metrics: the /metrics page and a count of
    webhook deliveries by provider and result (`gitdns.agent.metrics.Metrics`)."""

    content_type: str

    def render(self) -> bytes: ...

    def record_webhook(self, provider: str, result: str) -> None: ...


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
        routes: frozenset[str] = ALL_ROUTES,
        limits: Limits | None = None,
        name: str = "http",
    ) -> None:
        unknown = set(routes) - ALL_ROUTES
        if unknown:
            raise ValueError(f"unknown route groups: {sorted(unknown)}")
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
        self.routes = frozenset(routes)
        self.limits = limits if limits is not None else Limits()
        self.name = name
        self._guard = ReplayGuard(webhook.replay_memory if webhook is not None else 1)
        self._guard_lock = threading.Lock()
        self._httpd: Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (the real one after ``start()`` when 0 was asked for)."""
        return self._httpd.server_address[1] if self._httpd is not None else self._port

    def start(self) -> None:
        if self._httpd is not None:
            raise RuntimeError("HttpServer already started")
        httpd = Server((self.host, self._port), Handler)
        httpd.app = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(POLL_SECONDS,), name=f"gitdns-{self.name}", daemon=True
        )
        self._thread.start()
        log.info("listening: name=%s host=%s port=%d routes=%s", self.name, self.host, self.port,
                 ",".join(sorted(self.routes)))

    @property
    def connections(self) -> int:
        """Connections being served now (each on its own thread)."""
        return self._httpd.open_connections if self._httpd is not None else 0

    def stop(self, timeout: float = 5.0) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        port = self.port
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
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

    def serves(self, path: str) -> bool:
        """Whether ``path`` belongs to a route group of this server."""
        group = _GROUPS.get(path, "webhook" if path in WEBHOOK_PATHS else None)
        return group is not None and group in self.routes

    def handle_get(self, path: str) -> Reply:
        if not self.serves(path):
            return text_reply(404, "not found")
        if path == "/healthz":
            return text_reply(200, "ok") if self.live() else text_reply(503, "not live")
        if path == "/readyz":
            return text_reply(200, "ready") if self.ready() else text_reply(503, "not ready")
        if path == "/status":
            body = json.dumps(self.status(), sort_keys=True, indent=2, default=str) + "\n"
            return Reply(200, body.encode("utf-8"), "application/json")
        if path == "/metrics":
            return Reply(200, self.metrics.render(), self.metrics.content_type)
        return text_reply(405, "use POST")  # a webhook path

    def handle_webhook(self, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        if not self.serves(path):
            return text_reply(404, "not found")
        if self.webhook is None:
            return text_reply(404, "webhook endpoint is off")
        verdict = judge(self.webhook, path, headers, body, now=int(self.clock()), seen=self._seen)
        if verdict.event is not None:
            self.on_push(verdict.event)  # raising: 500, and the delivery is not counted accepted
            log.debug("webhook push: provider=%s ref=%s after=%s",
                      verdict.provider, inline(verdict.event.ref), inline(verdict.event.after[:12]))
        reply = Reply(204) if verdict.status == HTTPStatus.NO_CONTENT else text_reply(verdict.status, verdict.text)
        if verdict.provider is None or verdict.result is None:
            return reply
        return self._count(verdict.provider, verdict.result, reply, delivery_id(verdict.provider, headers))

    def _seen(self, ident: str) -> bool:
        with self._guard_lock:
            return self._guard.seen(ident)

    def _count(self, provider: str, result: str, reply: Reply, delivery: str | None) -> Reply:
        self.metrics.record_webhook(provider, result)
        log.debug("webhook: provider=%s result=%s status=%d delivery=%s", provider, result, reply.status,
                  inline((delivery or "-")[:80]))
        return reply


_GROUPS = {"/healthz": "health", "/readyz": "health", "/status": "status", "/metrics": "metrics"}
