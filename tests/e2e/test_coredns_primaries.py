"""Every primary serves the same answers: each primary's rendered views, from its own store,
served by its own real DNS server.

CoreDNS cannot be installed here, so BIND stands in for it: the same master files, one BIND
``view`` per entry of the zone's ``viewClients`` (``match-clients`` with the same CIDRs, in the
same order) and the default view last — what the generated Corefile snippet asks of CoreDNS's
``view`` + ``file`` plugins.  127.0.0.2 is routed to GEO-EU, 127.0.0.1 gets the default view.
Without ``named`` the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.message
import dns.rcode
import pytest

from gitdns.core.zonecorefile import parse_view_clients
from tests.agent.coredns_kit import EU_CLIENT, SERVED, SERVED_ZONE, PrimariesFleet, start
from tests.e2e.conftest import _free_port, query, require_tool
from tests.e2e.dns_servers import stop_process

pytestmark = pytest.mark.bind
DEFAULT_CLIENT = "127.0.0.1"
CLIENTS = {"GEO-EU": EU_CLIENT, "default": DEFAULT_CLIENT}


def view_clients() -> list[tuple[str, str]]:
    """(view, BIND address match list) in the order of the zone's viewClients, default last."""
    setting = SERVED_ZONE.split('viewClients: "')[1].split('"')[0]
    return [(v.view, "; ".join(v.cidrs)) for v in parse_view_clients(setting)] + [("default", "any")]


def named_conf(directory: Path, views_dir: Path, port: int) -> str:
    views = "".join(
        f'view "{view}" {{\n    match-clients {{ {clients}; }};\n'
        f'    zone "{SERVED}" {{ type primary; file "{views_dir}/{view}.zone"; }};\n}};\n'
        for view, clients in view_clients())
    return (f'options {{\n    directory "{directory}";\n    pid-file "{directory}/named.pid";\n'
            f'    session-keyfile "{directory}/session.key";\n    managed-keys-directory "{directory}";\n'
            f"    listen-on port {port} {{ 127.0.0.1; }};\n    listen-on-v6 {{ none; }};\n"
            "    recursion no;\n    dnssec-validation no;\n    allow-query { 127.0.0.0/8; };\n"
            "    notify no;\n};\ncontrols { };\n" + views)


@dataclass(frozen=True, slots=True)
class Server:
    primary: str
    port: int


def _wait(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"named exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if query(port, f"{SERVED}.", "SOA").rcode() == dns.rcode.NOERROR:
                return
        except (OSError, dns.exception.Timeout):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"named did not answer on port {port}:\n{log.read_text()}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> PrimariesFleet:
    return start(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def servers(fleet: PrimariesFleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    named = require_tool("named")
    procs: list[subprocess.Popen[bytes]] = []
    out: list[Server] = []
    try:
        for primary in ("p1", "p2"):
            directory = tmp_path_factory.mktemp(f"bind-{primary}")
            port = _free_port()
            (directory / "named.conf").write_text(named_conf(directory, fleet.views_dir(primary), port))
            log = directory / "named.log"
            with open(log, "wb") as sink:
                proc = subprocess.Popen([named, "-g", "-c", str(directory / "named.conf")], stdout=sink,
                                        stderr=subprocess.STDOUT)
            procs.append(proc)
            _wait(proc, port, log)
            out.append(Server(primary, port))
        yield out
    finally:
        for proc in procs:
            stop_process(proc)


def answer(server: Server, name: str, rdtype: str, source: str) -> tuple[int, list[str]]:
    response: dns.message.Message = query(server.port, name, rdtype, source=source)
    sections = response.answer + response.authority
    return response.rcode(), sorted(line for rrset in sections for line in rrset.to_text().splitlines())


def test_named_checkzone_accepts_every_view_of_both_primaries(fleet: PrimariesFleet) -> None:
    checkzone = require_tool("named-checkzone")
    for primary in ("p1", "p2"):
        for path in sorted(fleet.views_dir(primary).glob("*.zone")):
            result = subprocess.run([checkzone, SERVED, str(path)], capture_output=True, text=True, timeout=30,
                                    check=False)
            assert result.returncode == 0, f"{primary} {path.name}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("source", [EU_CLIENT, DEFAULT_CLIENT], ids=["GEO-EU", "default"])
@pytest.mark.parametrize(("name", "rdtype"), [
    (f"api.{SERVED}.", "A"), (f"api.{SERVED}.", "CNAME"), (f"klb.api.{SERVED}.", "CNAME"),
    (f"www.{SERVED}.", "A"), (f"{SERVED}.", "NS"), (f"{SERVED}.", "SOA"), (f"nothing.{SERVED}.", "A"),
])
def test_both_primaries_answer_the_same(servers: list[Server], name: str, rdtype: str, source: str) -> None:
    first, second = (answer(s, name, rdtype, source) for s in servers)
    assert first == second
    rcode, lines = first
    expect_nx = name.startswith("nothing.")
    assert rcode == (dns.rcode.NXDOMAIN if expect_nx else dns.rcode.NOERROR) and lines


@pytest.mark.parametrize(("source", "address"), [(EU_CLIENT, "10.0.0.1"), (DEFAULT_CLIENT, "10.0.0.2")],
                         ids=["GEO-EU", "default"])
def test_the_view_follows_the_client_address(servers: list[Server], source: str, address: str) -> None:
    for server in servers:
        _, lines = answer(server, f"api.{SERVED}.", "A", source)
        assert [line.split()[-1] for line in lines if " IN A " in line] == [address], (server.primary, lines)


def test_both_name_every_primary_as_nameserver(servers: list[Server]) -> None:
    for server in servers:
        _, lines = answer(server, f"{SERVED}.", "NS", DEFAULT_CLIENT)
        assert [line.split()[-1] for line in lines] == ["ns-p1.example.com.", "ns-p2.example.com."]


def test_views_named_by_view_clients_are_served_in_order() -> None:
    assert view_clients() == [("GEO-EU", f"{EU_CLIENT}/32"), ("default", "any")]
    assert set(CLIENTS) == {v for v, _ in view_clients()}
