"""`tests.serve_kit`: a stopped server leaves no listener and no thread behind.

Each test blocks a thread in ``accept``, ``recv`` or ``recvfrom`` and stops its server there.
Closing the socket alone (what these servers did) wakes none of them on Linux: the port went on
accepting, and the stale thread later took connections meant for another test's server that was
given the same descriptor number.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from tests.serve_kit import ServerThread, stop_listener


def threads_named(prefix: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(prefix)]


def blocked(thread: threading.Thread) -> None:
    """Give ``thread`` the time to enter the system call it blocks in."""
    time.sleep(0.1)
    assert thread.is_alive()


def echo(conn: socket.socket, _number: int) -> None:
    while data := conn.recv(4096):
        conn.sendall(data)


def blocked_in(call: Callable[[], object], name: str) -> tuple[threading.Thread, list[object]]:
    """A thread running ``call``, once it blocks in it; its result or error lands in the list."""
    got: list[object] = []

    def run() -> None:
        try:
            got.append(call())
        except OSError as exc:
            got.append(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    blocked(thread)
    return thread, got


def test_a_stopped_server_refuses_connections_and_has_no_thread_left() -> None:
    server = ServerThread(echo, name="kit-echo")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
        conn.sendall(b"hello")
        assert conn.recv(4096) == b"hello"
        assert len(threads_named(f"{server.name} ")) == 2  # accepting, and the connection's
        server.stop()  # one thread blocked in accept(), one in recv()
        assert conn.recv(4096) == b""  # the connection ended
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    assert threads_named(f"{server.name} ") == []
    assert server.sock.fileno() == -1
    server.stop()  # again: nothing to do


def test_stop_listener_wakes_a_thread_blocked_in_accept() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    thread, got = blocked_in(sock.accept, "kit-accept")
    stop_listener(sock, thread)
    assert not thread.is_alive() and isinstance(got[0], OSError)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_stop_listener_wakes_a_thread_blocked_in_recvfrom_on_udp() -> None:
    """``shutdown`` on a UDP socket raises ENOTCONN on Linux and ends a blocked ``recvfrom``
    all the same (it returns ``(b"", None)``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    thread, got = blocked_in(lambda: sock.recvfrom(65535), "kit-udp")
    stop_listener(sock, thread)
    assert not thread.is_alive() and got == [(b"", None)]


def test_a_handler_that_does_not_return_fails_the_stop_and_keeps_its_socket() -> None:
    """Its connection stays open: no later socket can be given its number under that thread."""
    release = threading.Event()
    held: list[socket.socket] = []

    def stubborn(conn: socket.socket, _number: int) -> None:
        held.append(conn)
        release.wait()

    server = ServerThread(stubborn, name="kit-stubborn")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        while not held:
            time.sleep(0.01)
        with pytest.raises(AssertionError, match=f"{server.name} #0"):
            server.stop(timeout=0.2)
        assert held[0].fileno() != -1
        release.set()
        server.stop()
    assert held[0].fileno() == -1 and threads_named(f"{server.name} ") == []
