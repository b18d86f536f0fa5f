"""Grouped clusters and no ActiveGroups document: every group is active (Kuadrant's "DNS
Failover" design: "if this registry entry is absent or empty all groups are considered
active").  `validate` warns, naming the zone, and holds nothing; `apply` publishes every
group's values."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands import EXIT_OK
from gitdns.core import validate as core_validate
from gitdns.reconcile.engine import default_factory, load
from tests.commands.test_failover import A_IPS, B_IPS, SITES, write_repo

GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
           "GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": "alice@example.com",
           "GIT_COMMITTER_NAME": "Alice", "GIT_COMMITTER_EMAIL": "alice@example.com"}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sites A and B (grouped) and an ungrouped cluster serve api.example.com; no ActiveGroups."""
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    root = write_repo(tmp_path / "repo", clusters=[*SITES, ("plain", "0c000000-0000-4000-8000-000000000001",
                                                             None, "203.0.113.7")])
    (root / "groups" / "example-com.yaml").unlink()
    (root / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "grouped, no ActiveGroups"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, timeout=60)
    return root


def test_no_problem_and_no_held_zone(repo: Path) -> None:
    desired = load(repo)
    assert [p.format() for p in desired.problems] == []
    assert desired.blocked == set()


def test_a_warning_names_the_zone_and_holds_nothing(repo: Path) -> None:
    desired = load(repo)
    found = core_validate.warnings(desired.state)
    assert len(found) == 1, [w.format() for w in found]
    warning = found[0]
    assert warning.code == "MissingActiveGroups" and warning.zones == () and not warning.blocks_all
    assert "'example-com' (example.com)" in warning.message
    assert "groups site-a, site-b" in warning.message and "every group is active" in warning.message
    assert "gitdns groups set example-com" in warning.hint
    assert warning.file.startswith("clusters/") and warning.yaml_path == "spec.group"


def test_no_warning_once_the_document_exists_or_without_groups(tmp_path: Path) -> None:
    with_doc = write_repo(tmp_path / "with-doc")
    assert core_validate.warnings(load(with_doc).state) == []
    ungrouped = write_repo(tmp_path / "ungrouped", clusters=[(n, c, None, ip) for n, c, _, ip in SITES])
    (ungrouped / "groups" / "example-com.yaml").unlink()
    assert core_validate.warnings(load(ungrouped).state) == []


def test_validate_passes(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(repo)])
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    assert "valid:" in out and "zones held" not in out
    code = main(["validate", str(repo), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and doc["valid"] is True and doc["blockedZones"] == []


def test_validate_prints_the_warning(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(repo)])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "warning:" in out and "'example-com' (example.com)" in out and "every group is active" in out


def test_apply_publishes_every_group(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, _, _, _ in (*SITES, ("plain", "", None, "")):
        code = main(["apply", "--repo", str(repo), "--cluster", name])
        out, err = capsys.readouterr()
        assert code == EXIT_OK, out + err
    zone = load(repo).state.zones[0]
    records = default_factory(repo)(zone).read(zone.domain).records
    values = {v for r in records if r.name == "api.example.com" and r.type == "A" for v in r.values}
    assert values == A_IPS | B_IPS | {"203.0.113.7"}
