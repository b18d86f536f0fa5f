"""The agent's git source: a shallow bare cache of one branch, read without a checkout.

    GitSource(url, branch=, path=, workdir=, auth=, timeout=, verify=)
        remote_head()           sha of refs/heads/<branch> on the remote (ls-remote; cheap)
        fetch(sha=None)         Fetched: the head (or ``sha``) with its YAML files, verified
        is_descendant(new, old) fast-forward check; deepens the shallow cache as needed
        files_at(sha)           the YAML files of any commit (fetched when missing)
        log(paths, max_count)   CommitInfo list, full history (unshallowed on demand)

Layout of ``workdir``: ``cache.git`` (the bare cache), ``askpass.sh`` (see gitauth) and
``gnupg/`` (see gitverify).  The branch lands in ``refs/remotes/origin/<branch>``; no remote
is configured, so no URL is ever written to git config.

Every git command runs with ``kill_after_timeout``; a timeout or a failed network command is
an ``UnreachableError`` (retryable) whose message names the remote without credentials.
The cache survives every network failure.  On the first use, lock files older than the
timeout (left by a killed git) are removed and ``git fsck --connectivity-only`` checks the
cache; a corrupt cache is wiped and fetched again (also when a read finds objects missing).

is_descendant deepens a shallow cache by 64, then 256 more commits, then unshallows: the
answer is always exact, and costs the full history of the branch only when the old commit
is not within ~320 commits of the new one (a force-push, or unrelated history).

Not thread-safe across processes (one workdir per source); calls within a process are
serialised by a lock.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import git

from gitdns.adapters.gitauth import BASE_ENV, GitAuth, auth_env, check_url, redact
from gitdns.adapters.giterrors import git_error
from gitdns.adapters.gitverify import SignatureRefusedError, Verifier, VerifyPolicy
from gitdns.core.model import Revision
from gitdns.errors import ConfigError, RetryableError, UnreachableError

__all__ = [
    "CommitInfo",
    "Fetched",
    "GitAuth",
    "GitSource",
    "RevisionNotFoundError",
    "SignatureRefusedError",
    "VerifyPolicy",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

DEEPEN_STEPS = (64, 256)  # then --unshallow
_SUFFIXES = (".yaml", ".yml")
_SHA = re.compile(r"^[0-9a-fA-F]{4,64}$")
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)[^\s~^:?*\[\\]+(?<![/.])(?<!\.lock)$")
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
_LOG_SEP, _LOG_END = "\x1f", "\x1e"


class RevisionNotFoundError(RetryableError):
    """The asked commit is neither in the cache nor fetchable from the remote (it may have
    been force-pushed away; the next remote_head gives the current one)."""

    reason = "RevisionNotFound"


class _Corrupt(Exception):
    """A local read or a fetch suggests the cache lost objects.  The cache is wiped only when
    fsck confirms it; otherwise ``fallback`` is raised (for a fetch, the remote's failure)."""

    def __init__(self, message: str, fallback: Exception | None = None) -> None:
        super().__init__(message)
        self.fallback = fallback


@dataclass(frozen=True, slots=True)
class Fetched:
    sha: str
    revision: Revision
    message: str
    author: str  # "Name <email>"
    files: dict[str, str]  # *.yaml/*.yml below `path`, relative posix paths, hidden dirs skipped


@dataclass(frozen=True, slots=True)
class CommitInfo:
    sha: str
    revision: Revision
    author: str  # "Name <email>"
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


class GitSource:
    def __init__(
        self,
        url: str,
        *,
        branch: str = "main",
        path: str = "",
        workdir: Path,
        auth: GitAuth = GitAuth(),  # noqa: B008 - frozen value
        timeout: float = 30.0,
        verify: VerifyPolicy | None = None,
    ) -> None:
        check_url(url)
        if not _BRANCH.match(branch):
            raise ConfigError(f"git branch name {branch!r} is not a valid branch name")
        if timeout <= 0:
            raise ConfigError(f"git timeout must be positive, not {timeout}")
        self.url = url
        self.branch = branch
        self.path = _normalise_path(path)
        self.workdir = Path(workdir).absolute()  # git runs inside the cache: no relative paths
        self.auth = auth
        self.timeout = float(timeout)
        self.cache = self.workdir / "cache.git"
        self.ref = f"refs/remotes/origin/{branch}"
        self._refspec = f"+refs/heads/{branch}:{self.ref}"
        self._verifier = Verifier(verify, self.workdir / "gnupg", self.timeout) if verify is not None else None
        self._lock = threading.RLock()
        self._started = False

    def __repr__(self) -> str:
        return f"GitSource({redact(self.url)!r}, branch={self.branch!r}, path={self.path!r})"

    # -- public API -----------------------------------------------------------------------

    def remote_head(self) -> str:
        """The sha of ``refs/heads/<branch>`` on the remote, without fetching objects."""
        out = self._with_repo(lambda repo: self._net(repo, ["ls-remote", "--", self.url, f"refs/heads/{self.branch}"]))
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            if ref.strip() == f"refs/heads/{self.branch}":
                log.debug("listed: url=%s branch=%s sha=%s", redact(self.url), self.branch, sha[:12])
                return sha.strip()
        raise ConfigError(f"branch {self.branch} does not exist on {redact(self.url)}")

    def fetch(self, sha: str | None = None) -> Fetched:
        """Fetch the branch head (depth 1) and read ``sha`` (default: the head it fetched).
        With a VerifyPolicy the commit must carry a good signature from a trusted key."""

        def run(repo: git.Repo) -> Fetched:
            target = self._ensure(repo, sha)
            commit = _read(lambda: repo.commit(target))
            if self._verifier is not None:
                self._verifier.verify(target, str(commit.gpgsig or ""), lambda args, env: self._run(repo, args, env))
            files = self._files(commit)
            message = commit.message if isinstance(commit.message, str) else commit.message.decode()
            fetched = Fetched(target, Revision(int(commit.committed_date), target), message, _who(commit), files)
            log.info("fetched: url=%s sha=%s files=%d", redact(self.url), target[:12], len(files))
            return fetched

        return self._with_repo(run)

    def files_at(self, sha: str) -> dict[str, str]:
        """The YAML files of commit ``sha`` (from the cache, else fetched by sha)."""

        def run(repo: git.Repo) -> dict[str, str]:
            target = self._ensure(repo, sha)
            return self._files(_read(lambda: repo.commit(target)))

        return self._with_repo(run)

    def is_descendant(self, new: str, old: str) -> bool:
        """True when ``old`` is ``new`` or one of its ancestors; False for a force-push back
        to an older commit or onto unrelated history.  Deepens the cache as needed."""

        def run(repo: git.Repo) -> bool:
            new_sha = self._ensure(repo, new)
            for step in (*DEEPEN_STEPS, 0):
                answer = self._ancestry(repo, new_sha, old)
                if answer is not None:
                    return answer
                if not self._shallow():
                    return False  # complete history of new, and old is not in it
                mode = f"--deepen={step}" if step else "--unshallow"
                log.info("deepening: url=%s new=%s old=%s mode=%s", redact(self.url), new[:12], old[:12], mode)
                self._fetch(repo, mode)
            return bool(self._ancestry(repo, new_sha, old))

        for sha in (new, old):
            if not _SHA.match(sha):
                raise RevisionNotFoundError(f"{sha!r} is not a commit sha")
        if new == old:
            return True
        return self._with_repo(run)

    def log(self, paths: Sequence[str] = (), max_count: int = 200) -> list[CommitInfo]:
        """Commits of the branch touching ``paths`` (relative to ``path``; default all of it),
        newest first, from the full history (the cache is unshallowed on demand)."""

        def run(repo: git.Repo) -> list[CommitInfo]:
            self._fetch(repo, "--unshallow" if self._shallow() else "")
            wanted = [_join(self.path, _normalise_path(p)) for p in paths] or ([self.path] if self.path else [])
            fmt = _LOG_SEP.join(("%H", "%ct", "%an <%ae>", "%B")) + _LOG_END
            args = ["log", f"--max-count={max_count}", f"--format={fmt}", self.ref, "--", *wanted]
            status, out, err = self._run(repo, args)
            if status != 0:
                raise _Corrupt(_last_line(err))
            return [_commit_info(entry) for entry in out.split(_LOG_END) if entry.strip()]

        return self._with_repo(run)

    # -- the cache ------------------------------------------------------------------------

    def _with_repo(self, fn: Callable[[git.Repo], T]) -> T:
        """Run ``fn`` on the opened cache; a confirmed corrupt cache is wiped and ``fn`` retried once."""
        with self._lock:
            if not self._started:
                self._start()
            for attempt in (1, 2):
                repo = self._open()
                try:
                    return fn(repo)
                except _Corrupt as exc:
                    problem = exc
                finally:
                    repo.close()
                if attempt == 2 or not self._confirm_corrupt():
                    raise problem.fallback or RetryableError(
                        f"git cache {self.cache} cannot be read: {problem}", reason="CacheUnreadable"
                    ) from None
                self._wipe(str(problem))
        raise AssertionError("unreachable")  # pragma: no cover

    def _start(self) -> None:
        """Crash recovery: stale locks removed, a corrupt or foreign cache wiped."""
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._started = True
        if not self.cache.exists():
            return
        self._clear_locks(max_age=self.timeout)
        try:
            git.Repo(self.cache).close()
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self._wipe("not a git repository")
            return
        if self._confirm_corrupt():
            self._wipe("fsck found missing or corrupt objects")

    def _open(self) -> git.Repo:
        if not (self.cache / "HEAD").is_file():
            repo = git.Repo.init(self.cache, bare=True, mkdir=True)
            with repo.config_writer() as config:
                config.set_value("gc", "autoDetach", "false")  # no background gc holding locks
            log.info("created: cache=%s", self.cache)
            return repo
        try:
            return git.Repo(self.cache)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self._wipe("not a git repository")
            return self._open()

    def _confirm_corrupt(self) -> bool:
        try:
            repo = git.Repo(self.cache)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            return True
        try:
            status, _, err = self._run(repo, ["fsck", "--connectivity-only", "--no-dangling", "--no-progress"])
        except RetryableError as exc:  # fsck timed out: not proof of corruption
            log.warning("skipped: check=fsck cache=%s error=%s", self.cache, exc)
            return False
        finally:
            repo.close()
        if status != 0:
            log.warning("checked: cache=%s fsck=failed error=%s", self.cache, _last_line(err))
        return status != 0

    def _wipe(self, why: str) -> None:
        log.warning("wiped: cache=%s why=%s", self.cache, why)
        if self.cache.is_dir() and not self.cache.is_symlink():
            shutil.rmtree(self.cache, ignore_errors=True)
        else:
            self.cache.unlink(missing_ok=True)

    def _clear_locks(self, max_age: float) -> None:
        """Remove lock files at least ``max_age`` seconds old (a killed git's leftovers)."""
        if not self.cache.is_dir():
            return
        now = time.time()
        for lock in [*self.cache.glob("*.lock"), *(self.cache / "refs").rglob("*.lock")]:
            try:
                age = now - lock.stat().st_mtime
                if age >= max_age:
                    lock.unlink()
                    log.warning("removed: lock=%s age=%.0fs", lock.relative_to(self.cache), age)
            except FileNotFoundError:
                continue

    def _shallow(self) -> bool:
        return (self.cache / "shallow").is_file()

    # -- commits ----------------------------------------------------------------------------

    def _ensure(self, repo: git.Repo, sha: str | None) -> str:
        """The full sha of commit ``sha`` (None: the branch head, always fetched).  A commit
        already in the cache is used as is; otherwise the branch is fetched, then the sha."""
        if sha is not None:
            if not _SHA.match(sha):
                raise RevisionNotFoundError(f"{sha!r} is not a commit sha")
            found = self._resolve(repo, sha)
            if found:
                return found
        self._fetch(repo, "--depth=1" if self._shallow() or not self._resolve(repo, self.ref) else "")
        target = self._resolve(repo, sha or self.ref)
        if target:
            return target
        if sha is None:
            raise _Corrupt(f"{self.ref} is missing after a successful fetch")
        if len(sha) < 40:
            raise RevisionNotFoundError(f"commit {sha} is not in the cache; give the full sha to fetch it")
        try:
            self._net(repo, ["fetch", "--no-tags", "--quiet", "--depth=1", "--", self.url, sha])
        except UnreachableError as exc:
            if "not our ref" in str(exc).lower() or "couldn't find remote ref" in str(exc).lower():
                raise RevisionNotFoundError(f"commit {sha} is not on {redact(self.url)}") from None
            raise
        target = self._resolve(repo, sha)
        if not target:
            raise RevisionNotFoundError(f"commit {sha} was not fetched from {redact(self.url)}")
        return target

    def _resolve(self, repo: git.Repo, rev: str) -> str:
        status, out, _ = self._run(repo, ["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"])
        return out.strip() if status == 0 else ""

    def _ancestry(self, repo: git.Repo, new: str, old: str) -> bool | None:
        """True/False when the cache can tell whether ``old`` precedes ``new``; None when not yet."""
        old_sha = self._resolve(repo, old)
        if not old_sha:
            return None
        if old_sha == new or self._is_ancestor(repo, old_sha, new):
            return True
        if self._is_ancestor(repo, new, old_sha):
            return False  # new is older than old: a force-push backwards
        return None

    def _is_ancestor(self, repo: git.Repo, ancestor: str, sha: str) -> bool:
        status, _, err = self._run(repo, ["merge-base", "--is-ancestor", ancestor, sha])
        if status not in (0, 1):
            raise _Corrupt(_last_line(err))
        return status == 0

    def _fetch(self, repo: git.Repo, mode: str) -> None:
        args = ["fetch", "--no-tags", "--quiet", *([mode] if mode else []), "--", self.url, self._refspec]
        self._net(repo, args)

    def _files(self, commit: git.Commit) -> dict[str, str]:
        root: git.Tree = _read(lambda: commit.tree)
        if not self.path:
            return _read(lambda: _yaml_files(root, ""))
        try:
            sub = _read(lambda: root / self.path)
        except KeyError:
            raise ConfigError(f"path {self.path} does not exist in commit {commit.hexsha}") from None
        if not isinstance(sub, git.Tree):
            raise ConfigError(f"path {self.path} in commit {commit.hexsha} is not a directory")
        return _read(lambda: _yaml_files(sub, self.path))

    # -- running git ------------------------------------------------------------------------

    def _run(self, repo: git.Repo, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
        """Run one local git command with the timeout; (status, stdout, stderr)."""
        status, out, err = _execute(repo, args, {**BASE_ENV, **(env or {})}, self.timeout)
        if _timed_out(status, err):
            self._clear_locks(max_age=0)  # we killed the only writer
            raise RetryableError(f"git {args[0]} did not finish within {self.timeout:g}s", reason="GitTimeout")
        return status, out, err

    def _net(self, repo: git.Repo, args: list[str]) -> str:
        """Run a git command that talks to the remote; failures become gitdns errors."""
        self._clear_locks(max_age=self.timeout)
        env, secrets = auth_env(self.auth, self.workdir, self.timeout)
        status, out, err = _execute(repo, args, env, self.timeout)
        if status == 0:
            return out
        remote = redact(self.url, secrets)
        if _timed_out(status, err):
            self._clear_locks(max_age=0)
            log.warning("timed out: command=%s url=%s timeout=%gs", args[0], remote, self.timeout)
            raise UnreachableError(f"git {args[0]} {remote}: no answer within {self.timeout:g}s")
        detail = redact(_last_line(err), secrets)
        lowered = err.lower()
        if "couldn't find remote ref" in lowered and self._refspec in args:
            raise ConfigError(f"branch {self.branch} does not exist on {remote}")
        if "file exists" in lowered and ".lock" in lowered:
            raise RetryableError(f"git {args[0]}: the cache {self.cache} is locked: {detail}", reason="CacheBusy")
        failure = git_error(args[0], self.url, err, secrets)  # ssh's and curl's own diagnosis, classified
        log.warning("failed: command=%s url=%s status=%d reason=%s error=%s", args[0], remote, status,
                    failure.reason, failure)
        if isinstance(failure, UnreachableError) and any(marker in lowered for marker in _CORRUPT):
            raise _Corrupt(detail, failure)
        raise failure


def _execute(repo: git.Repo, args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    result: Any = repo.git.execute(
        ["git", *args],
        kill_after_timeout=timeout,
        env=env,
        with_extended_output=True,
        with_exceptions=False,
    )
    status, out, err = result
    return int(status), str(out), str(err)


def _timed_out(status: int, err: str) -> bool:
    return status == -9 or "did not complete in" in err


def _read(fn: Callable[[], T]) -> T:
    """Run a gitpython object read; missing or unreadable objects become _Corrupt."""
    try:
        return fn()
    except KeyError:
        raise
    except (ValueError, OSError, git.GitCommandError, git.exc.BadObject, git.exc.BadName) as exc:
        raise _Corrupt(f"{type(exc).__name__}: {exc}") from None


def _yaml_files(tree: git.Tree, prefix: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for item in tree.traverse():
        if not isinstance(item, git.Blob) or item.mode == git.Blob.link_mode:
            continue
        name = str(item.path)
        rel = name[len(prefix) + 1 :] if prefix else name
        if not rel.endswith(_SUFFIXES) or any(part.startswith(".") for part in rel.split("/")):
            continue
        files[rel] = item.data_stream.read().decode("utf-8", errors="replace")
    return dict(sorted(files.items()))


def _who(commit: git.Commit) -> str:
    return f"{commit.author.name} <{commit.author.email}>"


def _commit_info(entry: str) -> CommitInfo:
    sha, when, author, message = entry.lstrip("\n").split(_LOG_SEP, 3)
    return CommitInfo(sha, Revision(int(when), sha), author, message.rstrip("\n"))


def _normalise_path(path: str) -> str:
    parts = [p for p in PurePosixPath(path.strip()).parts if p not in ("/", ".")]
    if ".." in parts:
        raise ConfigError(f"path {path!r} must stay inside the repository (no '..')")
    return "/".join(parts)


def _join(root: str, rel: str) -> str:
    return "/".join(p for p in (root, rel) if p)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    fatal = [line for line in lines if line.lower().startswith(("fatal:", "error:"))]
    return (fatal or lines or ["no output"])[0][:300]  # git's first fatal line is the specific one
