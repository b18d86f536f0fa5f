"""`gitdns groups set` on a repository whose grouped clusters have no ActiveGroups document
(every group active): it creates the document, without --force, because narrowing the active
groups activates nothing; a group no cluster is in still needs --force."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitdns.commands import EXIT_ERROR, EXIT_OK
from tests.commands.test_failover import SITES, publish_current, write_repo
from tests.commands.test_groups import GROUPS_FILE, git, run, show


@pytest.fixture
def work(tmp_path: Path) -> Path:
    origin, root = tmp_path / "origin.git", tmp_path / "work"
    git("init", "-q", "--bare", "-b", "main", str(origin), cwd=tmp_path)
    root.mkdir()
    write_repo(root)
    (root / GROUPS_FILE).unlink()
    (root / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "grouped clusters, no ActiveGroups", cwd=root)
    git("remote", "add", "origin", str(origin), cwd=root)
    git("push", "-q", "origin", "main", cwd=root)
    publish_current(root)  # every group active: both sites' addresses are in the zone
    return root


def test_set_creates_the_document_without_force(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = git("rev-parse", "HEAD", cwd=work)
    code, out, err = run(capsys, "groups", "set", "example.com", "site-a", "--repo", str(work))
    assert code == EXIT_OK, err
    assert "--force" not in err
    text = show(work, "gitdns/groups-example-com-1")
    assert text.startswith("# Active failover groups of zone example.com")
    assert "kind: ActiveGroups" in text and "zone: example-com" in text
    assert "serial: 1" in text and "groups: [site-a]" in text
    assert git("rev-parse", "gitdns/groups-example-com-1~1", cwd=work) == head
    assert not (work / GROUPS_FILE).exists()  # the work tree is untouched
    # the pull request: from every group to site A, site B's addresses go
    assert "(all groups)" in out and "**site-a**" in out
    for _, _, group, ip in SITES:
        assert (f"- api.example.com A {ip}" in out) is (group == "site-b")


def test_the_created_document_validates(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "groups", "set", "example.com", "site-a", "site-b", "--repo", str(work))[0] == EXIT_OK
    git("checkout", "-q", "gitdns/groups-example-com-1", cwd=work)
    code, out, _ = run(capsys, "validate", str(work))
    assert code == EXIT_OK and "valid:" in out


def test_a_group_no_cluster_is_in_still_needs_force(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "groups", "set", "example.com", "site-c", "--repo", str(work))
    assert code == EXIT_ERROR
    assert "group site-c: no endpoint" in err and "no Cluster in git has this group" in err and "--force" in err
    assert git("branch", "--list", "gitdns/*", cwd=work) == ""


def test_clusters_not_ready_from_the_old_hold_do_not_block_the_first_set(
        work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Status branches written while the missing document held the zone say Ready false:
    site A is active already (every group is), so the first `set` activates nothing."""
    from gitdns.adapters.status.branch import StatusBranch
    from gitdns.core.status.doc import dump

    origin = (tmp_path / "origin.git").as_uri()
    for name, cid, _, _ in SITES:
        summary = {"cluster": name, "clusterId": cid, "ready": False,
                   "conditions": [{"type": "Ready", "status": False, "reason": "ValidationFailed",
                                   "message": "zone example-com held: no ActiveGroups document"}]}
        assert StatusBranch(origin, cid, workdir=tmp_path / f"agent-{name}").publish(
            {"summary.yaml": dump(summary)}, f"status({name}): NotReady") is not None
    code, _, err = run(capsys, "groups", "set", "example.com", "site-a", "--repo", str(work))
    assert code == EXIT_OK, err
    assert "groups: [site-a]" in show(work, "gitdns/groups-example-com-1")
    # once a list exists, activating site B is a real activation and its reported health counts
    git("checkout", "-q", "gitdns/groups-example-com-1", cwd=work)
    code, _, err = run(capsys, "groups", "add", "example.com", "site-b", "--repo", str(work))
    assert code == EXIT_ERROR and "cluster b-1 reports Ready false" in err
