"""A leaving owner's change is conditional on at most two co-owners (`plantxt.STAY_GUARDS`),
and owners leaving in any order, each planning on a read that others overtake, never leave a
record without an owner nor delete one an owner still wants."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gitdns.core import registry
from gitdns.core.plan.txt import STAY_GUARDS
from gitdns.core.records import RecordKey
from gitdns.core.store import apply_changes
from tests.core.planner_kit import ZONE, Zone, cname

OWNERS = [f"o{i:02d}" for i in range(12)]
API = RecordKey(f"api.{ZONE}", "CNAME")


def shared_zone(owners: list[str]) -> Zone:
    zone = Zone()
    for owner in owners:
        zone.sync(owner, [cname("api", "lb.example.net")])
    return zone


def test_leaving_a_record_of_many_owners_guards_on_two_of_them() -> None:
    zone = shared_zone(OWNERS)
    leave = zone.plan(OWNERS[5], [])
    present = [g for g in leave.guards if g.present]
    assert len(present) == STAY_GUARDS == 2
    # each guard names a co-owner's own ownership TXT, never the leaver's
    named = {g.key.name for g in present}
    assert named <= {registry.txt_name(o, "CNAME", API.name, ZONE) for o in OWNERS if o != OWNERS[5]}
    zone.apply(leave)
    assert API in zone.records
    assert registry.txt_name(OWNERS[5], "CNAME", API.name, ZONE) not in zone.txt()


def test_a_guarded_co_owner_gone_meanwhile_refuses_the_leave_and_the_next_plan_guards_on_those_left() -> None:
    zone = shared_zone(OWNERS[:4])
    leave = zone.plan("o03", [])
    guarded = sorted(g.key.name for g in leave.guards if g.present)
    first = next(o for o in OWNERS[:3] if registry.txt_name(o, "CNAME", API.name, ZONE) == guarded[0])
    zone.sync(first, [])  # the guarded co-owner leaves before o03's change lands
    result = apply_changes(zone.records, leave.applicable, leave.guards)
    assert result.refused  # conditional on a TXT that went: refused as stale
    again = zone.plan("o03", [])
    assert registry.txt_name(first, "CNAME", API.name, ZONE) not in {g.key.name for g in again.guards}
    zone.apply(again)
    assert API in zone.records  # two owners still hold it


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.data())
def test_owners_leaving_on_stale_reads_in_any_order_never_orphan_the_record(n: int, data: st.DataObject) -> None:
    """Each leaver plans on the zone as it was when it read (some reads overtaken by others'
    writes); a change refused as stale is planned again on a fresh read.  Whoever stays keeps
    the record; when all leave it goes, with its TXT."""
    owners = OWNERS[:n]
    stay = set(data.draw(st.sets(st.sampled_from(owners), max_size=n - 1)))
    leavers = [o for o in owners if o not in stay]
    zone = shared_zone(owners)
    pending = {o: zone.plan(o, []) for o in leavers}  # every leaver read before any wrote
    order = data.draw(st.permutations(leavers))
    for owner in order:
        plan = pending[owner]
        for _ in range(n + 1):
            result = apply_changes(zone.records, plan.applicable, plan.guards)
            if not result.refused:
                zone.records = result.records
                break
            plan = zone.plan(owner, [])  # refused as stale: read again and plan again
        else:
            raise AssertionError(f"{owner} never left")
    owners_left = {o for o in owners if registry.txt_name(o, "CNAME", API.name, ZONE) in zone.txt()}
    assert owners_left == stay
    assert (API in zone.records) == bool(stay)  # never ownerless, never taken from a live owner
