"""Git objects of the status branches, read and written through the cache
(`gitdns.adapters.status.cache`) with plumbing only: no work tree, no index.

- `read_trees`: commit, files and message of every tip, in a few ``cat-file --batch``
  rounds.
- `validated`, `blob_sha`, `tree_sha`: the files of a status checked and hashed here, so that
  an unchanged status costs no git process; `write_blobs` and `mktree` write what changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Mapping, Sequence

from gitdns.adapters.status.cache import TMP_DIR, StatusCache
from gitdns.core.status.doc import StatusTree
from gitdns.errors import RetryableError

# -- reading objects -------------------------------------------------------------------------


def _cat(cache: StatusCache, shas: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    """Objects by sha through one ``git cat-file --batch``: sha -> (type, content)."""
    if not shas:
        return {}
    raw = cache.local(["cat-file", "--batch"], stdin="".join(f"{s}\n" for s in shas).encode())
    out: dict[str, tuple[str, bytes]] = {}
    pos = 0
    for sha in shas:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].decode().split()
        pos = end + 1
        if len(header) < 3:  # "<sha> missing"
            continue
        size = int(header[2])
        out[sha] = (header[1], raw[pos:pos + size])
        pos += size + 1
    return out


def _parse_tree(data: bytes) -> list[tuple[str, str, str]]:
    """(mode, name, sha) entries of a raw tree object."""
    entries: list[tuple[str, str, str]] = []
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        entries.append((data[pos:space].decode(), data[space + 1:nul].decode("utf-8", "replace"),
                        data[nul + 1:nul + 21].hex()))
        pos = nul + 21
    return entries


def _parse_commit(data: bytes) -> tuple[str, int, str]:
    """(tree sha, committer time, message) of a raw commit object."""
    head, _, body = data.partition(b"\n\n")
    tree, when = "", 0
    for line in head.decode("utf-8", "replace").splitlines():
        if line.startswith("tree "):
            tree = line[5:].strip()
        elif line.startswith("committer "):
            with contextlib.suppress(ValueError, IndexError):
                when = int(line.rsplit(" ", 2)[1])
    return tree, when, body.decode("utf-8", "replace")


def read_trees(cache: StatusCache, tips: Mapping[str, str]) -> dict[str, StatusTree]:
    """Commit, files and message of every tip (key -> commit sha), in a few cat-file rounds."""
    commits = _cat(cache, sorted(set(tips.values())))
    pending: list[tuple[str, str, str]] = []  # (key, directory prefix, tree sha)
    meta: dict[str, tuple[int, str]] = {}
    for key, sha in tips.items():
        kind, data = commits.get(sha, ("missing", b""))
        if kind != "commit":
            continue
        tree, when, message = _parse_commit(data)
        meta[key] = (when, message)
        pending.append((key, "", tree))
    files: dict[str, dict[str, str]] = {key: {} for key in meta}
    blobs: list[tuple[str, str, str]] = []
    depth = 0
    while pending and depth < 32:
        trees = _cat(cache, sorted({t for _, _, t in pending}))
        nxt: list[tuple[str, str, str]] = []
        for key, prefix, tree in pending:
            for mode, name, sha in _parse_tree(trees.get(tree, ("tree", b""))[1]):
                if mode == "40000":
                    nxt.append((key, f"{prefix}{name}/", sha))
                elif mode in ("100644", "100755"):
                    blobs.append((key, f"{prefix}{name}", sha))
        pending, depth = nxt, depth + 1
    contents = _cat(cache, sorted({sha for _, _, sha in blobs}))
    for key, path, sha in blobs:
        files[key][path] = contents.get(sha, ("blob", b""))[1].decode("utf-8", "replace")
    return {key: StatusTree(tips[key], dict(sorted(files[key].items())), meta[key][1], meta[key][0])
            for key in sorted(meta)}


# -- building trees --------------------------------------------------------------------------


def blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def validated(files: Mapping[str, str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path, text in files.items():
        parts = path.split("/") if isinstance(path, str) else []
        if (not parts or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts)
                or any(c in path for c in "\0\n\r\\")):
            raise ValueError(f"status file path {path!r} is not a relative posix path")
        if not isinstance(text, str):
            raise TypeError(f"status file {path!r}: content must be text")
        out[path] = text.encode("utf-8")
    for path in out:
        for i in range(1, path.count("/") + 1):
            if "/".join(path.split("/")[:i]) in out:
                raise ValueError(f"status file path {path!r} is below the file {'/'.join(path.split('/')[:i])!r}")
    return out


def tree_sha(entries: Mapping[str, str]) -> str:
    """The sha git gives the tree of ``entries`` (path -> blob sha), computed here so that an
    unchanged status costs no git process."""
    here: dict[str, tuple[str, str]] = {}
    below: dict[str, dict[str, str]] = {}
    for path, sha in entries.items():
        head, sep, rest = path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = sha
        else:
            here[head] = ("100644", sha)
    for name, sub in below.items():
        here[name] = ("40000", tree_sha(sub))
    body = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha)
                    for name, (mode, sha) in sorted(here.items(), key=lambda kv: (kv[0] + "/" if kv[1][0] == "40000"
                                                                                  else kv[0]).encode()))
    return hashlib.sha1(b"tree %d\0" % len(body) + body, usedforsecurity=False).hexdigest()


def write_blobs(cache: StatusCache, blobs: Mapping[str, bytes]) -> None:
    """Write blobs (sha -> content) with one ``git hash-object -w --stdin-paths``."""
    if not blobs:
        return
    tmp = cache.path / TMP_DIR
    tmp.mkdir(exist_ok=True)
    try:
        for sha, data in blobs.items():
            (tmp / sha).write_bytes(data)
        paths = "".join(f"{tmp / sha}\n" for sha in blobs).encode()
        written = cache.local(["hash-object", "-w", "--no-filters", "--stdin-paths"], stdin=paths).decode().split()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if written != list(blobs):
        raise RetryableError("git hash-object wrote other objects than asked", reason="StatusCacheError")


def mktree(cache: StatusCache, entries: Mapping[str, str]) -> str:
    here: list[bytes] = []
    below: dict[str, dict[str, str]] = {}
    for path, sha in entries.items():
        head, sep, rest = path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = sha
        else:
            here.append(f"100644 blob {sha}\t{head}".encode() + b"\0")
    for name, sub in below.items():
        here.append(f"040000 tree {mktree(cache, sub)}\t{name}".encode() + b"\0")
    return cache.local(["mktree", "-z"], stdin=b"".join(sorted(here))).decode().strip()
