"""docs/getting-started.md, followed as a reader follows it, against a real BIND.

The page's fenced blocks run in its order in a temporary directory, in one shell session (the
working directory and exported variables carry from one block to the next), with ``gitdns`` on
PATH running this tree's `gitdns.cli`:

- a ```` ```bash ```` block runs under ``set -euo pipefail``;
- a block below ``<!-- file: PATH -->`` is written to PATH (relative to the session's
  directory at that point) — every YAML block must be one, so no document shown goes unchecked;
- a block below ``<!-- output -->`` is what the bash block above it prints last (its final
  lines, exactly); when that block ends with ``dig``, the ``dig`` is asked again for up to 5 s
  (BIND loads a reloaded zone in the background);
- a block below ``<!-- needs: coredns -->`` runs only where ``coredns`` is installed (CoreDNS is
  not on the test machines: the page's Corefile is compared instead with the snippet gitdns
  renders, block by block);
- a block below ``<!-- not run: REASON -->`` is not run (the reason says what checks it instead).

The page's ports (named 5300, its control channel 9530, CoreDNS 5301) are replaced by free ones.
named is started by the page itself (``named -c bind/named.conf``) and stopped by its last block;
the test kills it by its pid file if a block fails first.  Without named, rndc, rndc-confgen,
named-checkconf or dig the test skips, except under ``CI=true`` where it fails.

The README's "First hour" commands are held to the page: its install is the page's, its first
command's gitdns part runs, and its second is what .ci/run runs.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitdns.core.corefile.check import lex
from gitdns.core.zonecorefile import parse_view_clients
from tests.e2e.conftest import require_tool
from tests.e2e.dns_servers import free_port

pytestmark = pytest.mark.bind

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"
README = ROOT / "README.md"
PORTS = ("5300", "9530", "5301")  # named, its control channel, CoreDNS
TOOLS = ("named", "rndc", "rndc-confgen", "named-checkconf", "dig")
MARKER = re.compile(r"<!--\s*(file|output|needs|not run)(?::\s*(.*?))?\s*-->\Z")
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
                "GIT_COMMITTER_EMAIL": "dev@example.com"}
SHIM = '#!{python}\nimport sys\nsys.path.insert(0, {root!r})\nfrom gitdns.cli import main\nsys.exit(main())\n'


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # of the opening fence
    kind: str = ""  # file | output | needs | not run | "" (none)
    arg: str = ""

    def where(self) -> str:
        return f"docs/getting-started.md:{self.line}"


def blocks(page: Path = PAGE) -> list[Block]:
    """The page's fenced blocks with the marker on the line above each (if any)."""
    lines = page.read_text(encoding="utf-8").split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        above = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(above)
        kind, arg = (marker.group(1), marker.group(2) or "") if marker else ("", "")
        out.append(Block(fence.group(1), "\n".join(body) + "\n", start + 1, kind, arg))
        i += 1
    return out


def test_every_block_is_run_checked_or_said_why_not() -> None:
    found = blocks()
    assert found, "no blocks found"
    for block in found:
        if block.lang == "yaml":
            assert block.kind == "file", f"{block.where()}: a YAML block must be a file the test writes"
        if block.kind == "needs":
            assert block.arg == "coredns", f"{block.where()}: needs only coredns"
        if block.kind == "not run":
            assert block.arg, f"{block.where()}: a block not run says why"
        if block.kind in ("needs", "not run"):
            assert block.lang == "bash", f"{block.where()}: only bash blocks are run"
    for before, block in itertools.pairwise(found):
        if block.kind == "output":
            assert before.lang == "bash" and before.kind in ("", "needs"), \
                f"{block.where()}: an output block follows a block that runs"


# --- the session ---------------------------------------------------------------------------------------------


