"""The status branches' cache repository and the git commands run in it
(`gitdns.adapters.status.branch`).

`StatusCache` is a bare repository used only as an object store and a record of remote
tips: created atomically (complete or absent), swept of the lock and temporary files a killed
process left, and thrown away on a local git error (it is only a cache; the next use rebuilds
it).  Every git command runs with a timeout; on expiry its whole process group is killed
and `UnreachableError` is raised.  Messages never carry the credentials of a URL.

`run_remote` runs a command that talks to the remote (ls-remote, fetch, push).  When the SSH
server turned the connection away before the key exchange (``GitConnectionRefused``: sshd's
``MaxStartups`` drops unauthenticated connections beyond its limit when a fleet connects at
once), nothing was sent and nothing was checked, so the command is run again after an
exponential backoff with full jitter (`Backoff`: 0.2 s doubling, each pause capped at 5 s, at
most 8 runs within 30 s), which spreads the fleet's reconnections out.  Every other failure
(a host key, a key, a refused push, an unreachable host) is returned at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitdns.adapters.git.auth import GitAuth, auth_env
from gitdns.adapters.git.errors import classify, git_error
from gitdns.errors import ConfigError, GitdnsError, RetryableError, UnreachableError

log = logging.getLogger(__name__)

TMP_DIR = "gitdns-tmp"  # blob contents on their way into hash-object, inside the cache
_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_CACHE_CONFIG = ("[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n[core]\n\tlogAllRefUpdates = false\n"
                 "[fetch]\n\twriteCommitGraph = false\n")
_locks: dict[Path, threading.Lock] = {}
_generations: dict[Path, int] = {}
_locks_guard = threading.Lock()


# -- running git -----------------------------------------------------------------------------


def sanitize(text: str) -> str:
    """``text`` without URL credentials (``https://user:token@host`` -> ``https://***@host``)."""
    return _CREDENTIALS.sub(r"\g<scheme>***@", text)


@dataclass(frozen=True, slots=True)
class GitOut:
    rc: int
    stdout: bytes
    stderr: str


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C", "GIT_NO_REPLACE_OBJECTS": "1"})
    env.update(extra or {})
    return env


def run_git(args: Sequence[str], *, cwd: Path | None, timeout: float, stdin: bytes | None = None,
         env: Mapping[str, str] | None = None) -> GitOut:
    """Run ``git args``; kill its process group after ``timeout`` seconds (UnreachableError)."""
    cmd = ["git", *args]
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(env),
                                start_new_session=True)
    except FileNotFoundError:
        raise ConfigError("the git executable was not found on PATH") from None
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # a daemonised grandchild may hold the pipes
            proc.communicate(timeout=5)
        raise UnreachableError(f"git {args[0]} timed out after {timeout:g}s") from None
    return GitOut(proc.returncode, out, err.decode("utf-8", "replace"))


def remote_env(auth: GitAuth | None, cache: StatusCache) -> dict[str, str]:
    """The transport of one remote operation: the configured key, token or CA (read now, so a
    rotated token file is used at once), else the ambient git configuration."""
    if auth is None or not auth.configured:
        return {}
    env, _ = auth_env(auth, cache.path.parent, cache.timeout)
    return env


@dataclass(frozen=True, slots=True)
class Backoff:
    """How a remote command the SSH server turned away before the key exchange is run again:
    pause ``n`` (from 1) is uniform in [0, min(cap, base * 2**(n-1))] ("full jitter"); at most
    ``attempts`` runs, and no pause that would end more than ``budget`` seconds after the first
    run started."""

    attempts: int = 8
    base: float = 0.2
    cap: float = 5.0
    budget: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def pause(self, n: int) -> float:
        return random.uniform(0.0, min(self.cap, self.base * 2 ** (n - 1)))


REFUSALS = Backoff()
REFUSED = "GitConnectionRefused"  # the one reason run again at once (`gitdns.adapters.git.errors`)


def run_remote(cache: StatusCache, args: Sequence[str], auth: GitAuth | None, *,
               backoff: Backoff | None = None) -> GitOut:
    """Run a git command that talks to the remote, again with backoff and jitter while the SSH
    server turns the connection away before the key exchange (see the module docstring).  The
    last outcome is returned: the caller reads a failure as before."""
    policy = backoff or REFUSALS
    env = remote_env(auth, cache)
    start = policy.clock()
    for attempt in range(1, max(1, policy.attempts) + 1):
        out = cache.run(args, env=env)
        if out.rc == 0 or attempt >= policy.attempts or classify(out.stderr) != REFUSED:
            return out
        delay = policy.pause(attempt)
        if policy.clock() - start + delay > policy.budget:
            return out
        log.info("connection turned away before the key exchange: command=%s attempt=%d retry_in=%.2fs error=%s",
                 args[0], attempt, delay, tail(out.stderr, 200))
        policy.sleep(delay)
    return out


