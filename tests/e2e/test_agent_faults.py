"""Faults around real `gitdns agent` processes: the remote going away, kill -9 at random
points, a join/leave race on a shared address, two long-running agents with one cluster id.

Every wait is for a condition with a generous timeout; nothing asserts wall-clock time.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import time
from pathlib import Path

import pytest

from gitdns.core import builder
from gitdns.core.records import RecordKey
from gitdns.core.registry import decode_entry
from gitdns.providers.local import LocalProvider, decode_store
from gitdns.reconcile.engine import load as load_desired
from tests.e2e.agent_kit import AgentProcess, DesiredRepo, agent_cmd, git, run_once
from tests.e2e.faults_kit import (
    CLUSTER_IDS,
    GroupAgent,
    add_record,
    assert_fast_forward_chain,
    cluster_doc,
    conditions,
    data,
    edit_cluster,
    enable_reflog,
    metric,
    set_gateway_addresses,
    store_files,
)

CLUSTERS = ("eu-west-1", "eu-central-1", "us-east-1")
APPLIED = re.compile(r"^zone (\S+): (\d+) change\(s\) applied", re.M)


@pytest.fixture
def repo(tmp_path: Path) -> DesiredRepo:
    return DesiredRepo(tmp_path)


def summary(agent: AgentProcess) -> dict[str, object]:
    doc = agent.status().get("summary.yaml")
    return doc if isinstance(doc, dict) else {}


def once_ok(repo: DesiredRepo, cluster: str, state: Path) -> str:
    done = run_once(repo, cluster, state)
    assert done.returncode == 0, f"{cluster} --once: {done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout


def once_after_crash(repo: DesiredRepo, cluster: str, state: Path, notes: list[str]) -> str:
    """--once for a cluster whose previous agent may have been killed inside a git command: its
    cache may hold that git's lock files, which the restarted source removes at once (nobody
    holds the cache's owner flock any more: gitdns.adapters.git.cache), so it is never refused
    with CacheBusy."""
    out = once_ok(repo, cluster, state)
    notes.append(f"{cluster}: restarted after the crash")
    return out


# --- the remote goes away ------------------------------------------------------------------


def test_remote_disappears_and_comes_back(repo: DesiredRepo, tmp_path: Path) -> None:
    agent = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "1")
    try:
        assert agent.wait(lambda: agent.get("/readyz")[0] == 200, 90), agent.log.read_text()
        before = {z: data(repo, z) for z in ("example.com", "example.org")}
        away = repo.bare.with_name("away.git")
        repo.bare.rename(away)

        # documented: SourceAvailable=False (here RepositoryNotFound: the bare repository was moved
        # away) makes the Ready condition false; /readyz stays 200 (the loaded revision is still
        # served: health withdrawals and the webhook keep working)
        assert agent.wait(lambda: conditions(agent.status()).get("SourceAvailable") == ("False", "RepositoryNotFound"),
                          90), agent.log.read_text()[-3000:]
        assert conditions(agent.status())["Ready"] == ("False", "RepositoryNotFound")
        assert agent.get("/readyz")[0] == 200
        assert agent.get("/healthz")[0] == 200  # alive: the process is fine, only git is gone
        assert agent.wait(lambda: agent.status().get("gitFailures", 0) >= 2, 90)
        assert metric(agent, "gitdns_git_errors_total") >= 2
        assert metric(agent, "gitdns_ready ") == 0
        assert {z: data(repo, z) for z in ("example.com", "example.org")} == before  # nothing deleted

        away.rename(repo.bare)
        sha = add_record(repo, "back", "192.0.2.77")
        assert agent.wait(lambda: RecordKey("back.example.com", "A") in data(repo), 120), agent.log.read_text()[-3000:]
        assert agent.wait(lambda: summary(agent).get("appliedRevision") == sha and agent.get("/readyz")[0] == 200, 90)
        assert conditions(agent.status())["SourceAvailable"][0] == "True"
        assert agent.wait(lambda: agent.status().get("gitFailures") == 0, 30), agent.log.read_text()[-4000:]
    finally:
        assert agent.stop() == 0


def test_remote_loss_shows_in_status_before_the_next_validation(repo: DesiredRepo, tmp_path: Path) -> None:
    # --validate-delay 300: no validation job runs during the test, as in a zone quiet for a while
    agent = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "1", "--validate-delay", "300")
    try:
        assert agent.wait(lambda: agent.get("/readyz")[0] == 200, 90), agent.log.read_text()
        repo.bare.rename(repo.bare.with_name("away.git"))
        # the third failed poll: the runner has handled (and published state after) two already
        assert agent.wait(lambda: agent.status().get("gitFailures", 0) >= 3, 90), agent.log.read_text()[-3000:]
        status = agent.status()
        assert conditions(status).get("SourceAvailable") == ("False", "RepositoryNotFound"), (
            f"gitFailures={status.get('gitFailures')} conditions={conditions(status)}")
        assert metric(agent, "gitdns_ready ") == 0
        assert agent.get("/readyz")[0] == 200  # serving the loaded revision: not a reason to leave the Service
    finally:
        assert agent.stop() == 0


# --- kill -9 at random points --------------------------------------------------------------


def desired_change(repo: DesiredRepo, rng: random.Random, cluster: str, n: int) -> str:
    """Flip this cluster's gateway addresses, or a static record every cluster owns."""
    if rng.random() < 0.25:
        repo.write("records/flip.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n"
                                        "  name: flip\nspec:\n  zone: example-com\n  records:\n"
                                        f"    - {{name: flip, type: A, values: [192.0.2.{n}]}}\n")
        return repo.commit(f"flip static record to .{n}")
    prefix = {"eu-west-1": "192.0.2", "eu-central-1": "198.51.100", "us-east-1": "203.0.113"}[cluster]
    set_gateway_addresses(repo, cluster, "api-gw", [f"{prefix}.{n}", f"{prefix}.{n + 1}"][: 1 + n % 2])
    if cluster != "eu-central-1":
        set_gateway_addresses(repo, cluster, "web-gw", [f"{prefix}.{200 + n}"])
    return repo.commit(f"{cluster}: gateway addresses .{n}")