class Session:
    """One shell session in ``root``: the working directory and exported variables are kept in
    ``state/`` between blocks."""

    def __init__(self, root: Path, ports: dict[str, str]) -> None:
        self.root, self.ports = root, ports
        self.state = root / "state"
        self.state.mkdir()
        bindir = root / "bin"
        bindir.mkdir()
        shim = bindir / "gitdns"
        shim.write_text(SHIM.format(python=sys.executable, root=str(ROOT)))
        shim.chmod(0o755)
        home = root / "home"
        home.mkdir()
        work = root / "work"
        work.mkdir()
        keep = {k: v for k, v in os.environ.items()
                if k in ("LANG", "TMPDIR", "CI") or k.startswith(("AWS_", "GCE_", "NO_GCE", "CLOUDSDK_", "AZURE_"))}
        self.env = {**keep, **GIT_IDENTITY, "HOME": str(home), "LC_ALL": "C.UTF-8",
                    "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONDONTWRITEBYTECODE": "1",
                    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
        (self.state / "cwd").write_text(str(work))
        (self.state / "env").write_text("")

    def real(self, text: str) -> str:
        for page, port in self.ports.items():
            text = re.sub(rf"(?<!\d){page}(?!\d)", port, text)
        return text

    @property
    def cwd(self) -> Path:
        return Path((self.state / "cwd").read_text().strip("\n"))

    def write(self, block: Block) -> None:
        path = self.cwd / block.arg
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.real(block.text))

    def run(self, script: str) -> subprocess.CompletedProcess[str]:
        wrapped = (f'set -euo pipefail\ncd "$(cat {self.state}/cwd)"\n. {self.state}/env\n{script}\n'
                   f"pwd > {self.state}/cwd\nexport -p > {self.state}/env\n")
        return subprocess.run(["bash", "-c", wrapped], env=self.env, capture_output=True, text=True, timeout=300,
                              check=False)

    def stop_servers(self) -> None:
        """named and CoreDNS the page started, when a block failed before the page stopped them."""
        for pid_file in self.root.glob("work/**/bind/*.pid"):
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
            except (ValueError, OSError):
                continue


def report(block: Block, done: subprocess.CompletedProcess[str], session: Session) -> str:
    logs = "".join(f"\n--- {log.name}:\n{log.read_text()[-3000:]}" for log in session.root.glob("work/**/bind/*.log"))
    return (f"{block.where()}: exit {done.returncode}\n--- block:\n{session.real(block.text)}--- stdout:\n"
            f"{done.stdout}--- stderr:\n{done.stderr}{logs}")


def last_lines(text: str, count: int) -> list[str]:
    return [line.rstrip() for line in text.rstrip("\n").split("\n")][-count:] if text.strip() else []


def check_output(session: Session, ran: Block, done: subprocess.CompletedProcess[str], shown: Block) -> None:
    expected = [line.rstrip() for line in shown.text.rstrip("\n").split("\n")]
    got = last_lines(done.stdout, len(expected))
    last = [line for line in ran.text.strip().split("\n") if line.strip()][-1]
    deadline = time.monotonic() + 5
    while got != expected and last.startswith("dig ") and time.monotonic() < deadline:
        time.sleep(0.1)
        again = session.run(session.real(last))
        got = last_lines(again.stdout, len(expected))
    assert got == expected, (f"{shown.where()}: the page shows\n" + "\n".join(expected) + "\nbut the block printed\n"
                             + "\n".join(got) + "\n" + report(ran, done, session))


@dataclass
class Followed:
    dns: Path  # the repository the page made
    skipped: list[str]


@pytest.fixture(scope="module")
def followed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Followed]:
    """The page, followed from its first block to its last."""
    for tool in TOOLS:
        require_tool(tool)
    root = tmp_path_factory.mktemp("getting-started")
    session = Session(root, {page: str(free_port()) for page in PORTS})
    has_coredns = shutil.which("coredns") is not None
    skipped: list[str] = []
    found = blocks()
    last: tuple[Block, subprocess.CompletedProcess[str]] | None = None
    try:
        for block in found:
            if block.kind == "file":
                session.write(block)
            elif block.kind == "output":
                if last is not None:
                    check_output(session, *last, block)
                last = None
            elif block.lang != "bash" or block.kind == "not run":
                last = None
            elif block.kind == "needs" and not has_coredns:
                skipped.append(f"{block.where()}: coredns is not installed")
                last = None
            else:
                done = session.run(session.real(block.text))
                assert done.returncode == 0, report(block, done, session)
                last = (block, done)
        yield Followed(root / "work" / "dns", skipped)
    finally:
        session.stop_servers()


