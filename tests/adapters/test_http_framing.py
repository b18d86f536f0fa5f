"""How the agent's and the orchestrator's HTTP servers frame a request (RFC 9110, RFC 9112):
`gitdns.adapters.http.framing.frame_request` decides before any handler runs, so a request whose
length, encoding, host or field lines are in doubt is answered 4xx/5xx and its connection
closed, no handler is called and no body byte is read.  On a real server on 127.0.0.1 with raw
sockets, as a hostile client or a confused proxy would send them; and what reaches the log of
a request is escaped.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import uuid
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.adapters.http.framing import Head, Refusal, frame_request
from gitdns.adapters.http.handler import Reply
from gitdns.adapters.http.server import HttpServer, WebhookConfig
from gitdns.agent.metrics import Metrics
from gitdns.core.webhook import PushEvent, sign_github

SECRET = b"framing-secret"
SHA = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"
BOUND = 10.0  # seconds: an upper bound that turns a hang into a failure, never a measured time


class Spy(HttpServer):
    """The server with its two handlers counted: a refused request must reach neither."""

    def __init__(self) -> None:
        self.pushes: list[PushEvent] = []
        self.handled: list[str] = []
        super().__init__("127.0.0.1", 0, metrics=Metrics(), status=lambda: {"ok": True}, ready=lambda: True,
                         webhook=WebhookConfig(github_secret=SECRET), on_push=self.pushes.append)

    def handle_get(self, path: str) -> Reply:
        self.handled.append(f"GET {path}")
        return super().handle_get(path)

    def handle_webhook(self, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        self.handled.append(f"POST {path}")
        return super().handle_webhook(path, headers, body)


@pytest.fixture
def server() -> Iterator[Spy]:
    spy = Spy()
    spy.start()
    try:
        yield spy
    finally:
        spy.stop()


def push_body() -> bytes:
    return json.dumps({"ref": "refs/heads/main", "before": "0" * 40, "after": SHA,
                       "repository": {"full_name": "acme/dns"}}).encode()


def signed(body: bytes, delivery: str | None = None) -> bytes:
    """The header lines of a signed GitHub push delivery of ``body`` (no Content-Length)."""
    return (b"X-GitHub-Event: push\r\nX-GitHub-Delivery: " + (delivery or str(uuid.uuid4())).encode("latin-1")
            + b"\r\nX-Hub-Signature-256: " + sign_github(SECRET, body).encode() + b"\r\n")


def exchange(server: HttpServer, raw: bytes, *, shut: bool = False) -> bytes | None:
    """Send ``raw`` on a fresh connection and read until the server closes it: what it sent,
    or None when it kept the connection open past BOUND."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=BOUND) as sock:
        sock.sendall(raw)
        if shut:
            sock.shutdown(socket.SHUT_WR)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except TimeoutError:
            return None
        except ConnectionResetError:
            pass
        return data


def status_of(answer: bytes | None) -> int:
    assert answer is not None, "the server kept the connection open"
    matched = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert matched is not None, answer[:200]
    return int(matched[1])


def refused(server: Spy, raw: bytes) -> tuple[int, bytes]:
    """The status of a request the server must refuse, the connection closed by it (the
    answer says ``Connection: close`` and ends), no handler called."""
    answer = exchange(server, raw)
    status = status_of(answer)
    assert answer is not None and b"\r\nConnection: close\r\n" in answer
    assert server.handled == [] and server.pushes == []
    return status, answer.partition(b"\r\n\r\n")[2]


BODY = push_body()
LENGTH = str(len(BODY)).encode()
WEBHOOK = b"POST /webhook HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\n"


# --- each malformed framing: refused, closed, no handler ------------------------------------

