"""A real BIND picks up a `local` store's write without a restart (``--local-reload rndc``).

``named`` serves the store's geo views (one ``view`` per file, chosen by the client's source
address: 127.0.0.2 is GEO-EU, 127.0.0.3 US, anyone else default) with a control channel on
loopback whose key is in an rndc configuration file.  `gitdns apply` writes the zone, BIND
answers; the desired state changes, `gitdns apply --local-reload rndc --rndc-config FILE` writes
it and runs the real ``rndc reload ZONE IN VIEW``, and the same BIND process answers the new
value.  Without the setting BIND keeps the old answer (nothing tells it), and a write through the
store that is not a reconcile (a break-glass write) reloads too.

Without ``named`` or ``rndc`` the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from gitdns.adapters.serverreload import ServerReload
from gitdns.core.records import Action, Change
from gitdns.providers.local import LocalProvider
from tests.e2e.conftest import require_tool
from tests.e2e.dns_servers import free_port, stop_process
from tests.providers.test_local_reload import desired_repo

pytestmark = pytest.mark.bind

ZONE = "example.com"
CLIENTS = {"GEO-EU": "127.0.0.2", "US": "127.0.0.3", "default": "any"}
KEY = ('key "gitdns-test" {\n    algorithm hmac-sha256;\n'
       '    secret "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY=";\n};\n')


@dataclass
class Served:
    repo: Path
    port: int
    rndc_conf: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def answer(self, name: str, source: str) -> list[str]:
        """The A addresses ``name`` resolves to in the view ``source`` gets (CNAMEs followed by BIND)."""
        response = dns.query.udp(dns.message.make_query(name, "A"), "127.0.0.1", port=self.port, source=source,
                                 timeout=2)
        assert response.rcode() == dns.rcode.NOERROR, response
        return sorted(rd.address for rrset in response.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset)

    def eventually(self, name: str, source: str, expected: list[str], within: float = 5.0) -> list[str]:
        deadline = time.monotonic() + within
        while True:
            got = self.answer(name, source)
            if got == expected or time.monotonic() > deadline:
                return got
            time.sleep(0.05)

    def gitdns(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *args], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, f"gitdns {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr


def named_conf(directory: Path, port: int, control: int, views: Path, served: list[str]) -> str:
    blocks = "".join(
        f'view "{view}" {{\n    match-clients {{ {CLIENTS[view]}; }};\n'
        f'    zone "{ZONE}" {{ type primary; file "{views / (view + ".zone")}"; }};\n}};\n'
        for view in served)
    return (f"{KEY}options {{\n"
            f'    directory "{directory}";\n    pid-file "{directory}/named.pid";\n'
            f'    session-keyfile "{directory}/session.key";\n'
            f"    listen-on port {port} {{ 127.0.0.1; }};\n    listen-on-v6 {{ none; }};\n"
            "    recursion no;\n    dnssec-validation no;\n    notify no;\n};\n"
            f'controls {{\n    inet 127.0.0.1 port {control} allow {{ 127.0.0.1; }} keys {{ "gitdns-test"; }};\n}};\n'
            + blocks)


@contextmanager
def serve(tmp_path: Path, served: list[str]) -> Iterator[Served]:
    """The store of a fresh repository, applied once, served by a new named."""
    named = require_tool("named")
    require_tool("rndc")
    repo = desired_repo(tmp_path / "dns")
    directory = tmp_path / "bind"
    directory.mkdir()
    port, control = free_port(), free_port()
    rndc_conf = directory / "rndc.conf"
    rndc_conf.write_text(f'{KEY}options {{ default-key "gitdns-test"; default-server 127.0.0.1; '
                         f"default-port {control}; }};\n")
    conf = directory / "named.conf"
    conf.write_text(named_conf(directory, port, control, repo / ".gitdns/zones/example.com.views", served))
    subprocess.run([require_tool("named-checkconf"), str(conf)], check=True, timeout=30)
    log = directory / "named.log"
    first = subprocess.run([sys.executable, "-m", "gitdns.cli", "apply", "--repo", str(repo), "--all-clusters"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    with open(log, "wb") as out:
        proc = subprocess.Popen([named, "-g", "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT)
    server = Served(repo, port, rndc_conf, proc, log)
    try:
        deadline = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"named exited with {proc.returncode}:\n{log.read_text()}")
            try:
                server.answer(f"app.{ZONE}.", "127.0.0.1")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"named did not answer on port {port}:\n{log.read_text()}") from None
                time.sleep(0.05)
        yield server
    finally:
        stop_process(proc)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve(tmp_path, ["GEO-EU", "US", "default"]) as server:
        yield server


def reload_flags(server: Served) -> list[str]:
    return ["--local-reload", "rndc", "--rndc-config", str(server.rndc_conf)]


def test_bind_answers_the_new_value_without_a_restart(served: Served) -> None:
    app = f"app.{ZONE}."
    assert served.answer(app, "127.0.0.2") == ["192.0.2.10"]
    assert served.answer(app, "127.0.0.3") == ["198.51.100.10"]
    assert served.answer(app, "127.0.0.1") == ["192.0.2.10"]  # default: GEO-EU
    desired_repo(served.repo, eu_address="192.0.2.20")  # the EU site's gateway moves
    out = served.gitdns("apply", "--repo", str(served.repo), "--all-clusters", *reload_flags(served))
    assert "server reload: rndc reloaded zone example.com in view(s) GEO-EU, US, default" in out
    assert served.eventually(app, "127.0.0.2", ["192.0.2.20"]) == ["192.0.2.20"]
    assert served.eventually(app, "127.0.0.1", ["192.0.2.20"]) == ["192.0.2.20"]
    assert served.answer(app, "127.0.0.3") == ["198.51.100.10"]
    assert served.proc.poll() is None  # the same named, never restarted
    assert "reloading zones succeeded" not in served.log.read_text()  # per zone and view, not a full reload


def test_without_the_setting_bind_keeps_answering_the_old_value(served: Served) -> None:
    app = f"app.{ZONE}."
    desired_repo(served.repo, eu_address="192.0.2.20")
    served.gitdns("apply", "--repo", str(served.repo), "--all-clusters")
    assert "192.0.2.20" in (served.repo / ".gitdns/zones/example.com.views/GEO-EU.zone").read_text()
    time.sleep(1.0)
    assert served.answer(app, "127.0.0.2") == ["192.0.2.10"]  # nothing told BIND


def test_a_write_through_the_store_reloads_too(served: Served) -> None:
    """A break-glass write (not a reconcile: `groups set --direct`, `prune-owner`, `adopt` write
    this way) re-renders the views and reloads them."""
    store = LocalProvider(served.repo / ".gitdns/zones", reload=ServerReload(config=served.rndc_conf))
    old = next(r for r in store.read(ZONE).records if r.type == "A" and r.values == ("198.51.100.10",))
    new = type(old)(old.name, old.type, old.ttl, ("198.51.100.99",), old.set_id, old.weight, old.geo)
    assert store.apply(ZONE, [Change(Action.UPDATE, old, new, new.key)]).ok
    assert served.eventually(f"app.{ZONE}.", "127.0.0.3", ["198.51.100.99"]) == ["198.51.100.99"]
    assert store.take_reload_notes(ZONE) == [
        "server reload: rndc reloaded zone example.com in view(s) GEO-EU, US, default"]


def test_a_view_bind_does_not_serve_is_reported_and_the_others_reload(tmp_path: Path) -> None:
    with serve(tmp_path, ["GEO-EU", "default"]) as server:  # named.conf without the US view
        desired_repo(server.repo, eu_address="192.0.2.20")
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", "apply", "--repo", str(server.repo),
                               "--all-clusters", *reload_flags(server)],
                              capture_output=True, text=True, timeout=120, check=False)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out  # the store's files are right: not a failed apply
        assert "server reload: rndc reloaded zone example.com in view(s) GEO-EU, default" in out
        assert (f"server reload failed: rndc -c {server.rndc_conf} reload example.com IN US: rndc: 'reload' failed: "
                "not found; no matching view 'US'; the view files are written") in out
        assert server.eventually(f"app.{ZONE}.", "127.0.0.2", ["192.0.2.20"]) == ["192.0.2.20"]
