"""The prober (gitdns.adapters.probes) against real servers on 127.0.0.1.

HTTP: stdlib ``http.server`` in a thread.  HTTPS: the same server behind a self-signed
certificate made at test time (``cryptography``, else ``openssl req``).  Hostnames resolve
from a table (`NAMES`), never through the machine's resolver.  Waits are for conditions, with
generous deadlines; nothing asserts on wall-clock time.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import math
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gitdns.adapters.probes import HealthMonitor, build_request, parse_status, system_resolver
from gitdns.core.health import HealthSettings, ProbeSpec, State, TargetHealth
from gitdns.core.reach import ProbeReach
from tests.probe_kit import wait_until

LOOPBACK = ProbeReach.parse("127.0.0.0/8,::1")  # the servers here: the operator's --probe-allow-ranges
FAST = HealthSettings(interval=0.05, timeout=1.0, failure_threshold=2, success_threshold=1)
SECRET = "s3cret-token-value"
TLS_HOST = "api.example.test"


class TableResolver:
    """A prober resolver answering from a table; any other name is NXDOMAIN (as getaddrinfo
    reports it).  Remembers every name asked."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = dict(table)
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, a) for a in self.table[host]]


NAMES = TableResolver({"api.internal.test": ["127.0.0.1"]})


class Recorder:
    """What the server saw, and what it answers."""

    def __init__(self) -> None:
        self.status = 200
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.sni: list[str | None] = []
        self.lock = threading.Lock()


