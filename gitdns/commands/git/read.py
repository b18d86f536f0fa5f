"""What the verbs that read a repository's git history and status branches (``gitdns status``,
``gitdns history``) share: the repository argument, the directory their cache lives in, and
why no status branch was found."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gitdns.adapters.status.refs import PREFIX, LocalRefs
from gitdns.errors import ConfigError


def repo_url(repo: str) -> str:
    """A local path made absolute (git runs inside its cache); URLs as given."""
    if "://" not in repo and os.path.exists(repo):
        return str(Path(repo).absolute())
    return repo


@contextlib.contextmanager
def scratch_dir(state_dir: str | Path | None, name: str) -> Iterator[Path]:
    """``state_dir/name`` (kept, a cache for the next run), else a temporary directory removed
    afterwards.  A ``state_dir`` where it cannot be created is a ConfigError naming --state-dir."""
    if state_dir is not None:
        if not str(state_dir).strip():
            raise ConfigError("--state-dir is empty: give a directory for the cache, or leave the flag out (a "
                              "temporary directory is used)")
        path = Path(state_dir) / name
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:  # a file in the way, no permission, a read-only or pseudo file system
            raise ConfigError(f"--state-dir {state_dir}: {path} cannot be created: {exc.strerror or exc}") from None
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=f"gitdns-{name}-") as tmp:
        yield Path(tmp)


_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^[-/.]|[/.]$|\.lock$|/\.")


def check_branch(branch: str) -> None:
    """A --branch git cannot name (empty, spaces, ``..``, ``~^:?*[``...) is a ConfigError naming the flag."""
    if not branch.strip():
        raise ConfigError("--branch is empty: give the desired branch's name (default main)")
    if _BAD_REF.search(branch) or branch == "@":
        raise ConfigError(f"--branch {branch}: not a branch name git accepts (no spaces, '..', '~^:?*[\\', "
                          "leading '-' or '/', trailing '/', '.' or '.lock')")


def no_status_branches(where: str, local: LocalRefs | None, consequence: str = "") -> str:
    """Why no ``gitdns-status/*`` branch was found in ``where`` (``local``: `statusrefs.local_refs`
    of a local repository) and where to get them; ``consequence`` is said after the first reason."""
    if local is None:
        return (f"no {PREFIX}* branches on {where}: no agent has published its status there (an agent's "
                f"--status-repo may name another repository){consequence}")
    if local.remote is None:
        return (f"no {PREFIX}* branches in {local.repo}: no agent has published its status there yet, and it has "
                "no remote to fetch them from (an agent's --status-repo may name another repository: pass that as "
                "--repo)")
    return f"no {PREFIX}* branches in {local.repo}; fetch them ({local.fetch_hint()}) or pass --repo URL"
