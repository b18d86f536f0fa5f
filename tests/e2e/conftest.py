"""A real BIND serving the record store's rendered geo views.

The session fixture writes the worked example (docs/records.md: two clusters, one loadbalanced
host) into a `local` store, renders its views, and starts ``named`` with one ``view`` per geo,
chosen by the client's
source address (``match-clients``): 127.0.0.2 is in GEO-EU, 127.0.0.3 in US, anyone else
gets the default view.  On Linux all of 127/8 is local, so a test picks its "location"
by binding its source address.

Without ``named`` the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode
import pytest

from gitdns.adapters.zonefile import write_views
from gitdns.core.records import Action, Change
from gitdns.providers.local import LocalProvider
from tests.conftest import worked_example_records
from tests.e2e.dns_servers import stop_process

ZONE = "example.com"
GEO_CLIENTS = {"GEO-EU": "127.0.0.2", "US": "127.0.0.3"}
INSTALL_HINT = "install BIND 9: apt-get install -y --no-install-recommends bind9 bind9-utils dnsutils"


def require_tool(name: str) -> str:
    """The path of a BIND tool; skip without it, or fail when CI=true."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    if found:
        return found
    message = f"{name} not found: {INSTALL_HINT}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 (GITDNS_E2E_BIND_PORT overrides)."""
    if os.environ.get("GITDNS_E2E_BIND_PORT"):
        return int(os.environ["GITDNS_E2E_BIND_PORT"])
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


def named_conf(directory: Path, port: int, zone_files: dict[str, Path]) -> str:
    """named.conf with one view per geo (by client source address) plus the default view."""
    views = []
    for view, path in sorted(zone_files.items(), key=lambda kv: kv[0] == "default"):
        clients = "any" if view == "default" else GEO_CLIENTS[view]
        views.append(
            f'view "{view}" {{\n'
            f"    match-clients {{ {clients}; }};\n"
            f'    zone "{ZONE}" {{ type primary; file "{path}"; }};\n'
            f"}};\n"
        )
    return (
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
        "controls { };\n" + "".join(views)
    )


def query(port: int, name: str, rdtype: str = "A", source: str = "127.0.0.1") -> dns.message.Message:
    q = dns.message.make_query(name, rdtype)
    return dns.query.udp(q, "127.0.0.1", port=port, source=source, timeout=2)


@dataclass(frozen=True, slots=True)
class BindViews:
    port: int
    directory: Path
    zone_files: dict[str, Path]


def _wait_ready(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"named exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if query(port, f"{ZONE}.", "SOA").rcode() == dns.rcode.NOERROR:
                return
        except (OSError, dns.exception.Timeout):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"named did not answer on port {port}:\n{log.read_text()}")


@pytest.fixture(scope="session")
def rendered_store(tmp_path_factory: pytest.TempPathFactory) -> LocalProvider:
    """A local store holding the worked example, its views rendered to disk."""
    store = LocalProvider(tmp_path_factory.mktemp("store"))
    changes = [Change(Action.CREATE, None, r, r.key) for r in worked_example_records()]
    assert store.apply(ZONE, changes).ok
    write_views(store.views_dir(ZONE), ZONE, store.read)
    return store


@pytest.fixture(scope="session")
def bind_views(
    rendered_store: LocalProvider, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BindViews]:
    named = require_tool("named")
    directory = tmp_path_factory.mktemp("bind")
    views_dir = rendered_store.views_dir(ZONE)
    zone_files = {p.stem: p for p in sorted(views_dir.glob("*.zone"))}
    port = _free_port()
    conf = directory / "named.conf"
    conf.write_text(named_conf(directory, port, zone_files))
    checkconf = shutil.which("named-checkconf") or shutil.which("named-checkconf", path="/usr/sbin:/usr/bin")
    if checkconf:
        subprocess.run([checkconf, str(conf)], check=True, timeout=30)
    log = directory / "named.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([named, "-g", "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_ready(proc, port, log)
        yield BindViews(port, directory, zone_files)
    finally:
        stop_process(proc)
