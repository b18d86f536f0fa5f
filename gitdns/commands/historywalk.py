"""The git side of `gitdns history`: one fetch, a few ``git log`` calls, trees read by id.

    Walk(url, branch=, path=, workdir=, auth=, timeout=)
        .commits(since=, until=, max_count=) -> (list[Commit] oldest first, baseline | None, truncated)
        .files_at(sha) -> {rel path: text}      YAML below ``path``; subtrees and blobs memoised by id
        .tree_key(sha) -> tuple                 the (path, blob id) pairs of those files
        .marks(shas) -> {sha: %G?}              git's signature mark, for the commits shown only
        .merged_by(sha) -> Commit | None        the first-parent merge that brought ``sha`` in
        .status() -> list[StatusCommit]         every status branch, oldest first per branch

The desired branch and every ``gitdns-status/*`` branch come with ONE ``git fetch`` into the
bare cache (`gitdns.adapters.gitcache`), unshallowed when a shallow cache is found.  The
commits that touched ``*.yaml``/``*.yml`` below ``path`` come from one path-limited
``git log``; the parent graph (for the merge that brought each commit to the branch) from one
``git rev-list --parents``; the status branches from one ``git log --raw`` over all of them
(only the commits that changed ``summary.yaml`` or ``health.yaml``), their blobs read once
each.  Nothing is checked out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitdns.adapters.gitauth import GitAuth
from gitdns.adapters.gitcache import CacheCorrupt, GitCache, last_line, read_object
from gitdns.core.limits import DEFAULT_LIMITS, ReadBudget, symlink
from gitdns.core.statusdoc import load as load_status
from gitdns.errors import ConfigError

STATUS_PREFIX = "gitdns-status/"
STATUS_REFS = "refs/gitdns-status/"
_SEP, _END = "\x1f", "\x1e"
_SUFFIXES = (".yaml", ".yml")
LINK_MODE = 0o120000  # a symlink: never resolved, read as an Unread
_PR = re.compile(r"^Merge pull request #(\d+)")
_MR = re.compile(r"See merge request [^!\s]*!(\d+)")


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    time: int  # committer time
    author: str  # "Name <email>"
    author_time: int
    committer: str
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def pr(self) -> int | None:
        """The pull/merge request a merge commit's message names (GitHub, GitLab), else None."""
        found = _PR.match(self.subject) or _MR.search(self.message)
        return int(found.group(1)) if found else None


@dataclass(frozen=True, slots=True)
class StatusCommit:
    """One status-branch commit that changed summary.yaml or health.yaml, as read back."""

    cluster_id: str
    sha: str
    time: int
    cluster: str  # summary.yaml "cluster" (metadata.name), else the id
    applied: str  # summary.yaml appliedRevision ("" when none)
    unhealthy: frozenset[str]  # health.yaml target ids ("host|address") in state unhealthy
    health_known: bool  # health.yaml present in this commit


