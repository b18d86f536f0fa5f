"""`gitdns agent --once` against real git hosts (issue 13): OpenSSH sshd and nginx + git
http-backend over TLS (tests/e2e/git_servers.py), black-box, with only the documented flags:
``--ssh-key`` and ``--known-hosts`` for SSH, ``--token-file`` for HTTPS, the status branch on.

The tests state the desired behaviour: the desired state is fetched and applied, the status
commit lands on the remote's ``gitdns-status/<cluster-id>``, and a status push that fails makes
``--once`` exit non-zero.  Those that today's agent does not meet are strict xfails whose reason
is the diagnosis; the fix flips them.  Two controls pass today: the status lands when the
operator sets ``GIT_SSH_COMMAND`` or a ``GIT_ASKPASS`` helper by hand, so the servers and the
status path themselves work.

No flag makes the agent trust a private CA today: the HTTPS runs give the CA in
``GIT_SSL_CAINFO`` (git's own variable, in the agent's environment, never in argv).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitdns.core.records import RecordKey
from gitdns.providers.local import LocalProvider
from tests.e2e.agent_kit import DesiredRepo, agent_cmd
from tests.e2e.git_fixtures import https_fixture, sshd_fixture  # noqa: F401
from tests.e2e.git_servers import HttpsServer, SshServer, decline_pushes, remote_ref, ssh_command

CLUSTER = "eu-west-1"
CLUSTER_ID = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # example-repo/clusters/eu-west-1.yaml
STATUS_REF = f"refs/heads/gitdns-status/{CLUSTER_ID}"

SSH_STATUS_UNAUTHENTICATED = (
    "the status branch's git (gitdns/adapters/statusbranch.py) runs without the agent's GitAuth: "
    "no GIT_SSH_COMMAND from --ssh-key/--known-hosts, so ssh checks the user's own known_hosts: "
    "'status push failed: error=git ls-remote failed: url=ssh://***@127.0.0.1:PORT/... rc=128 "
    "error=Host key verification failed. fatal: Could not read from remote repository.'")
HTTPS_STATUS_UNAUTHENTICATED = (
    "the status branch's git (gitdns/adapters/statusbranch.py) runs without the agent's GitAuth: "
    "no GIT_ASKPASS answering with the --token-file token: 'status push failed: error=git ls-remote failed: "
    "url=https://127.0.0.1:PORT/... rc=128 error=fatal: could not read Username for "
    "'https://127.0.0.1:PORT': terminal prompts disabled'")
PUSH_FAILURE_IGNORED = (
    "a failed status push is only logged (gitdns/agent/reporting.py: WARNING 'status push failed: ...'); "
    "--once still prints Ready and exits 0")


@dataclass
class Run:
    repo: DesiredRepo
    done: subprocess.CompletedProcess[str]

    @property
    def output(self) -> str:
        return self.done.stdout + self.done.stderr

    def status_tip(self) -> str | None:
        return remote_ref(self.repo.bare, STATUS_REF)

    def status_file(self, name: str) -> str:
        return subprocess.run(["git", "--git-dir", str(self.repo.bare), "show", f"{STATUS_REF}:{name}"],
                              capture_output=True, text=True, check=True, timeout=30).stdout


def once(repo: DesiredRepo, state: Path, *flags: str, env: dict[str, str] | None = None) -> Run:
    """One `gitdns agent --once` with the status branch on; ``env`` added to the environment."""
    argv = [*agent_cmd(repo, CLUSTER, state, "--once", "--listen", "", "--status", "true"), *flags]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **(env or {})})
    return Run(repo, done)


def applied(repo: DesiredRepo) -> bool:
    records = LocalProvider(repo.zones).read("example.com").records
    return RecordKey("api.example.com", "CNAME") in {r.key for r in records}


def assert_status_landed(run: Run) -> None:
    assert run.status_tip(), f"no {STATUS_REF} on the remote:\n{run.output[-3000:]}"
    head = subprocess.run(["git", "--git-dir", str(run.repo.bare), "rev-parse", "refs/heads/main"],
                          capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    assert head in run.status_file("summary.yaml")


# -- SSH: --ssh-key and --known-hosts ------------------------------------------------------------


def ssh_flags(sshd: SshServer, repo: DesiredRepo, *, key: Path | None = None,
              known_hosts: Path | None = None) -> list[str]:
    return ["--repo", sshd.url(repo.bare), "--ssh-key", str(key or sshd.deploy_key),
            "--known-hosts", str(known_hosts or sshd.known_hosts)]


@pytest.fixture(scope="module")
def ssh_run(sshd: SshServer, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One --once over SSH with the deploy key and the pinned known_hosts (shared by the module)."""
    repo = DesiredRepo(sshd.repos / "agent-ssh")
    return once(repo, tmp_path_factory.mktemp("agent-ssh-state"), *ssh_flags(sshd, repo))


