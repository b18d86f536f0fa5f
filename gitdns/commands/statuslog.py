"""`gitdns status`: the history behind the tips — every status branch's commits and the desired
branch's, read from the status read cache (`gitdns.adapters.statusbranch.read_all` fills it).

    FleetLog(cache)
        .fetch_desired(url, branch, auth) -> head sha | None   the whole desired branch, into refs/desired/
        .entries(cluster_id) -> [Entry]                        the status branch's summaries, oldest first
        .contains(sha, revision) -> bool                       ``revision`` is ``sha`` or a descendant
        .commit(sha) -> (sha, time) | None                     a desired commit, resolved
        .unapplied(applied, head) -> (count, oldest time)      desired commits after ``applied``
        .clusters_at(head) -> set[str]                         every Cluster spec.id and metadata.name
        .removal(cluster_id, head) -> (sha, time, subject)     the last desired commit that changed
                                                               the id's occurrences (pickaxe)

Every status commit's ``summary.yaml`` is read with one ``git cat-file --batch``; a summary that
does not parse is left out of the history.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from gitdns.adapters.gitauth import GitAuth
from gitdns.adapters.statuscache import StatusCache, run_remote
from gitdns.core.statusdoc import StatusDocError, load

log = logging.getLogger(__name__)

DESIRED = "refs/desired/"
STATUS = "refs/status/"
_MAX_FILE = 1 << 20  # a desired YAML file larger than this is not read for Cluster documents


@dataclass(frozen=True, slots=True)
class Entry:
    """One status-branch commit: when it was pushed and what its summary said."""

    sha: str
    time: int
    applied: str | None
    attempted: str | None
    ready: bool
    reason: str
    message: str


class FleetLog:
    def __init__(self, cache: StatusCache) -> None:
        self.cache = cache
        self._contains: dict[tuple[str, str], bool] = {}
        self.desired_ref: str | None = None

    # -- the desired branch ------------------------------------------------------------------

    def fetch_desired(self, url: str, branch: str, auth: GitAuth | None) -> str | None:
        """Fetch the desired branch (whole history) into the cache; its head, or None when the
        repository has no such branch or cannot be read (the lag is then not shown)."""
        ref = f"{DESIRED}{branch}"
        with self.cache.lock:
            out = run_remote(self.cache, ["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--", url,
                                          f"+refs/heads/{branch}:{ref}"], auth)
        if out.rc != 0:
            log.debug("skipped: check=desired-head branch=%s error=%s", branch, out.stderr.strip()[-200:])
            return None
        self.desired_ref = ref
        return self.cache.ref(ref)

    def commit(self, rev: str) -> tuple[str, int] | None:
        """``rev`` (a sha or an abbreviation) resolved to a commit in the cache, with its time."""
        text = rev.strip()
        if not text or text.startswith("-"):
            return None
        out = self.cache.run(["log", "-1", "--format=%H %ct", f"{text}^{{commit}}", "--"])
        if out.rc != 0 or not out.stdout.strip():
            return None
        sha, when = out.stdout.decode().split()
        return sha, int(when)

    def contains(self, sha: str, revision: str | None) -> bool:
        """``revision`` is ``sha`` or one of its descendants (both must be in the cache)."""
        if not revision:
            return False
        key = (sha, revision)
        if key not in self._contains:
            self._contains[key] = sha == revision or self.cache.run(
                ["merge-base", "--is-ancestor", sha, revision]).rc == 0
        return self._contains[key]

    def unapplied(self, applied: str | None, head: str) -> tuple[int, int | None]:
        """How many commits ``head`` has that ``applied`` has not, and the committer time of the
        oldest of them (None when there are none)."""
        args = ["log", "--format=%ct", head] + ([f"^{applied}"] if applied and self.commit(applied) else [])
        out = self.cache.run([*args, "--"])
        if out.rc != 0:
            return 0, None
        times = [int(t) for t in out.stdout.decode().split()]
        return len(times), (min(times) if times else None)

    def clusters_at(self, head: str) -> set[str]:
        """Every ``spec.id`` and ``metadata.name`` of a Cluster document in the head's YAML files."""
        listing = self.cache.run(["ls-tree", "-r", "-z", "-l", head])
        rows = []
        for line in listing.stdout.decode("utf-8", "replace").split("\0"):
            meta, _, path = line.partition("\t")
            fields = meta.split()
            if len(fields) == 4 and fields[1] == "blob":
                rows.append((fields[3], path))
        paths = [p for size, p in rows if p.endswith((".yaml", ".yml")) and size.isdigit() and int(size) <= _MAX_FILE]
        found: set[str] = set()
        for text in self._blobs(f"{head}:{p}" for p in paths).values():
            if "Cluster" not in text:
                continue
            try:
                docs = list(YAML(typ="safe", pure=True).load_all(text))
            except (YAMLError, ValueError):
                continue
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind") == "Cluster":
                    spec, metadata = doc.get("spec") or {}, doc.get("metadata") or {}
                    for value in (spec.get("id") if isinstance(spec, dict) else None,
                                  metadata.get("name") if isinstance(metadata, dict) else None):
                        if value:
                            found.add(str(value))
        return found

    def removal(self, cluster_id: str, head: str) -> tuple[str, int, str] | None:
        """The last desired commit (first parents) that changed how often ``cluster_id`` appears:
        with the Cluster gone from ``head``, the commit that removed it."""
        out = self.cache.run(["log", "-1", "--first-parent", "--format=%H %ct %s", f"-S{cluster_id}", head, "--"])
        line = out.stdout.decode("utf-8", "replace").strip()
        if out.rc != 0 or not line:
            return None
        sha, when, *subject = line.split(" ", 2)
        return sha, int(when), subject[0] if subject else ""

    # -- the status branches -----------------------------------------------------------------

    def entries(self, cluster_id: str) -> list[Entry]:
        out = self.cache.run(["log", "--first-parent", "--format=%H %ct", f"{STATUS}{cluster_id}", "--"])
        if out.rc != 0:
            return []
        commits = [line.split() for line in out.stdout.decode().splitlines() if line.strip()]
        texts = self._blobs(f"{sha}:summary.yaml" for sha, _ in commits)
        entries = []
        for sha, when in reversed(commits):
            text = texts.get(f"{sha}:summary.yaml")
            if text is None:
                continue
            try:
                doc = load(text)
            except StatusDocError:
                continue
            ready = _ready_condition(doc.get("conditions"))
            entries.append(Entry(sha, int(when), _str(doc.get("appliedRevision")), _str(doc.get("attemptedRevision")),
                                 doc.get("ready") is True, ready.get("reason", ""), ready.get("message", "")))
        return entries

    def _blobs(self, specs: Iterable[str]) -> dict[str, str]:
        """``<rev>:<path>`` -> the blob's text, with one ``git cat-file --batch``; missing ones left out."""
        wanted = list(specs)
        if not wanted:
            return {}
        out = self.cache.run(["cat-file", "--batch"], stdin="".join(f"{s}\n" for s in wanted).encode())
        data, pos, found = out.stdout, 0, {}
        for spec in wanted:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            header = data[pos:end].split()
            pos = end + 1
            if data[pos - 1 - len(b" missing"):pos - 1] == b" missing" or len(header) != 3 or not header[2].isdigit():
                continue  # "<spec> missing" (or ambiguous)
            size = int(header[2])
            if header[1] == b"blob":
                found[spec] = data[pos:pos + size].decode("utf-8", "replace")
            pos += size + 1
        return found


def _ready_condition(value: Any) -> dict[str, str]:
    for c in value if isinstance(value, list) else []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return {"reason": str(c.get("reason") or ""), "message": str(c.get("message") or "")}
    return {}


def _str(value: Any) -> str | None:
    return str(value) if value else None
