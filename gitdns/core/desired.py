"""A loaded desired state: the documents, their problems and the revision they came from.

Loading itself (reading files, git) is the adapters' work; this is the value every entry
point and the reconcile pipeline share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from gitdns.core.checks.index import Held
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



class EveryZone(set[str]):
    """The zones held by a problem that blocks every zone: iterating gives the zones the
    revision names, and every other name is held too.  A file that does not parse may be the
    one holding a Zone document: that zone is missing from the broken revision, and it is held,
    never taken for a zone the cluster left (whose records it would then remove)."""

    def __contains__(self, name: object) -> bool:
        return True


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
    held: frozenset[str] = frozenset()  # zones held as well (`held_as_before`)

    @property
    def blocked(self) -> set[str]:
        """The zones validation holds (`EveryZone` when a problem blocks every zone)."""
        if any(p.blocks_all for p in self.problems):
            return EveryZone(z.name for z in self.state.zones)
        return blocked_zones(self.problems, [z.name for z in self.state.zones]) | self.held


def held_as_before(desired: Desired, files: Mapping[str, Held]) -> Desired:
    """``desired`` holding, besides what its problems name, every zone the documents of its
    files with a problem touched when the file last had none (``files``, from
    `documents_of_files` on that revision), and counting those documents, by their names then,
    as rejected.  A document is judged as it is now: renamed and broken in one change (a Zone,
    a Cluster), or pointed elsewhere (a gateway, hosts), what it was is missing from the
    revision, and taken for removed its records would go."""
    if not files:
        return desired
    documents = frozenset(d for held in files.values() for d in held[0])
    zones = frozenset(z for held in files.values() for z in held[1])
    return replace(desired, rejected=desired.rejected | documents, held=desired.held | zones)
