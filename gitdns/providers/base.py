"""The provider protocol.

A provider implements `zones()`, `read()` and `apply()` and declares `capabilities`.  It
never diffs, never decides ownership and never chooses a retry policy: the planner decides
what to write, the agent decides when to retry.  Conversion to and from the native shape
and batching are pure functions beside each provider.

`Capabilities` (with `Routing` and `CasGranularity`) is declared per provider type in the one
table of `gitdns.core.providertypes`; a provider's ``capabilities`` is its entry's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gitdns.core.providertypes import Capabilities, CasGranularity, Routing
from gitdns.core.records import Change, Guard, RecordKey, ZoneSnapshot

__all__ = ["ApplyResult", "Capabilities", "CasGranularity", "Provider", "Routing", "ZoneInfo"]


@dataclass(frozen=True, slots=True)
class ZoneInfo:
    id: str
    domain: str


@dataclass(frozen=True, slots=True)
class ApplyResult:
    applied: tuple[Change, ...] = ()
    refused: tuple[tuple[RecordKey, str], ...] = ()  # stale groups: re-read and re-plan
    failed: tuple[tuple[RecordKey, str], ...] = ()  # other per-group failures (kept queued)
    change_ids: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.refused and not self.failed


@runtime_checkable
class Provider(Protocol):
    """``account`` (optional attribute, default the provider name) identifies whose request
    budget a call spends: an AWS account, a GCP project, an Azure subscription."""

    name: str
    capabilities: Capabilities

    def zones(self) -> list[ZoneInfo]: ...

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        """The zone's records; with ``names``, only those names (a snapshot marked with
        ``names`` so the planner knows it saw a part of the zone)."""
        ...

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult: ...


_GATE: ContextVar[Callable[[], None] | None] = ContextVar("gitdns_request_gate", default=None)


def before_request() -> None:
    """Called by a provider before each request it sends to its service (each page of a
    listing, each batch): the agent's request budget, when one is paying for the call, waits
    here for the request's token (`gitdns.agent.budget`), so the pages of one call are paced too."""
    gate = _GATE.get()
    if gate is not None:
        gate()


@contextmanager
def request_gate(gate: Callable[[], None]) -> Iterator[None]:
    """Run a provider call with ``gate`` called before each request it sends."""
    token = _GATE.set(gate)
    try:
        yield
    finally:
        _GATE.reset(token)
