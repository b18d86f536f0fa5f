"""A loaded desired state: the documents, their problems and the revision they came from.

Loading itself (reading files, git) is the adapters' work; this is the value every entry
point and the reconcile pipeline share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gitdns.core.model import DesiredState, Revision
from gitdns.core.problems import Problem, blocked_zones

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



@dataclass(frozen=True, slots=True)
class Desired:
    """A loaded repository: the state, its problems and its revision."""

    root: str  # the directory it was loaded from (messages; handed back to the loader)
    state: DesiredState
    problems: tuple[Problem, ...]
    head: HeadInfo | None
    # the desired state the last revision had, for the reviewed-removal exemption; called
    # only when a plan stalls (default: HEAD's parent in the work tree)
    previous: Callable[[], DesiredState | None] | None = None
    rejected: frozenset[tuple[str, str]] = frozenset()  # (kind, name) of documents that failed schema

    @property
    def blocked(self) -> set[str]:
        return blocked_zones(self.problems, [z.name for z in self.state.zones])
