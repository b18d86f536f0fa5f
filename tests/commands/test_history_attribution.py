"""`gitdns history` names the right people: each change is the first-parent commit that brought it
onto main, with its author(s), its pull request and who merged it named apart — a pull request
cut before another merge (listed once), a squash merge, a rebase merge and a direct push."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands.history import fmt as histfmt
from gitdns.commands.history import trace as hist
from gitdns.commands.history.diff import Entry
from gitdns.commands.history.walk import Commit
from gitdns.commands.history.who import attribute
from tests.commands.test_history import EPOCH, HOST, Repo, git

API = "policies/api.yaml"
GROUPS = "groups/example-com.yaml"
GITHUB = ("GitHub", "noreply@github.com")


def _commit(r: Repo, author: str, subject: str, when: int, committer: tuple[str, str] | None = None) -> str:
    """A commit of the work tree as it is, on the checked-out branch (nothing pushed)."""
    cname, cmail = committer or (author, f"{author.lower()}@example.com")
    env = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": f"{author.lower()}@example.com",
           "GIT_COMMITTER_NAME": cname, "GIT_COMMITTER_EMAIL": cmail,
           "GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}
    git("add", "-A", cwd=r.work)
    git("commit", "-q", "-m", subject, cwd=r.work, env=env)
    return git("rev-parse", "HEAD", cwd=r.work)


def _weight(r: Repo, old: int, new: int) -> None:
    r.write(API, r.read(API).replace(f"weight: {old}", f"weight: {new}"))


def _push(r: Repo) -> None:
    git("push", "-q", "--force", str(r.bare), "main:refs/heads/main", cwd=r.work)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    """main: initial (Alice, pushed directly); Dave's failover branch and Bob's weight branch both
    cut from it; Bob's merged first as PR #11, then Dave's as PR #13 (its tree differs from both
    of its parents), both by Carol; a squash merge by the forge (Erin's, ``(#21)``, committed by
    GitHub) and one squashed by a maintainer (Ivan's, ``(#22)``, committed by Frank); a rebase
    merge of Gina's two commits (committed by GitHub, no pull request named); a direct push (Hal)."""
    r = Repo(tmp_path_factory.mktemp("attribution"))
    hour = 3600
    s = {"initial": _commit(r, "Alice", "initial desired state", EPOCH + hour)}
    _push(r)
    git("checkout", "-q", "-b", "dave/failover", cwd=r.work)
    r.write(GROUPS, r.read(GROUPS).replace("serial: 1", "serial: 2").replace("[site-a, site-b]", "[site-b]"))
    s["failover"] = _commit(r, "Dave", "groups: example.com fails over to site-b", EPOCH + 2 * hour)
    git("checkout", "-q", "-b", "bob/weight", s["initial"], cwd=r.work)
    _weight(r, 200, 250)
    s["weight"] = _commit(r, "Bob", "api: GCP 250 shares", EPOCH + 3 * hour)
    git("checkout", "-q", "main", cwd=r.work)
    s["merge11"] = r.merge_pr("bob/weight", 11, "Carol", EPOCH + 4 * hour)
    s["merge13"] = r.merge_pr("dave/failover", 13, "Carol", EPOCH + 5 * hour)
    _weight(r, 250, 230)
    s["squash"] = _commit(r, "Erin", "api: 230 (#21)", EPOCH + 6 * hour, committer=GITHUB)
    _weight(r, 230, 235)
    s["squashed-by-hand"] = _commit(r, "Ivan", "api: 235 (#22)", EPOCH + 7 * hour, committer=("Frank",
                                                                                            "frank@example.com"))
    _weight(r, 235, 240)
    s["rebase1"] = _commit(r, "Gina", "api: 240", EPOCH + 8 * hour, committer=GITHUB)
    _weight(r, 240, 245)
    s["rebase2"] = _commit(r, "Gina", "api: 245", EPOCH + 8 * hour + 60, committer=GITHUB)
    _weight(r, 245, 255)
    s["direct"] = _commit(r, "Hal", "api: 255", EPOCH + 9 * hour)
    _push(r)
    return r, s


def _entries(r: Repo, tmp_path: Path) -> dict[str, Entry]:
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path / "state")
    return {e.commit.sha: e for e in result.entries}


