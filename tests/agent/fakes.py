"""Test doubles for agent tests: a git source held in memory and a fake clock."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from gitdns.core.model import Revision
from gitdns.errors import UnreachableError

ROOT = Path(__file__).resolve().parent.parent.parent


def example_files() -> dict[str, str]:
    base = ROOT / "example-repo"
    return {p.relative_to(base).as_posix(): p.read_text() for p in sorted(base.rglob("*.yaml"))
            if ".gitdns" not in p.parts}


@dataclass
class FakeFetched:
    sha: str
    revision: Revision
    message: str
    author: str
    files: dict[str, str]


@dataclass
class FakeSource:
    """Commits as (sha, files); `head` points at one; parents make is_descendant work."""

    commits: dict[str, dict[str, str]] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    head: str = ""
    up: bool = True
    calls: list[str] = field(default_factory=list)
    counter: int = 0

    def commit(self, files: dict[str, str], message: str = "change", parent: str | None = "HEAD") -> str:
        self.counter += 1
        sha = f"{self.counter:07d}" + "f" * 33
        self.commits[sha] = dict(files)
        self.parents[sha] = self.head if parent == "HEAD" else parent
        self.messages[sha] = message
        self.head = sha
        return sha

    def remote_head(self) -> str:
        self.calls.append("remote_head")
        if not self.up:
            raise UnreachableError("git remote unreachable: connection refused")
        return self.head

    def fetch(self, sha: str | None = None) -> FakeFetched:
        self.calls.append("fetch")
        if not self.up:
            raise UnreachableError("git remote unreachable: connection refused")
        sha = sha or self.head
        return FakeFetched(sha, Revision(1_700_000_000 + int(sha[:7]), sha), self.messages[sha], "dev",
                           dict(self.commits[sha]))

    def is_descendant(self, new: str, old: str) -> bool:
        cur: str | None = new
        while cur is not None:
            if cur.startswith(old):  # as git resolves an abbreviated sha
                return True
            cur = self.parents.get(cur)
        return False

    def files_at(self, sha: str) -> dict[str, str]:
        return dict(self.commits[sha])

    def revision_at(self, sha: str) -> Revision:
        return Revision(1_700_000_000 + int(sha[:7]), sha)


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def copy_example(dest: Path) -> Path:
    shutil.copytree(ROOT / "example-repo", dest, ignore=shutil.ignore_patterns(".gitdns"))
    return dest