def test_ssh_flags_fetch_and_apply_the_desired_state(ssh_run: Run) -> None:
    assert ssh_run.done.returncode == 0, ssh_run.output[-3000:]
    assert "Ready" in ssh_run.done.stdout
    assert applied(ssh_run.repo)


@pytest.mark.xfail(strict=True, reason=SSH_STATUS_UNAUTHENTICATED)
def test_ssh_flags_land_the_status_commit(ssh_run: Run) -> None:
    assert_status_landed(ssh_run)


@pytest.mark.xfail(strict=True, reason=f"{PUSH_FAILURE_IGNORED}; here the push fails on the host key "
                                       f"before reaching the hook ({SSH_STATUS_UNAUTHENTICATED})")
def test_ssh_status_push_declined_by_the_server_fails_once(sshd: SshServer, tmp_path: Path) -> None:
    repo = DesiredRepo(sshd.repos / "agent-ssh-hook")
    decline_pushes(repo.bare, "status pushes are frozen")
    run = once(repo, tmp_path / "state", *ssh_flags(sshd, repo))
    assert applied(repo)  # zone work is done all the same
    assert run.done.returncode != 0, run.output[-3000:]
    assert "pre-receive hook declined" in run.output
    assert run.status_tip() is None


@pytest.mark.xfail(strict=True, reason=f"{PUSH_FAILURE_IGNORED}; the read-only key is not even offered "
                                       f"for the push ({SSH_STATUS_UNAUTHENTICATED})")
def test_ssh_read_only_key_status_push_refused_fails_once(sshd: SshServer, tmp_path: Path) -> None:
    repo = DesiredRepo(sshd.repos / "agent-ssh-ro")
    run = once(repo, tmp_path / "state", *ssh_flags(sshd, repo, key=sshd.readonly_key))
    assert applied(repo)  # the fetch works with a read-only key
    assert run.done.returncode != 0, run.output[-3000:]
    assert "read-only deploy key" in run.output  # the server's reason reaches the operator
    assert run.status_tip() is None


@pytest.mark.xfail(strict=True, reason=(
    "ssh's diagnosis is cut to git's last stderr line: 'gitdns: git ls-remote ssh://*****@127.0.0.1:PORT/...: "
    "credentials refused: fatal: Could not read from remote repository. (reason: AuthenticationFailed)'; "
    "neither 'Host key verification failed' nor the offered fingerprint is shown"))
def test_ssh_wrong_known_hosts_names_the_host_key_mismatch(sshd: SshServer, tmp_path: Path) -> None:
    repo = DesiredRepo(sshd.repos / "agent-ssh-wrong-host")
    run = once(repo, tmp_path / "state", *ssh_flags(sshd, repo, known_hosts=sshd.wrong_known_hosts))
    assert run.done.returncode != 0
    assert not applied(repo)
    fingerprint = subprocess.run(["ssh-keygen", "-lf", f"{sshd.host_key}.pub"], capture_output=True, text=True,
                                 check=True, timeout=30).stdout.split()[1]
    assert "host key" in run.output.lower(), run.output[-3000:]
    assert fingerprint in run.output


def test_ssh_status_lands_with_a_hand_set_git_ssh_command(sshd: SshServer, tmp_path: Path) -> None:
    """Control (today's workaround): the same run with GIT_SSH_COMMAND set by the operator."""
    repo = DesiredRepo(sshd.repos / "agent-ssh-ambient")
    run = once(repo, tmp_path / "state", *ssh_flags(sshd, repo),
               env={"GIT_SSH_COMMAND": ssh_command(sshd.deploy_key, sshd.known_hosts)})
    assert run.done.returncode == 0, run.output[-3000:]
    assert_status_landed(run)


# -- HTTPS: --token-file (and the CA in GIT_SSL_CAINFO) ----------------------------------------