def wanted(repo: DesiredRepo) -> tuple[dict[str, dict[RecordKey, set[str]]], dict[str, set[tuple[str, RecordKey]]]]:
    """Per zone domain: the union of every cluster's records, and every (owner, key) claimed."""
    state = load_desired(repo.work).state
    union: dict[str, dict[RecordKey, set[str]]] = {}
    owned: dict[str, set[tuple[str, RecordKey]]] = {}
    for zone in state.zones:
        rows = union.setdefault(zone.domain, {})
        claims = owned.setdefault(zone.domain, set())
        for cluster in state.clusters:
            for rec in builder.desired_for_zone(state, cluster, zone):
                rows.setdefault(rec.key, set()).update(rec.values)
                claims.add((cluster.id, rec.key))
    return union, owned


def zone_rows(repo: DesiredRepo, zone: str) -> dict[RecordKey, set[str]]:
    return {k: set(v) for k, v in data(repo, zone).items()}


def ownership(repo: DesiredRepo, zone: str) -> set[tuple[str, RecordKey]]:
    out = set()
    for rec in LocalProvider(repo.zones).read(zone).records:
        entry = decode_entry(rec)
        if entry is not None:
            out.add((entry.owner, entry.key))
    return out


def last_line(path: Path) -> str:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][24:140] if lines else "(no output yet)"


