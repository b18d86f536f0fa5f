"""Status documents: deterministic YAML, commit messages and trailers (docs/agent.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitdns import __version__
from gitdns.core.status.doc import StatusDocError, commit_message, dump, load, parse_trailers

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), _TEXT,
                     st.sampled_from(["yes", "no", "on", "off", "null", "~", "1:20", "2001-12-14", "0o17", "1_000",
                                      ".5", "<<", "=", "- x", "a: b", "a #b", "#c", " lead", "trail ", "", "...",
                                      "---", "x\ny", "tab\t", "\u0085", "\ufeff", "é", "😀", "'q'", '"q"', "@x"]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=20,
)
_DOCS = st.dictionaries(_TEXT, _VALUES, max_size=6)


@settings(max_examples=400, deadline=None)
@given(_DOCS)
def test_dump_load_round_trip(doc: dict[str, Any]) -> None:
    text = dump(doc)
    assert text.endswith("\n")
    assert load(text) == doc
    assert dump(load(text)) == text


@pytest.mark.parametrize(
    ("doc", "text"),
    [
        ({}, "{}\n"),
        ({"b": 1, "a": "x"}, "a: x\nb: 1\n"),
        ({"z": {"w": [1, {"b": True, "a": None}], "x": []}, "e": {}},
         "e: {}\nz:\n  w:\n    - 1\n    - a: null\n      b: true\n  x: []\n"),
        ({"l": [[1, 2], "s"]}, "l:\n  - - 1\n    - 2\n  - s\n"),
        ({"s": "yes", "t": "api.example.com", "u": "a: b", "v": "zone held by policy", "w": ""},
         's: "yes"\nt: api.example.com\nu: "a: b"\nv: zone held by policy\nw: ""\n'),
        ({"k": "1.5", "m": "line\nbreak"}, 'k: "1.5"\nm: "line\\nbreak"\n'),
    ],
)
def test_dump_shapes(doc: dict[str, Any], text: str) -> None:
    assert dump(doc) == text
    assert load(text) == doc


def test_dump_has_no_anchors_for_shared_values() -> None:
    shared = {"a": [1, 2]}
    text = dump({"x": shared, "y": shared})
    assert "&" not in text and "*" not in text
    assert load(text) == {"x": shared, "y": shared}


def test_dump_refuses_non_string_keys_and_odd_values() -> None:
    with pytest.raises(TypeError):
        dump({1: "x"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        dump({"x": object()})


def test_load_refuses_non_mappings() -> None:
    assert load("") == {}
    with pytest.raises(StatusDocError):
        load("- a\n")
    with pytest.raises(StatusDocError):
        load("a: [\n")


def test_commit_message_shape_and_trailer_order() -> None:
    msg = commit_message("eu-1", False, "abc1234", "2 zones, 1 held\n(provider down)",
                         {"Serial": "7", "Zeta": "z", "Desired-Revision": "abc1234" * 5, "Alpha": "a"})
    assert msg == (
        "status(eu-1): NotReady abc1234 2 zones, 1 held (provider down)\n\n"
        f"Desired-Revision: {'abc1234' * 5}\nAgent: gitdns/{__version__}\nSerial: 7\nAlpha: a\nZeta: z\n"
    )
    assert parse_trailers(msg) == {"Desired-Revision": "abc1234" * 5, "Agent": f"gitdns/{__version__}",
                                   "Serial": "7", "Alpha": "a", "Zeta": "z"}
    ready = commit_message("eu-1", True, "abc1234", "ok", {"Agent": "gitdns/9", "Serial": "1"})
    assert ready.splitlines()[0] == "status(eu-1): Ready abc1234 ok"
    assert parse_trailers(ready)["Agent"] == "gitdns/9"


def test_commit_message_refuses_bad_trailer_keys() -> None:
    with pytest.raises(ValueError):
        commit_message("c", True, "abc1234", "s", {"Bad Key": "x"})


@pytest.mark.parametrize(
    ("message", "trailers"),
    [
        ("subject only\n", {}),
        ("subject: looks like a trailer\n", {}),
        ("s\n\nbody text\n\nA: 1\nB-C: two words\n", {"A": "1", "B-C": "two words"}),
        ("s\n\nA: 1\nnot a trailer\n", {}),
        ("s\n\nA: first\n  continued\n", {"A": "first continued"}),
    ],
)
def test_parse_trailers(message: str, trailers: dict[str, str]) -> None:
    assert parse_trailers(message) == trailers


def test_a_status_commit_message_carries_no_escape_from_outside() -> None:
    """A summary or trailer quoting outside text (a zone's problem, a cluster name) is one
    escaped line in the message `git log` shows: no line break, no ESC, no bidi control."""
    from gitdns.core.status.doc import commit_message

    hostile = "held\x1b]52;c;SGVsbG8=\x07\u202e\nFORGED: Ready"
    message = commit_message("eu\x1b[2J", False, "abc1234", hostile, {"Desired-Revision": "x\ny\u2028z"})
    subject, _, trailers = message.partition("\n\n")
    assert subject.isprintable() and "\\x1b]52" in subject and "\\u202e" in subject
    assert trailers == "Desired-Revision: x y z\nAgent: " + trailers.split("Agent: ")[1]
    assert all(line.isprintable() for line in message.splitlines())
