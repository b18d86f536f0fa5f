"""Status branch remote commands run again, with backoff and jitter, while the SSH server turns
the connection away before the key exchange (sshd's MaxStartups); any other failure at once.

git reaches a local bare repository through a stand-in ``ssh`` (``GIT_SSH_COMMAND``): for its
first ``refusals`` runs it prints what OpenSSH prints when sshd drops the connection, then it
runs the git command it was given.  The pauses are recorded, not slept.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitdns.adapters.status import cache as statuscache
from gitdns.adapters.status.branch import StatusBranch, read_all
from gitdns.adapters.status.cache import Backoff
from gitdns.errors import AuthError, UnreachableError

FILES = {"summary.yaml": "ready: true\n"}
KEX_RESET = "kex_exchange_identification: read: Connection reset by peer\nConnection reset by 127.0.0.1 port 22\n"
HOST_KEY = "Host key for fleet-git has changed and you have requested strict checking.\nHost key verification failed.\n"
FAKE_SSH = """#!/bin/sh
# stand-in ssh: "$1" is the host, "$2" the git command; the runs numbered in $REFUSE are turned away
dir=$(dirname "$0")
n=$(( $(cat "$dir/runs") + 1 ))
echo "$n" > "$dir/runs"
case " $REFUSE " in
    *" $n "*) printf '%s' "$FAIL_WITH" >&2; exit 255 ;;
esac
exec sh -c "$2"
"""


class Ssh:
    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.directory = directory
        self.monkeypatch = monkeypatch
        directory.mkdir()
        script = directory / "ssh"
        script.write_text(FAKE_SSH)
        script.chmod(0o755)
        monkeypatch.setenv("GIT_SSH_COMMAND", str(script))
        monkeypatch.setenv("GIT_SSH_VARIANT", "simple")  # host and command only: no -p, -o
        self.fail()

    def fail(self, *runs: int, stderr: str = KEX_RESET) -> None:
        """Runs ``runs`` (counted from 1, from now) print ``stderr`` and fail."""
        self.monkeypatch.setenv("REFUSE", " ".join(map(str, runs)))
        self.monkeypatch.setenv("FAIL_WITH", stderr)
        (self.directory / "runs").write_text("0\n")

    @property
    def runs(self) -> int:
        return int((self.directory / "runs").read_text())


@pytest.fixture
def ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ssh:
    return Ssh(tmp_path / "fake-ssh", monkeypatch)


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(statuscache, "REFUSALS", Backoff(sleep=slept.append))
    return slept


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Path, str]:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    return bare, f"ssh://fleet-git{bare}"


def remote_tip(bare: Path, ref: str) -> str:
    return subprocess.run(["git", "--git-dir", str(bare), "rev-parse", ref], check=True, capture_output=True,
                          text=True).stdout.strip()


def within_full_jitter(slept: list[float], policy: Backoff) -> bool:
    return all(0.0 <= s <= min(policy.cap, policy.base * 2 ** n) for n, s in enumerate(slept))


def test_a_publish_lands_after_the_server_turned_its_connections_away(
        ssh: Ssh, pauses: list[float], remote: tuple[Path, str], tmp_path: Path) -> None:
    bare, url = remote
    ssh.fail(1, 2, 3)  # the ls-remote, three times
    sha = StatusBranch(url, "c1", workdir=tmp_path / "w").publish(FILES, "status")
    assert sha and remote_tip(bare, "refs/heads/gitdns-status/c1") == sha
    assert ssh.runs == 3 + 2  # three refused, then ls-remote and push
    assert len(pauses) == 3 and within_full_jitter(pauses, Backoff())


def test_the_push_and_the_fetches_are_retried_too(ssh: Ssh, pauses: list[float], remote: tuple[Path, str],
                                                  tmp_path: Path) -> None:
    bare, url = remote
    assert StatusBranch(url, "c1", workdir=tmp_path / "first").publish(FILES, "first")
    for refused, op in ((1, "ls-remote"), (2, "fetch"), (3, "push")):
        branch = StatusBranch(url, "c1", workdir=tmp_path / op)  # a new cache: ls-remote, fetch, push
        ssh.fail(refused)
        pauses.clear()
        sha = branch.publish({"summary.yaml": f"{op} refused once\n"}, op)
        assert sha and remote_tip(bare, "refs/heads/gitdns-status/c1") == sha, op
        assert ssh.runs == 4 and len(pauses) == 1, op
    ssh.fail(1)
    pauses.clear()
    trees = read_all(url, workdir=tmp_path / "reader")
    assert set(trees) == {"c1"} and ssh.runs == 2 and len(pauses) == 1


def test_a_host_key_failure_is_raised_at_once(ssh: Ssh, pauses: list[float], remote: tuple[Path, str],
                                              tmp_path: Path) -> None:
    _, url = remote
    ssh.fail(*range(1, 100), stderr=HOST_KEY)
    with pytest.raises(AuthError) as caught:
        StatusBranch(url, "c1", workdir=tmp_path / "w").publish(FILES, "status")
    assert caught.value.reason == "HostKeyMismatch"
    assert ssh.runs == 1 and pauses == []


def test_refusals_are_retried_a_bounded_number_of_times(ssh: Ssh, pauses: list[float], remote: tuple[Path, str],
                                                        tmp_path: Path) -> None:
    _, url = remote
    ssh.fail(*range(1, 100))
    with pytest.raises(UnreachableError) as caught:
        StatusBranch(url, "c1", workdir=tmp_path / "w").publish(FILES, "status")
    assert caught.value.reason == "GitConnectionRefused"
    assert "kex_exchange_identification" in str(caught.value)
    policy = Backoff()
    assert ssh.runs == policy.attempts and len(pauses) == policy.attempts - 1
    assert within_full_jitter(pauses, policy)


def test_no_pause_ends_past_the_time_budget(ssh: Ssh, monkeypatch: pytest.MonkeyPatch, remote: tuple[Path, str],
                                            tmp_path: Path) -> None:
    _, url = remote
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    policy = Backoff(attempts=100, base=1.0, cap=1.0, budget=3.0, sleep=sleep, clock=lambda: now[0])
    monkeypatch.setattr(statuscache, "REFUSALS", policy)
    monkeypatch.setattr(statuscache.random, "uniform", lambda low, high: high)  # each pause its longest
    ssh.fail(*range(1, 100))
    with pytest.raises(UnreachableError):
        StatusBranch(url, "c1", workdir=tmp_path / "w").publish(FILES, "status")
    assert slept == [1.0, 1.0, 1.0] and ssh.runs == 4
