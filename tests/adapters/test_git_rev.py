"""`gitdns.adapters.git.rev` reads HEAD and the status branches with the git program (no
gitpython on the plan/apply path): held to what gitpython reads from the same real repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.adapters.git.rev import commit_at, head_info, status_files

ENV = {"GIT_AUTHOR_NAME": "Zoë Ünïcode", "GIT_AUTHOR_EMAIL": "z@example.test", "GIT_COMMITTER_NAME": "C",
       "GIT_COMMITTER_EMAIL": "c@example.test", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
       "PATH": "/usr/bin:/bin"}


def run(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True,
                          input=stdin).stdout.strip()


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    run(repo, "add", path)
    run(repo, "commit", "-q", "-F", "-", stdin=message)
    return run(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "desired"
    r.mkdir()
    run(r, "init", "-q", "-b", "main")
    commit(r, "zones/a.yaml", "a: 1\n", "first\n\nbody line\n\nGitdns-Trailer: yes\n")
    commit(r, "zones/b.yaml", "b: 2\n", "second: ünïcode subject\nwrapped subject line\n")
    return r


def gitpython_info(path: Path, rev: str) -> tuple[int, str, str, str]:
    c = git.Repo(path, search_parent_directories=True).commit(rev)
    message = c.message if isinstance(c.message, str) else c.message.decode()
    return int(c.committed_date), c.hexsha, message, str(c.author)


@pytest.mark.parametrize("rev", ["HEAD", "HEAD~1", "HEAD^1", "main"])
def test_a_commit_is_read_as_gitpython_reads_it(repo: Path, rev: str) -> None:
    info = commit_at(repo, rev)
    assert info is not None
    assert (info.revision.time, info.revision.sha, info.message, info.author) == gitpython_info(repo, rev)


def test_a_sha_prefix_and_a_subdirectory(repo: Path) -> None:
    sha = run(repo, "rev-parse", "HEAD~1")
    info = commit_at(repo / "zones", sha[:10])
    assert info is not None and info.revision.sha == sha
    assert head_info(repo / "zones") == head_info(repo)


@pytest.mark.parametrize("rev", ["nope", "HEAD~9", "-h", "--all", "0" * 40])
def test_an_unknown_revision_is_none(repo: Path, rev: str) -> None:
    assert commit_at(repo, rev) is None


def test_no_repository_no_commit_no_directory(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert head_info(plain) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    run(empty, "init", "-q")
    assert head_info(empty) is None
    assert head_info(tmp_path / "missing") is None
    assert status_files(tmp_path / "missing", ["x"]) == {}
    assert status_files(plain, ["x"]) == {}


def test_status_branches_local_first_then_remote_tracking(repo: Path, tmp_path: Path) -> None:
    base = run(repo, "rev-parse", "HEAD")

    def branch(ref: str, files: dict[str, str]) -> None:
        run(repo, "checkout", "-q", "--orphan", "tmp-status")
        run(repo, "rm", "-rq", "--cached", ".")
        for name, text in files.items():
            (repo / name).write_text(text)
            run(repo, "add", name)
        run(repo, "commit", "-q", "-m", "status")
        run(repo, "update-ref", ref, "HEAD")
        run(repo, "checkout", "-q", "-f", "main")
        run(repo, "branch", "-q", "-D", "tmp-status")
        for name in files:
            (repo / name).unlink(missing_ok=True)

    branch("refs/remotes/origin/gitdns-status/c1", {"health.yaml": "remote: 1\n", "summary.yaml": "s: ü\n"})
    branch("refs/heads/gitdns-status/c1", {"health.yaml": "local: 1\n"})
    branch("refs/remotes/origin/gitdns-status/c2", {"summary.yaml": "only: summary\n"})
    assert run(repo, "rev-parse", "HEAD") == base
    got = status_files(repo, ["c1", "c2", "c3"], ("health.yaml", "summary.yaml"))
    assert got == {"c1": {"health.yaml": "local: 1\n"}, "c2": {"summary.yaml": "only: summary\n"}}
    # what gitpython's reading gave (refs listed once, local branches first, missing files left out)
    handle = git.Repo(repo)
    refs = sorted((r for r in handle.refs if "gitdns-status/" in r.path),
                  key=lambda r: not r.path.startswith("refs/heads/"))
    for cluster_id, files in got.items():
        ref = next(r for r in refs if r.path.endswith("/gitdns-status/" + cluster_id))
        for name, text in files.items():
            assert (ref.commit.tree / name).data_stream.read().decode() == text
    assert status_files(repo, ["c2"], ("health.yaml",)) == {"c2": {}}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(author=st.text(alphabet=st.characters(blacklist_characters="\n<>", blacklist_categories=("Cs",)), min_size=1,
                     max_size=20).filter(str.strip),
       message=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_a_forged_commit_reads_as_gitpython_reads_it(repo: Path, author: str, message: str) -> None:
    """A commit object as a forge stores it (any bytes: NUL, controls, text), written raw."""
    tree, parent = run(repo, "write-tree"), run(repo, "rev-parse", "HEAD")
    body = (f"tree {tree}\nparent {parent}\nauthor {author} <a@example.test> 1790000000 +0000\n"
            f"committer {author} <a@example.test> 1790000001 +0000\n\n{message}").encode()
    sha = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--literally", "--stdin"], cwd=repo, env=ENV,
                         input=body, capture_output=True, check=True).stdout.decode().strip()
    info = commit_at(repo, sha)
    assert info is not None
    assert (info.revision.time, info.revision.sha, info.message, info.author) == gitpython_info(repo, sha)
