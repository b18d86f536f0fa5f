"""The prober's HTTP wire: the request a target sends (built once, its ends shared), the status
line and head it reads, and a probe's error from what it raised (short strings from the
exception's kind, never from request data: header values may be secrets)."""

from __future__ import annotations

import logging
import socket
import ssl
from functools import lru_cache

from gitdns.core.health import ProbeSpec

log = logging.getLogger("gitdns.adapters.probes")  # one logger for the whole prober, as before it was a package

STATUS_LINE_LIMIT = 1024  # bytes read for the status line
HEAD_LIMIT = 8192  # a longer response head is not read on: its connection is closed, not kept
BODY_LIMIT = 65536  # a longer body (Content-Length) is not read: its connection is closed, not kept
RECV_SIZE = 16384
USER_AGENT = "gitdns-probe/1"


class ProbeRefused(Exception):
    """The connection gate refused the address: nothing was sent (the message is the probe's error)."""


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


@lru_cache(maxsize=64)
def _timeout_text(timeout: float) -> str:
    """A timed-out probe's error: one string per timeout, not one per probe (a black hole of
    10,000 nodes keeps 10,000 of them in the nodes' health)."""
    return f"timeout after {timeout:g}s"


def build_request(spec: ProbeSpec) -> bytes:
    """The probe's request: HTTP keeps its connection (HTTP/1.1's default), HTTPS asks
    ``Connection: close``."""
    return b"".join(request_parts(spec))


@lru_cache(maxsize=1024)
def _request_ends(path: str, protocol: str, headers: tuple[tuple[str, str], ...]) -> tuple[bytes, bytes]:
    """What comes before and after the ``Host`` header's value: the same bytes objects for every
    target with the same path, protocol and headers (10,000 nodes: one copy, not 10,000)."""
    tail = [
        f"User-Agent: {USER_AGENT}",
        "Accept: */*",
        *(["Connection: close"] if protocol == "HTTPS" else []),
        *(f"{name}: {value}" for name, value in headers),
    ]
    return (f"GET {path} HTTP/1.1\r\nHost: ".encode("latin-1", "replace"),
            ("\r\n" + "\r\n".join(tail) + "\r\n\r\n").encode("latin-1", "replace"))


def request_parts(spec: ProbeSpec) -> tuple[bytes, bytes, bytes]:
    """`build_request` in three pieces, sent as one (``sendmsg``): the two shared by every target
    with the same path, protocol and headers, and between them the ``Host`` header's value."""
    head, tail = _request_ends(spec.path, spec.protocol, spec.headers)
    return head, spec.request_host.encode("latin-1", "replace"), tail


def parse_status(line: bytes) -> int | None:
    """The status code of ``HTTP/1.x NNN reason``, or None."""
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        return None
    return int(parts[1])


def body_length(head: bytes) -> int | None:
    """The body length of an HTTP/1.1 response head (status line and header lines, without the
    empty line) when its connection can be kept after that many bytes, else None: an HTTP/1.0
    answer, ``Connection: close``, a ``Transfer-Encoding``, no or an unclear ``Content-Length``,
    a body over `BODY_LIMIT`, an interim (1xx) answer."""
    lines = head.split(b"\r\n")
    status = lines[0]
    if not status.startswith(b"HTTP/1.1 ") or status[9:10] == b"1":
        return None
    length: int | None = 0 if status[9:12] in (b"204", b"304") else None
    seen = False
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            return None
        name = name.strip().lower()
        if name == b"content-length":
            value = value.strip()
            if not value.isdigit() or (seen and int(value) != length):
                return None
            length, seen = int(value), True
        elif name == b"transfer-encoding" or (name == b"connection" and b"close" in value.lower()):
            return None
    if length is None or length > BODY_LIMIT:
        return None
    return length


def _error_of(exc: BaseException, spec: ProbeSpec) -> str:
    """A probe's error from what it raised: short, from the exception's kind."""
    if isinstance(exc, ProbeRefused):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return _timeout_text(spec.timeout)
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {spec.address}: {exc.strerror or exc}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"tls: certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"tls: {exc.reason or type(exc).__name__}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    log.debug("health: probe error target=%s kind=%s", spec.target_id, type(exc).__name__)
    return f"probe error: {type(exc).__name__}"  # a probe never takes the monitor down


def _status_error(line: bytes, spec: ProbeSpec) -> str:
    if not line:
        return "connection closed before the status line"
    code = parse_status(line)
    if code is None:
        return "malformed status line"
    if code not in spec.expected_codes:
        return f"status {code}"
    return ""
