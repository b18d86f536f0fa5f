"""`groups get --format json` and `failover simulate --format json`: each document parses, and
every field says what the text says — for a level zone, a pending switch, a zone ahead of git
after a break-glass switch (diverged, and unknown when origin cannot be fetched), and a switch
that removes endpoints (from the zone, and with ``--base``, from git alone)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitdns.commands import EXIT_OK
from gitdns.commands.failover import ABSENT_CAVEAT, Endpoint
from gitdns.commands.groups.check import show
from tests.commands.test_failover import A_IPS, B_IPS, story  # noqa: F401  (a fixture, used by name)
from tests.commands.test_groups import run
from tests.commands.test_groups_fleet import (
    CLUSTERS,
    SIMULATE,
    SITE_A_API,
    STATUS_REFSPEC,
    Fleet,
    _git_identity,
    built,
    fleet,
    git,
)

__all__ = ["_git_identity", "built", "fleet"]  # the fixtures this module shares

Doc = dict[str, Any]


def both(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[list[str], Doc]:
    """The text lines and the JSON document of one command line."""
    code, out, err = run(capsys, *argv)
    assert code == EXIT_OK, err
    code, data, err = run(capsys, *argv, "--format", "json")
    assert code == EXIT_OK, err
    return out.splitlines(), json.loads(data)


def endpoint_line(sign: str, point: Doc) -> str:
    return f"{sign} " + Endpoint(point["name"], point["type"], point.get("setIdentifier", ""), point["value"],
                                 point["ttl"], point.get("weight"), point.get("geo")).line()


def endpoint_lines(endpoints: Doc) -> list[str]:
    """The text's endpoint lines, rebuilt from the JSON."""
    added, removed = endpoints["added"], endpoints["removed"]
    head = (f"endpoints added: {len(added)}, removed: {len(removed)}"
            + (f", changed: {len(endpoints['changed'])}" if endpoints["changed"] else "")
            + (f" ({endpoints['caveat']})" if endpoints["caveat"] else ""))
    return [head, *(endpoint_line("+", e) for e in added), *(endpoint_line("-", e) for e in removed)]


def get_lines(doc: Doc) -> list[str]:
    """The text of `groups get`, rebuilt from its JSON (the lines both can say)."""
    git_side, txt, decision = doc["git"], doc["zoneTxt"], doc["decision"]
    lines = [f"zone {doc['zone']} ({doc['zoneName']})"]
    if git_side["fetchError"]:
        error = git_side["fetchError"]
        lines.insert(0, f"git: origin NOT fetched ({error['message']} ({error['reason']})): judging from the local "
                        f"checkout at {git_side['sha'][:7]}, which may be behind origin")
    elif git_side["ref"] is not None:
        lines.insert(0, f"git: {git_side['ref']} at {git_side['sha'][:7]}"
                        + (" (fetched now)" if git_side["ref"] != "HEAD" else ""))
    doc_ = git_side["activeGroups"]
    lines.append(f"git: ActiveGroups {doc_['name']} ({doc_['file']}): serial {doc_['serial']}, "
                 f"groups {show(doc_['groups'])}")
    if not txt["readable"]:
        return [*lines, f"zone: not readable: {txt['error']}"]
    gitdns, kuadrant = txt["gitdns"], txt["kuadrant"]
    gitdns_part = ("absent" if gitdns["groups"] is None
                   else f"serial {gitdns['serial']}, groups {show(gitdns['groups'])}")
    kuadrant_part = "absent" if kuadrant["groups"] is None else show(kuadrant["groups"])
    lines.append(f"zone: {gitdns['name']}: {gitdns_part}; {kuadrant['name']}: {kuadrant_part}")
    state = decision["state"]
    lines.append(f"{state.upper() if state in ('diverged', 'unknown') else state}: {decision['message']}")
    lines += [f"warning: {w}" for w in doc["warnings"]]
    lines += [f"note: {n}" for n in doc["notes"]]
    lines.append(f"active now: {show(doc['active'])}")
    if doc["converge"] is not None:
        lines += [f"note: {n}" for n in doc["converge"]["health"]]
        lines += endpoint_lines(doc["converge"])
    return lines


def says_the_same(text: list[str], doc: Doc) -> None:
    for line in get_lines(doc):
        assert line in text, (line, text)
    heading = "still to converge (what the agents will add and remove):"
    assert len(text) == len(get_lines(doc)) + (heading in text)  # nothing else
    assert (heading in text) == (doc["converge"] is not None)


