"""`gitdns groups`: ActiveGroups edited in place and committed on a new branch for a pull request;
break-glass writes to the zone and the reconciliation back into git."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gitdns.adapters.status.branch import StatusBranch
from gitdns.cli import main
from gitdns.commands import EXIT_ERROR, EXIT_OK
from gitdns.commands.groups import verbs as group_verbs
from gitdns.commands.groups.direct import write_direct
from gitdns.commands.groups.file import edit_text
from gitdns.core import groups
from gitdns.core.records import Change, Guard, ZoneSnapshot
from gitdns.core.status.doc import dump
from gitdns.providers.base import ApplyResult
from gitdns.providers.memory import MemoryProvider
from gitdns.reconcile.engine import default_factory, load
from tests.commands.test_failover import SITES, publish_current, write_repo

GROUPS_FILE = "groups/example-com.yaml"
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
           "GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": "alice@example.com",
           "GIT_COMMITTER_NAME": "Alice", "GIT_COMMITTER_EMAIL": "alice@example.com"}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A work tree on main (pushed to a bare origin) whose zone serves site A."""
    origin, root = tmp_path / "origin.git", tmp_path / "work"
    git("init", "-q", "--bare", "-b", "main", str(origin), cwd=tmp_path)
    root.mkdir()
    write_repo(root)
    (root / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "desired state", cwd=root)
    git("remote", "add", "origin", str(origin), cwd=root)
    git("push", "-q", "origin", "main", cwd=root)
    publish_current(root)
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def show(root: Path, ref: str, path: str = GROUPS_FILE) -> str:
    return git("show", f"{ref}:{path}", cwd=root)


def untouched(root: Path, head: str, text: str) -> None:
    """The original branch is still checked out, at the same commit, with a clean work tree."""
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=root) == "main"
    assert git("rev-parse", "HEAD", cwd=root) == head
    assert git("status", "--porcelain", cwd=root) == ""
    assert (root / GROUPS_FILE).read_text(encoding="utf-8") == text


def zone_groups(root: Path) -> groups.ZoneGroups:
    zone = load(root).state.zones[0]
    return groups.read_zone_groups(default_factory(root)(zone).read(zone.domain), zone.domain)


def test_set_commits_on_a_new_branch_keeping_comments(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head, before = git("rev-parse", "HEAD", cwd=work), (work / GROUPS_FILE).read_text(encoding="utf-8")
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(work))
    assert code == EXIT_OK, err
    untouched(work, head, before)
    text = show(work, "gitdns/groups-example-com-2")
    assert "# Which site serves example.com." in text and "# bumped on every change" in text
    assert "serial: 2" in text and "groups: [site-b]" in text
    assert text.replace("serial: 2", "serial: 1").replace("[site-b]", "[site-a]") == before.rstrip("\n")
    assert git("rev-parse", "gitdns/groups-example-com-2~1", cwd=work) == head  # branched from HEAD
    # the pull-request description: the change of groups and every endpoint added and removed
    assert "title: DNS failover: example.com active groups site-a -> site-b" in out
    assert "**site-a** -> **site-b** (serial 1 -> 2)" in out
    for ip in ("192.0.2.1", "192.0.2.2"):
        assert f"- api.example.com A {ip}" in out
    for ip in ("198.51.100.1", "198.51.100.2"):
        assert f"+ api.example.com A {ip}" in out
    assert "### Endpoints: 2 added, 2 removed" in out
    # nothing was written to the zone: the agents do that after the merge
    assert zone_groups(work).groups == ("site-a",)


