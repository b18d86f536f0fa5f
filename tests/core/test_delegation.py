"""The pure merge a primary makes of its remotes' payloads (gitdns/core/delegation.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitdns.core.delegation import (
    STATE_INACTIVE,
    STATE_KEPT,
    STATE_MERGED,
    STATE_MISSING,
    STATE_STALE,
    Payload,
    Side,
    check,
    merge,
    merge_sides,
    payload_from_status,
    record_from_dict,
)
from gitdns.core.model import Cluster, DesiredState
from gitdns.core.plan.fmt import record_dict
from gitdns.core.records import RecordSet
from gitdns.reconcile.engine import from_files
from tests.agent.delegation_kit import POLICY, base_files, cluster_doc

NOW = 10_000.0


def state(**extra: str) -> DesiredState:
    result = from_files(Path("."), base_files(**extra), None)
    assert not result.problems, result.problems
    return result.state


def cl(st: DesiredState, name: str) -> Cluster:
    found = st.cluster(f"id-{name}")
    assert found is not None
    return found


def a(name: str, *values: str) -> RecordSet:
    return RecordSet(name, "A", 60, values)


def payload(cid: str, *records: RecordSet, heartbeat: float = NOW) -> Payload:
    return Payload(cid, records, heartbeat, 10.0)


def run_merge(st: DesiredState, payloads: dict[str, Payload], **kw: object):  # type: ignore[no-untyped-def]
    zone = st.zone("example-com")
    assert zone is not None
    remotes = [cl(st, "r1"), cl(st, "r2")]
    return merge(own=cl(st, "p1"), own_records=(), state=st, zone=zone, payloads=payloads, remotes=remotes,
                 now=NOW, stale_after=6, default_poll=10, **kw)  # type: ignore[arg-type]


def test_values_of_one_name_are_united() -> None:
    st = state()
    out = run_merge(st, {"id-r1": payload("id-r1", a("app.example.com", "10.0.0.1")),
                         "id-r2": payload("id-r2", a("app.example.com", "10.0.0.2"))})
    assert {r.name: r.values for r in out.records}["app.example.com"] == ("10.0.0.1", "10.0.0.2")
    assert [v.state for v in out.verdicts] == [STATE_MERGED, STATE_MERGED]


@pytest.mark.parametrize("record, why", [
    (a("evil.example.com", "10.0.0.1"), "not a record"),
    (a("app.example.com", "10.0.0.9"), "not declared"),
    (RecordSet("app.example.com", "CNAME", 60, ("x.example.net",)), "not a record"),
])
def test_checks_against_git_refuse_one_record(record: RecordSet, why: str) -> None:
    st = state()
    zone = st.zone("example-com")
    assert zone is not None
    accepted, refused = check(st, cl(st, "r1"), zone, [record, a("solo1.example.com", "10.0.0.1")])
    assert [r.name for r in accepted] == ["solo1.example.com"]
    assert len(refused) == 1 and why in refused[0]


def test_routing_comes_from_git_not_from_the_remote() -> None:
    st = state()
    zone = st.zone("example-com")
    assert zone is not None
    accepted, _ = check(st, cl(st, "r1"), zone, [RecordSet("app.example.com", "A", 5, ("10.0.0.1",))])
    assert accepted[0].ttl == 60


def test_stale_remote_withdrawn_unless_it_alone_answers_a_host() -> None:
    st = state()
    out = run_merge(st, {
        "id-r1": payload("id-r1", a("app.example.com", "10.0.0.1"), a("solo1.example.com", "10.0.0.1"),
                         heartbeat=NOW - 61 * 10),
        "id-r2": payload("id-r2", a("app.example.com", "10.0.0.2"))})
    recs = {r.name: r.values for r in out.records}
    assert recs["app.example.com"] == ("10.0.0.2",)
    assert recs["solo1.example.com"] == ("10.0.0.1",)  # fail open
    assert {v.cluster_id: v.state for v in out.verdicts} == {"id-r1": STATE_KEPT, "id-r2": STATE_MERGED}


def test_stale_without_anything_unique_is_withdrawn() -> None:
    st = state()
    out = run_merge(st, {"id-r1": payload("id-r1", a("app.example.com", "10.0.0.1")),
                         "id-r2": payload("id-r2", a("app.example.com", "10.0.0.2"), heartbeat=NOW - 600)})
    assert {v.cluster_id: v.state for v in out.verdicts}["id-r2"] == STATE_STALE
    assert out.records == (a("app.example.com", "10.0.0.1"),)


def test_missing_and_inactive() -> None:
    st = state(**{
        "clusters/r1.yaml": cluster_doc("r1", "remote", ["10.0.0.1"], ("app.example.com",), group="a"),
        "clusters/r2.yaml": cluster_doc("r2", "remote", ["10.0.0.2"], ("app.example.com",), group="b"),
        "groups/g.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: ActiveGroups\nmetadata: {name: g}\n"
                         "spec: {zone: example-com, serial: 1, groups: [a]}\n"})
    out = run_merge(st, {"id-r2": payload("id-r2", a("app.example.com", "10.0.0.2"))},
                    active=frozenset({"a"}))
    assert {v.cluster_id: v.state for v in out.verdicts} == {"id-r1": STATE_MISSING, "id-r2": STATE_INACTIVE}
    assert out.records == ()


def test_cname_against_address_records_is_a_conflict_the_published_side_keeps() -> None:
    cname = RecordSet("app.example.com", "CNAME", 300, ("klb.app.example.com",))
    sides = [Side("id-r1", [a("app.example.com", "10.0.0.1")]), Side("id-r2", [cname])]
    records, conflicts = merge_sides(sides, "id-p1", {})
    assert records == (a("app.example.com", "10.0.0.1"),)
    assert len(conflicts) == 1 and "id-r2" in conflicts[0]  # r1 sorts first
    records, conflicts = merge_sides(sides, "id-p1", {cname.key: cname})
    assert records == (cname,) and "id-r1" in conflicts[0]  # what is published keeps the name
    records, conflicts = merge_sides([*sides, Side("id-p1", [cname])], "id-p1", {})
    assert records == (cname,)  # the primary's own records come first


def test_weight_zero_rows_follow_the_provider() -> None:
    extra = {"policies/app.yaml": POLICY % {"name": "app", "gateway": "gw", "strategy": "loadbalanced"}}
    st = state(**extra)
    zone = st.zone("example-com")
    assert zone is not None
    from gitdns.core import builder

    rows = [r for r in builder.desired_for_zone(st, cl(st, "r1"), zone) if r.weight is not None]
    assert rows
    zeroed = [RecordSet(r.name, r.type, r.ttl, r.values, r.set_id, 0, r.geo) for r in rows]
    kept, _ = check(st, cl(st, "r1"), zone, zeroed, weight_zero=True)
    assert kept and all(r.weight == 0 for r in kept)
    dropped, _ = check(st, cl(st, "r1"), zone, zeroed, weight_zero=False)
    assert dropped == []


def test_payload_round_trip_and_bad_entries() -> None:
    rec = RecordSet("x.example.com", "CNAME", 60, ("y.example.com",), "eu", 10, "GEO-EU")
    assert record_from_dict(record_dict(rec) or {}) == rec
    summary = {"heartbeat": 1200, "pollInterval": 30, "mode": "remote"}
    got, problems = payload_from_status("c", summary, {"zone": "example.com",
                                                       "endpoints": [record_dict(rec), {"name": "x"}, 3]})
    assert got is not None and got.records == (rec,) and got.poll_interval == 30 and len(problems) == 2
    assert payload_from_status("c", summary, {"zone": "example.com"})[0] is None
