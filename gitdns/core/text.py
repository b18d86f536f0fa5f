"""The text gate: how text that came from outside the program may be printed.

Outside text is anything gitdns did not write itself: file names and YAML of the desired
repository, status-branch documents, commit authors and messages, webhook headers and paths,
values read back from a DNS provider or from Kubernetes, an SDK's error message.  Any of it may
carry a terminal escape (``ESC ] 52`` sets the clipboard, ``ESC [ 2J`` clears the screen), a
line break that forges a line of a CI log or a pull-request comment, or a bidi override that
shows text in another order than it is read.

Every text exit goes through this module:

``inline(text)``   one value inside a line: every unsafe character escaped, the line breaks
                   ``\\n`` and ``\\r`` included (``'a\\nb'`` prints as ``a\\nb``).
``lines(items)``   lines a formatter built, one per item: each through `inline`, joined.
``block(text)``    text that is already lines (a command's output, a traceback): ``\\n`` kept,
                   every other unsafe character escaped.  The CLI prints every result through
                   it, and the log formatters format every record through `inline` / `block`, so
                   an escape that a formatter let through still never reaches a terminal.
``md_code(text)``  an outside value in markdown: a code span (mentions, links, emphasis and HTML
                   are not markdown inside one), ``|`` escaped so it cannot end a table cell.
``md_block(text)`` lines in a fenced code block no line of them can close.
``md_text(text)``  an outside value in markdown prose: `inline`, then the ASCII punctuation
                   markdown reads as syntax inside a line backslash-escaped.

Unsafe characters: every character `str.isprintable` refuses — C0 controls (TAB, LF, CR and ESC
among them), DEL, the C1 controls, the format characters (the bidi embeddings and overrides
U+202A-U+202E, the isolates U+2066-U+2069, the marks U+200E/U+200F/U+061C, zero-width
characters, the byte-order mark), the line and paragraph separators U+2028/U+2029, other
separators than the ASCII space, surrogates, private-use and unassigned code points.  They are
written as Python writes them in a string literal (``\\x1b``, ``\\u202e``, ``\\U000e0001``), so
what is printed is printable ASCII plus the printable characters of the text.  The check is a
C-level ``str.isprintable()`` on the whole text first, so clean text costs one scan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["block", "inline", "is_clean", "lines", "md_block", "md_code", "md_text", "unsafe_chars"]

# What markdown reads as syntax inside a line: escapes, code, emphasis, links and images, HTML,
# table cells, strikethrough, mentions, entities, issue references, math.  (What it reads only
# at the start of a line — '-', '+', '#', '>', '1.' — cannot start one: a value is never first.)
_MD_PUNCT = re.compile(r"([\\`*_\[\]<>|~@&#$])")
_BACKTICKS = re.compile(r"`+")


def _escape(char: str) -> str:
    if char == "\n":
        return "\\n"
    if char == "\r":
        return "\\r"
    if char == "\t":
        return "\\t"
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def is_clean(text: str) -> bool:
    """``text`` holds no unsafe character (a line break is unsafe here)."""
    return text.isprintable()


def unsafe_chars(text: str) -> list[str]:
    """The unsafe characters of ``text``, in order (for messages and tests)."""
    return [c for c in text if not c.isprintable()]


def inline(text: str) -> str:
    """``text`` as one piece of a line: every unsafe character escaped, line breaks too."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def block(text: str) -> str:
    """``text`` as lines: ``\\n`` kept, every other unsafe character escaped (``\\r`` and
    ``\\t`` included: a carriage return overwrites the line a terminal shows)."""
    if text.isprintable():
        return text
    return "\n".join(inline(line) for line in text.split("\n"))


def lines(items: Iterable[str]) -> str:
    """Lines a formatter built, each one line (none holds a line break of its own), joined with
    a line break after each: every item through `inline`, so a value with a line break inside a
    line cannot add one."""
    return "".join(inline(item) + "\n" for item in items)


def md_text(text: str) -> str:
    """An outside value in markdown prose or a table cell, never first on its line: `inline`,
    then the characters markdown reads as syntax inside a line backslash-escaped (CommonMark
    lets any ASCII punctuation be escaped)."""
    return _MD_PUNCT.sub(r"\\\1", inline(text))


def md_block(text: str, info: str = "") -> str:
    """``text`` (lines, each already through the gate) as a fenced code block whose fence is
    longer than any run of backticks inside, so no line of it can close the block."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{block(text).rstrip(chr(10))}\n{fence}\n"


def md_code(text: str) -> str:
    """An outside value in markdown as a code span: fenced by one backtick more than the
    longest run inside it, padded when it starts or ends with a backtick, ``|`` escaped (GFM
    ends a table cell at an unescaped ``|`` even inside a code span).  Empty text is ``` `` ```
    with a space, which renders as an empty span."""
    body = inline(text).replace("|", "\\|")
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    if not body or body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ")):
        body = f" {body} "
    return f"{fence}{body}{fence}"
