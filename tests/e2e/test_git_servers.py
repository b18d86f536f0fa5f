"""The real git servers of tests/e2e/git_servers.py, checked with a plain git client as an
operator would use it: clone and push over SSH (deploy key, pinned known_hosts through
``GIT_SSH_COMMAND``) and over HTTPS (the private CA through ``GIT_SSL_CAINFO``, credentials
from a ``GIT_ASKPASS`` helper, never in argv), and each refusal the transport tests rely on,
with the message git and ssh give for it.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e import git_servers
from tests.e2e.git_fixtures import https_fixture, sshd_fixture, start_or_skip  # noqa: F401
from tests.e2e.git_servers import HttpsServer, SshServer, decline_pushes, remote_ref


def git(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60, check=False)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}: {done.stdout}{done.stderr}"
    return done.stdout


def refused(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode != 0, f"{done.args} succeeded: {done.stdout}{done.stderr}"
    for needle in needles:
        assert needle in done.stderr, done.stderr
    return done.stderr


def commit_on(env: dict[str, str], clone: Path, text: str) -> str:
    (clone / "change.txt").write_text(text)
    ok(git(env, "add", "change.txt", cwd=clone))
    ok(git(env, "commit", "-q", "-m", text, cwd=clone))
    return ok(git(env, "rev-parse", "HEAD", cwd=clone)).strip()


def closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


# -- SSH ---------------------------------------------------------------------------------------


def test_ssh_clone_and_push_with_the_deploy_key(sshd: SshServer, tmp_path: Path) -> None:
    bare = sshd.create_repo("ssh-rw")
    env = sshd.env()
    ok(git(env, "clone", "-q", sshd.url(bare), str(tmp_path / "c")))
    sha = commit_on(env, tmp_path / "c", "one")
    ok(git(env, "push", "-q", "origin", "main", cwd=tmp_path / "c"))
    assert remote_ref(bare, "refs/heads/main") == sha
    ok(git(env, "push", "-q", "origin", f"{sha}:refs/heads/gitdns-status/c1", cwd=tmp_path / "c"))
    assert remote_ref(bare, "refs/heads/gitdns-status/c1") == sha


def test_ssh_read_only_key_fetches_but_is_refused_on_push(sshd: SshServer, tmp_path: Path) -> None:
    bare = sshd.create_repo("ssh-ro")
    before = remote_ref(bare, "refs/heads/main")
    env = sshd.env(key=sshd.readonly_key)
    ok(git(env, "clone", "-q", sshd.url(bare), str(tmp_path / "c")))
    commit_on(env, tmp_path / "c", "denied")
    refused(git(env, "push", "origin", "main", cwd=tmp_path / "c"),
            "read-only deploy key", "git-receive-pack", "Could not read from remote repository")
    assert remote_ref(bare, "refs/heads/main") == before


def test_ssh_wrong_known_hosts_fails_host_key_verification(sshd: SshServer, tmp_path: Path) -> None:
    bare = sshd.create_repo("ssh-wrong-host")
    err = refused(git(sshd.env(known_hosts=sshd.wrong_known_hosts), "clone", sshd.url(bare), str(tmp_path / "c")),
                  "REMOTE HOST IDENTIFICATION HAS CHANGED!", "Host key verification failed.")
    assert "SHA256:" in err  # ssh names the fingerprint it was offered
    refused(git(sshd.env(known_hosts=sshd.empty_known_hosts), "ls-remote", sshd.url(bare)),
            "No ED25519 host key is known for [127.0.0.1]", "Host key verification failed.")


def test_ssh_unknown_key_is_refused(sshd: SshServer, tmp_path: Path) -> None:
    stranger = git_servers.keygen(tmp_path / "stranger", "stranger")
    refused(git(sshd.env(key=stranger), "ls-remote", sshd.url(sshd.create_repo("ssh-stranger"))),
            "Permission denied (publickey)")


def test_ssh_key_added_later_works_from_the_next_connection(sshd: SshServer) -> None:
    key = sshd.add_key("late-key")
    bare = sshd.create_repo("ssh-late")
    assert remote_ref(bare, "refs/heads/main") in ok(git(sshd.env(key=key), "ls-remote", sshd.url(bare)))


def test_ssh_pre_receive_hook_declines_a_push(sshd: SshServer, tmp_path: Path) -> None:
    bare = sshd.create_repo("ssh-hook")
    env = sshd.env()
    ok(git(env, "clone", "-q", sshd.url(bare), str(tmp_path / "c")))
    decline_pushes(bare, "frozen: change window closed")
    before = remote_ref(bare, "refs/heads/main")
    commit_on(env, tmp_path / "c", "blocked")
    refused(git(env, "push", "origin", "main", cwd=tmp_path / "c"),
            "frozen: change window closed", "pre-receive hook declined")
    assert remote_ref(bare, "refs/heads/main") == before
    git_servers.accept_pushes(bare)
    ok(git(env, "push", "-q", "origin", "main", cwd=tmp_path / "c"))


# -- HTTPS -------------------------------------------------------------------------------------


def test_https_clone_and_push_with_the_token_and_the_ca(https: HttpsServer, tmp_path: Path) -> None:
    bare = https.create_repo("https-rw")
    env = https.env(workdir=tmp_path)
    ok(git(env, "clone", "-q", https.url(bare), str(tmp_path / "c")))
    sha = commit_on(env, tmp_path / "c", "one")
    ok(git(env, "push", "-q", "origin", "main", cwd=tmp_path / "c"))
    assert remote_ref(bare, "refs/heads/main") == sha
    ok(git(env, "push", "-q", "origin", f"{sha}:refs/heads/gitdns-status/c1", cwd=tmp_path / "c"))
    assert remote_ref(bare, "refs/heads/gitdns-status/c1") == sha
    entries = [e for e in https.access_entries() if e.path.startswith("/https-rw.git/")]
    assert any(e.method == "POST" and e.path.endswith("/git-receive-pack") and e.status == 200
               and e.user == https.user for e in entries)
    assert all(e.request_bytes > 0 and e.response_bytes > 0 for e in entries)


def test_https_wrong_or_missing_credentials_are_refused(https: HttpsServer, tmp_path: Path) -> None:
    url = https.url(https.create_repo("https-auth"))
    refused(git(https.env(token="not-the-token", workdir=tmp_path), "ls-remote", url),
            "Authentication failed for")
    no_credentials = {k: v for k, v in https.env(workdir=tmp_path).items()
                      if k not in (git_servers.USER_VAR, git_servers.TOKEN_VAR, "GIT_ASKPASS")}
    refused(git(no_credentials, "ls-remote", url), "could not read Username")


def test_https_untrusted_ca_fails_tls_verification(https: HttpsServer, tmp_path: Path) -> None:
    url = https.url(https.create_repo("https-tls"))
    err = refused(git(https.env(ca_file=https.other_ca_file, workdir=tmp_path), "ls-remote", url))
    # git's curl with GnuTLS (Debian) or OpenSSL
    assert "server certificate verification failed" in err or "SSL certificate problem" in err, err


def test_https_rotated_token_works_and_the_old_one_is_refused(https: HttpsServer, tmp_path: Path) -> None:
    url = https.url(https.create_repo("https-rotate"))
    https.set_token("rotating", "first-token")
    try:
        ok(git(https.env(user="rotating", token="first-token", workdir=tmp_path), "ls-remote", url))
        https.set_token("rotating", "second-token")
        refused(git(https.env(user="rotating", token="first-token", workdir=tmp_path), "ls-remote", url),
                "Authentication failed for")
        ok(git(https.env(user="rotating", token="second-token", workdir=tmp_path), "ls-remote", url))
    finally:
        https.set_token("rotating", None)


def test_https_pre_receive_hook_declines_a_push(https: HttpsServer, tmp_path: Path) -> None:
    bare = https.create_repo("https-hook")
    env = https.env(workdir=tmp_path)
    ok(git(env, "clone", "-q", https.url(bare), str(tmp_path / "c")))
    decline_pushes(bare, "frozen: change window closed")
    before = remote_ref(bare, "refs/heads/main")
    commit_on(env, tmp_path / "c", "blocked")
    refused(git(env, "push", "origin", "main", cwd=tmp_path / "c"),
            "frozen: change window closed", "pre-receive hook declined")
    assert remote_ref(bare, "refs/heads/main") == before


# -- lifecycle ---------------------------------------------------------------------------------


@pytest.mark.parametrize("start", [git_servers.start_sshd, git_servers.start_https], ids=["sshd", "https"])
def test_a_server_is_a_child_on_loopback_and_stops_by_pid(
        start: Callable[[Path], SshServer | HttpsServer], tmp_path: Path) -> None:
    server = start_or_skip(start, tmp_path / "server")
    try:
        assert not closed(server.port)
        listening = subprocess.run(["ss", "-Htlnp", f"sport = :{server.port}"], capture_output=True, text=True,
                                   check=False).stdout
        assert listening == "" or "127.0.0.1:" in listening  # never a wildcard address
        assert os.getpgid(server.pid) == server.pid
    finally:
        server.stop()
    assert closed(server.port)
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)
