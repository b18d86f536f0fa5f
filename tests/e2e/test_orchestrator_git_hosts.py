"""`gitdns orchestrator --once` reading a private desired repository from real git hosts
(tests/e2e/git_servers.py: OpenSSH sshd, nginx + git http-backend over TLS from a private CA),
black-box, with the agent's transport: ``--ssh-key`` + ``--known-hosts`` over SSH, a token file
and a CA bundle over HTTPS given only as ``GITDNS_*`` variables, the ambient git configuration
when no transport is given, and a token in the URL refused without being shown.

Each run probes a real HTTP node on 127.0.0.x and writes the pool's hosts file to a directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.git_fixtures import https_fixture, sshd_fixture  # noqa: F401
from tests.e2e.git_servers import CLIENT_ENV, HttpsServer, SshServer, run
from tests.e2e.orchestrator_kit import NodeServer, start_nodes, write_desired

POOL = "edge-eu"  # not "edge": nothing depends on the name
API = "api.tenant-a.test"


@dataclass
class Done:
    code: int
    output: str
    hosts: Path

    def published(self) -> list[str]:
        if not self.hosts.exists():
            return []
        return [line.split()[0] for line in self.hosts.read_text().splitlines() if line and line[0] != "#"]


@pytest.fixture(scope="module")
def node() -> Iterator[NodeServer]:
    (found,) = start_nodes(1, first=61)
    yield found
    found.stop()


def push_desired(bare: Path, work: Path, node: NodeServer) -> None:
    """The pool and one tenant, pushed to ``bare`` (a private repository of the server)."""
    write_desired(work, POOL, [node], {"tenant-a": [API]}, interval=0.2, timeout=0.2)
    run(["git", "init", "-q", "-b", "main", str(work)], env=CLIENT_ENV)
    run(["git", "add", "-A"], cwd=work, env=CLIENT_ENV)
    run(["git", "commit", "-q", "-m", "desired"], cwd=work, env=CLIENT_ENV)
    run(["git", "push", "-q", "--force", str(bare), "main"], cwd=work, env=CLIENT_ENV)


def once(tmp: Path, *argv: str, env: dict[str, str] | None = None) -> Done:
    """One `gitdns orchestrator --once` delivering to ``tmp/out``; ``env`` replaces every
    GITDNS_* and git variable of this environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITDNS_", "GIT_", "SSH_"))}
    out = tmp / "out"
    done = subprocess.run([sys.executable, "-m", "gitdns.cli", "orchestrator", "--once", *argv,
                           "--probe-allow-ranges", "127.0.0.0/8"],
                          capture_output=True, text=True, timeout=120, check=False, env={**base, **(env or {})})
    return Done(done.returncode, done.stdout + done.stderr, out / "tenant-a.hosts")


def dirs(tmp: Path) -> list[str]:
    return ["--out", str(tmp / "out"), "--state-dir", str(tmp / "state"), "--lease", "none"]


# -- SSH -----------------------------------------------------------------------------------------


def test_ssh_with_a_deploy_key_and_pinned_known_hosts(sshd: SshServer, node: NodeServer, tmp_path: Path) -> None:
    bare = sshd.create_repo("orchestrator-ssh", seed=False)
    push_desired(bare, tmp_path / "work", node)
    done = once(tmp_path, "--repo", sshd.url(bare), "--node-pool", POOL, "--ssh-key", str(sshd.deploy_key),
                "--known-hosts", str(sshd.known_hosts), *dirs(tmp_path))
    assert done.code == 0, done.output
    assert done.published() == [node.ip]
    refused = once(tmp_path / "x", "--repo", sshd.url(bare), "--node-pool", POOL, "--ssh-key", str(sshd.deploy_key),
                   "--known-hosts", str(sshd.wrong_known_hosts), *dirs(tmp_path / "x"))
    assert refused.code != 0 and refused.published() == []


def test_no_transport_flags_use_the_ambient_git_configuration(sshd: SshServer, node: NodeServer,
                                                               tmp_path: Path) -> None:
    bare = sshd.create_repo("orchestrator-ambient", seed=False)
    push_desired(bare, tmp_path / "work", node)
    # the operator's own GIT_SSH_COMMAND (key and known_hosts) is what reaches the server
    done = once(tmp_path, "--repo", sshd.url(bare), "--node-pool", POOL, *dirs(tmp_path), env=sshd.env())
    assert done.code == 0, done.output
    assert done.published() == [node.ip]


# -- HTTPS ---------------------------------------------------------------------------------------


def https_env(https: HttpsServer, bare: Path, tmp: Path, **more: str) -> dict[str, str]:
    token = tmp / "token"
    token.write_text(https.token + "\n")
    token.chmod(0o600)
    return {"GITDNS_REPO": https.url(bare), "GITDNS_NODE_POOL": POOL, "GITDNS_OUT": str(tmp / "out"),
            "GITDNS_STATE_DIR": str(tmp / "state"), "GITDNS_LEASE": "none", "GITDNS_LISTEN": "",
            "GITDNS_TOKEN_FILE": str(token), "GITDNS_CA_FILE": str(https.ca_file), **more}


def test_https_with_a_token_file_and_a_private_ca_from_the_environment(https: HttpsServer, node: NodeServer,
                                                                        tmp_path: Path) -> None:
    bare = https.create_repo("orchestrator-https", seed=False)
    push_desired(bare, tmp_path / "work", node)
    done = once(tmp_path, env=https_env(https, bare, tmp_path))
    assert done.code == 0, done.output
    assert done.published() == [node.ip]
    assert https.token not in done.output


def test_https_without_the_token_is_refused(https: HttpsServer, node: NodeServer, tmp_path: Path) -> None:
    bare = https.create_repo("orchestrator-private", seed=False)
    push_desired(bare, tmp_path / "work", node)
    env = https_env(https, bare, tmp_path)
    del env["GITDNS_TOKEN_FILE"]
    done = once(tmp_path, env=env)
    assert done.code != 0 and done.published() == []
    assert "desired" in done.output  # the desired state was not read, and says so


def test_a_token_in_the_url_is_refused_and_never_shown(https: HttpsServer, tmp_path: Path) -> None:
    secret = "tok-in-url-never-shown"
    url = https.base_url.replace("https://", f"https://{secret}@") + "/any.git"
    done = once(tmp_path, "--repo", url, "--node-pool", POOL, *dirs(tmp_path))
    assert done.code != 0
    assert "--token-file" in done.output and secret not in done.output
