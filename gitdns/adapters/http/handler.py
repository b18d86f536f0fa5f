"""The connection handling under `gitdns.adapters.http.server.HttpServer`: the threading server
that admits each connection or refuses it (`Server`, `_BUSY`), the socket reader with
per-request deadlines (`_DeadlineReader`), the request handler that reads, bounds and answers
each request (`Handler`; each request's head is framed by
`gitdns.adapters.http.framing.frame_request`, whose docstring has the table of refusals), the
reply it sends (`Reply`, `text_reply`), and the body caps (`MAX_BODY`, which `server`
exports, and `LINGER_BYTES`).
The limits it enforces are `server.Limits`; the routes and their answers are
`HttpServer`'s (`_App` says what the handling needs of it).  It logs under
``gitdns.adapters.http.server``, the server's logger, and every piece of a request it logs
(method, path, request line, header value, peer) goes through `gitdns.core.text.inline`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import socket
import socketserver
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.client import HTTPMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from gitdns.adapters.http.framing import MAX_FIELD_BYTES, MAX_FIELDS, MAX_REQUEST_LINE, Head, Refusal, frame_request
from gitdns.adapters.webhooks import PATHS as WEBHOOK_PATHS
from gitdns.core.jsonread import MAX_JSON_BYTES
from gitdns.core.text import inline

log = logging.getLogger("gitdns.adapters.http.server")

MAX_BODY = MAX_JSON_BYTES  # a webhook body is a JSON payload: one cap for both
LINGER_BYTES = 4 * MAX_BODY  # a refused body up to this size is read and dropped, not reset
REFUSAL_LOG_SECONDS = 60.0  # refused connections are logged as a count at most this often

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
         b"Content-Length: 5\r\nRetry-After: 1\r\nCache-Control: no-store\r\nConnection: close\r\n\r\nbusy\n")


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"


class _AppLimits(Protocol):
    """The `server.Limits` the connections are held to."""

    @property
    def header_seconds(self) -> float: ...
    @property
    def body_seconds(self) -> float: ...
    @property
    def read_seconds(self) -> float: ...
    @property
    def connections(self) -> int: ...
    @property
    def per_peer(self) -> int: ...
    @property
    def requests_per_connection(self) -> int: ...


class _App(Protocol):
    """What the connection handling needs of its `server.HttpServer`: its limits, its name
    (for thread names and log lines), its body cap and its answers to a GET and a webhook POST."""

    @property
    def limits(self) -> _AppLimits: ...
    @property
    def name(self) -> str: ...
    @property
    def max_body(self) -> int: ...

    def handle_get(self, path: str) -> Reply: ...

    def handle_webhook(self, path: str, headers: Mapping[str, str], body: bytes) -> Reply: ...


def text_reply(status: int, text: str) -> Reply:
    return Reply(status, (text + "\n").encode("utf-8"))


class Server(ThreadingHTTPServer):
    """One thread per connection, up to ``Limits.connections`` (``per_peer`` per address); the
    accepting thread answers one more 503 itself and closes it."""

    daemon_threads = True
    block_on_close = False  # stop() closes the connections instead of waiting for them
    request_queue_size = 128  # a burst waits in the backlog, not in threads
    app: _App

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
                        self.app.name, self.refused - self._refusals_logged, inline(peer),
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


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    timeout = None  # setup() sets the socket's (Limits.read_seconds); the reader adjusts it per read
    server_version = "gitdns"
    sys_version = ""
    _reader: _DeadlineReader
    _served: int
    _head: Head | None
    raw_requestline: bytes  # set by http.server's handle_one_request

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
        self._head = None
        self.command, self.path, self.requestline = "", "", ""
        self.request_version = "HTTP/1.1"  # a refusal is answered in HTTP/1.1, whatever was sent
        super().handle_one_request()

    def parse_request(self) -> bool:
        """In place of http.server's (which reads the fields with email.parser: a line with a
        space before its colon ends them there, a folded line is joined, a field given twice
        is kept twice and ``get`` answers the first): the head read raw, `frame_request`
        decides, and a refusal is answered and the connection closed before any handler runs
        and before any body byte is read.  Returns whether to serve the request."""
        self.close_connection = True
        line = self.raw_requestline
        if line == b"\r\n":  # one empty line before the request line is ignored (RFC 9112 2.2)
            line = self.rfile.readline(MAX_REQUEST_LINE + 1)
            if len(line) > MAX_REQUEST_LINE:
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return False
            if not line:
                return False
        self.requestline = line.decode("utf-8", "backslashreplace").rstrip("\r\n")
        early = frame_request(line, line_only=True)  # refused before waiting for the fields
        if isinstance(early, Refusal):
            self._refuse(early)
            return False
        fields = self._read_fields()
        if fields is None:  # the client went away mid-head
            return False
        head = fields if isinstance(fields, Refusal) else frame_request(line + fields)
        if not isinstance(head, Head):
            head = head or Refusal(400, "no request head")
            self._refuse(head)
            return False
        self._head = head
        self.command, self.path, self.request_version = head.method, head.target, head.version
        message = HTTPMessage()
        for name, value in head.fields:
            message[name] = value  # appends: a list field given on two lines stays two
        self.headers = message
        connection = (head.field("Connection") or "").lower()
        if head.version == "HTTP/1.1":
            self.close_connection = connection == "close"
        else:
            self.close_connection = connection != "keep-alive"
        return True

    def _read_fields(self) -> bytes | Refusal | None:
        """The header field lines and the empty line ending them, as sent (at most
        MAX_FIELDS lines of MAX_FIELD_BYTES together); None when the connection ends first."""
        data = b""
        for _ in range(MAX_FIELDS + 1):
            line = self.rfile.readline(MAX_FIELD_BYTES - len(data) + 1)
            if not line:
                return None
            data += line
            if len(data) > MAX_FIELD_BYTES:
                return Refusal(431, f"header fields over {MAX_FIELD_BYTES} bytes")
            if line in (b"\r\n", b"\n"):
                return data
        return Refusal(431, f"over {MAX_FIELDS} header fields")

    def _refuse(self, refusal: Refusal) -> None:
        log.debug("request refused: name=%s status=%d reason=%s line=%s peer=%s", self.server.app.name,
                  refusal.status, inline(refusal.reason), inline(self.requestline[:200]), inline(self._peer()))
        self.close_connection = True
        self._send(text_reply(refusal.status, refusal.reason))

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a request line over MAX_REQUEST_LINE: 414; a method
        without a ``do_`` here: 501) as a plain-text reply, and the connection closed."""
        if code == HTTPStatus.NOT_IMPLEMENTED:
            reason = "method not implemented"
        else:
            try:
                reason = HTTPStatus(code).phrase.lower()
            except ValueError:
                reason = "refused"
        self._refuse(Refusal(code, reason))

    def _peer(self) -> str:
        address = self.client_address
        return str(address[0]) if isinstance(address, tuple) and address else str(address)

    def do_GET(self) -> None:
        path, length = self._request().path, self._request().length
        if length:  # a body on a GET means nothing: dropped, and the connection closed
            self._reader.start(self.server.app.limits.body_seconds)
            self._discard(length)
        try:
            reply = self.server.app.handle_get(path)
        except Exception:
            log.exception("request failed: method=GET path=%s", inline(path))
            reply = text_reply(500, "internal error")
        self._send(reply)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        path = self._request().path
        if path not in WEBHOOK_PATHS:
            self._read_body()  # consumed (or dropped) so the 404 reaches the client
            self.close_connection = True
            self._send(text_reply(404, "not found"))
            return
        body = self._read_body()
        if isinstance(body, Reply):
            self._send(body)
            return
        headers = dict(self._request().fields)  # framed: no name twice but list fields never read
        try:
            reply = self.server.app.handle_webhook(path, headers, body)
        except Exception:
            log.exception("request failed: method=POST path=%s", inline(path))
            reply = text_reply(500, "internal error")
        self._send(reply)

    def _request(self) -> Head:
        if self._head is None:  # parse_request refused it, and no handler runs then
            raise RuntimeError("no request head")
        return self._head

    def _read_body(self) -> bytes | Reply:
        """The body of ``Content-Length`` bytes (framed by `frame_request`, which refused every
        ``Transfer-Encoding``), under the body deadline."""
        head = self._request()
        length = head.length
        if length is None:
            self.close_connection = True
            return text_reply(411, "Content-Length required")
        # Expect: 100-continue (frame_request refused any other), ignored in HTTP/1.0 (RFC 9110 10.1.1)
        expects = head.field("Expect") is not None and head.version == "HTTP/1.1"
        if length > self.server.app.max_body:
            if expects:  # the client waits for a 100 before it sends the body: nothing to drop
                self.close_connection = True
            else:
                self._reader.start(self.server.app.limits.body_seconds)
                self._discard(length)
            return text_reply(413, f"body over {self.server.app.max_body} bytes")
        if expects:
            self.send_response_only(HTTPStatus.CONTINUE)
            self.end_headers()
        self._reader.start(self.server.app.limits.body_seconds)
        body = self.rfile.read(length)
        if len(body) < length:  # the client closed before its body ended: nothing to judge
            self.close_connection = True
            raise ConnectionResetError("the body ended early")
        return body

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

    def _send(self, reply: Reply) -> None:
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
        path = self._head.path if self._head is not None else ""
        log.debug("request: method=%s path=%s status=%s", inline(self.command or ""), inline(path), code)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: %s", inline(format % args))
