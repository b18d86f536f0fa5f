"""Bounded parsing: aliases and merge keys refused before anything is repeated, nesting and
tags bounded, files over the read limits left unread (a problem naming file, size and cap),
untrusted values cut short in messages, lines found in one bounded pass.

The alias bombs here are small ones (three levels): the 380- and 480-byte bombs and the 40 MB
file run through `gitdns validate` and the agent, as child processes under a memory limit and
with their peak memory measured, in tests/e2e/test_hostile_files.py."""

from __future__ import annotations

import datetime
import json
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jsonschema import ValidationError

from gitdns.adapters.repo import load_schemas
from gitdns.core.limits import MiB, ReadBudget, ReadLimits, Unread, parse_size, size_text, symlink
from gitdns.core.loader import MAX_SCHEMA_PROBLEMS, LoadResult, _schema_problems, load
from gitdns.core.problems import MAX_MESSAGE, Problem, blocked_zones, clipped, shown
from gitdns.core.validate import check
from gitdns.core.yamlparse import MAX_DEPTH, parse
from gitdns.core.yamlparse.lines import line_of, lines
from tests.core.hostile_kit import HEAD, alias_bomb, first_alias_line, zone

ZONES = {"zones/a.yaml": zone("zone-a", "a.example"), "zones/b.yaml": zone("zone-b", "b.example")}


def run(files: dict[str, str]) -> LoadResult:
    return load(files, load_schemas())


