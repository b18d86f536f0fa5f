"""When the agent tries git again: exponential backoff of its git operations, and only of them.

Zone-side work (validation, health withdrawals, following a zone's active-groups record after a
break-glass switch) keeps its own schedule from the last good revision while git is down; the
fetch and the status push each wait on a `GitWait` of their own.  A webhook delivery or a changed
credential or trust file ends the wait at once; a head that is refused (unsigned, untrusted, a
force-push back) is not a git failure: the agent keeps polling at its poll interval, so the next
good commit is taken on the next poll.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

BACKOFF_START = 0.75
BACKOFF_MAX = 900.0


def backoff(failures: int) -> float:
    """0.75 s, 1.5 s, 3 s, ... capped at 15 min."""
    return float(min(BACKOFF_START * (2 ** max(failures - 1, 0)), BACKOFF_MAX))


@dataclass(slots=True)
class GitWait:
    """Consecutive failures of one kind of git operation, and when it may be tried again."""

    failures: int = 0
    retry_at: float | None = None

    def ready(self, now: float) -> bool:
        return self.retry_at is None or now >= self.retry_at

    def failed(self, now: float) -> float:
        """One more failure; the delay before the next attempt."""
        self.failures += 1
        delay = backoff(self.failures)
        self.retry_at = now + delay
        return delay

    def succeeded(self) -> None:
        self.failures, self.retry_at = 0, None

    def reset(self) -> None:
        """Try at the next chance (a webhook delivery, a rotated credential); the count stays for
        the report until an attempt succeeds."""
        self.retry_at = None

    def remaining(self, now: float) -> float | None:
        """Seconds until the next attempt, None when not waiting."""
        return None if self.retry_at is None else max(self.retry_at - now, 0.0)


class FileWatch:
    """Notices when any of a set of files (credentials, CA bundle, trusted keys) is replaced or
    rewritten: by inode, size and modification time, as a Secret volume's atomic swap shows."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = tuple(sorted({p for p in paths if p}))
        self._seen = self._stamp()

    def _stamp(self) -> tuple[tuple[int, int, int] | None, ...]:
        out: list[tuple[int, int, int] | None] = []
        for path in self.paths:
            try:
                st = os.stat(path)
            except OSError:
                out.append(None)
                continue
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def changed(self) -> bool:
        if not self.paths:
            return False
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        self._seen = stamp
        return True
