"""Loopback servers for tests, stopped so that nothing of them is left: `stop_listener` and
`ServerThread`; `read_head` reads one HTTP request head for their handlers.

A thread blocked in ``accept``, ``recv`` or ``recvfrom`` is not woken when another thread closes
its socket (Linux): the kernel socket stays open under that thread (a TCP port goes on
accepting) and the descriptor's number is free for the next socket made.  When a signal (a
SIGCHLD of a git child) interrupts that system call, the kernel restarts it on the same number,
by then another socket's - a later test's HTTP server, whose connections the stale thread then
accepts and drops (ConnectionResetError, RemoteDisconnected in an unrelated test).

So a server's sockets are shut down first (``accept`` fails with EINVAL, ``recv`` returns b"";
on a UDP socket ``shutdown`` raises ENOTCONN but still ends a blocked ``recvfrom``, which
returns ``(b"", None)``), its threads are joined, and only then are the sockets closed.  A
thread that outlives that fails the test, and its socket is left open: its number cannot be
given to another socket under it.

Imported as ``from tests.serve_kit import ...``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable

JOIN = 5.0  # seconds a woken thread is given to return

Handler = Callable[[socket.socket, int], None]


def read_head(conn: socket.socket, buf: bytes = b"") -> tuple[bytes, bytes] | None:
    """One HTTP/1.1 request head from ``conn`` after what ``buf`` holds already: (the head without
    its blank line, what came after it), or None when the peer closed (or the server shut the
    connection down) first."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def join_threads(threads: Iterable[threading.Thread], timeout: float = JOIN) -> None:
    """Join every thread within ``timeout`` in all; an AssertionError names those still alive."""
    threads = list(threads)
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [thread.name for thread in threads if thread.is_alive()]
    assert not alive, f"a thread outlived its server's stop: {alive}"


def stop_listener(sock: socket.socket, *threads: threading.Thread, timeout: float = JOIN) -> None:
    """Wake the ``threads`` blocked on ``sock`` (``shutdown``), join them, and close ``sock``.

    For a listening TCP socket, a connection, or a bound UDP socket; the threads must return
    once the call they are blocked in fails or returns b"".  When one of them does not, ``sock``
    stays open (no later socket can get its descriptor's number under that thread) and an
    AssertionError says which."""
    with contextlib.suppress(OSError):  # ENOTCONN on UDP (recvfrom is woken all the same)
        sock.shutdown(socket.SHUT_RDWR)
    join_threads(threads, timeout)
    sock.close()


class ServerThread:
    """A TCP server on ``ip`` (port chosen by the system unless given): one thread accepts,
    each connection gets a thread of its own running ``handle(conn, number)`` (``number``: the
    connection's, from 0).  Threads are named ``{name}:{port} ...``.

    The connection is this server's: ``handle`` must not close it (it is closed once ``handle``
    returns, or raises OSError; closing it is how a handler "closes the connection").  A
    handler must return once ``stopped`` is set or a ``recv`` on the connection returns b"".

    `stop` (also on leaving the ``with``): the port refuses connections, every connection is
    closed and every thread has returned."""

    def __init__(self, handle: Handler, ip: str = "127.0.0.1", port: int = 0, *, name: str = "serve_kit",
                 backlog: int = 64, reuse_address: bool = False) -> None:
        self.handle = handle
        self.ip = ip
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if reuse_address:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((ip, port))
        self.sock.listen(backlog)
        self.port = int(self.sock.getsockname()[1])
        self.name = f"{name}:{self.port}"
        self.stopped = threading.Event()
        self.connections = 0  # accepted so far
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()  # connections whose handler has not returned
        self.threads: list[threading.Thread] = []  # one per connection
        self.accepting = threading.Thread(target=self._accept, name=f"{self.name} accept", daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # EINVAL: shut down by stop()
                return
            with self._lock:
                number = self.connections
                self.connections += 1
                self._live.add(conn)
                thread = threading.Thread(target=self._serve, args=(conn, number), name=f"{self.name} #{number}",
                                          daemon=True)
                self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        try:
            self.handle(conn, number)
        except OSError:
            pass
        finally:
            with self._lock:  # never closed while stop() shuts it down (its number could be reused)
                self._live.discard(conn)
                conn.close()

    def stop(self, timeout: float = JOIN) -> None:
        """Stop listening, end every connection (as a process that exits) and join every thread
        (each given ``timeout``)."""
        self.stopped.set()
        stop_listener(self.sock, self.accepting, timeout=timeout)  # no connection is accepted after this
        with self._lock:
            for conn in self._live:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)  # recv() returns b"", send() fails
            threads = list(self.threads)
        join_threads(threads, timeout)  # each closed its connection on its way out

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
