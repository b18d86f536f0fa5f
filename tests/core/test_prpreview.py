"""The reviewer's preview (`gitdns.core.prpreview`): one GitHub comment at most, whatever the size
of the change, parsed by a real markdown renderer; the verdict counts what the zones say."""

from __future__ import annotations

from markdown_it import MarkdownIt

from gitdns.core.plan.values import Authority, Plan
from gitdns.core.prpreview import GITHUB_COMMENT, Review, review_zone, to_markdown, to_text, verdict
from gitdns.core.records import Action, Change, RecordSet, ZoneSnapshot

_MD = MarkdownIt("commonmark").enable("table")


def _zone(n: int, records: int) -> tuple[str, ZoneSnapshot, ZoneSnapshot]:
    zone = f"zone{n}.example.com"
    before = tuple(RecordSet(f"h{i}.{zone}", "A", 60, (f"192.0.2.{i % 250 + 1}",)) for i in range(records))
    after = tuple(RecordSet(r.name, "A", 300, ("198.51.100.9",)) for r in before)
    return zone, ZoneSnapshot(zone, before), ZoneSnapshot(zone, after)


def _plan(zone: str, snapshot: ZoneSnapshot) -> Plan:
    changes = tuple(Change(Action.UPDATE, r, r, r.key) for r in snapshot.records)
    return Plan(zone=zone, owner="3f6c2b9e", authority=Authority.OWN, changes=changes)


def test_a_preview_too_large_for_one_comment_summarises_the_rest() -> None:
    zones = []
    for n in range(40):
        zone, before, after = _zone(n, 60)
        zones.append(review_zone(zone, before, after, [("eu-west-1", _plan(zone, after))]))
    review = Review(tuple(zones), ("compared with main",))
    text = to_markdown(review, rest="gitdns plan --all-clusters --format json --base main")
    assert len(text) <= GITHUB_COMMENT
    assert "more zone(s) not shown" in text and "--base main" in text
    assert verdict(zones).startswith("2400 record changes in 40 zones")  # the verdict counts every zone
    shown = [t for t in _MD.parse(text) if t.type == "heading_open" and t.tag == "h4"]
    assert 0 < len(shown) < 40
    rows = [t for t in _MD.parse(text) if t.type == "tr_open"]
    assert len(rows) == sum(1 for line in text.splitlines() if line.startswith("| ") and "---" not in line)


def test_a_small_preview_is_whole_and_renders_as_tables() -> None:
    zone, before, after = _zone(1, 3)
    review = Review((review_zone(zone, before, after, [("eu-west-1", _plan(zone, after))]),))
    text = to_markdown(review)
    assert "not shown" not in text
    tokens = _MD.parse(text)
    cells = [t for t in tokens if t.type == "td_open"]
    assert len(cells) == 3 * 4  # three changes, four columns
    assert "3 record changes in 1 zone" in to_text(review)
