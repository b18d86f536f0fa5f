"""gitdns.adapters.http.server against hostile clients, on real loopback sockets: a slowloris
is cut at the total deadline whatever its pace, connections over the cap are answered 503 by
the accepting thread and closed, and ordinary traffic is served again once the hogs are gone.

Every test asserts what the client sees (a response, or the server closing the connection);
client-side timeouts are only upper bounds that turn a hang into a failure.
"""

from __future__ import annotations

import http.client
import json
import logging
import select
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from gitdns.adapters.http.server import ADMIN_ROUTES, WEBHOOK_ROUTES, HttpServer, Limits, WebhookConfig
from gitdns.agent.metrics import Metrics
from gitdns.core.webhook import PushEvent, sign_github

SECRET = b"limits-secret"
BOUND = 10.0  # seconds: a generous upper bound on anything the server should do "at once"
# Deadlines far below the defaults so the tests are quick; each read may wait longer than the
# client's pace, so only the total deadline can end a dripping request.
FAST = Limits(header_seconds=1.0, body_seconds=1.0, read_seconds=30.0, connections=64, per_peer=64)


def serve(limits: Limits, routes: frozenset[str] | None = None) -> tuple[HttpServer, list[PushEvent]]:
    pushes: list[PushEvent] = []
    server = HttpServer("127.0.0.1", 0, metrics=Metrics(), status=lambda: {"ok": True}, ready=lambda: True,
                        webhook=WebhookConfig(github_secret=SECRET), on_push=pushes.append, limits=limits,
                        **({"routes": routes} if routes is not None else {}))
    server.start()
    return server, pushes


@pytest.fixture
def fast() -> Iterator[tuple[HttpServer, list[PushEvent]]]:
    server, pushes = serve(FAST)
    try:
        yield server, pushes
    finally:
        server.stop()


def connect(server: HttpServer, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=BOUND, source_address=(source, 0))
    return sock


def get(server: HttpServer, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=BOUND) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


def drip(sock: socket.socket, data: bytes, pause: float) -> tuple[int, bytes]:
    """Send ``data`` one byte per ``pause``; stop when the server closes the connection.
    Returns (bytes sent, bytes received) — all of ``data`` sent means the server waited."""
    received = b""
    for sent, byte in enumerate(data):
        try:
            sock.sendall(bytes([byte]))
        except OSError:  # reset by the server
            return sent, received
        readable, _, _ = select.select([sock], [], [], pause)
        if readable:
            try:
                chunk = sock.recv(65536)
            except OSError:
                return sent + 1, received
            if not chunk:
                return sent + 1, received
            received += chunk
    return len(data), received


def closed_by_server(sock: socket.socket) -> bytes | None:
    """Everything the server sends before it closes; None if it keeps the connection open
    past BOUND (a failure for the caller)."""
    sock.settimeout(BOUND)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return None
    except OSError:  # reset: closed too
        pass
    return data


def wait_for(predicate: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def connection_threads(name: str = "http") -> int:
    return sum(1 for t in threading.enumerate() if t.name == f"gitdns-{name}-conn")


# --- total deadlines ------------------------------------------------------------------------


def test_slowloris_headers_are_cut_at_the_header_deadline(fast: tuple[HttpServer, list[PushEvent]]) -> None:
    server, _ = fast
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: b\r\n" * 30 + b"\r\n"
    with connect(server) as sock:
        sent, received = drip(sock, request, pause=0.1)  # 10 bytes a second, far under any read timeout
    assert sent < len(request), "the server waited for the whole dripped request"
    assert received == b"", "a request cut at its deadline gets no response"
    assert wait_for(lambda: server.connections == 0)
    assert get(server, "/healthz") == 200


def test_slow_body_is_cut_at_the_body_deadline(fast: tuple[HttpServer, list[PushEvent]]) -> None:
    server, pushes = fast
    body = json.dumps({"ref": "refs/heads/main", "before": "0" * 40, "after": "a" * 40,
                       "repository": {"full_name": "acme/dns"}, "pad": "x" * 200}).encode()
    head = (f"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"
            f"X-GitHub-Delivery: slow-1\r\nX-Hub-Signature-256: {sign_github(SECRET, body)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with connect(server) as sock:
        sock.sendall(head)  # the headers at once: only the body is slow
        sent, received = drip(sock, body, pause=0.1)
    assert sent < len(body) and received == b""
    assert pushes == []
    assert wait_for(lambda: server.connections == 0)


def test_an_idle_keep_alive_connection_is_closed_at_the_header_deadline(
        fast: tuple[HttpServer, list[PushEvent]]) -> None:
    server, _ = fast
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = closed_by_server(sock)  # the response, then the idle wait for a next request is cut
    assert data is not None, "an idle keep-alive connection was kept past the header deadline"
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"ok\n")


def test_a_keep_alive_connection_serves_a_bounded_number_of_requests() -> None:
    server, _ = serve(Limits(requests_per_connection=3))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=BOUND)
        answers = []
        for _ in range(3):
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            resp.read()
            answers.append((resp.status, resp.getheader("Connection")))
        conn.close()
        assert answers == [(200, None), (200, None), (200, "close")]
    finally:
        server.stop()


