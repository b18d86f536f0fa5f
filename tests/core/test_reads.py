"""What a pass reads: changed names and their co-owners' TXT names, when cheaper."""

from __future__ import annotations

from gitdns.core.reads import changed_keys, names_to_read, per_name_is_cheaper
from gitdns.core.records import RecordKey, RecordSet


def test_changed_keys_cover_added_removed_and_changed() -> None:
    before = [RecordSet("a.example.com", "A", 60, ("1.1.1.1",)), RecordSet("b.example.com", "A", 60, ("2.2.2.2",))]
    after = [RecordSet("a.example.com", "A", 60, ("1.1.1.9",)), RecordSet("c.example.com", "A", 60, ("3.3.3.3",))]
    assert changed_keys(before, after) == {RecordKey("a.example.com", "A"), RecordKey("b.example.com", "A"),
                                           RecordKey("c.example.com", "A")}
    assert changed_keys(before, before) == set()


def test_names_include_every_known_owners_txt() -> None:
    names = names_to_read({RecordKey("a.example.com", "A")}, ["o1", "o2"], "example.com")
    assert "a.example.com" in names
    assert sum(1 for n in names if n.startswith("kuadrant-") and n.endswith("-a-a.example.com")) == 2
    assert sum(1 for n in names if n.endswith("-cname-a.example.com")) == 2


def test_cost_model() -> None:
    assert per_name_is_cheaper(5, 20_000, 300)
    assert not per_name_is_cheaper(100, 20_000, 300)
    assert not per_name_is_cheaper(1, 10, 0)  # a one-call whole-zone read always wins
