"""The bare cache of a git source (`gitdns.adapters.git.source`) and the git commands run in it.

``<workdir>/cache.git`` holds one remote branch in ``refs/remotes/origin/<branch>``; no remote
is configured, so no URL is ever written to git config.  Every git command runs with
``kill_after_timeout``; a timeout or a failed network command is a retryable error whose
message names the remote without credentials.  The cache survives every network failure.
On the first use, lock files a killed git left are removed — every one when no other process
uses the cache (the first user takes an exclusive ``flock`` on ``<workdir>/cache.owner`` and
holds it until it ends, its git commands with it, so a process killed with its git goes with
its flock and a restart recovers at once), else only those older than the timeout (no live
git holds a lock longer) —
and ``git fsck --connectivity-only`` checks the cache (``check_on_start``; a reader that recovers
on its own may skip it: `GitCache.recover`); a corrupt cache is wiped and the work retried once
(also when a read finds objects missing).  Calls within a process are serialised by a lock.
`GitCache.objects` and `GitCache.sizes` read many objects in one ``git cat-file`` run.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import git

from gitdns.adapters.git.auth import BASE_ENV, GitAuth, auth_env, redact
from gitdns.adapters.git.errors import git_error
from gitdns.errors import ConfigError, RetryableError, UnreachableError

log = logging.getLogger(__name__)

T = TypeVar("T")
OWNER_FILE = "cache.owner"  # beside the cache: flocked by the process using it

_CORRUPT = (
    "not a git repository",
    "bad object",
    "corrupt",
    "did not send all necessary objects",
    "unable to read",
    "missing blob",
    "missing tree",
    "missing commit",
    "is missing",
    "invalid object",
    "broken link",
)


class CacheCorrupt(Exception):
    """A local read or a fetch suggests the cache lost objects.  The cache is wiped only when
    fsck confirms it; otherwise ``fallback`` is raised (for a fetch, the remote's failure)."""

    def __init__(self, message: str, fallback: Exception | None = None) -> None:
        super().__init__(message)
        self.fallback = fallback


class GitCache:
    """The bare cache of ``branch`` of ``url`` below ``workdir`` (see the module docstring)."""

    def __init__(self, url: str, branch: str, workdir: Path, auth: GitAuth, timeout: float,
                 check_on_start: bool = True) -> None:
        self.check_on_start = check_on_start
        self.url = url
        self.branch = branch
        self.workdir = workdir
        self.auth = auth
        self.timeout = timeout
        self.path = workdir / "cache.git"
        self.ref = f"refs/remotes/origin/{branch}"
        self.refspec = f"+refs/heads/{branch}:{self.ref}"
        self._lock = threading.RLock()
        self._started = False
        self._owner_fd: int | None = None  # the flock on OWNER_FILE, held until the process ends

    def with_repo(self, fn: Callable[[git.Repo], T]) -> T:
        """Run ``fn`` on the opened cache; a confirmed corrupt cache is wiped and ``fn`` retried once."""
        with self._lock:
            if not self._started:
                self._start()
            for attempt in (1, 2):
                repo = self._open()
                try:
                    return fn(repo)
                except CacheCorrupt as exc:
                    problem = exc
                finally:
                    repo.close()
                if attempt == 2 or not self._confirm_corrupt():
                    raise problem.fallback or RetryableError(
                        f"git cache {self.path} cannot be read: {problem}", reason="CacheUnreadable"
                    ) from None
                self._wipe(str(problem))
        raise AssertionError("unreachable")  # pragma: no cover

    def _start(self) -> None:
        """Crash recovery: stale locks removed, a corrupt or foreign cache wiped."""
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._started = True
        alone = self._own()
        if not self.path.exists():
            return
        self._clear_locks(max_age=0 if alone else self.timeout)
        try:
            git.Repo(self.path).close()
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self._wipe("not a git repository")
            return
        if self.check_on_start and self._confirm_corrupt():
            self._wipe("fsck found missing or corrupt objects")

    def _own(self) -> bool:
        """Whether no other process uses this cache: an exclusive flock on `OWNER_FILE`, taken
        once and kept while this object lives (the kernel drops it when the process ends,
        however it ends).  Another holder: False, and only locks older than the timeout are stale."""
        if self._owner_fd is None:
            fd = os.open(self.workdir / OWNER_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                log.info("shared: cache=%s another process uses it; stale locks are those older than %gs",
                         self.path, self.timeout)
                return False
            self._owner_fd = fd
            weakref.finalize(self, os.close, fd)
        return True

    def recover(self) -> bool:
        """After a read found objects missing: True when fsck confirms the cache is corrupt (it
        is wiped then, and the caller may start over), False when it is not."""
        with self._lock:
            if not self._confirm_corrupt():
                return False
            self._wipe("fsck found missing or corrupt objects")
            return True

    def objects(self, ids: Iterable[str]) -> dict[str, tuple[str, bytes]]:
        """{id: (type, content)} of every object of ``ids``, in one ``git cat-file --batch``;
        a missing object raises CacheCorrupt."""
        wanted = list(dict.fromkeys(ids))
        out: dict[str, tuple[str, bytes]] = {}
        if not wanted:
            return out
        data = self._cat(["--batch"], wanted)
        at = 0
        for oid in wanted:
            end = data.index(b"\n", at)
            header = data[at:end].split()
            if len(header) != 3:
                raise CacheCorrupt(f"object {oid} is missing")
            size = int(header[2])
            out[oid] = (header[1].decode(), data[end + 1:end + 1 + size])
            at = end + 2 + size
        return out

    def sizes(self, ids: Iterable[str]) -> dict[str, int]:
        """{id: size in bytes}, in one ``git cat-file --batch-check``; a missing object raises CacheCorrupt."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        out: dict[str, int] = {}
        for oid, line in zip(wanted, self._cat(["--batch-check"], wanted).splitlines(), strict=False):
            header = line.split()
            if len(header) != 3:
                raise CacheCorrupt(f"object {oid} is missing")
            out[oid] = int(header[2])
        if len(out) != len(wanted):
            raise CacheCorrupt("git cat-file answered for fewer objects than asked")
        return out

    def _cat(self, mode: list[str], ids: list[str]) -> bytes:
        if any(len(oid) not in (40, 64) or not all(c in "0123456789abcdef" for c in oid) for oid in ids):
            raise ValueError("object ids must be full hexadecimal ids")
        try:
            done = subprocess.run(["git", f"--git-dir={self.path}", "cat-file", *mode],
                                  input="".join(oid + "\n" for oid in ids).encode(), capture_output=True,
                                  env={**os.environ, **BASE_ENV}, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise RetryableError(f"git cat-file did not finish within {self.timeout:g}s",
                                 reason="GitTimeout") from None
        if done.returncode != 0:
            raise CacheCorrupt(last_line(done.stderr.decode("utf-8", "replace")))
        return done.stdout

    def _open(self) -> git.Repo:
        if not (self.path / "HEAD").is_file():
            repo = git.Repo.init(self.path, bare=True, mkdir=True)
            with repo.config_writer() as config:
                config.set_value("gc", "autoDetach", "false")  # no background gc holding locks
            log.info("created: cache=%s", self.path)
            return repo
        try:
            return git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self._wipe("not a git repository")
            return self._open()

    def _confirm_corrupt(self) -> bool:
        try:
            repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            return True
        try:
            status, _, err = self.run(repo, ["fsck", "--connectivity-only", "--no-dangling", "--no-progress"])
        except RetryableError as exc:  # fsck timed out: not proof of corruption
            log.warning("skipped: check=fsck cache=%s error=%s", self.path, exc)
            return False
        finally:
            repo.close()
        if status != 0:
            log.warning("checked: cache=%s fsck=failed error=%s", self.path, last_line(err))
        return status != 0

    def _wipe(self, why: str) -> None:
        log.warning("wiped: cache=%s why=%s", self.path, why)
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            self.path.unlink(missing_ok=True)

    def _clear_locks(self, max_age: float) -> None:
        """Remove lock files at least ``max_age`` seconds old (a killed git's leftovers)."""
        if not self.path.is_dir():
            return
        now = time.time()
        for lock in [*self.path.glob("*.lock"), *(self.path / "refs").rglob("*.lock")]:
            try:
                age = now - lock.stat().st_mtime
                if age >= max_age:
                    lock.unlink()
                    log.warning("removed: lock=%s age=%.0fs", lock.relative_to(self.path), age)
            except FileNotFoundError:
                continue

    def shallow(self) -> bool:
        return (self.path / "shallow").is_file()

    def run(self, repo: git.Repo, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
        """Run one local git command with the timeout; (status, stdout, stderr)."""
        status, out, err = _execute(repo, args, {**BASE_ENV, **(env or {})}, self.timeout, self._owner_fd)
        if _timed_out(status, err):
            self._clear_locks(max_age=0)  # we killed the only writer
            raise RetryableError(f"git {args[0]} did not finish within {self.timeout:g}s", reason="GitTimeout")
        return status, out, err

    def net(self, repo: git.Repo, args: list[str]) -> str:
        """Run a git command that talks to the remote; failures become gitdns errors."""
        self._clear_locks(max_age=self.timeout)
        env, secrets = auth_env(self.auth, self.workdir, self.timeout)
        status, out, err = _execute(repo, args, env, self.timeout, self._owner_fd)
        if status == 0:
            return out
        remote = redact(self.url, secrets)
        if _timed_out(status, err):
            self._clear_locks(max_age=0)
            log.warning("timed out: command=%s url=%s timeout=%gs", args[0], remote, self.timeout)
            raise UnreachableError(f"git {args[0]} {remote}: no answer within {self.timeout:g}s")
        detail = redact(last_line(err), secrets)
        lowered = err.lower()
        if "couldn't find remote ref" in lowered and self.refspec in args:
            raise ConfigError(f"branch {self.branch} does not exist on {remote}")
        if "file exists" in lowered and ".lock" in lowered:
            raise RetryableError(f"git {args[0]}: the cache {self.path} is locked: {detail}", reason="CacheBusy")
        failure = git_error(args[0], self.url, err, secrets)  # ssh's and curl's own diagnosis, classified
        log.warning("failed: command=%s url=%s status=%d reason=%s error=%s", args[0], remote, status,
                    failure.reason, failure)
        if isinstance(failure, UnreachableError) and any(marker in lowered for marker in _CORRUPT):
            raise CacheCorrupt(detail, failure)
        raise failure


def _execute(repo: git.Repo, args: list[str], env: dict[str, str], timeout: float,
             owner_fd: int | None) -> tuple[int, str, str]:
    """Run git; it inherits the owner flock's descriptor, so that a git outliving a killed
    parent still holds the cache and its locks are not taken for stale."""
    result: Any = repo.git.execute(
        ["git", *args],
        kill_after_timeout=timeout,
        env=env,
        with_extended_output=True,
        with_exceptions=False,
        pass_fds=() if owner_fd is None else (owner_fd,),
    )
    status, out, err = result
    return int(status), str(out), str(err)


def _timed_out(status: int, err: str) -> bool:
    return status == -9 or "did not complete in" in err


def read_object(fn: Callable[[], T]) -> T:
    """Run a gitpython object read; missing or unreadable objects become CacheCorrupt."""
    try:
        return fn()
    except KeyError:
        raise
    except (ValueError, OSError, git.GitCommandError, git.exc.BadObject, git.exc.BadName) as exc:
        raise CacheCorrupt(f"{type(exc).__name__}: {exc}") from None


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    fatal = [line for line in lines if line.lower().startswith(("fatal:", "error:"))]
    return (fatal or lines or ["no output"])[0][:300]  # git's first fatal line is the specific one
