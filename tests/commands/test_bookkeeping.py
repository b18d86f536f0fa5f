"""gitdns's own bookkeeping records (heartbeat, lease, active groups) show as gitdns's in
`gitdns zone show`, not as foreign records without an ownership record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands import EXIT_OK
from gitdns.core.owner.zone import heartbeat_record
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.local import LocalProvider

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """example-repo applied by every cluster, plus a heartbeat, a lease and a stranger's TXT."""
    dest = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", dest, ignore=shutil.ignore_patterns(".gitdns"))
    assert main(["apply", "--repo", str(dest), "--all-clusters"]) == EXIT_OK
    beat = heartbeat_record("eu-west-1-uid", "example.com", 1_700_000_000)
    lock = RecordSet("gitdns-lock-abcdefgh.example.com", "TXT", 60, ('"holder=gitdns-0,expires=1700000060"',))
    stranger = RecordSet("gitdns-notes.example.com", "TXT", 60, ('"hello"',))
    assert LocalProvider(dest / ".gitdns" / "zones").apply(
        "example.com", [Change(Action.CREATE, None, r, r.key) for r in (beat, lock, stranger)]).ok
    return dest


def test_zone_show_names_gitdns_records(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["zone", "show", "example.com", "--repo", str(repo)]) == EXIT_OK
    lines = {line.split("  owners: ")[0].split(" ")[0]: line.split("  owners: ")[1]
             for line in capsys.readouterr().out.splitlines() if "  owners: " in line}
    beat = next(name for name in lines if name.startswith("gitdns-heartbeat-"))
    assert lines[beat] == "gitdns heartbeat of owner eu-west-1-uid"
    assert lines["gitdns-lock-abcdefgh.example.com"] == "gitdns lease (held by gitdns-0)"
    assert lines["gitdns-active-groups.example.com"] == "gitdns active groups"
    assert lines["kuadrant-active-groups.example.com"] == "active groups (Kuadrant's record, mirrored by gitdns)"
    assert lines["gitdns-notes.example.com"] == "FOREIGN (no ownership record)"  # not ours: still foreign
    assert sum("FOREIGN" in owners for owners in lines.values()) == 1


def test_zone_show_json_is_not_foreign_for_gitdns_records(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["zone", "show", "example.com", "--repo", str(repo), "--format", "json"]) == EXIT_OK
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)["records"]}
    assert not records["gitdns-active-groups.example.com"]["foreign"]
    assert records["gitdns-active-groups.example.com"]["owners"] == ["gitdns active groups"]
    assert records["gitdns-notes.example.com"]["foreign"]