def peak_bytes(work: Callable[[], Any]) -> int:
    """The most memory Python held at once while ``work`` ran (tracemalloc)."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- aliases and merge keys ------------------------------------------------------------------


def record_set(name: str, zone_name: str, body: str) -> str:
    return f"{HEAD}kind: RecordSet\nmetadata: {{name: {name}}}\nspec:\n  zone: {zone_name}\n{body}"


def test_an_alias_bomb_is_one_problem_at_the_alias_holding_only_its_zone() -> None:
    bomb = alias_bomb(zone="zone-a", levels=3)
    result = check({**ZONES, "zones/bomb.yaml": bomb}, load_schemas())
    [problem] = result.problems
    assert (problem.file, problem.line, problem.code) == ("zones/bomb.yaml", first_alias_line(bomb), "AliasRefused")
    assert problem.message == "aliases are not allowed"
    assert (problem.zones, problem.blocks_all) == (("zone-a",), False)
    assert blocked_zones(result.problems, ["zone-a", "zone-b"]) == {"zone-a"}
    assert sorted(z.name for z in result.state.zones) == ["zone-a", "zone-b"]  # the bomb's document left out


def test_an_alias_is_never_followed() -> None:
    """What an alias names is never referenced twice: the document holds a stand-in where
    each alias was, so nothing that walks it (the schema check, a message) can multiply it."""
    [doc] = parse("a: &a [x, y]\nb: *a\nc: [*a, *a]\n")
    assert doc.data == {"a": ["x", "y"], "b": {}, "c": [{}, {}]}
    assert doc.refused is not None and doc.refused.line == 2


def test_the_zones_of_a_document_with_an_alias_still_count() -> None:
    text = record_set("r", "zone-b", "  records:\n    - {name: a, type: TXT, values: &v [x]}\n"
                                     "    - {name: b, type: TXT, values: *v}\n")
    [problem] = run({**ZONES, "records/r.yaml": text}).problems
    assert (problem.line, problem.zones, problem.blocks_all) == (8, ("zone-b",), False)


@pytest.mark.parametrize(
    "text",
    [
        f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nx: &z zone-b\nspec:\n  zone: *z\n",
        f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nx: &n b\nspec:\n  zone: zone-a\n  records: [{{name: *n}}]\n",
        f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nx: &r []\nspec:\n  zone: zone-a\n  records: *r\n",
        f"{HEAD}kind: Zone\nx: &n zone-b\nmetadata: {{name: *n}}\n",
        f"{HEAD}kind: Tenant\nmetadata: {{name: t}}\nx: &d a.example\nspec:\n  domains: [*d]\n",
        f"{HEAD}kind: Cluster\nmetadata: {{name: c}}\nx: &g {{}}\nspec:\n  gateways: [*g]\n",
        f"{HEAD}kind: DNSPolicy\nmetadata: {{name: p}}\nx: &h [a.example]\nspec:\n  targetRef: {{hosts: *h}}\n",
    ],
)
def test_an_alias_where_zones_are_named_holds_every_zone(text: str) -> None:
    [problem] = run({**ZONES, "x.yaml": text}).problems
    assert (problem.code, problem.blocks_all) == ("AliasRefused", True)


def test_an_alias_as_a_key_and_an_alias_of_a_whole_document() -> None:
    keyed = f"{HEAD}kind: Zone\nmetadata: {{name: zone-b}}\nspec:\n  x: &k y\n  *k : 1\n"
    [problem] = run({"z.yaml": keyed}).problems
    assert (problem.code, problem.line, problem.zones) == ("AliasRefused", 6, ("zone-b",))
    [whole] = [p for p in run({"z.yaml": "--- &d {a: 1}\n--- *d\n"}).problems if p.code == "AliasRefused"]
    assert (whole.code, whole.line, whole.blocks_all) == ("AliasRefused", 2, True)


def test_merge_keys_are_refused_like_aliases() -> None:
    text = f"{HEAD}kind: Zone\nmetadata: {{name: zone-a}}\nspec:\n  <<: {{domain: a.example}}\n"
    [problem] = run({"z.yaml": text}).problems
    assert (problem.code, problem.line, problem.zones) == ("MergeKeyRefused", 5, ("zone-a",))
    assert "merge keys" in problem.message
    quoted = run({"z.yaml": text.replace("<<:", "'<<':")}).problems  # a string key: the schema's business
    assert {p.code for p in quoted} == {"SchemaViolation"}


def test_anchors_without_aliases_are_harmless() -> None:
    assert run({"z.yaml": zone("zone-a", "&d a.example")}).problems == []


# --- what the parser builds, and what ends a file -------------------------------------------


def test_scalars_resolve_as_the_yaml_1_2_core_schema_says() -> None:
    [doc] = parse("a: 1\nb: 0x1f\nc: 1.5\nd: true\ne: yes\nf: null\ng: ~\nh:\ni: 2002-12-14\nj: '1'\n"
                  "k: !!str 2\nl: 0o17\nm: .inf\nn: 010\n")
    assert doc.data == {"a": 1, "b": 31, "c": 1.5, "d": True, "e": "yes", "f": None, "g": None, "h": None,
                        "i": datetime.date(2002, 12, 14), "j": "1", "k": "2", "l": 15, "m": float("inf"), "n": 10}


def test_documents_keep_their_index_and_first_line() -> None:
    docs = parse("# c\n---\n---\na: 1\n---\n...\n---\n- x\n")
    assert [(d.index, d.line, d.data) for d in docs] == [(1, 4, {"a": 1}), (3, 8, ["x"])]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), 1, f"nested more than {MAX_DEPTH} levels deep"),
        ("a:\n" + "".join(f"{'  ' * i}- \n" for i in range(1, 100)), 0, "nested more than"),
        ("a: 1\nb: !evil x\n", 2, "the tag '!evil' is not supported"),
        ("a: !!set {x}\n", 1, "is not supported"),
        ("a: !!int nope\n", 1, "'nope' is not a valid int"),
        ("? [a]\n: b\n", 1, "a mapping key must be a scalar"),
        ("a: 1\nb: 2\na: 3\n", 3, "duplicate key 'a'"),
    ],
)
def test_what_ends_a_file_is_a_parse_problem(text: str, line: int, message: str) -> None:
    [problem] = run({"x.yaml": text, **ZONES}).problems
    assert (problem.code, problem.blocks_all) == ("ParseError", True)
    assert message in problem.message
    assert line == 0 or problem.line == line


def test_nesting_a_hundred_thousand_deep_is_a_problem_not_a_crash() -> None:
    [problem] = run({"x.yaml": "[" * 100_000}).problems
    assert problem.code == "ParseError" and problem.line == 1


def test_a_long_tag_is_cut_short_in_the_problem() -> None:
    [problem] = run({"x.yaml": f"a: !{'t' * 5000}\n  x\n"}).problems
    assert "not supported" in problem.message and len(problem.message) < 250


# --- files left unread -----------------------------------------------------------------------


def test_a_file_over_the_cap_names_its_size_and_the_cap() -> None:
    budget = ReadBudget(ReadLimits(file_bytes=4 * MiB, commit_bytes=16 * MiB))
    refused = budget.refuse(40 * MiB + 3)
    assert isinstance(refused, Unread) and refused.code == "FileTooLarge" and budget.used == 0
    result = run({**ZONES, "zones/big.yaml": refused})
    [problem] = result.problems
    assert (problem.file, problem.code, problem.blocks_all) == ("zones/big.yaml", "FileTooLarge", True)
    assert "40.0 MiB (41943043 bytes)" in problem.message and "cap of 4 MiB per file" in problem.message
    assert "maxFileBytes" in problem.hint
    assert problem.format().startswith("zones/big.yaml: .: the file is 40.0 MiB")


def test_the_commit_cap_counts_the_files_read_before() -> None:
    budget = ReadBudget(ReadLimits(file_bytes=3 * MiB, commit_bytes=5 * MiB))
    assert budget.refuse(3 * MiB) is None and budget.refuse(2 * MiB) is None
    refused = budget.refuse(1)
    assert isinstance(refused, Unread) and refused.code == "CommitTooLarge"
    assert "total 5 MiB" in refused.message and "cap of 5 MiB per commit" in refused.message
    assert budget.used == 5 * MiB


def test_a_symlink_is_a_problem_that_holds_nothing() -> None:
    result = check({**ZONES, "zones/link.yaml": symlink()}, load_schemas())
    [problem] = result.problems
    assert (problem.code, problem.zones, problem.blocks_all) == ("SymlinkRefused", (), False)
    assert "symlinks are not followed" in problem.message
    assert blocked_zones(result.problems, ["zone-a", "zone-b"]) == set()


def test_an_unread_file_that_lost_its_type_still_does_not_parse() -> None:
    [problem] = run({**ZONES, "zones/big.yaml": str(ReadBudget(ReadLimits(1, 1)).refuse(2))}).problems
    assert (problem.code, problem.blocks_all) == ("ParseError", True)


def test_sizes() -> None:
    sizes = [parse_size(s) for s in ("4194304", "4MiB", "512 KiB", "1g", 7)]
    assert sizes == [4 * MiB, 4 * MiB, 512 * 1024, 1024 * MiB, 7]
    for bad in ("", "0", "-1", "1.5m", "4 TB", "x"):
        with pytest.raises(ValueError, match="is not a size"):
            parse_size(bad)
    assert [size_text(n) for n in (512, 4 * MiB, 40 * MiB + 3)] == ["512 bytes", "4 MiB", "40.0 MiB (41943043 bytes)"]
    with pytest.raises(ValueError):
        ReadLimits(file_bytes=0)


# --- untrusted values in messages --------------------------------------------------------------


def test_shown_quotes_cuts_and_makes_control_characters_visible() -> None:
    assert shown("evil\n\x1b[31m") == "'evil\\n\\x1b[31m'"
    long = shown("s" * 1000)
    assert long.startswith("'" + "s" * 80 + "'…") and "(1000 characters)" in long
    nested: list[Any] = [["x" * 500] * 1000] * 1000
    assert len(shown(nested)) <= 81


def test_clipped_is_bounded_printable_and_stable() -> None:
    text = clipped("a\nb\u202e" + "x" * 5000, 100)
    assert len(text) == 101 and text.isprintable() and text.startswith("a\\nb\\u202e")
    assert clipped(text, 100) == text


def test_no_problem_carries_a_long_or_multi_line_message() -> None:
    problem = Problem("f.yaml", (), "value " + "v\n" * 100_000, hint="\x00" * 10)
    assert len(problem.message) <= MAX_MESSAGE + 1 and problem.message.isprintable()
    assert problem.hint == "\\x00" * 10


@pytest.mark.parametrize("field", ["kind", "apiVersion"])
def test_an_echoed_envelope_value_is_cut_short(field: str) -> None:
    secret = json.dumps("line one\nline two " + "S" * 10_000)  # a YAML double-quoted scalar
    doc = f"{HEAD}kind: {secret}\n" if field == "kind" else f"kind: Zone\napiVersion: {secret}\n"
    [problem] = [p for p in run({"x.yaml": doc}).problems if p.yaml_path == field]
    assert "line one\\nline two SSS" in problem.message
    assert "S" * 81 not in problem.message and "\n" not in problem.message


def test_schema_problems_are_counted_out_after_a_few() -> None:
    records = "  records: [" + ", ".join(["1"] * 5000) + "]\n"
    problems = run({**ZONES, "r.yaml": record_set("r", "zone-a", records)}).problems
    assert len(problems) == MAX_SCHEMA_PROBLEMS + 1
    assert "more schema problems in this document are not listed" in problems[-1].message
    assert all(p.zones == ("zone-a",) for p in problems)


def test_schema_errors_are_drawn_only_as_far_as_they_are_listed() -> None:
    class Endless:
        def iter_errors(self, _data: object) -> Iterator[ValidationError]:
            while True:
                yield ValidationError("1 is not a string", validator="type", validator_value="string", instance=1,
                                      schema={"type": "string"})

    problems = _schema_problems("f.yaml", Endless(), {})
    assert len(problems) == MAX_SCHEMA_PROBLEMS + 1


# --- lines, found in one pass -----------------------------------------------------------------


MULTI = "# c\n---\na:\n  - b: 1\n    c: [1,\n      2]\n  - - y\n---\n- 1\n---\nx: {y: {z: 1}}\n"


@pytest.mark.parametrize(
    ("index", "path", "line"),
    [(0, (), 3), (0, ("a",), 3), (0, ("a", 0, "c", 1), 6), (0, ("a", 1, 0), 7), (0, ("a", 0, "nope", 3), 4),
     (1, (), 9), (1, (5,), 9), (2, ("x", "y", "z"), 11), (3, (), 0)],
)
def test_line_of_a_path(index: int, path: tuple[str | int, ...], line: int) -> None:
    assert line_of(MULTI, index, path) == line


def test_lines_of_many_paths_in_one_pass() -> None:
    wanted = [(0, ("a", 0, "b")), (2, ("x",)), (7, ())]
    assert lines(MULTI, wanted) == {(0, ("a", 0, "b")): 4, (2, ("x",)): 11}


def test_finding_a_line_in_a_large_file_takes_little_memory() -> None:
    """A file near the cap with a problem in its last document: the line is found by reading
    events (a round-trip load would hold the whole file again, many times its size)."""
    filler = "".join(f"---\nkind: Filler\nitems: [{', '.join(['v'] * 200)}]\n" for _ in range(400))
    text = filler + "---\nkind: Last\nspec:\n  deep: {x: 1}\n"
    assert len(text) > 250_000
    found: dict[str, int] = {}
    peak = peak_bytes(lambda: found.update(line=line_of(text, 400, ("spec", "deep", "x"))))
    assert found["line"] == text.count("\n")
    assert peak < 2 * MiB


def test_a_status_file_with_an_alias_is_refused_before_it_expands() -> None:
    """Status branches are written by whoever can push to the repository: read them bounded too."""
    from gitdns.core.status.doc import StatusDocError, load

    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b]\n'
    with pytest.raises(StatusDocError, match="aliases"):
        load(bomb)
    assert load("ready: true\n") == {"ready": True}


@pytest.mark.parametrize("digits", ["9" * 5000, "-" + "9" * 4500, "0x" + "f" * 5000, "0o" + "7" * 5000])
def test_an_integer_too_long_to_convert_is_a_problem_at_its_line_not_a_crash(digits: str) -> None:
    from gitdns.core.status.doc import StatusDocError
    from gitdns.core.status.doc import load as load_status

    text = zone("example-com", "example.com") + f"---\n{HEAD}kind: Zone\nmetadata: {{name: big}}\nspec:\n" \
        f"  domain: big.test\n  ttl: {digits}\n"
    [problem] = load({"z.yaml": text}, load_schemas()).problems
    assert (problem.file, problem.code) == ("z.yaml", "ParseError")
    assert problem.line == text.count("\n")  # the ttl line
    assert "integer of" in problem.message and "not accepted" in problem.message
    with pytest.raises(StatusDocError, match="integer of"):
        load_status(f"serial: {digits}\n")
    assert parse("a: " + "9" * 4000)[0].data["a"] == int("9" * 4000)  # long, within the cap: read


def test_mapping_keys_are_one_string_object_each_however_many_mappings_name_them() -> None:
    """A NodePool of 10,000 nodes names "name", "ip" and "healthEndpoint" 10,000 times each: the
    parse keeps one string object per key, not one per mapping (values are the document's own)."""
    text = "nodes:\n" + "".join(f"  - {{name: n{i}, ip: 10.0.0.{i}, 7: seven}}\n" for i in range(50))
    [doc] = parse(text)
    nodes = doc.data["nodes"]
    keys = [[k for k in node if isinstance(k, str)] for node in nodes]
    assert all(k == ["name", "ip"] for k in keys)
    assert len({id(k) for row in keys for k in row}) == 2
    assert [node[7] for node in nodes] == ["seven"] * 50  # a key that is no string stays as parsed
    assert len({id(node["name"]) for node in nodes}) == 50