def test_add_and_remove_with_a_named_branch_and_push(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head, before = git("rev-parse", "HEAD", cwd=work), (work / GROUPS_FILE).read_text(encoding="utf-8")
    code, out, err = run(capsys, "groups", "add", "example-com", "site-b", "--repo", str(work),
                         "--branch", "failover/add-b", "--push", "--message", "open site B")
    assert code == EXIT_OK, err
    untouched(work, head, before)
    assert "groups: [site-a, site-b]" in show(work, "failover/add-b")
    assert git("log", "-1", "--format=%s", "failover/add-b", cwd=work) == "open site B"
    assert git("ls-remote", "--heads", "origin", "failover/add-b", cwd=work).endswith("refs/heads/failover/add-b")
    assert "pushed to origin" in out and "+ api.example.com A 198.51.100.1" in out
    code, out, err = run(capsys, "groups", "remove", "example.com", "site-a", "--repo", str(work))
    # removing the only listed group leaves an empty list: every group active
    assert code == EXIT_OK, err
    assert "groups: []" in show(work, "gitdns/groups-example-com-2")
    untouched(work, head, before)


def test_a_change_that_does_not_validate_is_refused_and_the_file_untouched(work: Path) -> None:
    head, before = git("rev-parse", "HEAD", cwd=work), (work / GROUPS_FILE).read_text(encoding="utf-8")
    request = group_verbs.Request("set", "example.com", ("site b",), work, force=True)
    with pytest.raises(group_verbs.GroupsRefused, match=r"does not validate(.|\n)*\[InvalidGroupName\]"):
        group_verbs.change(request)  # past the CLI's own name check: the repository validation refuses
    untouched(work, head, before)
    assert git("branch", "--list", "gitdns/*", cwd=work) == ""


def test_uncommitted_changes_to_the_file_are_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = work / GROUPS_FILE
    path.write_text(path.read_text(encoding="utf-8") + "# local edit\n", encoding="utf-8")
    code, _, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(work))
    assert code == EXIT_ERROR and "uncommitted changes" in err
    assert path.read_text(encoding="utf-8").endswith("# local edit\n")


def test_a_missing_file_is_created_with_a_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "work"
    root.mkdir()
    write_repo(root, clusters=[(n, c, None, ip) for n, c, _, ip in SITES])
    (root / GROUPS_FILE).unlink()
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "ungrouped", cwd=root)
    code, _, err = run(capsys, "groups", "set", "example.com", "site-a", "--repo", str(root), "--force")
    assert code == EXIT_OK, err
    text = show(root, "gitdns/groups-example-com-1")
    assert text.startswith("# Active failover groups of zone example.com")
    assert "serial: 1" in text and "groups: [site-a]" in text and "zone: example-com" in text
    assert not (root / GROUPS_FILE).exists()


def test_activating_a_group_without_endpoints_needs_force(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "groups", "add", "example.com", "site-c", "--repo", str(work))
    assert code == EXIT_ERROR
    assert "group site-c: no endpoint" in err and "--force" in err
    assert git("branch", "--list", "gitdns/*", cwd=work) == ""
    code, _, err = run(capsys, "groups", "set", "example.com", "site-c", "--repo", str(work), "--force")
    assert code == EXIT_OK and "warning (--force): group site-c: no endpoint" in err


def test_a_group_whose_cluster_reports_not_ready_needs_force(work: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    origin = (tmp_path / "origin.git").as_uri()
    _, b1_id, _, _ = SITES[2]
    summary = {"cluster": "b-1", "clusterId": b1_id, "ready": False,
               "conditions": [{"type": "Ready", "status": False, "reason": "ProviderError", "message": "x"}]}
    assert StatusBranch(origin, b1_id, workdir=tmp_path / "agent").publish(
        {"summary.yaml": dump(summary)}, "status(b-1): NotReady") is not None
    _, b2_id, _, _ = SITES[3]
    health = {"targets": {"api.example.com|198.51.100.2": {"state": "unhealthy"}}}
    assert StatusBranch(origin, b2_id, workdir=tmp_path / "agent2").publish(
        {"summary.yaml": dump({"cluster": "b-2", "ready": True}), "health.yaml": dump(health)},
        "status(b-2): Ready") is not None
    code, _, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(work))
    assert code == EXIT_ERROR
    assert "cluster b-1 reports Ready false" in err
    assert "cluster b-2: all 1 of its health-checked targets are unhealthy" in err


