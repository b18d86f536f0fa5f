"""The git side of `gitdns history`: one fetch, a few ``git log`` calls, trees read by id.

    Walk(url, branch=, path=, workdir=, auth=, timeout=)
        .commits(since=, until=, max_count=) -> (list[Commit] oldest first, baseline | None, truncated)
        .window(since, until) -> (lo, hi)       --since/--until in unix seconds (`historywindow`)
        .files_at(sha) -> {rel path: text}      YAML below ``path`` (`historytrees.Trees`)
        .tree_key(sha) -> tuple                 the (path, blob id) pairs of those files
        .marks(shas) -> {sha: %G?}              git's signature mark, for the commits shown only
        .merged_by(sha) -> Commit | None        the first-parent merge that brought ``sha`` in
        .status() -> list[StatusCommit]         every status branch, oldest first per branch

The desired branch and every ``gitdns-status/*`` branch come with ONE ``git fetch`` into the
bare cache (`gitdns.adapters.gitcache`), unshallowed when a shallow cache is found.  The
commits that touched ``*.yaml``/``*.yml`` below ``path`` come from one path-limited
``git log``; the parent graph (for the merge that brought each commit to the branch) from one
``git log --format='%H %T %P'`` (which also gives every commit's root tree, so a first parent
that did not touch YAML is read with the rest); the status branches from one ``git log --raw`` over all of them
(only the commits that changed ``summary.yaml`` or ``health.yaml``).  Objects are read in bulk,
one ``git cat-file`` run for many ids (`GitCache.objects`): every commit's trees level by level
(`gitdns.commands.historytrees`), the YAML blobs' sizes at once, the blobs of one commit at once,
every status blob at once; each object is read once.  What history needs of each status document
(`DocFacts`) is kept by blob id in ``status-facts.json`` beside the cache
(`gitdns.commands.historyfacts`), so a warm run parses only the new ones.  Nothing is checked out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitdns.adapters.gitauth import GitAuth
from gitdns.adapters.gitcache import CacheCorrupt, GitCache, last_line
from gitdns.adapters.statusrefs import LocalRefs, local_refs
from gitdns.commands.historyfacts import NO_FACTS, read_facts
from gitdns.commands.historytrees import Trees
from gitdns.commands.historywindow import window
from gitdns.commands.statuslog import NOT_HELD, ZoneState
from gitdns.errors import ConfigError

STATUS_PREFIX = "gitdns-status/"
STATUS_REFS = "refs/gitdns-status/"
_SEP, _END = "\x1f", "\x1e"
_FMT = _SEP.join(("%H", "%T", "%P", "%ct", "%an <%ae>", "%at", "%cn <%ce>", "%B")) + _END
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
    zones: Mapping[str, ZoneState] = field(default_factory=dict)  # zones/<zone>.yaml: held or not, and why


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
        """The YAML commits (oldest first), the commit before the first (the baseline), and
        whether older YAML commits exist than the ``max_count`` newest.  A ``path`` that is a
        file at the branch's head, or that no commit ever had, is a ConfigError."""
        paths = [f"{self.path}/{p}" if self.path else p for p in ("*.yaml", "*.yml")]
        fmt = _FMT
        self._graph()  # every commit's root tree: the first parents compared with are read with the rest
        if self.path and self._head is not None:
            self._trees.prepare([self._head])
        limit = [f"--max-count={max_count + 1}"] if max_count > 0 else []
        newest_first = self._parse(self._run(["log", f"--format={fmt}", *limit, self.ref, "--", *paths]))
        if self.path and not newest_first and self._head is not None and self._trees.directory(self._head) is None:
            raise ConfigError(f"--path {self.path}: no such directory on branch {self._git.branch} "
                              f"(at {self._head[:7]}), and no commit of the branch ever had YAML below it")
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
        self._firsts = [c.parents[0] for c in newest_first if c.parents and c.parents[0] not in self._known]
        return list(reversed(newest_first)), baseline, truncated

    def window(self, since: str | None, until: str | None) -> tuple[int | None, int | None]:
        """``--since``/``--until`` in unix seconds, read by git's own date parser (`historywindow.window`)."""
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
        """The YAML files of ``sha`` below ``path`` (`historytrees.Trees.files_at`)."""
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

    def merged_by(self, sha: str) -> Commit | None:
        """The merge commit on the branch's first-parent line that brought ``sha`` in (None when
        ``sha`` is on that line itself)."""
        if self._brought is None:
            self._brought = self._bring()
        merge = self._brought.get(sha)
        if merge is None:
            return None
        if merge not in self._known:
            for c in self._parse(self._run(["log", "--no-walk", f"--format={_FMT}", merge])):
                self._known[c.sha] = c
        return self._known.get(merge)

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

    def status(self) -> list[StatusCommit]:
        """Every status branch's commits that changed summary.yaml, health.yaml or a zone
        document (``zones/<zone>.yaml``), oldest first."""
        refs = self._run(["for-each-ref", "--format=%(refname)", STATUS_REFS]).split()
        if not refs:
            return []
        out = self._run(["log", "--source", "--root", "--raw", "--no-abbrev", "--reverse", "--topo-order",
                         f"--format={_END}%H{_SEP}%S{_SEP}%ct", *refs, "--", "summary.yaml", "health.yaml", "zones/"])
        last: dict[str, dict[str, str]] = {}  # cluster id -> {file: blob}
        steps: list[tuple[str, str, str, dict[str, str]]] = []
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
                if len(fields) >= 5 and (name in ("summary.yaml", "health.yaml")
                                         or (name.startswith("zones/") and name.endswith(".yaml"))):
                    if fields[4].startswith("D"):
                        blobs.pop(name, None)
                    else:
                        blobs[name] = fields[3]
            steps.append((sha, cid, ctime, dict(blobs)))
        zone_blobs = {blob for _, _, _, blobs in steps for name, blob in blobs.items() if name.startswith("zones/")}
        facts = read_facts(self._git, self._facts_file,
                           [blob for _, _, _, blobs in steps for blob in blobs.values()], zone_blobs)
        found: list[StatusCommit] = []
        for sha, cid, ctime, blobs in steps:
            summary = facts.get(blobs.get("summary.yaml", ""), NO_FACTS)
            health = facts.get(blobs.get("health.yaml", ""), NO_FACTS)
            zones = {}
            for name, blob in blobs.items():
                if name.startswith("zones/"):
                    doc = facts.get(blob, NO_FACTS)
                    zones[name[len("zones/"):-len(".yaml")]] = \
                        ZoneState(True, doc.applied or None, doc.reason) if doc.held else NOT_HELD
            found.append(StatusCommit(cid, sha, int(ctime), summary.cluster or cid, summary.applied,
                                      frozenset(health.unhealthy), "health.yaml" in blobs, zones))
        return found
