"""Mutated and generated desired-state documents through `gitdns validate` and an agent cycle
(tests/fuzz/harness.py says what must hold): never a traceback, every refusal a problem with
file and line, no zone change for a rejected document, the other zones reconciled.

The CI share of bench/fuzz.py (derandomized, so a run is repeatable): `VALIDATE_EXAMPLES` cases
through `gitdns validate` alone (the function, the CLI, its JSON: the cheap path, for the bulk),
and `AGENT_EXAMPLES` other cases through validate and an agent cycle (the zone checks); the
full run is bench/fuzz.py's.  `FOUND` holds each bug the fuzzing found, as the case that showed
it, shrunk by hand: each of them failed before its fix.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from gitdns.adapters.repo import load_schemas
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.validate import check
from tests.agent.fakes import Clock, FakeSource
from tests.fuzz.harness import Stores, judge, texts
from tests.fuzz.mutations import ByteDelete, ByteInsert, Case, Drop, FileEdit, SetValue, TextInsert, apply, cases
from tests.fuzz.repos import REPOS, clusters, mutable, repo_files
from tests.fuzz.yamltree import Map, Seq

pytestmark = pytest.mark.slow

VALIDATE_EXAMPLES = 500
AGENT_EXAMPLES = 100

# id -> (the case, the code and line of the problem it must show)
FOUND: dict[str, tuple[Case, tuple[str, int]]] = {
    # zone.yaml does not parse: its Zone is missing from the broken revision, which blocks every
    # zone it names (none); the agent took the zone for one its cluster had left, removed its
    # records and then failed on the zone's report (an AssertionError out of Agent.run)
    "a-zone-file-that-does-not-parse": (
        Case("03-geo-and-custom-weights", 0, 4, 0, (TextInsert(0, "{"),)), ("ParseError", 3)),
    # a DNSPolicy whose targetRef.gateway is a list: left out, and its zones read from a gateway
    # it does not name (none): the agent removed the policy's records
    "a-policy-gateway-of-another-type": (
        Case("02-loadbalanced", 0, 1, 0, (SetValue(6, Seq(["api-gw"])),)), ("SchemaViolation", 7)),
    # a RecordSet whose spec is a string: left out, its zones unknown, blocking none: its
    # records were removed
    "a-record-set-spec-of-another-type": (
        Case("04-static-records-and-tenants", 0, 0, 0, (SetValue(4, "records"),)), ("SchemaViolation", 5)),
    # the agent's own Cluster with a name it does not know and no spec.id: taken for removed
    # from git (its records removed), the document blocking no zone
    "a-cluster-whose-name-and-id-cannot-be-read": (
        Case("01-minimal", 0, 0, 0, (SetValue(3, "prod\x00"), SetValue(4, Map([("a", 1)])))),
        ("SchemaViolation", 4)),
    # a Zone's metadata.name no longer a Zone name: the zone it was is missing, the problem
    # holds the zone of the new name (none): the zone's records were removed, then the report failed
    "a-zone-name-that-is-no-name": (
        Case("03-geo-and-custom-weights", 0, 4, 0, (SetValue(3, "shop-exaMple-net"),)), ("SchemaViolation", 4)),
    # a rejected DNSPolicy targeting a gateway no cluster has: its zones read as none
    "a-rejected-policy-targeting-no-gateway": (
        Case("example-repo", 1, 6, 0, (SetValue(6, "web-gx"), SetValue(2, "web"))), ("SchemaViolation", 3)),
    # a Zone renamed and broken in one change (no apiVersion, a new metadata.name): the problem
    # holds the zone of the new name, the zone it was is missing from the revision and was taken
    # for one the cluster left (its records removed); the agent now holds every zone the
    # documents of a broken file touched at the applied revision (`held_as_before`)
    "a-zone-renamed-and-broken": (
        Case("03-geo-and-custom-weights", 0, 104, 0, (SetValue(101, "*.api.shop.example.net"), Drop(0))),
        ("WrongApiVersion", 1)),
    # the agent's own Cluster with a problem a check finds (a geo no provider knows): the zone
    # was held, yet planned with the Cluster as it is now (its records moved to the new geo);
    # a held zone now takes the Cluster as it was in the zone's last good revision
    "a-cluster-with-an-invalid-geo": (
        Case("02-loadbalanced", 0, 3600, 100, (ByteDelete(806, 1),)), ("InvalidGeo", 7)),
    # a NUL in a file: the parser's refusal carried no line (the reader's errors have an offset only)
    "a-nul-byte": (Case("01-minimal", 0, 1, 0, (ByteInsert(40, b"\x00"),)), ("ParseError", 1)),
    "a-c1-control-in-a-crlf-file": (
        Case("01-minimal", 0, 1, 0, (TextInsert(150, "\x86"), FileEdit("crlf"))), ("ParseError", 6)),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_found_by_fuzzing(name: str, tmp_path: Path) -> None:
    case, (code, line) = FOUND[name]
    verdict, mutated = judge(case, tmp_path)
    assert verdict.failures == [], "\n".join(verdict.failures)
    problems = check(texts(mutated.files), load_schemas()).problems
    assert any(p.file == mutated.path and p.code == code and p.line == line for p in problems), [
        p.format() for p in problems]


QUIET = settings(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))


@settings(QUIET, max_examples=VALIDATE_EXAMPLES)
@given(cases(sorted(REPOS)))
def test_mutated_documents_through_validate(tmp_path_factory: pytest.TempPathFactory, case: Case) -> None:
    verdict, _ = judge(case, tmp_path_factory.mktemp("case"), None)
    assert verdict.failures == [], "\n".join(verdict.failures)


@settings(QUIET, max_examples=AGENT_EXAMPLES)
@given(cases(sorted(REPOS)))
def test_mutated_documents_through_an_agent_cycle(tmp_path_factory: pytest.TempPathFactory, case: Case) -> None:
    verdict, _ = judge(case, tmp_path_factory.mktemp("case"))
    assert verdict.failures == [], "\n".join(verdict.failures)


def test_a_broken_file_holds_what_it_was_over_several_broken_heads(tmp_path: Path) -> None:
    """The applied revision moves on to a broken head (its other zones were applied): a second
    broken head of the same file still holds the zone the file's Zone was when it last validated."""
    case, _ = FOUND["a-zone-renamed-and-broken"]
    mutated = apply(case, dict(repo_files(case.repo)), mutable(case.repo))
    broken = texts(mutated.files)
    again = {**broken, mutated.path: broken[mutated.path] + "# still broken\n"}
    stores = Stores("memory", tmp_path / "store")
    source = FakeSource()
    source.commit(texts(repo_files(case.repo)), "the example")
    agent = Agent(AgentConfig(repo="mem://", cluster=clusters(case.repo)[0], state_dir=str(tmp_path / "state")),
                  AgentPorts(source=source, factory=stores.factory, clock=Clock(), rng=random.Random(1)))
    agent.run()
    agent.run()
    before = stores.snapshot()
    assert before["shop.example.net"]
    for files, message in ((broken, "renamed and broken"), (again, "still broken")):
        source.commit(files, message)
        agent.run()
        assert stores.snapshot() == before, message
        assert agent.last_report is not None
        assert [z.held for z in agent.last_report.zones if z.zone == "shop.example.net"] == [True]
