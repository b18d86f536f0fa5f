"""`gitdns history`: a name's desired records traced through a local bare repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.git.source import CommitInfo
from gitdns.cli import main
from gitdns.commands.history import diff as histdiff
from gitdns.commands.history import fmt as histfmt
from gitdns.commands.history import trace as hist
from gitdns.core.desired import Desired, HeadInfo
from gitdns.core.model import Revision
from gitdns.core.names import cluster_target_name
from gitdns.core.records import RecordKey, RecordSet
from gitdns.reconcile.engine import from_files

EXAMPLE = Path(__file__).resolve().parents[2] / "example-repo"
HOST = "api.example.com"
EPOCH = 1_700_000_000
IDS = {
    "eu-central-1": "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34",
    "eu-west-1": "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63",
    "us-east-1": "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275",
}


def target(cluster: str) -> str:
    return cluster_target_name(HOST, IDS[cluster], "api-gw", "ingress")


def git(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    base = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **base, **(env or {})},
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


class Repo:
    """A work tree seeded with example-repo/ that commits and pushes to a bare remote."""

    def __init__(self, root: Path) -> None:
        self.bare, self.work = root / "remote.git", root / "work"
        self.ticks = 0
        git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=root)
        shutil.copytree(EXAMPLE, self.work, ignore=shutil.ignore_patterns(".gitdns"))
        git("init", "-q", "-b", "main", cwd=self.work)

    def write(self, rel: str, text: str | None) -> None:
        path = self.work / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def read(self, rel: str) -> str:
        return (self.work / rel).read_text(encoding="utf-8")

    def commit(self, author: str, subject: str) -> str:
        self.ticks += 1
        when = f"@{EPOCH + self.ticks * 3600} +0000"
        who = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": f"{author.lower()}@example.com",
               "GIT_COMMITTER_NAME": "CI", "GIT_COMMITTER_EMAIL": "ci@example.com",
               "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", subject, cwd=self.work, env=who)
        git("push", "-q", str(self.bare), "HEAD:refs/heads/main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


    def merge_pr(self, branch: str, number: int, by: str, when: int) -> str:
        """Merge ``branch`` into main as a forge does (``Merge pull request #N from ...``, a merge
        commit by ``by`` at ``when``), push it, and return its sha."""
        stamp = f"@{when} +0000"
        who = {"GIT_AUTHOR_NAME": by, "GIT_AUTHOR_EMAIL": f"{by.lower()}@example.com", "GIT_COMMITTER_NAME": by,
               "GIT_COMMITTER_EMAIL": f"{by.lower()}@example.com", "GIT_AUTHOR_DATE": stamp,
               "GIT_COMMITTER_DATE": stamp}
        git("checkout", "-q", "main", cwd=self.work)
        git("merge", "-q", "--no-ff", "-m", f"Merge pull request #{number} from {branch}", branch, cwd=self.work,
            env=who)
        git("push", "-q", str(self.bare), "HEAD:refs/heads/main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


STATUS_RECORDS = """\
apiVersion: gitdns.io/v1alpha1
kind: RecordSet
metadata:
  name: status-page
spec:
  zone: example-com
  records:
    - name: status
      type: A
      values: [192.0.2.99]
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    r = Repo(tmp_path_factory.mktemp("history"))
    r.commit("Alice", "initial desired state")
    r.write("policies/api.yaml", r.read("policies/api.yaml").replace("weight: 200", "weight: 250"))
    r.commit("Bob", "api: GCP clusters take 250 shares")
    r.write("records/status.yaml", STATUS_RECORDS)
    r.commit("Carol", "records: status.example.com")
    r.write("README.md", "docs only\n")
    r.commit("Carol", "docs: not YAML, not in the log")
    r.write("clusters/eu-central-1.yaml", None)
    r.commit("Dave", "decommission eu-central-1")
    good = r.read("policies/api.yaml")
    r.write("policies/api.yaml", good.replace("spec:", "spec: [", 1))
    r.commit("Eve", "api: broken edit")
    r.write("policies/api.yaml", good)
    r.commit("Eve", "api: fix the broken edit")
    return r


def _lines(entry: histdiff.Entry) -> list[str]:
    return [histfmt.change_line(c) for c in entry.changes]


def test_history_traces_changes_authors_and_diffs(repo: Repo, tmp_path: Path) -> None:
    result = hist.history(HOST, str(repo.bare), state_dir=tmp_path / "state")
    assert result.commits == 6  # the README-only commit touches no YAML
    assert not result.truncated
    subjects = [e.commit.subject for e in result.entries]
    assert subjects == ["initial desired state", "api: GCP clusters take 250 shares", "decommission eu-central-1",
                        "api: broken edit", "api: fix the broken edit"]  # the status RecordSet never shows
    assert [e.commit.author for e in result.entries] == [
        "Alice <alice@example.com>", "Bob <bob@example.com>", "Dave <dave@example.com>",
        "Eve <eve@example.com>", "Eve <eve@example.com>"]
    assert [e.status for e in result.entries] == ["changed", "changed", "changed", "invalid", "fixed"]
    assert result.entries[0].date == "2023-11-14T23:13:20Z"
    assert all(e.zone == "example.com" for e in result.entries)

    initial = result.entries[0]
    assert {c.op for c in initial.changes} == {"+"}
    assert all(not c.key.name.startswith("status") for e in result.entries for c in e.changes)
    assert RecordKey(HOST, "CNAME") in {c.key for c in initial.changes}

    weights = _lines(result.entries[1])
    geo_eu = f"geo-eu.klb.{HOST}"
    assert weights == sorted(weights)
    assert f"~ {geo_eu} CNAME [{target('eu-west-1')}] ttl=60 weight=200 [{target('eu-west-1')}] -> " \
           f"ttl=60 weight=250 [{target('eu-west-1')}]" in weights
    assert len(weights) == 2  # eu-west-1 and us-east-1 are on GCP, eu-central-1 (AWS) keeps 120
    assert {c.op for c in result.entries[1].changes} == {"~"}

    removed = result.entries[2].changes
    assert {c.op for c in removed} == {"-"}
    assert {c.key for c in removed} == {RecordKey(target("eu-central-1"), "A"),
                                        RecordKey(geo_eu, "CNAME", target("eu-central-1"))}
    assert "- " + target("eu-central-1") + " A ttl=60 [198.51.100.10]" in _lines(result.entries[2])

    invalid, fixed = result.entries[3], result.entries[4]
    assert len(invalid.problems) == 1 and "policies/api.yaml" in invalid.problems[0]
    assert not invalid.changes
    assert not fixed.changes  # the fix restores the last valid revision


