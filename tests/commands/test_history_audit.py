"""`gitdns history` on a real history: a failover (ActiveGroups narrowed, then restored) merged
as a pull request, a status branch applying one revision and withdrawing an unhealthy target,
and a search by value."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime

import pytest

from gitdns.cli import main
from gitdns.core.status.doc import dump
from tests.commands.test_history import EPOCH, HOST, Repo, git

GROUPS = "groups/example-com.yaml"
EU_WEST = "192.0.2.10"  # an address of eu-west-1 (group site-a)


def _status_commit(repo: Repo, cluster_id: str, name: str, applied: str, unhealthy: list[str], parent: str,
                   when: int) -> str:
    """A status-branch commit written as the agent writes it (summary.yaml, health.yaml)."""
    files = {"summary.yaml": dump({"cluster": name, "clusterId": cluster_id, "appliedRevision": applied}),
             "health.yaml": dump({"targets": {t: {"state": "unhealthy"} for t in unhealthy}})}
    entries = []
    for rel, text in files.items():
        path = repo.work.parent / f"blob-{when}-{rel}"
        path.write_text(text)
        blob = git("hash-object", "-w", str(path), cwd=repo.bare)
        entries.append(f"100644 blob {blob}\t{rel}")
    tree = _mktree(repo, "\n".join(entries) + "\n")
    env = {"GIT_AUTHOR_NAME": "gitdns", "GIT_AUTHOR_EMAIL": "gitdns@localhost", "GIT_COMMITTER_NAME": "gitdns",
           "GIT_COMMITTER_EMAIL": "gitdns@localhost", "GIT_AUTHOR_DATE": f"@{when} +0000",
           "GIT_COMMITTER_DATE": f"@{when} +0000"}
    args = ["commit-tree", tree, "-m", f"status({name}): Ready {applied[:7]}"] + (["-p", parent] if parent else [])
    sha = git(*args, cwd=repo.bare, env=env)
    git("update-ref", f"refs/heads/gitdns-status/{cluster_id}", sha, cwd=repo.bare)
    return sha


def _mktree(repo: Repo, listing: str) -> str:
    done = subprocess.run(["git", "mktree"], cwd=repo.bare, input=listing, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    r = Repo(tmp_path_factory.mktemp("audit"))
    shas = {"initial": r.commit("Alice", "initial desired state")}
    good = r.read(GROUPS)
    git("checkout", "-q", "-b", "failover", cwd=r.work)
    r.write(GROUPS, good.replace("serial: 1", "serial: 2").replace("[site-a, site-b]", "[site-b]"))
    shas["failover"] = r.commit("Bob", "groups: example.com fails over to site-b")
    shas["merge"] = r.merge_pr("failover", 7, "Carol", EPOCH + 50 * 3600)
    r.write(GROUPS, good.replace("serial: 1", "serial: 3"))
    r.ticks = 51  # pushed to main after the merge (50h): at 52h
    shas["restore"] = r.commit("Dave", "groups: example.com back to both sites")
    cid = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # eu-west-1
    first = _status_commit(r, cid, "eu-west-1", shas["initial"], [], "", EPOCH + 10_000)
    second = _status_commit(r, cid, "eu-west-1", shas["initial"], [f"{HOST}|{EU_WEST}"], first, EPOCH + 20_000)
    _status_commit(r, cid, "eu-west-1", shas["merge"], [], second, EPOCH + 200_000)
    return r, shas


def test_failover_shows_with_its_pr_and_where_it_applied(audited: tuple[Repo, dict[str, str]],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = audited
    assert main(["history", HOST, "--repo", str(repo.bare), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    entries = {e["sha"]: e for e in doc["entries"]}
    assert doc["statusBranches"] == 1
    # the change is the merge's, the commit that brought it onto main; the side commit is not listed
    assert shas["failover"] not in entries
    failover = entries[shas["merge"]]
    assert failover["authors"] == ["Bob <bob@example.com>"] and failover["pr"] == 7 and failover["landed"] == "merge"
    assert failover["mergedBy"] == "Carol <carol@example.com>" and failover["mergedByFrom"] == "merge commit author"
    assert [c["sha"] for c in failover["brought"]] == [shas["failover"]]
    assert failover["brought"][0]["author"] == "Bob <bob@example.com>"
    assert any("site-b" in n for n in failover["notes"])
    removed = [c for c in failover["changes"] if c["op"] in ("-", "~")]
    assert removed, failover  # eu-west-1 (site-a) stops publishing
    applied = {a["cluster"]: a for a in failover["applied"]}
    assert applied["eu-west-1"]["statusCommit"] and applied["eu-west-1"]["exact"] is True  # the merge itself
    assert applied["eu-west-1"]["revision"] == shas["merge"]
    restore = entries[shas["restore"]]
    assert restore["changes"] and restore["applied"][0]["at"] is None  # never applied
    health = [e for e in doc["entries"] if e["status"] == "health"]
    assert [n for e in health for n in e["notes"]] == [f"withdrawn {HOST} {EU_WEST} (unhealthy)",
                                                        f"restored {HOST} {EU_WEST} (healthy again)"]


def test_search_by_value_finds_every_name_that_held_it(audited: tuple[Repo, dict[str, str]],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = audited
    assert main(["history", EU_WEST, "--repo", str(repo.bare)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"history of value {EU_WEST}:")
    assert "== " in out and "; PR #7; merged by Carol <carol@example.com>" in out and shas["merge"][:7] in out
    assert out.count(f"commit {shas['failover'][:7]}  ") == 1  # the side commit, under its merge
    assert main(["history", "192.0.2.254", "--repo", str(repo.bare)]) == 0
    assert "no commit changed the desired records of 192.0.2.254" in capsys.readouterr().out


def test_since_until_window(audited: tuple[Repo, dict[str, str]], capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = audited
    assert main(["history", HOST, "--repo", str(repo.bare), "--format", "json",
                 "--since", datetime.fromtimestamp(EPOCH + 9000, UTC).isoformat()]) == 0
    doc = json.loads(capsys.readouterr().out)
    commits = [e["sha"] for e in doc["entries"] if e["status"] != "health"]
    # initial (1h) is before 2.5h; the failover was written at 2h but reached main by its merge at
    # 50h, so it is in the window, as its merge (when a change reached the branch is what an audit asks)
    assert commits == [shas["merge"], shas["restore"]]
    assert doc["since"] == datetime.fromtimestamp(EPOCH + 9000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert main(["history", HOST, "--repo", str(repo.bare), "--format", "json",
                 "--until", datetime.fromtimestamp(EPOCH + 9000, UTC).isoformat()]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert shas["restore"] not in [e["sha"] for e in doc["entries"]]
    # written before, merged after
    assert {shas["failover"], shas["merge"]}.isdisjoint(e["sha"] for e in doc["entries"])
    assert shas["initial"] in [e["sha"] for e in doc["entries"]]


def test_search_by_value_shows_the_switch_that_took_it_away_and_its_health_entries(
        audited: tuple[Repo, dict[str, str]], capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = audited
    assert main(["history", EU_WEST, "--repo", str(repo.bare), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    entries = {e["sha"]: e for e in doc["entries"] if e["status"] != "health"}
    failover = entries[shas["merge"]]
    assert any(c["op"] == "-" for c in failover["changes"])  # the value went away...
    assert failover["notes"] == ["example.com: active groups serial 2 [site-b]"]  # ...because of the switch
    assert main(["history", EU_WEST, "--repo", str(repo.bare)]) == 0
    out = capsys.readouterr().out
    section = out.split(f"== {EU_WEST} withdrawn or restored by health checks (status branches)\n", 1)
    assert len(section) == 2, out  # the health entries are in the text output too, once
    assert f"withdrawn {HOST} {EU_WEST} (unhealthy)" in section[1]
    assert f"restored {HOST} {EU_WEST} (healthy again)" in section[1]
    assert out.count(f"withdrawn {HOST} {EU_WEST} (unhealthy)") == 1
    assert "example.com: active groups serial 2 [site-b]" in section[0]
