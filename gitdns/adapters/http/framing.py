"""The strict framing of an HTTP request to the agent or the orchestrator (RFC 9110, RFC 9112):
`frame_request` reads a request's head (its request line and header field lines, as bytes)
and answers a `Head` when it is framed beyond doubt or the `Refusal` (status and reason) to
answer; it is the one place that decides how a request is framed.  Pure: bytes in, a verdict
out, no I/O (its `urllib.parse.urlsplit` keeps it out of `gitdns.core`).  The connection
handling that reads each head and answers a refusal is `gitdns.adapters.http.handler`.

Checked by `frame_request` before any handler runs and before any body byte is read; a
refusal is answered and the connection closed (411, 413, 414, 431 and a method's 501 by
`gitdns.adapters.http.handler.Handler`, which reads the head within the limits here, and the
body):

    ===== ==================================================================================
    400   the request line is not ``method SP target SP HTTP/x.y CRLF``: a control, non-ASCII
          or ``#`` byte, another whitespace or two spaces, a target that is not a path (or an
          ``http(s)://`` URL), HTTP/0.9; a line not ended by CRLF (a bare LF or CR);
          a field line that starts with whitespace (obs-fold), has no colon, whitespace or
          another non-token byte before the colon, or a control byte (other than TAB) in
          its value; a field given twice (``Host``, ``Content-Length`` and any other, except
          the list fields in ``_REPEATABLE``); HTTP/1.1 without ``Host``, a ``Host`` that is
          not a host; a ``Content-Length`` that is not one space at most and then 1 to 18
          ASCII digits (no sign, ``_``, list, other digits or whitespace after);
          ``Transfer-Encoding`` with ``Content-Length``, in HTTP/1.0, not ending in
          ``chunked`` or naming it twice (RFC 9112 6.1, 6.3)
    411   a POST without ``Content-Length``
    413   a body over ``max_body`` (read and dropped up to ``LINGER_BYTES``)
    414   a request line over 64 KiB
    417   an ``Expect`` other than ``100-continue``
    431   header fields over 64 KiB or 100 lines
    501   a well-formed ``Transfer-Encoding: chunked`` (RFC 9112 6.1: a server that does not
          take a transfer coding answers 501; the forges send ``Content-Length``), a method
          other than GET, HEAD and POST
    505   an HTTP version other than 1.0 and 1.1
    ===== ==================================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_REQUEST_LINE = 64 * 1024  # longer: 414
MAX_FIELD_BYTES = 64 * 1024  # the header field lines together; more: 431
MAX_FIELDS = 100  # header field lines; more: 431
MAX_LENGTH_DIGITS = 18  # a Content-Length of more digits is refused (400), well over MAX_BODY

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.6.2
_TARGET = re.compile(rb"[\x21-\x22\x24-\x7e]+")  # visible ASCII but '#' (RFC 9112 3.2)
_VERSION = re.compile(rb"HTTP/([0-9])\.([0-9])")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # in a field value: every CTL but TAB
_LINE_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")  # in the request line: every CTL
_LENGTH = re.compile(rb" ?[0-9]{1,%d}" % MAX_LENGTH_DIGITS)  # after the colon, nothing around
_HOST = re.compile(r"[A-Za-z0-9\-._~%!$&'()*+,;=:\[\]]*")  # uri-host [":" port] (RFC 3986)
# list fields a client or a proxy may send on several lines (RFC 9110 5.3); any other twice: 400
_REPEATABLE = frozenset({"accept", "accept-charset", "accept-encoding", "accept-language", "cache-control",
                         "connection", "forwarded", "pragma", "te", "via", "warning", "x-forwarded-for"})
_OWS = b" \t"


@dataclass(frozen=True, slots=True)
class Head:
    """A request's line and header fields as `frame_request` found them: well-formed."""

    method: str
    target: str  # as sent: the path and query (or an absolute URL)
    path: str  # the target's path, without the query
    version: str  # "HTTP/1.1" or "HTTP/1.0"
    fields: tuple[tuple[str, str], ...]  # (name as sent, value without the whitespace around it)
    length: int | None  # Content-Length; None without one

    def field(self, name: str) -> str | None:
        """A field's value by case-insensitive name (a field given once; None when absent)."""
        wanted = name.lower()
        return next((value for key, value in self.fields if key.lower() == wanted), None)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused before it is served: the status and one line for the body."""

    status: int
    reason: str


def frame_request(head: bytes, *, line_only: bool = False) -> Head | Refusal | None:
    """Parse a request's head: its request line, its header field lines and the empty line
    ending them, each ended by CRLF.  A `Head` when it is framed beyond doubt, else the
    `Refusal` the module docstring's table gives.  Every request the servers serve goes
    through it; no body byte has been read when it answers.  With ``line_only`` ``head`` is
    the request line alone (and its CRLF): its `Refusal`, or None when it is well-formed (the
    handler asks so before it waits for the fields)."""
    if not head.endswith(b"\r\n\r\n") and not (line_only and head.endswith(b"\r\n")):
        return Refusal(400, "lines must end in CRLF")
    line, *lines = head[:-2 if line_only else -4].split(b"\r\n")
    request = _request_line(line)
    if isinstance(request, Refusal) or line_only:
        return request if isinstance(request, Refusal) else None
    method, target, path, version = request
    fields = _field_lines(lines)
    if isinstance(fields, Refusal):
        return fields
    return _framing(method, target, path, version, fields)


def _request_line(line: bytes) -> tuple[str, str, str, str] | Refusal:
    """``method SP request-target SP HTTP-version`` (RFC 9112 3), nothing else."""
    if _LINE_CONTROL.search(line):
        return Refusal(400, "control character in the request line")
    parts = line.split(b" ")
    if len(parts) != 3 or not all(parts):
        return Refusal(400, "the request line is not: method, target, version, one space apart")
    method, target, version = parts
    if not _TOKEN.fullmatch(method):
        return Refusal(400, "the method is not a token")
    if not _TARGET.fullmatch(target):
        return Refusal(400, "the request target holds a byte that is not visible ASCII, or '#'")
    matched = _VERSION.fullmatch(version)
    if matched is None:
        return Refusal(400, "the version is not HTTP/x.y")
    if (matched[1], matched[2]) not in ((b"1", b"1"), (b"1", b"0")):
        return Refusal(505, "HTTP/1.1 or HTTP/1.0 only")
    text = target.decode("ascii")
    if text.startswith("/"):
        path = text.partition("?")[0]
    elif text[:7].lower() == "http://" or text[:8].lower() == "https://":  # absolute-form (RFC 9112 3.2.2)
        try:
            path = urlsplit(text).path or "/"
        except ValueError:
            return Refusal(400, "the request target is not a URL")
    elif text == "*" and method == b"OPTIONS":
        path = text
    else:
        return Refusal(400, "the request target is not a path")
    return method.decode("ascii"), text, path, version.decode("ascii")


def _field_lines(lines: list[bytes]) -> list[tuple[str, bytes, bytes]] | Refusal:
    """Each ``field-name ":" OWS field-value OWS`` (RFC 9112 5) as (lowercase name, name as
    sent, value as sent after the colon)."""
    fields = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            return Refusal(400, "a field line starts with whitespace (obs-fold)")
        name, colon, raw = line.partition(b":")
        if not colon:
            return Refusal(400, "a field line has no colon")
        if name[-1:] in (b" ", b"\t"):
            return Refusal(400, "whitespace before a field line's colon")
        if not _TOKEN.fullmatch(name):
            return Refusal(400, "a field name is not a token")
        if _CONTROL.search(raw):
            return Refusal(400, f"control character in the value of {name.decode('ascii')}")
        fields.append((name.decode("ascii").lower(), name, raw))
    return fields


def _framing(method: str, target: str, path: str, version: str,
             fields: list[tuple[str, bytes, bytes]]) -> Head | Refusal:
    """The fields that frame the request: Host, Content-Length, Transfer-Encoding, Expect."""
    seen: set[str] = set()
    for key, name, _ in fields:
        if key in seen and key not in _REPEATABLE:
            return Refusal(400, f"{name.decode('ascii')} given twice")
        seen.add(key)
    raw = {key: value for key, _, value in fields}
    if version == "HTTP/1.1" and "host" not in raw:
        return Refusal(400, "HTTP/1.1 without Host")
    if "host" in raw and not _HOST.fullmatch(raw["host"].strip(_OWS).decode("latin-1")):
        return Refusal(400, "Host is not a host")
    length = None
    if "content-length" in raw:
        if "transfer-encoding" in raw:
            return Refusal(400, "Transfer-Encoding together with Content-Length")
        if not _LENGTH.fullmatch(raw["content-length"]):
            return Refusal(400, f"Content-Length must be 1 to {MAX_LENGTH_DIGITS} ASCII digits")
        length = int(raw["content-length"])
    if "transfer-encoding" in raw:
        return _transfer_encoding(raw["transfer-encoding"], version)
    expect = raw.get("expect")
    if expect is not None and expect.strip(_OWS).lower() != b"100-continue":
        return Refusal(417, "only Expect: 100-continue")
    values = tuple((name.decode("ascii"), value.strip(_OWS).decode("latin-1")) for _, name, value in fields)
    return Head(method, target, path, version, values, length)


def _transfer_encoding(value: bytes, version: str) -> Refusal:
    """RFC 9112 6.1: in HTTP/1.0 the framing is faulty; chunked must be the last coding, once
    (else the length cannot be known: 400); chunked last is well-formed, and not taken (501)."""
    if version == "HTTP/1.0":
        return Refusal(400, "Transfer-Encoding in HTTP/1.0")
    codings = [item.partition(b";")[0].strip(_OWS).lower() for item in value.split(b",")]
    if not all(_TOKEN.fullmatch(coding) for coding in codings):
        return Refusal(400, "Transfer-Encoding is not a list of codings")
    if codings[-1] != b"chunked" or codings.count(b"chunked") > 1:
        return Refusal(400, "Transfer-Encoding must end in chunked, once")
    return Refusal(501, "Transfer-Encoding is not taken: send Content-Length")
