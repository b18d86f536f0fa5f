"""The loader's quick yes/no schema check, so jsonschema (for its error detail) runs only where needed.

Every document is checked against its kind's schema before anything else; jsonschema runs only
on a document this says no to.  It implements the JSON-schema subset gitdns's schemas use and may
say no where jsonschema says yes, never the reverse (tests/core/test_quickschema.py holds it to
jsonschema over every example document and mutations of them).  A schema with a keyword outside
the subset gets no quick check (`Unsupported`): jsonschema alone.  It is one closure per schema
node that tests its type directly and loops instead of building generators, which is most of
the cost on a file of thousands of listeners.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gitdns.core.patterns import whole_string_regex

Check = Callable[[Any], bool]
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "examples", "default"})


class Unsupported(Exception):
    """The schema uses a keyword the quick check does not implement: use jsonschema alone."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unique(values: list[Any]) -> bool:
    keys = []
    for value in values:
        if isinstance(value, dict | list):
            return False  # unsure: let jsonschema decide
        keys.append((bool, value) if isinstance(value, bool) else (float, value) if _is_number(value) else value)
    return len(set(keys)) == len(keys)

_TYPES: dict[str, type | tuple[type, ...]] = {"object": dict, "array": list, "string": str, "boolean": bool}


def quick_check(schema: Mapping[str, Any]) -> Check | None:
    """A yes/no validator for the JSON-schema subset gitdns's schemas use, or None (jsonschema alone).

    It may say no where jsonschema says yes (the caller then asks jsonschema), never the reverse.
    """
    try:
        return _compile(schema)
    except Unsupported:
        return None


def _keyword(key: str, rule: Any) -> Check | None:
    """One keyword's test (the ``type`` test is made by `_compile`)."""
    if key in _ANNOTATIONS or key in ("properties", "required", "additionalProperties", "type"):
        return None
    if key in ("enum", "const") and all(isinstance(e, str) for e in (rule if key == "enum" else [rule])):
        allowed = frozenset(rule if key == "enum" else [rule])
        return lambda v: isinstance(v, str) and v in allowed
    numeric: dict[str, Check] = {
        "minimum": lambda v: not _is_number(v) or v >= rule,
        "maximum": lambda v: not _is_number(v) or v <= rule,
        "exclusiveMinimum": lambda v: not _is_number(v) or v > rule,
        "minLength": lambda v: not isinstance(v, str) or len(v) >= rule,
        "maxLength": lambda v: not isinstance(v, str) or len(v) <= rule,
        "minItems": lambda v: not isinstance(v, list) or len(v) >= rule,
        "uniqueItems": lambda v: not rule or not isinstance(v, list) or _unique(v),
    }
    if key in numeric:
        return numeric[key]
    if key == "pattern":
        search = whole_string_regex(rule).search
        return lambda v: not isinstance(v, str) or search(v) is not None
    if key == "items":
        each = _compile(rule)
        return lambda v: not isinstance(v, list) or all(map(each, v))
    if key == "propertyNames":
        name = _compile(rule)
        return lambda v: not isinstance(v, dict) or all(map(name, v))
    raise Unsupported(key)


def _type_test(rule: Any) -> Check | None:
    """The ``type`` keyword's test (None: no type keyword)."""
    if rule is None:
        return None
    if rule in _TYPES:
        kind = _TYPES[rule]
        return lambda v: isinstance(v, kind)
    if rule == "number":
        return _is_number
    if rule == "integer":
        return lambda v: _is_number(v) and float(v).is_integer()
    raise Unsupported("type")


_STRING_KEYS = frozenset({"type", "minLength", "maxLength", "pattern"})


def _string(schema: Mapping[str, Any]) -> Check:
    """A string with bounds and a pattern, in one test (most leaves of the schemas are)."""
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    pattern = schema.get("pattern")
    search = whole_string_regex(pattern).search if pattern is not None else None
    if high is None:
        return lambda v: isinstance(v, str) and len(v) >= low and (search is None or search(v) is not None)
    return lambda v: isinstance(v, str) and low <= len(v) <= high and (search is None or search(v) is not None)


def _compile(schema: Mapping[str, Any]) -> Check:
    if schema.get("type") == "string" and all(k in _STRING_KEYS or k in _ANNOTATIONS for k in schema):
        return _string(schema)
    typed = _type_test(schema.get("type"))
    leaves = tuple(c for key, rule in schema.items() if (c := _keyword(key, rule)) is not None)
    props = {k: _compile(s) for k, s in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    other = _compile(extra) if isinstance(extra, Mapping) else None
    closed = extra is False
    mapping = bool(props or required or extra is not True)

    def check(value: Any) -> bool:
        if typed is not None and not typed(value):
            return False
        for leaf in leaves:
            if not leaf(value):
                return False
        if not mapping or not isinstance(value, dict):
            return True
        for name in required:
            if name not in value:
                return False
        for key, item in value.items():
            sub = props.get(key)
            if sub is not None:
                if not sub(item):
                    return False
            elif closed or (other is not None and not other(item)):
                return False
        return True

    return check
