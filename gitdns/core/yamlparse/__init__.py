"""YAML text to plain data, built straight from the parser's events.

    parse(text) -> list[Document]       every document: index, first line, data, refusal
    events(text) -> Iterator[Event]      the events alone (`gitdns.core.yamlparse.lines` walks them)
    scalar(loader, event) -> value       one scalar as the loader builds it

libyaml (ruamel.yaml's C parser) reads the text; dicts, lists and scalars are built from its
events directly, with no node tree in between, so memory is about the size of the data, and
the YAML 1.2 core schema resolves plain scalars (as ruamel's safe loader does).

Desired state never needs to repeat a value, so what repeats one is refused before anything
is repeated:

- an **alias** (``*name``) is a `Refusal` of its document: the document is still built, with
  a `StandIn` where each alias was, so the loader can tell which zones it touches (all of
  them when a stand-in is where zones are named), but it is never validated or used.  The
  value an alias names is never referenced twice, copied or walked, so an alias bomb of a
  few hundred bytes costs what its text costs.
- a **merge key** (``<<``) the same way.
- with ``finite=True`` (the desired state, `gitdns.core.loader`), a **number that is not
  finite** (``.nan``, ``.inf``, ``-.inf``, ``1e999``) anywhere, as a value or a key, is a
  `Refusal` too (``NonFiniteNumber``): NaN compares false with every bound, so a schema's
  ``minimum``/``maximum`` would let it through, and no field of desired state means one.

A refusal carries the line and the YAML path of the first refused value.

Nesting deeper than `MAX_DEPTH`, a duplicate or non-scalar key, and a tag outside the core
schema end the file with a `MarkedYAMLError`, like a syntax error.

The package's other module: `lines` — The lines of YAML paths, found in one pass over the
parser's events.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from sys import intern
from typing import Any

from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.cyaml import CParser  # type: ignore[attr-defined]
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from gitdns.core.problems import shown

MAX_DEPTH = 64  # nested mappings and lists; desired state needs about ten
_CORE = "tag:yaml.org,2002:"
_STR, _INT, _MERGE = _CORE + "str", _CORE + "int", _CORE + "merge"
_MAPS, _SEQS = (None, "!", _CORE + "map"), (None, "!", _CORE + "seq")
Event = Any
MERGE = object()  # the value of a plain ``<<`` (a merge key)


class StandIn(dict):  # type: ignore[type-arg]
    """What an alias leaves where a value was: an empty mapping (`StandInKey` where a key was)."""

    __slots__ = ()


class StandInKey:
    __slots__ = ()


@dataclass(slots=True)
class Refusal:
    line: int
    message: str
    code: str
    path: tuple[str | int, ...] = ()  # where in the document (keys and list indexes)


@dataclass(slots=True)
class Document:
    index: int  # its place in the stream, counting empty documents
    line: int  # where its content starts (1-based)
    data: Any
    refused: Refusal | None = None  # an alias or merge key: the data is a stand-in


MAX_INT_DIGITS = 4000  # below Python's int/str conversion limit (4300 digits); no field needs a tenth of it
_TABLES: dict[str, dict[Any, list[tuple[str, Any]]]] = {}  # YAML version -> ruamel's implicit resolver table


class Loader(CParser, SafeConstructor, VersionedResolver):  # type: ignore[misc]
    """libyaml's C parser, the safe constructor (for scalars of other types than strings) and
    YAML 1.2 resolution, with the resolver table built once per process (read only)."""

    def __init__(self, stream: str) -> None:
        CParser.__init__(self, stream)
        self._parser = self._composer = self
        SafeConstructor.__init__(self, loader=self)
        VersionedResolver.__init__(self, version=(1, 2), loader=self)
        table = _TABLES.get("1.2")
        if table is None:  # built from ruamel's constant list: the same for every stream, built once
            table = _TABLES["1.2"] = VersionedResolver.versioned_resolver.fget(self)  # type: ignore[attr-defined]
        self.table: dict[Any, list[tuple[str, Any]]] = table
        self.anywhere = self.table.get(None, [])

    @property
    def versioned_resolver(self) -> Any:
        return self.table

    @property
    def processing_version(self) -> tuple[int, int]:
        return 1, 2  # what ruamel finds for a C parser, after two failed attribute look-ups


def error(message: str, event: Event) -> MarkedYAMLError:
    return MarkedYAMLError(problem=message, problem_mark=event.start_mark)


def scalar(loader: Loader, event: Event) -> Any:
    """The value of a scalar event: a plain scalar resolved by the YAML 1.2 core schema."""
    tag, value = event.tag, event.value
    if tag is None or tag == "!":
        if not event.implicit[0]:
            return value
        tag = _STR
        for rule, regexp in loader.table.get(value[:1], []) + loader.anywhere:
            if regexp.match(value):
                tag = rule
                break
    if tag == _STR:
        return value
    if tag == _INT and len(value) > MAX_INT_DIGITS:  # Python refuses to convert it (and it would be slow)
        raise error(f"an integer of {len(value)} characters (more than {MAX_INT_DIGITS}) is not accepted", event)
    if tag == _INT and value.isdigit() and (value[0] != "0" or value == "0"):
        return int(value)  # the common case, without a node
    if tag == _MERGE:
        return MERGE
    build = loader.yaml_constructors.get(tag)
    if build is None:
        raise error(f"the tag {shown(tag)} is not supported", event)
    try:
        return build(loader, ScalarNode(tag, value, event.start_mark, event.end_mark, style=event.style))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise error(f"{shown(value)} is not a valid {tag.removeprefix(_CORE)}: {exc}", event) from None


def events(text: str) -> Iterator[Event]:
    """The parser's events of ``text`` (a syntax error raises `YAMLError`)."""
    loader = Loader(text)
    try:
        while loader.check_event():
            yield loader.get_event()
    finally:
        loader.dispose()