MALFORMED = {
    # Content-Length: exactly one, exactly 1*DIGIT
    "two Content-Length": (WEBHOOK + signed(BODY) + b"Content-Length: " + LENGTH + b"\r\nContent-Length: "
                           + LENGTH + b"\r\n\r\n" + BODY, 400),
    "Content-Length 0_0": (b"GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 0_0\r\n\r\n", 400),
    "Content-Length +N": (WEBHOOK + signed(BODY) + b"Content-Length: +" + LENGTH + b"\r\n\r\n" + BODY, 400),
    # Transfer-Encoding: never with Content-Length, and not taken
    "Transfer-Encoding and Content-Length": (WEBHOOK + signed(BODY) + b"Transfer-Encoding: chunked\r\n"
                                             b"Content-Length: " + LENGTH + b"\r\n\r\n" + BODY, 400),
    "Transfer-Encoding chunked": (b"POST /webhook HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
    "Transfer-Encoding not ending in chunked": (b"GET /healthz HTTP/1.1\r\nHost: a\r\n"
                                                b"Transfer-Encoding: chunked, gzip\r\n\r\n", 400),
    "Transfer-Encoding in HTTP/1.0": (b"GET /healthz HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    # field lines
    "whitespace before the colon": (WEBHOOK + b"X-Pad : 1\r\n" + signed(BODY) + b"Content-Length: " + LENGTH
                                    + b"\r\n\r\n" + BODY, 400),
    "Content-Length with whitespace before the colon": (b"GET /healthz HTTP/1.1\r\nHost: a\r\n"
                                                        b"Content-Length : 0\r\n\r\n", 400),
    "obs-fold": (WEBHOOK + signed(BODY) + b"X-Note: a\r\n folded\r\nContent-Length: " + LENGTH + b"\r\n\r\n"
                 + BODY, 400),
    "control character in a value": (WEBHOOK + signed(BODY) + b"X-Note: a\x1b[2Jb\r\nContent-Length: " + LENGTH
                                     + b"\r\n\r\n" + BODY, 400),
    "signature given twice": (WEBHOOK + signed(BODY) + b"X-Hub-Signature-256: sha256=" + b"0" * 64
                              + b"\r\nContent-Length: " + LENGTH + b"\r\n\r\n" + BODY, 400),
    "bare LF line ends": (b"GET /healthz HTTP/1.1\nHost: a\n\n", 400),
    # Host
    "Host twice": (b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    "HTTP/1.1 without Host": (b"GET /healthz HTTP/1.1\r\n\r\n", 400),
    # the request line
    "ESC in the request line": (b"GET /healthz\x1b[2J HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    "TAB in the request line": (b"GET\t/healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    "two spaces in the request line": (b"GET  /healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    "HTTP/0.9": (b"GET /healthz\r\n", 400),
    "a target that is not a path": (b"GET healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    "an expectation not met": (WEBHOOK + signed(BODY) + b"Expect: 200-ok\r\nContent-Length: " + LENGTH
                               + b"\r\n\r\n" + BODY, 417),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_framing_is_refused_and_the_connection_closed(server: Spy, case: str) -> None:
    raw, expected = MALFORMED[case]
    status, body = refused(server, raw)
    assert status == expected
    assert body.endswith(b"\n") and body.count(b"\n") == 1  # one short line, no HTML, no traceback
    assert status_of(exchange(server, b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")) == 200


def test_what_clients_send_is_framed_as_sent() -> None:
    """Strict is not picky: the absolute form of the target, a list field on two lines, no
    space after a colon, HTTP/1.0 without Host, obs-text in a value."""
    head = frame_request(b"GET http://agent/healthz?x=1 HTTP/1.1\r\nHost: agent:8080\r\nAccept: text/plain\r\n"
                         b"accept: */*\r\nContent-Length:0\r\nX-Note: caf\xe9\r\n\r\n")
    assert head == Head("GET", "http://agent/healthz?x=1", "/healthz", "HTTP/1.1",
                        (("Host", "agent:8080"), ("Accept", "text/plain"), ("accept", "*/*"),
                         ("Content-Length", "0"), ("X-Note", "caf\xe9")), 0)
    head = frame_request(b"POST /webhook?a=b HTTP/1.0\r\nContent-Length: 007\r\n\r\n")
    assert isinstance(head, Head) and (head.path, head.length, head.field("content-length")) == ("/webhook", 7, "007")


def test_a_body_on_a_get_is_never_read_as_the_next_request(server: Spy) -> None:
    smuggled = b"GET /status HTTP/1.1\r\nHost: a\r\n\r\n"
    answer = exchange(server, b"GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: " + str(len(smuggled)).encode()
                      + b"\r\n\r\n" + smuggled)
    assert answer is not None and answer.count(b"HTTP/1.1 ") == 1 and status_of(answer) == 200
    assert server.handled == ["GET /healthz"]


def test_a_body_cut_short_is_not_judged(server: Spy) -> None:
    answer = exchange(server, WEBHOOK + signed(BODY) + b"Content-Length: " + LENGTH + b"\r\n\r\n" + BODY[:-5],
                      shut=True)
    assert answer == b""
    assert server.handled == [] and server.pushes == []


def test_an_oversize_body_announced_with_expect_is_refused_before_it_is_sent(server: Spy) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=BOUND) as sock:
        sock.sendall(WEBHOOK + signed(BODY) + b"Expect: 100-continue\r\nContent-Length: 2000000\r\n\r\n")
        first = sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 413 ")
    assert server.handled == []


# --- Content-Length spellings ---------------------------------------------------------------

OTHER_DIGITS = {"arabic-indic": 0x660, "fullwidth": 0xFF10, "devanagari": 0x966}


@st.composite
def spellings(draw: st.DrawFn) -> tuple[list[bytes], bool]:
    """Content-Length field values meaning the body's length one way or another, and whether
    the request is framed (one field line: ``Content-Length: `` and 1 to 18 ASCII digits)."""
    digits = "0" * draw(st.integers(0, 40)) + LENGTH.decode()
    script = draw(st.sampled_from(["ascii", *OTHER_DIGITS]))
    if script != "ascii":
        digits = "".join(chr(OTHER_DIGITS[script] + int(d)) for d in digits)
    if draw(st.booleans()):
        at = draw(st.integers(1, len(digits) - 1))
        digits = digits[:at] + draw(st.sampled_from(["_", ",", ".", " ", "e", "x"])) + digits[at:]
    prefix = draw(st.sampled_from(["", "", " ", "  ", "\t", "+", "-", "0x", "0_"]))
    suffix = draw(st.sampled_from(["", "", " ", "\t", ",", "," + LENGTH.decode(), ".0", "_", "L"]))
    value = (prefix + digits + suffix).encode("utf-8")
    lines = [value] * draw(st.sampled_from([1, 1, 1, 2]))
    ok = len(lines) == 1 and re.fullmatch(r"[0-9]{1,18}", prefix + digits + suffix) is not None
    return lines, ok


def test_content_length_is_one_field_of_ascii_digits() -> None:
    named = {b"0_0": False, b"+5": False, b" 5": False, b"5 ": False, b"0x5": False, "\u0665".encode(): False,
             b"5,5": False, b"5": True, b"0" * 18: True, b"0" * 19: False, b"9" * 40: False}
    for value, ok in named.items():
        head = frame_request(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: " + value + b"\r\n\r\n")
        assert isinstance(head, Head) is ok, value
        if not ok:
            assert head == Refusal(400, "Content-Length must be 1 to 18 ASCII digits")
    twice = frame_request(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n")
    assert twice == Refusal(400, "content-length given twice")

    spy = Spy()
    spy.start()
    try:
        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(spellings())
        def served_only_when_framed(case: tuple[list[bytes], bool]) -> None:
            lines, ok = case
            spy.handled.clear()
            fields = b"".join(b"Content-Length: " + line + b"\r\n" for line in lines)
            answer = exchange(spy, WEBHOOK + signed(BODY) + fields + b"Connection: close\r\n\r\n" + BODY)
            if ok:
                assert status_of(answer) == 202 and spy.handled == ["POST /webhook"]
            else:
                assert status_of(answer) == 400 and spy.handled == [], lines

        served_only_when_framed()
    finally:
        spy.stop()


# --- webhook JSON ---------------------------------------------------------------------------


def test_a_signed_deep_body_is_400_and_the_server_lives_on(server: Spy) -> None:
    body = b"[" * 200_000 + b"]" * 200_000
    answer = exchange(server, WEBHOOK + signed(body) + b"Content-Length: " + str(len(body)).encode()
                      + b"\r\nConnection: close\r\n\r\n" + body)
    assert status_of(answer) == 400
    assert answer is not None and answer.endswith(b"\r\n\r\npush payload nests deeper than 32 levels\n")
    assert server.pushes == []
    assert server._thread is not None and server._thread.is_alive()
    assert status_of(exchange(server, b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")) == 200


# --- request data in the log ----------------------------------------------------------------


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


@pytest.mark.parametrize(("target", "escaped"), [
    (b"/healthz\x1b[2J\x1b]52;c;aGk=\x07", "/healthz\\x1b[2J\\x1b]52;c;aGk=\\x07"),
    (b"/a\xe2\x80\xaeb", "/a\\u202eb"),  # U+202E RIGHT-TO-LEFT OVERRIDE, sent as UTF-8
    (b"/a\x85b", "/a\\x85b"),  # not UTF-8: the byte as it came
])
def test_a_request_line_reaches_the_log_escaped(server: Spy, caplog: pytest.LogCaptureFixture, target: bytes,
                                                escaped: str) -> None:
    caplog.set_level(logging.DEBUG, logger="gitdns.adapters.http.server")
    status, _ = refused(server, b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n\r\n")
    assert status == 400
    assert any(escaped in message for message in messages(caplog)), messages(caplog)
    assert all(message.isprintable() for message in messages(caplog)), messages(caplog)


def test_a_line_break_in_the_request_line_reaches_the_log_escaped(server: Spy,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gitdns.adapters.http.server")
    status, _ = refused(server, b"GET /a\rlevel=ERROR forged HTTP/1.1\r\nHost: a\r\n\r\n")
    assert status == 400
    assert any("/a\\rlevel=ERROR forged" in message for message in messages(caplog)), messages(caplog)
    assert all(message.isprintable() for message in messages(caplog)), messages(caplog)


def test_a_delivery_id_reaches_the_log_escaped(server: Spy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gitdns.adapters.http.server")
    # 0x9b is CSI, a C1 control (a field value may hold such bytes: obs-text)
    answer = exchange(server, WEBHOOK + signed(BODY, "d-\x9b31m\xa0x") + b"Content-Length: " + LENGTH
                      + b"\r\nConnection: close\r\n\r\n" + BODY)
    assert status_of(answer) == 202
    assert any("delivery=d-\\x9b31m\\xa0x" in message for message in messages(caplog)), messages(caplog)
    assert all(message.isprintable() for message in messages(caplog)), messages(caplog)