def test_kill_9_at_random_points_converges(repo: DesiredRepo, tmp_path: Path) -> None:
    enable_reflog(repo)
    rng = random.Random(20261123)
    state = {c: tmp_path / c for c in CLUSTERS}
    for cluster in CLUSTERS:
        once_ok(repo, cluster, state[cluster])
    kills: list[str] = []
    for n in range(15):
        cluster = rng.choice(CLUSTERS)
        log = tmp_path / f"round-{n:02d}-{cluster}.log"
        agent = GroupAgent(repo, cluster, state[cluster], "--poll-interval", "0.3", log=log)
        warm = rng.random() < 0.5  # half the kills hit a running agent's cycle, half its start-up
        try:
            if warm:
                assert agent.wait(lambda a=agent: a.status().get("cycles", 0) >= 1, 120), log.read_text()[-3000:]
            desired_change(repo, rng, cluster, 10 + n)
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            agent.kill9()
        kills.append(f"round {n} {cluster} warm={warm}: {last_line(log)}")
        for other in CLUSTERS:
            if other == cluster:
                continue
            once_ok(repo, other, state[other])
        # every cluster that just ran has all of its values in the zone (none lost to the crash)
        current = load_desired(repo.work).state
        for other in (c for c in CLUSTERS if c != cluster):
            member = current.cluster(other)
            assert member is not None
            for zone in builder.zones_for_cluster(current, member):
                rows = zone_rows(repo, zone.domain)
                for rec in builder.desired_for_zone(current, member, zone):
                    assert set(rec.values) <= rows.get(rec.key, set()), (
                        f"round {n}: {other}'s {rec.key} {rec.values} lost: {rows.get(rec.key)}\n" + "\n".join(kills))

    for cluster in CLUSTERS:
        once_after_crash(repo, cluster, state[cluster], kills)
    for cluster in CLUSTERS:
        out = once_ok(repo, cluster, state[cluster])
        applied = APPLIED.findall(out)
        assert applied and all(count == "0" for _, count in applied), f"{cluster} second run: {out}"

    union, owned = wanted(repo)
    for zone, rows in union.items():
        assert zone_rows(repo, zone) == rows, f"{zone} is not the union every cluster wants\n" + "\n".join(kills)
        assert ownership(repo, zone) == owned[zone], f"{zone}: ownership TXT differ from the claims"
    for path in store_files(repo.zones):
        doc = path.read_bytes()
        json.loads(doc)  # valid JSON, not half-written
        decode_store(path, doc, path.name[: -len(".json")])
    assert not list(repo.zones.glob(".*.tmp-*")), "a temp file of a crashed write is still there"
    for cluster in CLUSTERS:
        assert_fast_forward_chain(repo, f"gitdns-status/{CLUSTER_IDS[cluster]}")
    print("\n".join(kills))


# --- join/leave race on a shared address ---------------------------------------------------

SHARED_POLICY = """apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata:
  name: shared
spec:
  targetRef:
    gateway: shared-gw
  strategy: simple
"""
SHARED = RecordKey("shared.example.com", "A")
STAY = "192.0.2.50"


def edge(n: int) -> tuple[str, str, str]:
    """(name, id, address) of the n-th edge cluster."""
    return f"edge-{n}", f"0e0e0e0e-0000-4000-8000-{n:012d}", f"198.51.100.{60 + n}"


def edge_doc(n: int) -> str:
    name, ident, address = edge(n)
    return cluster_doc(name, ident, "GEO-EU", [{"name": "shared-gw", "namespace": "edge", "addresses": [address],
                                                "listeners": [{"hostname": "shared.example.com"}]}])


def shared_setup(repo: DesiredRepo, tmp_path: Path) -> None:
    """eu-west-1 and edge-0 both publish shared.example.com (simple policy)."""
    repo.write("policies/shared.yaml", SHARED_POLICY)
    gateway = {"name": "shared-gw", "namespace": "edge", "addresses": [STAY],
               "listeners": [{"hostname": "shared.example.com"}]}
    edit_cluster(repo, "eu-west-1", lambda doc: doc["spec"]["gateways"].append(gateway))
    repo.write("clusters/edge-0.yaml", edge_doc(0))
    repo.commit("shared.example.com: eu-west-1 and edge-0")
    once_ok(repo, "eu-west-1", tmp_path / "eu-west-1")
    once_ok(repo, "edge-0", tmp_path / "edge-0")
    assert set(data(repo)[SHARED]) == {STAY, edge(0)[2]}


def swap(repo: DesiredRepo, leaver: int, joiner: int) -> str:
    (repo.work / "clusters" / f"edge-{leaver}.yaml").unlink()
    repo.write(f"clusters/edge-{joiner}.yaml", edge_doc(joiner))
    return repo.commit(f"edge-{leaver} leaves, edge-{joiner} joins")


def owners_of(repo: DesiredRepo, key: RecordKey) -> set[str]:
    return {owner for owner, k in ownership(repo, "example.com") if k == key}