class _Builder:
    """One document from its events: containers on a stack, each with its pending key."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        # [container, key or _NO_KEY, event of the key, its key or index in its parent]
        self.stack: list[list[Any]] = []
        self.root: Any = None
        self.line = 0
        self.refused: Refusal | None = None

    def refuse(self, event: Event, message: str, code: str) -> None:
        if self.refused is None:
            self.refused = Refusal(event.start_mark.line + 1, message, code, self.path())

    def path(self) -> tuple[str | int, ...]:
        """Where the next value goes: the keys and indexes from the document's root."""
        parts = [entry[3] for entry in self.stack[1:]]
        if self.stack:
            container, key = self.stack[-1][0], self.stack[-1][1]
            parts.append(len(container) if isinstance(container, list) else key)
        return tuple(p if isinstance(p, str | int) and not isinstance(p, bool) else str(p)
                     for p in parts if p is not _NO_KEY)

    def add(self, value: Any, event: Event) -> None:
        if not self.stack:
            self.root, self.line = value, event.start_mark.line + 1
            return
        top = self.stack[-1]
        container = top[0]
        if isinstance(container, list):
            container.append(value)
        elif top[1] is _NO_KEY:
            if isinstance(value, dict | list):
                raise error("a mapping key must be a scalar, not a mapping or a list", event)
            # a key as the one string object every mapping shares (and code that names it): a
            # NodePool of 10,000 nodes parsed 30,000 copies of "name", "ip" and "healthEndpoint"
            top[1], top[2] = (intern(value) if type(value) is str else value), event
        else:
            key, key_event = top[1], top[2]
            top[1] = _NO_KEY
            if key is MERGE:
                self.refuse(key_event, "merge keys (<<) are not allowed", "MergeKeyRefused")
            elif key in container:
                raise error(f"duplicate key {shown(key)}", key_event)
            else:
                container[key] = value

    def stand_in(self) -> Any:
        """What an alias leaves: a fresh key where a key is awaited, else an empty mapping."""
        top = self.stack[-1] if self.stack else None
        return StandInKey() if top is not None and isinstance(top[0], dict) and top[1] is _NO_KEY else StandIn()

    def open(self, container: dict[Any, Any] | list[Any], event: Event) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise error(f"nested more than {MAX_DEPTH} levels deep", event)
        top = self.stack[-1] if self.stack else None
        place = None if top is None else len(top[0]) if isinstance(top[0], list) else top[1]
        self.add(container, event)
        self.stack.append([container, _NO_KEY, None, place])


_NO_KEY = object()


def parse(text: str, finite: bool = False) -> list[Document]:
    """Every non-empty document of ``text``.  A syntax error, a duplicate key, nesting deeper
    than `MAX_DEPTH` or an unknown tag raises `YAMLError` (with ``problem_mark``); ``finite``:
    a number that is not finite refuses its document (``NonFiniteNumber``)."""
    loader = Loader(text)
    docs: list[Document] = []
    get = loader.get_event
    try:
        index = 0
        while loader.check_event():
            event = get()
            if type(event) is StreamEndEvent:
                break
            if type(event) is not DocumentStartEvent:
                continue
            build = _Builder(loader)
            while True:
                event = get()
                kind = type(event)
                if kind is ScalarEvent:
                    value = scalar(loader, event)
                    if finite and type(value) is float and not math.isfinite(value):
                        build.refuse(event, f"{shown(event.value)} is not a finite number", "NonFiniteNumber")
                    build.add(value, event)
                elif kind is MappingStartEvent or kind is SequenceStartEvent:
                    allowed = _MAPS if kind is MappingStartEvent else _SEQS
                    if event.tag not in allowed:
                        raise error(f"the tag {shown(event.tag)} is not supported", event)
                    build.open({} if kind is MappingStartEvent else [], event)
                elif kind is MappingEndEvent or kind is SequenceEndEvent:
                    build.stack.pop()
                elif kind is AliasEvent:
                    build.refuse(event, "aliases are not allowed", "AliasRefused")
                    build.add(build.stand_in(), event)
                elif kind is DocumentEndEvent:
                    break
            if build.root is not None:
                docs.append(Document(index, build.line, build.root, build.refused))
            index += 1
    finally:
        loader.dispose()
    return docs
