"""Helpers for end-to-end agent tests: a desired repository as a local bare remote, and
agents started as separate `gitdns agent` processes.

example-repo's DNSPolicies check the health of its gateways, whose addresses are documentation
addresses (RFC 5737, RFC 3849) no test can reach: `DesiredRepo` copies it without those checks,
so that no agent probes beyond loopback.  A test of health behaviour gives its policy a check
and its gateways loopback addresses where it serves that check.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent.parent
GIT_ENV = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
           "GIT_COMMITTER_EMAIL": "dev@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True,
                          text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def drop_health_checks(tree: Path) -> list[Path]:
    """Remove ``spec.healthCheck`` from every DNSPolicy under ``tree`` (comments and layout
    kept); the files changed."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)  # example-repo's layout
    changed = []
    for path in sorted(tree.rglob("*.yaml")):
        docs = list(yaml.load_all(path.read_text()))
        dropped = [doc["spec"].pop("healthCheck") for doc in docs
                   if isinstance(doc, dict) and doc.get("kind") == "DNSPolicy"
                   and isinstance(doc.get("spec"), dict) and "healthCheck" in doc["spec"]]
        if dropped:
            with path.open("w") as fh:
                yaml.dump_all(docs, fh)
            changed.append(path)
    return changed


class WorkTree:
    """A desired repository's work tree on ``main`` and, with ``bare``, the bare remote it pushes
    to (``origin``): write files, commit everything (and push)."""

    def __init__(self, work: Path, bare: Path | None = None) -> None:
        self.work, self.bare = work, bare
        if bare is not None:
            git("init", "-q", "--bare", "-b", "main", str(bare))
        git("init", "-q", "-b", "main", str(work))
        if bare is not None:
            git("remote", "add", "origin", str(bare), cwd=work)

    def write(self, rel: str, text: str) -> None:
        (self.work / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.work / rel).write_text(text)

    def commit(self, message: str) -> str:
        """Commit the whole tree (an empty commit when nothing changed), push it; its sha."""
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "--allow-empty", "-m", message, cwd=self.work)
        if self.bare is not None:
            git("push", "-q", "origin", "main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


class DesiredRepo(WorkTree):
    """A bare remote holding example-repo/ (its policies without health checks, see above) and
    a work tree to change and push it."""

    def __init__(self, root: Path) -> None:
        work = root / "desired"
        shutil.copytree(ROOT / "example-repo", work, ignore=shutil.ignore_patterns(".gitdns"))
        drop_health_checks(work)
        for zone in (work / "zones").glob("*.yaml"):
            zone.write_text(zone.read_text().replace("path: .gitdns/zones", f"path: {root / 'zones'}"))
        super().__init__(work, root / "desired.git")
        self.bare: Path = root / "desired.git"
        self.commit("initial desired state")

    @property
    def zones(self) -> Path:
        return self.bare.parent / "zones"

    def force_push(self, sha: str) -> None:
        git("push", "-q", "--force", "origin", f"{sha}:refs/heads/main", cwd=self.work)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (held together while chosen)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


LOOPBACK = "127.0.0.0/8,::1"  # the test servers' addresses: probes reach them only when the operator allows
ADMIN_PATHS = frozenset({"/status", "/metrics"})  # served on --admin-listen, not beside the webhook


def agent_cmd(repo: DesiredRepo, cluster: str, state: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gitdns.cli", "agent", "--repo", str(repo.bare), "--cluster", cluster,
            "--state-dir", str(state), "--store-dir", str(repo.zones.parent), "--lease", "txt", "--git-timeout", "20",
            "--probe-allow-ranges", LOOPBACK, *extra]


def run_once(repo: DesiredRepo, cluster: str, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*agent_cmd(repo, cluster, state, "--once", "--listen", ""), *extra],
                          capture_output=True, text=True, timeout=120, check=False)


class AgentProcess:
    """A `gitdns agent` process with its two HTTP addresses on loopback: ``port`` (--listen:
    the webhook and the probes) and ``admin_port`` (--admin-listen: /status, /metrics and the
    probes).  ``get`` asks each path of the address that serves it."""

    port: int
    admin_port: int

    def __init__(self, repo: DesiredRepo, cluster: str, state: Path, *extra: str) -> None:
        self.log = state.parent / f"{state.name}.log"
        state.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            agent_cmd(repo, cluster, state, *self.listen_flags(), *extra),
            stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def listen_flags(self) -> list[str]:
        """Picks ``port`` and ``admin_port``; the flags giving them to the agent."""
        self.port, self.admin_port = free_ports(2)
        return ["--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin_port}"]

    def get(self, path: str, port: int | None = None) -> tuple[int, bytes]:
        """GET ``path`` from ``port``, by default the address serving it."""
        if port is None:
            port = self.admin_port if path.split("?", 1)[0] in ADMIN_PATHS else self.port
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except OSError:
            return 0, b""

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body, headers=headers,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def status(self) -> dict[str, object]:
        code, body = self.get("/status")
        return json.loads(body) if code == 200 else {}

    def wait(self, predicate: object, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if callable(predicate) and predicate():
                return True
            if self.proc.poll() is not None:
                raise AssertionError(f"agent exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        return False

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise AssertionError(f"agent ignored SIGTERM: {self.log.read_text()[-4000:]}") from None
        return self.proc.wait(timeout=10)


def agent_once_at(origin: Path, cluster: str, state: Path, store: Path, env: dict[str, str],
                  timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """One ``gitdns agent --once`` of ``cluster`` against ``origin`` on the `local` store in
    ``store`` (TXT lease, no listener), with ``env`` on top of a clean git configuration (e.g.
    pinned commit dates)."""
    state.mkdir(parents=True, exist_ok=True)
    full = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", **env,
            "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "gitdns.cli", "agent", "--repo", str(origin), "--cluster", cluster,
         "--state-dir", str(state), "--store-dir", str(store), "--lease", "txt", "--git-timeout", "20",
         "--once", "--listen", ""], env=full, capture_output=True, text=True, timeout=timeout, check=False)
