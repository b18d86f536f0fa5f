"""The desired revision of a work tree: commit time, sha and trailers of HEAD.

gitpython is imported only when a revision is asked for, so `gitdns --help` stays fast.
A directory that is not inside a git work tree has no revision (None).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from gitdns.core.model import Revision

log = logging.getLogger(__name__)

MASS_CHANGE_TRAILER = "Gitdns-Allow-Mass-Change"


@dataclass(frozen=True, slots=True)
class HeadInfo:
    revision: Revision
    message: str
    author: str

    def allows_mass_change(self, zone: str) -> bool:
        """True when the commit carries ``Gitdns-Allow-Mass-Change: <zone>`` (or ``*``)."""
        for line in self.message.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() == MASS_CHANGE_TRAILER.lower():
                wanted = {v.strip() for v in value.split(",")}
                if zone in wanted or "*" in wanted:
                    return True
        return False


def head_info(path: Path) -> HeadInfo | None:
    try:
        import git
    except ImportError:  # pragma: no cover - gitpython is a declared dependency
        return None
    try:
        repo = git.Repo(path, search_parent_directories=True)
        commit = repo.head.commit
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None
    except git.GitCommandError as exc:
        log.warning("read head failed: path=%s error=%s", path, exc)
        return None
    message = commit.message if isinstance(commit.message, str) else commit.message.decode()
    return HeadInfo(Revision(int(commit.committed_date), commit.hexsha), message, str(commit.author))
