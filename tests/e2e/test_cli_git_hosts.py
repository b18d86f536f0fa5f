"""The one-shot verbs that talk to a git remote — `groups set --push` (and its health check on
the status branches), `history`, `status` — against real git hosts: OpenSSH sshd and nginx +
git http-backend over TLS from a private CA (tests/e2e/git_servers.py).  Black-box: `gitdns`
runs as its own process with only the documented flags (``--ssh-key`` and ``--known-hosts``;
``--token-file``, ``--token-env`` and ``--ca-file``) or their ``GITDNS_*`` variables.

What is checked: the branch lands on the bare repository the server serves, history and status
read the remote, a wrong known_hosts, token or CA gives its own reason (HostKeyMismatch with the
fingerprint the server offered, AuthenticationFailed, TLSVerificationFailed), and the token is
never in gitdns's output, in the argv of any git it runs, in the work tree's git config or in
the state directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitdns.core.status.doc import dump
from tests.commands.test_failover import SITES, publish_current, write_repo
from tests.commands.test_status import publish, report
from tests.e2e.agent_kit import ROOT, DesiredRepo
from tests.e2e.git_fixtures import https_fixture, sshd_fixture  # noqa: F401
from tests.e2e.git_servers import CLIENT_ENV, HttpsServer, SshServer, remote_ref, ssh_command

CLUSTER_ID = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # example-repo/clusters/eu-west-1.yaml
BRANCH = "gitdns/groups-example-com-2"  # `groups set example.com site-b`: serial 1 -> 2
TRANSPORT_VARS = ("GITDNS_SSH_KEY", "GITDNS_KNOWN_HOSTS", "GITDNS_TOKEN_FILE", "GITDNS_TOKEN_ENV", "GITDNS_CA_FILE")
GIT_RECORDER = """#!/bin/sh
# test: records the argv of every git gitdns runs, then runs the real git
printf '%s\\n' "$*" >> "$GIT_ARGV_LOG"
exec {git} "$@"
"""


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **CLIENT_ENV}, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@dataclass
class Run:
    done: subprocess.CompletedProcess[str]
    argv_log: Path

    @property
    def output(self) -> str:
        return self.done.stdout + self.done.stderr

    @property
    def git_argvs(self) -> str:
        return self.argv_log.read_text() if self.argv_log.exists() else ""


Gitdns = Callable[..., Run]  # gitdns(*argv, env=None) -> Run


@pytest.fixture
def gitdns(tmp_path: Path) -> Gitdns:
    """Run ``gitdns ARGS`` as a process; every git it starts is recorded (its argv) on the way."""
    shim = tmp_path / "git-shim"
    shim.mkdir()
    recorder = shim / "git"
    real = shutil.which("git")
    assert real, "git is not on PATH"
    recorder.write_text(GIT_RECORDER.format(git=shlex.quote(real)))
    recorder.chmod(0o755)
    argv_log = tmp_path / "git-argv.log"

    def run(*argv: str, env: Mapping[str, str] | None = None) -> Run:
        base = {k: v for k, v in os.environ.items() if k not in TRANSPORT_VARS and k != "GIT_SSH_COMMAND"}
        full = {**base, **CLIENT_ENV, "PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}",
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
                "GIT_ARGV_LOG": str(argv_log), **(env or {})}
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *argv], capture_output=True, text=True,
                              timeout=180, check=False, env=full, cwd=tmp_path)
        return Run(done, argv_log)

    return run


def host_key_fingerprint(sshd: SshServer) -> str:
    return subprocess.run(["ssh-keygen", "-lf", f"{sshd.host_key}.pub"], capture_output=True, text=True,
                          check=True, timeout=30).stdout.split()[1]


def token_file(directory: Path, token: str) -> Path:
    path = directory / "git-token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def assert_no_secret(token: str, run: Run, *places: Path) -> None:
    """``token`` is nowhere: not in gitdns's output, any git argv, or any file below ``places``."""
    assert token not in run.output
    assert run.git_argvs, "no git ran through the recorder"
    assert token not in run.git_argvs
    for place in places:
        for path in [place] if place.is_file() else place.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert token.encode() not in path.read_bytes(), f"the token is in {path}"