def tail(text: str, limit: int = 400) -> str:
    text = sanitize(" ".join(text.split()))
    return text if len(text) <= limit else "..." + text[-limit:]


def remote_error(op: str, url: str, out: GitOut) -> GitdnsError:
    """ssh's and curl's own diagnosis, classified (`gitdns.adapters.git.errors`)."""
    return git_error(op, sanitize(url), out.stderr)


def fetch_error(cache: StatusCache, url: str, out: GitOut) -> GitdnsError:
    """A failed fetch: the cache's fault (a lock left behind) resets it, else the remote's."""
    if ".lock" in out.stderr or "cannot lock ref" in out.stderr:
        cache.reset()
        return RetryableError(f"git fetch could not update the status cache {cache.path}: {tail(out.stderr)}",
                              reason="StatusCacheError")
    return remote_error("fetch", url, out)


# -- the cache repository --------------------------------------------------------------------


class StatusCache:
    """A bare repository used only as an object store and a record of remote tips."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.key = Path(os.path.abspath(path))
        self.timeout = timeout
        with _locks_guard:
            self.lock = _locks.setdefault(self.key, threading.Lock())

    @property
    def generation(self) -> int:
        """Bumped whenever this cache directory is thrown away (shared by every user in the process)."""
        return _generations.get(self.key, 0)

    def ensure(self, *, sweep: bool) -> None:
        """Create the cache if missing or half-made; with ``sweep`` (on start), remove what a
        killed process may have left: lock and temporary files.  Call with ``self.lock`` held."""
        if not self._valid():
            self._create()
        elif sweep:
            self._sweep()

    def _valid(self) -> bool:
        return all((self.path / name).exists() for name in ("HEAD", "config", "objects", "refs"))

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            log.warning("reset cache: path=%s reason=incomplete", self.path)
            shutil.rmtree(self.path, ignore_errors=True)
        tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(tmp, ignore_errors=True)
        self._check(run_git(["init", "--bare", "-q", str(tmp)], cwd=None, timeout=self.timeout), "init")
        with open(tmp / "config", "a", encoding="utf-8") as config:  # no gc: objects are never pruned mid-publish
            config.write(_CACHE_CONFIG)
        try:
            os.rename(tmp, self.path)  # atomic: a cache is complete or absent
        except OSError:  # another thread/process made it first
            shutil.rmtree(tmp, ignore_errors=True)
            if not self._valid():
                raise

    def _sweep(self) -> None:
        for path in self.path.rglob("*"):
            name = path.name
            if path.is_file() and (name.endswith(".lock") or name.startswith(("tmp_obj_", "tmp_pack_", "tmp_idx_"))):
                log.info("remove stale file: path=%s", path)
                with contextlib.suppress(OSError):
                    path.unlink()
        for tmp in [*self.path.parent.glob(f"{self.path.name}.tmp-*"), self.path / TMP_DIR]:
            shutil.rmtree(tmp, ignore_errors=True)

    def reset(self) -> None:
        """Throw the cache away (it is only a cache); the next use rebuilds it."""
        log.warning("reset cache: path=%s reason=local-git-error", self.path)
        shutil.rmtree(self.path, ignore_errors=True)
        with _locks_guard:
            _generations[self.key] = _generations.get(self.key, 0) + 1

    def run(self, args: Sequence[str], *, stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> GitOut:
        return run_git(args, cwd=self.path, timeout=self.timeout, stdin=stdin, env=env)

    def local(self, args: Sequence[str], *, stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> bytes:
        """A local plumbing command that must succeed; a failure resets the cache."""
        out = self.run(args, stdin=stdin, env=env)
        self._check(out, args[0])
        return out.stdout

    def _check(self, out: GitOut, op: str) -> None:
        if out.rc != 0:
            if self._valid():
                self.reset()
            raise RetryableError(f"git {op} failed in the status cache {self.path}: {tail(out.stderr)}",
                                 reason="StatusCacheError")

    def has_commit(self, sha: str) -> bool:
        return self.run(["cat-file", "-e", f"{sha}^{{commit}}"]).rc == 0

    def ref(self, name: str) -> str | None:
        out = self.run(["rev-parse", "-q", "--verify", f"{name}^{{commit}}"])
        if out.rc != 0:
            return None
        return out.stdout.decode().strip() or None
