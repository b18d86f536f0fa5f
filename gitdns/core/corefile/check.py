"""Rendered CoreDNS files checked with the parse rules CoreDNS applies, before they are delivered
(pure).

A Corefile snippet is read the way CoreDNS's Caddyfile lexer reads it: tokens separated by
white space, ``"…"`` quoted (at the start of a token), ``#`` a comment to the end of the line
(even inside a word);
``{`` and ``}`` open and close blocks.  `snippet_problems` checks

* every character is printable ASCII, a tab or a line break (no carriage return, NUL, escape);
* braces balance, and every statement at the top level is a server block (no ``import``, no
  snippet definition ``(name) { … }``);
* each server block key is ``<zone>:<port>`` with a DNS name as the zone and the port wanted;
* each block is token for token the block that was meant (``expected``): a name carrying a
  line break, a ``#``, a brace or a directive changes the tokens and is caught here.

A hosts file is read the way CoreDNS's ``hosts`` plugin (and dnsmasq) read it: ``#`` starts a
comment anywhere on a line, the rest is ``<ip> <name>…``.  `hosts_problems` checks the
characters and that the lines are exactly the ones meant.

Values in, problems (strings naming the line) out; the callers decide what to refuse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MAX_NAME = 253
_LABEL = re.compile(r"[a-z0-9_]([-a-z0-9_]{0,61}[a-z0-9_])?")
_FILE = re.compile(r"[a-z0-9]([-a-z0-9._]{0,240}[a-z0-9])?")
_SPACE = " \t\r\n"


def shown(text: str, limit: int = 80) -> str:
    """An untrusted value for a message: quoted (control characters escaped), at most ``limit``."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def dns_name_error(name: str, *, wildcard: bool = False) -> str | None:
    """What keeps ``name`` (lower case, no trailing dot) from being a DNS name fit for a server
    block key or a hosts line: whole-string labels of letters, digits, '-' and '_'."""
    bare = name.removeprefix("*.") if wildcard else name
    if not bare:
        return f"{shown(name)} is not a DNS name (it is empty)"
    if len(bare) > MAX_NAME:
        return f"{shown(name)} is not a DNS name ({len(bare)} characters; at most {MAX_NAME})"
    for label in bare.split("."):
        if not _LABEL.fullmatch(label):
            why = "an empty label" if not label else f"the label {shown(label, 70)}"
            return f"{shown(name)} is not a DNS name ({why}: labels are 1 to 63 letters, digits, '-' or '_')"
    return None


def file_name_error(name: str, suffix: str) -> str | None:
    """What keeps ``name`` from being a plain file name ending in ``suffix`` (no directory,
    no hidden file, nothing a shell or CoreDNS would split)."""
    if name.endswith(suffix) and _FILE.fullmatch(name):
        return None
    return f"{shown(name)} is not a plain file name ending in {suffix} (lower-case letters, digits, '-', '.', '_')"


_NOT_PRINTABLE = re.compile(r"[^\t\n -~]")  # anything but printable ASCII, tabs and line breaks


def character_problems(text: str) -> list[str]:
    """The first character that is not printable ASCII, a tab or a line break, with its line
    (one regular-expression scan: a 10,000-line hosts file in well under a millisecond)."""
    found = _NOT_PRINTABLE.search(text)
    if found is None:
        return []
    number = text.count("\n", 0, found.start()) + 1
    return [f"line {number}: character {found.group()!r} (only printable ASCII, tabs and line breaks)"]


def lex(text: str) -> list[tuple[str, int]]:
    """The tokens of a Corefile with their line numbers, as CoreDNS's lexer splits them."""
    out: list[tuple[str, int]] = []
    i, line, size = 0, 1, len(text)
    while i < size:
        char = text[i]
        if char in _SPACE:
            line += char == "\n"
            i += 1
        elif char == "#":
            while i < size and text[i] != "\n":
                i += 1
        elif char == '"':
            start, i = i, i + 1
            first = line
            while i < size and text[i] != '"':
                line += text[i] == "\n"
                i += 2 if text[i] == "\\" else 1
            out.append((text[start:i + 1], first))
            i += 1
        else:  # a '#' ends the token and starts a comment, even inside a word
            start = i
            while i < size and text[i] not in _SPACE and text[i] != "#":
                i += 1
            out.append((text[start:i], line))
    return out