def test_join_leave_race_on_a_shared_address(repo: DesiredRepo, tmp_path: Path) -> None:
    """The leaver runs as it is deployed (a long-running agent that saw itself in git); the
    joiner starts with --once at the same moment the commit lands."""
    shared_setup(repo, tmp_path)
    rng = random.Random(7)
    for leaver in range(4):
        joiner = leaver + 1
        agent = AgentProcess(repo, f"edge-{leaver}", tmp_path / f"edge-{leaver}", "--poll-interval", "0.2")
        try:
            assert agent.wait(lambda a=agent: a.get("/readyz")[0] == 200, 90), agent.log.read_text()[-3000:]
            sha = swap(repo, leaver, joiner)
            time.sleep(rng.uniform(0.0, 0.6))
            once_ok(repo, f"edge-{joiner}", tmp_path / f"edge-{joiner}")
            assert agent.wait(lambda a=agent, s=sha: summary(a).get("appliedRevision") == s, 90), (
                agent.log.read_text()[-3000:])
        finally:
            assert agent.stop() == 0
        values = set(data(repo)[SHARED])
        assert values == {STAY, edge(joiner)[2]}, f"repetition {leaver}: {values}\n{agent.log.read_text()[-3000:]}"
        assert owners_of(repo, SHARED) == {CLUSTER_IDS["eu-west-1"], edge(joiner)[1]}


def test_join_leave_race_with_once_agents(repo: DesiredRepo, tmp_path: Path) -> None:
    shared_setup(repo, tmp_path)
    for leaver in range(3):
        joiner = leaver + 1
        swap(repo, leaver, joiner)
        procs = [subprocess.Popen([*agent_cmd(repo, name, tmp_path / name, "--once", "--listen", "")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for name in (edge(leaver)[1], f"edge-{joiner}")]  # the leaver by id: its name is gone
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], "\n---\n".join(o[-2500:] for o in outs)
        values = set(data(repo)[SHARED])
        assert values == {STAY, edge(joiner)[2]}, f"repetition {leaver}: {values}\n{outs[0]}"


# --- two long-running agents with one cluster id -------------------------------------------


def test_two_long_running_agents_with_one_cluster_id(repo: DesiredRepo, tmp_path: Path) -> None:
    first = AgentProcess(repo, "eu-west-1", tmp_path / "a", "--poll-interval", "1")
    second: AgentProcess | None = None
    try:
        assert first.wait(lambda: first.get("/readyz")[0] == 200, 90), first.log.read_text()
        second = AgentProcess(repo, "eu-west-1", tmp_path / "b", "--poll-interval", "1")
        waiting = second
        assert waiting.wait(lambda: conditions(waiting.status()).get("LeaseHeld") == ("False", "LeaseHeldByAnother"),
                            90), waiting.log.read_text()[-3000:]
        lease = next(c for c in summary(waiting)["conditions"] if c["type"] == "LeaseHeld")  # type: ignore[union-attr]
        assert "held by" in lease["message"]
        assert waiting.get("/readyz")[0] == 503
        assert conditions(waiting.status())["Ready"] == ("False", "LeaseHeldByAnother")

        sha = add_record(repo, "while-first", "192.0.2.81")  # the holder applies it; the waiter does not write
        assert first.wait(lambda: summary(first).get("appliedRevision") == sha, 90)
        assert conditions(waiting.status()).get("LeaseHeld") == ("False", "LeaseHeldByAnother")

        assert first.stop() == 0  # SIGTERM releases the lease
        sha = add_record(repo, "after-first", "192.0.2.82")
        assert waiting.wait(lambda: RecordKey("after-first.example.com", "A") in data(repo), 120), (
            waiting.log.read_text()[-3000:])
        assert waiting.wait(lambda: conditions(waiting.status()).get("LeaseHeld") == ("True", "LeaseAcquired")
                            and summary(waiting).get("appliedRevision") == sha, 90)
        assert waiting.get("/readyz")[0] == 200
    finally:
        first.stop()
        if second is not None:
            assert second.stop() == 0


# --- a commit that breaks the agent's own Cluster file -------------------------------------


def test_broken_own_cluster_file_is_not_ready(repo: DesiredRepo, tmp_path: Path) -> None:
    once_ok(repo, "eu-west-1", tmp_path / "a")
    before = data(repo)
    path = repo.work / "clusters" / "eu-west-1.yaml"
    path.write_text(path.read_text().replace("    namespace: ingress\n", "", 1))
    repo.commit("eu-west-1: api-gw without its namespace (invalid)")
    done = run_once(repo, "eu-west-1", tmp_path / "a")
    assert data(repo) == before  # this part holds: nothing is changed
    branches = git("branch", "--list", "gitdns-status/*", cwd=repo.bare).split()
    assert (done.returncode, "NotReady" in done.stdout) == (1, True), done.stdout
    assert "gitdns-status/eu-west-1" not in branches, branches