class Server:
    def __init__(self, recorder: Recorder, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        rec = recorder

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with rec.lock:
                    rec.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                body = b"ok\n"
                self.send_response(rec.status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Quiet(ThreadingHTTPServer):
            daemon_threads = True

            def server_bind(self) -> None:  # HTTPServer's would look its address up (getfqdn)
                socketserver.TCPServer.server_bind(self)
                self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # probes hang up after the status line

        self.httpd = Quiet(("127.0.0.1", port), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def http_server(recorder: Recorder) -> Iterator[Server]:
    server = Server(recorder)
    yield server
    server.close()


@pytest.fixture
def monitor() -> Iterator[HealthMonitor]:
    m = HealthMonitor(resolver=NAMES, reach=LOOPBACK)
    yield m
    m.stop()


def http(tid: str, port: int, **kw: object) -> ProbeSpec:
    return ProbeSpec(tid, kw.pop("protocol", "HTTP"), kw.pop("address", "127.0.0.1"), port, **kw)  # type: ignore[arg-type]


def state(m: HealthMonitor, tid: str) -> State | None:
    h = m.snapshot().get(tid)
    return None if h is None else h.state


# -- pieces ---------------------------------------------------------------------------------


def test_request_bytes() -> None:
    """HTTP keeps its connection (HTTP/1.1's default: no Connection header); HTTPS asks to close."""
    spec = ProbeSpec("t", "HTTP", "10.0.0.1", 80, "/healthz", host="api.example.com", headers=(("X-A", "1"),))
    assert build_request(spec) == (
        b"GET /healthz HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: gitdns-probe/1\r\nAccept: */*\r\n"
        b"X-A: 1\r\n\r\n"
    )
    tls = ProbeSpec("t", "HTTPS", "10.0.0.1", 443, "/healthz", host="api.example.com")
    assert build_request(tls) == (
        b"GET /healthz HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: gitdns-probe/1\r\nAccept: */*\r\n"
        b"Connection: close\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"HTTP/1.1 200 OK\r\n", 200),
        (b"HTTP/1.0 503 Service Unavailable\r\n", 503),
        (b"HTTP/1.1 204\r\n", 204),
        (b"SSH-2.0-OpenSSH\r\n", None),
        (b"HTTP/1.1 20 OK\r\n", None),
        (b"HTTP/1.1 abc OK\r\n", None),
        (b"", None),
    ],
)
def test_parse_status(line: bytes, code: int | None) -> None:
    assert parse_status(line) == code


# -- HTTP -----------------------------------------------------------------------------------


def test_healthy_then_unhealthy_by_status_code(http_server: Server, recorder: Recorder) -> None:
    changes: list[tuple[str, State, State]] = []
    monitor = HealthMonitor(on_change=lambda tid, old, new: changes.append((tid, old.state, new.state)),
                            resolver=NAMES, reach=LOOPBACK)
    try:
        _status_code_round_trip(monitor, http_server, recorder, changes)
    finally:
        monitor.stop()


def _status_code_round_trip(
    monitor: HealthMonitor, http_server: Server, recorder: Recorder, changes: list[tuple[str, State, State]]
) -> None:
    monitor.set_targets({"a": (http("a", http_server.port, path="/healthz/ready"), FAST)})
    monitor.start()
    wait_until(lambda: state(monitor, "a") is State.HEALTHY)
    recorder.status = 503
    wait_until(lambda: state(monitor, "a") is State.UNHEALTHY)
    h = monitor.snapshot()["a"]
    assert h.last_error == "status 503" and h.failures >= 2
    recorder.status = 200
    wait_until(lambda: state(monitor, "a") is State.HEALTHY)
    assert changes[:3] == [("a", State.UNKNOWN, State.HEALTHY), ("a", State.HEALTHY, State.UNHEALTHY),
                           ("a", State.UNHEALTHY, State.HEALTHY)]  # fmt: skip
    assert recorder.requests[0][0] == "/healthz/ready"
    monitor.stop()  # nothing ends between the reads below
    durations, ends = monitor.rounds(["zz", "a", "zz"])
    assert durations[1] >= 0 and durations[1] == monitor.last_round_duration("a")
    assert 0 < ends[1] <= time.monotonic() and monitor.last_check_time is not None
    assert monitor.last_round_duration("zz") is None
    assert all(math.isnan(x) for x in (durations[0], durations[2], ends[0], ends[2]))


def test_expected_codes(monitor: HealthMonitor, http_server: Server, recorder: Recorder) -> None:
    recorder.status = 204
    monitor.set_targets(
        {
            "only-200": (http("only-200", http_server.port), FAST),
            "200-or-204": (http("200-or-204", http_server.port, expected_codes=(200, 204)), FAST),
        }
    )
    monitor.start()
    wait_until(lambda: state(monitor, "only-200") is State.UNHEALTHY and state(monitor, "200-or-204") is State.HEALTHY)


def test_server_going_away_and_back(monitor: HealthMonitor, recorder: Recorder) -> None:
    server = Server(recorder)
    port = server.port
    monitor.set_targets({"a": (http("a", port), FAST)})
    monitor.start()
    wait_until(lambda: state(monitor, "a") is State.HEALTHY)
    server.close()
    wait_until(lambda: state(monitor, "a") is State.UNHEALTHY)
    assert monitor.snapshot()["a"].last_error == "connection refused"
    server = Server(recorder, port=port)
    try:
        wait_until(lambda: state(monitor, "a") is State.HEALTHY)
        assert monitor.snapshot()["a"].last_error == ""
    finally:
        server.close()


def test_accepts_but_never_answers_times_out(monitor: HealthMonitor, hanging_port: int) -> None:
    settings = HealthSettings(interval=0.05, timeout=0.2, failure_threshold=2, success_threshold=1)
    monitor.set_targets(
        {
            "http": (http("http", hanging_port, timeout=0.2), settings),
            "https": (http("https", hanging_port, protocol="HTTPS", timeout=0.2, insecure=True), settings),
        }
    )
    monitor.start()
    wait_until(lambda: state(monitor, "http") is State.UNHEALTHY and state(monitor, "https") is State.UNHEALTHY)
    snap = monitor.snapshot()
    assert snap["http"].last_error == "timeout after 0.2s"
    assert snap["https"].last_error == "timeout after 0.2s"


def test_host_header_and_extra_headers(monitor: HealthMonitor, http_server: Server, recorder: Recorder) -> None:
    headers = (("Authorization", f"Bearer {SECRET}"), ("X-Probe", "gitdns"))
    monitor.set_targets(
        {
            "named": (http("named", http_server.port, host="api.example.com", headers=headers), FAST),
            "bare": (http("bare", http_server.port, path="/bare"), FAST),
        }
    )
    monitor.start()
    wait_until(lambda: state(monitor, "named") is State.HEALTHY and state(monitor, "bare") is State.HEALTHY)
    with recorder.lock:
        seen = list(recorder.requests)
    named = next(h for p, h in seen if p == "/")
    bare = next(h for p, h in seen if p == "/bare")
    assert named["host"] == "api.example.com"
    assert named["authorization"] == f"Bearer {SECRET}" and named["x-probe"] == "gitdns"
    assert "connection" not in named  # HTTP/1.1: the connection may be kept
    assert bare["host"] == "127.0.0.1"
    assert "authorization" not in bare


def test_header_values_never_in_errors_or_logs(
    monitor: HealthMonitor, closed_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="gitdns.adapters.probes")
    spec = http("a", closed_port, headers=(("Authorization", SECRET),))
    bad = http("b", closed_port, headers=(("X-Token", SECRET + "\r\nEvil: 1"),))
    monitor.set_targets({"a": (spec, FAST), "b": (bad, FAST)})
    monitor.start()
    wait_until(lambda: state(monitor, "a") is State.UNHEALTHY and state(monitor, "b") is State.UNHEALTHY)
    snap = monitor.snapshot()
    assert snap["b"].last_error == "header X-Token has a control character in its value"
    assert SECRET not in snap["a"].last_error + snap["b"].last_error
    assert SECRET not in caplog.text and SECRET not in repr(spec)
    assert "state=unknown->unhealthy" in caplog.text


def test_unresolvable_host_fails_alone(monitor: HealthMonitor, http_server: Server) -> None:
    monitor.set_targets(
        {
            "good": (http("good", http_server.port), FAST),
            "nxdomain": (http("nxdomain", http_server.port, address="no-such-host.invalid"), FAST),
            "bad-port": (http("bad-port", 0), FAST),
            "bad-proto": (http("bad-proto", http_server.port, protocol="UDP"), FAST),
        }
    )
    monitor.start()
    wait_until(
        lambda: (
            all(state(monitor, t) is State.UNHEALTHY for t in ("nxdomain", "bad-port", "bad-proto"))
            and state(monitor, "good") is State.HEALTHY
        )
    )
    snap = monitor.snapshot()
    assert snap["nxdomain"].last_error == "cannot resolve no-such-host.invalid: Name or service not known"
    assert snap["bad-port"].last_error == "port 0 is out of range 1-65535"
    assert snap["bad-proto"].last_error.startswith("protocol 'UDP'")
    checks = snap["good"].checks
    wait_until(lambda: monitor.snapshot()["good"].checks > checks + 3)  # still probing the rest
    assert state(monitor, "good") is State.HEALTHY


def test_resolved_hostname(http_server: Server, recorder: Recorder) -> None:
    names = TableResolver({"api.internal.test": ["127.0.0.1", "127.0.0.2"]})  # the first is probed (.2: refused)
    monitor = HealthMonitor(resolver=names, reach=LOOPBACK)
    try:
        monitor.set_targets({"named": (http("named", http_server.port, address="api.internal.test"), FAST)})
        monitor.start()
        wait_until(lambda: state(monitor, "named") is State.HEALTHY)
    finally:
        monitor.stop()
    assert recorder.requests[0][1]["host"] == "api.internal.test"
    assert set(names.asked) == {"api.internal.test"}


def test_system_resolver_returns_family_and_address() -> None:
    # IP literals only: getaddrinfo converts them without asking /etc/hosts or DNS
    assert asyncio.run(system_resolver("127.0.0.1", 80)) == [(socket.AF_INET, "127.0.0.1")]
    assert asyncio.run(system_resolver("::1", 80)) == [(socket.AF_INET6, "::1")]


# -- TCP ------------------------------------------------------------------------------------


def test_tcp(monitor: HealthMonitor, http_server: Server, closed_port: int) -> None:
    monitor.set_targets(
        {
            "open": (ProbeSpec("open", "TCP", "127.0.0.1", http_server.port), FAST),
            "closed": (ProbeSpec("closed", "TCP", "127.0.0.1", closed_port), FAST),
        }
    )
    monitor.start()
    wait_until(lambda: state(monitor, "open") is State.HEALTHY and state(monitor, "closed") is State.UNHEALTHY)
    assert monitor.snapshot()["closed"].last_error == "connection refused"


# -- live target changes --------------------------------------------------------------------


def test_set_targets_while_running(monitor: HealthMonitor, http_server: Server, closed_port: int) -> None:
    monitor.start()
    assert monitor.snapshot() == {}
    monitor.set_targets({"a": (http("a", http_server.port), FAST)})
    wait_until(lambda: state(monitor, "a") is State.HEALTHY)
    monitor.set_targets({"a": (http("a", http_server.port), FAST), "b": (http("b", http_server.port), FAST)})
    wait_until(lambda: state(monitor, "b") is State.HEALTHY)
    assert state(monitor, "a") is State.HEALTHY
    # settings alone change: health kept; the probe changes: starts over, here to unhealthy
    slower = HealthSettings(interval=0.1, timeout=1.0, failure_threshold=2, success_threshold=1)
    monitor.set_targets({"a": (http("a", http_server.port), slower), "b": (http("b", closed_port), FAST)})
    wait_until(lambda: state(monitor, "b") is State.UNHEALTHY)
    assert state(monitor, "a") is State.HEALTHY
    monitor.set_targets({"b": (http("b", closed_port), FAST)})
    wait_until(lambda: "a" not in monitor.snapshot())
    assert monitor.stats().targets == 1


def test_on_change_errors_do_not_stop_probing(http_server: Server) -> None:
    def boom(tid: str, old: TargetHealth, new: TargetHealth) -> None:
        raise RuntimeError("callback broke")

    m = HealthMonitor(on_change=boom, resolver=NAMES, reach=LOOPBACK)
    try:
        m.set_targets({"a": (http("a", http_server.port), FAST)})
        m.start()
        wait_until(lambda: m.snapshot()["a"].checks >= 5)
    finally:
        m.stop()
    assert m.stats().completed >= 5


def test_many_targets_each_probed(monitor: HealthMonitor, http_server: Server) -> None:
    settings = HealthSettings(interval=0.5, timeout=1.0, failure_threshold=2, success_threshold=1)
    monitor.set_targets({f"t{i}": (http(f"t{i}", http_server.port, path=f"/{i}"), settings) for i in range(200)})
    monitor.start()
    wait_until(lambda: all(h.state is State.HEALTHY for h in monitor.snapshot().values()), deadline=60)
    assert len(monitor.snapshot()) == 200


# -- HTTPS ----------------------------------------------------------------------------------


def _cert_with_cryptography(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TLS_HOST)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(TLS_HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def _cert_with_openssl(directory: Path) -> tuple[Path, Path]:
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key_path), "-out", str(cert_path), "-days", "2", "-subj", f"/CN={TLS_HOST}",
         "-addext", f"subjectAltName=DNS:{TLS_HOST},IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert_path, key_path


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    try:
        return _cert_with_cryptography(directory)
    except ImportError:
        pass
    if shutil.which("openssl"):
        return _cert_with_openssl(directory)
    pytest.skip("neither the cryptography package nor openssl is available")


@pytest.fixture
def https_server(self_signed: tuple[Path, Path], recorder: Recorder) -> Iterator[Server]:
    cert, key = self_signed
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    def sni(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None, context: ssl.SSLContext) -> None:
        with recorder.lock:
            recorder.sni.append(name)

    ctx.sni_callback = sni
    server = Server(recorder, tls=ctx)
    yield server
    server.close()


def test_https_insecure_and_verified(https_server: Server, recorder: Recorder, self_signed: tuple[Path, Path]) -> None:
    trusting = ssl.create_default_context(cafile=str(self_signed[0]))
    port = https_server.port
    targets = {
        "insecure": ProbeSpec("insecure", "HTTPS", "127.0.0.1", port, "/i", host=TLS_HOST, insecure=True),
        "verified": ProbeSpec("verified", "HTTPS", "127.0.0.1", port, "/v", host=TLS_HOST),
        "wrong-name": ProbeSpec("wrong-name", "HTTPS", "127.0.0.1", port, "/w", host="other.example.test"),
    }
    default = HealthMonitor(resolver=NAMES, reach=LOOPBACK)  # the system CAs: a self-signed certificate fails
    trusted = HealthMonitor(verify_context=trusting, resolver=NAMES, reach=LOOPBACK)  # trusts it: verified probes pass
    try:
        for m in (default, trusted):
            m.set_targets({tid: (spec, FAST) for tid, spec in targets.items()})
            m.start()
        wait_until(
            lambda: (
                state(default, "insecure") is State.HEALTHY
                and state(default, "verified") is State.UNHEALTHY
                and state(trusted, "verified") is State.HEALTHY
                and state(trusted, "wrong-name") is State.UNHEALTHY
            )
        )
        assert default.snapshot()["verified"].last_error.startswith("tls: certificate verify failed")
        assert "other.example.test" in trusted.snapshot()["wrong-name"].last_error
    finally:
        default.stop()
        trusted.stop()
    with recorder.lock:
        assert TLS_HOST in recorder.sni and "other.example.test" in recorder.sni
        hosts = {p: h["host"] for p, h in recorder.requests}
    assert hosts["/i"] == TLS_HOST and hosts["/v"] == TLS_HOST
    assert "/w" not in hosts  # verification failed before any request


def test_https_status_code(monitor: HealthMonitor, https_server: Server, recorder: Recorder) -> None:
    recorder.status = 500
    spec = ProbeSpec("a", "HTTPS", "127.0.0.1", https_server.port, host=TLS_HOST, insecure=True)
    monitor.set_targets({"a": (spec, FAST)})
    monitor.start()
    wait_until(lambda: state(monitor, "a") is State.UNHEALTHY)
    assert monitor.snapshot()["a"].last_error == "status 500"


def test_https_against_plain_http(monitor: HealthMonitor, http_server: Server) -> None:
    spec = ProbeSpec("a", "HTTPS", "127.0.0.1", http_server.port, insecure=True)
    monitor.set_targets({"a": (spec, FAST)})
    monitor.start()
    wait_until(lambda: state(monitor, "a") is State.UNHEALTHY)
    assert monitor.snapshot()["a"].last_error.startswith(("tls:", "connection", "timeout"))


def test_stop_is_idempotent_and_start_once() -> None:
    m = HealthMonitor(resolver=NAMES, reach=LOOPBACK)
    m.stop()
    m.start()
    m.start()
    m.stop()
    m.stop()
