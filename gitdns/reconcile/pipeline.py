"""The zone pipeline: the ordered steps each role runs, and the loop that runs them.

    default  build → groups → health → plan → guard → apply → verify → prune-inactive | render
    primary  build → groups → health → merge → retire-primaries → plan → guard → apply → verify
             → prune-inactive → peers → clean-remote-claims | render
    remote   endpoints
    preview  the default or primary list without verify and render, against a copy of the
             zone (`gitdns.reconcile.preview`): every write lands in the copy, none in the zone

A step returns a `Result`; the first that is not CONTINUE ends the main list, and the role's
closing steps (after the bar) run whatever the result, so the views always follow the store.
Adding a step: write it in `steps.py` with the one signature and put it in the lists here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from gitdns.reconcile import steps
from gitdns.reconcile.zonepass import Result, ZonePass

Step = Callable[[ZonePass], Result]


class Role(StrEnum):
    DEFAULT = "default"
    PRIMARY = "primary"
    REMOTE = "remote"
    PREVIEW = "preview"  # the default list, read-only (writes go to a copy of the zone)
    PREVIEW_PRIMARY = "preview-primary"


@dataclass(frozen=True, slots=True)
class Pipeline:
    main: tuple[tuple[str, Step], ...]
    closing: tuple[tuple[str, Step], ...] = ()

    def names(self) -> list[str]:
        return [name for name, _ in (*self.main, *self.closing)]


_HEAD: tuple[tuple[str, Step], ...] = (("build", steps.build), ("groups", steps.groups), ("health", steps.health))
_MERGE: tuple[tuple[str, Step], ...] = (("merge", steps.merge), ("retire-primaries", steps.retire_primaries))
_WRITE: tuple[tuple[str, Step], ...] = (("plan", steps.plan), ("guard", steps.guard), ("apply", steps.apply))
_VERIFY: tuple[tuple[str, Step], ...] = (("verify", steps.verify_step),)
_PRUNE: tuple[tuple[str, Step], ...] = (("prune-inactive", steps.prune_inactive),)
_PEERS: tuple[tuple[str, Step], ...] = (("peers", steps.peers), ("clean-remote-claims", steps.clean_remote_claims))
_RENDER: tuple[tuple[str, Step], ...] = (("render", steps.render),)

PIPELINES: dict[Role, Pipeline] = {
    Role.DEFAULT: Pipeline((*_HEAD, *_WRITE, *_VERIFY, *_PRUNE), _RENDER),
    Role.PRIMARY: Pipeline((*_HEAD, *_MERGE, *_WRITE, *_VERIFY, *_PRUNE, *_PEERS), _RENDER),
    Role.REMOTE: Pipeline((("endpoints", steps.endpoints),)),
    Role.PREVIEW: Pipeline((*_HEAD, *_WRITE, *_PRUNE)),
    Role.PREVIEW_PRIMARY: Pipeline((*_HEAD, *_MERGE, *_WRITE, *_PRUNE, *_PEERS)),
}


def run(p: ZonePass, role: Role) -> Result:
    """Run the role's steps on the pass; the outcome records how it ended and what ran."""
    pipeline = PIPELINES[role]
    ran: list[str] = []
    result = Result.CONTINUE
    for name, step in pipeline.main:
        ran.append(name)
        result = step(p)
        if result is not Result.CONTINUE:
            break
    for name, step in pipeline.closing:
        ran.append(name)
        step(p)
    p.outcome.result = result
    p.outcome.steps = tuple(ran)
    return result
