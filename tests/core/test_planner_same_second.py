"""Two commits made in the same second are two revisions, not one (found by bench/soak.py,
issue 30): owners on either kept yielding to each other, so a TTL or a CNAME target the second
commit changed never reached the zone."""

from __future__ import annotations

from gitdns.core.model import Revision
from gitdns.core.records import RecordKey
from tests.core.planner_kit import Zone, a, cname

FIRST = Revision(1_700_000_000, "1111111aaaa")
SECOND = Revision(1_700_000_000, "2222222bbbb")  # the same second, another commit


def test_a_ttl_changed_by_the_second_commit_of_a_second_reaches_the_zone() -> None:
    zone = Zone()
    for owner in ("o1", "o2"):
        zone.sync(owner, [a("s0", "192.0.2.200", ttl=300)], rev=FIRST)
    for _ in range(2):
        for owner in ("o1", "o2"):
            zone.sync(owner, [a("s0", "192.0.2.200", "192.0.2.202", ttl=120)], rev=SECOND)
    held = zone.records[RecordKey("s0.example.com", "A")]
    assert (held.ttl, held.values) == (120, ("192.0.2.200", "192.0.2.202"))
    for owner in ("o1", "o2"):
        p = zone.plan(owner, [a("s0", "192.0.2.200", "192.0.2.202", ttl=120)], rev=SECOND)
        assert p.empty and not p.conflicts


def test_a_cname_changed_by_the_second_commit_of_a_second_reaches_the_zone() -> None:
    zone = Zone()
    for owner in ("o1", "o2"):
        zone.sync(owner, [cname("s2", "target.example.net")], rev=FIRST)
    for _ in range(2):
        for owner in ("o1", "o2"):
            zone.sync(owner, [cname("s2", "other.example.net")], rev=SECOND)
    assert zone.records[RecordKey("s2.example.com", "CNAME")].values == ("other.example.net",)


def test_owners_on_one_commit_wanting_other_content_still_conflict() -> None:
    zone = Zone()
    zone.sync("o1", [cname("s2", "target.example.net")], rev=SECOND)
    p = zone.plan("o2", [cname("s2", "other.example.net")], rev=SECOND)
    assert [c.reason for c in p.conflicts] == ["ConflictingValues"]
    assert not [c for c in p.changes if c.key.type == "CNAME"]