def test_history_text_and_json_through_the_cli(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", f"klb.{HOST}", "--repo", str(repo.bare), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    entries = doc["entries"]
    assert doc["query"] == f"klb.{HOST}" and doc["byValue"] is False and len(entries) == 5
    assert entries[0]["signature"] == "N" and entries[0]["committer"] == "CI <ci@example.com>"
    weight = entries[1]
    assert weight["author"] == "Bob <bob@example.com>" and len(weight["sha7"]) == 7
    row = next(c for c in weight["changes"] if c["setIdentifier"] == target("us-east-1"))
    assert row["op"] == "~" and row["old"][0]["weight"] == 200 and row["new"][0]["weight"] == 250
    assert entries[3]["status"] == "invalid" and len(entries[3]["problems"]) == 1

    assert main(["history", HOST, "--repo", str(repo.bare)]) == 0
    out = capsys.readouterr().out
    assert (f"history of name {HOST}: 4 change(s) and 1 invalid commit(s) in 6 commit(s) of branch main, "
            "0 status branch(es)") in out
    assert "  [unsigned]  api: GCP clusters take 250 shares\n  author: Bob <bob@example.com> (committed by CI " \
           "<ci@example.com>); no pull request named in git (a direct push, or a rebase merge)\n" in out
    assert "invalid: 1 problem(s) hold zone example.com" in out
    assert "valid again; no change since the last valid revision" in out
    assert "decommission eu-central-1" in out and "status.example.com" not in out


def test_history_of_an_unrelated_name_and_max_commits(repo: Repo) -> None:
    status = hist.history("status.example.com", str(repo.bare))
    assert [(e.commit.subject, e.status) for e in status.entries] == [
        ("records: status.example.com", "changed"), ("api: broken edit", "invalid"),
        ("api: fix the broken edit", "fixed")]
    assert [histfmt.change_line(c) for c in status.entries[0].changes] == [
        "+ status.example.com A ttl=300 [192.0.2.99]"]

    last_two = hist.history(HOST, str(repo.bare), max_commits=2)
    assert last_two.truncated and last_two.commits == 2
    assert [e.status for e in last_two.entries] == ["invalid", "fixed"]  # compared with the baseline


def test_unknown_branch_is_an_error(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", HOST, "--repo", str(repo.bare), "--branch", "nope"]) == 1
    assert "nope" in capsys.readouterr().err


def _commit(n: int) -> CommitInfo:
    sha = f"{n:040x}"
    return CommitInfo(sha, Revision(EPOCH + n, sha), "A <a@example.com>", f"commit {n}")


def test_unchanged_trees_are_loaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {str(p.relative_to(EXAMPLE)): p.read_text(encoding="utf-8")
             for p in EXAMPLE.rglob("*.yaml") if ".gitdns" not in p.parts}
    other = {**files, "records/status.yaml": STATUS_RECORDS}
    trees = {1: files, 2: files, 3: other, 4: files}
    calls: list[int] = []

    def counting(root: Path, files: Mapping[str, str], head: HeadInfo | None, **kw: Any) -> Desired:
        calls.append(1)
        return from_files(root, files, head, **kw)

    monkeypatch.setattr(hist, "from_files", counting)
    entries = hist.trace(HOST, [_commit(n) for n in trees], lambda sha: trees[int(sha, 16)])
    assert len(calls) == 2  # two distinct trees
    assert [e.commit.subject for e in entries] == ["commit 1"]


def test_merge_unites_multi_values_and_marks_disagreement() -> None:
    merged = histdiff.merge([
        ("a", [RecordSet("h.example.com", "A", 60, ("1.1.1.1",)),
               RecordSet("w.example.com", "CNAME", 60, ("x.example.com",))]),
        ("b", [RecordSet("h.example.com", "A", 60, ("2.2.2.2",)),
               RecordSet("w.example.com", "CNAME", 60, ("y.example.com",))]),
        ("c", [RecordSet("w.example.com", "CNAME", 60, ("x.example.com",))]),
    ])
    a_rec, cname = merged
    assert not a_rec.conflict and a_rec.variants[0].values == ("1.1.1.1", "2.2.2.2")
    assert cname.conflict and cname.owners == (("a", "c"), ("b",))
    line = histfmt.change_line(histdiff.RecordDiff("+", cname.key, None, cname))
    assert line == ("+ w.example.com CNAME CONFLICT: clusters disagree: ttl=60 [x.example.com] wanted by a, c"
                    " | ttl=60 [y.example.com] wanted by b")
