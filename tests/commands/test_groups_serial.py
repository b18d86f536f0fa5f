"""Group serials cannot go backwards: `groups set|add|remove` fetch origin first, number the
change above git's serial and the zone's TXT, and name the branch so that it was never used;
re-creating a deleted ActiveGroups document is a normal switch; `groups get` fetches before
judging and warns when git's serial is at or below the one the zone applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitdns.commands import EXIT_OK
from gitdns.core import groups
from gitdns.reconcile.engine import default_factory, load
from tests.commands.test_groups import GROUPS_FILE, _git_identity, git, run, show, work, zone_groups

__all__ = ["_git_identity", "work"]  # the fixtures this module shares


def zone_at(root: Path, serial: int, active: tuple[str, ...]) -> None:
    """The zone's active-groups TXT at ``serial`` (as the agents write it after a merge)."""
    zone = load(root).state.zones[0]
    provider = default_factory(root)(zone)
    state = groups.read_zone_groups(provider.read(zone.domain), zone.domain)
    got, changes = groups.direct_changes(state, zone.domain, active, serial - 1)
    assert got == serial and provider.apply(zone.domain, changes).ok


def clone(work: Path, tmp_path: Path) -> Path:
    other = tmp_path / "other"
    git("clone", "-q", git("remote", "get-url", "origin", cwd=work), str(other), cwd=tmp_path)
    return other


def test_a_recreated_document_numbers_above_the_zone_on_a_fresh_branch(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zone_at(work, 3, ("site-a",))  # three switches were applied; git's document is then deleted
    git("branch", "gitdns/groups-example-com-4", cwd=work)  # a name already used (and merged)
    git("push", "-q", "origin", "gitdns/groups-example-com-4", cwd=work)
    git("branch", "-D", "-q", "gitdns/groups-example-com-4", cwd=work)  # only origin has it now
    git("rm", "-q", GROUPS_FILE, cwd=work)
    git("commit", "-q", "-m", "drop the ActiveGroups document", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(work))
    assert code == EXIT_OK, err
    text = show(work, "gitdns/groups-example-com-4-2")
    assert "serial: 4" in text and "groups: [site-b]" in text
    # a normal switch: from what the zone has active, site A's addresses go, site B's come
    assert "**site-a** -> **site-b** (serial 3 -> 4)" in out
    assert "- api.example.com A 192.0.2.1" in out and "+ api.example.com A 198.51.100.1" in out
    assert "reconcile" not in err


def test_set_fetches_origin_and_branches_from_it(work: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    other = clone(work, tmp_path)  # a colleague merges site-b (serial 2); this checkout is stale
    path = other / GROUPS_FILE
    path.write_text(path.read_text().replace("serial: 1", "serial: 2").replace("[site-a]", "[site-b]"))
    git("commit", "-q", "-am", "site-b", cwd=other)
    git("push", "-q", "origin", "main", cwd=other)
    merged = git("rev-parse", "HEAD", cwd=other)
    code, out, err = run(capsys, "groups", "set", "example.com", "site-a", "--repo", str(work))
    assert code == EXIT_OK, err
    text = show(work, "gitdns/groups-example-com-3")
    assert "serial: 3" in text and "groups: [site-a]" in text
    assert git("rev-parse", "gitdns/groups-example-com-3~1", cwd=work) == merged
    assert "**site-b** -> **site-a** (serial 2 -> 3)" in out


def test_get_fetches_before_judging(work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = clone(work, tmp_path)
    path = other / GROUPS_FILE
    path.write_text(path.read_text().replace("serial: 1", "serial: 2").replace("[site-a]", "[site-b]"))
    git("commit", "-q", "-am", "site-b", cwd=other)
    git("push", "-q", "origin", "main", cwd=other)
    zone_at(work, 2, ("site-b",))  # the agents applied the merge; this checkout still says serial 1
    code, out, _ = run(capsys, "groups", "get", "example.com", "--repo", str(work))
    assert code == EXIT_OK
    assert f"git: origin/main at {git('rev-parse', 'HEAD', cwd=other)[:7]} (fetched now)" in out
    assert "serial 2, groups site-b" in out and "level: the zone mirrors git" in out
    assert "DIVERGED" not in out and "reconcile" not in out


def test_get_without_origin_says_it_judges_from_the_checkout(work: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    zone_at(work, 2, ("site-b",))
    git("remote", "set-url", "origin", str(work.parent / "gone.git"), cwd=work)
    code, out, _ = run(capsys, "groups", "get", "example.com", "--repo", str(work))
    assert code == EXIT_OK
    assert "origin NOT fetched" in out and "may be behind origin" in out
    assert "UNKNOWN" in out and "DIVERGED" not in out


def test_get_warns_when_gits_serial_is_at_or_below_the_zones(work: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    zone_at(work, 3, ("site-a",))
    path = work / GROUPS_FILE  # a hand edit that forgot the serial
    path.write_text(path.read_text().replace("[site-a]", "[site-b]"))
    git("commit", "-q", "-am", "site-b by hand", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    code, out, _ = run(capsys, "groups", "get", "example.com", "--repo", str(work))
    assert code == EXIT_OK
    assert "warning: git's serial 1 is at or below the one the zone applied (3)" in out
    assert "ZoneSerialAhead" in out
    # and the next `groups set` numbers above the zone, so the switch is not ignored
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(work))
    assert code == EXIT_OK, err
    assert "serial: 4" in show(work, "gitdns/groups-example-com-4")
    assert zone_groups(work).serial == 3  # nothing written to the zone