def test_the_page_runs_as_written(followed: Followed) -> None:
    assert (followed.dns / ".gitdns/zones/example.com.json").is_file()
    pid_file = followed.dns / "bind/named.pid"
    deadline = time.monotonic() + 30  # `rndc stop` returns before named has exited: wait for it, loaded or not
    while pid_file.exists() and _alive(pid_file) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_file.exists() or not _alive(pid_file), "the page's last block stops named"


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text().split()[0]), 0)
    except (ValueError, OSError):
        return False
    return True


def _page_file(name: str) -> str:
    return next(b.text for b in blocks() if b.kind == "file" and b.arg == name)


def test_named_conf_serves_every_view_gitdns_writes_to_the_zones_view_clients(followed: Followed) -> None:
    """The views of named.conf are the view files the store wrote, named as them (rndc reloads
    ZONE IN VIEW by that name), and their ACLs are the Zone's viewClients networks."""
    conf = _page_file("bind/named.conf")
    acls = dict(re.findall(r'acl "([^"]+)" \{ ([^;]+); \};', conf))
    views = re.findall(r'view "([^"]+)" \{\n    match-clients \{ ([^;]+); \};\n'
                       r'    zone "example\.com" \{ type primary; '
                       r'file "\.gitdns/zones/example\.com\.views/([^"]+)\.zone"; \};', conf)
    files = sorted(p.stem for p in (followed.dns / ".gitdns/zones/example.com.views").glob("*.zone"))
    assert sorted(v for v, _, _ in views) == files == ["GEO-EU", "US", "default"]
    assert all(view == stem for view, _, stem in views)
    assert views[-1][:2] == ("default", "any")  # the default view last, for everyone else
    zone_doc = _page_file("zones/example-com.yaml")
    clients = parse_view_clients(re.search(r'viewClients: "([^"]+)"', zone_doc).group(1))  # type: ignore[union-attr]
    assert {c.view: list(c.cidrs) for c in clients} == {
        view: [acls[match.strip('"')]] for view, match, _ in views if view != "default"}


def test_the_corefile_is_the_snippet_gitdns_renders_on_the_pages_port(followed: Followed) -> None:
    """CoreDNS is not on the test machines: the page's Corefile must be, token for token, the
    snippet gitdns wrote beside the views, with the page's port, relative paths and reload."""
    views = followed.dns / ".gitdns/zones/example.com.views"
    snippet = (views / "example.com.server").read_text()
    directory = re.search(r"file (\S+)/default\.zone", snippet).group(1)  # type: ignore[union-attr]
    rendered = [token.replace(directory, ".gitdns/zones/example.com.views")
                .replace("example.com:53", "example.com:5301").replace("30s", "10s") for token, _ in lex(snippet)]
    assert [token for token, _ in lex(_page_file("Corefile"))] == rendered
    for path in re.findall(r"(?:file|weighted) (\S+)", _page_file("Corefile")):
        assert (followed.dns / path).is_file(), path


def test_the_readme_installs_as_the_page_does_and_its_commands_run(tmp_path: Path) -> None:
    readme = README.read_text(encoding="utf-8")
    first_hour = readme.split("## First hour", 1)[1].split("\n## ", 1)[0]
    commands = [line for line in re.search(r"```bash\n(.*?)```", first_hour, re.DOTALL).group(1).split("\n")  # type: ignore[union-attr]
                if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands
    install = next(b for b in blocks() if b.kind == "not run" and "pip install" in b.text).text.split("\n")[0]
    assert commands[0].startswith(install + " && "), (commands[0], install)
    assert commands[1] == "bash scripts/install-test-deps.sh && python3 -m pytest -q"  # what .ci/run runs
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/install-test-deps.sh" in ci and "exec python3 -m pytest -q" in ci
    shutil.copytree(ROOT / "example-repo", tmp_path / "example-repo")
    rest = commands[0][len(install + " && "):]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "gitdns"
    shim.write_text(SHIM.format(python=sys.executable, root=str(ROOT)))
    shim.chmod(0o755)
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{rest}\n"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "example.com" in done.stdout
    assert (tmp_path / "example-repo/.gitdns/zones/example.com.views/GEO-EU.zone").is_file()
