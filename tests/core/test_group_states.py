"""A group's expected and resulting states, as providers that send a group as one request need."""

from __future__ import annotations

import pytest

from gitdns.core.records import Action, Change, RecordSet
from gitdns.core.store import ContradictoryGroup, group_states

A1 = RecordSet("a.example.com", "A", 60, ("192.0.2.1",))
A2 = RecordSet("a.example.com", "A", 60, ("192.0.2.2",))
TXT = RecordSet("t.example.com", "TXT", 60, ("x",))


def test_first_view_before_last_view_after() -> None:
    changes = [Change(Action.UPDATE, A1, A2, A1.key), Change(Action.CREATE, None, TXT, A1.key)]
    before, after = group_states(changes)
    assert before == {A1.key: A1, TXT.key: None}
    assert after == {A1.key: A2, TXT.key: TXT}


def test_a_later_change_that_does_not_follow_the_earlier_one_is_refused() -> None:
    changes = [Change(Action.UPDATE, A1, A2, A1.key), Change(Action.DELETE, A1, None, A1.key)]
    with pytest.raises(ContradictoryGroup, match="contradict"):
        group_states(changes)
