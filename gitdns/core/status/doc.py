"""Status documents and status commits (docs/agent.md), pure.

    dump(doc)            deterministic YAML: sorted keys, block style, no anchors, a trailing newline
    load(text)           the mapping back (YAML 1.2 safe loader); ``load(dump(x)) == x``
    commit_message(...)  ``status(<cluster>): <Ready|NotReady> <sha7> <summary>`` + trailers
    parse_trailers(msg)  the trailers of a commit message as a dict
    StatusTree           one status branch tip as read back: sha, files, message, commit time

``dump`` emits the YAML by hand rather than through ruamel's emitter so that the output
depends on nothing but the value: strings are plain when every YAML 1.1 and 1.2 reader
takes them as the same string, otherwise double-quoted with JSON-compatible escapes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from gitdns import __version__
from gitdns.core.text import inline

AGENT = f"gitdns/{__version__}"
TRAILER_ORDER = ("Desired-Revision", "Agent", "Serial")
_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))
_IMPLICIT = (True, False)
# Characters a plain scalar may start with (YAML indicators and blanks excluded).
_PLAIN_FIRST = re.compile(r"[A-Za-z0-9/_.(]")
_KEYWORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "none", "nan", "inf",
                       ".nan", ".inf", "-.inf", "+.inf", "~"})
_TRAILER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
_TRAILER_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]*):[ \t]*(.*)")


@dataclass(frozen=True, slots=True)
class StatusTree:
    """The tip of one status branch: commit sha, its files (path -> text), message, commit time."""

    sha: str
    files: dict[str, str] = field(default_factory=dict)
    message: str = ""
    time: int = 0  # committer time, seconds since the epoch


class StatusDocError(ValueError):
    """A status file that is not a YAML mapping."""


# -- dump ----------------------------------------------------------------------------------


def dump(doc: Mapping[str, Any]) -> str:
    """Deterministic YAML for a mapping of str/int/float/bool/None, lists and mappings."""
    if not isinstance(doc, Mapping):
        raise TypeError(f"dump: expected a mapping, got {type(doc).__name__}")
    if not doc:
        return "{}\n"
    return "\n".join(_block(doc, 0)) + "\n"


def _block(value: Mapping[str, Any] | Sequence[Any], depth: int) -> list[str]:
    """The lines of a non-empty mapping or sequence, unindented; ``depth`` guards recursion."""
    if depth > 100:
        raise ValueError("dump: nesting deeper than 100 levels (a cycle?)")
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key in sorted(value, key=_key_text):
            lines.extend(_entry(_string(_key_text(key)) + ":", value[key], depth))
    else:
        for item in value:
            lines.extend(_entry("-", item, depth))
    return lines


def _entry(head: str, value: Any, depth: int) -> list[str]:
    if _is_collection(value) and value:
        inner = _block(value, depth + 1)
        if head == "-":  # compact: "- a: 1" / "- - x", continuation lines indented by two
            return ["- " + inner[0], *("  " + line for line in inner[1:])]
        return [head, *("  " + line for line in inner)]
    return [f"{head} {_scalar(value)}"]


def _is_collection(value: Any) -> bool:
    return isinstance(value, Mapping) or (isinstance(value, Sequence) and not isinstance(value, str | bytes))


def _key_text(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"dump: mapping keys must be strings, got {key!r}")
    return key


def _scalar(value: Any) -> str:
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
        text = repr(value)
        return text if ("." in text or "e" in text) else text + ".0"
    if isinstance(value, str):
        return _string(value)
    if _is_collection(value):  # empty
        return "{}" if isinstance(value, Mapping) else "[]"
    raise TypeError(f"dump: cannot write a {type(value).__name__}")


def _string(text: str) -> str:
    return text if _plain_ok(text) else quoted_scalar(text)


def _plain_ok(text: str) -> bool:
    """True when ``text`` written plain reads back as the same string in YAML 1.1 and 1.2
    (ruamel, PyYAML, go-yaml): conservative, quoting is always allowed."""
    if not _PLAIN_FIRST.match(text) or text.startswith("...") or text != text.strip():
        return False
    if ": " in text or " #" in text or text.endswith(":") or not all(_printable(c) and c != "\t" for c in text):
        return False
    if text.lower() in _KEYWORDS:
        return False
    return all(r.resolve(ScalarNode, text, _IMPLICIT) == _STR_TAG for r in _RESOLVERS)


def quoted_scalar(text: str) -> str:
    """A double-quoted scalar with JSON-compatible escapes (valid YAML)."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif not _printable(char):
            code = ord(char)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _printable(char: str) -> bool:
    """YAML's printable set, less NEL, LS, PS (line breaks to YAML 1.1) and the byte-order mark."""
    code = ord(char)
    return (
        0x20 <= code <= 0x7E
        or (0xA0 <= code <= 0xD7FF and code not in (0x2028, 0x2029))
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or code >= 0x10000
    )


# -- load ----------------------------------------------------------------------------------


def load(text: str) -> dict[str, Any]:
    """Read a status file back; raises `StatusDocError` when it is not a YAML mapping."""
    from gitdns.core.yamlparse import parse  # bounded: anyone who can push a status branch writes it

    try:
        docs = parse(text)
    except YAMLError as exc:
        raise StatusDocError(f"not valid YAML: {exc}") from None
    if not docs:
        return {}
    if docs[0].refused is not None:
        raise StatusDocError("aliases and merge keys are not allowed in a status file")
    value = docs[0].data
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StatusDocError(f"expected a mapping at the top, got {type(value).__name__}")
    return value


# -- commit messages -----------------------------------------------------------------------


def commit_message(cluster: str, ready: bool, sha7: str, summary: str, trailers: Mapping[str, str]) -> str:
    """``status(<cluster>): <Ready|NotReady> <sha7> <summary>``, a blank line, then trailers:
    Desired-Revision, Agent (``gitdns/<version>`` unless given), Serial, then the rest sorted."""
    subject = " ".join(f"status({_one_line(cluster)}): {'Ready' if ready else 'NotReady'} "
                       f"{_one_line(sha7)} {_one_line(summary)}".split())
    values = {str(k): _one_line(str(v)) for k, v in trailers.items()}
    values.setdefault("Agent", AGENT)
    for key in values:
        if not _TRAILER_KEY.fullmatch(key):
            raise ValueError(f"commit_message: trailer key {key!r} is not a token (letters, digits, '-')")
    order = [k for k in TRAILER_ORDER if k in values] + sorted(k for k in values if k not in TRAILER_ORDER)
    return subject + "\n\n" + "\n".join(f"{k}: {values[k]}" for k in order) + "\n"


def _one_line(text: str) -> str:
    """One line through the text gate: runs of white space one space, other unsafe characters
    escaped (`git log` shows the subject on an operator's terminal)."""
    return inline(" ".join(text.split()))


def parse_trailers(message: str) -> dict[str, str]:
    """The trailers of the message's last paragraph (every line ``Key: value``, continuation
    lines indented); {} when that paragraph is not a trailer block or is the subject."""
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", message.strip("\n")) if p.strip()]
    if len(paragraphs) < 2:
        return {}
    out: dict[str, str] = {}
    last: str | None = None
    for line in paragraphs[-1].splitlines():
        if line[:1] in (" ", "\t") and last is not None:
            out[last] = f"{out[last]} {line.strip()}".strip()
            continue
        match = _TRAILER_LINE.fullmatch(line.rstrip())
        if match is None:
            return {}
        last = match.group(1)
        out[last] = match.group(2).strip()
    return out
