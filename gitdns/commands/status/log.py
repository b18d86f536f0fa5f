"""`gitdns status`: the history behind the tips — every status branch's commits and the desired
branch's, read from the status read cache (`gitdns.adapters.status.branch.read_all` fills it).

    FleetLog(cache)
        .fetch_desired(url, branch, auth, source=) -> DesiredRead   the whole desired branch, into
                                                               refs/desired/ (``source``: the ref of a
                                                               local repository to read it from)
        .fetch_tags(url, auth) -> bool                         the repository's tags, for --revision
        .entries(cluster_id) -> [Entry]                        the status branch's summaries, oldest first
        .zone_files(cluster_id) -> {sha: {zone: blob}}         every status commit's zone documents
        .zone_facts(blobs) -> {blob: ZoneState}                what they say (held or not, and why)
        .zone_states(cluster_id, shas) -> {sha: {zone: ZoneState}}   the two together
        .contains(sha, revision) -> bool                       ``revision`` is ``sha`` or a descendant
        .commit(rev) -> (sha, time) | None                     a commit of the cache, resolved
        .resolve(rev, branch, aliases=, fallback=) -> (sha, time) | None   a revision as the user wrote it
        .unapplied(applied, head) -> (count, oldest time)      desired commits after ``applied``
        .clusters_at(head) -> set[str]                         every Cluster spec.id and metadata.name
        .cluster_docs(head) -> [(name, id)]                    the Cluster documents of the head
        .removal(cluster_id, head) -> (sha, time, subject)     the last desired commit that changed
                                                               the id's occurrences (pickaxe)

Every status commit's ``summary.yaml`` is read with one ``git cat-file --batch``; a summary that
does not parse is left out of the history.  The zone documents (``zones/<zone>.yaml``) of the
commits asked for are read by blob id, each once; only those that can say ``held: true`` are
parsed (a zone the agent holds: the revision does not validate for it, its last good one stays).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.status.cache import StatusCache, run_remote, tail
from gitdns.core.status.doc import StatusDocError, load

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


@dataclass(frozen=True, slots=True)
class DesiredRead:
    """The desired branch as fetched: its head, or why there is none (``missing``: the
    repository has no such branch; ``error``: it could not be read)."""

    head: str | None
    missing: bool = False
    error: str = ""


@dataclass(frozen=True, slots=True)
class ZoneState:
    """One zone document of a status commit: held or not, and for a held zone the revision it
    stays at (the document's appliedRevision: a ``<time>.<sha7>`` label, or None when unknown)
    and why (its problems, else its error)."""

    held: bool
    applied: str | None = None
    reason: str = ""
    problems: tuple[str, ...] = ()


NOT_HELD = ZoneState(False)
_FORMAT = "\x1e"  # a record separator in git log's output


class FleetLog:
    def __init__(self, cache: StatusCache) -> None:
        self.cache = cache
        self._contains: dict[tuple[str, str], bool] = {}
        self._clusters: dict[str, list[tuple[str | None, str | None]]] = {}
        self._files: dict[str, dict[str, str]] = {}
        self._zone_files: dict[str, dict[str, dict[str, str]]] = {}
        self._facts: dict[str, ZoneState] = {}
        self.desired_ref: str | None = None

    # -- the desired branch ------------------------------------------------------------------

    def fetch_desired(self, url: str, branch: str, auth: GitAuth | None, source: str | None = None) -> DesiredRead:
        """Fetch the desired branch (whole history) into the cache: its head, or why not
        (`DesiredRead`).  ``source``: the ref to read it from (a local repository's own or
        remote-tracking branch), else ``refs/heads/<branch>``."""
        ref = f"{DESIRED}{branch}"
        with self.cache.lock:
            out = run_remote(self.cache, ["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--", url,
                                          f"+{source or f'refs/heads/{branch}'}:{ref}"], auth)
        if out.rc != 0:
            log.debug("skipped: check=desired-head branch=%s error=%s", branch, out.stderr.strip()[-200:])
            missing = "couldn't find remote ref" in out.stderr.lower()
            return DesiredRead(None, missing, "" if missing else tail(out.stderr, 300))
        self.desired_ref = ref
        return DesiredRead(self.cache.ref(ref))

    def fetch_tags(self, url: str, auth: GitAuth | None) -> bool:
        """The repository's tags into the cache (a ``--revision`` may name one); False on failure."""
        with self.cache.lock:
            out = run_remote(self.cache, ["fetch", "-q", "--no-write-fetch-head", "--", url,
                                          "+refs/tags/*:refs/tags/*"], auth)
        return out.rc == 0

    def commit(self, rev: str) -> tuple[str, int] | None:
        """``rev`` (a sha, an abbreviation or a ref of the cache) resolved to a commit in the
        cache, with its time."""
        text = rev.strip()
        if not text or text.startswith("-"):
            return None
        out = self.cache.run(["log", "-1", "--format=%H %ct", f"{text}^{{commit}}", "--"])
        if out.rc != 0 or not out.stdout.strip():
            return None
        sha, when = out.stdout.decode().split()
        return sha, int(when)

    def resolve(self, revision: str, branch: str, *, aliases: Iterable[str] = (),
                fallback: Callable[[str], str | None] | None = None) -> tuple[str, int] | None:
        """A revision as the user wrote it: ``HEAD``, ``@``, the branch's name (``main``,
        ``refs/heads/main``, or one of ``aliases`` such as ``origin/main``) stand for the fetched
        desired branch's head, with any ``~N``/``^N`` after them; anything else is resolved in
        the cache (a sha, an abbreviation, a fetched tag), else by ``fallback`` (the desired
        repository's own ``git rev-parse``, when it is local).  None when nothing resolves it."""
        text = revision.strip()
        if not text or text.startswith("-"):
            return None
        if self.desired_ref is not None:
            for name in sorted({"HEAD", "@", branch, f"refs/heads/{branch}", *aliases}, key=len, reverse=True):
                if text == name or (text.startswith(name) and text[len(name)] in "~^"):
                    text = self.desired_ref + text[len(name):]
                    break
        found = self.commit(text)
        if found is None and fallback is not None:
            sha = fallback(revision.strip())
            found = self.commit(sha) if sha else None
        return found

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
        return {value for pair in self.cluster_docs(head) for value in pair if value}

    def desired_files(self, head: str) -> dict[str, str]:
        """The head's YAML files (each up to ``_MAX_FILE`` bytes), by path."""
        if head not in self._files:
            listing = self.cache.run(["ls-tree", "-r", "-z", "-l", head])
            rows = []
            for line in listing.stdout.decode("utf-8", "replace").split("\0"):
                meta, _, path = line.partition("\t")
                fields = meta.split()
                if len(fields) == 4 and fields[1] == "blob":
                    rows.append((fields[3], path))
            paths = [p for size, p in rows
                     if p.endswith((".yaml", ".yml")) and size.isdigit() and int(size) <= _MAX_FILE]
            texts = self._blobs(f"{head}:{p}" for p in paths)
            self._files[head] = {p: texts[f"{head}:{p}"] for p in paths if f"{head}:{p}" in texts}
        return self._files[head]

    def cluster_docs(self, head: str) -> list[tuple[str | None, str | None]]:
        """``(metadata.name, spec.id)`` of every Cluster document in the head's YAML files."""
        if head in self._clusters:
            return self._clusters[head]
        found: list[tuple[str | None, str | None]] = []
        for text in self.desired_files(head).values():
            if "Cluster" not in text:
                continue
            try:
                docs = list(YAML(typ="safe", pure=True).load_all(text))
            except (YAMLError, ValueError):
                continue
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind") == "Cluster":
                    spec, metadata = doc.get("spec") or {}, doc.get("metadata") or {}
                    cid = spec.get("id") if isinstance(spec, dict) else None
                    name = metadata.get("name") if isinstance(metadata, dict) else None
                    if cid or name:
                        found.append((str(name) if name else None, str(cid) if cid else None))
        self._clusters[head] = found
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

    def zone_files(self, cluster_id: str) -> dict[str, dict[str, str]]:
        """{status commit: {zone: blob id of its ``zones/<zone>.yaml``}} for every commit of the
        branch (first parents), from one ``git log --raw``; kept for the next call."""
        if cluster_id in self._zone_files:
            return self._zone_files[cluster_id]
        ref = f"{STATUS}{cluster_id}"
        out = self.cache.run(["log", "--first-parent", "--reverse", "--root", "--raw", "--no-abbrev",
                              f"--format={_FORMAT}%H", ref, "--", "zones/"])
        order = self.cache.run(["rev-list", "--first-parent", "--reverse", ref, "--"])
        changed: dict[str, dict[str, str]] = {}  # commit -> {zone: blob id} after it
        blobs: dict[str, str] = {}
        for record in out.stdout.decode("utf-8", "replace").split(_FORMAT) if out.rc == 0 else ():
            head, *raw = record.strip("\n").split("\n")
            if not head.strip():
                continue
            for line in raw:
                meta, _, path = line.partition("\t")
                fields = meta.split()
                if len(fields) < 5 or not path.startswith("zones/") or not path.endswith(".yaml"):
                    continue
                zone = path[len("zones/"):-len(".yaml")]
                if fields[4].startswith("D"):
                    blobs.pop(zone, None)
                else:
                    blobs[zone] = fields[3]
            changed[head.strip()] = dict(blobs)
        files: dict[str, dict[str, str]] = {}
        current: dict[str, str] = {}
        for sha in order.stdout.decode().split() if order.rc == 0 else ():
            current = changed.get(sha, current)
            files[sha] = current
        self._zone_files[cluster_id] = files
        return files

    def zone_facts(self, blobs: Iterable[str]) -> dict[str, ZoneState]:
        """{blob id: ZoneState} of zone documents, each read once (one ``git cat-file --batch``
        for those not read yet) and parsed only when it can say ``held: true``."""
        wanted = sorted(set(blobs))
        missing = [b for b in wanted if b not in self._facts]
        if missing:
            texts = self._blobs(missing)
            self._facts.update({b: _zone_state(texts.get(b)) for b in missing})
        return {b: self._facts[b] for b in wanted}

    def zone_states(self, cluster_id: str, shas: Collection[str]) -> dict[str, dict[str, ZoneState]]:
        """For each status commit in ``shas``: {zone: ZoneState} of its zone documents."""
        files = self.zone_files(cluster_id)
        chosen = {sha: files[sha] for sha in shas if sha in files}
        facts = self.zone_facts(blob for zones in chosen.values() for blob in zones.values())
        return {sha: {zone: facts[blob] for zone, blob in sorted(zones.items())} for sha, zones in chosen.items()}

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


def _zone_state(text: str | None) -> ZoneState:
    """A zone document's held state; only a text that can say ``held: true`` is parsed."""
    if text is None or "held" not in text or "true" not in text.lower():
        return NOT_HELD
    try:
        doc = load(text)
    except StatusDocError:
        return NOT_HELD
    if doc.get("held") is not True:
        return NOT_HELD
    problems = tuple(str(p) for p in doc.get("problems") or () if p) if isinstance(doc.get("problems"), list) else ()
    error = str(doc.get("error") or "")
    reason = problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "") if problems else error
    return ZoneState(True, _str(doc.get("appliedRevision")), reason or "held", problems)


def _ready_condition(value: Any) -> dict[str, str]:
    for c in value if isinstance(value, list) else []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return {"reason": str(c.get("reason") or ""), "message": str(c.get("message") or "")}
    return {}


def _str(value: Any) -> str | None:
    return str(value) if value else None
