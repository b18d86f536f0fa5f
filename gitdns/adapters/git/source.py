"""The agent's git source: a shallow bare cache of one branch, read without a checkout.

    GitSource(url, branch=, path=, workdir=, auth=, timeout=, verify=, limits=)
        remote_head()           sha of refs/heads/<branch> on the remote (ls-remote; cheap)
        fetch(sha=None)         Fetched: the head (or ``sha``) with its YAML files, verified
        is_descendant(new, old) fast-forward check; deepens the shallow cache as needed
        files_at(sha)           the YAML files of any commit (fetched when missing)
        log(paths, max_count)   CommitInfo list, full history (unshallowed on demand)

Layout of ``workdir``: ``cache.git`` (the bare cache, `gitdns.adapters.git.cache`),
``cache.owner`` (flocked by the process using the cache), ``askpass.sh`` (see gitauth) and
``gnupg/`` (see gitverify).  The branch lands in
``refs/remotes/origin/<branch>``; no remote is configured, so no URL is ever written to git
config.

Every git command runs with ``kill_after_timeout``; a timeout or a failed network command is
an ``UnreachableError`` (retryable) whose message names the remote without credentials.
The cache survives every network failure.  On the first use, lock files a killed git left
are removed (all of them when no other process uses the cache, else those older than the
timeout: `gitdns.adapters.git.cache`) and ``git fsck --connectivity-only`` checks the cache; a
corrupt cache is wiped and fetched again (also when a read finds objects missing).

is_descendant deepens a shallow cache by 64, then 256 more commits, then unshallows: the
answer is always exact, and costs the full history of the branch only when the old commit
is not within ~320 commits of the new one (a force-push, or unrelated history).

Not thread-safe across processes (one workdir per source); calls within a process are
serialised by a lock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import git

from gitdns.adapters.git.auth import GitAuth, check_url, redact
from gitdns.adapters.git.cache import CacheCorrupt, GitCache, last_line, read_object
from gitdns.adapters.git.verify import SignatureRefusedError, Verifier, VerifyPolicy
from gitdns.core.limits import DEFAULT_LIMITS, ReadBudget, ReadLimits, symlink
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
    "yaml_blobs",
]

log = logging.getLogger(__name__)

DEEPEN_STEPS = (64, 256)  # then --unshallow
_SUFFIXES = (".yaml", ".yml")
_SHA = re.compile(r"^[0-9a-fA-F]{4,64}$")
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)[^\s~^:?*\[\\]+(?<![/.])(?<!\.lock)$")
_LOG_SEP, _LOG_END = "\x1f", "\x1e"


class RevisionNotFoundError(RetryableError):
    """The asked commit is neither in the cache nor fetchable from the remote (it may have
    been force-pushed away; the next remote_head gives the current one)."""

    reason = "RevisionNotFound"


@dataclass(frozen=True, slots=True)
class Fetched:
    sha: str
    revision: Revision
    message: str
    author: str  # "Name <email>"
    files: dict[str, str]  # *.yaml/*.yml below `path`, relative posix paths, hidden dirs skipped
    # (a symlink or a file over the read limits is an Unread: see yaml_blobs)


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
        limits: ReadLimits = DEFAULT_LIMITS,
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
        self.limits = limits
        self._git = GitCache(url, branch, self.workdir, auth, self.timeout)
        self.cache = self._git.path
        self.ref = self._git.ref
        self._verifier = Verifier(verify, self.workdir / "gnupg", self.timeout) if verify is not None else None

    def __repr__(self) -> str:
        return f"GitSource({redact(self.url)!r}, branch={self.branch!r}, path={self.path!r})"

    # -- public API -----------------------------------------------------------------------

    def remote_head(self) -> str:
        """The sha of ``refs/heads/<branch>`` on the remote, without fetching objects."""
        ls_remote = ["ls-remote", "--", self.url, f"refs/heads/{self.branch}"]
        out = self._git.with_repo(lambda repo: self._git.net(repo, ls_remote))
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
            commit = read_object(lambda: repo.commit(target))
            if self._verifier is not None:
                signature = str(commit.gpgsig or "")
                self._verifier.verify(target, signature, lambda args, env: self._git.run(repo, args, env))
            files = self._files(commit)
            message = commit.message if isinstance(commit.message, str) else commit.message.decode()
            fetched = Fetched(target, Revision(int(commit.committed_date), target), message, _who(commit), files)
            log.info("fetched: url=%s sha=%s files=%d", redact(self.url), target[:12], len(files))
            return fetched

        return self._git.with_repo(run)

    def files_at(self, sha: str) -> dict[str, str]:
        """The YAML files of commit ``sha`` (from the cache, else fetched by sha)."""

        def run(repo: git.Repo) -> dict[str, str]:
            target = self._ensure(repo, sha)
            return self._files(read_object(lambda: repo.commit(target)))

        return self._git.with_repo(run)

    def revision_at(self, sha: str) -> Revision:
        """Commit ``sha``'s revision (its committer time), from the cache, else fetched by sha."""

        def run(repo: git.Repo) -> Revision:
            target = self._ensure(repo, sha)
            return Revision(int(read_object(lambda: repo.commit(target)).committed_date), target)

        return self._git.with_repo(run)

    def is_descendant(self, new: str, old: str) -> bool:
        """True when ``old`` is ``new`` or one of its ancestors; False for a force-push back
        to an older commit or onto unrelated history.  Deepens the cache as needed."""

        def run(repo: git.Repo) -> bool:
            new_sha = self._ensure(repo, new)
            for step in (*DEEPEN_STEPS, 0):
                answer = self._ancestry(repo, new_sha, old)
                if answer is not None:
                    return answer
                if not self._git.shallow():
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
        return self._git.with_repo(run)

    def log(self, paths: Sequence[str] = (), max_count: int = 200) -> list[CommitInfo]:
        """Commits of the branch touching ``paths`` (relative to ``path``; default all of it),
        newest first, from the full history (the cache is unshallowed on demand)."""

        def run(repo: git.Repo) -> list[CommitInfo]:
            self._fetch(repo, "--unshallow" if self._git.shallow() else "")
            wanted = [_join(self.path, _normalise_path(p)) for p in paths] or ([self.path] if self.path else [])
            fmt = _LOG_SEP.join(("%H", "%ct", "%an <%ae>", "%B")) + _LOG_END
            args = ["log", f"--max-count={max_count}", f"--format={fmt}", self.ref, "--", *wanted]
            status, out, err = self._git.run(repo, args)
            if status != 0:
                raise CacheCorrupt(last_line(err))
            return [_commit_info(entry) for entry in out.split(_LOG_END) if entry.strip()]

        return self._git.with_repo(run)

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
        self._fetch(repo, "--depth=1" if self._git.shallow() or not self._resolve(repo, self.ref) else "")
        target = self._resolve(repo, sha or self.ref)
        if target:
            return target
        if sha is None:
            raise CacheCorrupt(f"{self.ref} is missing after a successful fetch")
        if len(sha) < 40:
            raise RevisionNotFoundError(f"commit {sha} is not in the cache; give the full sha to fetch it")
        try:
            self._git.net(repo, ["fetch", "--no-tags", "--quiet", "--depth=1", "--", self.url, sha])
        except UnreachableError as exc:
            if "not our ref" in str(exc).lower() or "couldn't find remote ref" in str(exc).lower():
                raise RevisionNotFoundError(f"commit {sha} is not on {redact(self.url)}") from None
            raise
        target = self._resolve(repo, sha)
        if not target:
            raise RevisionNotFoundError(f"commit {sha} was not fetched from {redact(self.url)}")
        return target

    def _resolve(self, repo: git.Repo, rev: str) -> str:
        status, out, _ = self._git.run(repo, ["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"])
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
        status, _, err = self._git.run(repo, ["merge-base", "--is-ancestor", ancestor, sha])
        if status not in (0, 1):
            raise CacheCorrupt(last_line(err))
        return status == 0

    def _fetch(self, repo: git.Repo, mode: str) -> None:
        args = ["fetch", "--no-tags", "--quiet", *([mode] if mode else []), "--", self.url, self._git.refspec]
        self._git.net(repo, args)

    def _files(self, commit: git.Commit) -> dict[str, str]:
        root: git.Tree = read_object(lambda: commit.tree)
        if not self.path:
            return read_object(lambda: yaml_blobs(root, "", self.limits))
        try:
            sub = read_object(lambda: root / self.path)
        except KeyError:
            raise ConfigError(f"path {self.path} does not exist in commit {commit.hexsha}") from None
        if not isinstance(sub, git.Tree):
            raise ConfigError(f"path {self.path} in commit {commit.hexsha} is not a directory")
        return read_object(lambda: yaml_blobs(sub, self.path, self.limits))


def yaml_blobs(tree: git.Tree, prefix: str, limits: ReadLimits = DEFAULT_LIMITS) -> dict[str, str]:
    """The ``*.yaml``/``*.yml`` blobs below ``tree`` (paths relative to ``prefix``, hidden
    directories and files skipped), sorted by path, read as `gitdns.adapters.repo.read_tree`
    reads a checkout: a symlink (mode 120000) is an `Unread`, never resolved; a blob over
    ``limits`` is one too, its size taken from the object header before any of it is read."""
    found: dict[str, git.Blob] = {}
    for item in tree.traverse():
        if not isinstance(item, git.Blob):
            continue
        name = str(item.path)
        rel = name[len(prefix) + 1 :] if prefix else name
        if rel.endswith(_SUFFIXES) and not any(part.startswith(".") for part in rel.split("/")):
            found[rel] = item
    budget = ReadBudget(limits)
    files: dict[str, str] = {}
    for rel in sorted(found):
        blob = found[rel]
        if blob.mode == git.Blob.link_mode:
            files[rel] = symlink()
            continue
        refused = budget.refuse(blob.size)
        files[rel] = refused if refused is not None else blob.data_stream.read().decode("utf-8", errors="replace")
    return files


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
