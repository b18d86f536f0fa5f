"""A host's strategy switch (simple <-> loadbalanced) decided in the planner: the owner on the
newest revision switches it make-before-break, an owner on an older revision yields, a foreign
owner (no `rev`) or a same-revision disagreement freezes the host (docs/records.md,
"Switching a host's strategy")."""

from __future__ import annotations

import itertools

import pytest

from gitdns.core.names import cluster_target_name
from gitdns.core.plan.values import Plan
from gitdns.core.records import Action, RecordSet
from gitdns.core.registry import OwnerLabels, ownership_record
from tests.core.planner_kit import R1, R2, ZONE, Zone

HOST = f"api.{ZONE}"
KLB = f"klb.{HOST}"
DEFAULT = f"default.klb.{HOST}"
IPS = {"c1": "192.0.2.1", "c2": "192.0.2.2", "c3": "192.0.2.3"}


def simple(owner: str) -> list[RecordSet]:
    return [RecordSet(HOST, "A", 60, (IPS[owner],))]


def loadbalanced(owner: str) -> list[RecordSet]:
    target = cluster_target_name(HOST, f"{owner}-uid", "gw", "ns")
    return [
        RecordSet(target, "A", 60, (IPS[owner],)),
        RecordSet(DEFAULT, "CNAME", 60, (target,), set_id=target, weight=120),
        RecordSet(KLB, "CNAME", 300, (DEFAULT,)),
        RecordSet(HOST, "CNAME", 300, (KLB,)),
    ]


LAYOUTS = {"simple": simple, "loadbalanced": loadbalanced}


def resolve(zone: Zone, name: str = HOST, depth: int = 0) -> set[str]:
    """The addresses ``name`` answers with, following CNAMEs (every weighted row)."""
    assert depth < 8, f"CNAME loop at {name}"
    data = zone.data()
    out = {v for (n, t, _), vals in data.items() if n == name and t == "A" for v in vals}
    for (n, t, _), vals in data.items():
        if n == name and t == "CNAME":
            out |= resolve(zone, vals[0], depth + 1)
    return out


def expected(strategy: str, rev: object = R2) -> Zone:
    """The zone every cluster builds alone on a fresh zone, one after the other."""
    zone = Zone()
    for owner in IPS:
        zone.sync(owner, LAYOUTS[strategy](owner), rev=rev)
    return zone


@pytest.mark.parametrize(("old", "new"), [("simple", "loadbalanced"), ("loadbalanced", "simple")])
@pytest.mark.parametrize("order", list(itertools.permutations(IPS)))
def test_switch_completes_in_one_pass_each_and_the_host_always_answers(old: str, new: str,
                                                                        order: tuple[str, ...]) -> None:
    zone = expected(old, R1)
    assert resolve(zone) == set(IPS.values())
    for owner in order:
        p = zone.sync(owner, LAYOUTS[new](owner), rev=R2)
        assert not p.conflicts, p.conflicts
        assert resolve(zone), f"{HOST} answers nothing after {owner}'s pass"
    assert zone.records == expected(new).records
    for owner in order:  # a second pass changes nothing
        assert zone.plan(owner, LAYOUTS[new](owner), rev=R2).empty


@pytest.mark.parametrize(("old", "new"), [("simple", "loadbalanced"), ("loadbalanced", "simple")])
def test_two_passes_each_in_any_interleaving(old: str, new: str) -> None:
    for order in (["c1", "c1", "c2", "c2", "c3", "c3"], ["c3", "c2", "c3", "c1", "c2", "c1"]):
        zone = expected(old, R1)
        for owner in order:
            zone.sync(owner, LAYOUTS[new](owner), rev=R2)
            assert resolve(zone)
        assert zone.records == expected(new).records


