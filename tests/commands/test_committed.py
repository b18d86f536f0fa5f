"""The verbs that write to a zone act on committed, merged desired state only
(gitdns/commands/committed.py): adopt, prune-owner, apply and groups --direct refuse a dirty
work tree or a HEAD that is not on origin/main unless --from-worktree, and say which commit they
act on.  Real git repositories (a work tree and a bare origin) on a copy of example-repo/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands import EXIT_ERROR, EXIT_OK
from gitdns.commands.committed import NotCommitted, acting_on
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.local import LocalProvider

ROOT = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.test", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
LEGACY = RecordSet("legacy.example.com", "A", 300, ("192.0.2.200",))
LEGACY_YAML = "    - name: legacy\n      type: A\n      ttl: 300\n      values: [192.0.2.200]\n"


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """example-repo committed on main and pushed to a bare origin; the zones' local store
    (.gitdns/zones/*.json, untracked) holds a foreign record legacy.example.com A."""
    work, bare = tmp_path / "desired", tmp_path / "desired.git"
    shutil.copytree(ROOT / "example-repo", work, ignore=shutil.ignore_patterns(".gitdns"))
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    git("init", "-q", "-b", "main", cwd=work)
    git("remote", "add", "origin", str(bare), cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "the example", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    git("fetch", "-q", "origin", cwd=work)
    assert LocalProvider(work / ".gitdns" / "zones").apply(
        "example.com", [Change(Action.CREATE, None, LEGACY, LEGACY.key)]).ok
    return work


def _store(repo: Path) -> set[tuple[str, str]]:
    return {(r.name, r.type) for r in LocalProvider(repo / ".gitdns" / "zones").read("example.com").records}


def _add_legacy_to_git(repo: Path) -> None:
    path = repo / "records" / "example-com.yaml"
    path.write_text(path.read_text() + LEGACY_YAML)


def _adopt(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "adopt", "legacy.example.com", "--zone", "example.com", "--cluster", "eu-west-1",
               "--repo", str(repo), *extra)


def _ownership(repo: Path) -> list[RecordSet]:
    return [r for r in LocalProvider(repo / ".gitdns" / "zones").read("example.com").records
            if r.type == "TXT" and "legacy" in r.name and r.name != "legacy.example.com"]


def test_adopt_refuses_a_record_only_an_unmerged_branch_holds(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    git("checkout", "-q", "-b", "feature", cwd=repo)
    _add_legacy_to_git(repo)
    git("commit", "-q", "-am", "add legacy", cwd=repo)
    code, out, err = _adopt(capsys, repo)
    assert code == EXIT_ERROR and "is not on origin/main" in err and "--from-worktree" in err
    assert "UncommittedDesiredState" in err and not out
    assert not _ownership(repo)  # the zone is as it was
    # merged and pushed (the remote-tracking ref knows it): adopted, and the commit is named first
    git("checkout", "-q", "main", cwd=repo)
    git("merge", "-q", "--ff-only", "feature", cwd=repo)
    git("push", "-q", "origin", "main", cwd=repo)
    sha = git("rev-parse", "HEAD", cwd=repo)
    code, out, err = _adopt(capsys, repo)
    assert code == EXIT_OK, err
    assert out.splitlines()[0] == f"acting on {sha[:7]} (add legacy)"
    assert "adopted" in out and _ownership(repo)


def test_adopt_refuses_uncommitted_files_unless_from_worktree(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _add_legacy_to_git(repo)
    code, _, err = _adopt(capsys, repo)
    assert code == EXIT_ERROR and "uncommitted desired state (records/example-com.yaml)" in err
    assert not _ownership(repo)
    code, out, err = _adopt(capsys, repo, "--from-worktree")
    assert code == EXIT_OK, err
    assert out.startswith("acting on the work tree (--from-worktree): ")
    assert "1 uncommitted file(s): records/example-com.yaml" in out.splitlines()[0]
    assert _ownership(repo)


def test_an_untracked_yaml_file_is_dirty_a_store_file_is_not(repo: Path) -> None:
    (repo / ".gitdns" / "zones" / "other.json").write_text("{}")
    assert acting_on(repo).startswith("acting on ")
    (repo / "policies" / "new.yaml").write_text("# nothing yet\n")
    with pytest.raises(NotCommitted, match=r"policies/new\.yaml"):
        acting_on(repo)


def test_prune_owner_refuses_an_unmerged_head(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    git("commit", "-q", "--allow-empty", "-m", "local only", cwd=repo)
    before = _store(repo)
    code, out, err = run(capsys, "prune-owner", "dead-uid", "--zone", "example.com", "--repo", str(repo), "--yes")
    assert code == EXIT_ERROR and "is not on origin/main" in err and not out
    assert _store(repo) == before
    code, out, _ = run(capsys, "prune-owner", "dead-uid", "--zone", "example.com", "--repo", str(repo), "--yes",
                       "--from-worktree")
    assert code == EXIT_OK and out.startswith("acting on the work tree (--from-worktree): ")


def test_apply_refuses_a_dirty_tree_dry_run_does_not(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    LocalProvider(repo / ".gitdns" / "zones").apply("example.com", [Change(Action.DELETE, LEGACY, None, LEGACY.key)])
    path = repo / "records" / "example-com.yaml"
    path.write_text(path.read_text() + "    - name: extra\n      type: A\n      values: [192.0.2.201]\n")
    before = _store(repo)
    code, out, err = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")
    assert code == EXIT_ERROR and "uncommitted desired state" in err and not out
    assert _store(repo) == before
    code, out, _ = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1", "--dry-run")
    assert code == EXIT_OK and out.startswith("acting on the work tree (--dry-run): ")
    assert _store(repo) == before
    git("commit", "-q", "-am", "extra in git", cwd=repo)
    git("push", "-q", "origin", "main", cwd=repo)
    sha = git("rev-parse", "HEAD", cwd=repo)
    code, out, err = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1", "--format", "json")
    assert code == EXIT_OK, err
    json.loads(out)  # the line goes to stderr, the JSON stays whole
    assert f"acting on {sha[:7]} (extra in git)" in err
    assert ("extra.example.com", "A") in _store(repo)


def test_groups_direct_refuses_a_dirty_tree(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "policies" / "new.yaml").write_text("# nothing yet\n")
    code, out, err = run(capsys, "groups", "set", "example.com", "primary", "--direct", "--repo", str(repo))
    assert code == EXIT_ERROR and "policies/new.yaml" in err and not out


def test_without_a_remote_only_dirty_applies(repo: Path) -> None:
    git("remote", "remove", "origin", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "no remote here", cwd=repo)
    assert acting_on(repo) == f"acting on {git('rev-parse', 'HEAD', cwd=repo)[:7]} (no remote here)"
    (repo / "clusters" / "eu-west-1.yaml").write_text("# emptied\n")
    with pytest.raises(NotCommitted, match=r"clusters/eu-west-1\.yaml"):
        acting_on(repo)


def test_the_desired_branch_is_gitdns_branch(repo: Path) -> None:
    git("checkout", "-q", "-b", "production", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "on production", cwd=repo)
    git("push", "-q", "origin", "production", cwd=repo)
    with pytest.raises(NotCommitted, match="origin/main"):
        acting_on(repo, env={})
    assert acting_on(repo, env={"GITDNS_BRANCH": "production"}).endswith("(on production)")


def test_a_directory_outside_git_says_so(tmp_path: Path) -> None:
    assert "not in a git work tree" in acting_on(tmp_path)
