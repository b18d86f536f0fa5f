"""A loopback HTTP(S) server that records every request it gets (the attacker's endpoint in
the endpoint tests): method, path, headers and body.  It answers ``POST .../token`` with an
OAuth2 access token (a service account's token exchange) and everything else with ``{}``, so
an SDK pointed at it goes as far as it would against a real server."""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ACCESS_TOKEN = "ya29.captured-access-token-SECRET"


@dataclass(frozen=True)
class Captured:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        """Everything the request carried, for "is the secret in there" checks."""
        head = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.method} {self.path}\n{head}\n\n{self.body.decode('utf-8', 'replace')}"


class CaptureServer:
    """``with CaptureServer() as srv``: ``srv.url``, ``srv.requests``; ``tls``: a server-side
    ``ssl.SSLContext`` for HTTPS (the client must trust it: tests.providers.tls)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[Captured] = []
        self.connections = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def setup(self) -> None:
                server.connections += 1
                super().setup()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                server.requests.append(Captured(self.command, self.path, dict(self.headers.items()), body))
                answer: dict[str, Any] = {}
                if self.command == "POST" and self.path.rstrip("/").endswith("/token"):
                    answer = {"access_token": ACCESS_TOKEN, "token_type": "Bearer", "expires_in": 3600}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def seen(self) -> str:
        """Every request as text."""
        return "\n---\n".join(r.text() for r in self.requests)

    def __enter__(self) -> CaptureServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)