def _server_blocks(tokens: list[tuple[str, int]]) -> tuple[list[list[tuple[str, int]]], list[str]]:
    """Top-level statements split at their closing brace, and brace problems."""
    blocks: list[list[tuple[str, int]]] = []
    problems: list[str] = []
    current: list[tuple[str, int]] = []
    depth = 0
    for token, line in tokens:
        current.append((token, line))
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth < 0:
                problems.append(f"line {line}: '}}' closes no block")
                depth, current = 0, []
            elif depth == 0:
                blocks.append(current)
                current = []
    if depth > 0:
        problems.append(f"line {current[0][1]}: a block opened here is never closed")
    elif current:
        words = " ".join(t for t, _ in current[:4])
        problems.append(f"line {current[0][1]}: {shown(words)} is not followed by a block")
    return blocks, problems


def _key_problems(keys: list[tuple[str, int]], port: int) -> list[str]:
    out: list[str] = []
    for key, line in keys:
        if key == "import" or key.startswith("("):
            out.append(f"line {line}: {shown(key)} at the top level: a generated snippet holds server blocks only")
            break
        zone, colon, number = key.rpartition(":")
        if not colon or number != str(port):
            out.append(f"line {line}: server block key {shown(key)} is not <zone>:{port}")
            continue
        wrong = dns_name_error(zone)
        if wrong is not None:
            out.append(f"line {line}: server block key {shown(key)}: {wrong}")
    return out


def snippet_problems(text: str, expected: Sequence[Sequence[str]], port: int) -> list[str]:
    """Problems of a Corefile snippet that should hold exactly the server blocks ``expected``
    (each one's tokens: keys, ``{``, …, ``}``); empty when it does."""
    problems = character_problems(text)
    blocks, structure = _server_blocks(lex(text))
    problems += structure
    for block in blocks:
        opening = next(i for i, (token, _) in enumerate(block) if token == "{")
        problems += _key_problems(block[:opening] or [("", block[0][1])], port)
    if len(blocks) != len(expected):
        problems.append(f"{len(blocks)} server block(s) where {len(expected)} were rendered")
    for block, wanted in zip(blocks, expected, strict=False):
        got = [token for token, _ in block]
        if got == list(wanted):
            continue
        at = next((i for i, (g, w) in enumerate(zip(got, wanted, strict=False)) if g != w), min(len(got), len(wanted)))
        line = block[min(at, len(block) - 1)][1]
        found = shown(got[at]) if at < len(got) else "the end of the block"
        meant = shown(wanted[at]) if at < len(wanted) else "the end of the block"
        problems.append(f"line {line}: block {shown(got[0])}: {found} where {meant} was rendered")
    return problems


def hosts_rows_match(text: str, ips: Sequence[str], names: str) -> bool:
    """True when the lines of ``text`` that are neither blank nor comments are exactly ``ip
    names`` for each of ``ips`` in turn, the way the hosts template writes them: what
    `hosts_problems` then finds no row problem in, told in one comparison of strings instead of
    a split of every line.  ``ips`` and ``names`` (the domains joined by single spaces) must hold
    no whitespace but those spaces and no ``#``.  False when it cannot tell (the rows written
    otherwise, or wrong): `hosts_problems` says what differs."""
    if not ips:
        return False
    body = f" {names}\n".join(ips) + f" {names}"
    end = len(text.rstrip("\n"))  # the body's last line ends there
    start = end - len(body)
    if start < 0 or text[start:end] != body or (start and text[start - 1] != "\n"):
        return False
    rest = text[:start] + text[end:]
    return all(not line.split("#", 1)[0].split() for line in rest.split("\n"))


def hosts_problems(text: str, expected: Iterable[Sequence[str]]) -> list[str]:
    """Problems of a hosts file that should hold exactly the lines ``expected`` (each one's
    fields: the address, then the names), comments aside; empty when it does."""
    problems = character_problems(text)
    wanted_rows = iter(expected)
    count = seen = 0
    first: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        seen += 1
        wanted = next(wanted_rows, None)
        if wanted is None:
            continue
        count += 1
        if first is None and fields != list(wanted):
            first = f"line {number}: {shown(' '.join(fields))} where {shown(' '.join(wanted))} was rendered"
    count += sum(1 for _ in wanted_rows)
    if seen != count:
        problems.append(f"{seen} address line(s) where {count} were rendered")
    if first is not None:
        problems.append(first)
    return problems