class Walk:
    def __init__(self, url: str, *, branch: str, path: str, workdir: Path, auth: GitAuth,
                 timeout: float) -> None:
        self.path = path
        self._git = GitCache(url, branch, workdir, auth, timeout)
        self.ref = self._git.ref
        self.url = url
        self._repo: Any = None
        self._trees: dict[str, tuple[tuple[str, str, int, int], ...]] = {}  # tree id -> yaml entries below
        self._blobs: dict[str, str] = {}
        self._parents: dict[str, tuple[str, ...]] = {}
        self._brought: dict[str, str] | None = None
        self._known: dict[str, Commit] = {}

    # -- git plumbing ---------------------------------------------------------------------------

    def __enter__(self) -> Walk:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    def _run(self, args: list[str]) -> str:
        repo = self.repo()
        status, out, err = self._git.run(repo, args)
        if status != 0:
            raise CacheCorrupt(last_line(err))
        return out

    def repo(self) -> Any:  # a gitpython Repo (commands do not import git)
        if self._repo is None:
            self._repo = self._git.with_repo(lambda r: type(r)(r.git_dir))
        return self._repo

    def fetch(self, status: bool = True) -> None:
        """The branch, full history, and (``status``) every status branch, in one fetch."""
        specs = [self._git.refspec] + ([f"+refs/heads/{STATUS_PREFIX}*:{STATUS_REFS}*"] if status else [])

        def run(repo: Any) -> None:
            mode = ["--unshallow"] if self._git.shallow() else []
            self._git.net(repo, ["fetch", "--no-tags", "--quiet", "--prune", *mode, "--", self.url, *specs])

        self._git.with_repo(run)

    # -- the desired branch ---------------------------------------------------------------------

    def commits(self, *, since: str | None = None, until: str | None = None,
                max_count: int = 0) -> tuple[list[Commit], Commit | None, bool]:
        """The YAML commits (oldest first) within the window, the commit before the first (the
        baseline), and whether older YAML commits exist than the ``max_count`` newest."""
        paths = [f"{self.path}/{p}" if self.path else p for p in ("*.yaml", "*.yml")]
        fmt = _SEP.join(("%H", "%P", "%ct", "%an <%ae>", "%at", "%cn <%ce>", "%B")) + _END
        window = [f"--since={since}"] if since else []
        window += [f"--until={until}"] if until else []
        limit = [f"--max-count={max_count + 1}"] if max_count > 0 else []
        newest_first = self._parse(self._run(["log", f"--format={fmt}", *window, *limit, self.ref, "--", *paths]))
        truncated = max_count > 0 and len(newest_first) > max_count
        if truncated:
            newest_first = newest_first[:max_count]
        baseline: Commit | None = None
        if newest_first:
            older = self._parse(self._run(["log", f"--format={fmt}", "--max-count=1", f"{newest_first[-1].sha}^@",
                                           "--", *paths])) if newest_first[-1].parents else []
            baseline = older[0] if older else None
        for c in newest_first:
            self._known[c.sha] = c
        return list(reversed(newest_first)), baseline, truncated

    @staticmethod
    def _parse(out: str) -> list[Commit]:
        found: list[Commit] = []
        for entry in out.split(_END):
            if not entry.strip():
                continue
            sha, parents, ctime, author, atime, committer, message = entry.lstrip("\n").split(_SEP, 6)
            found.append(Commit(sha, tuple(parents.split()), int(ctime), author, int(atime), committer,
                                message.rstrip("\n")))
        return found

    def files_at(self, sha: str) -> dict[str, str]:
        """The YAML files of ``sha`` below ``path``, read as `gitsource.yaml_blobs` reads them."""
        entries = self._entries(sha)
        budget = ReadBudget(DEFAULT_LIMITS)
        files: dict[str, str] = {}
        for rel, blob, mode, size in entries:
            if mode == LINK_MODE:
                files[rel] = symlink()
                continue
            refused = budget.refuse(size)
            if refused is not None:
                files[rel] = refused
                continue
            text = self._blobs.get(blob)
            if text is None:
                text = self._blobs[blob] = self._blob(blob)
            files[rel] = text
        return files

    def tree_key(self, sha: str) -> tuple[tuple[str, str], ...]:
        return tuple((rel, blob) for rel, blob, _, _ in self._entries(sha))

    def _entries(self, sha: str) -> tuple[tuple[str, str, int, int], ...]:
        root: Any = read_object(lambda: self.repo().commit(sha).tree)
        if self.path:
            try:
                root = read_object(lambda: root / self.path)
            except KeyError:
                return ()  # the directory does not exist yet at this commit: no files
            if root.type != "tree":
                raise ConfigError(f"path {self.path} in commit {sha} is not a directory")
        return self._below(root, "")

    def _below(self, tree: Any, prefix: str) -> tuple[tuple[str, str, int, int], ...]:
        """(rel path, blob id, mode, size) of the YAML files below ``tree``, sorted; per tree id."""
        memo = self._trees.get(tree.hexsha)
        if memo is not None:
            return tuple((prefix + rel, b, m, s) for rel, b, m, s in memo)
        out: list[tuple[str, str, int, int]] = []
        for item in tree:
            name = str(item.name)
            if name.startswith("."):
                continue
            if item.type == "tree":
                out.extend(self._below(item, name + "/"))
            elif item.type == "blob" and name.endswith(_SUFFIXES):
                out.append((name, item.hexsha, item.mode, item.size))
        out.sort()
        self._trees[tree.hexsha] = tuple(out)
        return tuple((prefix + rel, b, m, s) for rel, b, m, s in out)

    def marks(self, shas: Iterable[str]) -> dict[str, str]:
        """git's ``%G?`` for each commit (G good, B bad, U untrusted, E cannot check, N none...)."""
        wanted = sorted(set(shas))
        if not wanted:
            return {}
        out = self._run(["log", "--no-walk=unsorted", "--format=%H %G?", *wanted])
        return {sha: mark for sha, _, mark in (line.partition(" ") for line in out.splitlines() if line)}

    def merged_by(self, sha: str) -> Commit | None:
        """The merge commit on the branch's first-parent line that brought ``sha`` in (None when
        ``sha`` is on that line itself)."""
        if self._brought is None:
            self._brought = self._bring()
        merge = self._brought.get(sha)
        if merge is None:
            return None
        if merge not in self._known:
            fmt = _SEP.join(("%H", "%P", "%ct", "%an <%ae>", "%at", "%cn <%ce>", "%B")) + _END
            for c in self._parse(self._run(["log", "--no-walk", f"--format={fmt}", merge])):
                self._known[c.sha] = c
        return self._known.get(merge)

    def _bring(self) -> dict[str, str]:
        """{commit: merge} for every commit reached only through a merge's second+ parent."""
        for line in self._run(["rev-list", "--parents", self.ref]).splitlines():
            sha, *parents = line.split()
            self._parents[sha] = tuple(parents)
        chain: list[str] = []
        at: str | None = self._run(["rev-parse", self.ref]).strip()
        while at:
            chain.append(at)
            ps = self._parents.get(at, ())
            at = ps[0] if ps else None
        seen = set(chain)
        brought: dict[str, str] = {}
        for merge in reversed(chain):  # oldest first: what the first parent reaches is seen already
            stack = list(self._parents.get(merge, ())[1:])
            while stack:
                c = stack.pop()
                if c in seen:
                    continue
                seen.add(c)
                brought[c] = merge
                stack.extend(self._parents.get(c, ()))
        return brought

    def order(self) -> dict[str, int]:
        """Every commit of the branch: sha -> position, oldest first (topological)."""
        out = self._run(["rev-list", "--topo-order", "--reverse", self.ref])
        return {sha: i for i, sha in enumerate(out.split())}

    # -- status branches ------------------------------------------------------------------------

    def status(self) -> list[StatusCommit]:
        """Every status branch's commits that changed summary.yaml or health.yaml, oldest first."""
        refs = self._run(["for-each-ref", "--format=%(refname)", STATUS_REFS]).split()
        if not refs:
            return []
        out = self._run(["log", "--source", "--root", "--raw", "--no-abbrev", "--reverse", "--topo-order",
                         f"--format={_END}%H{_SEP}%S{_SEP}%ct", *refs, "--", "summary.yaml", "health.yaml"])
        last: dict[str, dict[str, str]] = {}  # cluster id -> {file: blob}
        found: list[StatusCommit] = []
        for entry in out.split(_END):
            if not entry.strip():
                continue
            head, *raw = entry.strip("\n").split("\n")
            sha, source, ctime = head.split(_SEP)
            cid = source[len(STATUS_REFS):] if source.startswith(STATUS_REFS) else source
            blobs = last.setdefault(cid, {})
            for line in raw:
                meta, _, name = line.partition("\t")
                fields = meta.split()
                if len(fields) >= 5 and name in ("summary.yaml", "health.yaml"):
                    if fields[4].startswith("D"):
                        blobs.pop(name, None)
                    else:
                        blobs[name] = fields[3]
            summary = self._doc(blobs.get("summary.yaml"))
            health = self._doc(blobs.get("health.yaml"))
            targets = health.get("targets")
            unhealthy = frozenset(str(t) for t, v in (targets if isinstance(targets, dict) else {}).items()
                                  if isinstance(v, dict) and v.get("state") == "unhealthy")
            revision = summary.get("appliedRevision")
            who = summary.get("cluster")
            applied = revision if isinstance(revision, str) else ""
            found.append(StatusCommit(cid, sha, int(ctime), str(who) if who else cid,
                                      applied, unhealthy,
                                      "health.yaml" in blobs))
        return found

    def _blob(self, blob: str) -> str:
        data: bytes = read_object(lambda: self.repo().odb.stream(bytes.fromhex(blob)).read())
        return data.decode("utf-8", errors="replace")

    def _doc(self, blob: str | None) -> dict[str, object]:
        if not blob:
            return {}
        text = self._blobs.get(blob)
        if text is None:
            text = self._blobs[blob] = self._blob(blob)
        try:
            doc = load_status(text)
        except ValueError:
            return {}
        return dict(doc) if isinstance(doc, dict) else {}


def resolve(revision: str, shas: Sequence[str]) -> str:
    """The full sha among ``shas`` that ``revision`` names (a sha, an abbreviation, or a
    ``<time>.<sha7>`` label), else ""."""
    text = revision.strip().lower()
    if "." in text:
        text = text.rsplit(".", 1)[1]
    if len(text) < 7:
        return ""
    return next((s for s in shas if s.startswith(text)), "")