def ssh_flags(sshd: SshServer, *, known_hosts: Path | None = None) -> list[str]:
    return ["--ssh-key", str(sshd.deploy_key), "--known-hosts", str(known_hosts or sshd.known_hosts)]


def https_flags(https: HttpsServer, token: Path, *, ca_file: Path | None = None) -> list[str]:
    return ["--token-file", str(token), "--ca-file", str(ca_file or https.ca_file)]


# -- groups: a work tree whose origin is on the server ----------------------------------------------


@dataclass
class GroupsRepo:
    work: Path  # the work tree `gitdns groups` runs in
    bare: Path  # origin, as the server holds it

    def pushed(self, branch: str = BRANCH) -> str | None:
        return remote_ref(self.bare, f"refs/heads/{branch}")

    def local(self, branch: str = BRANCH) -> str:
        return git("rev-parse", f"refs/heads/{branch}", cwd=self.work)


def has_branch(work: Path, branch: str) -> bool:
    done = subprocess.run(["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"], cwd=work,
                          capture_output=True, text=True, timeout=30, check=False)
    return done.returncode == 0


def groups_repo(bare: Path, url: str, work: Path) -> GroupsRepo:
    """The site A / site B story (tests/commands/test_failover.py) on main, pushed to ``bare``;
    origin is ``url``, the server's address of ``bare``."""
    git("init", "-q", "--bare", "-b", "main", str(bare))
    work.mkdir(parents=True)
    write_repo(work)
    (work / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "desired state", cwd=work)
    git("push", "-q", str(bare), "main", cwd=work)
    git("remote", "add", "origin", url, cwd=work)
    publish_current(work)
    return GroupsRepo(work, bare)


def ssh_groups(sshd: SshServer, tmp_path: Path, name: str) -> GroupsRepo:
    bare = sshd.repos / name / "origin.git"
    return groups_repo(bare, sshd.url(bare), tmp_path / "work")


def https_groups(https: HttpsServer, tmp_path: Path, name: str) -> GroupsRepo:
    bare = https.repos / name / "origin.git"
    return groups_repo(bare, https.url(bare), tmp_path / "work")


def set_site_b(gitdns: Gitdns, repo: GroupsRepo, *flags: str, env: Mapping[str, str] | None = None) -> Run:
    return gitdns("groups", "set", "example.com", "site-b", "--repo", str(repo.work), "--push", *flags, env=env)


def b1_not_ready(repo: GroupsRepo, tmp_path: Path) -> None:
    """Cluster b-1 (site B) publishes Ready false on its status branch (written to the bare repo)."""
    from gitdns.adapters.status.branch import StatusBranch

    _, b1_id, _, _ = SITES[2]
    summary = {"cluster": "b-1", "clusterId": b1_id, "ready": False,
               "conditions": [{"type": "Ready", "status": False, "reason": "ProviderError", "message": "x"}]}
    assert StatusBranch(str(repo.bare), b1_id, workdir=tmp_path / "agent-b1").publish(
        {"summary.yaml": dump(summary)}, "status(b-1): NotReady") is not None


