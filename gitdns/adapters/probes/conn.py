"""A kept HTTP connection of the prober (`_Conn`): a bare non-blocking socket, registered for
reading as long as it is open."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from gitdns.adapters.probes.target import _Target
from gitdns.adapters.probes.wire import (
    HEAD_LIMIT,
    RECV_SIZE,
    STATUS_LINE_LIMIT,
    _error_of,
    _status_error,
    body_length,
)

if TYPE_CHECKING:
    import asyncio

# the phases of a kept connection
_IDLE, _STATUS, _HEAD, _BODY, _CLOSED = range(5)


class Owner(Protocol):
    """What a connection needs of the prober that owns it (`gitdns.adapters.probes.prober.Prober`),
    named here so that this module does not import the prober, which makes connections."""

    conns: set[_Conn]
    done: Callable[[_Target, str], None]

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def keep(self, conn: _Conn) -> None: ...

    def forget(self, conn: _Conn) -> None: ...

    def expire_at(self, conn: _Conn, deadline: float) -> None: ...

    def timed_out(self, target: _Target, deadline: float) -> str: ...

    def again(self, target: _Target, deadline: float) -> None: ...


class _Conn:
    """One HTTP connection to (address, port) on a bare non-blocking socket, registered for
    reading as long as it is open.  `start` sends a probe's request; the status line decides the
    probe (`Prober.done`); the rest of the answer is read so that the connection can be kept
    (`Prober.keep`), else it is closed."""

    __slots__ = ("buf", "deadline", "fd", "got", "idle_since", "key", "left", "phase", "prober", "served", "sock",
                 "target")

    def __init__(self, prober: Owner, sock: socket.socket, key: tuple[str, int]) -> None:
        self.prober = prober
        self.sock = sock
        self.fd = sock.fileno()
        self.key = key
        self.target: _Target | None = None
        self.deadline = 0.0  # the current probe's (loop clock), and the time to have read its answer by
        self.buf = b""
        self.phase = _IDLE
        self.left = 0
        self.served = 0  # answers read whole on it (0: a new connection)
        self.got = False  # a byte of the current answer came
        self.idle_since = 0.0
        prober.loop.add_reader(self.fd, self._readable)
        prober.conns.add(self)

    def start(self, target: _Target, deadline: float) -> str:
        """Send ``target``'s request; "" when sent (the answer, the deadline or the connection's
        end decide the probe from now on), else the error, the connection closed."""
        self.target, self.buf, self.got, self.phase = target, b"", False, _STATUS
        try:
            head, tail = target.ends
            sent = self.sock.sendmsg((head, target.host, tail))
        except OSError as exc:
            self.close()
            return _error_of(exc, target.spec)
        if sent != target.request_size:  # a new or idle connection's buffer takes a whole request
            self.close()
            return "request not sent whole"
        self.deadline = deadline
        self.prober.expire_at(self, deadline)
        return ""

    def close(self) -> None:
        if self.phase == _CLOSED:
            return
        if self.phase == _IDLE:
            self.prober.forget(self)
        self.phase = _CLOSED
        self.prober.loop.remove_reader(self.fd)
        self.prober.conns.discard(self)
        self.sock.close()
        self.target = None

    def _report(self, error: str) -> None:
        target, self.target = self.target, None
        if target is not None:
            self.prober.done(target, error)

    def expired(self) -> None:
        """The deadline passed before the answer was read whole."""
        target = self.target
        self.close()
        if target is not None:  # still waiting for the status line
            self.prober.done(target, self.prober.timed_out(target, self.deadline))

    def _readable(self) -> None:
        try:
            data = self.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._ended(exc)
            return
        if not data:
            self._ended(None)
            return
        phase = self.phase
        if phase == _IDLE:  # bytes nobody asked for: the connection is not in a known state
            self.close()
            return
        self.got = True
        buf = self.buf + data if self.buf else data
        if phase == _STATUS:
            end = buf.find(b"\n")
            if end < 0:
                if len(buf) >= STATUS_LINE_LIMIT:
                    self._report("malformed status line")
                    self.close()
                else:
                    self.buf = buf
                return
            target = self.target
            assert target is not None
            self._report(_status_error(buf[:end], target.spec))
            if not buf.startswith(b"HTTP/1.1 "):  # no other answer is kept (nor one not HTTP at all)
                self.close()
                return
            phase = self.phase = _HEAD
        if phase == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > HEAD_LIMIT:
                    self.close()
                else:
                    self.buf = buf
                return
            length = body_length(buf[:end])
            if length is None:
                self.close()
                return
            self.left = length - (len(buf) - end - 4)
            self.buf = b""
            self.phase = _BODY
        else:  # _BODY
            self.left -= len(data)
        if self.left == 0:
            self._idle()
        elif self.left < 0:  # more than the answer: not a state to send another request in
            self.close()

    def _idle(self) -> None:
        self.served += 1
        self.phase = _IDLE
        self.prober.keep(self)

    def _ended(self, exc: OSError | None) -> None:
        """The peer closed (EOF, half-close included) or reset the connection."""
        target, phase, buf = self.target, self.phase, self.buf
        deadline = self.deadline
        self.close()
        if target is None or phase != _STATUS:
            return
        if self.served and not self.got:  # a kept connection ended under the request: once more, anew
            self.prober.again(target, deadline)
        elif exc is not None:
            self.prober.done(target, _error_of(exc, target.spec))
        else:
            self.prober.done(target, _status_error(buf, target.spec))
