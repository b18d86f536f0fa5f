"""Delegation through git: remotes report, primaries merge and publish."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitdns.agent.modes import choose
from gitdns.core.model import Mode
from gitdns.core.records import RecordKey
from gitdns.core.status.doc import StatusTree
from gitdns.core.status.doc import load as load_yaml
from tests.agent.delegation_kit import POLL, Fleet, base_files, cluster_doc

APP = RecordKey("app.example.com", "A")
SOLO = RecordKey("solo1.example.com", "A")


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    f = Fleet(tmp_path)
    f.source.commit(base_files(), "initial")
    return f


def run(fleet: Fleet, *names: str) -> None:
    for name in names:
        fleet.agents[name].run()


def start(fleet: Fleet) -> None:
    for name in ("r1", "r2"):
        fleet.agent(name, remote=True)
    for name in ("p1", "p2"):
        fleet.agent(name)
    run(fleet, "r1", "r2", "p1", "p2")


def condition(fleet: Fleet, name: str, ctype: str) -> tuple[bool, str, str]:
    report = fleet.agents[name].last_report
    assert report is not None
    found = [c for c in report.conditions if c.type == ctype]
    assert found, [c.type for c in report.conditions]
    return found[0].status, found[0].reason, found[0].message


def test_remote_reports_endpoints_and_builds_no_provider(fleet: Fleet) -> None:
    agent = fleet.agent("r1", remote=True)  # its factory fails the test if called
    agent.run()
    tree = fleet.hub.trees["id-r1"]
    summary = load_yaml(tree.files["summary.yaml"])
    assert summary["mode"] == "remote" and summary["pollInterval"] == POLL
    doc = load_yaml(tree.files["zones/example.com.yaml"])
    assert {(e["name"], tuple(e["values"])) for e in doc["endpoints"]} == {
        ("app.example.com", ("10.0.0.1",)), ("solo1.example.com", ("10.0.0.1",))}
    assert condition(fleet, "r1", "Delegation")[1] == "DelegatedToPrimaries"


def test_primaries_merge_every_remote_into_one_record_set(fleet: Fleet) -> None:
    start(fleet)
    assert fleet.data()[APP] == ("10.0.0.1", "10.0.0.2")
    assert fleet.data()[SOLO] == ("10.0.0.1",)
    owners = {r.values[0] for r in fleet.zone.read("example.com").records if r.type == "TXT"}
    assert any("id-p1" in v for v in owners) and any("id-p2" in v for v in owners)
    assert not any("id-r1" in v for v in owners)  # remotes never own anything in the zone
    status, reason, message = condition(fleet, "p1", "Delegation")
    assert status and reason == "RemotesMerged" and "id-r1" in message and "id-r2" in message
    doc = load_yaml(fleet.hub.trees["id-p1"].files["zones/example.com.yaml"])
    assert doc["delegation"]["id-r1"]["state"] == "merged" and doc["delegation"]["id-r1"]["accepted"] == 2


def test_idle_primary_plans_nothing(fleet: Fleet) -> None:
    start(fleet)
    fleet.clock.advance(1)
    calls_before = len(fleet.zone.read("example.com").records)
    changes = fleet.agents["p1"].run()
    assert changes.outcomes == [] and len(fleet.zone.read("example.com").records) == calls_before


def test_a_remote_claim_outside_its_cluster_is_refused_alone(fleet: Fleet) -> None:
    start(fleet)
    tree = fleet.hub.trees["id-r2"]
    doc = load_yaml(tree.files["zones/example.com.yaml"])
    forged = tree.files["zones/example.com.yaml"].replace(
        "endpoints:\n", "endpoints:\n  - name: evil.example.com\n    ttl: 60\n    type: A\n    values:\n"
        "      - 6.6.6.6\n", 1)
    assert forged != tree.files["zones/example.com.yaml"] and doc["endpoints"]
    forged = forged.replace("      - 10.0.0.2", "      - 10.0.0.2\n      - 10.9.9.9", 1)
    fleet.hub.trees["id-r2"] = StatusTree("forged", {**tree.files, "zones/example.com.yaml": forged})
    run(fleet, "p1")
    data = fleet.data()
    assert RecordKey("evil.example.com", "A") not in data
    assert "10.9.9.9" not in data[APP]
    assert data[APP] == ("10.0.0.1",)  # r2's app record was refused whole (an undeclared value), r1's stays
    status, reason, message = condition(fleet, "p1", "Delegation")
    assert not status and reason == "RemoteRecordsRefused" and "id-r2" in message


def test_a_remote_removed_from_git_loses_its_values_and_nothing_else(fleet: Fleet) -> None:
    start(fleet)
    files = base_files()
    del files["clusters/r2.yaml"]
    fleet.source.commit(files, "remove r2")
    run(fleet, "r1", "p1", "p2")
    assert fleet.data()[APP] == ("10.0.0.1",)
    assert fleet.data()[SOLO] == ("10.0.0.1",)


def test_a_silent_remote_goes_stale_but_never_leaves_a_host_empty(fleet: Fleet) -> None:
    start(fleet)
    for _ in range(8):  # r1 keeps polling, r2 went silent
        fleet.clock.advance(POLL)
        run(fleet, "r1", "p1", "p2")
    assert fleet.data()[APP] == ("10.0.0.1",)
    status, reason, message = condition(fleet, "p1", "Delegation")
    assert not status and reason == "RemotesStale" and "id-r2" in message
    for _ in range(8):  # now r1 is silent too: its solo host has no one else, so it stays (fail open)
        fleet.clock.advance(POLL)
        run(fleet, "p1", "p2")
    data = fleet.data()
    assert data[SOLO] == ("10.0.0.1",)
    assert data[APP] == ("10.0.0.1",)  # every contributor stale: the last path stays


def test_one_primary_dead_the_other_keeps_the_zone_right(fleet: Fleet) -> None:
    start(fleet)
    files = base_files()
    files["clusters/r2.yaml"] = cluster_doc("r2", "remote", ["10.0.0.2"], ())  # r2 withdraws app
    fleet.source.commit(files, "r2 leaves app")
    run(fleet, "r2", "p2")  # p1 is dead: its claim on 10.0.0.2 must not keep the value published
    assert fleet.data()[APP] == ("10.0.0.1",)


def test_inactive_group_is_not_published(fleet: Fleet) -> None:
    files = base_files()
    files["clusters/r1.yaml"] = cluster_doc("r1", "remote", ["10.0.0.1"], ("app.example.com",), group="a")
    files["clusters/r2.yaml"] = cluster_doc("r2", "remote", ["10.0.0.2"], ("app.example.com",), group="b")
    files["groups/example.yaml"] = ("apiVersion: gitdns.io/v1alpha1\nkind: ActiveGroups\nmetadata: {name: g}\n"
                                    "spec: {zone: example-com, serial: 1, groups: [a]}\n")
    fleet.source.commit(files, "groups")
    start(fleet)
    assert fleet.data()[APP] == ("10.0.0.1",)
    doc = load_yaml(fleet.hub.trees["id-p1"].files["zones/example.com.yaml"])
    assert doc["delegation"]["id-r2"]["state"] == "inactive"


def test_mode_override_is_reported(fleet: Fleet) -> None:
    agent = fleet.agent("r1", remote=True, mode="remote")
    files = base_files()
    files["clusters/r1.yaml"] = cluster_doc("r1", "default", ["10.0.0.1"], ("app.example.com",))
    fleet.source.commit(files, "r1 default in git")
    agent.run()
    status, reason, message = condition(fleet, "r1", "ModeMatchesGit")
    assert not status and reason == "ModeOverridden" and "git says default" in message
    assert load_yaml(fleet.hub.trees["id-r1"].files["summary.yaml"])["mode"] == "remote"


def test_mode_precedence() -> None:
    git = Mode.DEFAULT
    assert choose(configured="primary", env={"DNS_MODE": "remote"}, configmap=lambda: "remote",
                  git_mode=git).mode is Mode.PRIMARY
    assert choose(configured="", env={"DNS_MODE": "remote"}, configmap=lambda: "primary",
                  git_mode=git).mode is Mode.REMOTE
    picked = choose(configured="", env={}, configmap=lambda: "primary", git_mode=git)
    assert picked.mode is Mode.PRIMARY and "ConfigMap" in picked.source
    assert choose(configured="", env={}, configmap=lambda: None, git_mode=Mode.REMOTE).source == "git"
    with pytest.raises(Exception, match="not a mode"):
        choose(configured="", env={"DNS_MODE": "secondary"}, git_mode=git)


def test_remote_heartbeat_moves_every_two_polls(fleet: Fleet) -> None:
    agent = fleet.agent("r1", remote=True)
    agent.run()
    first = fleet.hub.trees["id-r1"].files["summary.yaml"]
    fleet.clock.advance(2 * POLL)
    agent.run()
    second = fleet.hub.trees["id-r1"].files["summary.yaml"]
    assert load_yaml(second)["heartbeat"] > load_yaml(first)["heartbeat"]


def test_status_shows_which_primaries_carry_each_remote(fleet: Fleet) -> None:
    from gitdns.commands.status.view import aggregate, to_text

    start(fleet)
    agg = aggregate(fleet.hub.trees)
    assert agg["clusters"]["id-r1"]["carriedBy"] == ["id-p1", "id-p2"]
    for _ in range(8):  # r2 goes silent: both primaries withdraw it
        fleet.clock.advance(POLL)
        run(fleet, "r1", "p1", "p2")
    agg = aggregate(fleet.hub.trees)
    assert agg["clusters"]["id-r2"]["carriedBy"] == []
    assert agg["clusters"]["id-r2"]["notCarriedBy"] == {"id-p1": ["stale"], "id-p2": ["stale"]}
    text = to_text(agg)
    assert "CARRIED BY" in text and "p1 (stale)" in text


def test_a_remote_without_any_primary_in_git_says_so(fleet: Fleet) -> None:
    files = base_files()
    del files["clusters/p1.yaml"], files["clusters/p2.yaml"]
    fleet.source.commit(files, "no primaries")
    fleet.agent("r1", remote=True).run()
    status, reason, _ = condition(fleet, "r1", "Delegation")
    assert not status and reason == "NoPrimaryInGit"


def test_a_cluster_turned_remote_leaves_no_old_claim_behind(fleet: Fleet) -> None:
    files = base_files()
    files["clusters/r1.yaml"] = cluster_doc("r1", "default", ["10.0.0.1"], ("app.example.com", "solo1.example.com"))
    fleet.source.commit(files, "r1 publishes itself")
    fleet.agent("r1-default", cluster="r1")  # a default-mode agent of cluster r1, writing the zone
    fleet.agents["r1-default"].run()
    assert fleet.data()[SOLO] == ("10.0.0.1",)
    fleet.source.commit(base_files(), "r1 becomes a remote")
    start(fleet)
    owners = " ".join(v for r in fleet.zone.read("example.com").records if r.type == "TXT" for v in r.values)
    assert "id-r1" not in owners  # the primaries pruned r1's own claims once they carried its records
    assert fleet.data()[SOLO] == ("10.0.0.1",)
    files = base_files()
    files["clusters/r1.yaml"] = cluster_doc("r1", "remote", ["10.0.0.1"], ("app.example.com",))
    fleet.source.commit(files, "r1 drops solo1")
    run(fleet, "r1", "p1", "p2")
    assert SOLO not in fleet.data()


def test_a_primary_with_a_broken_cluster_document_keeps_publishing_for_its_remotes(fleet: Fleet) -> None:
    start(fleet)
    files = base_files()
    files["clusters/p1.yaml"] = files["clusters/p1.yaml"].replace("mode: primary", "mode: chief")
    files["clusters/p2.yaml"] = files["clusters/p2.yaml"].replace("mode: primary", "mode: chief")
    fleet.source.commit(files, "a typo in both primaries")
    run(fleet, "p1", "p2")
    assert fleet.data()[APP] == ("10.0.0.1", "10.0.0.2")  # held: nothing withdrawn


def test_a_primary_removed_from_git_stops_publishing_for_others(fleet: Fleet) -> None:
    start(fleet)
    files = base_files()
    del files["clusters/p1.yaml"]
    fleet.source.commit(files, "retire p1")
    run(fleet, "p1")
    owners = " ".join(v for r in fleet.zone.read("example.com").records if r.type == "TXT" for v in r.values)
    assert "external-dns/owner=id-p1" not in owners
    assert fleet.data()[APP] == ("10.0.0.1", "10.0.0.2")  # p2 still carries everything


def test_a_remote_removed_from_git_stays_a_remote(fleet: Fleet) -> None:
    start(fleet)  # r1's factory fails the test if it ever builds a provider
    files = base_files()
    del files["clusters/r1.yaml"]
    fleet.source.commit(files, "remove r1")
    run(fleet, "r1", "p1", "p2")
    assert load_yaml(fleet.hub.trees["id-r1"].files["summary.yaml"])["mode"] == "remote"
    assert SOLO not in fleet.data()
