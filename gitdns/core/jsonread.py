"""JSON that gitdns did not write, read strictly: the one reader for such JSON.

A webhook body (after its signature verified: the forge wrote it, a pull request's content is
in it), an annotation on a Kubernetes object anyone with edit rights wrote: `strict_loads`
reads them UTF-8 only, at most ``max_bytes``, arrays and objects nested at most ``max_depth``
deep — checked by a linear scan before ``json`` parses, so a 200,000-deep body is refused and
never reaches the parser's recursion —, no ``NaN``/``Infinity`` constants and no object naming a
key twice (which value would count?).  It raises `JsonRefused` (a ``ValueError``) with a short
reason, never ``RecursionError``.
"""

from __future__ import annotations

import json
import re

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "JsonRefused", "strict_loads"]


class JsonRefused(ValueError):
    """The text is not JSON this reader takes; the message says why in a few words."""


MAX_JSON_BYTES = 1024 * 1024  # the HTTP endpoint's body cap too
MAX_JSON_DEPTH = 32  # arrays and objects inside one another; a push payload nests 3 or 4 deep

# in JSON text: a whole string, a run of opening or of closing brackets, a run of anything
# else, or a quote that opens a string never closed (the last alternative)
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]+|[\]}]+|[^"\[\]{}]+|"', re.DOTALL)


def _nesting_over(text: str, limit: int) -> bool:
    """Whether arrays and objects in JSON ``text`` nest deeper than ``limit``, brackets in
    strings aside; linear in ``text``, with no recursion.  Exact for JSON; on text that is not
    JSON it counts at least as deep as a parser gets before it fails (it stops at a string that
    is never closed: a parser reads the rest as that string)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token[0] in "[{":
            depth += len(token)
            if depth > limit:
                return True
        elif token[0] in "]}":
            depth -= len(token)
        elif token == '"':
            return False
    return False


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ValueError("an object names a key twice")
    return data


def strict_loads(data: bytes | str, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> object:
    """``data``'s JSON value, read strictly (see the module docstring); `JsonRefused` says why not."""
    if len(data) > max_bytes:
        raise JsonRefused(f"over {max_bytes} bytes")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonRefused("is not UTF-8") from exc
    else:
        text = data
    if _nesting_over(text, max_depth):
        raise JsonRefused(f"nests deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicate_keys)
    except RecursionError as exc:  # not reached past the depth check; never a crash if it were
        raise JsonRefused(f"nests deeper than {max_depth} levels") from exc
    except ValueError as exc:
        raise JsonRefused(f"is not JSON: {exc}") from exc


