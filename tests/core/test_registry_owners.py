"""`gitdns owners ZONE` on a zone shared with Kuadrant dns-operator clusters: each owner's kind,
its records and its last heartbeat, in text and JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands import EXIT_ERROR, EXIT_OK
from gitdns.core import registry
from gitdns.core.owner.zone import heartbeat_record
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.local import LocalProvider

ROOT = Path(__file__).resolve().parents[2]
H = "heritage=external-dns,external-dns/"
SHARED = "shared.example.com"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", dest, ignore=shutil.ignore_patterns(".gitdns"))
    return dest


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def _seed(repo: Path) -> None:
    """A record three kinds of owner share, beside what the example's clusters apply."""
    data = RecordSet(SHARED, "A", 60, ("192.0.2.1", "192.0.2.2", "192.0.2.3"))
    foreign = [
        data,
        RecordSet(registry.txt_name("kuadrant-uid", "A", SHARED), "TXT", 60, (f"{H}owner=kuadrant-uid,{H}version=1",)),
        RecordSet(f"kuadrant-a-{SHARED}", "TXT", 60, (f"{H}owner=old-a&&old-b",)),
        RecordSet(registry.txt_name("ghost-uid", "A", "gone.example.com"), "TXT", 60,
                  (f"{H}owner=ghost-uid,{H}rev=1700000000.abcdef0,{H}version=1",)),
        heartbeat_record("ghost-uid", "example.com", 1_700_000_500),
    ]
    store = LocalProvider(repo / ".gitdns" / "zones")
    assert store.apply("example.com", [Change(Action.CREATE, None, r, r.key) for r in foreign]).ok


def test_owners_json_gives_each_owner_its_kind_records_and_heartbeat(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    _seed(repo)
    code, out = run(capsys, "owners", "example.com", "--repo", str(repo), "--format", "json")
    assert code == EXIT_OK
    rows = {r["owner"]: r for r in json.loads(out)}
    shared = [{"name": SHARED, "type": "A"}]
    assert {o: r["kind"] for o, r in rows.items() if not r["knownToGit"]} == {
        "kuadrant-uid": "dns-operator", "old-a": "legacy", "old-b": "legacy", "ghost-uid": "gitdns"}
    assert rows["kuadrant-uid"]["recordSets"] == shared and rows["kuadrant-uid"]["heartbeat"] is None
    assert rows["old-a"]["recordSets"] == shared and rows["old-a"]["sharedWith"] == ["old-b"]
    ghost = rows["ghost-uid"]
    assert (ghost["records"], ghost["orphanTxt"], ghost["heartbeat"]) == (0, 1, 1_700_000_500)
    known = [r for r in rows.values() if r["knownToGit"]]
    assert known and all(r["kind"] == "gitdns" and r["cluster"] and r["records"] == len(r["recordSets"]) > 0
                         for r in known)


def test_owners_text_lists_kind_and_records_under_each_owner(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(repo)
    code, out = run(capsys, "owners", "example.com", "--repo", str(repo))
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0] == "zone example.com: 4 owner(s)"
    head = next(i for i, line in enumerate(lines) if line.startswith("old-a "))
    assert lines[head].split("  ")[1:4] == ["NOT IN GIT", "kind=legacy", "records=1"]
    assert "shares-legacy-txt-with=old-b" in lines[head]
    assert lines[head + 1] == f"  {SHARED} A"
    ghost = next(line for line in lines if line.startswith("ghost-uid "))
    assert "kind=gitdns" in ghost and "heartbeat=2023-11-14T22:21:40Z" in ghost and "orphan-txt=1" in ghost


def test_prune_owner_of_a_joint_legacy_txt_says_why_nothing_changes(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    _seed(repo)
    before = LocalProvider(repo / ".gitdns" / "zones").read("example.com").records
    code, out = run(capsys, "prune-owner", "old-a", "--zone", "example-com", "--repo", str(repo), "--yes",
                    "--from-worktree")
    assert code == EXIT_OK
    assert f"owner old-a holds 1 record(s) in example.com only through joint legacy ownership TXT shared with " \
           f"old-b (kuadrant-a-{SHARED}): gitdns never rewrites or deletes a joint TXT" in out
    assert "owns nothing" not in out
    assert LocalProvider(repo / ".gitdns" / "zones").read("example.com").records == before
    code, out = run(capsys, "prune-owner", "nobody", "--zone", "example-com", "--repo", str(repo), "--yes",
                    "--from-worktree")
    assert code == EXIT_OK and "owner nobody owns nothing in example.com (its owners: " in out
    assert "old-a" in out.rsplit("its owners:", 1)[1] and "ghost-uid" in out.rsplit("its owners:", 1)[1]


def test_adopt_says_whose_a_record_is_or_that_there_is_none(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    _seed(repo)
    code = main(["adopt", SHARED, "nothere.example.com", "--zone", "example-com", "--cluster", "eu-west-1",
                 "--repo", str(repo), "--from-worktree"])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert f"{SHARED} A in example.com is not foreign: owner(s) " in err and "kuadrant-uid" in err
    assert "no record at nothere.example.com in example.com: nothing to adopt" in err
