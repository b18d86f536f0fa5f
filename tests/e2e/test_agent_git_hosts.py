"""`gitdns agent --once` against real git hosts (issue 13): OpenSSH sshd and nginx + git
http-backend over TLS from a private CA (tests/e2e/git_servers.py), black-box, with only the
documented flags: ``--ssh-key`` and ``--known-hosts`` for SSH, ``--token-file`` and ``--ca-file``
for HTTPS, the status branch on.

The tests state the desired behaviour: the desired state is fetched and applied, the status
commit lands on the remote's ``gitdns-status/<cluster-id>``, a status push the server refuses
makes ``--once`` exit non-zero, and git's and ssh's diagnosis reaches the operator with its
reason (HostKeyMismatch with the offered fingerprint, TLSVerificationFailed naming --ca-file).
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


def test_ssh_flags_land_the_status_commit(ssh_run: Run) -> None:
    assert_status_landed(ssh_run)


def test_ssh_status_push_declined_by_the_server_fails_once(sshd: SshServer, tmp_path: Path) -> None:
    repo = DesiredRepo(sshd.repos / "agent-ssh-hook")
    decline_pushes(repo.bare, "status pushes are frozen")
    run = once(repo, tmp_path / "state", *ssh_flags(sshd, repo))
    assert applied(repo)  # zone work is done all the same
    assert run.done.returncode != 0, run.output[-3000:]
    assert "status push failed" in run.done.stdout, run.done.stdout  # --once's report names it
    assert "pre-receive hook declined" in run.output
    assert "StatusPublished: PushDeclined" in run.done.stdout, run.done.stdout
    assert "status pushes are frozen" in run.done.stdout  # the hook's own words reach the operator
    assert run.status_tip() is None


def test_ssh_read_only_key_status_push_refused_fails_once(sshd: SshServer, tmp_path: Path) -> None:
    repo = DesiredRepo(sshd.repos / "agent-ssh-ro")
    run = once(repo, tmp_path / "state", *ssh_flags(sshd, repo, key=sshd.readonly_key))
    assert applied(repo)  # the fetch works with a read-only key
    assert run.done.returncode != 0, run.output[-3000:]
    assert "status push failed" in run.done.stdout, run.done.stdout
    assert "read-only deploy key" in run.output  # the server's reason reaches the operator
    assert "StatusPublished: PushDeclined" in run.done.stdout, run.done.stdout
    assert run.status_tip() is None


def test_ssh_wrong_known_hosts_names_the_host_key_mismatch(sshd: SshServer, tmp_path: Path) -> None:
    repo = DesiredRepo(sshd.repos / "agent-ssh-wrong-host")
    run = once(repo, tmp_path / "state", *ssh_flags(sshd, repo, known_hosts=sshd.wrong_known_hosts))
    assert run.done.returncode != 0
    assert not applied(repo)
    fingerprint = subprocess.run(["ssh-keygen", "-lf", f"{sshd.host_key}.pub"], capture_output=True, text=True,
                                 check=True, timeout=30).stdout.split()[1]
    assert "host key" in run.output.lower(), run.output[-3000:]
    assert fingerprint in run.output
    assert "HostKeyMismatch" in run.output


def test_ssh_without_flags_uses_the_ambient_git_ssh_command(sshd: SshServer, tmp_path: Path) -> None:
    """No --ssh-key / --known-hosts: fetch and status push go through the operator's GIT_SSH_COMMAND."""
    repo = DesiredRepo(sshd.repos / "agent-ssh-ambient")
    run = once(repo, tmp_path / "state", "--repo", sshd.url(repo.bare),
               env={"GIT_SSH_COMMAND": ssh_command(sshd.deploy_key, sshd.known_hosts)})
    assert run.done.returncode == 0, run.output[-3000:]
    assert applied(repo)
    assert_status_landed(run)


# -- HTTPS: --token-file and --ca-file ---------------------------------------------------------


def token_file(https: HttpsServer, directory: Path, token: str | None = None) -> Path:
    path = directory / "git-token"
    path.write_text((token or https.token) + "\n")
    path.chmod(0o600)
    return path


def https_flags(https: HttpsServer, repo: DesiredRepo, token: Path, *, ca_file: Path | None = None) -> list[str]:
    return ["--repo", https.url(repo.bare), "--token-file", str(token), "--ca-file", str(ca_file or https.ca_file)]