def https_flags(https: HttpsServer, repo: DesiredRepo, token_file: Path) -> list[str]:
    return ["--repo", https.url(repo.bare), "--token-file", str(token_file)]


def token_file(https: HttpsServer, directory: Path, token: str | None = None) -> Path:
    path = directory / "git-token"
    path.write_text((token or https.token) + "\n")
    path.chmod(0o600)
    return path


def ca_env(https: HttpsServer) -> dict[str, str]:
    return {"GIT_SSL_CAINFO": str(https.ca_file)}


@pytest.fixture(scope="module")
def https_run(https: HttpsServer, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One --once over HTTPS with --token-file (shared by the module)."""
    repo = DesiredRepo(https.repos / "agent-https")
    state = tmp_path_factory.mktemp("agent-https-state")
    return once(repo, state / "state", *https_flags(https, repo, token_file(https, state)), env=ca_env(https))


def test_https_token_file_fetches_and_applies_the_desired_state(https_run: Run) -> None:
    assert https_run.done.returncode == 0, https_run.output[-3000:]
    assert "Ready" in https_run.done.stdout
    assert applied(https_run.repo)


@pytest.mark.xfail(strict=True, reason=HTTPS_STATUS_UNAUTHENTICATED)
def test_https_token_file_lands_the_status_commit(https_run: Run) -> None:
    assert_status_landed(https_run)


@pytest.mark.xfail(strict=True, reason=(
    "no flag for a private CA: 'gitdns: error: unrecognized arguments: --ca-file ...' (exit 2); today only "
    "git's GIT_SSL_CAINFO in the agent's environment works, and without it the fetch fails with "
    "'server certificate verification failed. CAfile: /etc/ssl/certs/ca-certificates.crt'"))
def test_https_ca_file_flag_trusts_a_private_ca(https: HttpsServer, tmp_path: Path) -> None:
    repo = DesiredRepo(https.repos / "agent-https-ca")
    run = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path)),
               "--ca-file", str(https.ca_file))
    assert run.done.returncode == 0, run.output[-3000:]
    assert_status_landed(run)


@pytest.mark.xfail(strict=True, reason=f"{PUSH_FAILURE_IGNORED}; here the push fails on the missing "
                                       f"credentials before reaching the hook ({HTTPS_STATUS_UNAUTHENTICATED})")
def test_https_status_push_declined_by_the_server_fails_once(https: HttpsServer, tmp_path: Path) -> None:
    repo = DesiredRepo(https.repos / "agent-https-hook")
    decline_pushes(repo.bare, "status pushes are frozen")
    run = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path)), env=ca_env(https))
    assert applied(repo)
    assert run.done.returncode != 0, run.output[-3000:]
    assert "pre-receive hook declined" in run.output
    assert run.status_tip() is None


def test_https_wrong_token_is_refused(https: HttpsServer, tmp_path: Path) -> None:
    repo = DesiredRepo(https.repos / "agent-https-wrong")
    run = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path, "not-the-token")),
               env=ca_env(https))
    assert run.done.returncode != 0
    assert "authentication failed" in run.output.lower(), run.output[-3000:]
    assert "not-the-token" not in run.output
    assert not applied(repo)


def test_https_rotated_token_file_is_read_on_the_next_run(https: HttpsServer, tmp_path: Path) -> None:
    repo = DesiredRepo(https.repos / "agent-https-rotate")
    old = https.token
    https.set_token(https.user, "rotated-token-1")
    try:
        stale = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path, old)),
                     env=ca_env(https))
        assert stale.done.returncode != 0
        fresh = once(repo, tmp_path / "state",
                     *https_flags(https, repo, token_file(https, tmp_path, "rotated-token-1")), env=ca_env(https))
        assert fresh.done.returncode == 0, fresh.output[-3000:]
        assert applied(repo)
        assert "rotated-token-1" not in fresh.output
    finally:
        https.set_token(https.user, old)


def test_https_status_lands_with_a_hand_set_askpass(https: HttpsServer, tmp_path: Path) -> None:
    """Control (today's workaround): the same run with a GIT_ASKPASS helper set by the operator."""
    repo = DesiredRepo(https.repos / "agent-https-ambient")
    run = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path)),
               env={**https.env(workdir=tmp_path), **ca_env(https)})
    assert run.done.returncode == 0, run.output[-3000:]
    assert_status_landed(run)
