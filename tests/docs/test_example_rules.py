"""The comparison rules of `tests.docs.examples` (what the docs' examples are held to): a changed
character fails, and only the listed values may differ between the page and a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.examples import Line, Matcher, blocks

COMMIT = "8946f78d0b6c1f0e4b9a8d7c6e5f4a3b2c1d0e9f"
OTHER = "1c823fd5a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4"
STARTED = 1_790_000_000  # the run began at 2026-09-21T...: later times are the clock's


def match(page: list[str], real: list[str], stderr: tuple[int, ...] = (),
          commits: tuple[str, ...] = (COMMIT, OTHER)) -> dict[str, str] | None:
    matcher = Matcher(set(commits), STARTED, {}, {})
    found = matcher.match(page, [Line(t, i in stderr) for i, t in enumerate(real)])
    return None if found is None else found[0]


def test_identical_output_matches_and_one_changed_character_does_not() -> None:
    out = ["zone example.org: 3 record set(s)", "app.example.org 30 A  owners: eu-west-1, us-east-1"]
    assert match(out, out) == {}
    assert match(out, [out[0], out[1].replace("30 A", "31 A")]) is None
    assert match(out, out[:1]) is None  # a line less
    assert match(out, [*out, "more"]) is None  # a line more


def test_ellipsis_stands_for_lines_or_the_rest_of_a_line() -> None:
    assert match(["head", "…", "tail"], ["head", "a", "b", "tail"]) == {}
    assert match(["head", "  …", "tail"], ["head", "tail"]) == {}
    assert match(["head", "…", "tail"], ["head", "a", "b"]) is None  # the tail must still come
    assert match(["~ klb CNAME ttl=300 -> ttl=600 …"], ["~ klb CNAME ttl=300 -> ttl=600 set=GEO-EU geo=GEO-EU"]) == {}
    assert match(["~ klb CNAME ttl=300 -> ttl=600 …"], ["~ klb CNAME ttl=300 -> ttl=60 set=GEO-EU"]) is None


def test_stderr_annotation_is_checked() -> None:
    page = ["gitdns: rendered 2 manifest(s)      (stderr)", "out/a.yaml"]
    assert match(page, ["gitdns: rendered 2 manifest(s)", "out/a.yaml"], stderr=(0,)) == {}
    assert match(page, ["gitdns: rendered 2 manifest(s)", "out/a.yaml"]) is None  # it went to stdout


def test_table_padding_and_trailing_blanks_are_not_format() -> None:
    assert match(["a  Ready     132992e"], ["a  Ready  132992e   "], commits=("132992e" + "0" * 33,)) == {
        "132992e": "132992e"}
    assert match(["a  Ready 132992e"], ["a Ready 132992e"]) is None  # one space is not padding


def test_a_commit_of_the_scenario_is_mapped_consistently() -> None:
    page = ["merged by 1c823fd (PR #7)", "applied (as part of 1c823fd)"]
    assert match(page, [f"merged by {COMMIT[:7]} (PR #7)", f"applied (as part of {COMMIT[:7]})"]) == {
        "1c823fd": COMMIT[:7]}
    # one page sha for two real commits, or a real commit shown as two page shas: refused
    assert match(page, [f"merged by {COMMIT[:7]} (PR #7)", f"applied (as part of {OTHER[:7]})"]) is None
    assert match(["1c823fd", "aaaaaaa"], [COMMIT[:7], COMMIT[:7]]) is None
    # a hex string that is no commit of the scenario (an id, a hash) must match exactly
    assert match(["owner 3f6c2b9e"], ["owner 3f6c2b9f"]) is None
    assert match(["rev 1c823fd"], ["rev 1c823f"]) is None  # the shape: a sha of another length


def test_clock_readings_may_differ_in_value_not_in_shape() -> None:
    later, fixed = "2026-11-26T03:16:07Z", "2023-11-14T23:13:20Z"
    assert match([f"applied {later}  3 commits, 1107d04h"], ["applied 2026-11-27T08:00:00Z  3 commits, 1108d09h"]) == {}
    assert match([f"committed {fixed}"], ["committed 2023-11-14T23:13:21Z"]) is None  # before the run: exact
    assert match([f"applied {later}"], ["applied 2026-11-27 08:00:00"]) is None


def test_a_page_without_markers_on_a_command_block_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- example: here -->\n```\n$ gitdns x\nout\n```\n\n```\n$ gitdns y\n```\n",
                    encoding="utf-8")
    with pytest.raises(AssertionError, match="no `<!-- example"):
        blocks(page)
    page.write_text("<!-- example: here step -->\n````\n$ gitdns x \\\n  --flag\nout\n```diff\n+ a\n```\n````\n",
                    encoding="utf-8")
    (block,) = blocks(page)
    assert (block.scenario, block.step) == ("here", "step")
    assert [c.text for c in block.commands] == ["gitdns x \\\n  --flag"]
    assert block.commands[0].output == ["out", "```diff", "+ a", "```"]
