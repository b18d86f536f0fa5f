"""Validation kept across trees: what each file made, keyed by its git blob id.

A long-running caller (the agent from one cycle to the next) validates tree after tree that
differ in a file or two.  `ValidationCache` keeps, for each file by path and git blob id
(`blob_id`: the id git gives the same bytes), what `gitdns.core.loader.load` made of it: its
parsed documents, each document's envelope and schema outcome, and the model objects built
from it (a RecordSet's also by the Zones' domains, which its relative names read).  An
unchanged file is then neither parsed nor schema-checked again, and gives the very same model
objects; the semantic checks keep their results with what each read
(`gitdns.core.checks.index.CheckMemo`), so that only those reading a changed document run
again.  Everything stays in memory: nothing is written, nothing unpickled.

Entries of files that the last tree no longer holds are dropped after each load (`sweep`);
a cache belongs to one caller at a time (it is not locked).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gitdns.core.checks.index import CheckMemo
from gitdns.core.model.build import Doc
from gitdns.core.problems import Problem


def blob_id(text: str) -> str:
    """The git blob id of ``text`` in UTF-8 (``git hash-object`` of the file it was read from)."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the loader made of one document: ``doc`` (None when its kind is unknown) and the
    problems it has; ``placed`` when they stand alone (a refused document with no kind,
    blocking every zone) rather than hold the document back."""

    index: int
    doc: Doc | None
    problems: tuple[Problem, ...] = ()
    placed: bool = False


@dataclass(slots=True)
class FileEntry:
    """One file's parse problem, each document's outcome, and the model objects built of them
    (by document index and, for a RecordSet, the Zones' domains)."""

    parse_problem: Problem | None
    outcomes: tuple[Outcome, ...]
    built: dict[tuple[int, tuple[tuple[str, str], ...]], object] = field(default_factory=dict)


    def trim(self) -> None:
        """Let go of the parsed data of every document whose model object is built and that no
        later load reads again (all but Zones, whose domains each load reads, RecordSets, which
        are built again when those change, and documents with problems): the model object is
        what is kept, at a fraction of the size."""
        kept: list[Outcome] = []
        for outcome in self.outcomes:
            doc = outcome.doc
            if (doc is not None and doc.body and not outcome.problems and doc.kind not in _READ_AGAIN
                    and (outcome.index, ()) in self.built):
                outcome = replace(outcome, doc=replace(doc, body={}))
            kept.append(outcome)
        self.outcomes = tuple(kept)


_READ_AGAIN = frozenset({"Zone", "RecordSet"})  # kinds whose parsed data a later load reads


class ValidationCache:
    """`gitdns.core.validate.check` of one tree after another, redoing only what changed."""

    __slots__ = ("_files", "_schemas", "_used", "checks")

    def __init__(self) -> None:
        self._files: dict[tuple[str, str], FileEntry] = {}
        self._used: set[tuple[str, str]] = set()
        self._schemas: tuple[tuple[str, object], ...] = ()
        self.checks = CheckMemo()

    def begin(self, schemas: Mapping[str, Mapping[str, Any]]) -> None:
        """Start a load; the files' outcomes are kept only while the schemas are the same objects."""
        now = tuple(sorted(((kind, schema) for kind, schema in schemas.items()), key=lambda kv: kv[0]))
        if len(now) != len(self._schemas) or any(k != k2 or s is not s2 for (k, s), (k2, s2) in
                                                 zip(now, self._schemas, strict=True)):
            self._files.clear()
        self._schemas = now
        self._used = set()

    def get(self, file: str, blob: str) -> FileEntry | None:
        key = (file, blob)
        self._used.add(key)
        return self._files.get(key)

    def put(self, file: str, blob: str, entry: FileEntry) -> None:
        key = (file, blob)
        self._used.add(key)
        self._files[key] = entry

    def sweep(self) -> None:
        """Drop the files the tree just loaded no longer holds, and the parsed data the files it
        holds no longer need (`FileEntry.trim`)."""
        for key in [k for k in self._files if k not in self._used]:
            del self._files[key]
        for entry in self._files.values():
            entry.trim()

    def __len__(self) -> int:
        return len(self._files)
