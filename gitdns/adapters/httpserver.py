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
    Each served connection has one daemon thread; ``stop()`` closes them all.

``on_push`` runs on the request thread and must be cheap (set a "fetch now" flag); it is
called for every accepted delivery and the caller coalesces. Secrets come in as values in
:class:`WebhookConfig` (read by the caller from the environment or a file) and are never
logged; requests are logged at debug as method, path (no query) and status, never headers.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import socket
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

__all__ = ["ADMIN_ROUTES", "ALL_ROUTES", "MAX_BODY", "WEBHOOK_ROUTES", "HttpServer", "Limits", "MetricsPage",
           "WebhookConfig", "repository_of"]

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
LINGER_BYTES = 4 * MAX_BODY  # a refused body up to this size is read and dropped, not reset
POLL_SECONDS = 0.1  # how soon stop() is noticed
REFUSAL_LOG_SECONDS = 60.0  # refused connections are logged as a count at most this often

ALL_ROUTES = frozenset({"health", "status", "metrics", "webhook"})
WEBHOOK_ROUTES = frozenset({"health", "webhook"})
ADMIN_ROUTES = frozenset({"health", "status", "metrics"})

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
         b"Content-Length: 5\r\nRetry-After: 1\r\nCache-Control: no-store\r\nConnection: close\r\n\r\nbusy\n")


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

    def handle_get(self, path: str) -> _Reply:
        if not self.serves(path):
            return _text(404, "not found")
        if path == "/healthz":
            return _text(200, "ok") if self.live() else _text(503, "not live")
        if path == "/readyz":
            return _text(200, "ready") if self.ready() else _text(503, "not ready")
        if path == "/status":
            body = json.dumps(self.status(), sort_keys=True, indent=2, default=str) + "\n"
            return _Reply(200, body.encode("utf-8"), "application/json")
        if path == "/metrics":
            return _Reply(200, self.metrics.render(), self.metrics.content_type)
        return _text(405, "use POST")  # a webhook path

    def handle_webhook(self, path: str, headers: Mapping[str, str], body: bytes) -> _Reply:
        if not self.serves(path):
            return _text(404, "not found")
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


_GROUPS = {"/healthz": "health", "/readyz": "health", "/status": "status", "/metrics": "metrics"}


def _text(status: int, text: str) -> _Reply:
    return _Reply(status, (text + "\n").encode("utf-8"))


class _Server(ThreadingHTTPServer):
    """One thread per connection, up to ``Limits.connections`` (``per_peer`` per address); the
    accepting thread answers one more 503 itself and closes it."""

    daemon_threads = True
    block_on_close = False  # stop() closes the connections instead of waiting for them
    request_queue_size = 128  # a burst waits in the backlog, not in threads
    app: HttpServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._lock = threading.Lock()
        self._open: dict[socket.socket, str] = {}  # served connection -> peer address
        self._peers: dict[str, int] = {}
        self.refused = 0
        self._refusals_logged = 0
        self._refusal_logged_at = -math.inf
        super().__init__(address, handler)

    def server_bind(self) -> None:
        """Bind without http.server's reverse lookup of the listen address (``getfqdn``),
        which would ask the resolver about ``0.0.0.0`` at every start."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    def process_request(self, request: Any, client_address: Any) -> None:
        """On the accepting thread: admit the connection to a thread of its own, or refuse it."""
        limits = self.app.limits
        peer = str(client_address[0])
        with self._lock:
            admitted = len(self._open) < limits.connections and self._peers.get(peer, 0) < limits.per_peer
            if admitted:
                self._open[request] = peer
                self._peers[peer] = self._peers.get(peer, 0) + 1
        if not admitted:
            self._refuse(request, peer)
            return
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name=f"gitdns-{self.app.name}-conn", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: refuse rather than fail the accept loop
            self._release(request)
            self._refuse(request, peer)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def _release(self, request: socket.socket) -> None:
        with self._lock:
            peer = self._open.pop(request, None)
            if peer is not None:
                left = self._peers.get(peer, 1) - 1
                if left > 0:
                    self._peers[peer] = left
                else:
                    self._peers.pop(peer, None)

    def _refuse(self, request: socket.socket, peer: str) -> None:
        """503 and close, without blocking: what the send buffer takes now is all it gets."""
        try:
            request.setblocking(False)
            request.send(_BUSY)
        except OSError:
            pass
        self.shutdown_request(request)
        self.refused += 1
        now = time.monotonic()
        if now - self._refusal_logged_at >= REFUSAL_LOG_SECONDS:
            log.warning("connections refused: name=%s count=%d peer=%s (limits: %d at once, %d per address)",
                        self.app.name, self.refused - self._refusals_logged, peer,
                        self.app.limits.connections, self.app.limits.per_peer)
            self._refusal_logged_at, self._refusals_logged = now, self.refused

    def close_connections(self) -> None:
        """Wake every connection thread (their reads fail) so none outlives stop() for long."""
        with self._lock:
            requests = list(self._open)
        for request in requests:
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets or vanishes mid-request: one debug line, not socketserver's
        traceback on stderr; anything else is logged as the error it is."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            log.debug("connection ended: name=%s error=%s", self.app.name, type(exc).__name__)
        else:
            log.error("request failed: name=%s", self.app.name, exc_info=exc)


class _DeadlineReader(io.RawIOBase):
    """The socket's reads under a total deadline: each read waits at most ``read_seconds`` and
    never past ``deadline`` (``time.monotonic()``), after which every read raises TimeoutError."""

    def __init__(self, sock: socket.socket, read_seconds: float) -> None:
        super().__init__()
        self._sock = sock
        self.read_seconds = read_seconds
        self.deadline = math.inf

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request deadline passed")
        self._sock.settimeout(min(self.read_seconds, left))
        return self._sock.recv_into(buffer)

    def start(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = None  # setup() sets the socket's (Limits.read_seconds); the reader adjusts it per read
    server_version = "gitdns"
    sys_version = ""
    _reader: _DeadlineReader
    _served: int

    def setup(self) -> None:
        limits = self.server.app.limits
        super().setup()
        self.connection.settimeout(limits.read_seconds)
        self.rfile.close()  # http.server's own buffered reader: replaced by one with deadlines
        self._reader = _DeadlineReader(self.connection, limits.read_seconds)
        self.rfile = io.BufferedReader(self._reader)
        self._served = 0

    def handle_one_request(self) -> None:
        """One request: its request line and headers under the header deadline (which also
        bounds a keep-alive connection's idle wait), its body under the body deadline."""
        self._reader.start(self.server.app.limits.header_seconds)
        self._served += 1
        super().handle_one_request()

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
        self._reader.start(self.server.app.limits.body_seconds)
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
        self.connection.settimeout(self.server.app.limits.read_seconds)  # reads may have left less
        if self._served >= self.server.app.limits.requests_per_connection:
            self.close_connection = True
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
