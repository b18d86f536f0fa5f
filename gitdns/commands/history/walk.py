"""The git side of `gitdns history` and `gitdns groups log`: one fetch, a few ``git log`` calls,
trees read by id.

    Walk(url, branch=, path=, workdir=, auth=, timeout=)
        .commits(since=, until=, max_count=) -> (list[Commit] oldest first, baseline | None, truncated)
        .window(since, until) -> (lo, hi)       --since/--until in unix seconds (`history.window`)
        .files_at(sha) -> {rel path: text}      YAML below ``path`` (`history.trees.Trees`)
        .tree_key(sha) -> tuple                 the (path, blob id) pairs of those files
        .marks(shas) -> {sha: %G?}              git's signature mark, for the commits shown only
        .side_commits(merges) -> {merge: (Commit, ...)}   the commits each merge brought in
        .status(groups=) -> list[StatusCommit]  every status branch, oldest first per branch
        .blobs(ids) -> {id: text}               status documents read whole

The desired branch and every ``gitdns-status/*`` branch come with ONE ``git fetch`` into the
bare cache (`gitdns.adapters.git.cache`), unshallowed when a shallow cache is found.  The
commits are the branch's **first-parent** line: each commit that brought a change of
``*.yaml``/``*.yml`` below ``path`` onto the branch (a merge, a squash or rebase merge's commit,
a direct push), from one ``git log --first-parent``, each compared with its first parent.  What
a merge brought in (its side commits that touched the YAML, for their authors) comes from one
more path-limited ``git log`` over the merges shown, and only when one is shown.  The parent
graph (the order `history.applied` needs, and which merge brought each side commit) comes from
one ``git log --format='%H %T %P'`` (which also gives every commit's root tree, so a first
parent that did not touch YAML is read with the rest); the status branches from one
``git log --raw`` over all of them (`gitdns.commands.history.status`).  Objects are read in bulk,
one ``git cat-file`` run for many ids (`GitCache.objects`): every commit's trees level by level
(`gitdns.commands.history.trees`), the YAML blobs' sizes at once, the blobs of one commit at once,
every status blob at once; each object is read once.  What history needs of each status document
(`DocFacts`) is kept by blob id in ``status-facts.json`` beside the cache
(`gitdns.commands.history.facts`), so a warm run parses only the new ones.  Nothing is checked out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.git.cache import CacheCorrupt, GitCache, last_line
from gitdns.adapters.status.refs import LocalRefs, local_refs
from gitdns.commands.history.status import STATUS_REFS, StatusCommit, read_status
from gitdns.commands.history.trees import Trees
from gitdns.commands.history.window import window
from gitdns.core.limits import DEFAULT_LIMITS
from gitdns.errors import ConfigError

__all__ = ["STATUS_PREFIX", "STATUS_REFS", "Commit", "StatusCommit", "Walk", "iso_date"]

STATUS_PREFIX = "gitdns-status/"
_SEP, _END = "\x1f", "\x1e"
_FMT = _SEP.join(("%H", "%T", "%P", "%ct", "%an <%ae>", "%at", "%cn <%ce>", "%B")) + _END
# the pull (merge) request a commit names: a forge's merge commit (GitHub, GitLab, Bitbucket,
# Azure DevOps), else a squash merge's subject ending in "(#N)"
_MERGE_PR = (re.compile(r"^Merge pull request #(\d+)"), re.compile(r"^Merged PR (\d+):"),
             re.compile(r"^Merged in \S+ \(pull request #(\d+)\)"))
_MR = re.compile(r"See merge request [^!\s]*!(\d+)")
_SQUASH = re.compile(r"\(#(\d+)\)\s*$")


def iso_date(when: int) -> str:
    """A git time (seconds since the epoch) as UTC ISO 8601."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    @property
    def pr(self) -> int | None:
        """The pull (merge) request the commit names: a forge's merge commit message
        (``Merge pull request #N``, GitLab's ``See merge request …!N``, Bitbucket's ``Merged in
        BRANCH (pull request #N)``, Azure DevOps' ``Merged PR N:``), else a subject ending in
        ``(#N)`` (GitHub's squash merge); None when it names none."""
        subject = self.subject
        for pattern in _MERGE_PR:
            found = pattern.match(subject)
            if found:
                return int(found.group(1))
        found = _MR.search(self.message) or _SQUASH.search(subject)
        return int(found.group(1)) if found else None