def get(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], Doc]:
    return both(capsys, "groups", "get", "example.com", "--repo", str(fleet.work), "--store-dir", str(fleet.store))


# -- groups get -----------------------------------------------------------------------------------------


def test_get_a_level_zone(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    text, doc = get(fleet, capsys)
    says_the_same(text, doc)
    head = git("rev-parse", "HEAD", cwd=fleet.work)
    assert doc["git"] == {"ref": "HEAD", "sha": head, "origin": True, "fetched": True, "fetchError": None,
                          "activeGroups": {"name": "example-com-groups", "file": "groups/example-com.yaml",
                                           "serial": 1, "groups": ["site-a", "site-b"]}}
    assert doc["zoneTxt"] == {
        "readable": True, "error": None,
        "gitdns": {"name": "gitdns-active-groups.example.com", "serial": 1, "groups": ["site-a", "site-b"]},
        "kuadrant": {"name": "kuadrant-active-groups.example.com", "groups": ["site-a", "site-b"]}}
    assert doc["decision"] == {"state": "level", "serial": 1, "gitSerial": 1, "message": "the zone mirrors git"}
    assert doc["active"] == ["site-a", "site-b"] and doc["warnings"] == [] and doc["notes"] == []
    converge = doc["converge"]
    assert (converge["added"], converge["removed"], converge["changed"], converge["caveat"]) == ([], [], [], None)
    assert "level: the zone mirrors git" in text and "endpoints added: 0, removed: 0" in text


def test_get_a_pending_switch(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(fleet.work),
                       "--store-dir", str(fleet.store), "--push")
    assert code == EXIT_OK, err
    git("push", "-q", "origin", "gitdns/groups-example-com-2:main", cwd=fleet.work)  # merged; no agent ran yet
    text, doc = get(fleet, capsys)
    says_the_same(text, doc)
    merged = git("rev-parse", "origin/main", cwd=fleet.work)
    assert (doc["git"]["ref"], doc["git"]["sha"], doc["git"]["fetched"]) == ("origin/main", merged, True)
    assert f"git: origin/main at {merged[:7]} (fetched now)" in text
    assert doc["git"]["activeGroups"]["serial"] == 2 and doc["git"]["activeGroups"]["groups"] == ["site-b"]
    assert doc["zoneTxt"]["gitdns"]["serial"] == 1
    assert doc["decision"] == {"state": "pending", "serial": 2, "gitSerial": 2,
                               "message": "agents will mirror git's serial 2 into the zone"}
    assert doc["active"] == ["site-b"] and "active now: site-b" in text
    removed = doc["converge"]["removed"]
    assert {e["value"] for e in removed if e["type"] == "A"} == set(SITE_A_API) and len(removed) == 3
    assert doc["converge"]["added"] == [] and "endpoints added: 0, removed: 3" in text


def test_get_a_zone_ahead_of_git(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "groups", "set", "example.com", "site-b", "--direct", "--repo", str(fleet.work),
                       "--store-dir", str(fleet.store))
    assert code == EXIT_OK, err  # break-glass: the zone holds serial 2, git still 1
    text, doc = get(fleet, capsys)
    says_the_same(text, doc)
    decision = doc["decision"]
    assert (decision["state"], decision["serial"], decision["gitSerial"]) == ("diverged", 2, 1)
    assert doc["decision"]["message"].startswith("the zone is ahead of git (serial 2 > 1)")
    assert next(line for line in text if line.startswith("DIVERGED: ")) == f"DIVERGED: {doc['decision']['message']}"
    assert doc["zoneTxt"]["gitdns"] == {"name": "gitdns-active-groups.example.com", "serial": 2, "groups": ["site-b"]}
    assert doc["zoneTxt"]["kuadrant"]["groups"] == ["site-b"]
    assert doc["active"] == ["site-b"]
    # origin out of reach: the same zone is UNKNOWN, judged from the checkout
    git("remote", "set-url", "origin", str(fleet.root / "gone.git"), cwd=fleet.work)
    text, doc = get(fleet, capsys)
    says_the_same(text, doc)
    assert doc["git"]["origin"] and not doc["git"]["fetched"] and doc["git"]["fetchError"]["reason"]
    assert doc["decision"]["state"] == "unknown" and text[0].startswith("git: origin NOT fetched (")


def test_get_a_zone_that_cannot_be_read(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    linked = fleet.root / "linked"  # a store whose zones directory is a link: the local store refuses it
    (linked / ".gitdns").mkdir(parents=True)
    (linked / ".gitdns" / "zones").symlink_to(fleet.store / ".gitdns" / "zones")
    text, doc = both(capsys, "groups", "get", "example.com", "--repo", str(fleet.work), "--store-dir", str(linked))
    assert doc["zoneTxt"]["readable"] is False and doc["zoneTxt"]["error"]
    says_the_same(text, doc)
    assert text[-1] == f"zone: not readable: {doc['zoneTxt']['error']}"
    assert doc["zoneTxt"]["gitdns"] is None and doc["decision"] is None and doc["active"] is None
    assert doc["converge"] is None and doc["git"]["activeGroups"]["serial"] == 1


# -- failover simulate ---------------------------------------------------------------------------------


def simulate_says_the_same(text: list[str], doc: Doc) -> None:
    assert text[0] == (f"zone {doc['zone']}: active groups {show(doc['groupsBefore'])} -> "
                       f"{show(doc['groupsAfter'])} (serial {doc['serialAfter']})")
    assert text[1] == f"publishing after the switch: {', '.join(doc['publishing']) or 'no cluster'}"
    assert text[2] == f"publishing nothing (inactive groups): {', '.join(doc['silent']) or 'none'}"
    notes = [f"note: {n}" for n in doc["notes"]]
    assert text[3:3 + len(notes)] == notes
    endpoints = endpoint_lines(doc["endpoints"])
    assert text[3 + len(notes):3 + len(notes) + len(endpoints)] == endpoints
    headlines = [line for line in text if line.startswith(f"zone {doc['zone']} ")]
    assert len(headlines) == len(doc["plans"])
    for line, plan in zip(headlines, doc["plans"], strict=True):
        assert f" cluster {plan['cluster']} ({plan['owner']}): " in line
        assert plan["step"].split(" (pass ")[0] == plan["cluster"]
    after = doc["after"]
    assert f"zone {after['zone']}: {len(after['records'])} record set(s)" in text


def test_simulate_removing_site_a(story: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    text, doc = both(capsys, "failover", "simulate", "example.com", "--to", "site-b", "--repo", str(story))
    simulate_says_the_same(text, doc)
    assert (doc["zone"], doc["zoneName"], doc["base"]) == ("example.com", "example-com", None)
    assert (doc["groupsBefore"], doc["groupsAfter"], doc["serialAfter"]) == (["site-a"], ["site-b"], 2)
    assert sorted(doc["publishing"]) == ["b-1", "b-2"] and sorted(doc["silent"]) == ["a-1", "a-2"]
    assert {e["value"] for e in doc["endpoints"]["removed"]} == A_IPS
    assert {e["value"] for e in doc["endpoints"]["added"]} == B_IPS
    assert doc["endpoints"]["removed"][0] == {"name": "api.example.com", "type": "A", "ttl": 60, "value": "192.0.2.1"}
    assert any(p["authority"] == "inactive-groups" for p in doc["plans"])
    assert all(p["pass"] >= 1 and not p["stalled"] for p in doc["plans"])
    api = next(r for r in doc["after"]["records"] if r["name"] == "api.example.com" and r["type"] == "A")
    assert set(api["values"]) == B_IPS and set(api["owners"]) == {"b-1", "b-2"}


def test_simulate_on_the_fleet_with_its_notes(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    text, doc = both(capsys, *SIMULATE, "--repo", str(fleet.work))  # the clone's own store holds no zone
    simulate_says_the_same(text, doc)
    assert doc["endpoints"]["caveat"] == ABSENT_CAVEAT and "holds no zone example.com" in doc["notes"][0]
    git("fetch", "-q", "origin", STATUS_REFSPEC, cwd=fleet.work)
    text, doc = both(capsys, *SIMULATE, "--repo", str(fleet.work), "--store-dir", str(fleet.store))
    simulate_says_the_same(text, doc)
    assert doc["endpoints"]["caveat"] is None and doc["endpoints"]["added"] == []
    assert {e["value"] for e in doc["endpoints"]["removed"] if e["type"] == "A"} == set(SITE_A_API)
    assert {p["owner"] for p in doc["plans"]} == set(CLUSTERS.values())


def test_simulate_with_base(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    text, doc = both(capsys, *SIMULATE, "--repo", str(fleet.work), "--base", "HEAD")
    simulate_says_the_same(text, doc)
    assert doc["base"] == "HEAD"
    assert any(n.startswith("compared with HEAD (") for n in doc["notes"]), doc["notes"]
    assert doc["endpoints"]["caveat"] is None  # built from git: no store read, nothing absent
    assert {e["value"] for e in doc["endpoints"]["removed"] if e["type"] == "A"} == set(SITE_A_API)
