"""Progress of long work on a terminal: one line on stderr, rewritten in place.

    with progress_for(fmt) as progress:          # in a command handler of gitdns.cli
        return command(..., progress=progress)

`progress_for` gives a `TerminalProgress` only when stderr is a terminal (and not ``TERM=dumb``)
and the output format is not JSON; otherwise `NO_PROGRESS`, so a pipe, a file, CI and
``--format json`` see nothing and pay nothing.  The line goes to stderr, never stdout, and is
cleared when the block ends, before the command's result is printed.  Updates are throttled
(`INTERVAL`); the text of a step (zone names, ...) goes through the text gate
(`gitdns.core.text.inline`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from gitdns.core.progress import NO_PROGRESS, Progress
from gitdns.core.text import inline

__all__ = ["INTERVAL", "TerminalProgress", "progress_for", "shows_progress"]

INTERVAL = 0.2  # seconds between two updates of the line: five a second at most
_ERASE = "\x1b[K"  # erase to the end of the line (ours: never outside text)


class TerminalProgress:
    """`Progress` as one line of ``stream`` (a terminal), ``\\r``-rewritten at most every
    ``interval`` seconds, cut to the terminal's width; `close` erases it."""

    def __init__(self, stream: TextIO, *, interval: float = INTERVAL,
                 clock: Callable[[], float] = time.monotonic, width: int | None = None) -> None:
        self.stream = stream
        self.interval = interval
        self.clock = clock
        self.width = width
        self.shown = False  # a line is on the terminal now
        self._last: float | None = None

    def step(self, done: int, total: int | None, what: str) -> None:
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        self._write("\r" + self._fit(line(done, total, what)) + _ERASE)
        self.shown = True

    def close(self) -> None:
        """Erase the line (when one was shown): what is printed next starts a clean line."""
        if self.shown:
            self._write("\r" + _ERASE)
            self.shown = False

    def _fit(self, text: str) -> str:
        width = self.width or _columns(self.stream)
        return text if len(text) < width else text[: max(width - 4, 1)] + "..."

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the work goes on without it
            self.shown = False


def line(done: int, total: int | None, what: str) -> str:
    """``what: done/total (pct%)`` (without a total: ``what: done``, or ``what...`` before the
    first), ``what`` through the text gate."""
    head = f"gitdns: {inline(what)}"
    if total is None or total <= 0:
        return f"{head}: {done:,}" if done > 0 else f"{head}..."
    return f"{head}: {done:,}/{total:,} ({min(done * 100 // total, 100)}%)"


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def shows_progress(fmt: str = "text", stream: TextIO | None = None) -> bool:
    """Progress is shown on ``stream`` (stderr): a terminal, not ``TERM=dumb``, output not JSON."""
    stream = sys.stderr if stream is None else stream
    if fmt == "json" or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress_for(fmt: str = "text", stream: TextIO | None = None) -> Iterator[Progress]:
    """The progress a command reports to: on the terminal (`shows_progress`), else `NO_PROGRESS`.
    The line is erased when the block ends, however it ends."""
    stream = sys.stderr if stream is None else stream
    if not shows_progress(fmt, stream):
        yield NO_PROGRESS
        return
    progress = TerminalProgress(stream)
    try:
        yield progress
    finally:
        progress.close()
