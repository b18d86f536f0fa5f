"""The trees of `gitdns history`: the YAML files below ``path`` at any commit of the desired
branch, read by object id from the bare cache (`gitdns.commands.history.walk.Walk` holds one).

    Trees(git, run=, repo=, path=, roots=, also=)
        .files_at(sha) -> {rel path: text}      YAML below ``path``; subtrees and blobs memoised by id
        .tree_key(sha) -> tuple                 the (path, blob id) pairs of those files
        .prepare(shas)                          read the trees of those commits not read yet
        .directory(sha) -> tree id | None       the tree at ``path`` of a prepared commit

Trees are read in bulk, one ``git cat-file`` run for many ids (`GitCache.objects`): every
commit's trees level by level, the YAML blobs' sizes at once, the blobs of one commit at once
(a few through the repository's running ``git cat-file``); each object is read once.  A commit
whose root tree is not in ``roots`` (the commit -> root tree map the walk fills from its
``git log`` calls) is looked up with one more ``git log``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from gitdns.adapters.git.cache import CacheCorrupt, GitCache, read_object
from gitdns.core.limits import DEFAULT_LIMITS, ReadBudget, symlink
from gitdns.errors import ConfigError

_SUFFIXES = (".yaml", ".yml")
LINK_MODE = 0o120000  # a symlink: never resolved, read as an Unread
TREE_MODE = 0o040000
GITLINK_MODE = 0o160000  # a submodule: not followed
_FEW = 8  # up to this many objects: read through the running cat-file, not a new process


class Trees:
    def __init__(self, git: GitCache, *, run: Callable[[list[str]], str], repo: Callable[[], Any], path: str,
                 roots: dict[str, str], also: Callable[[], Iterable[str]]) -> None:
        self._git = git
        self._run = run  # one git command in the cache, its output (CacheCorrupt when it fails)
        self._repo = repo  # the cache's gitpython Repo, opened when first asked
        self.path = path
        self._roots = roots  # commit -> root tree id (shared with the walk, which fills it)
        self._also = also  # the commits read with the first one asked for: the walk's YAML commits and first parents
        self._raw: dict[str, tuple[tuple[int, str, str], ...]] = {}  # tree id -> (mode, name, id) entries
        self._base: dict[str, str | None] = {}  # commit -> tree id at ``path`` (None: no such directory)
        self._yaml: dict[str, tuple[tuple[str, str, int], ...]] = {}  # tree id -> YAML (rel, blob, mode) below
        self._sizes: dict[str, int] = {}
        self._blobs: dict[str, str] = {}

    def directory(self, sha: str) -> str | None:
        """The tree id at ``path`` of ``sha`` (None: no such directory, or ``sha`` not prepared)."""
        return self._base.get(sha)

    def files_at(self, sha: str) -> dict[str, str]:
        """The YAML files of ``sha`` below ``path``, read as `gitsource.yaml_blobs` reads them
        (the blobs not read yet in one ``git cat-file``)."""
        entries = self._entries(sha)
        budget = ReadBudget(DEFAULT_LIMITS)
        files: dict[str, str] = {}
        read: dict[str, str] = {}  # rel path -> blob, for the files read
        for rel, blob, mode, size in entries:
            if mode == LINK_MODE:
                files[rel] = symlink()
                continue
            refused = budget.refuse(size)
            if refused is not None:
                files[rel] = refused
                continue
            read[rel] = blob
        wanted = list(dict.fromkeys(blob for blob in read.values() if blob not in self._blobs))
        for blob, data in self._read_blobs(wanted).items():
            self._blobs[blob] = data.decode("utf-8", errors="replace")
        for rel, blob in read.items():
            files[rel] = self._blobs[blob]
        return dict(sorted(files.items()))

    def _read_blobs(self, blobs: list[str]) -> dict[str, bytes]:
        """A few blobs through the repository's running ``git cat-file`` (no new process); many
        in one ``git cat-file --batch`` run."""
        if len(blobs) > _FEW:
            return {blob: data for blob, (_, data) in self._git.objects(blobs).items()}
        odb = self._repo().odb
        out: dict[str, bytes] = {}
        def one(blob: str) -> bytes:
            data: bytes = odb.stream(bytes.fromhex(blob)).read()
            return data

        for blob in blobs:
            try:
                out[blob] = read_object(functools.partial(one, blob))
            except KeyError:
                raise CacheCorrupt(f"object {blob} is missing") from None
        return out

    def tree_key(self, sha: str) -> tuple[tuple[str, str], ...]:
        return tuple((rel, blob) for rel, blob, _, _ in self._entries(sha))

    def _entries(self, sha: str) -> tuple[tuple[str, str, int, int], ...]:
        """(rel path, blob id, mode, size) of the YAML files below ``path`` at ``sha``, sorted."""
        if sha not in self._base:
            self.prepare([sha, *self._also()])
        base = self._base[sha]
        if base is None:
            return ()  # the directory does not exist yet at this commit: no files
        return tuple((rel, blob, mode, self._sizes[blob]) for rel, blob, mode in self._yaml[base])

    def prepare(self, shas: Iterable[str]) -> None:
        """Read the trees of every commit of ``shas`` not read yet, level by level (one
        ``git cat-file`` per level), and the sizes of their YAML blobs (one more)."""
        todo = [sha for sha in dict.fromkeys(shas) if sha not in self._base]
        unknown = [sha for sha in todo if sha not in self._roots]
        if unknown:
            for line in self._run(["log", "--no-walk=unsorted", "--format=%H %T", *unknown]).splitlines():
                sha, _, tree = line.partition(" ")
                self._roots[sha] = tree.strip()
        bases: dict[str, str | None] = {sha: self._roots.get(sha) for sha in todo}
        if any(tree is None for tree in bases.values()):
            raise CacheCorrupt(f"commit {next(s for s, t in bases.items() if t is None)} is missing")
        for part in self.path.split("/") if self.path else ():
            self._read_trees(tree for tree in bases.values() if tree is not None)
            for sha, at in bases.items():
                if at is None:
                    continue
                found = next(((mode, oid) for mode, name, oid in self._raw[at] if name == part), None)
                if found is not None and found[0] != TREE_MODE:
                    raise ConfigError(f"path {self.path} in commit {sha} is not a directory")
                bases[sha] = found[1] if found is not None else None
        frontier = {tree for tree in bases.values() if tree is not None}
        while frontier:
            self._read_trees(frontier)
            frontier = {oid for tree in frontier for mode, name, oid in self._raw[tree]
                        if mode == TREE_MODE and not name.startswith(".") and oid not in self._raw}
        for tree in {t for t in bases.values() if t is not None}:
            self._below(tree)
        self._sizes.update(self._git.sizes(blob for tree in bases.values() if tree is not None
                                           for _, blob, _ in self._yaml[tree] if blob not in self._sizes))
        self._base.update(bases)

    def _read_trees(self, trees: Iterable[str]) -> None:
        wanted = [tree for tree in trees if tree not in self._raw]
        for oid, (kind, data) in self._git.objects(wanted).items():
            if kind != "tree":
                raise CacheCorrupt(f"object {oid} is a {kind}, not a tree")
            self._raw[oid] = _tree_entries(data, len(oid) // 2)

    def _below(self, tree: str) -> tuple[tuple[str, str, int], ...]:
        """(rel path, blob id, mode) of the YAML files below ``tree``, sorted; per tree id."""
        memo = self._yaml.get(tree)
        if memo is not None:
            return memo
        out: list[tuple[str, str, int]] = []
        for mode, name, oid in self._raw[tree]:
            if name.startswith("."):
                continue
            if mode == TREE_MODE:
                out.extend((f"{name}/{rel}", blob, m) for rel, blob, m in self._below(oid))
            elif mode != GITLINK_MODE and name.endswith(_SUFFIXES):
                out.append((name, oid, mode))
        out.sort()
        self._yaml[tree] = found = tuple(out)
        return found


def _tree_entries(data: bytes, width: int) -> tuple[tuple[int, str, str], ...]:
    """A raw tree object's entries: (mode, name, object id); ``width`` is the id's length in bytes."""
    out: list[tuple[int, str, str]] = []
    at, end = 0, len(data)
    while at < end:
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        out.append((int(data[at:space], 8), data[space + 1:nul].decode("utf-8", errors="replace"),
                    data[nul + 1:nul + 1 + width].hex()))
        at = nul + 1 + width
    return tuple(out)
