"""GitSource against local bare remotes: fetch, heads, paths, ancestry, failures, crash
recovery, signatures and credentials."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git as gitpython
import pytest

from gitdns.adapters.git import source as gitsource
from gitdns.adapters.git.auth import GitAuth, auth_env, redact, ssh_command
from gitdns.adapters.git.cache import GitCache
from gitdns.adapters.git.source import (
    DEEPEN_STEPS,
    GitSource,
    RevisionNotFoundError,
    SignatureRefusedError,
    VerifyPolicy,
)
from gitdns.core.model import Revision
from gitdns.errors import AuthError, ConfigError, PermanentError, RetryableError, UnreachableError

from .conftest import EPOCH, GpgKeys, Remote, git, ssh_sign

ZONE = "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example}\n"
TOKEN = "ghp_SuperSecretToken0123456789"


def source(remote: Remote, workdir: Path, **kwargs: Any) -> GitSource:
    return GitSource(remote.url, workdir=workdir, **kwargs)


# -- reading ------------------------------------------------------------------------------


def test_fetch_reads_the_yaml_files_of_the_head(remote: Remote, workdir: Path) -> None:
    sha = remote.commit(
        {
            "zone.yaml": ZONE,
            "clusters/eu.yml": "kind: Cluster\n",
            "README.md": "not yaml",
            ".github/workflow.yaml": "hidden dir",
            "clusters/.draft.yaml": "hidden file",
        },
        message="first\n\nGitdns-Allow-Mass-Change: example",
    )
    remote.push()

    fetched = source(remote, workdir).fetch()

    assert fetched.sha == sha
    assert fetched.files == {"clusters/eu.yml": "kind: Cluster\n", "zone.yaml": ZONE}
    assert fetched.revision.sha == sha
    assert fetched.revision.time == EPOCH + 60
    assert fetched.message.startswith("first\n\nGitdns-Allow-Mass-Change: example")
    assert fetched.author == "Alice Author <alice@example.com>"
    assert (workdir / "cache.git" / "shallow").is_file()  # depth 1
    assert not (workdir / "cache.git" / "zone.yaml").exists()  # bare: nothing checked out


def test_remote_head_follows_pushes(remote: Remote, workdir: Path) -> None:
    first = remote.commit({"zone.yaml": ZONE})
    remote.push()
    src = source(remote, workdir)
    assert src.remote_head() == first

    second = remote.commit({"zone.yaml": ZONE + "spec: {}\n"})
    remote.push()
    assert src.remote_head() == second != first


def test_a_pushed_commit_is_fetched_and_older_ones_stay_readable(remote: Remote, workdir: Path) -> None:
    first = remote.commit({"zone.yaml": ZONE, "old.yaml": "old\n"})
    remote.push()
    src = source(remote, workdir)
    assert src.fetch().sha == first

    second = remote.commit({"zone.yaml": "changed\n", "old.yaml": None}, message="second")
    remote.push()
    fetched = src.fetch(src.remote_head())

    assert fetched.sha == second
    assert fetched.files == {"zone.yaml": "changed\n"}
    assert fetched.message.strip() == "second"
    assert src.files_at(first) == {"old.yaml": "old\n", "zone.yaml": ZONE}
    # an older commit's revision: its own committer time (a restarted agent labels its last good revision so)
    assert src.revision_at(first) == Revision(src.fetch(first).revision.time, first)
    assert src.revision_at(first).time < fetched.revision.time and src.revision_at(second) == fetched.revision


def test_path_selects_a_subdirectory(remote: Remote, workdir: Path) -> None:
    remote.commit(
        {"desired/zone.yaml": ZONE, "desired/tenants/a.yaml": "a\n", "other/x.yaml": "x\n", "top.yaml": "t\n"}
    )
    remote.push()

    fetched = source(remote, workdir, path="/desired/").fetch()

    assert fetched.files == {"tenants/a.yaml": "a\n", "zone.yaml": ZONE}


def test_a_missing_path_is_an_error_not_an_empty_state(remote: Remote, workdir: Path) -> None:
    sha = remote.commit({"zone.yaml": ZONE})
    remote.push()
    with pytest.raises(ConfigError, match=f"path desired does not exist in commit {sha}"):
        source(remote, workdir, path="desired").fetch()


def test_unknown_commit_and_branch(remote: Remote, workdir: Path) -> None:
    remote.commit({"zone.yaml": ZONE})
    remote.push()
    with pytest.raises(RevisionNotFoundError, match="is not on"):
        source(remote, workdir).fetch("0123456789abcdef0123456789abcdef01234567")
    with pytest.raises(ConfigError, match="branch nope does not exist"):
        source(remote, workdir, branch="nope").remote_head()
    with pytest.raises(ConfigError, match="branch nope does not exist"):
        source(remote, workdir, branch="nope").fetch()


def test_a_commit_that_left_the_branch_is_fetched_by_sha(remote: Remote, workdir: Path) -> None:
    first = remote.commit({"zone.yaml": "1\n"})
    remote.commit({"zone.yaml": "2\n"})
    remote.push()
    # A fresh cache: `first` is not the head, so it is fetched by its sha.
    assert source(remote, workdir).files_at(first) == {"zone.yaml": "1\n"}


def test_log_reads_full_history_filtered_by_path(remote: Remote, workdir: Path) -> None:
    shas = [remote.commit({"desired/zone.yaml": f"{i}\n"}, message=f"zone {i}\n\nbody") for i in range(3)]
    remote.commit({"docs/readme.yaml": "x\n"}, message="docs only")
    tenant = remote.commit({"desired/tenants/t.yaml": "t\n"}, message="tenant")
    remote.push()
    src = source(remote, workdir, path="desired")
    src.fetch()  # shallow

    history = src.log()
    assert [c.sha for c in history] == [tenant, *reversed(shas)]
    assert history[1].subject == "zone 2"
    assert history[1].message == "zone 2\n\nbody"
    assert history[1].author == "Alice Author <alice@example.com>"
    assert history[-1].revision.time == EPOCH + 60
    assert not (workdir / "cache.git" / "shallow").exists()  # unshallowed on demand

    assert [c.sha for c in src.log(paths=["zone.yaml"], max_count=2)] == [shas[2], shas[1]]


# -- ancestry -------------------------------------------------------------------------------


def test_force_push_back_to_an_older_commit_is_not_a_descendant(remote: Remote, workdir: Path) -> None:
    first = remote.commit({"zone.yaml": "1\n"})
    remote.commit({"zone.yaml": "2\n"})
    third = remote.commit({"zone.yaml": "3\n"})
    remote.push()
    src = source(remote, workdir)
    assert src.fetch().sha == third

    remote.reset(first)
    remote.push(force=True)
    head = src.remote_head()
    assert head == first
    assert src.fetch(head).files == {"zone.yaml": "1\n"}

    assert src.is_descendant(head, third) is False
    assert src.is_descendant(third, head) is True  # the old tip is still in the cache


def test_force_push_onto_unrelated_history_is_not_a_descendant(remote: Remote, workdir: Path) -> None:
    remote.commit({"zone.yaml": "1\n"})
    old = remote.commit({"zone.yaml": "2\n"})
    remote.push()
    src = source(remote, workdir)
    src.fetch()

    remote.orphan()
    new = remote.commit({"zone.yaml": "rewritten\n"})
    remote.push(force=True)

    assert src.fetch().sha == new
    assert src.is_descendant(new, old) is False


def test_fast_forward_50_commits_deep_on_a_shallow_cache(
    remote: Remote, workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(100):
        remote.commit({"zone.yaml": f"before {i}\n"})
    old = remote.commit({"zone.yaml": "0\n"})
    remote.push()
    src = source(remote, workdir)
    src.fetch()
    for i in range(1, 51):
        remote.commit({"zone.yaml": f"{i}\n"})
    remote.push()
    new = src.fetch().sha
    assert (workdir / "cache.git" / "shallow").is_file()

    with caplog.at_level(logging.INFO, logger="gitdns.adapters.git.source"):
        assert src.is_descendant(new, old) is True
        assert src.is_descendant(new, new) is True
    # One --deepen step was enough: the cache is still shallow, not a full clone.
    assert f"mode=--deepen={DEEPEN_STEPS[0]}" in caplog.text
    assert "--unshallow" not in caplog.text
    assert (workdir / "cache.git" / "shallow").is_file()


def test_fast_forward_from_a_commit_never_fetched(remote: Remote, workdir: Path) -> None:
    old = remote.commit({"zone.yaml": "0\n"})
    for i in range(1, 80):  # beyond the first deepen step
        remote.commit({"zone.yaml": f"{i}\n"})
    remote.push()
    src = source(remote, workdir)
    new = src.fetch().sha

    assert src.is_descendant(new, old) is True
    assert src.is_descendant(old, new) is False


# -- failures ---------------------------------------------------------------------------------


def test_unreachable_remote_raises_and_keeps_the_cache(remote: Remote, workdir: Path) -> None:
    sha = remote.commit({"zone.yaml": ZONE})
    remote.push()
    src = source(remote, workdir)
    src.fetch()
    remote.bare.rename(remote.bare.with_name("moved.git"))

    with pytest.raises(UnreachableError) as info:
        src.remote_head()
    assert isinstance(info.value, RetryableError) and info.value.reason == "RepositoryNotFound"
    with pytest.raises(UnreachableError, match="does not appear to be a git repository"):
        src.fetch()

    assert src.fetch(sha).files == {"zone.yaml": ZONE}  # from the cache, no network
    assert GitSource(remote.url, workdir=workdir).files_at(sha) == {"zone.yaml": ZONE}


def test_a_hanging_remote_times_out(hanging_port: int, remote: Remote, workdir: Path) -> None:
    sha = remote.commit({"zone.yaml": ZONE})
    remote.push()
    source(remote, workdir).fetch()

    src = GitSource(f"git://127.0.0.1:{hanging_port}/x", workdir=workdir, timeout=2)
    with pytest.raises(UnreachableError, match="no answer within 2s"):
        src.remote_head()
    with pytest.raises(UnreachableError, match="no answer within 2s"):
        src.fetch()
    assert src.files_at(sha) == {"zone.yaml": ZONE}  # the cache survived the killed fetch


@contextlib.contextmanager
def used_by_another_process(workdir: Path) -> Iterator[None]:
    """Hold the cache's owner flock as a running agent would (flock locks belong to an open
    file, so this descriptor conflicts with the source's own even in one process)."""
    fd = os.open(workdir / "cache.owner", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def plant_locks(workdir: Path) -> tuple[list[Path], Path]:
    """Lock files a killed git leaves: three older than the timeout, one fresh."""
    cache = workdir / "cache.git"
    locks = [cache / "index.lock", cache / "shallow.lock", cache / "refs" / "remotes" / "origin" / "main.lock"]
    old = time.time() - 3600
    for lock in locks:
        lock.write_text("", encoding="utf-8")
        os.utime(lock, (old, old))
    fresh = cache / "packed-refs.lock"  # younger than the timeout
    fresh.write_text("", encoding="utf-8")
    return locks, fresh


def test_stale_locks_are_removed_on_start(remote: Remote, workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    remote.commit({"zone.yaml": "1\n"})
    remote.push()
    source(remote, workdir).fetch()
    locks, fresh = plant_locks(workdir)

    new = remote.commit({"zone.yaml": "2\n"})
    remote.push()
    with used_by_another_process(workdir), caplog.at_level(logging.WARNING, logger="gitdns.adapters.git.cache"):
        src = source(remote, workdir)  # a second process on the cache: a fresh lock may be a live git's
        assert src.fetch().files == {"zone.yaml": "2\n"}

    assert src.remote_head() == new
    assert not any(lock.exists() for lock in locks)
    assert fresh.exists()
    assert "removed: lock=index.lock" in caplog.text
    assert "removed: lock=refs/remotes/origin/main.lock" in caplog.text


def test_a_restart_after_kill_9_removes_every_lock_at_once(remote: Remote, workdir: Path) -> None:
    """An agent killed during a fetch leaves its git's fresh lock files (bench/crash.py's kills
    found the restarted agent refused with CacheBusy until they aged past the git timeout).
    Nobody else holds the cache's owner flock, so the restarted one removes them all."""
    remote.commit({"zone.yaml": "1\n"})
    remote.push()
    source(remote, workdir).fetch()
    locks, fresh = plant_locks(workdir)
    os.utime(locks[1])  # shallow.lock as a killed fetch leaves it: just now
    new = remote.commit({"zone.yaml": "2\n"})
    remote.push()
    src = source(remote, workdir)  # the restarted agent
    assert src.fetch().files == {"zone.yaml": "2\n"}
    assert src.remote_head() == new
    assert not any(lock.exists() for lock in [*locks, fresh])


def test_a_killed_holder_of_the_cache_releases_it(remote: Remote, workdir: Path) -> None:
    """The owner flock dies with its process, kill -9 included."""
    remote.commit({"zone.yaml": "1\n"})
    remote.push()
    source(remote, workdir).fetch()
    holder = subprocess.Popen(["python3", "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
                               str(workdir / "cache.owner")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        holder.kill()
        holder.wait(10)
    finally:
        holder.kill()
    _, fresh = plant_locks(workdir)
    assert source(remote, workdir).fetch().files == {"zone.yaml": "1\n"}
    assert not fresh.exists()


def test_the_git_commands_hold_the_cache_with_their_process(remote: Remote, workdir: Path) -> None:
    """Every git the cache runs inherits the owner flock: one that outlives its killed parent
    still holds the cache, so its fresh locks are not taken for a dead process's."""
    remote.commit({"zone.yaml": "1\n"})
    remote.push()
    cache = GitCache(remote.url, "main", workdir, GitAuth(), 30)
    status, out, _ = cache.with_repo(lambda repo: cache.run(repo, ["-c", "alias.fds=!ls -l /proc/$$/fd", "fds"]))
    assert status == 0 and str(workdir / "cache.owner") in out


def test_a_fresh_ref_lock_is_a_retryable_busy_cache(remote: Remote, workdir: Path) -> None:
    remote.commit({"zone.yaml": "1\n"})
    remote.push()
    src = source(remote, workdir)
    src.fetch()
    remote.commit({"zone.yaml": "2\n"})
    remote.push()
    (workdir / "cache.git" / "refs" / "remotes" / "origin" / "main.lock").write_text("", encoding="utf-8")
    with pytest.raises(RetryableError) as info:
        src.fetch()
    assert info.value.reason == "CacheBusy"


def _drop_objects(cache: Path) -> None:
    objects = cache / "objects"
    for path in objects.rglob("*"):
        if path.is_file() and (path.parent.name != "info"):
            path.unlink()


def test_a_corrupt_cache_is_wiped_and_refetched_on_start(
    remote: Remote, workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sha = remote.commit({"zone.yaml": ZONE})
    remote.push()
    source(remote, workdir).fetch()
    _drop_objects(workdir / "cache.git")

    with caplog.at_level(logging.WARNING, logger="gitdns.adapters.git.cache"):
        fetched = source(remote, workdir).fetch()

    assert fetched.sha == sha
    assert fetched.files == {"zone.yaml": ZONE}
    assert "wiped: cache=" in caplog.text


def test_objects_lost_while_running_are_refetched(
    remote: Remote, workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sha = remote.commit({"zone.yaml": ZONE})
    remote.push()
    src = source(remote, workdir)
    src.fetch()
    blob = git("rev-parse", f"{sha}:zone.yaml", cwd=remote.work)
    loose = workdir / "cache.git" / "objects" / blob[:2] / blob[2:]
    assert loose.is_file()
    loose.unlink()  # the commit and its tree are still there; reading the file fails

    with caplog.at_level(logging.WARNING, logger="gitdns.adapters.git.cache"):
        assert src.files_at(sha) == {"zone.yaml": ZONE}
    assert "wiped: cache=" in caplog.text


def test_a_directory_that_is_not_a_repository_is_replaced(remote: Remote, workdir: Path) -> None:
    remote.commit({"zone.yaml": ZONE})
    remote.push()
    (workdir / "cache.git").mkdir(parents=True)
    (workdir / "cache.git" / "junk").write_text("x", encoding="utf-8")
    assert source(remote, workdir).fetch().files == {"zone.yaml": ZONE}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"branch": "-x"}, "not a valid branch name"),
        ({"branch": "a..b"}, "not a valid branch name"),
        ({"path": "../up"}, "inside the repository"),
        ({"timeout": 0}, "must be positive"),
    ],
)
def test_bad_settings_are_config_errors(workdir: Path, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        GitSource("file:///nowhere", workdir=workdir, **kwargs)


# -- signatures ---------------------------------------------------------------------------------


def test_ssh_signed_commit_is_verified(remote: Remote, workdir: Path, ssh_keys: dict[str, Path]) -> None:
    sha = remote.commit({"zone.yaml": ZONE}, sign=ssh_sign(ssh_keys["trusted"]))
    remote.push()
    policy = VerifyPolicy(ssh_allowed_signers=ssh_keys["allowed_signers"])
    assert source(remote, workdir, verify=policy).fetch().sha == sha


def test_unsigned_commit_is_refused(remote: Remote, workdir: Path, ssh_keys: dict[str, Path]) -> None:
    sha = remote.commit({"zone.yaml": ZONE})
    remote.push()
    policy = VerifyPolicy(ssh_allowed_signers=ssh_keys["allowed_signers"])
    with pytest.raises(SignatureRefusedError) as info:
        source(remote, workdir, verify=policy).fetch()
    assert isinstance(info.value, PermanentError)
    assert info.value.reason == "SignatureRefused"
    assert info.value.sha == sha
    assert str(info.value) == f"commit {sha} refused: the commit is not signed"


def test_commit_signed_by_an_untrusted_ssh_key_is_refused(
    remote: Remote, workdir: Path, ssh_keys: dict[str, Path]
) -> None:
    sha = remote.commit({"zone.yaml": ZONE}, sign=ssh_sign(ssh_keys["untrusted"]))
    remote.push()
    policy = VerifyPolicy(ssh_allowed_signers=ssh_keys["allowed_signers"])
    with pytest.raises(SignatureRefusedError, match=f"commit {sha} refused: good signature from a key that is not"):
        source(remote, workdir, verify=policy).fetch()


def test_an_ssh_signature_without_allowed_signers_is_refused(
    remote: Remote, workdir: Path, ssh_keys: dict[str, Path], tmp_path: Path
) -> None:
    remote.commit({"zone.yaml": ZONE}, sign=ssh_sign(ssh_keys["trusted"]))
    remote.push()
    keyring = tmp_path / "keys.asc"
    keyring.write_text("", encoding="utf-8")
    with pytest.raises(SignatureRefusedError, match="no SSH allowed signers"):
        source(remote, workdir, verify=VerifyPolicy(gpg_keyring=keyring)).fetch()


def test_gpg_signed_commits(remote: Remote, workdir: Path, gpg_keys: GpgKeys, tmp_path: Path) -> None:
    trusted = gpg_keys.generate("trusted")
    stranger = gpg_keys.generate("stranger")
    keyring = tmp_path / "trusted-keys"
    keyring.mkdir()
    gpg_keys.export(trusted, keyring / "release.asc")

    good = remote.commit({"zone.yaml": ZONE}, sign=gpg_keys.sign(trusted), env=gpg_keys.env)
    remote.push()
    src = source(remote, workdir, verify=VerifyPolicy(gpg_keyring=keyring))
    assert src.fetch().sha == good
    assert os.stat(workdir / "gnupg").st_mode & 0o777 == 0o700

    bad = remote.commit({"zone.yaml": "x\n"}, sign=gpg_keys.sign(stranger), env=gpg_keys.env)
    remote.push()
    with pytest.raises(SignatureRefusedError, match=f"commit {bad} refused: signature cannot be checked"):
        src.fetch()

    # Trusting the stranger's key (a new file in the keyring directory) takes effect at once.
    gpg_keys.export(stranger, keyring / "stranger.asc")
    assert src.fetch().sha == bad

    # A single exported-keys file works as well as a directory.
    single = source(remote, workdir, verify=VerifyPolicy(gpg_keyring=keyring / "release.asc"))
    assert single.fetch(good).sha == good


def test_is_descendant_takes_shas_only(workdir: Path) -> None:
    src = GitSource("file:///x", workdir=workdir)
    with pytest.raises(RevisionNotFoundError, match="is not a commit sha"):
        src.is_descendant("--upload-pack=touch", "abc1234")


def test_a_policy_needs_trusted_keys(workdir: Path) -> None:
    with pytest.raises(ConfigError, match="needs gpg_keyring or ssh_allowed_signers"):
        GitSource("file:///x", workdir=workdir, verify=VerifyPolicy())


# -- credentials ---------------------------------------------------------------------------------


def test_askpass_environment_answers_git_with_the_token(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITDNS_TEST_TOKEN", TOKEN)
    workdir.mkdir()
    env, secrets = auth_env(GitAuth(token_env="GITDNS_TEST_TOKEN", username="bot"), workdir, 30)

    askpass = Path(env["GIT_ASKPASS"])
    assert askpass.parent == workdir
    assert stat.S_IMODE(askpass.stat().st_mode) == 0o700
    assert TOKEN not in askpass.read_text(encoding="utf-8")
    assert env["GITDNS_GIT_TOKEN"] == TOKEN
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert secrets == (TOKEN,)

    # git itself asks the helper and gets the username and the token back.
    done = subprocess.run(
        ["git", "credential", "fill"],
        input="protocol=https\nhost=git.example.com\n\n",
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert "username=bot\n" in done.stdout
    assert f"password={TOKEN}\n" in done.stdout


def test_token_file_is_read_and_missing_tokens_are_auth_errors(workdir: Path, tmp_path: Path) -> None:
    workdir.mkdir()
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n", encoding="utf-8")
    env, _ = auth_env(GitAuth(token_file=token_file), workdir, 30)
    assert env["GITDNS_GIT_TOKEN"] == TOKEN
    assert env["GITDNS_GIT_USERNAME"] == "git"

    with pytest.raises(AuthError, match="GITDNS_UNSET_VAR is not set"):
        auth_env(GitAuth(token_env="GITDNS_UNSET_VAR"), workdir, 30)
    with pytest.raises(AuthError, match="cannot be read"):
        auth_env(GitAuth(token_file=tmp_path / "missing"), workdir, 30)


def test_ssh_command_pins_key_and_known_hosts(tmp_path: Path) -> None:
    key, known = tmp_path / "id_ed25519", tmp_path / "known_hosts"
    command = ssh_command(GitAuth(ssh_key=key, known_hosts=known), 7)
    assert command == (
        f"ssh -i {key} -o IdentitiesOnly=yes -o UserKnownHostsFile={known} -o GlobalKnownHostsFile=/dev/null"
        " -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=7"
    )
    assert ssh_command(GitAuth(), 7) is None


def test_the_token_never_leaks(
    workdir: Path, closed_port: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GITDNS_TEST_TOKEN", TOKEN)
    launched: list[tuple[list[str], dict[str, str]]] = []
    real_popen = gitpython.cmd.safer_popen

    def recording_popen(command: list[str], **kwargs: Any) -> Any:
        launched.append((list(command), dict(kwargs.get("env") or {})))
        return real_popen(command, **kwargs)

    monkeypatch.setattr(gitpython.cmd, "safer_popen", recording_popen)
    src = GitSource(
        f"https://127.0.0.1:{closed_port}/org/dns.git",
        workdir=workdir,
        auth=GitAuth(token_env="GITDNS_TEST_TOKEN"),
        timeout=10,
    )
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(UnreachableError) as info:
            src.fetch()
        with pytest.raises(UnreachableError):
            src.remote_head()

    assert TOKEN not in str(info.value) and TOKEN not in repr(info.value)
    assert TOKEN not in caplog.text
    assert "failed: command=fetch" in caplog.text
    assert TOKEN not in (workdir / "cache.git" / "config").read_text(encoding="utf-8")
    assert all(TOKEN not in path.read_text(errors="ignore") for path in workdir.rglob("*") if path.is_file())
    network = [(cmd, env) for cmd, env in launched if cmd[1] in ("fetch", "ls-remote")]
    assert len(network) == 2
    for command, env in network:
        assert not any(TOKEN in arg for arg in command)
        # Only the variable gitdns sets for the askpass helper, plus the operator's own
        # variable that every child of the agent inherits anyway.
        assert sorted(k for k, v in env.items() if TOKEN in v) == ["GITDNS_GIT_TOKEN", "GITDNS_TEST_TOKEN"]
    assert TOKEN not in os.environ.get("GITDNS_GIT_TOKEN", "")  # never put in our own environment


def test_urls_carrying_passwords_are_refused_without_echoing_them(workdir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        GitSource(f"https://bot:{TOKEN}@git.example.com/dns.git", workdir=workdir)
    assert TOKEN not in str(info.value)
    assert "https://*****@git.example.com/dns.git" in str(info.value)
    with pytest.raises(ConfigError):
        GitSource("ext::sh -c touch% /tmp/pwned", workdir=workdir)


def test_redact() -> None:
    text = f"fatal: unable to access 'https://x:{TOKEN}@h/r.git/': Authorization: Basic abc== {TOKEN}"
    clean = redact(text, (TOKEN,))
    assert TOKEN not in clean and "abc==" not in clean
    assert "https://*****@h/r.git/" in clean


def test_module_exports() -> None:
    assert set(gitsource.__all__) >= {"GitSource", "Fetched", "CommitInfo", "GitAuth", "VerifyPolicy"}
    assert git("--version").startswith("git version")


def test_nothing_configured_leaves_the_ambient_git_configuration(tmp_path: Path) -> None:
    env, secrets = auth_env(GitAuth(), tmp_path, 30)
    # the operator's own config, credential helper, GIT_ASKPASS and GIT_SSH_COMMAND stay in force
    assert not {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "GIT_ASKPASS", "GIT_SSH_COMMAND"} & set(env)
    assert env["GIT_TERMINAL_PROMPT"] == "0" and secrets == ()
    configured, _ = auth_env(GitAuth(known_hosts=tmp_path / "known_hosts"), tmp_path, 30)
    assert configured["GIT_CONFIG_GLOBAL"] == os.devnull and "GIT_SSH_COMMAND" in configured


def test_ssh_connections_are_shared_per_key_and_a_rotated_key_gets_its_own(tmp_path: Path) -> None:
    import os
    import stat

    from gitdns.adapters.git.auth import mux_dir

    key, known = tmp_path / "id_ed25519", tmp_path / "known_hosts"
    key.write_text("k1\n")
    known.write_text("h\n")
    auth = GitAuth(ssh_key=key, known_hosts=known)
    first = mux_dir(auth)
    assert first is not None and stat.S_IMODE(os.lstat(first).st_mode) == 0o700
    command = ssh_command(auth, 7)
    assert command is not None and f"ControlPath={first}/%C" in command and "ControlMaster=auto" in command
    assert mux_dir(auth) == first  # the same key: the same connection
    other = tmp_path / "other_key"
    other.write_text("k2\n")
    assert mux_dir(GitAuth(ssh_key=other, known_hosts=known)) not in (None, first)  # another key: never shared
    key.write_text("rotated key\n")
    assert mux_dir(auth) not in (None, first)  # a rotated key opens a new connection
    assert mux_dir(GitAuth(ssh_key=key, known_hosts=known, multiplex=False)) is None
    assert "ControlPath" not in str(ssh_command(GitAuth(ssh_key=key, known_hosts=known, multiplex=False), 7))