def test_the_first_switching_owner_writes_make_before_break() -> None:
    zone = expected("simple", R1)
    p = zone.plan("c1", loadbalanced("c1"), rev=R2)
    data = [(c.action, c.key.name, c.key.type) for c in p.changes if not c.key.name.startswith("kuadrant-")]
    top_delete = data.index((Action.DELETE, HOST, "A"))
    top_create = data.index((Action.CREATE, HOST, "CNAME"))
    layout = [i for i, (_, name, _) in enumerate(data) if name != HOST]
    assert layout and max(layout) < top_delete < top_create
    assert any("strategy switch to loadbalanced" in n and "c2, c3" in n for n in p.notes)
    # back: the new top first after the old one goes, the old layout withdrawn last
    zone = expected("loadbalanced", R1)
    p = zone.plan("c1", simple("c1"), rev=R2)
    data = [(c.action, c.key.name, c.key.type) for c in p.changes if not c.key.name.startswith("kuadrant-")]
    assert data[0] == (Action.DELETE, HOST, "CNAME") and data[1] == (Action.CREATE, HOST, "A")
    assert {a for a, name, _ in data[2:]} == {Action.DELETE} and all(name != HOST for _, name, _ in data[2:])


def test_an_owner_on_an_older_revision_yields_and_does_not_freeze_the_others() -> None:
    zone = expected("simple", R1)
    zone.sync("c1", loadbalanced("c1"), rev=R2)
    before = dict(zone.records)
    p = zone.plan("c2", simple("c2"), rev=R1)  # c2 has not fetched the switch yet
    assert p.empty and p.yielded and not p.real_conflicts
    assert [c.reason for c in p.conflicts] == ["NewerRevisionSeen"] and p.conflicts[0].owners == ("c1",)
    zone.apply(p)
    assert zone.records == before
    # c3 on the new revision is not held by c2's old claim
    p = zone.sync("c3", loadbalanced("c3"), rev=R2)
    assert not p.conflicts
    assert resolve(zone) == {IPS["c1"], IPS["c3"]}
    zone.sync("c2", loadbalanced("c2"), rev=R2)
    assert zone.records == expected("loadbalanced").records


def test_a_foreign_owner_keeping_the_old_strategy_freezes_the_host() -> None:
    zone = Zone()
    zone.sync("c1", simple("c1"), rev=R1)
    zone.sync("kuadrant", [RecordSet(HOST, "A", 60, ("198.51.100.7",))], rev=None)
    before = dict(zone.records)
    p = zone.plan("c1", loadbalanced("c1"), rev=R2)
    assert [c.reason for c in p.conflicts] == ["ConflictingStrategyDiscovered"]
    assert p.conflicts[0].owners == ("kuadrant",)
    assert not [c for c in p.changes if c.key.name in (HOST,) or c.key.name.endswith(KLB)]
    assert zone.records == before


def test_a_foreign_owners_entry_without_rev_label_freezes_even_beside_gitdns_owners() -> None:
    zone = expected("simple", R1)
    data = RecordSet(HOST, "A", 60, ("198.51.100.7",))
    txt, _ = ownership_record(data, OwnerLabels("dns-operator-1", targets=data.values), ZONE)
    zone.records[txt.key] = txt
    zone.records[data.key] = data.with_values({*zone.records[data.key].values, "198.51.100.7"})
    p = zone.plan("c1", loadbalanced("c1"), rev=R2)
    assert {c.reason for c in p.conflicts} == {"ConflictingStrategyDiscovered"}
    assert {o for c in p.conflicts for o in c.owners} == {"dns-operator-1"}


def test_a_disagreement_on_the_same_revision_freezes_the_host() -> None:
    zone = Zone()
    zone.sync("c1", simple("c1"), rev=R2)
    p = zone.plan("c2", loadbalanced("c2"), rev=R2)
    assert p.empty and [c.reason for c in p.conflicts] == ["ConflictingStrategyDiscovered"]


def test_no_revision_of_its_own_freezes_rather_than_guesses() -> None:
    zone = expected("simple", R1)
    p: Plan = zone.plan("c1", loadbalanced("c1"), rev=None)
    assert p.empty and {c.reason for c in p.conflicts} == {"ConflictingStrategyDiscovered"}


def test_an_owner_still_on_the_old_revision_never_switches_back() -> None:
    """c2 switched at R2; c1, still on R1, wants simple: it yields instead of undoing c2."""
    zone = expected("simple", R1)
    zone.sync("c2", loadbalanced("c2"), rev=R2)
    p = zone.plan("c1", simple("c1"), rev=R1)
    assert p.yielded and p.empty
