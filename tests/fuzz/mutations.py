"""Mutations of one document of a desired-state file, as values Hypothesis draws and shrinks.

A `Case` names an example repository, a cluster, a file and a document in it (each a number
taken modulo what there is), and a few operations in four stages:

- **tree** (on the document parsed into `tests.fuzz.yamltree` nodes, then written out again):
  drop, duplicate or rename a key; set a value to another type, an odd scalar (NaN, inf, -0,
  big and huge integers, timestamps, binary, null and its spellings, YAML 1.1 booleans), a
  tagged value (``!!set``, ``!custom``, ``!!str``), a value taken from any example, a huge
  string or a deeply nested one; swap two values; put unicode into a string (controls, bidi,
  NUL, zero-width, line separators, surrogates as escapes); an anchor and an alias, a merge key,
  an undefined alias; replace the document, or add one, with a generated tree;
- **text** (on the document's text): insert YAML syntax or unicode, delete, duplicate, drop,
  swap and re-indent lines, tab indentation, document markers and directives, a second copy of
  the document;
- **bytes** (on the document's bytes): invalid UTF-8 (lone continuation bytes, overlong forms,
  UTF-8-encoded surrogates, truncated sequences), NUL, escape sequences, flipped bits, deletions;
- **file** (the whole file, so every document of it counts as touched): a byte order mark at
  the start or before the document, CRLF, CR, NEL or U+2028 line ends, UTF-16/UTF-32/Latin-1,
  truncation.

`apply(case, files)` returns the files with the mutation in, as bytes (what a commit holds).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from gitdns.core.model import API_VERSION, KINDS
from tests.fuzz.yamltree import Anchored, Map, Raw, Seq, emit, holds_document, split, tree_of

SCHEMAS = Path(__file__).resolve().parents[2] / "gitdns" / "data" / "schemas"


def _schema_keys() -> list[str]:
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(node.get("properties", {}) if isinstance(node.get("properties"), dict) else ())
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(SCHEMAS.glob("*.schema.json")):
        walk(json.loads(path.read_text()))
    return sorted(keys)


KEYS = _schema_keys()
ODD_KEYS = ["", " ", "Kind", "KIND", "kind ", "apiversion", "metadata.name", "<<", "\u202ekind", "ki\u200bnd",
            "kind\x00", "spec\n", 1, 0, -1, True, False, None, 1.5, Raw("~"), Raw("!!str 5"), Raw("&k key"),
            Raw("*k"), Raw("<<"), Raw("? x"), Raw("[a, b]"), Raw("{a: 1}"), Raw('"\\ud800"'), Raw(".nan")]
TOKENS = [
    ".nan", ".NaN", ".inf", "-.inf", "+.inf", "1e999", "-1e999", "1e-400", "-0", "-0.0", "+0", "0x1F", "0o17",
    "017", "0b101", "1_000", "123456789012345678901234567890", "9" * 4001, "-" + "9" * 300,
    "2001-12-14t21:59:43.10-05:00", "2002-12-14", "12:30:45", "!!timestamp 2001-12-14", "!!timestamp 2001-13-45",
    "!!binary aGVsbG8=", "!!binary '%%%'", "!!int '12'", "!!int 'x'", "!!float '1.5'", "!!float nan",
    "!!bool 'yes'", "!!bool maybe", "!!str 5", "!!null ''", "!!str", "!!set {a, b}", "!!omap [{a: 1}]",
    "!!pairs [{a: 1}]", "!custom x", "!<tag:example.com,2000:x> y", "! x", "!!map {a: 1}", "!!seq [1]",
    "!!str [1]", "!!int [1]", "!!map", "null", "~", "Null", "NULL", "", "''", '""', "' '", "true", "True",
    "TRUE", "yes", "no", "on", "off", "y", "n", "=", "<<", "*undefined", '"\\0"', '"\\x00"',
    '"\\x1b[31mred\\x1b[0m"', '"\\u202egnp.exe"', '"\\u2066x\\u2069"', '"\\ud800"', '"\\udcff"',
    '"\\ud83d\\ude00"', '"\\uffff"', '"\\ufffe"', '"\\ufeff"', '"\\U0010ffff"', '"\\U00110000"', '"\\N\\L\\P\\_"',
    '"\\e"', '"\\q"', "'it''s'", "|\n  block\n  text", ">-\n  folded", "[", "]", "{", "}", "{a: 1", "- x",
    "? x", "@x", "`x", "%x", "&a", "*", "#c", ": x", "a: b: c", "[1, [2, [3]]]", "{a: {b: {c: 1}}}", "[]",
    "{}", "[.nan]", "{.inf: 1}", "[*a]", "&a [*a]",
]
# what text and bytes mutations insert
UNICODE = ["\x00", "\x01", "\x07", "\x1b", "\x1b[2J", "\x7f", "\x85", "\x9b", "\u00a0", "\u200b", "\u200d",
           "\u202a", "\u202e", "\u2066", "\u2069", "\u2028", "\u2029", "\ufeff", "\ufffd", "\uffff", "\U0001f600",
           "\U000e0001", "e\u0301", "\u0130", "\u212a", "\u0000kind"]
SYNTAX = [": ", ":", "- ", "-", "---", "...", "{", "}", "[", "]", ",", "&a ", "*a", "!", "!!", "|", ">", "'", '"',
          "%", "@", "`", "#", "?", "\t", "\n", "\r\n", "\r", " ", "  ", "\\", "<<: ", "~", "\n  ", "\n- "]
MARKERS = ["---", "...", "--- |", "--- !!map", "--- >", "%YAML 1.1\n---", "%YAML 1.2\n---", "%YAML 2.0\n---",
           "%TAG ! tag:example.com,2000:\n---", "%TAG !e! tag:example.com,2000:\n---", "--- # c", "..."]
BYTES = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
         b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\xf0\x9f", b"\x00",
         b"\x00\x00", b"\x1b[31m", b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe", b"\r", b"\x85", b"\xe2\x80\xa8"]


def _pool() -> tuple[list[Any], list[Any]]:
    """Every scalar and every mapping or list of the examples (for transplants)."""
    from tests.fuzz.repos import REPOS, repo_files

    scalars: set[Any] = set()
    trees: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, Map):
            trees.append(node)
            for key, value in node:
                scalars.add(key)
                walk(value)
        elif isinstance(node, Seq):
            trees.append(node)
            for value in node:
                walk(value)
        elif isinstance(node, str | int | float | bool) or node is None:
            scalars.add(node)

    for name in REPOS:
        for text in repo_files(name).values():
            for piece in split(text.decode()):
                if holds_document(piece):
                    walk(tree_of(piece))
    return sorted(scalars, key=repr), trees[:: max(1, len(trees) // 60)]


POOL, POOL_TREES = _pool()

# --- the tree stage ---------------------------------------------------------------------------

Slot = tuple[list[Any], int]


def slots(tree: Any) -> list[Slot]:
    """Every place a value sits, depth first."""
    out: list[Slot] = []

    def walk(node: Any) -> None:
        inner = node.value if isinstance(node, Anchored) else node
        if isinstance(inner, Map | Seq):
            for index, item in enumerate(inner):
                out.append((inner, index))
                walk(item[1] if isinstance(inner, Map) else item)

    walk(tree)
    return out


def get(slot: Slot) -> Any:
    container, index = slot
    return container[index][1] if isinstance(container, Map) else container[index]


def put(slot: Slot, value: Any) -> None:
    container, index = slot
    if isinstance(container, Map):
        container[index] = (container[index][0], value)
    else:
        container[index] = value


@dataclass(frozen=True)
class TreeOp:
    at: int

    def slot(self, tree: Any, at: int | None = None) -> Slot | None:
        found = slots(tree)
        return found[(self.at if at is None else at) % len(found)] if found else None

    def run(self, tree: Any) -> Any:
        slot = self.slot(tree)
        if slot is not None:
            self.change(slot, tree)
        return tree

    def change(self, slot: Slot, tree: Any) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Drop(TreeOp):
    def change(self, slot: Slot, tree: Any) -> None:
        del slot[0][slot[1]]


@dataclass(frozen=True)
class Duplicate(TreeOp):
    """The key (or list item) twice; with ``value``, the second one holds that instead."""

    value: Any = None

    def change(self, slot: Slot, tree: Any) -> None:
        container, index = slot
        item = copy.deepcopy(container[index])
        if self.value is not None:
            item = (item[0], self.value) if isinstance(container, Map) else self.value
        container.insert(index + 1, item)


@dataclass(frozen=True)
class SetValue(TreeOp):
    value: Any = None

    def change(self, slot: Slot, tree: Any) -> None:
        put(slot, copy.deepcopy(self.value))


@dataclass(frozen=True)
class Transplant(TreeOp):
    """A value from any example of the same type as the one replaced (mostly still valid)."""

    pick: int = 0

    def change(self, slot: Slot, tree: Any) -> None:
        value = get(slot)
        same = [v for v in POOL if type(v) is type(value)] or POOL
        put(slot, same[self.pick % len(same)])


@dataclass(frozen=True)
class RenameKey(TreeOp):
    key: Any = None

    def change(self, slot: Slot, tree: Any) -> None:
        container, index = slot
        if isinstance(container, Map):
            container[index] = (self.key, container[index][1])


@dataclass(frozen=True)
class Swap(TreeOp):
    other: int = 0

    def change(self, slot: Slot, tree: Any) -> None:
        other = self.slot(tree, self.other)
        assert other is not None
        a, b = get(slot), get(other)
        put(slot, b)
        put(other, a)


@dataclass(frozen=True)
class Huge(TreeOp):
    size: int = 300
    char: str = "a"

    def change(self, slot: Slot, tree: Any) -> None:
        put(slot, (self.char * self.size)[: self.size])


@dataclass(frozen=True)
class Nest(TreeOp):
    depth: int = 10
    as_map: bool = False

    def change(self, slot: Slot, tree: Any) -> None:
        value = get(slot)
        for _ in range(self.depth):
            value = Map([("x", value)]) if self.as_map else Seq([value])
        put(slot, value)


@dataclass(frozen=True)
class Inject(TreeOp):
    """Text put into a string value (or its key, when the value is no string) at ``pos``."""

    pos: int = 0
    text: str = ""

    def change(self, slot: Slot, tree: Any) -> None:
        container, index = slot
        value = get(slot)
        if isinstance(value, str):
            cut = self.pos % (len(value) + 1)
            put(slot, value[:cut] + self.text + value[cut:])
        elif isinstance(container, Map) and isinstance(container[index][0], str):
            key = container[index][0]
            cut = self.pos % (len(key) + 1)
            container[index] = (key[:cut] + self.text + key[cut:], value)


@dataclass(frozen=True)
class Alias(TreeOp):
    """An anchor on one value and, at another, ``alias`` (an alias of it), ``merge`` (``<<: *a``),
    ``undefined`` (an alias of no anchor), ``self`` (the anchored value holds its own alias) or
    ``anchor`` (the anchor alone)."""

    other: int = 0
    mode: str = "alias"

    def change(self, slot: Slot, tree: Any) -> None:
        other = self.slot(tree, self.other)
        assert other is not None
        value = get(slot)
        if self.mode == "self" and isinstance(value, Map | Seq):
            value.append(("k", Raw("*a")) if isinstance(value, Map) else Raw("*a"))
        put(slot, Anchored("a", value))
        if self.mode in ("alias", "undefined"):
            target = get(other)
            if not isinstance(target, Anchored):
                put(other, Raw("*a" if self.mode == "alias" else "*nowhere"))
        elif self.mode == "merge":
            inner = get(other)
            if isinstance(inner, Map):
                inner.insert(0, (Raw("<<"), Raw("*a")))


@dataclass(frozen=True)
class ReplaceDoc:
    tree: Any

    def run(self, tree: Any) -> Any:
        return copy.deepcopy(self.tree)


# --- the text, bytes and file stages ------------------------------------------------------------


@dataclass(frozen=True)
class TextInsert:
    pos: int
    text: str

    def run(self, text: str) -> str:
        cut = self.pos % (len(text) + 1)
        return text[:cut] + self.text + text[cut:]


@dataclass(frozen=True)
class TextDelete:
    pos: int
    size: int

    def run(self, text: str) -> str:
        cut = self.pos % (len(text) + 1)
        return text[:cut] + text[cut + self.size:]


@dataclass(frozen=True)
class LineEdit:
    """``dup``, ``drop``, ``swap`` (with the next), ``indent``, ``dedent``, ``tab`` or a marker line."""

    line: int
    how: str

    def run(self, text: str) -> str:
        lines = text.split("\n")
        at = self.line % len(lines)
        row = lines[at]
        if self.how == "dup":
            lines.insert(at, row)
        elif self.how == "drop":
            del lines[at]
        elif self.how == "swap" and at + 1 < len(lines):
            lines[at], lines[at + 1] = lines[at + 1], row
        elif self.how == "indent":
            lines[at] = "  " + row
        elif self.how == "dedent":
            lines[at] = row[2:] if row.startswith("  ") else row
        elif self.how == "tab":
            lines[at] = "\t" + row.lstrip(" ")
        elif self.how in MARKERS:
            lines.insert(at, self.how)
        return "\n".join(lines)


@dataclass(frozen=True)
class CopyDoc:
    """The document a second time in the same file (a document of its own after it)."""

    def extra(self, text: str) -> str:
        return "\n" + text.lstrip("\n")


@dataclass(frozen=True)
class AddDoc:
    """A generated document after this one."""

    tree: Any

    def extra(self, text: str) -> str:
        return "\n" + emit(self.tree)


@dataclass(frozen=True)
class ByteInsert:
    pos: int
    data: bytes

    def run(self, data: bytes) -> bytes:
        cut = self.pos % (len(data) + 1)
        return data[:cut] + self.data + data[cut:]


@dataclass(frozen=True)
class ByteFlip:
    pos: int
    bit: int

    def run(self, data: bytes) -> bytes:
        if not data:
            return data
        at = self.pos % len(data)
        return data[:at] + bytes([data[at] ^ (1 << (self.bit % 8))]) + data[at + 1:]


@dataclass(frozen=True)
class ByteDelete:
    pos: int
    size: int

    def run(self, data: bytes) -> bytes:
        cut = self.pos % (len(data) + 1)
        return data[:cut] + data[cut + self.size:]


@dataclass(frozen=True)
class FileEdit:
    """``bom`` (at the start), ``bom-before`` (before the document), ``crlf``, ``cr``, ``nel``,
    ``ls``, ``mixed`` line ends, ``utf-16``, ``utf-16-le``, ``utf-32``, ``latin-1``, or
    ``truncate`` (at ``pos``)."""

    how: str
    pos: int = 0

    def run(self, data: bytes, start: int) -> bytes:
        ends = {"crlf": b"\r\n", "cr": b"\r", "nel": "\x85".encode(), "ls": "\u2028".encode()}
        if self.how == "bom":
            return b"\xef\xbb\xbf" + data
        if self.how == "bom-before":
            return data[:start] + b"\xef\xbb\xbf" + data[start:]
        if self.how in ends:
            return data.replace(b"\n", ends[self.how])
        if self.how == "mixed":
            parts = data.split(b"\n")
            return b"".join(p + (b"\r\n" if i % 2 else b"\n") for i, p in enumerate(parts[:-1])) + parts[-1]
        if self.how == "truncate":
            return data[: self.pos % (len(data) + 1)]
        return data.decode("utf-8", "replace").encode(self.how, "replace")


TREE_OPS = (Drop, Duplicate, SetValue, Transplant, RenameKey, Swap, Huge, Nest, Inject, Alias, ReplaceDoc)
TEXT_OPS = (TextInsert, TextDelete, LineEdit)
EXTRA_OPS = (CopyDoc, AddDoc)
BYTE_OPS = (ByteInsert, ByteFlip, ByteDelete)


@dataclass(frozen=True)
class Case:
    repo: str
    cluster: int
    file: int
    doc: int
    ops: tuple[Any, ...] = field(default=())

    @property
    def whole_file(self) -> bool:
        """Whether an operation reaches past the document (then every document of the file counts)."""
        return any(isinstance(op, FileEdit) for op in self.ops)


Span = tuple[int, int, int | None]  # first and last line of a piece, its index in the file as it was


@dataclass(frozen=True)
class Mutated:
    files: dict[str, bytes]
    path: str  # the file changed
    piece: int  # which of its ``---`` pieces is the document changed
    whole_file: bool
    spans: tuple[Span, ...]  # the pieces of the changed file (a copied or added document: None)


_BREAKS = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # as libyaml counts lines


def spans(segments: list[tuple[bytes, int | None]]) -> tuple[Span, ...]:
    """Where each piece lies (the ``---`` before a piece is on its first line)."""
    out: list[Span] = []
    line = 1
    for data, origin in segments:
        breaks = len(_BREAKS.findall(data.decode("utf-8", "replace")))
        out.append((line, line + breaks, origin))
        line += breaks
    return tuple(out)


def apply(case: Case, files: dict[str, bytes], mutable: list[str]) -> Mutated:
    path = mutable[case.file % len(mutable)]
    pieces = split(files[path].decode())
    docs = [i for i, piece in enumerate(pieces) if holds_document(piece)]
    target = docs[case.doc % len(docs)]
    piece = pieces[target]
    tree_ops = [op for op in case.ops if isinstance(op, TREE_OPS)]
    if tree_ops:
        tree = tree_of(piece)
        for op in tree_ops:
            tree = op.run(tree)
        piece = ("\n" if target else "") + emit(tree)
    extras = [op.extra(piece) for op in case.ops if isinstance(op, EXTRA_OPS)]
    for op in case.ops:
        if isinstance(op, TEXT_OPS):
            piece = op.run(piece)
    raw = piece.encode()
    for op in case.ops:
        if isinstance(op, BYTE_OPS):
            raw = op.run(raw)
    segments = ([(p.encode(), i) for i, p in enumerate(pieces[:target])] + [(raw, target)]
                + [(e.encode(), None) for e in extras]
                + [(p.encode(), target + 1 + i) for i, p in enumerate(pieces[target + 1:])])
    data = b"---".join(seg for seg, _ in segments)
    start = len(b"---".join(seg for seg, _ in segments[:target])) + (3 if target else 0)
    for op in case.ops:
        if isinstance(op, FileEdit):
            data = op.run(data, start)
    return Mutated({**files, path: data}, path, target, case.whole_file, spans(segments))


# --- strategies -------------------------------------------------------------------------------

picks = st.integers(min_value=0, max_value=1 << 16)
texts = st.text(max_size=12)
tokens = st.sampled_from(TOKENS).map(Raw)
scalars = st.one_of(
    st.sampled_from(POOL), tokens, texts, st.integers(min_value=-(1 << 200), max_value=1 << 200),
    st.floats(), st.booleans(), st.none(), st.sampled_from(UNICODE),
)
keys = st.one_of(st.sampled_from(KEYS), st.sampled_from(ODD_KEYS), st.sampled_from(POOL), texts)


def _collections(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(children, max_size=4).map(Seq),
                     st.lists(st.tuples(keys, children), max_size=5).map(Map))


trees = st.one_of(st.recursive(scalars, _collections, max_leaves=20), st.sampled_from(POOL_TREES))


@st.composite
def documents(draw: st.DrawFn) -> Any:
    """A generated document: mostly the envelope of a known kind around a generated spec."""
    if draw(st.integers(0, 4)) == 0:
        return draw(trees)
    head = [("apiVersion", draw(st.sampled_from([API_VERSION, API_VERSION, "v1", Raw("~")]))),
            ("kind", draw(st.one_of(st.sampled_from(KINDS), scalars))),
            ("metadata", Map([("name", draw(st.one_of(st.sampled_from(POOL), scalars)))]))]
    return Map([*head, ("spec", draw(trees))])


tree_ops = st.one_of(
    st.builds(Drop, picks),
    st.builds(Duplicate, picks, st.one_of(st.none(), scalars)),
    st.builds(SetValue, picks, trees),
    st.builds(SetValue, picks, st.one_of(tokens, st.sampled_from(POOL))),
    st.builds(Transplant, picks, picks),
    st.builds(Transplant, picks, picks),
    st.builds(RenameKey, picks, keys),
    st.builds(Swap, picks, picks),
    st.builds(Huge, picks, st.sampled_from([64, 256, 1000, 4096, 70_000, 300_000]),
              st.sampled_from(["a", "é", "\u202e", "\x00", "-", ".", "😀", "a.b."])),
    st.builds(Nest, picks, st.integers(1, 80), st.booleans()),
    st.builds(Inject, picks, picks, st.one_of(st.sampled_from(UNICODE), texts)),
    st.builds(Alias, picks, picks, st.sampled_from(["alias", "merge", "undefined", "self", "anchor"])),
    st.builds(ReplaceDoc, documents()),
)
text_ops = st.one_of(
    st.builds(TextInsert, picks, st.one_of(st.sampled_from(SYNTAX), st.sampled_from(UNICODE), texts)),
    st.builds(TextDelete, picks, st.integers(1, 40)),
    st.builds(LineEdit, picks, st.sampled_from(["dup", "drop", "swap", "indent", "dedent", "tab", *MARKERS])),
    st.just(CopyDoc()),
    st.builds(AddDoc, documents()),
)
byte_ops = st.one_of(
    st.builds(ByteInsert, picks, st.one_of(st.sampled_from(BYTES), st.binary(min_size=1, max_size=4))),
    st.builds(ByteFlip, picks, st.integers(0, 7)),
    st.builds(ByteDelete, picks, st.integers(1, 8)),
)
file_ops = st.builds(
    FileEdit, st.sampled_from(["bom", "bom-before", "crlf", "cr", "nel", "ls", "mixed", "utf-16", "utf-16-le",
                               "utf-32", "latin-1", "truncate"]), picks)
operations = st.one_of(tree_ops, tree_ops, tree_ops, text_ops, byte_ops, file_ops)


def cases(repos: list[str]) -> st.SearchStrategy[Case]:
    return st.builds(Case, st.sampled_from(repos), picks, picks, picks,
                     st.lists(operations, min_size=1, max_size=3).map(tuple))