def test_a_client_resetting_mid_request_is_one_debug_line_not_a_traceback(
        fast: tuple[HttpServer, list[PushEvent]], capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    server, _ = fast
    caplog.set_level(logging.DEBUG, logger="gitdns.adapters.http.server")
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # half a request: the server is reading
    assert wait_for(lambda: server.connections == 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # a reset, not a close
    assert wait_for(lambda: server.connections == 0)
    assert "Traceback" not in capfd.readouterr().err
    assert "connection ended: name=http error=ConnectionResetError" in caplog.text


# --- the connection cap ---------------------------------------------------------------------


def test_connections_over_the_cap_are_refused_at_once_and_service_resumes() -> None:
    cap = 4
    server, _ = serve(Limits(header_seconds=1.5, read_seconds=5.0, connections=cap, per_peer=64))
    idle: list[socket.socket] = []
    try:
        idle = [connect(server) for _ in range(cap)]  # connected, sending nothing
        assert wait_for(lambda: server.connections == cap)
        for _ in range(10):
            with connect(server) as extra:
                answer = closed_by_server(extra)
                assert answer is not None, "a connection over the cap was held open"
                assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in answer
        assert connection_threads() <= cap  # the refused ones never had a thread
        assert get(server, "/healthz") == 503  # the cap holds for ordinary requests too
        for sock in idle:  # the hogs are cut at the header deadline, without a response
            assert closed_by_server(sock) == b""
        assert wait_for(lambda: server.connections == 0)
        assert get(server, "/healthz") == 200
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_one_address_gets_a_share_of_the_connections_not_all() -> None:
    server, _ = serve(Limits(header_seconds=30.0, read_seconds=30.0, connections=64, per_peer=2))
    idle: list[socket.socket] = []
    try:
        idle = [connect(server) for _ in range(2)]
        assert wait_for(lambda: server.connections == 2)
        with connect(server) as third:
            answer = closed_by_server(third)
            assert answer is not None and answer.startswith(b"HTTP/1.1 503 ")
        with connect(server, source="127.0.0.2") as other:  # another client address is still served
            other.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = closed_by_server(other)
            assert answer is not None and answer.startswith(b"HTTP/1.1 200 ")
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_stop_closes_the_connections_it_was_serving() -> None:
    server, _ = serve(Limits(header_seconds=60.0, read_seconds=60.0))
    sock = connect(server)
    try:
        assert wait_for(lambda: server.connections == 1)
        server.stop()
        assert closed_by_server(sock) == b"", "stop() left a connection open until its deadline"
    finally:
        sock.close()
        server.stop()


def test_a_burst_within_the_cap_is_served_in_full() -> None:
    server, _ = serve(Limits())
    try:
        with ThreadPoolExecutor(max_workers=32) as pool:
            codes = list(pool.map(lambda _: get(server, "/healthz"), range(1000)))
        assert codes == [200] * 1000
    finally:
        server.stop()


# --- route groups ---------------------------------------------------------------------------


def post_webhook(server: HttpServer, delivery: str) -> int:
    body = json.dumps({"ref": "refs/heads/main", "before": "0" * 40, "after": "a" * 40,
                       "repository": {"full_name": "acme/dns"}}).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": delivery,
               "X-Hub-Signature-256": sign_github(SECRET, body)}
    req = urllib.request.Request(f"http://127.0.0.1:{server.port}/webhook", data=body, headers=headers,
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=BOUND) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


def test_the_webhook_server_serves_no_status_and_no_metrics() -> None:
    server, pushes = serve(Limits(), WEBHOOK_ROUTES)
    try:
        assert [get(server, p) for p in ("/status", "/metrics", "/healthz", "/readyz")] == [404, 404, 200, 200]
        assert get(server, "/webhook") == 405
        assert post_webhook(server, "r-1") == 202 and len(pushes) == 1
    finally:
        server.stop()


def test_the_admin_server_serves_no_webhook() -> None:
    server, pushes = serve(Limits(), ADMIN_ROUTES)
    try:
        assert [get(server, p) for p in ("/status", "/metrics", "/healthz", "/readyz")] == [200, 200, 200, 200]
        assert get(server, "/webhook") == 404
        assert post_webhook(server, "r-2") == 404 and pushes == []
    finally:
        server.stop()


def test_unknown_route_groups_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown route groups"):
        HttpServer("127.0.0.1", 0, metrics=Metrics(), status=dict, ready=lambda: True, routes=frozenset({"admin"}))