def test_groups_push_over_ssh_lands_the_branch(sshd: SshServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = ssh_groups(sshd, tmp_path, "cli-groups-ssh")
    run = set_site_b(gitdns, repo, *ssh_flags(sshd))
    assert run.done.returncode == 0, run.output[-3000:]
    assert f"branch {BRANCH} committed and pushed to origin" in run.done.stdout
    assert repo.pushed() == repo.local()
    assert "groups: [site-b]" in git("--git-dir", str(repo.bare), "show", f"{BRANCH}:groups/example-com.yaml")
    assert "warning" not in run.done.stderr, run.done.stderr  # the status branches were read


def test_groups_health_check_reads_the_status_branches_over_ssh(sshd: SshServer, gitdns: Gitdns,
                                                                tmp_path: Path) -> None:
    """The status branches on origin come through the same transport: b-1's Ready false refuses."""
    repo = ssh_groups(sshd, tmp_path, "cli-groups-ssh-health")
    b1_not_ready(repo, tmp_path)
    run = set_site_b(gitdns, repo, *ssh_flags(sshd))
    assert run.done.returncode == 1, run.output[-3000:]
    assert "cluster b-1 reports Ready false" in run.done.stderr, run.output[-3000:]
    assert repo.pushed() is None


def test_groups_push_over_ssh_from_the_environment(sshd: SshServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = ssh_groups(sshd, tmp_path, "cli-groups-ssh-env")
    run = set_site_b(gitdns, repo, env={"GITDNS_SSH_KEY": str(sshd.deploy_key),
                                        "GITDNS_KNOWN_HOSTS": str(sshd.known_hosts)})
    assert run.done.returncode == 0, run.output[-3000:]
    assert repo.pushed() == repo.local()


def test_groups_push_without_flags_uses_the_ambient_git_ssh_command(sshd: SshServer, gitdns: Gitdns,
                                                                    tmp_path: Path) -> None:
    repo = ssh_groups(sshd, tmp_path, "cli-groups-ssh-ambient")
    run = set_site_b(gitdns, repo, env={"GIT_SSH_COMMAND": ssh_command(sshd.deploy_key, sshd.known_hosts)})
    assert run.done.returncode == 0, run.output[-3000:]
    assert repo.pushed() == repo.local()


def test_groups_push_with_a_wrong_known_hosts_names_the_mismatch(sshd: SshServer, gitdns: Gitdns,
                                                                 tmp_path: Path) -> None:
    repo = ssh_groups(sshd, tmp_path, "cli-groups-ssh-wrong-host")
    run = set_site_b(gitdns, repo, *ssh_flags(sshd, known_hosts=sshd.wrong_known_hosts))
    assert run.done.returncode == 1
    assert "(reason: HostKeyMismatch)" in run.done.stderr, run.output[-3000:]
    assert host_key_fingerprint(sshd) in run.done.stderr
    # origin is fetched first (a change is numbered and based on it): nothing is committed or pushed
    assert "use --direct when git is unreachable (reason: GroupsChangeRefused)" in run.done.stderr
    assert repo.pushed() is None and not has_branch(repo.work, BRANCH)


def test_groups_set_that_cannot_fetch_origin_is_refused_and_says_why(sshd: SshServer, gitdns: Gitdns,
                                                                    tmp_path: Path) -> None:
    """Without --push too: origin is fetched before anything is numbered or committed; the
    refusal names the transport's reason and the way out (--direct)."""
    repo = ssh_groups(sshd, tmp_path, "cli-groups-ssh-wrong-host-nopush")
    run = gitdns("groups", "set", "example.com", "site-b", "--repo", str(repo.work),
                 *ssh_flags(sshd, known_hosts=sshd.wrong_known_hosts))
    assert run.done.returncode == 1, run.output[-3000:]
    assert "(reason: HostKeyMismatch)" in run.done.stderr and host_key_fingerprint(sshd) in run.done.stderr
    assert "(reason: GroupsChangeRefused)" in run.done.stderr
    assert not has_branch(repo.work, BRANCH) and repo.pushed() is None


def test_groups_push_over_https_lands_the_branch(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = https_groups(https, tmp_path, "cli-groups-https")
    token = token_file(tmp_path, https.token)
    run = set_site_b(gitdns, repo, *https_flags(https, token))
    assert run.done.returncode == 0, run.output[-3000:]
    assert f"branch {BRANCH} committed and pushed to origin" in run.done.stdout
    assert repo.pushed() == repo.local()
    assert "warning" not in run.done.stderr, run.done.stderr
    assert any(e.method == "POST" and e.path.endswith("/git-receive-pack") and e.status == 200
               for e in https.access_entries())
    assert_no_secret(https.token, run, repo.work / ".git", tmp_path / "git-argv.log")


def test_groups_health_check_reads_the_status_branches_over_https(https: HttpsServer, gitdns: Gitdns,
                                                                  tmp_path: Path) -> None:
    repo = https_groups(https, tmp_path, "cli-groups-https-health")
    b1_not_ready(repo, tmp_path)
    run = set_site_b(gitdns, repo, *https_flags(https, token_file(tmp_path, https.token)))
    assert run.done.returncode == 1, run.output[-3000:]
    assert "cluster b-1 reports Ready false" in run.done.stderr, run.output[-3000:]
    assert repo.pushed() is None


def test_groups_push_over_https_with_token_env(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = https_groups(https, tmp_path, "cli-groups-https-token-env")
    run = set_site_b(gitdns, repo, "--token-env", "DNS_GIT_TOKEN", "--ca-file", str(https.ca_file),
                     env={"DNS_GIT_TOKEN": https.token})
    assert run.done.returncode == 0, run.output[-3000:]
    assert repo.pushed() == repo.local()
    assert_no_secret(https.token, run, repo.work / ".git")


def test_groups_push_with_a_wrong_token_is_refused(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = https_groups(https, tmp_path, "cli-groups-https-wrong")
    run = set_site_b(gitdns, repo, *https_flags(https, token_file(tmp_path, "not-the-token-7f3a")))
    assert run.done.returncode == 1
    assert "(reason: AuthenticationFailed)" in run.done.stderr, run.output[-3000:]
    assert "(reason: GroupsChangeRefused)" in run.done.stderr
    assert repo.pushed() is None and not has_branch(repo.work, BRANCH)
    assert_no_secret("not-the-token-7f3a", run, repo.work / ".git")


# -- history: the desired branch's history on the server ---------------------------------------------


def history_repo(root: Path) -> DesiredRepo:
    """example-repo, then a commit moving eu-west-1's api gateway to a new address: the second
    entry of api.example.com's history."""
    repo = DesiredRepo(root)
    cluster = repo.work / "clusters" / "eu-west-1.yaml"
    text = cluster.read_text()
    assert "192.0.2.11]" in text
    cluster.write_text(text.replace("192.0.2.11]", "192.0.2.12]"))
    repo.commit("eu-west-1: api gateway renumbered")
    return repo


def assert_history(run: Run, repo: DesiredRepo) -> None:
    assert run.done.returncode == 0, run.output[-3000:]
    out = run.done.stdout
    first, second = git("rev-list", "--reverse", "main", cwd=repo.work).split()
    assert out.startswith("history of name api.example.com: 2 change(s) in 2 commit(s) of branch main"), out
    assert f"{first[:7]}  " in out and "initial desired state" in out
    assert f"{second[:7]}  " in out and "eu-west-1: api gateway renumbered" in out
    assert "192.0.2.12" in out.split(second[:7], 1)[1]


def test_history_over_ssh(sshd: SshServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = history_repo(sshd.repos / "cli-history-ssh")
    run = gitdns("history", "api.example.com", "--repo", sshd.url(repo.bare), *ssh_flags(sshd))
    assert_history(run, repo)


def test_history_over_https(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = history_repo(https.repos / "cli-history-https")
    state = tmp_path / "state"
    run = gitdns("history", "api.example.com", "--repo", https.url(repo.bare), "--state-dir", str(state),
                 *https_flags(https, token_file(tmp_path, https.token)))
    assert_history(run, repo)
    assert_no_secret(https.token, run, state)


def test_history_over_https_from_the_environment(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = history_repo(https.repos / "cli-history-https-env")
    run = gitdns("history", "api.example.com", "--repo", https.url(repo.bare),
                 env={"GITDNS_TOKEN_FILE": str(token_file(tmp_path, https.token)),
                      "GITDNS_CA_FILE": str(https.ca_file)})
    assert_history(run, repo)


def test_history_flag_wins_over_the_environment(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = history_repo(https.repos / "cli-history-https-precedence")
    good = token_file(tmp_path, https.token)
    run = gitdns("history", "api.example.com", "--repo", https.url(repo.bare), "--token-file", str(good),
                 env={"GITDNS_TOKEN_FILE": str(tmp_path / "missing-token"), "GITDNS_CA_FILE": str(https.ca_file)})
    assert_history(run, repo)


def test_history_with_a_wrong_token_is_refused(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo = history_repo(https.repos / "cli-history-https-wrong")
    run = gitdns("history", "api.example.com", "--repo", https.url(repo.bare),
                 *https_flags(https, token_file(tmp_path, "wrong-history-token-9c1d")))
    assert run.done.returncode == 1
    assert "(reason: AuthenticationFailed)" in run.done.stderr, run.output[-3000:]
    assert_no_secret("wrong-history-token-9c1d", run)


def test_history_with_an_untrusted_ca_names_the_ca_file(https: HttpsServer, gitdns: Gitdns,
                                                        tmp_path: Path) -> None:
    repo = history_repo(https.repos / "cli-history-https-untrusted")
    run = gitdns("history", "api.example.com", "--repo", https.url(repo.bare),
                 *https_flags(https, token_file(tmp_path, https.token), ca_file=https.other_ca_file))
    assert run.done.returncode == 1
    assert "(reason: TLSVerificationFailed)" in run.done.stderr, run.output[-3000:]
    assert "--ca-file" in run.done.stderr


def test_history_with_a_wrong_known_hosts_names_the_mismatch(sshd: SshServer, gitdns: Gitdns,
                                                             tmp_path: Path) -> None:
    repo = history_repo(sshd.repos / "cli-history-ssh-wrong-host")
    run = gitdns("history", "api.example.com", "--repo", sshd.url(repo.bare),
                 *ssh_flags(sshd, known_hosts=sshd.wrong_known_hosts))
    assert run.done.returncode == 1
    assert "(reason: HostKeyMismatch)" in run.done.stderr, run.output[-3000:]
    assert host_key_fingerprint(sshd) in run.done.stderr


# -- status: the status branches and the desired head on the server ---------------------------------


FLEET = {"eu-west-1": CLUSTER_ID, "eu-central-1": "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34",
         "us-east-1": "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"}  # example-repo/clusters/


def status_repo(root: Path, tmp_path: Path) -> tuple[DesiredRepo, str]:
    """example-repo on main and each cluster's status branch saying it applied main's head, Ready."""
    repo = DesiredRepo(root)
    head = git("rev-parse", "main", cwd=repo.work)
    for name, cid in FLEET.items():
        publish(str(repo.bare), tmp_path / f"agent-{name}", report(name, cid, ready=True, applied=head, desired=head))
    return repo, head


def assert_status(run: Run, head: str) -> None:
    assert run.done.returncode == 0, run.output[-3000:]
    assert "eu-west-1" in run.done.stdout and "3/3 clusters ready" in run.done.stdout, run.done.stdout
    # the desired head is listed (ls-remote) through the same transport: shown only when it worked
    assert f"desired head (main): {head[:7]}" in run.done.stdout, run.done.stdout
    assert f"every cluster has applied {head[:7]}" in run.done.stdout


def test_status_over_ssh(sshd: SshServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo, head = status_repo(sshd.repos / "cli-status-ssh", tmp_path)
    run = gitdns("status", "--repo", sshd.url(repo.bare), *ssh_flags(sshd))
    assert_status(run, head)


def test_status_over_https(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo, head = status_repo(https.repos / "cli-status-https", tmp_path)
    state = tmp_path / "state"
    run = gitdns("status", "--repo", https.url(repo.bare), "--state-dir", str(state),
                 *https_flags(https, token_file(tmp_path, https.token)))
    assert_status(run, head)
    assert_no_secret(https.token, run, state)


def test_status_with_a_wrong_known_hosts_names_the_mismatch(sshd: SshServer, gitdns: Gitdns,
                                                            tmp_path: Path) -> None:
    repo, _ = status_repo(sshd.repos / "cli-status-ssh-wrong-host", tmp_path)
    run = gitdns("status", "--repo", sshd.url(repo.bare),
                 *ssh_flags(sshd, known_hosts=sshd.wrong_known_hosts))
    assert run.done.returncode == 1
    assert "(reason: HostKeyMismatch)" in run.done.stderr, run.output[-3000:]
    assert host_key_fingerprint(sshd) in run.done.stderr


def test_status_with_a_wrong_token_is_refused(https: HttpsServer, gitdns: Gitdns, tmp_path: Path) -> None:
    repo, _ = status_repo(https.repos / "cli-status-https-wrong", tmp_path)
    run = gitdns("status", "--repo", https.url(repo.bare),
                 *https_flags(https, token_file(tmp_path, "wrong-status-token-5e2b")))
    assert run.done.returncode == 1
    assert "(reason: AuthenticationFailed)" in run.done.stderr, run.output[-3000:]
    assert_no_secret("wrong-status-token-5e2b", run)
