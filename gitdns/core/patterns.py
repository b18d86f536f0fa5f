"""JSON-schema ``pattern`` as JSON Schema means it: matched against the whole string.

JSON Schema patterns are ECMA-262 regular expressions, where ``$`` (without the multiline flag)
is the end of the input.  jsonschema runs them with Python's ``re.search``, where ``$`` also
matches before a final newline: ``^[a-z0-9-]+$`` accepts ``"evil\\n"``.  gitdns's schemas
write every pattern ``^...$(?!\\n)``, which means the same under either engine (a test checks
each one); `schema_validator` and the loader's quick check (`gitdns.core.quickschema.quick_check`)
also read every ``$`` as the end of the string, so a pattern written without the guard is still
matched whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=256)
def whole_string_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with ECMA-262's meaning of ``$``: each ``$`` outside a character
    class and not escaped becomes ``\\Z`` (the end of the string, never before a final newline)."""
    out: list[str] = []
    class_start = -1  # index of the first character inside the open character class, or -1
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if class_start >= 0:
            if char == "^" and i == class_start:
                class_start += 1  # a negated class: ']' right after '[^' is a literal too
            elif char == "]" and i > class_start:
                class_start = -1
        elif char == "[":
            class_start = i + 1
        elif char == "$":
            char = r"\Z"
        out.append(char)
        i += 1
    return re.compile("".join(out))


def _pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and whole_string_regex(pattern).search(instance) is None:
        yield ValidationError(f"{instance[:64]!r} does not match {pattern!r}")


@lru_cache(maxsize=1)
def _whole_string_validator() -> Any:
    """Draft 2020-12 with ``pattern`` as JSON Schema means it (`whole_string_regex`)."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(Draft202012Validator, {"pattern": _pattern_keyword})  # type: ignore[no-untyped-call]


class _OnFirstUse:
    """A validator made when first asked for anything: jsonschema (~0.15 s and several MiB to
    import) is needed only for a document the quick check does not pass
    (`gitdns.core.quickschema.quick_check`), which a valid repository never has."""

    __slots__ = ("_made", "_schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema, self._made = schema, None

    def __getattr__(self, name: str) -> Any:
        if self._made is None:
            self._made = _whole_string_validator()(self._schema)
        return getattr(self._made, name)


def schema_validator(schema: Mapping[str, Any]) -> Any:
    """The validator of one kind's schema: draft 2020-12, patterns matched whole (made on first use)."""
    return _OnFirstUse(schema)
