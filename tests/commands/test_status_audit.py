"""`gitdns status` as a new user runs it, on a real history applied by real agents.

The story (``gitdns agent --once`` for each run, the embedded ``local`` store, git dates pinned):

====  ======================================================================================
c1    example-repo (its DNSPolicies without health checks); tag ``v1``; all three agents apply it
c2    mail.example.com gets the address 192.0.2.999: example.com does not validate; eu-west-1 and
      us-east-1 hold the zone (``held: true``, the last good one stays); eu-central-1 never runs again
c3    eu-central-1 is removed from git (retired) and ap-south-1 added (its agent never runs);
      eu-west-1 and us-east-1 apply it, still holding example.com
      -> ``held.git``: a copy of the repository at this point
c4    the address is fixed; only eu-west-1 applies it
====  ======================================================================================

``clone`` is a fresh ``git clone`` of the final repository: the status branches are there only as
``refs/remotes/origin/gitdns-status/*``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gitdns.cli import main
from tests.e2e.agent_kit import agent_once_at, drop_health_checks

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_714_986_000  # 2024-05-06T09:00:00Z
IDS = {"eu-west-1": "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63", "eu-central-1": "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34",
       "us-east-1": "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"}
NEW_ID = "5e7f9a1b-3c2d-4e6f-8a9b-0c1d2e3f4a5b"  # ap-south-1: in git, never published
BAD = "192.0.2.999"
NEW_CLUSTER = f"""apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata:
  name: ap-south-1
spec:
  id: {NEW_ID}
  geo: GEO-EU
  group: site-a
