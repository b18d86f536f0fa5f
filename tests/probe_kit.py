"""Helpers for the probe tests: a recording HTTP server on a loopback address, a spy on every
connection the prober attempts (refusing anything outside loopback, so no packet leaves the
machine whatever happens), and a wait for a condition.

Imported as ``from tests.probe_kit import ...``; each test module's fixtures call these.
"""

from __future__ import annotations

import asyncio
import socketserver
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import pytest


class RecordingServer:
    """An HTTP server on ``ip`` (port chosen by the system, `port`) answering 200 to every GET.

    ``connections``: the peer address of every connection it accepted (how many: ``len``).
    ``requests``: the headers of every request it received.
    A context manager: stopped on leaving.
    """

    def __init__(self, ip: str) -> None:
        self.connections: list[str] = []
        self.requests: list[dict[str, str]] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                rec.requests.append(dict(self.headers.items()))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def server_bind(self) -> None:  # no reverse lookup
                socketserver.TCPServer.server_bind(self)

            def verify_request(self, request: Any, client_address: Any) -> bool:
                rec.connections.append(str(client_address[0]))
                return True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.httpd = Server((ip, 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> RecordingServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


def _refuse_outside_loopback(seen: list[tuple[str, int]], host: str, port: Any) -> None:
    seen.append((host, int(port)))
    if not (host.startswith("127.") or host == "::1"):
        raise ConnectionRefusedError("outside loopback: refused by the test")


def loopback_spy(monkeypatch: pytest.MonkeyPatch, *, open_connection: bool = False) -> list[tuple[str, int]]:
    """Spy, for the test, on the event loop's ``sock_connect`` (and, with ``open_connection``, on
    ``asyncio.open_connection`` too): every (address, port) connected to is appended to the returned
    list, and anything outside loopback is refused before it is connected to."""
    seen: list[tuple[str, int]] = []
    real_sock_connect = asyncio.selector_events.BaseSelectorEventLoop.sock_connect
    real_open_connection = asyncio.open_connection

    async def spy_sock_connect(loop: Any, sock: Any, address: Any) -> None:
        _refuse_outside_loopback(seen, str(address[0]), address[1])
        await real_sock_connect(loop, sock, address)

    async def spy_open_connection(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse_outside_loopback(seen, str(host), port)
        return await real_open_connection(host, port, *args, **kwargs)

    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "sock_connect", spy_sock_connect)
    if open_connection:
        monkeypatch.setattr(asyncio, "open_connection", spy_open_connection)
    return seen


def wait_until(cond: Callable[[], bool], deadline: float = 20.0) -> None:
    """Return once ``cond()`` holds; fail if it does not within ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")
