"""A token in a remote URL is refused with a clear error, and never reaches git's command line.

The attack (issue "Hostile input"): ``--repo https://TOKEN@host/...`` was accepted; the token
then showed in ``ps`` for the agent's git and for ``git-remote-http``.  Now any user name on an
http(s) URL is refused (the user name goes through ``--git-username``, the token through
``--token-file``/``--token-env``); ssh:// and scp-like ``git@host:path`` keep their user.

Every verb that takes a remote runs here as its own process with a ``git`` on ``PATH`` that
logs its arguments before running the real one, against a loopback server standing for the
git host: the command fails naming the remedy, the token is in no message, no git process got
it as an argument and the server saw no connection.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.adapters.git.auth import GitAuth, check_url
from gitdns.commands import Result
from gitdns.commands.groups.health import status_trees
from gitdns.errors import ConfigError
from tests.providers.capture_server import CaptureServer

TOKEN = "glpat-SECRET-token-0123456789"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("url", [
    f"https://{TOKEN}@git.example.test/platform/dns.git",
    f"http://{TOKEN}@127.0.0.1:8080/dns.git",
    f"https://oauth2:{TOKEN}@git.example.test/dns.git",
    f"HTTPS://{TOKEN}@git.example.test/dns.git",
    "https://deploy-user@git.example.test/dns.git",
    f"ssh://git:{TOKEN}@git.example.test/dns.git",
])
def test_credentials_in_a_url_are_refused_without_quoting_them(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_url(url)
    message = str(info.value)
    assert TOKEN not in message and "deploy-user" not in message
    assert "--token-file" in message and "--git-username" in message


@pytest.mark.parametrize("url", ["ssh://git@git.example.test/dns.git", "git@git.example.test:platform/dns.git",
                                 "https://git.example.test/platform/dns.git", "file:///srv/git/dns.git",
                                 "/srv/git/dns.git"])
def test_user_names_that_are_no_secret_stay_allowed(url: str) -> None:
    check_url(url)


# --- every verb, as its own process ---------------------------------------------------------------------------


@pytest.fixture
def git_host() -> Iterator[CaptureServer]:
    with CaptureServer() as srv:
        yield srv


@pytest.fixture
def logged_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``git`` logs its argv to the returned file, then runs git."""
    real = shutil.which("git")
    assert real, "git is needed"
    bindir, log = tmp_path / "bin", tmp_path / "git-argv.log"
    bindir.mkdir()
    wrapper = bindir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    log.write_text("")
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    return env, log


def gitdns(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitdns.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def assert_refused_and_unseen(done: subprocess.CompletedProcess[str], log: Path, host: CaptureServer) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "carries a user name or token" in out and "--git-username" in out
    assert TOKEN not in out
    assert TOKEN not in log.read_text()  # no git ran with it in its arguments
    assert host.connections == 0  # no git-remote-http either


def test_the_cli_verbs_refuse_a_token_in_repo(git_host: CaptureServer, logged_git: tuple[dict[str, str], Path],
                                             tmp_path: Path) -> None:
    env, log = logged_git
    url = f"http://{TOKEN}@127.0.0.1:{git_host.port}/dns.git"
    for args in (["status", "--repo", url, "--state-dir", str(tmp_path / "s")],
                 ["history", "www.example.com", "--repo", url, "--state-dir", str(tmp_path / "h")]):
        assert_refused_and_unseen(gitdns(env, *args), log, git_host)


def test_the_agent_refuses_a_token_in_repo(git_host: CaptureServer, logged_git: tuple[dict[str, str], Path],
                                           tmp_path: Path) -> None:
    env, log = logged_git
    url = f"http://{TOKEN}@127.0.0.1:{git_host.port}/dns.git"
    done = gitdns(env, "agent", "--repo", url, "--cluster", "eu-west-1", "--once", "--listen", "",
                  "--state-dir", str(tmp_path / "state"))
    assert_refused_and_unseen(done, log, git_host)
    env_only = {**env, "GITDNS_REPO": url}  # the same through the environment
    done = gitdns(env_only, "agent", "--cluster", "eu-west-1", "--once", "--listen", "",
                  "--state-dir", str(tmp_path / "state"))
    assert_refused_and_unseen(done, log, git_host)


def test_the_agent_refuses_a_token_in_status_repo(git_host: CaptureServer, logged_git: tuple[dict[str, str], Path],
                                                  tmp_path: Path) -> None:
    from tests.e2e.agent_kit import DesiredRepo

    env, log = logged_git
    repo = DesiredRepo(tmp_path / "git")
    url = f"http://{TOKEN}@127.0.0.1:{git_host.port}/status.git"
    done = gitdns(env, "agent", "--repo", str(repo.bare), "--status-repo", url, "--cluster", "eu-west-1", "--once",
                  "--listen", "", "--lease", "none", "--state-dir", str(tmp_path / "state"))
    assert_refused_and_unseen(done, log, git_host)


def test_the_orchestrator_refuses_a_token_in_repo(git_host: CaptureServer, logged_git: tuple[dict[str, str], Path],
                                                  tmp_path: Path) -> None:
    env, log = logged_git
    url = f"http://{TOKEN}@127.0.0.1:{git_host.port}/dns.git"
    done = gitdns(env, "orchestrator", "--repo", url, "--node-pool", "edge", "--out", str(tmp_path / "out"),
                  "--once", "--listen", "", "--lease", "none", "--state-dir", str(tmp_path / "state"))
    assert_refused_and_unseen(done, log, git_host)


def test_groups_never_read_status_branches_through_a_token_url(git_host: CaptureServer) -> None:
    result = Result()
    url = f"http://{TOKEN}@127.0.0.1:{git_host.port}/dns.git"  # a checkout's origin, cloned with a token
    assert status_trees(url, GitAuth(), result) is None
    assert "carries a user name or token" in "\n".join(result.err) and TOKEN not in "\n".join(result.err)
    assert git_host.connections == 0
