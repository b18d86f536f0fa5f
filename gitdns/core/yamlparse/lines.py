"""The lines of YAML paths, found in one pass over the parser's events.

    lines(text, wanted) -> {(doc index, path): line}
    refine(problems, files) -> problems        each pointed at the line of its path

Only documents with problems are looked at, and only the mappings and lists on a wanted path
are entered; everything else is skipped as events go by, so finding lines costs one parse of
the file and no more memory than its nesting depth, however large the file.  A path that goes
deeper than the document (a missing field, a wrong type) gets the line of its deepest part
that exists: the line of the key in a mapping, of the item in a list, of the document's
content for the empty path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from gitdns.core.problems import Path, Problem
from gitdns.core.yamlparse import Loader, scalar

Want = Callable[[int, int], Iterable[Path]]  # (doc index, first line) -> the paths wanted there


class _Frame:
    __slots__ = ("index", "is_map", "key_next", "path", "value_path")

    def __init__(self, path: Path | None, is_map: bool) -> None:
        self.path = path  # None: not on a wanted path, only skipped
        self.is_map = is_map
        self.key_next = True
        self.value_path: Path | None = None
        self.index = 0


def scan(text: str, want: Want, last: int | None = None) -> tuple[dict[tuple[int, Path], int], dict[int, int]]:
    """The line of every wanted path (keyed by document index) and the first line of every
    document (index -> line) up to document ``last`` (default: all)."""
    found: dict[tuple[int, Path], int] = {}
    starts: dict[int, int] = {}
    loader = Loader(text)
    index = -1
    try:
        while loader.check_event():
            event = loader.get_event()
            if type(event) is not DocumentStartEvent:
                continue
            index += 1
            if last is not None and index > last:
                break
            _document(loader, index, want, found, starts)
    except YAMLError:
        pass  # a file that does not parse keeps the lines found before the error
    finally:
        loader.dispose()
    return found, starts


def _document(loader: Loader, index: int, want: Want, found: dict[tuple[int, Path], int],
              starts: dict[int, int]) -> None:
    stack: list[_Frame] = []
    prefixes: set[Path] = set()
    lines: dict[Path, int] = {}
    wanted: list[Path] = []
    while True:
        event = loader.get_event()
        kind = type(event)
        if kind is DocumentEndEvent:
            break
        if kind is MappingEndEvent or kind is SequenceEndEvent:
            stack.pop()
            continue
        line = event.start_mark.line + 1
        if not stack:  # the document's content
            starts[index] = line
            wanted = list(want(index, line))
            prefixes = {path[:n] for path in wanted for n in range(len(path) + 1)}
            path: Path | None = () if wanted else None
            lines[()] = line
        else:
            path = _child(loader, stack[-1], event, line, prefixes, lines)
        if kind is MappingStartEvent or kind is SequenceStartEvent:
            stack.append(_Frame(path, kind is MappingStartEvent))
    for path in wanted:
        depth = max(n for n in range(len(path) + 1) if path[:n] in lines)
        found[(index, path)] = lines[path[:depth]]


def _child(loader: Loader, frame: _Frame, event: Any, line: int, prefixes: set[Path],
           lines: dict[Path, int]) -> Path | None:
    """The path of the node ``event`` starts inside ``frame`` (None when not wanted)."""
    if frame.path is None:
        return None
    if not frame.is_map:
        item = (*frame.path, frame.index)
        frame.index += 1
        if item not in prefixes:
            return None
        lines[item] = line
        return item
    if frame.key_next:
        frame.key_next = False
        frame.value_path = None
        if type(event) is ScalarEvent:
            try:
                key = scalar(loader, event)
            except YAMLError:
                return None
            value_path = (*frame.path, key)
            if value_path in prefixes:
                lines[value_path] = line
                frame.value_path = value_path
        return None  # the key itself is never on a path
    frame.key_next = True
    return frame.value_path


def lines(text: str, wanted: Iterable[tuple[int, Path]]) -> dict[tuple[int, Path], int]:
    """The line of each (document index, path) of ``wanted``; absent when the document is not
    in ``text`` (or the text does not parse up to it)."""
    by_index: dict[int, list[Path]] = {}
    for index, path in wanted:
        by_index.setdefault(index, []).append(path)
    if not by_index:
        return {}
    found, _ = scan(text, lambda index, _line: by_index.get(index, ()), last=max(by_index))
    return found


def line_of(text: str, doc_index: int, path: Path) -> int:
    """The line of one path (0 when the document cannot be found); `lines` for many."""
    return lines(text, [(doc_index, path)]).get((doc_index, path), 0)


def refine(problems: Iterable[Problem], files: Mapping[str, str]) -> list[Problem]:
    """Point each problem at the line of its path.  A problem made from a model object carries
    its document's first line (``Origin.line``); that finds the document (its first document
    when the line is 0), and its path the line.  One pass per file with problems to point."""
    problems = list(problems)
    by_file: dict[str, dict[int, list[Path]]] = {}
    for problem in problems:
        if problem.path and problem.file in files:
            by_file.setdefault(problem.file, {}).setdefault(problem.line, []).append(problem.path)
    located: dict[str, tuple[dict[tuple[int, Path], int], dict[int, int]]] = {}  # found, line -> index
    for file, by_start in by_file.items():

        def want(index: int, line: int, by_start: dict[int, list[Path]] = by_start) -> list[Path]:
            return by_start.get(line, []) + (by_start.get(0, []) if index == 0 else [])

        found, starts = scan(files[file], want)
        located[file] = found, {line: index for index, line in sorted(starts.items(), reverse=True)}
    out: list[Problem] = []
    for problem in problems:
        if problem.file not in located or not problem.path:
            out.append(problem)
            continue
        found, at_line = located[problem.file]
        index = at_line.get(problem.line) if problem.line else 0
        line = found.get((index, problem.path), 0) if index is not None else 0
        out.append(replace(problem, line=line or problem.line))
    return out
