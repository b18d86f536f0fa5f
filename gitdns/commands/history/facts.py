"""What `gitdns history` keeps of each status document, by blob id: summary.yaml's
appliedRevision and cluster, health.yaml's unhealthy targets, a zone document's held state,
groups.yaml's serial and groups per zone (`DocFacts`), in ``status-facts.json`` beside the
history cache, so a warm run parses only the blobs it has not seen.  Blob ids name contents: a
kept entry never goes stale.

    read_facts(git, path, blobs, zones=, groups=) -> {blob: DocFacts}   kept ones from ``path``, the rest
                                                           read and parsed (a zone document only when
                                                           it can say ``held: true``; ``groups``: the
                                                           groups.yaml blobs)
    facts_of(doc, groups=False) -> DocFacts            of one parsed status document
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitdns.adapters.git.cache import GitCache
from gitdns.core.groups.serials import Applied, applied_groups
from gitdns.core.limits import DEFAULT_LIMITS
from gitdns.core.status.doc import load as load_status

_FACTS_VERSION = 3


@dataclass(frozen=True, slots=True)
class DocFacts:
    """What history reads of a status document: summary.yaml's appliedRevision and cluster,
    health.yaml's targets in state unhealthy; a zone document's ``held`` (its appliedRevision,
    the last good revision's label, is then ``applied``) and why (``reason``); groups.yaml's
    serial and groups per zone domain (``groups``, `gitdns.core.groups.serials.applied_groups`)."""

    applied: str = ""
    cluster: str = ""
    unhealthy: tuple[str, ...] = ()
    held: bool = False
    reason: str = ""
    groups: tuple[tuple[str, Applied], ...] = ()


NO_FACTS = DocFacts()


def facts_of(doc: object, groups: bool = False) -> DocFacts:
    """``groups``: ``doc`` is a groups.yaml (only its zones are read)."""
    if not isinstance(doc, dict):
        return NO_FACTS
    if groups:
        return DocFacts(groups=tuple(sorted(applied_groups(doc).items())))
    revision, who, targets = doc.get("appliedRevision"), doc.get("cluster"), doc.get("targets")
    unhealthy = sorted(str(t) for t, v in (targets if isinstance(targets, dict) else {}).items()
                       if isinstance(v, dict) and v.get("state") == "unhealthy")
    held = doc.get("held") is True
    reason = ""
    if held:  # as `gitdns status` words it: the first problem (and how many more), else the error
        problems = [str(p) for p in doc.get("problems") or () if p] if isinstance(doc.get("problems"), list) else []
        reason = problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "") if problems \
            else str(doc.get("error") or "") or "held"
    return DocFacts(revision if isinstance(revision, str) else "", str(who) if who else "", tuple(unhealthy),
                    held, reason)


def _load_facts(path: Path) -> dict[str, DocFacts]:
    """The facts file, or nothing when it is missing, unreadable, of another version or malformed."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("version") != _FACTS_VERSION or not isinstance(doc.get("facts"), dict):
        return {}
    out: dict[str, DocFacts] = {}
    for blob, row in doc["facts"].items():
        if isinstance(row, list) and len(row) == 6 and isinstance(row[0], str) and isinstance(row[1], str) \
                and isinstance(row[2], list) and all(isinstance(t, str) for t in row[2]) \
                and isinstance(row[3], bool) and isinstance(row[4], str) and isinstance(row[5], list):
            kept = _groups_of(row[5])
            if kept is not None:
                out[blob] = DocFacts(row[0], row[1], tuple(row[2]), row[3], row[4], kept)
    return out


def _groups_of(rows: list[object]) -> tuple[tuple[str, Applied], ...] | None:
    """The kept ``[domain, serial, [groups], diverged]`` rows, or None when one is malformed."""
    out: list[tuple[str, Applied]] = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], str) and type(row[1]) is int
                and isinstance(row[2], list) and all(isinstance(g, str) for g in row[2])
                and isinstance(row[3], bool)):
            return None
        out.append((row[0], Applied(row[1], tuple(row[2]), row[3])))
    return tuple(out)


def _save_facts(path: Path, facts: dict[str, DocFacts]) -> None:
    """Written whole to a temporary file and renamed over the old one: a crash leaves one or the other."""
    doc = {"version": _FACTS_VERSION,
           "facts": {b: [f.applied, f.cluster, list(f.unhealthy), f.held, f.reason,
                         [[d, a.serial, list(a.groups), a.diverged] for d, a in f.groups]]
                     for b, f in facts.items()}}
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=".facts-",
                                         delete=False) as tmp:
            json.dump(doc, tmp, separators=(",", ":"))
        os.replace(tmp.name, path)
    except OSError:
        return  # a cache only: the next run reads the blobs again


def read_facts(git: GitCache, path: Path, blobs: Sequence[str], zones: Collection[str] = (),
               groups: Collection[str] = ()) -> dict[str, DocFacts]:
    """What history needs of each status blob: from the facts file kept beside the cache
    (blob ids name contents, so a kept entry never goes stale), the rest read in one go and
    parsed; the file is rewritten with this run's blobs when something was new.  ``zones``:
    the blobs that are zone documents, parsed only when they can say ``held: true``;
    ``groups``: the blobs that are groups.yaml documents."""
    wanted = list(dict.fromkeys(blobs))
    kept = _load_facts(path)
    out = {b: kept[b] for b in wanted if b in kept}
    new = [b for b in wanted if b not in out]
    sizes = git.sizes(new)
    small = [b for b in new if sizes[b] <= DEFAULT_LIMITS.file_bytes]  # a larger one: an empty document
    out.update({b: NO_FACTS for b in new})
    for blob, (_, data) in git.objects(small).items():
        if blob in zones and (b"held" not in data or b"true" not in data.lower()):
            continue  # a zone document that cannot say held: true (most are large: not parsed)
        try:
            doc = load_status(data.decode("utf-8", errors="replace"))
        except ValueError:
            continue
        out[blob] = facts_of(doc, blob in groups)
    if new or len(kept) != len(out):
        _save_facts(path, out)
    return out
