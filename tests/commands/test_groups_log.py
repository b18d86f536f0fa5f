"""`gitdns groups log ZONE`: every switch of a zone's active groups — who made it (author, pull
request, merger), when it reached main, the health gate's answer as the status branches stood
then, when each cluster applied it (and the serial its groups.yaml reported) — and a break-glass
``--direct`` switch, which only the status branches show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands.groups.log import NO_ZONE, Groups, GroupsLog, groups_log
from gitdns.commands.groups.log import fmt as grouplogfmt
from gitdns.commands.groups.verbs import Request, run
from gitdns.core.status.doc import dump
from gitdns.errors import ConfigError
from tests.commands.test_history import EPOCH, IDS, Repo, git
from tests.commands.test_history_audit import _mktree

GROUPS = "groups/example-com.yaml"
HOUR = 3600
EU_WEST_TARGETS = ("api.example.com|192.0.2.10", "api.example.com|192.0.2.11")  # eu-west-1 (group site-a)


def _groups(text: str, serial: int, groups: str) -> str:
    return text.replace("serial: 1", f"serial: {serial}").replace("[site-a, site-b]", groups)


def _status(r: Repo, cluster: str, applied: str, parent: str, when: int, serial: int, groups: list[str],
            diverged: bool = False, unhealthy: tuple[str, ...] = ()) -> str:
    """A status-branch commit as the agent writes it: summary.yaml, health.yaml (``unhealthy``
    down, eu-west-1's other targets up) and groups.yaml (what it applied to example.com)."""
    cid = IDS[cluster]
    targets = {t: {"state": "unhealthy" if t in unhealthy else "healthy"}
               for t in (EU_WEST_TARGETS if cluster == "eu-west-1" else ())}
    files = {"summary.yaml": dump({"cluster": cluster, "clusterId": cid, "appliedRevision": applied, "ready": True}),
             "health.yaml": dump({"targets": targets}),
             "groups.yaml": dump({"zones": {"example.com": {"activeGroups": groups, "serial": serial,
                                                            "diverged": diverged, "active": True}}})}
    listing = []
    for rel, text in files.items():
        path = r.work.parent / f"blob-{cluster}-{when}-{rel}"
        path.write_text(text)
        listing.append(f"100644 blob {git('hash-object', '-w', str(path), cwd=r.bare)}\t{rel}")
    tree = _mktree(r, "\n".join(sorted(listing, key=lambda line: line.split("\t")[1])) + "\n")
    env = {"GIT_AUTHOR_NAME": "gitdns", "GIT_AUTHOR_EMAIL": "gitdns@localhost", "GIT_COMMITTER_NAME": "gitdns",
           "GIT_COMMITTER_EMAIL": "gitdns@localhost", "GIT_AUTHOR_DATE": f"@{when} +0000",
           "GIT_COMMITTER_DATE": f"@{when} +0000"}
    sha = git("commit-tree", tree, "-m", f"status({cluster}): Ready {applied[:7]}", *(["-p", parent] if parent else []),
              cwd=r.bare, env=env)
    git("update-ref", f"refs/heads/gitdns-status/{cid}", sha, cwd=r.bare)
    return sha


@pytest.fixture(scope="module")
def switched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    """main: initial (1h, serial 1 [site-a, site-b]); Bob's failover to site-b (serial 2, written at
    2h) merged by Carol as PR #7 at 3h; Dave's restore of both sites (serial 3) pushed at 6h, while
    every health-checked target of eu-west-1 (site-a) was down (since 4h; up again at 7h); a
    break-glass ``--direct`` switch to site-b (serial 4) first reported by us-east-1 at 8h, recorded
    in git by Erin's reconcile at 9h.  eu-west-1 and us-east-1 publish their status."""
    r = Repo(tmp_path_factory.mktemp("groups-log"))
    good = r.read(GROUPS)
    s = {"initial": r.commit("Alice", "initial desired state")}
    git("checkout", "-q", "-b", "failover", cwd=r.work)
    r.write(GROUPS, _groups(good, 2, "[site-b]"))
    s["failover"] = r.commit("Bob", "groups(example-com): active groups site-b (serial 2)")
    s["merge"] = r.merge_pr("failover", 7, "Carol", EPOCH + 3 * HOUR)
    r.ticks = 5
    r.write(GROUPS, _groups(good, 3, "[site-a, site-b]"))
    s["restore"] = r.commit("Dave", "groups(example-com): active groups site-a, site-b (serial 3)")
    r.ticks = 8
    r.write(GROUPS, _groups(good, 4, "[site-b]"))
    s["reconcile"] = r.commit("Erin", "groups(example-com): reconcile git with the zone: site-b (serial 4)")
    both, b = ["site-a", "site-b"], ["site-b"]
    west = _status(r, "eu-west-1", s["initial"], "", EPOCH + HOUR + 1800, 1, both)
    west = _status(r, "eu-west-1", s["merge"], west, EPOCH + 4 * HOUR, 2, b, unhealthy=EU_WEST_TARGETS)
    west = _status(r, "eu-west-1", s["restore"], west, EPOCH + 7 * HOUR, 3, both)
    s["west-direct"] = _status(r, "eu-west-1", s["restore"], west, EPOCH + 8 * HOUR + 600, 4, b, diverged=True)
    us = _status(r, "us-east-1", s["merge"], "", EPOCH + 4 * HOUR + 300, 2, b)
    s["us-direct"] = us = _status(r, "us-east-1", s["restore"], us, EPOCH + 8 * HOUR, 4, b, diverged=True)
    s["us-reconciled"] = _status(r, "us-east-1", s["reconcile"], us, EPOCH + 9 * HOUR + 300, 4, b)
    return r, s


def _log(r: Repo, tmp_path: Path) -> GroupsLog:
    return groups_log("example.com", str(r.bare), state_dir=tmp_path / "state")


def test_every_switch_in_the_branch_order_with_the_break_glass_one(switched: tuple[Repo, dict[str, str]],
                                                                    tmp_path: Path) -> None:
    r, s = switched
    log = _log(r, tmp_path)
    assert (log.zone, log.zone_name, log.status_branches) == ("example.com", "example-com", 2)
    assert [(sw.commit.sha if sw.commit else None, sw.before, sw.after) for sw in log.switches] == [
        (s["initial"], NO_ZONE, Groups(True, 1, ("site-a", "site-b"))),
        (s["merge"], Groups(True, 1, ("site-a", "site-b")), Groups(True, 2, ("site-b",))),
        (s["restore"], Groups(True, 2, ("site-b",)), Groups(True, 3, ("site-a", "site-b"))),
        (None, Groups(True, 3, ("site-a", "site-b")), Groups(True, 4, ("site-b",))),  # break-glass, seen at 8h
        (s["reconcile"], Groups(True, 3, ("site-a", "site-b")), Groups(True, 4, ("site-b",)))]
    direct = log.switches[3]
    assert direct.time == EPOCH + 8 * HOUR and direct.recorded_by == s["reconcile"] and not direct.gate.recorded
    assert [(c.applied.cluster, c.applied.at, c.applied.status_sha) for c in direct.applied] == [
        ("eu-west-1", EPOCH + 8 * HOUR + 600, s["west-direct"]), ("us-east-1", EPOCH + 8 * HOUR, s["us-direct"])]


def test_who_when_and_where_each_switch_applied(switched: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    r, s = switched
    merge = _log(r, tmp_path).switches[1]
    assert merge.commit is not None and merge.commit.sha == s["merge"]
    assert merge.time == EPOCH + 3 * HOUR  # when it reached main, not when Bob wrote it
    assert merge.who is not None and merge.who.authors == ("Bob <bob@example.com>",)
    assert (merge.who.pr, merge.who.merger) == (7, "Carol <carol@example.com>")
    applied = {c.applied.cluster: c for c in merge.applied}
    assert (applied["eu-west-1"].applied.at, applied["eu-west-1"].applied.exact) == (EPOCH + 4 * HOUR, True)
    assert applied["eu-west-1"].reported is not None and applied["eu-west-1"].reported.serial == 2
    assert applied["us-east-1"].applied.at == EPOCH + 4 * HOUR + 300
    assert not applied["eu-central-1"].applied.branch  # git names it, it publishes no status


def test_the_health_gate_is_judged_as_the_status_branches_stood_then(switched: tuple[Repo, dict[str, str]],
                                                                     tmp_path: Path) -> None:
    r, _ = switched
    log = _log(r, tmp_path)
    initial, merge, restore, _, reconcile = (sw.gate for sw in log.switches)
    assert initial.new_zone and not merge.activated and not reconcile.activated  # nothing activated
    # the restore activated site-a at 6h, when every health-checked target of eu-west-1 was down
    # (they were up again at 7h: the gate is not judged by today's health)
    assert restore.activated == ("site-a",) and restore.at == EPOCH + 6 * HOUR and restore.statuses == 2
    assert restore.problems == (f"group site-a: cluster eu-west-1: all 2 of its health-checked targets are unhealthy "
                                f"(health.yaml on gitdns-status/{IDS['eu-west-1']})",)


def test_text_and_json_through_the_cli(switched: tuple[Repo, dict[str, str]], capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    r, s = switched
    assert main(["groups", "log", "example-com", "--repo", str(r.bare), "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("groups log of zone example.com (example-com): 5 switch(es) (1 break-glass, from the status "
                          "branches) in 4 commit(s) of branch main, 2 status branch(es)\n"), out
    merge = out.split(f"\n{s['merge'][:7]}  ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert merge == [
        "2023-11-15T01:13:20Z  [unsigned]  Merge pull request #7 from failover",
        "  author: Bob <bob@example.com>; PR #7; merged by Carol <carol@example.com>",
        f"  commit {s['failover'][:7]}  2023-11-15T00:13:20Z  Bob <bob@example.com>  [unsigned]  "
        "groups(example-com): active groups site-b (serial 2)",
        "  active groups: serial 1 [site-a, site-b] -> serial 2 [site-b]",
        "  health gate: nothing activated, nothing to check",
        "  eu-central-1: not applied yet (no status branch)",
        "  eu-west-1: applied 2023-11-15T02:13:20Z (zone at serial 2 [site-b])",
        "  us-east-1: applied 2023-11-15T02:18:20Z (zone at serial 2 [site-b])"]
    assert ("  health gate for site-a (recomputed from git and 2 status branch(es) as of 2023-11-15T04:13:20Z): "
            "refused without --force: group site-a: cluster eu-west-1: all 2 of its health-checked targets are "
            f"unhealthy (health.yaml on gitdns-status/{IDS['eu-west-1']})\n") in out
    direct = out.split("\n(no commit)  ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert direct == [
        "2023-11-15T06:13:20Z  break-glass: written to the zone directly (groups --direct); recorded in git later by "
        f"{s['reconcile'][:7]}",
        "  who: not recorded in git (first reported by a status branch at 2023-11-15T06:13:20Z)",
        "  active groups: serial 3 [site-a, site-b] -> serial 4 [site-b]",
        "  health gate: not recorded in git (a break-glass write)",
        "  eu-west-1: reported 2023-11-15T06:23:20Z (zone at serial 4 [site-b], ahead of git)",
        "  us-east-1: reported 2023-11-15T06:13:20Z (zone at serial 4 [site-b], ahead of git)"]
    assert main(["groups", "log", "example.com", "--repo", str(r.bare), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(w["kind"], w["sha"], w["after"]["serial"]) for w in doc["switches"]] == [
        ("git", s["initial"], 1), ("git", s["merge"], 2), ("git", s["restore"], 3), ("direct", None, 4),
        ("git", s["reconcile"], 4)]
    merge_doc = doc["switches"][1]
    assert (merge_doc["authors"], merge_doc["pr"], merge_doc["mergedBy"]) == (["Bob <bob@example.com>"], 7,
                                                                               "Carol <carol@example.com>")
    assert merge_doc["before"] == {"inGit": True, "serial": 1, "groups": ["site-a", "site-b"]}
    gate = doc["switches"][2]["healthGate"]
    assert (gate["known"], gate["passed"], gate["activated"], gate["asOf"]) == (True, False, ["site-a"],
                                                                                "2023-11-15T04:13:20Z")
    assert doc["switches"][3]["healthGate"]["known"] is False and doc["switches"][3]["recordedBy"] == s["reconcile"]
    reported = {a["cluster"]: a["reported"] for a in merge_doc["applied"]}
    assert reported["eu-west-1"] == {"serial": 2, "groups": ["site-b"], "diverged": False}
    assert reported["eu-central-1"] is None


def test_a_zone_git_never_had_is_a_config_error(switched: tuple[Repo, dict[str, str]], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    r, _ = switched
    with pytest.raises(ConfigError, match=r"zone example\.net: no Zone of branch main has this domain or "
                                          r"metadata\.name, at any commit \(zones at its head: example\.com, "
                                          r"example\.org\)"):
        _log_of(r, "example.net", tmp_path)
    assert main(["groups", "log", "", "--repo", str(r.bare)]) == 1
    assert "groups log: give a ZONE" in capsys.readouterr().err


def _log_of(r: Repo, zone: str, tmp_path: Path) -> GroupsLog:
    return groups_log(zone, str(r.bare), state_dir=tmp_path / "state")


def test_a_zone_without_switches_and_the_groups_request(tmp_path: Path) -> None:
    r = Repo(tmp_path)
    r.write(GROUPS, None)  # no ActiveGroups document: every group is active
    r.commit("Alice", "initial desired state")
    log = _log_of(r, "example-com", tmp_path)
    assert [(sw.before, sw.after) for sw in log.switches] == [(NO_ZONE, Groups(True))]
    text = grouplogfmt.to_text(log)
    assert "  active groups: zone not in git -> no ActiveGroups document (every group)\n" in text
    assert "hint: no gitdns-status/* branches on" in text or "hint: no gitdns-status/* branches in" in text
    # the groups verbs' own entry point runs it too (text)
    out = run(Request(action="log", zone="example.com", repo=r.bare)).out
    assert out and out[0].startswith("groups log of zone example.com (example-com): 1 switch(es) in 1 commit(s)")
