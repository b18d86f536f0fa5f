"""A YAML document as a tree the mutations can break in ways plain data cannot hold, and its
text again.

    Map       a mapping as a list of (key, value) pairs: keys may repeat, and be any scalar
    Seq       a list
    Raw       a token written as it is: ``.nan``, ``!!binary aGk=``, ``*a``, ``"\\ud800"``
    Anchored  a value with an anchor (``&a``) before it
    to_tree(data)   plain data (from `gitdns.core.yamlparse.parse`) to Map/Seq
    emit(tree)      block-style YAML text, one line per scalar (so problems have lines to name)
    split(text)     a file's text cut at its ``---`` lines, and which pieces hold a document
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from gitdns.core.yamlparse import parse


class Map(list):  # type: ignore[type-arg]
    """Pairs (key, value), in order; a key may repeat."""

    def __repr__(self) -> str:
        return f"Map({list(self)!r})"


class Seq(list):  # type: ignore[type-arg]
    def __repr__(self) -> str:
        return f"Seq({list(self)!r})"


@dataclass(frozen=True)
class Raw:
    text: str


@dataclass(frozen=True)
class Anchored:
    name: str
    value: Any


def to_tree(data: Any) -> Any:
    if isinstance(data, dict):
        return Map((k, to_tree(v)) for k, v in data.items())
    if isinstance(data, list):
        return Seq(to_tree(v) for v in data)
    return data


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
# what libyaml reads as it is inside double quotes: TAB, LF, CR, printable ASCII, NEL and the
# rest of the BMP outside surrogates and U+FFFE/U+FFFF, and every plane above
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def quote(text: str) -> str:
    """``text`` as a YAML double-quoted scalar that reads back as ``text``."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or code in (0xFEFF, 0xFFFE, 0xFFFF):
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def scalar(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Anchored):
        return f"&{value.name} {scalar(value.value)}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, Map):
        return "{" + ", ".join(f"{key_text(k)}: {scalar(v)}" for k, v in value) + "}"
    if isinstance(value, Seq):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    return quote(str(value))


def key_text(key: Any) -> str:
    if isinstance(key, str) and _PLAIN_KEY.match(key) and key not in ("true", "false", "null", "y", "n"):
        return key
    return scalar(key)  # a Map or Seq: a flow collection as the key (the loader refuses it)


def _block(node: Any) -> bool:
    inner = node.value if isinstance(node, Anchored) else node
    return isinstance(inner, Map | Seq) and len(inner) > 0


def _lines(node: Any, indent: int) -> list[str]:
    """``node`` (a non-empty Map or Seq, maybe anchored) as block lines at ``indent``."""
    pad = " " * indent
    if isinstance(node, Anchored):
        return [pad + f"&{node.name}", *_lines(node.value, indent)]
    out: list[str] = []
    if isinstance(node, Map):
        for key, value in node:
            head = pad + key_text(key) + ":"
            if _block(value):
                anchor = f" &{value.name}" if isinstance(value, Anchored) else ""
                out.append(head + anchor)
                out.extend(_lines(value.value if isinstance(value, Anchored) else value, indent + 2))
            else:
                out.append(head + " " + scalar(value))
        return out
    for item in node:
        if _block(item):
            anchor = f"&{item.name} " if isinstance(item, Anchored) else ""
            inner = _lines(item.value if isinstance(item, Anchored) else item, indent + 2)
            out.append(pad + "- " + anchor + inner[0].lstrip())
            out.extend(inner[1:])
        else:
            out.append(pad + "- " + scalar(item))
    return out


def emit(tree: Any) -> str:
    """The document as block YAML (a scalar or empty collection on one line)."""
    if _block(tree):
        return "\n".join(_lines(tree, 0)) + "\n"
    return scalar(tree) + "\n"


_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)


def split(text: str) -> list[str]:
    """The file's pieces between ``---`` lines (the separators themselves left out)."""
    return _SEPARATOR.split(text)


def join(pieces: list[str]) -> str:
    return "---".join(pieces)


def holds_document(piece: str) -> bool:
    try:
        return bool(parse(piece))
    except Exception:  # a piece of an example always parses; this is for mutated text
        return False


def tree_of(piece: str) -> Any:
    [doc] = parse(piece)
    return to_tree(doc.data)
