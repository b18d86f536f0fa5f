"""The soak's oracle and judge (bench/soak_model.py, bench/soak_zone.py): the desired union it
computes from the documented layouts equals the zone gitdns's own preview publishes, and each
invariant fires on the state it forbids and stays quiet on the transient states it allows."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from bench.soak_model import FOREIGN, Model, expected, short_hash, write_files
from bench.soak_zone import Checker, Limits, LocalZone, Rows, foreign_rows, ownership
from gitdns.core.records import RecordSet, ZoneSnapshot
from gitdns.reconcile.basezone import published_zone
from gitdns.reconcile.engine import load
from gitdns.reconcile.preview import NOTHING_PUBLISHED

ZONE = "example.com"
LIMITS = Limits(window=5.0, settle=5.0)
H = "heritage=external-dns,external-dns/owner="


def test_the_hash_is_the_documented_one() -> None:
    assert short_hash("owner1", 8) == "2tqs20a7" and short_hash("cluster-a-uid", 6) == "1hrxie"
    assert short_hash("TestName-TestNamespace", 6) == "a8xcra" and short_hash("ownera", 8) == "1zluoqhm"


@pytest.mark.parametrize("routing", [True, False])
def test_the_oracle_equals_what_the_preview_publishes(tmp_path: Path, routing: bool) -> None:
    """Random desired states of the soak, each published by gitdns's own preview (every cluster's
    pass from the zone holding the foreign records, until it settles): data, owners, groups."""
    rng = random.Random(11 if routing else 12)
    for trial in range(12):
        model = Model.initial(ZONE, routing, 4, rng)
        for _ in range(rng.randint(0, 15)):
            model.mutate(rng)
        root = tmp_path / f"{trial}"
        write_files(root, model.files({"type": "local", "settings": {"path": "store"}}))
        desired = load(root)
        assert not desired.problems, desired.problems
        zone = desired.state.zones[0]
        base = sorted((RecordSet(k[0], k[1], c[0], tuple(sorted(c[3]))) for k, c in foreign_rows(ZONE).items()),
                      key=lambda r: (r.name, r.type))
        snapshot, settled = published_zone(desired, zone, health=NOTHING_PUBLISHED, now=time.time(),
                                           records=ZoneSnapshot(ZONE, tuple(base)))
        assert settled
        checker = Checker(ZONE, LIMITS, foreign_rows(ZONE))
        checker.desire(expected(model), 0.0)
        rows: Rows = {(r.name, r.type, r.set_id): (r.ttl, r.weight, r.geo, frozenset(r.values))
                      for r in snapshot.records}
        assert checker.observe(1.0, rows, []), checker.last_diff
        assert not checker.violations


# --- the invariants on hand-made zones ---------------------------------------------------------
OWNER = "7d3f1a52-0c4e-4b8a-9f61-2a5b8c0d1e01"  # c0


Row = tuple[tuple[str, str, str], tuple[int, None, None, frozenset[str]]]


def txt(name: str, rtype: str, owner: str = OWNER) -> Row:
    key = (f"kuadrant-{short_hash(owner, 8)}-{rtype.lower()}-{name}", "TXT", "")
    return key, (60, None, None, frozenset({f"{H}{owner},external-dns/version=1"}))


def zone_with(*extra: Row) -> Rows:
    return {**foreign_rows(ZONE), **dict(extra)}


def a(name: str, *values: str) -> Row:
    return (name, "A", ""), (60, None, None, frozenset(values))


def checker_wanting(name: str, *values: str) -> Checker:
    model = Model(ZONE, True, specs=())
    exp = expected(model)
    exp.add((name, "A", ""), 60, values, OWNER)
    exp.groups = {}
    checker = Checker(ZONE, LIMITS, foreign_rows(ZONE))
    checker.desire(exp, 0.0)
    return checker


W = f"w1.{ZONE}"


def test_a_level_zone_converges_without_a_violation() -> None:
    checker = checker_wanting(W, "192.0.2.1")
    assert checker.observe(1.0, zone_with(a(W, "192.0.2.1"), txt(W, "A")), [])
    assert not checker.violations
    assert not checker.observe(2.0, zone_with(a(W, "192.0.2.1", "192.0.2.9"), txt(W, "A")), [])  # a value too many


def test_a_data_record_without_its_txt_is_a_violation_at_once() -> None:
    checker = checker_wanting(W, "192.0.2.1")
    checker.observe(1.0, zone_with(a(W, "192.0.2.1")), [])
    assert [v.what for v in checker.violations] == [f"data record {(W, 'A', '')} ['192.0.2.1'] has no ownership TXT"]


def test_an_orphan_txt_is_allowed_for_the_window_only() -> None:
    checker = checker_wanting(W, "192.0.2.1")
    for at in (1.0, 3.0, 5.9):
        checker.observe(at, zone_with(txt(W, "A")), [])
    assert not checker.violations and checker.orphans_seen == 1
    checker.observe(6.5, zone_with(txt(W, "A")), [])
    assert len(checker.violations) == 1 and "without its record" in checker.violations[0].what


def test_a_live_value_missing_longer_than_the_window_is_a_violation() -> None:
    checker = checker_wanting(W, "192.0.2.1", "192.0.2.2")
    checker.observe(10.0, zone_with(a(W, "192.0.2.1", "192.0.2.2"), txt(W, "A")), [])
    checker.observe(11.0, zone_with(a(W, "192.0.2.1"), txt(W, "A")), [])  # lost: back within the window
    checker.observe(14.0, zone_with(a(W, "192.0.2.1", "192.0.2.2"), txt(W, "A")), [])
    assert not checker.violations and checker.missing_seen == 1
    checker.observe(15.0, zone_with(a(W, "192.0.2.1"), txt(W, "A")), [])
    checker.observe(20.5, zone_with(a(W, "192.0.2.1"), txt(W, "A")), [])
    assert len(checker.violations) == 1 and "lost value 192.0.2.2" in checker.violations[0].what


def test_a_value_dropped_right_after_it_became_wanted_again_is_no_loss() -> None:
    """An agent still on the previous revision may drop a value the next commit asks back."""
    checker = checker_wanting(W, "192.0.2.1")
    checker.observe(1.0, zone_with(a(W, "192.0.2.1"), txt(W, "A")), [])
    checker.observe(2.0, zone_with(), [])
    checker.observe(9.0, zone_with(), [])
    assert not checker.violations


def test_values_not_yet_published_are_convergence_not_loss() -> None:
    checker = checker_wanting(W, "192.0.2.1")
    assert not checker.observe(30.0, zone_with(), [])
    assert not checker.violations


def test_a_changed_or_adopted_foreign_record_is_a_violation() -> None:
    checker = checker_wanting(W, "192.0.2.1")
    legacy = f"legacy.{ZONE}"
    moved = (300, None, None, frozenset({"192.0.2.99"}))
    checker.observe(1.0, {**zone_with(a(W, "192.0.2.1"), txt(W, "A")), (legacy, "A", ""): moved}, [])
    checker.observe(2.0, zone_with(a(W, "192.0.2.1"), txt(W, "A"), txt(legacy, "A")), [])
    assert [v.what.split(":")[0].split(" got")[0] for v in checker.violations] == [
        f"foreign record {(legacy, 'A', '')} changed", f"foreign record {(legacy, 'A', '')}"]


def test_a_zone_that_does_not_parse_is_a_violation() -> None:
    checker = checker_wanting(W, "192.0.2.1")
    checker.observe(1.0, {}, ["AXFR: EOF"])
    assert checker.violations and "does not parse" in checker.violations[0].what


def test_ownership_names_are_read_as_documented() -> None:
    assert ownership((f"kuadrant-2tqs20a7-cname-klb.a0.{ZONE}", "TXT", "GEO-EU"), [f"{H}owner1"], ZONE).data == (
        f"klb.a0.{ZONE}", "CNAME", "GEO-EU")
    assert ownership((f"kuadrant-2tqs20a7-mx.{ZONE}", "TXT", ""), [f"{H}owner1"], ZONE).data == (ZONE, "MX", "")
    assert ownership((f"kuadrant-active-groups.{ZONE}", "TXT", ""), ["version=1;groups=a"], ZONE) is None
    assert ownership((f"kuadrant-2tqs20a7-a-w1.{ZONE}", "TXT", ""), ["v=spf1"], ZONE) is None


def test_the_local_reader_reads_the_documented_format_and_parses_the_views(tmp_path: Path) -> None:
    zone = LocalZone(tmp_path, ZONE)
    planted = zone.plant()
    rows, problems = zone.read()
    assert rows == planted and not problems and len(rows) == len(FOREIGN)
    views = tmp_path / f"{ZONE}.views"
    views.mkdir()
    broken = f"$ORIGIN {ZONE}.\n@ 60 IN SOA ns1 h 1 2 3 4 5\n@ 60 IN NS ns1\nns1 60 IN A 1\n"  # A 1: no address
    (views / "default.zone").write_text(broken)
    assert any("does not parse" in p for p in zone.read()[1])
