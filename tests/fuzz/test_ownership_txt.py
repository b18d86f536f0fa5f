"""Malformed ownership TXT in a zone (tests/fuzz/txt.py): the registry reader, the planner and
two agent cycles never crash on them, and a TXT that is not the agent's own is left byte for
byte (in the `local` record store's file: its row as it was written).

`MALFORMED` is the table of kinds (each in the zone of ``eu-west-1``'s app.example.org or
example.com); `FOUND` the bugs the fuzzing found, each failing before its fix; the Hypothesis
tests are the CI share of bench/fuzz.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.core.names import short_hash
from gitdns.core.records import RecordSet
from gitdns.core.registry import decode, decode_entries, txt_name
from tests.fuzz.txt import EU_CENTRAL, OWNER, ZONES, agent_cycles, judge_txt, malformed, may_change, seeded

ORG = "example.org"
APP = "app.example.org"
OWN = txt_name(OWNER, "A", APP, ORG)  # kuadrant-runyqco3-a-app.example.org
THEIRS = txt_name(EU_CENTRAL, "A", APP, ORG)
LEGACY = f"kuadrant-a-{APP}"


def value(owner: str = OWNER, *labels: str, heritage: str = "heritage=external-dns") -> str:
    return ",".join([heritage, f"external-dns/owner={owner}", *labels, "external-dns/version=1"])


def txt(name: str, *values: str) -> RecordSet:
    return RecordSet(name, "TXT", 30, values)


MALFORMED: dict[str, tuple[RecordSet, bool]] = {  # id -> (the TXT, whether it is the agent's own)
    "truncated-value-at-own-name": (txt(OWN, value()[:40]), False),
    "truncated-name": (txt(OWN[: len("kuadrant-runyqco3-")] + "." + ORG, value()), False),
    "no-type-in-the-name": (txt(f"kuadrant-{short_hash(OWNER, 8)}.{ORG}", value()), False),
    "wrong-heritage": (txt(OWN, value(heritage="heritage=kuadrant")), False),
    "heritage-not-first": (txt(OWN, "external-dns/owner=x,heritage=external-dns"), False),
    "version-2-own": (txt(OWN, value().replace("version=1", "version=2")), True),
    "no-version-own-legacy-name": (txt(LEGACY, f"heritage=external-dns,external-dns/owner={OWNER}"), True),
    "another-owner-under-own-hash": (txt(OWN, value(EU_CENTRAL)), False),
    "own-id-in-upper-case": (txt(OWN, value(OWNER.upper())), False),
    "own-id-with-a-blank": (txt(OWN, value(OWNER + " ")), False),
    "joint-with-own-under-own-hash": (txt(OWN, value(f"{OWNER}&&kuadrant-b")), False),
    "legacy-joint-naming-own": (txt(LEGACY, f"heritage=external-dns,external-dns/owner={OWNER}&&kuadrant-b"), False),
    "looks-like-another-owner": (txt(THEIRS, value(EU_CENTRAL, "external-dns/targets=192.0.2.20")), False),
    "another-owner-in-an-inactive-group": (txt(THEIRS, value(EU_CENTRAL, "external-dns/group=site-z")), True),
    "duplicated-owner-label": (txt(OWN, value(OWNER, f"external-dns/owner={EU_CENTRAL}")), True),
    "duplicated-owner-label-other-first": (txt(OWN, value(EU_CENTRAL, f"external-dns/owner={OWNER}")), False),
    "quoted": (txt(THEIRS, f'"{value(EU_CENTRAL)}"'), False),
    "escaped-separators": (txt(THEIRS, value(EU_CENTRAL, "external-dns/targets=192.0.2.20\\;192.0.2.21\\,x")), False),
    "targets-over-255-octets": (txt(THEIRS, value(EU_CENTRAL, "external-dns/targets=" + ";".join(
        f"192.0.2.{i}" for i in range(1, 40)))), False),
    "over-64-kib": (txt(f"big.{ORG}", value(EU_CENTRAL, "external-dns/targets=" + "x" * 70_000)), False),
    "replacement-characters": (txt(OWN, value(OWNER[:8] + "\ufffd\ufffd" + OWNER[10:])), False),
    "lone-surrogate-owner": (txt(OWN, value(OWNER[:8] + "\udcff" + OWNER[9:])), False),
    "lone-surrogate-value": (txt(f"other.{ORG}", "\udcff\udcfe"), False),
    "non-ascii-over-255-octets": (txt(f"accents.{ORG}", "é" * 200), False),
    "quoted-but-not-well": (txt(f"quoted.{ORG}", '"a\\0x"'), False),
    "controls-and-bidi": (txt(f"controls.{ORG}", "\x00\x1b[2J\u202eowner"), False),
    "empty": (txt(f"empty.{ORG}", ""), False),
    "several-values-one-foreign": (txt(OWN, "garbage", value()), True),
    "own-name-in-upper-case": (txt(OWN.upper(), value()), False),
    "own-legacy-name-outside-the-zone": (txt(f"kuadrant-a-{ORG}", value()), False),  # the apex's legacy name
    "own-legacy-with-bytes-no-utf8": (txt(LEGACY, value().replace("version=1", "version=2") + "\ufffd"), False),
    "targets-no-address": (txt(THEIRS, value(EU_CENTRAL, "external-dns/targets=192.0.2.;not-an-address")), False),
}

# id -> what went wrong before the fix
FOUND = {
    "truncated-value-at-own-name": "the planner planned a CREATE over it (every store refused it as stale, "
                                   "for 30 s of re-plans each cycle): now ForeignRecordInTheWay",
    "lone-surrogate-owner": "short_hash raised UnicodeEncodeError out of Agent.run (the registry reader)",
    "lone-surrogate-value": "the local store could not write the zone again (UnicodeEncodeError)",
    "non-ascii-over-255-octets": "the views failed on a 255-octet string cut inside a UTF-8 sequence",
    "quoted-but-not-well": "the views failed on a value that starts with a quote but is no quoted string",
    "own-name-in-upper-case": "read as one of the owner's ownership TXT, which the owner then deleted or "
                              "rewrote (the memory and local stores, keyed in case, refused: the pass failed "
                              "every cycle); owners write names in lower case, another case is another writer's",
    "own-legacy-name-outside-the-zone": "read as the owner's own TXT of the apex, though outside the zone, and "
                                        "deleted: the store refused a write outside the zone every cycle",
    "targets-no-address": "the agent wrote 192.0.2. and not-an-address into app.example.org A",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_txt_is_read_and_left_alone(name: str, tmp_path: Path) -> None:
    record, own = MALFORMED[name]
    assert may_change(record, True) is own
    for text in record.values:
        decode(text)
    decode_entries(record)
    failures, count = judge_txt({ORG: [record]}, tmp_path, "local")
    assert count == 1 and failures == [], "\n".join(failures)


@pytest.mark.parametrize("name", sorted(FOUND))
def test_found_by_fuzzing(name: str, tmp_path: Path) -> None:
    record, _ = MALFORMED[name]
    fresh = name == "truncated-value-at-own-name"  # the owner's first write of app.example.org
    failures, _ = judge_txt({ORG: [record]}, tmp_path, "local", fresh=fresh)
    assert failures == [], f"{FOUND[name]}:\n" + "\n".join(failures)


def test_a_foreign_txt_where_the_owner_s_ownership_txt_goes_is_a_conflict(tmp_path: Path) -> None:
    record, _ = MALFORMED["truncated-value-at-own-name"]
    zones = {domain: seeded(domain, [record] if domain == ORG else [], fresh=True)[0] for domain in ZONES}
    agent, read = agent_cycles("memory", tmp_path, zones)
    [zone] = [z for z in agent.last_report.zones if z.zone == ORG] if agent.last_report else []
    assert zone.plan is not None and [c.reason for c in zone.plan.conflicts] == ["ForeignRecordInTheWay"]
    assert OWN in zone.plan.conflicts[0].message and not zone.plan.changes
    assert read(ORG)[record.key] == record and RecordSet(APP, "A", 30, ()).key not in read(ORG)


QUIET = settings(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
SEEDS = st.fixed_dictionaries({domain: st.lists(malformed(domain), max_size=6) for domain in ZONES})


@settings(QUIET, max_examples=150)
@given(SEEDS)
def test_the_reader_and_the_planner(tmp_path_factory: pytest.TempPathFactory,
                                    seeds: dict[str, list[RecordSet]]) -> None:
    failures, _ = judge_txt(seeds, tmp_path_factory.mktemp("case"), None)
    assert failures == [], "\n".join(failures)


@settings(QUIET, max_examples=50)
@given(SEEDS)
def test_agent_cycles(tmp_path_factory: pytest.TempPathFactory, seeds: dict[str, list[RecordSet]]) -> None:
    failures, _ = judge_txt(seeds, tmp_path_factory.mktemp("case"), "memory")
    assert failures == [], "\n".join(failures)
