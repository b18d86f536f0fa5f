"""Validation problems as values: where, what is wrong, what would be right."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass

from gitdns.core.text import inline

Path = tuple[str | int, ...]

SHOWN = 80  # characters of an untrusted value a message quotes
MAX_MESSAGE = 1000  # characters of a problem's message or hint, whatever a check put in it


def shown(value: object, limit: int = SHOWN) -> str:
    """An untrusted value (from a file, a server, a name) for a message: quoted, control and
    format characters escaped, at most ``limit`` characters of it, then an ellipsis and the
    length.  Containers are summarised (a few items, a few levels), never printed whole."""
    if not isinstance(value, str):
        return clipped(_SUMMARY.repr(value), limit)
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def clipped(text: str, limit: int = 2 * SHOWN) -> str:
    """A message that may carry untrusted text, cut to ``limit`` characters (then an ellipsis),
    with control and format characters made visible (a newline cannot start a line of its own
    in a log).  Clipping twice changes nothing."""
    head = text[: limit + 1]
    if not head.isprintable():
        head = "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)
    return head if len(head) <= limit else head[:limit] + "…"


_SUMMARY = reprlib.Repr()
_SUMMARY.maxstring = _SUMMARY.maxother = SHOWN
_SUMMARY.maxlevel, _SUMMARY.maxdict, _SUMMARY.maxlist = 3, 4, 4


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation problem.

    ``zones`` names the Zone documents (by metadata.name) this problem blocks; an empty
    tuple with ``blocks_all=True`` blocks every zone (e.g. a file that does not parse and
    whose zones cannot be known).

    Messages quote values from the repository, which anyone with a pull request writes: each
    quoted value goes through `shown`, and the message and hint as a whole are cut to
    `MAX_MESSAGE` characters with control characters made visible, so no problem carries a
    file's content or breaks a line of a log or a pull-request comment.
    """

    file: str
    path: Path
    message: str
    hint: str = ""
    line: int = 0
    zones: tuple[str, ...] = ()
    blocks_all: bool = False
    code: str = "Invalid"

    def __post_init__(self) -> None:
        for name in ("message", "hint"):
            text = getattr(self, name)
            if len(text) > MAX_MESSAGE or not text.isprintable():
                object.__setattr__(self, name, clipped(text, MAX_MESSAGE))

    @property
    def yaml_path(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out or "."

    def format(self) -> str:
        """One line: the file name and YAML path (a file's name and keys are the author's) through
        the text gate, the message and hint already made safe at construction."""
        where = f"{inline(self.file)}:{self.line}" if self.line else inline(self.file)
        text = f"{where}: {inline(self.yaml_path)}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "path": self.yaml_path,
            "message": self.message,
            "hint": self.hint,
            "zones": list(self.zones),
            "blocksAll": self.blocks_all,
            "code": self.code,
        }


def blocked_zones(problems: list[Problem] | tuple[Problem, ...], all_zones: list[str]) -> set[str]:
    """The zones held back by these problems (validation holds each zone on its own,
    unless a problem blocks all)."""
    blocked: set[str] = set()
    for problem in problems:
        if problem.blocks_all:
            return set(all_zones)
        blocked.update(problem.zones)
    return blocked
