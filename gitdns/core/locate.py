"""Where a problem is and how it reads: line numbers for YAML paths, schema errors in words.

The loader builds plain dicts, which carry no positions.  For the few documents that have
problems, `gitdns.core.yamlparse.lines` reads the file's parser events again and notes the lines
of the wanted paths only (no second copy of the data, however large the file).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gitdns.core.problems import Path, Problem, shown
from gitdns.core.yamlparse import lines as yamllines


def line_of(text: str, doc_index: int, path: Path) -> int:
    """The 1-based line of ``path`` in document ``doc_index`` of ``text`` (`gitdns.core.yamlparse.lines`).

    When the path goes deeper than the document (a missing field, a wrong type), the line of
    the deepest part that exists.  0 when the document cannot be found.
    """
    return yamllines.line_of(text, doc_index, path)


def refine_lines(problems: Iterable[Problem], files: Mapping[str, str]) -> list[Problem]:
    """Point each problem at the line of its path (`gitdns.core.yamlparse.lines.refine`).

    A problem made from a model object carries its document's first line (``Origin.line``);
    that finds the document again, and its path the line: one pass over each file that has
    such problems, however many.
    """
    return yamllines.refine(problems, files)


# --- schema errors in plain words --------------------------------------------------------------

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "null": "empty",
}


def _what(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "empty"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {shown(value)}"  # untrusted: cut, control characters escaped
    return f"{shown(value)} ({type(value).__name__})"


def _range_hint(schema: Mapping[str, Any]) -> str:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is not None and high is not None:
        return f"use a value from {low} to {high}"
    return f"use a value of at least {low}" if low is not None else f"use a value of at most {high}"


def describe(file: str, error: Any) -> list[Problem]:
    """One jsonschema error as problems in plain words (one per unknown field)."""
    path = tuple(error.absolute_path)
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    value, kind, rule = error.instance, error.validator, error.validator_value
    about = str(schema.get("description", ""))

    def problem(message: str, hint: str = about, where: tuple[str | int, ...] = path) -> Problem:
        return Problem(file, where, message, hint=hint, code="SchemaViolation")

    if kind == "additionalProperties" and isinstance(value, dict):
        known = list(schema.get("properties", {}))
        out = []
        for key in (k for k in value if k not in known):
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(known)}"
            out.append(problem(f"unknown field {shown(str(key))}", hint, (*path, str(key))))
        return out
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else str(rule)
        field_about = schema.get("properties", {}).get(missing, {}).get("description", "")
        return [problem(f"missing required field {missing!r}", f"add {missing}: {field_about}".rstrip(": "))]
    simple: dict[str, Callable[[], tuple[str, str]]] = {
        "type": lambda: (f"expected {_TYPE_WORDS.get(str(rule), str(rule))}, got {_what(value)}", about),
        "enum": lambda: (f"{_what(value)} is not allowed here", "use one of: " + ", ".join(map(str, rule))),
        "const": lambda: (f"{_what(value)} is not allowed here", f"use {rule}"),
        "minimum": lambda: (f"{value} is below the minimum {rule}", _range_hint(schema)),
        "exclusiveMinimum": lambda: (f"{value} must be greater than {rule}", _range_hint(schema)),
        "maximum": lambda: (f"{value} is above the maximum {rule}", _range_hint(schema)),
        "pattern": lambda: (f"{_what(value)} is not in the expected form", about),
        "minLength": lambda: (
            "must not be empty" if rule == 1 else f"is shorter than {rule} characters",
            about,
        ),
        "maxLength": lambda: (f"is longer than {rule} characters", about),
        "minItems": lambda: (f"needs at least {rule} item{'s' if rule != 1 else ''}", about),
        "uniqueItems": lambda: ("lists the same item more than once", "remove the duplicates"),
    }
    if kind in simple:
        message, hint = simple[kind]()
        return [problem(message, hint)]
    return [problem(error.message)]
