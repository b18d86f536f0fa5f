"""Real RFC 2136 servers on loopback for the rfc2136 end-to-end tests and the bench.

`start_bind` and `start_pdns` write a fresh configuration and zone (``example.test``, TSIG key
``ddns-key`` hmac-sha256, updates and transfers allowed for the key) in a directory, start the
server in the foreground on free ports of 127.0.0.1 (never the fixed 15353/15354 of
scripts/peers.sh, so it cannot collide with it or the BIND views fixture), and wait until it
answers.  `reset_zone` brings the zone back to what it held at start between tests.
No pytest here: the bench imports it too.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.update
import dns.zone

ZONE = "example.test"
KEY_NAME = "ddns-key"
ALGORITHM = "hmac-sha256"
SECRET = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY="  # base64("secret-key-for-tests-only-123456")
INSTALL_HINTS = {
    "named": "apt-get install -y --no-install-recommends bind9 bind9-utils dnsutils",
    "pdns_server": "apt-get install -y --no-install-recommends pdns-server pdns-backend-sqlite3",
    "pdnsutil": "apt-get install -y --no-install-recommends pdns-server pdns-backend-sqlite3",
}
PDNS_SCHEMA = Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql")


class ToolMissing(Exception):
    """A server binary is not installed; the message carries the install hint."""


def find_tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    if not found:
        raise ToolMissing(f"{name} not found: {INSTALL_HINTS.get(name, 'install it')}")
    return found


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
        return port
    raise RuntimeError("no free port on 127.0.0.1")


def keyring() -> dict[dns.name.Name, dns.tsig.Key]:
    name = dns.name.from_text(KEY_NAME)
    return {name: dns.tsig.Key(name, SECRET, ALGORITHM)}


@dataclass
class DnsServer:
    kind: str  # "bind" | "pdns"
    port: int
    directory: Path
    proc: subprocess.Popen[bytes]
    log: Path
    pristine: set[tuple[str, str]] = field(default_factory=set)  # (name, type) present at start

    host = "127.0.0.1"

    def transfer(self) -> dns.zone.Zone:
        xfr = dns.query.xfr(self.host, ZONE + ".", port=self.port, keyring=keyring(), keyname=KEY_NAME,
                            keyalgorithm=ALGORITHM, lifetime=10, relativize=False)
        return dns.zone.from_xfr(xfr, relativize=False)

    def update(self, message: dns.update.UpdateMessage) -> str:
        message.use_tsig(keyring(), keyname=KEY_NAME, algorithm=ALGORITHM)
        return str(dns.rcode.to_text(dns.query.tcp(message, self.host, port=self.port, timeout=10).rcode()))

    def new_update(self) -> dns.update.UpdateMessage:
        return dns.update.UpdateMessage(ZONE + ".")

    def query(self, name: str, rdtype: str) -> list[str]:
        response = dns.query.tcp(dns.message.make_query(name, rdtype), self.host, port=self.port, timeout=5)
        return sorted(rd.to_text() for rrset in response.answer for rd in rrset)

    def rrsets(self) -> set[tuple[str, str]]:
        return {(str(name), dns.rdatatype.to_text(rds.rdtype)) for name, rds in self.transfer().iterate_rdatasets()}

    def reset_zone(self) -> None:
        """Delete every rrset that was not there at start (SOA and apex NS are never touched)."""
        extra = sorted(self.rrsets() - self.pristine)
        if not extra:
            return
        message = self.new_update()
        for name, rdtype in extra:
            message.delete(name, rdtype)
        rcode = self.update(message)
        if rcode != "NOERROR":
            raise RuntimeError(f"reset of {ZONE} on {self.kind}: {rcode}")

    def stop(self) -> None:
        stop_process(self.proc)


def _wait_ready(server: DnsServer, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.kind} exited with {server.proc.returncode}:\n{server.log.read_text()}")
        try:
            server.pristine = server.rrsets()
            if any(t == "SOA" for _, t in server.pristine):
                return
        except (OSError, EOFError, dns.exception.DNSException) as exc:
            last = exc
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"{server.kind} did not serve {ZONE} by AXFR on port {server.port} ({last!r}):\n"
                       f"{server.log.read_text()[-3000:]}")


def _spawn(kind: str, argv: list[str], directory: Path, port: int) -> DnsServer:
    log = directory / f"{kind}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    server = DnsServer(kind, port, directory, proc, log)
    try:
        _wait_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def start_bind(directory: Path, port: int | None = None) -> DnsServer:
    """BIND 9 on a free port."""
    named = find_tool("named")
    port = port or int(os.environ.get("GITDNS_E2E_RFC2136_BIND_PORT") or free_port())
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{ZONE}.zone").write_text(
        "$TTL 300\n"
        f"@   IN SOA ns1.{ZONE}. hostmaster.{ZONE}. ( 1 3600 600 86400 300 )\n"
        f"    IN NS  ns1.{ZONE}.\n"
        "ns1 IN A   127.0.0.1\n")
    (directory / "named.conf").write_text(
        f'key "{KEY_NAME}" {{ algorithm {ALGORITHM}; secret "{SECRET}"; }};\n'
        "options {\n"
        f'    directory "{directory}";\n'
        f'    pid-file "{directory}/named.pid";\n'
        f'    session-keyfile "{directory}/session.key";\n'
        f'    managed-keys-directory "{directory}";\n'
        f"    listen-on port {port} {{ 127.0.0.1; }};\n"
        "    listen-on-v6 { none; };\n"
        "    recursion no;\n"
        "    dnssec-validation no;\n"
        "    allow-query { 127.0.0.0/8; };\n"
        "    notify no;\n"
        "};\n"
        "controls { };\n"
        f'zone "{ZONE}" {{\n'
        "    type primary;\n"
        f'    file "{directory}/{ZONE}.zone";\n'
        f'    allow-update {{ key "{KEY_NAME}"; }};\n'
        f'    allow-transfer {{ key "{KEY_NAME}"; }};\n'
        "};\n")
    return _spawn("bind", [named, "-g", "-c", str(directory / "named.conf")], directory, port)


def start_pdns(directory: Path, port: int | None = None) -> DnsServer:
    """PowerDNS Authoritative with gsqlite3 and RFC 2136 on, the zone, TSIG key and
    its metadata made with pdnsutil before the start (no HTTP API needed)."""
    pdns_server = find_tool("pdns_server")
    pdnsutil = find_tool("pdnsutil")
    port = port or int(os.environ.get("GITDNS_E2E_RFC2136_PDNS_PORT") or free_port())
    directory.mkdir(parents=True, exist_ok=True)
    database = directory / "pdns.sqlite3"
    (directory / "pdns.conf").write_text(
        "launch=gsqlite3\n"
        f"gsqlite3-database={database}\n"
        "local-address=127.0.0.1\n"
        f"local-port={port}\n"
        f"socket-dir={directory}\n"
        "daemon=no\nguardian=no\ndisable-syslog=yes\nloglevel=4\n"
        "security-poll-suffix=\n"
        "default-soa-content=ns1.@ hostmaster.@ 0 10800 3600 604800 300\n"
        "dnsupdate=yes\n"
        "allow-dnsupdate-from=127.0.0.0/8\n"
        "webserver=no\napi=no\n")
    import sqlite3

    with sqlite3.connect(database) as db:
        db.executescript(PDNS_SCHEMA.read_text())
    util = [pdnsutil, f"--config-dir={directory}"]
    for args in (["create-zone", ZONE, f"ns1.{ZONE}"],
                 ["add-record", ZONE, "ns1", "A", "300", "127.0.0.1"],
                 ["import-tsig-key", KEY_NAME, ALGORITHM, SECRET],
                 ["set-meta", ZONE, "TSIG-ALLOW-DNSUPDATE", KEY_NAME],
                 ["set-meta", ZONE, "SOA-EDIT-DNSUPDATE", "INCREASE"],
                 ["set-meta", ZONE, "TSIG-ALLOW-AXFR", KEY_NAME]):
        subprocess.run([*util, *args], check=True, timeout=30, capture_output=True)
    return _spawn("pdns", [pdns_server, f"--config-dir={directory}"], directory, port)


STARTERS = {"bind": start_bind, "pdns": start_pdns}


@contextmanager
def running(kind: str, directory: Path) -> Iterator[DnsServer]:
    server = STARTERS[kind](directory)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def bind_server(directory: Path) -> Iterator[DnsServer]:
    """A BIND of its own in ``directory``, stopped afterwards.  BIND missing: the test is
    skipped, or fails under CI=true (a missing test server is never a silent skip there)."""
    try:
        server = start_bind(directory)
    except ToolMissing as exc:
        require(exc)
        raise
    try:
        yield server
    finally:
        server.stop()


def require(exc: Exception) -> None:
    """A missing test server: fail under CI=true (never a silent skip there), else skip."""
    import os

    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(str(exc))
    pytest.skip(str(exc))


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after 10 s: a test server never outlives its test."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