@pytest.fixture(scope="module")
def https_run(https: HttpsServer, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One --once over HTTPS with --token-file and --ca-file (shared by the module)."""
    repo = DesiredRepo(https.repos / "agent-https")
    state = tmp_path_factory.mktemp("agent-https-state")
    return once(repo, state / "state", *https_flags(https, repo, token_file(https, state)))


def test_https_flags_fetch_and_apply_the_desired_state(https: HttpsServer, https_run: Run) -> None:
    assert https_run.done.returncode == 0, https_run.output[-3000:]
    assert "Ready" in https_run.done.stdout
    assert applied(https_run.repo)
    assert https.token not in https_run.output


def test_https_flags_land_the_status_commit(https_run: Run) -> None:
    assert_status_landed(https_run)


def test_https_status_push_declined_by_the_server_fails_once(https: HttpsServer, tmp_path: Path) -> None:
    repo = DesiredRepo(https.repos / "agent-https-hook")
    decline_pushes(repo.bare, "status pushes are frozen")
    run = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path)))
    assert applied(repo)
    assert run.done.returncode != 0, run.output[-3000:]
    assert "status push failed" in run.done.stdout, run.done.stdout  # --once's report names it
    assert "pre-receive hook declined" in run.output
    assert "StatusPublished: PushDeclined" in run.done.stdout, run.done.stdout
    assert "status pushes are frozen" in run.done.stdout  # the hook's own words reach the operator
    assert run.status_tip() is None


def test_https_wrong_token_is_refused(https: HttpsServer, tmp_path: Path) -> None:
    repo = DesiredRepo(https.repos / "agent-https-wrong")
    run = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path, "not-the-token")))
    assert run.done.returncode != 0
    assert "authentication failed" in run.output.lower(), run.output[-3000:]
    assert "not-the-token" not in run.output
    assert not applied(repo)


def test_https_rotated_token_file_is_read_on_the_next_run(https: HttpsServer, tmp_path: Path) -> None:
    repo = DesiredRepo(https.repos / "agent-https-rotate")
    old = https.token
    https.set_token(https.user, "rotated-token-1")
    try:
        stale = once(repo, tmp_path / "state", *https_flags(https, repo, token_file(https, tmp_path, old)))
        assert stale.done.returncode != 0
        fresh = once(repo, tmp_path / "state",
                     *https_flags(https, repo, token_file(https, tmp_path, "rotated-token-1")))
        assert fresh.done.returncode == 0, fresh.output[-3000:]
        assert applied(repo)
        assert_status_landed(fresh)
        assert "rotated-token-1" not in fresh.output
    finally:
        https.set_token(https.user, old)


@pytest.fixture(scope="module")
def untrusted_run(https: HttpsServer, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One --once over HTTPS whose --ca-file did not sign the server's certificate."""
    repo = DesiredRepo(https.repos / "agent-https-untrusted")
    state = tmp_path_factory.mktemp("agent-https-untrusted")
    return once(repo, state / "state",
                *https_flags(https, repo, token_file(https, state), ca_file=https.other_ca_file))


def test_https_untrusted_ca_is_refused_with_git_s_message(untrusted_run: Run) -> None:
    assert untrusted_run.done.returncode != 0
    assert ("certificate verification failed" in untrusted_run.output
            or "SSL certificate problem" in untrusted_run.output), untrusted_run.output[-3000:]
    assert not applied(untrusted_run.repo)


def test_https_untrusted_ca_has_a_reason_of_its_own(untrusted_run: Run) -> None:
    assert untrusted_run.done.returncode != 0
    assert "(reason: Unreachable)" not in untrusted_run.output, untrusted_run.output[-3000:]
    assert "TLSVerificationFailed" in untrusted_run.output and "--ca-file" in untrusted_run.output


def test_https_git_username_is_the_user_name_sent_with_the_token(https: HttpsServer, tmp_path: Path) -> None:
    """A server that knows the token only for one account (a Gitea user, a GitLab deploy token):
    --git-username names it; the default user name is refused."""
    repo = DesiredRepo(https.repos / "agent-https-username")
    https.set_token("deploy-bot", "bot-token-7")
    try:
        token = token_file(https, tmp_path, "bot-token-7")
        wrong = once(repo, tmp_path / "state", *https_flags(https, repo, token))
        assert wrong.done.returncode != 0 and "AuthenticationFailed" in wrong.output, wrong.output[-3000:]
        right = once(repo, tmp_path / "state", *https_flags(https, repo, token), "--git-username", "deploy-bot")
        assert right.done.returncode == 0, right.output[-3000:]
        assert applied(repo)
        assert_status_landed(right)
        assert "bot-token-7" not in right.output + wrong.output
    finally:
        https.set_token("deploy-bot", None)


def test_ssh_operations_share_one_connection(sshd: SshServer, tmp_path: Path) -> None:
    """Two agent runs back to back (four git operations each: list, fetch, list and push the status
    branch) open one SSH connection between them: the rest are sessions over the shared one."""
    import re

    repo = DesiredRepo(sshd.repos / "agent-ssh-shared")
    key = tmp_path / "deploy_key"  # a key of its own, so no earlier test's connection is reused
    key.write_bytes(sshd.deploy_key.read_bytes())
    key.chmod(0o600)
    before = len(re.findall(r"Connection from ", sshd.log.read_text(errors="replace")))
    first = once(repo, tmp_path / "state", *ssh_flags(sshd, repo, key=key))
    assert first.done.returncode == 0, first.output[-3000:]
    cluster = repo.work / "clusters" / "eu-west-1.yaml"
    cluster.write_text(cluster.read_text().replace("192.0.2.", "203.0.113."))
    repo.commit("a change")
    second = once(repo, tmp_path / "state", *ssh_flags(sshd, repo, key=key))
    assert second.done.returncode == 0, second.output[-3000:]
    assert_status_landed(second)
    opened = len(re.findall(r"Connection from ", sshd.log.read_text(errors="replace"))) - before
    assert opened == 1, f"{opened} SSH connections for two agent runs"
