"""Progress of long work, as the work tells it: a `Progress` is told each step, and decides
alone whether and how to show it.

    progress.step(done, total, what)     ``done`` of ``total`` (None: not known), ``what``
                                         names the work ("writing example.com")

The work never asks where the steps go.  `NO_PROGRESS` drops them (the default of every
function that takes a ``progress``: the agent, tests, a pipe); `gitdns.cli.progress` shows them
on a terminal.  ``what`` may hold outside text (a zone name): whoever shows it passes it
through the text gate (`gitdns.core.text.inline`).  `labelled` names the part of a larger run
a step belongs to (``[eu-west-1] writing example.com``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["NO_PROGRESS", "Labelled", "Progress", "labelled"]


@runtime_checkable
class Progress(Protocol):
    def step(self, done: int, total: int | None, what: str) -> None:
        """``done`` units of ``total`` (None when not known) of the work ``what`` are done."""
        ...


class _NoProgress:
    """Drops every step: the work runs as if nobody watched."""

    __slots__ = ()

    def step(self, done: int, total: int | None, what: str) -> None:
        return None

    def __repr__(self) -> str:
        return "NO_PROGRESS"


NO_PROGRESS: Progress = _NoProgress()


@dataclass(frozen=True, slots=True)
class Labelled:
    """Each step of ``inner`` with ``label`` before its ``what``."""

    inner: Progress
    label: str

    def step(self, done: int, total: int | None, what: str) -> None:
        self.inner.step(done, total, f"{self.label} {what}" if what else self.label)


def labelled(progress: Progress, label: str) -> Progress:
    """``progress`` with ``label`` before each step's ``what``; `NO_PROGRESS` stays itself (the
    silent path builds nothing)."""
    return progress if progress is NO_PROGRESS else Labelled(progress, label)