class Walk:
    def __init__(self, url: str, *, branch: str, path: str, workdir: Path, auth: GitAuth,
                 timeout: float) -> None:
        self.path = path
        # no fsck on start: a read that finds objects missing raises CacheCorrupt, and `recover` decides
        self._git = GitCache(url, branch, workdir, auth, timeout, check_on_start=False)
        self.ref = self._git.ref
        self.url = url
        self._repo: Any = None
        self._roots: dict[str, str] = {}  # commit -> root tree id (shared with the trees)
        self._facts_file = workdir / "status-facts.json"
        self._parents: dict[str, tuple[str, ...]] = {}
        self._brought: dict[str, str] | None = None
        self._paths = [f"{path}/{p}" if path else p for p in ("*.yaml", "*.yml")]
        self._order: dict[str, int] | None = None
        self.notes: tuple[str, ...] = ()  # which refs of a local repository were read, unpushed commits
        self._head: str | None = None
        self._known: dict[str, Commit] = {}
        self._firsts: list[str] = []  # first parents of the YAML commits that are not YAML commits themselves
        self.local: LocalRefs | None = None  # the local repository's refs read (None: a URL)
        # the YAML commits and the first parents compared with them are read with the first one asked for
        self._trees = Trees(self._git, run=self._run, repo=self.repo, path=path, roots=self._roots,
                            also=lambda: [*self._known, *self._firsts])

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

    def recover(self) -> bool:
        """After CacheCorrupt: True when the cache was confirmed corrupt and wiped (start over)."""
        if self._repo is not None:
            self._repo.close()
            self._repo = None
        return self._git.recover()

    def repo(self) -> Any:  # a gitpython Repo (commands do not import git)
        if self._repo is None:
            self._repo = self._git.with_repo(lambda r: type(r)(r.git_dir))
        return self._repo

    def fetch(self, status: bool = True) -> None:
        """The branch, full history, and (``status``) every status branch, in one fetch.  A local
        repository's refs are picked as `gitdns status` picks them (`statusrefs.local_refs`): the
        desired branch from ``<remote>/<branch>`` else the local branch, each cluster's status
        branch from ``refs/heads/gitdns-status/<id>`` else (a clone; a local copy left behind) the
        remote-tracking one."""
        source = self.url
        specs = [self._git.refspec] + ([f"+refs/heads/{STATUS_PREFIX}*:{STATUS_REFS}*"] if status else [])
        local = self.local = local_refs(self.url, self._git.branch)
        if local is not None:
            source = str(local.path)
            specs = [local.desired_refspec(self.ref) or self._git.refspec]
            specs += local.status_refspecs(STATUS_REFS) if status else []
            self.notes = local.notes + ((local.describe(),) if local.tracking else ())

        def run(repo: Any) -> None:
            mode = ["--unshallow"] if self._git.shallow() else []
            with repo.config_writer() as config:  # a fetch that brings commits extends the commit-graph
                if config.get_value("fetch", "writeCommitGraph", "") != "true":
                    config.set_value("fetch", "writeCommitGraph", "true")
            if local is not None:  # exact refspecs: --prune would not drop a status branch gone since
                stale = self._git.run(repo, ["for-each-ref", "--format=%(refname)", STATUS_REFS])[1].split()
                for ref in stale:
                    if ref[len(STATUS_REFS):] not in local.status:
                        self._git.run(repo, ["update-ref", "-d", ref])
            try:
                self._git.net(repo, ["fetch", "--no-tags", "--quiet", "--prune", *mode, "--", source, *specs])
            except ConfigError:
                self._missing_branch(repo, source, local)
                raise

        self._git.with_repo(run)

    def _missing_branch(self, repo: Any, source: str, local: LocalRefs | None) -> None:
        """When the desired branch is not in the repository: a ConfigError naming --branch and
        listing the branches it has (status branches left out), as `gitdns status` does."""
        branch = self._git.branch
        if local is not None:
            if local.desired is not None:
                return
            others = [b for b in local.branches if not b.split("/", 1)[-1].startswith(STATUS_PREFIX)]
        else:
            listing = self._git.net(repo, ["ls-remote", "--heads", "--", source])
            heads = [line.split("\t", 1)[1].removeprefix("refs/heads/")
                     for line in listing.splitlines() if "\t" in line]
            if branch in heads:
                return
            others = [h for h in heads if not h.startswith(STATUS_PREFIX)]
        listed = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        raise ConfigError(f"--branch {branch}: branch {branch} does not exist on {self.url} "
                          f"({f'its branches: {listed}' if others else 'it has no branch but status branches'})")

    # -- the desired branch ---------------------------------------------------------------------

    def commits(self, *, max_count: int = 0) -> tuple[list[Commit], Commit | None, bool]:
        """The first-parent commits that changed YAML against their first parent (oldest
        first), the one before the first (the baseline), and whether older ones exist than the
        ``max_count`` newest.  A ``path`` that is a file at the branch's head, or that no commit
        ever had, is a ConfigError."""
        paths = self._paths
        fmt = _FMT
        self._graph()  # every commit's root tree: the first parents compared with are read with the rest
        if self.path and self._head is not None:
            self._trees.prepare([self._head])
        limit = [f"--max-count={max_count + 1}"] if max_count > 0 else []
        newest_first = self._parse(self._run(["log", "--first-parent", f"--format={fmt}", *limit, self.ref,
                                              "--", *paths]))
        if self.path and not newest_first and self._head is not None and self._trees.directory(self._head) is None:
            raise ConfigError(f"--path {self.path}: no such directory on branch {self._git.branch} "
                              f"(at {self._head[:7]}), and no commit of the branch ever had YAML below it")
        truncated = max_count > 0 and len(newest_first) > max_count
        if truncated:
            newest_first = newest_first[:max_count]
        baseline: Commit | None = None
        if newest_first and newest_first[-1].parents:
            older = self._parse(self._run(["log", "--first-parent", f"--format={fmt}", "--max-count=1",
                                           f"{newest_first[-1].sha}^", "--", *paths]))
            baseline = older[0] if older else None
        for c in newest_first:
            self._known[c.sha] = c
        self._firsts = [c.parents[0] for c in newest_first if c.parents and c.parents[0] not in self._known]
        return list(reversed(newest_first)), baseline, truncated

    def window(self, since: str | None, until: str | None) -> tuple[int | None, int | None]:
        """``--since``/``--until`` in unix seconds, read by git's own date parser (`history.window.window`)."""
        return window(self._run, since, until)

    def _parse(self, out: str) -> list[Commit]:
        found: list[Commit] = []
        for entry in out.split(_END):
            if not entry.strip():
                continue
            sha, tree, parents, ctime, author, atime, committer, message = entry.lstrip("\n").split(_SEP, 7)
            self._roots[sha] = tree
            found.append(Commit(sha, tuple(parents.split()), int(ctime), author, int(atime), committer,
                                message.rstrip("\n")))
        return found

    def files_at(self, sha: str) -> dict[str, str]:
        """The YAML files of ``sha`` below ``path`` (`history.trees.Trees.files_at`)."""
        return self._trees.files_at(sha)

    def tree_key(self, sha: str) -> tuple[tuple[str, str], ...]:
        return self._trees.tree_key(sha)

    def marks(self, shas: Iterable[str]) -> dict[str, str]:
        """git's ``%G?`` for each commit (G good, B bad, U untrusted, E cannot check, N none...)."""
        wanted = sorted(set(shas))
        if not wanted:
            return {}
        out = self._run(["log", "--no-walk=unsorted", "--format=%H %G?", *wanted])
        return {sha: mark for sha, _, mark in (line.partition(" ") for line in out.splitlines() if line)}

    def side_commits(self, merges: Iterable[Commit]) -> dict[str, tuple[Commit, ...]]:
        """For each merge of ``merges`` (first-parent commits with more than one parent): the
        commits it brought in (``M^1..M^2``, and its other parents) that changed YAML below
        ``path``, oldest first; merges inside them left out.  One path-limited ``git log`` over
        every merge at once, from their side parents down to the oldest one's first parent (a
        later merge's first parent reaches the earlier ones' side commits, so only the oldest
        bounds it): each commit found belongs to the first merge that brought it (`_bring`),
        the first-parent commits it also finds to none."""
        wanted = {m.sha: m for m in merges if m.is_merge}
        if not wanted:
            return {}
        if self._brought is None:
            self._brought = self._bring()
        order = self.order()
        tips = sorted({p for m in wanted.values() for p in m.parents[1:]})
        base = min((m.parents[0] for m in wanted.values()), key=lambda sha: order.get(sha, -1))
        found = self._parse(self._run(["log", "--full-history", "--no-merges", "--topo-order", "--reverse",
                                       f"--format={_FMT}", *tips, "--not", base, "--", *self._paths]))
        out: dict[str, list[Commit]] = {sha: [] for sha in wanted}
        for c in found:
            merge = self._brought.get(c.sha)
            if merge in out:
                out[merge].append(c)
        return {sha: tuple(cs) for sha, cs in out.items()}

    def _bring(self) -> dict[str, str]:
        """{commit: merge} for every commit reached only through a merge's second+ parent."""
        self._graph()
        chain: list[str] = []
        at: str | None = self._head
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

    def _graph(self) -> None:
        """The branch's commits, oldest first (topological), with their parents and root trees: one
        ``git log``."""
        if self._order is not None:
            return
        order: dict[str, int] = {}
        for line in self._run(["log", "--topo-order", "--reverse", "--format=%H %T %P", self.ref]).splitlines():
            sha, tree, *parents = line.split()
            self._parents[sha] = tuple(parents)
            self._roots.setdefault(sha, tree)
            order[sha] = len(order)
        self._order = order
        self._head = next(reversed(order), None)

    def order(self) -> dict[str, int]:
        """Every commit of the branch: sha -> position, oldest first (topological)."""
        self._graph()
        assert self._order is not None
        return self._order

    # -- status branches ------------------------------------------------------------------------

    def status(self, groups: bool = False) -> list[StatusCommit]:
        """Every status branch's commits that changed summary.yaml, health.yaml or a zone
        document (``zones/<zone>.yaml``), and with ``groups`` groups.yaml, oldest first
        (`history.status.read_status`; what each document says kept in ``status-facts.json``,
        ``status-facts-groups.json`` with ``groups``)."""
        refs = self._run(["for-each-ref", "--format=%(refname)", STATUS_REFS]).split()
        # a facts file per set of documents read: each keeps only the blobs its own runs read
        facts = self._facts_file.with_name("status-facts-groups.json") if groups else self._facts_file
        return read_status(self._run, self._git, facts, refs, groups)

    def blobs(self, ids: Iterable[str]) -> dict[str, str]:
        """Status documents read whole (one ``git cat-file``); one larger than the read cap is
        left out (read as saying nothing)."""
        wanted = list(dict.fromkeys(ids))
        sizes = self._git.sizes(wanted)
        small = [b for b in wanted if sizes[b] <= DEFAULT_LIMITS.file_bytes]
        return {b: data.decode("utf-8", errors="replace") for b, (_, data) in self._git.objects(small).items()}
