"""`gitdns history` as a new user met it: a fresh clone as --repo, a window on when changes
reached the branch (a pull request merged inside it, invalid commits before it), a typo'd name,
a --path that never existed, an IPv6 address written another way, a cluster that left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands.history import diff as histdiff
from gitdns.commands.history import fmt as histfmt
from gitdns.commands.history import trace as hist
from gitdns.errors import ConfigError
from tests.commands.test_history import EPOCH, HOST, IDS, Repo, git
from tests.commands.test_history_audit import _status_commit

API = "policies/api.yaml"


def _iso(when: int) -> str:
    return histdiff.iso_date(when)


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    """initial (1h); a weight change written at 2h on a branch, merged as PR #12 at 40h; a broken
    edit (3h) and a still broken one (4h) pushed straight to main; the fix (5h); eu-central-1
    removed (6h). eu-west-1 applies the initial state, then the merge."""
    r = Repo(tmp_path_factory.mktemp("trial"))
    shas = {"initial": r.commit("Alice", "initial desired state")}
    good = r.read(API)
    git("checkout", "-q", "-b", "gcp-weight", cwd=r.work)
    r.write(API, good.replace("weight: 200", "weight: 250"))
    shas["weight"] = r.commit("Bob", "api: GCP 250 shares")
    shas["merge"] = r.merge_pr("gcp-weight", 12, "Carol", EPOCH + 40 * 3600)
    weighted = r.read(API)
    r.write(API, weighted.replace("spec:", "spec: [", 1))
    shas["broken"] = r.commit("Eve", "api: broken")
    r.write(API, weighted.replace("spec:", "spec: {", 1))
    shas["still"] = r.commit("Eve", "api: still broken")
    r.write(API, weighted.replace("weight: 250", "weight: 240"))
    shas["fix"] = r.commit("Eve", "api: 240")
    r.write("clusters/eu-central-1.yaml", None)
    shas["retire"] = r.commit("Dave", "retire eu-central-1")
    first = _status_commit(r, IDS["eu-west-1"], "eu-west-1", shas["initial"], [], "", EPOCH + 3 * 3600)
    _status_commit(r, IDS["eu-west-1"], "eu-west-1", shas["merge"], [], first, EPOCH + 41 * 3600)
    _status_commit(r, IDS["eu-central-1"], "eu-central-1", shas["initial"], [], "", EPOCH + 2 * 3600)
    return r, shas


def test_a_fresh_clone_reads_the_status_branches_origin_has(trial: tuple[Repo, dict[str, str]],
                                                            tmp_path: Path) -> None:
    r, shas = trial
    clone = tmp_path / "clone"
    git("clone", "-q", str(r.bare), str(clone), cwd=tmp_path)
    assert not git("branch", "--list", "gitdns-status/*", cwd=clone)  # a clone makes no local branch for them
    result = hist.history(HOST, str(clone), state_dir=tmp_path / "state")
    assert result.status_branches == 2
    merged = next(e for e in result.entries if e.commit.sha == shas["merge"])  # the merge brought the weight
    assert [(a.cluster, a.at) for a in merged.applied if a.at] == [("eu-west-1", EPOCH + 41 * 3600)]
    assert any(h.startswith("read from ") and "refs/remotes/origin/gitdns-status/*" in h for h in result.hints)
    # a local copy of a status branch left behind: the newer remote-tracking one is read (as status does)
    git("branch", f"gitdns-status/{IDS['eu-west-1']}", f"origin/gitdns-status/{IDS['eu-west-1']}~1", cwd=clone)
    again = hist.history(HOST, str(clone), state_dir=tmp_path / "state")
    merged = next(e for e in again.entries if e.commit.sha == shas["merge"])
    assert [a.at for a in merged.applied if a.cluster == "eu-west-1"] == [EPOCH + 41 * 3600]
    # a local branch ahead of origin's (an agent pushing to this repository) is read
    bare_clone = tmp_path / "mirror.git"
    git("clone", "-q", "--bare", str(r.bare), str(bare_clone), cwd=tmp_path)
    git("update-ref", "-d", f"refs/heads/gitdns-status/{IDS['eu-central-1']}", cwd=bare_clone)
    mirror = hist.history(HOST, str(bare_clone), state_dir=tmp_path / "state")
    assert mirror.status_branches == 1  # a status branch gone since the last run is dropped from the cache


def test_the_window_is_on_when_a_change_reached_the_branch(trial: tuple[Repo, dict[str, str]],
                                                           tmp_path: Path) -> None:
    r, shas = trial
    # the weight change was written at 2h and merged at 40h: a window around the merge has it
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path, since=_iso(EPOCH + 39 * 3600),
                          until=_iso(EPOCH + 41 * 3600))
    assert [e.commit.sha for e in result.entries if e.status != "health"] == [shas["merge"]]
    assert result.commits == 1 and (result.since, result.until) == (EPOCH + 39 * 3600, EPOCH + 41 * 3600)
    text = histfmt.to_text(result)
    assert f"that reached it from {_iso(EPOCH + 39 * 3600)} to {_iso(EPOCH + 41 * 3600)}" in text.splitlines()[0]
    assert "  author: Bob <bob@example.com>; PR #12; merged by Carol <carol@example.com>\n" in text
    assert f"  commit {shas['weight'][:7]}  {_iso(EPOCH + 7200)}  Bob <bob@example.com>  [unsigned]  api: GCP 250 " \
           "shares\n" in text
    # a window around when it was written, before it was merged, does not
    early = hist.history(HOST, str(r.bare), state_dir=tmp_path, since=_iso(EPOCH + 7200 - 60),
                         until=_iso(EPOCH + 7200 + 60))
    assert early.entries == () and "no commit changed the desired records of api.example.com in that window" \
        in histfmt.to_text(early)


def test_a_window_after_broken_commits_compares_with_the_last_valid_revision(
        trial: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    r, shas = trial
    since = _iso(EPOCH + 4 * 3600 + 1800)  # after both broken commits (3h, 4h), before the fix (5h)
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path, since=since)
    fix = next(e for e in result.entries if e.commit.sha == shas["fix"])
    assert fix.status == "fixed"
    assert {c.op for c in fix.changes} == {"~"}, [histfmt.change_line(c) for c in fix.changes]  # not all "+"


def test_a_cluster_that_left_is_not_in_git_rather_than_never_applied(trial: tuple[Repo, dict[str, str]],
                                                                     tmp_path: Path) -> None:
    r, shas = trial
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path)
    retire = next(e for e in result.entries if e.commit.sha == shas["retire"])
    by = {a.cluster: a for a in retire.applied}
    assert by["eu-central-1"].in_git and not by["eu-central-1"].at  # its own removal: it never applied it
    assert histfmt.applied_text(by["eu-central-1"]) == "eu-central-1: not applied yet"
    r.write("policies/api.yaml", r.read("policies/api.yaml").replace("weight: 240", "weight: 230"))
    after = r.commit("Eve", "api: 230, after eu-central-1 left")
    try:
        result = hist.history(HOST, str(r.bare), state_dir=tmp_path)
        later = {a.cluster: a for a in next(e for e in result.entries if e.commit.sha == after).applied}
        assert not later["eu-central-1"].in_git and later["eu-west-1"].in_git
        assert histfmt.applied_text(later["eu-central-1"]) == "eu-central-1: not in git at this revision"
        assert histfmt.applied_text(later["eu-west-1"]) == "eu-west-1: not applied yet"
    finally:  # the module's repository as the other tests know it
        git("push", "-q", "--force", str(r.bare), f"{shas['retire']}:refs/heads/main", cwd=r.work)
        git("reset", "-q", "--hard", shas["retire"], cwd=r.work)


def test_a_typo_is_hinted_and_a_path_that_never_existed_is_an_error(
        trial: tuple[Repo, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r, _ = trial
    assert main(["history", "api.exmaple.com", "--repo", str(r.bare)]) == 0
    out = capsys.readouterr().out
    assert "hint: api.exmaple.com is in no zone of the desired state at " in out
    assert "(zones: example.com, example.org)" in out
    assert main(["history", HOST, "--repo", str(r.bare)]) == 0
    assert "hint:" not in capsys.readouterr().out
    with pytest.raises(ConfigError, match="--path dns: no such directory on branch main"):
        hist.history(HOST, str(r.bare), path="dns", state_dir=tmp_path)
    assert main(["history", "", "--repo", str(r.bare)]) == 1
    assert "give a NAME" in capsys.readouterr().err
    assert main(["history", HOST, "--repo", str(r.bare), "--since", "2024-05-02", "--until", "2024-05-01"]) == 1
    assert "is after --until" in capsys.readouterr().err


def test_an_ipv6_address_is_found_however_it_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = Repo(tmp_path)
    cluster = r.read("clusters/eu-west-1.yaml")
    assert "192.0.2.10" in cluster
    r.write("clusters/eu-west-1.yaml", cluster.replace("192.0.2.10", "2001:db8::10"))
    r.commit("Alice", "eu-west-1 on IPv6")
    found = {}
    for written in ("2001:db8::10", "2001:DB8:0:0::10", "2001:0db8:0000:0000:0000:0000:0000:0010"):
        assert main(["history", written, "--repo", str(r.bare), "--format", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        found[written] = (doc["query"], [e["sha"] for e in doc["entries"]])
    assert len(set(map(str, found.values()))) == 1 and found["2001:db8::10"][1], found
