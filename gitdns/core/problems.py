"""Validation problems as values: where, what is wrong, what would be right."""

from __future__ import annotations

from dataclasses import dataclass

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation problem.

    ``zones`` names the Zone documents (by metadata.name) this problem blocks; an empty
    tuple with ``blocks_all=True`` blocks every zone (e.g. a file that does not parse and
    whose zones cannot be known).
    """

    file: str
    path: Path
    message: str
    hint: str = ""
    line: int = 0
    zones: tuple[str, ...] = ()
    blocks_all: bool = False
    code: str = "Invalid"

    @property
    def yaml_path(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out or "."

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        text = f"{where}: {self.yaml_path}: {self.message}"
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