"""


def at(when: int) -> dict[str, str]:
    return {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}


def git(*args: str, cwd: Path, when: int = T0) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
           "GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": "alice@example.com",
           "GIT_COMMITTER_NAME": "Alice", "GIT_COMMITTER_EMAIL": "alice@example.com", **at(when)}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


class Story:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.origin = root / "origin.git"
        self.work = root / "work"
        self.shas: dict[str, str] = {}
        self.pushed: dict[tuple[str, str], int] = {}  # (cluster, desired commit) -> when its agent ran

    def commit(self, name: str, when: int) -> str:
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", name, cwd=self.work, when=when)
        git("push", "-q", "origin", "main", cwd=self.work)
        self.shas[name] = git("rev-parse", "HEAD", cwd=self.work)
        return self.shas[name]

    def agent(self, cluster: str, when: int, *, held: bool) -> None:
        """One ``gitdns agent --once``; its status commit dated ``when``."""
        done = agent_once_at(self.origin, cluster, self.root / "agents" / cluster, self.work, at(when))
        said = done.stdout + done.stderr[-3000:]
        assert done.returncode == (1 if held else 0), f"agent {cluster}: {said}"
        assert ("zones held at their last good revision: example.com" in done.stdout) is held, said
        self.pushed[(cluster, git("rev-parse", "HEAD", cwd=self.work))] = when

    def build(self) -> None:
        git("init", "-q", "--bare", "-b", "main", str(self.origin), cwd=self.root)
        shutil.copytree(ROOT / "example-repo", self.work, ignore=shutil.ignore_patterns(".gitdns"))
        drop_health_checks(self.work)
        (self.work / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
        git("init", "-q", "-b", "main", cwd=self.work)
        git("remote", "add", "origin", str(self.origin), cwd=self.work)
        self.commit("c1", T0)
        git("tag", "-a", "v1", "-m", "first release", cwd=self.work)
        git("push", "-q", "origin", "v1", cwd=self.work)
        for n, cluster in enumerate(IDS):
            self.agent(cluster, T0 + 600 + 60 * n, held=False)
        records = self.work / "records" / "example-com.yaml"
        good = records.read_text(encoding="utf-8")
        records.write_text(good.replace("values: [192.0.2.25]", f"values: [{BAD}]"), encoding="utf-8")
        self.commit("c2", T0 + 3600)
        self.agent("eu-west-1", T0 + 3600 + 600, held=True)
        self.agent("us-east-1", T0 + 3600 + 660, held=True)
        (self.work / "clusters" / "eu-central-1.yaml").unlink()
        (self.work / "clusters" / "ap-south-1.yaml").write_text(NEW_CLUSTER, encoding="utf-8")
        self.commit("c3", T0 + 7200)
        self.agent("eu-west-1", T0 + 7200 + 600, held=True)
        self.agent("us-east-1", T0 + 7200 + 660, held=True)
        git("clone", "-q", "--bare", str(self.origin), str(self.root / "held.git"), cwd=self.root)
        records.write_text(good, encoding="utf-8")
        self.commit("c4", T0 + 10800)
        self.agent("eu-west-1", T0 + 10800 + 600, held=False)
        git("clone", "-q", str(self.origin), str(self.root / "clone"), cwd=self.root)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    story = Story(tmp_path_factory.mktemp("status-audit"))
    story.build()
    return story


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def iso(when: int) -> str:
    from gitdns.commands.status.command import iso as to_iso

    return str(to_iso(when))


# -- 1. a fresh clone: the status branches are remote-tracking refs -----------------------------------


def test_fresh_clone_reads_the_remote_tracking_status_branches(story: Story, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    clone = story.root / "clone"
    assert not git("for-each-ref", "refs/heads/gitdns-status/", cwd=clone)  # git made no local branch for them
    monkeypatch.chdir(clone)
    code, out, err = run(capsys)  # the default --repo .
    assert code == 1 and err == ""  # us-east-1 still holds example.com
    clusters = out.split("\n\n")[0].splitlines()[1:]
    ready = {line.split()[0]: line.split()[2] for line in clusters}
    # ap-south-1 is in git but its agent never published: not ready, counted, said why
    assert ready == {"eu-west-1": "Ready", "us-east-1": "NotReady", "eu-central-1": "Retired", "ap-south-1": "NoStatus"}
    assert re.search(r"ap-south-1 +5e7f9a1b-3c2d +NoStatus .* no status branch: its agent has not published", out)
    assert "1/3 clusters ready, 1/2 policies ready, 1 retired, 1 without a status yet — NOT READY" in out
    assert "no status yet: ap-south-1" in out
    assert f"desired head (main): {story.shas['c4'][:7]}" in out
    assert ("3 status branches (refs/remotes/origin/gitdns-status/*), the desired branch refs/remotes/origin/main"
            in out)

    code, out, err = run(capsys, "--revision", story.shas["c1"], "--format", "json")
    rev = json.loads(out)
    states = {r["cluster"]: r["state"] for r in rev["clusters"].values()}
    # every cluster git names must have applied it: ap-south-1 (added later) has not yet
    assert states == {"eu-west-1": "applied", "us-east-1": "applied", "eu-central-1": "retired",
                      "ap-south-1": "pending"} and code == 1
    assert rev["clusters"][NEW_ID]["unpublished"] is True
    assert rev["source"]["statusRefs"] == {cid: f"refs/remotes/origin/gitdns-status/{cid}" for cid in IDS.values()}


def test_a_local_branch_left_behind_and_unpushed_commits(story: Story, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A status branch once checked out (a local branch) is behind the remote-tracking one: the
    newer is read.  Commits of the local main not pushed are no agent's: origin/main is read, and
    stderr says so."""
    clone = tmp_path / "clone"
    git("clone", "-q", str(story.origin), str(clone), cwd=tmp_path)
    cid = IDS["eu-west-1"]
    git("branch", f"gitdns-status/{cid}", f"origin/gitdns-status/{cid}~1", cwd=clone)
    (clone / "notes.yaml").write_text("# not pushed\n", encoding="utf-8")
    git("add", "notes.yaml", cwd=clone)
    git("commit", "-q", "-m", "local only", cwd=clone, when=T0 + 20000)
    _, out, err = run(capsys, "--repo", str(clone), "--format", "json")
    agg = json.loads(out)
    assert agg["source"]["statusRefs"][cid] == f"refs/remotes/origin/gitdns-status/{cid}"
    assert agg["clusters"][cid]["appliedRevision"] == story.shas["c4"]  # the newer tip
    assert agg["desiredHead"] == story.shas["c4"] and agg["source"]["desiredRef"] == "refs/remotes/origin/main"
    assert agg["unpublished"] == [{"cluster": "ap-south-1", "id": NEW_ID}] and not agg["ready"]
    assert agg["counts"]["clustersUnpublished"] == 1 and agg["counts"]["clusters"] == 3
    assert "the local branch main has 1 commit(s) that origin/main has not" in err

    # the local branch alone (no remote-tracking copy) is read as it is
    git("update-ref", "-d", f"refs/remotes/origin/gitdns-status/{cid}", cwd=clone)
    _, out, _ = run(capsys, "--repo", str(clone), "--format", "json")
    assert json.loads(out)["source"]["statusRefs"][cid] == f"refs/heads/gitdns-status/{cid}"