def test_a_pull_request_cut_before_another_merge_is_listed_once_as_its_merge(
        story: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    r, s = story
    entries = _entries(r, tmp_path)
    # every change once, as the first-parent commit that brought it: the side commits are not entries
    assert list(entries) == [s["initial"], s["merge11"], s["merge13"], s["squash"], s["squashed-by-hand"],
                             s["rebase1"], s["rebase2"], s["direct"]]
    failover = entries[s["merge13"]]
    assert failover.who is not None
    assert failover.who.authors == ("Dave <dave@example.com>",)  # the pull request's author, not the merger
    assert (failover.who.pr, failover.who.landed) == (13, "merge")
    assert failover.who.merger == "Carol <carol@example.com>"
    assert [c.sha for c, _ in failover.who.side] == [s["failover"]]
    # what the merge changed on main: the failover, not Bob's weight (merged before it)
    assert [histfmt.change_line(d)[:1] for d in failover.changes] == ["-", "-"]
    assert failover.notes == ("active groups serial 2 [site-b]",)
    weight = entries[s["merge11"]]
    assert weight.who is not None and weight.who.authors == ("Bob <bob@example.com>",) and weight.who.pr == 11
    assert [c.sha for c, _ in weight.who.side] == [s["weight"]]


def test_the_text_names_author_pr_and_merger_apart(story: tuple[Repo, dict[str, str]],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    r, s = story
    assert main(["history", HOST, "--repo", str(r.bare)]) == 0
    out = capsys.readouterr().out
    assert out.count("groups: example.com fails over to site-b") == 1, out
    block = out.split(f"\n{s['merge13'][:7]}  ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert block[:3] == [
        "2023-11-15T03:13:20Z  [unsigned]  Merge pull request #13 from dave/failover",
        "  author: Dave <dave@example.com>; PR #13; merged by Carol <carol@example.com>",
        f"  commit {s['failover'][:7]}  2023-11-15T00:13:20Z  Dave <dave@example.com>  [unsigned]  groups: "
        "example.com fails over to site-b"]
    assert ("  author: Erin <erin@example.com> (committed by GitHub <noreply@github.com>); PR #21 (a squash or "
            "rebase merge); merged by: not recorded in git\n") in out
    assert ("  author: Ivan <ivan@example.com> (committed by Frank <frank@example.com>); PR #22 (a squash or rebase "
            "merge); merged by Frank <frank@example.com> (its committer)\n") in out
    assert out.count("  author: Gina <gina@example.com> (committed by GitHub <noreply@github.com>); no pull "
                     "request named in git (a direct push, or a rebase merge)\n") == 2
    assert ("  author: Hal <hal@example.com>; no pull request named in git (a direct push, or a rebase merge)\n"
            in out)


def test_squash_rebase_and_direct_push_in_json(story: tuple[Repo, dict[str, str]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    r, s = story
    assert main(["history", HOST, "--repo", str(r.bare), "--format", "json"]) == 0
    entries = {e["sha"]: e for e in json.loads(capsys.readouterr().out)["entries"]}

    def who(name: str) -> tuple[object, ...]:
        e = entries[s[name]]
        return (e["authors"], e["pr"], e["landed"], e["mergedBy"], e["mergedByFrom"], [b["sha"] for b in e["brought"]])

    assert who("merge13") == (["Dave <dave@example.com>"], 13, "merge", "Carol <carol@example.com>",
                              "merge commit author", [s["failover"]])
    assert entries[s["merge13"]]["author"] == "Carol <carol@example.com>"  # the merge commit's own author
    assert who("squash") == (["Erin <erin@example.com>"], 21, "pr-commit", None, None, [])
    assert who("squashed-by-hand") == (["Ivan <ivan@example.com>"], 22, "pr-commit", "Frank <frank@example.com>",
                                       "committer", [])
    # a rebase merge: each rewritten commit is a first-parent commit of its own, attributed to itself
    assert who("rebase1") == (["Gina <gina@example.com>"], None, "direct", None, None, [])
    assert who("rebase2") == (["Gina <gina@example.com>"], None, "direct", None, None, [])
    assert who("direct") == (["Hal <hal@example.com>"], None, "direct", None, None, [])
    assert "merge" not in entries[s["direct"]]


def test_a_window_keeps_the_merge_by_its_own_time(story: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    r, s = story
    # Dave wrote the failover at 2h; it reached main with its merge at 5h
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path / "state", since=f"@{EPOCH + 4 * 3600 + 60}",
                          until=f"@{EPOCH + 5 * 3600}")
    assert [e.commit.sha for e in result.entries] == [s["merge13"]]


@pytest.mark.parametrize(("message", "pr"), [
    ("Merge pull request #5 from dave/x\n\ntitle", 5),
    ("Merge branch 'dave/x' into 'main'\n\ntitle\n\nSee merge request platform/dns!42", 42),
    ("Merged in dave/x (pull request #7)\n\ntitle", 7),
    ("Merged PR 123: title", 123),
    ("api: 250 (#21)", 21),
    ("api: 250 (#21)\n\n* api: 250\n* (#3) a line of the body", 21),
    ("Revert (#21) of something", None),
    ("api: 250", None),
    ("Merge branch 'dave/x'", None),
])
def test_the_pull_request_a_commit_names(message: str, pr: int | None) -> None:
    assert Commit("a" * 40, ("b" * 40,), 0, "A <a@x>", 0, "A <a@x>", message).pr == pr


@pytest.mark.parametrize(("committer", "merger"), [
    ("GitHub <noreply@github.com>", ""),
    ("GitLab <noreply@gitlab.example.com>", ""),
    ("Frank <12345+frank@users.noreply.github.com>", "Frank <12345+frank@users.noreply.github.com>"),
    ("Erin <erin@example.com>", ""),  # the author herself: nobody else is named
])
def test_a_squash_merge_names_its_committer_only_when_a_person_other_than_the_author(committer: str,
                                                                                       merger: str) -> None:
    who = attribute(Commit("a" * 40, ("b" * 40,), 0, "Erin <erin@example.com>", 0, committer, "api: 250 (#21)"))
    assert (who.landed, who.pr, who.merger) == ("pr-commit", 21, merger)