def test_direct_then_reconcile(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head, before = git("rev-parse", "HEAD", cwd=work), (work / GROUPS_FILE).read_text(encoding="utf-8")
    assert zone_groups(work).serial == 1
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--direct", "--repo", str(work))
    assert code == EXIT_OK, err
    state = zone_groups(work)
    assert (state.serial, state.groups, state.kuadrant) == (2, ("site-b",), ("site-b",))
    assert "GroupsDivergedFromGit" in out and "gitdns groups reconcile example-com" in out
    assert "- api.example.com A 192.0.2.1" in out and "+ api.example.com A 198.51.100.1" in out
    untouched(work, head, before)  # git is not touched
    assert git("branch", "--list", "gitdns/*", cwd=work) == ""

    code, out, _ = run(capsys, "groups", "get", "example.com", "--repo", str(work))
    assert code == EXIT_OK and "DIVERGED" in out and "serial 2 > 1" in out

    code, out, err = run(capsys, "groups", "reconcile", "example.com", "--repo", str(work))
    assert code == EXIT_OK, err
    text = show(work, "gitdns/groups-example-com-2")
    assert "serial: 2" in text and "groups: [site-b]" in text and "# bumped on every change" in text
    untouched(work, head, before)
    # with the branch merged, git is level with the zone: no divergence, nothing to mirror
    git("merge", "-q", "--ff-only", "gitdns/groups-example-com-2", cwd=work)
    desired = load(work)
    decision = groups.decide(desired.state.groups_for_zone("example-com"), zone_groups(work), "example.com")
    assert not decision.diverged and decision.write == () and decision.active == frozenset({"site-b"})
    code, out, _ = run(capsys, "groups", "reconcile", "example.com", "--repo", str(work))
    assert code == EXIT_OK and "nothing to reconcile" in out


def test_direct_with_provider_overrides_and_no_zone_in_the_checkout(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    code, out, err = run(capsys, "groups", "set", "example.net", "site-b", "--direct", "--force",
                         "--repo", str(tmp_path), "--provider-type", "local",
                         "--provider-setting", f"path={store}")
    assert code == EXIT_OK, err
    assert "serial 1" in out
    from gitdns.providers.local import LocalProvider

    state = groups.read_zone_groups(LocalProvider(store).read("example.net"), "example.net")
    assert (state.serial, state.groups) == (1, ("site-b",))


class RefusesOnce(MemoryProvider):
    def __init__(self) -> None:
        super().__init__()
        self.refusals = 1

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        if self.refusals:
            self.refusals -= 1
            # someone else wrote a higher serial meanwhile
            super().apply(zone, groups.direct_changes(groups.read_zone_groups(ZoneSnapshot(zone, ()), zone),
                                                      zone, ["site-x"], 6)[1])
            return ApplyResult(refused=tuple((c.group, "stale") for c in changes))
        return super().apply(zone, changes, guards)


def test_direct_write_re_reads_and_retries_when_refused(work: Path) -> None:
    provider = RefusesOnce()
    zone = load(work).state.zones[0]
    serial = write_direct(provider, zone, ("site-b",), 1, groups.ZoneGroups(None, None, None))
    state = groups.read_zone_groups(provider.read(zone.domain), zone.domain)
    assert serial == 8 and (state.serial, state.groups) == (8, ("site-b",))


def test_edit_text_keeps_block_lists_and_comments() -> None:
    text = ("---\n# head\nkind: ActiveGroups\nspec:\n  zone: z  # the zone\n  serial: 4\n  groups:\n"
            "    - site-a  # primary\n    - site-b\n")
    out = edit_text(text, 0, ("site-a", "site-c"), 5)
    assert out.startswith("---\n# head\n")
    assert "  zone: z  # the zone\n" in out and "  serial: 5\n" in out
    assert "    - site-a  # primary\n" in out and "    - site-c\n" in out and "site-b" not in out


def test_invalid_group_names_are_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "groups", "add", "example.com", "a;b", "--repo", str(work))
    assert code == EXIT_ERROR and "invalid group name" in err