def test_no_status_branches_says_how_to_fetch_them(story: Story, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    clone = tmp_path / "single"
    git("clone", "-q", "--single-branch", "--branch", "main", str(story.origin), str(clone), cwd=tmp_path)
    code, out, err = run(capsys, "--repo", str(clone))
    hint = "git fetch origin 'refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*'"
    assert code == 1 and out == ""
    assert f"no gitdns-status/* branches in {clone}; fetch them ({hint}) or pass --repo URL" in err
    git(*hint.split(" ", 1)[1].replace("'", "").split(), cwd=clone)  # the fetch it names brings them
    code, out, err = run(capsys, "--repo", str(clone), "--revision", "HEAD")
    assert f"revision {story.shas['c4'][:7]} = HEAD" in out and "no cluster" not in out
    empty = tmp_path / "empty.git"  # the agents' status repository before any agent ran
    git("init", "-q", "--bare", "-b", "main", str(empty), cwd=tmp_path)
    code, out, err = run(capsys, "--repo", str(empty))
    assert code == 1 and out == ""
    assert f"no gitdns-status/* branches in {empty}: no agent has published its status there yet" in err
    assert "pass --repo URL" not in err


# -- 2. --branch --------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["origin", "clone", "url"])
def test_a_misspelt_branch_is_an_error(story: Story, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    repo = {"origin": str(story.origin), "clone": str(story.root / "clone"), "url": story.origin.as_uri()}[where]
    for fmt in ("text", "json"):
        code, out, err = run(capsys, "--repo", repo, "--branch", "mian", "--format", fmt)
        assert code == 1 and out == ""
        assert f"--branch mian: branch mian does not exist on {repo}" in err
        assert "its branches: main" in err  # the one it may have meant


def test_an_unreadable_desired_branch_is_said_on_stderr(story: Story, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The desired branch's newest commit names a blob the repository lost: its fetch fails (the
    status branches, which do not reach it, are read): the output without the lag, and why."""
    broken = tmp_path / "broken.git"
    git("clone", "-q", "--mirror", str(story.origin), str(broken), cwd=tmp_path)
    blob = _lost_blob(broken)
    tree = _run_git(broken, "mktree", stdin=f"100644 blob {blob}\tlost.yaml\n")
    commit = git("commit-tree", tree, "-p", "main", "-m", "refers to a lost blob", cwd=broken)
    git("update-ref", "refs/heads/main", commit, cwd=broken)
    (broken / "objects" / blob[:2] / blob[2:]).unlink()
    code, out, err = run(capsys, "--repo", broken.as_uri())
    assert "CLUSTER" in out and "desired head" not in out and code == 1
    assert f"the desired branch main could not be read from {broken.as_uri()}" in err
    assert "the lag and the retired clusters are not shown" in err


def test_a_status_only_repository_shows_the_fleet_without_the_lag(story: Story, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Status kept apart from the desired state (the agents' --status-repo): no desired branch
    there is not a misspelt --branch."""
    status_only = tmp_path / "status.git"
    git("init", "-q", "--bare", "-b", "main", str(status_only), cwd=tmp_path)
    git("push", "-q", str(status_only), "refs/heads/gitdns-status/*:refs/heads/gitdns-status/*", cwd=story.origin)
    _, out, err = run(capsys, "--repo", status_only.as_uri())
    assert "CLUSTER" in out and "desired head" not in out
    assert "which holds only gitdns-status/* branches" in err
    desired_only = tmp_path / "desired.git"
    git("clone", "-q", "--bare", "--single-branch", "--branch", "main", str(story.origin), str(desired_only),
        cwd=tmp_path)
    code, out, err = run(capsys, "--repo", desired_only.as_uri())
    assert code == 1 and out == ""
    assert f"no gitdns-status/* branches on {desired_only.as_uri()}: no agent has published its status there" in err


# -- 3. a zone held as invalid is not applied ------------------------------------------------------


def test_held_zone_is_not_applied(story: Story, capsys: pytest.CaptureFixture[str]) -> None:
    held = str(story.root / "held.git")  # c3: both active clusters applied it, both hold example.com
    code, out, err = run(capsys, "--repo", held)
    assert code == 1
    assert "every cluster has applied" not in out
    c3 = story.shas["c3"][:7]
    assert ("zones held at their last good revision (the revision does not validate for them): "
            "eu-west-1 (example.com), us-east-1 (example.com)") in out
    assert "0 (1 zone held)" in out
    table = out[out.index("\nHELD "):].split("\n\n")[0]
    for cluster in ("eu-west-1", "us-east-1"):
        row = next(line for line in table.splitlines() if line.startswith(cluster))
        assert "example.com" in row and f"value '{BAD}' is not an IPv4 address" in row
    assert f"desired head (main): {c3}" in out

    code, out, err = run(capsys, "--repo", held, "--revision", story.shas["c3"], "--format", "json")
    rev = json.loads(out)
    assert err == "" and code == 1 and rev["counts"]["held"] == 2 and rev["counts"]["applied"] == 0
    row = rev["clusters"][IDS["eu-west-1"]]
    assert row["state"] == "held" and list(row["heldZones"]) == ["example.com"]
    assert f"value '{BAD}'" in row["heldZones"]["example.com"]["reason"]
    assert row["at"] == iso(story.pushed[("eu-west-1", story.shas["c3"])])  # held since its run on c3
    code, out, _ = run(capsys, "--repo", held, "--revision", story.shas["c2"])
    assert code == 1 and "2 held, 1 retired" in out
    assert json.loads(run(capsys, "--repo", held, "--revision", story.shas["c2"], "--format", "json")[1])[
        "clusters"][IDS["us-east-1"]]["at"] == iso(story.pushed[("us-east-1", story.shas["c2"])])
    assert re.search(r"eu-west-1 +\S+ +held +\S+ +zone example\.com stays at its last good revision: "
                     r"records/example-com\.yaml:\d+: ", out)
    code, out, _ = run(capsys, "--repo", held, "--revision", story.shas["c1"])
    assert code == 1 and "2 applied, 1 pending, 1 retired" in out  # the zones were good at c1; ap-south-1 never ran
    assert re.search(r"ap-south-1 +5e7f9a1b-3c2d +pending +- +no status branch: its agent has not published", out)


def test_a_fix_applies_the_held_revision(story: Story, capsys: pytest.CaptureFixture[str]) -> None:
    """eu-west-1 applied c4 (the fix): c2 is applied there from then on; us-east-1 still holds it."""
    code, out, _ = run(capsys, "--repo", str(story.origin), "--revision", story.shas["c2"], "--format", "json")
    rev = json.loads(out)
    west, east = rev["clusters"][IDS["eu-west-1"]], rev["clusters"][IDS["us-east-1"]]
    assert west["state"] == "applied" and west["at"] == iso(story.pushed[("eu-west-1", story.shas["c4"])])
    assert west["appliedRevision"] == story.shas["c4"]
    assert east["state"] == "held" and code == 1
    _, out, _ = run(capsys, "--repo", str(story.origin))
    assert f"behind {story.shas['c4'][:7]}: us-east-1" in out and "every cluster has applied" not in out
    assert "us-east-1 (example.com)" in out and "eu-west-1 (example.com)" not in out


# -- 4. --cluster -----------------------------------------------------------------------------------------


def test_an_unknown_cluster_lists_the_known_ones(story: Story, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--repo", str(story.origin), "--cluster", "eu-wset-1")
    assert code == 1 and out == ""
    assert "--cluster eu-wset-1: no cluster has that id or name" in err
    for name, cid in IDS.items():
        assert f"{name} ({cid}" in err
    assert f"eu-central-1 ({IDS['eu-central-1']}, retired)" in err
    assert f"ap-south-1 ({NEW_ID}, no status branch yet)" in err
    for selector in ("ap-south-1", NEW_ID):  # in git, no status branch: its row, not ready
        code, out, err = run(capsys, "--repo", str(story.origin), "--cluster", selector)
        assert code == 1 and err == "", err
        assert re.search(r"^ap-south-1 +5e7f9a1b-3c2d +NoStatus ", out, re.M) and "eu-west-1" not in out
        assert "0/1 clusters ready" in out
    code, out, err = run(capsys, "--repo", str(story.origin), "--cluster", "ap-south-1", "--revision", "HEAD",
                         "--format", "json")
    rev = json.loads(out)
    assert code == 1 and list(rev["clusters"]) == [NEW_ID] and rev["clusters"][NEW_ID]["state"] == "pending"
    assert rev["counts"]["unpublished"] == 1 and rev["warnings"] == []
    # an id shortened as the ID column shows it
    code, out, err = run(capsys, "--repo", str(story.origin), "--cluster", IDS["eu-west-1"][:13])
    assert err == "" and re.search(r"^eu-west-1 +3f6c2b9e-5a1d +Ready ", out, re.M) and "us-east-1" not in out
    code, out, err = run(capsys, "--repo", str(story.origin), "--cluster", "3f6")  # too short to stand for an id
    assert code == 1 and "--cluster 3f6: no cluster has that id or name" in err


def test_a_retired_cluster_is_not_a_failure(story: Story, capsys: pytest.CaptureFixture[str]) -> None:
    for selector in ("eu-central-1", IDS["eu-central-1"]):
        code, out, err = run(capsys, "--repo", str(story.origin), "--cluster", selector)
        assert code == 0 and err == ""
        assert "Retired" in out and "RETIRED" in out
        assert "NOT READY" not in out and "every cluster has applied" not in out
    code, out, err = run(capsys, "--repo", str(story.origin), "--cluster", "eu-central-1", "--revision",
                         story.shas["c1"])
    assert code == 0 and "1 retired" in out


# -- 5. --revision as git names it ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["origin", "clone", "url"])
def test_revision_names_git_resolves(story: Story, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    repo = {"origin": str(story.origin), "clone": str(story.root / "clone"), "url": story.origin.as_uri()}[where]
    s = story.shas
    for name, sha in (("HEAD", s["c4"]), ("main", s["c4"]), ("origin/main", s["c4"]), ("HEAD~1", s["c3"]),
                      ("main^", s["c3"]), ("v1", s["c1"]), (s["c2"][:8], s["c2"]), (s["c2"], s["c2"])):
        code, out, err = run(capsys, "--repo", repo, "--revision", name, "--format", "json")
        assert err == "", name
        assert json.loads(out)["revision"] == sha, name
    code, out, err = run(capsys, "--repo", repo, "--revision", "v1")
    assert out.startswith(f"revision {s['c1'][:7]} = v1 (main, committed ")
    code, out, err = run(capsys, "--repo", repo, "--revision", "no-such-thing")
    assert code == 1 and "--revision no-such-thing: git cannot resolve it" in err
    side = git("commit-tree", f"{s['c1']}^{{tree}}", "-m", "not on main", cwd=story.work)
    git("push", "-q", "origin", f"{side}:refs/heads/side", cwd=story.work)
    try:
        code, out, err = run(capsys, "--repo", repo, "--revision", side)
        if where == "origin":  # the repository holds the commit: it says so
            assert code == 1 and f"--revision {side} ({side[:7]}): not on the desired branch main: no agent " \
                "applies it until it is merged into main" in err, err
            code, out, err = run(capsys, "--repo", repo, "--revision", "side")  # a branch of the repository
            assert code == 1 and f"--revision side ({side[:7]}): not on the desired branch main" in err, err
        else:  # only main and the status branches are fetched (the clone has not fetched side)
            assert code == 1 and f"--revision {side}: no commit of the desired branch main of " in err, err
            assert "a commit on another branch is applied once merged" in err
    finally:
        git("push", "-q", "origin", ":refs/heads/side", cwd=story.work)


# -- 6. the tables line up ---------------------------------------------------------------------------------


def columns(header: str) -> list[int]:
    """Where each column starts: the header's words are two or more spaces apart."""
    return [0] + [m.end() for m in re.finditer(r" {2,}", header)]


def tables(out: str) -> list[list[str]]:
    blocks = [b.splitlines() for b in out.split("\n\n")]
    return [b for b in blocks if len(b) > 1 and re.match(r"^[A-Z][A-Z ]*[A-Z]  ", b[0])]


@pytest.mark.parametrize("args", [(), ("--revision", "c2")])
def test_every_column_starts_under_its_header(story: Story, args: tuple[str, ...],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    args = tuple(story.shas.get(a, a) for a in args)
    for repo in (story.origin, story.root / "held.git"):
        _, out, _ = run(capsys, "--repo", str(repo), *args)
        found = tables(out)
        assert len(found) >= (4 if not args else 1)
        for table in found:
            starts = columns(table[0])
            for row in table[1:]:
                for start in starts[1:]:
                    assert row[start - 2:start] == "  " and row[start] != " ", (
                        f"{table[0]!r}: the cell of {row!r} at column {start} is not under its header")


def _run_git(cwd: Path, *args: str, stdin: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=False,
                          timeout=60, env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _lost_blob(repo: Path) -> str:
    """A blob written loose into ``repo`` (to be deleted: a commit then names a lost object)."""
    return _run_git(repo, "hash-object", "-w", "--stdin", stdin="kind: Lost\n")

