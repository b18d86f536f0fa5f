"""The provider protocol.

A provider implements `zones()`, `read()` and `apply()` and declares `capabilities`.  It
never diffs, never decides ownership and never chooses a retry policy: the planner decides
what to write, the agent decides when to retry.  Conversion to and from the native shape
and batching are pure functions beside each provider.

`Capabilities` (with `Routing` and `CasGranularity`) is declared per provider type in the one
table of `gitdns.core.providertypes`; a provider's ``capabilities`` is its entry's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from gitdns.core.progress import NO_PROGRESS, Progress
from gitdns.core.providertypes import Capabilities, CasGranularity, Routing
from gitdns.core.records import Change, Guard, RecordKey, ZoneSnapshot
from gitdns.errors import ThrottledError

T = TypeVar("T")

__all__ = ["ApplyOutcome", "ApplyResult", "Capabilities", "CasGranularity", "Provider", "Routing", "ZoneInfo",
           "landed", "reporting"]


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


@dataclass(slots=True)
class ApplyOutcome:
    """What an `apply` gathers group by group, every provider alike; `result` is its answer.
    ``zone`` and ``total`` (the changes the call was given) are what `land` tells the progress
    of the call (`reporting`)."""

    applied: list[Change] = field(default_factory=list)
    refused: list[tuple[RecordKey, str]] = field(default_factory=list)
    failed: list[tuple[RecordKey, str]] = field(default_factory=list)
    change_ids: list[str] = field(default_factory=list)
    zone: str = ""
    total: int = 0

    def land(self, changes: Sequence[Change]) -> None:
        """``changes`` landed (the service took them): applied, and counted on the progress."""
        self.applied.extend(changes)
        landed(self.zone, len(self.applied), self.total)

    def result(self, log: logging.Logger, zone: str) -> ApplyResult:
        """The `ApplyResult`; a refused or failed group is logged with the counts."""
        if self.refused or self.failed:
            log.info("apply: zone=%s applied=%d refused=%d failed=%d",
                     zone, len(self.applied), len(self.refused), len(self.failed))
        return ApplyResult(applied=tuple(self.applied), refused=tuple(self.refused), failed=tuple(self.failed),
                           change_ids=tuple(self.change_ids))


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


class Gate(Protocol):
    """What an agent's request budget puts around one provider call (`request_gate`)."""

    def __call__(self, kind: str | None = None) -> None:
        """Before each request: wait for its token and the account's spacing (``kind``: a
        request of another kind than the call's, "read" inside an apply, is paid as that kind)."""

    def again(self, exc: ThrottledError, attempt: int) -> bool:
        """A request was throttled (it did nothing): wait as the service asked and say whether
        to send that request again (False: give up, the error goes to the caller)."""
        ...


_GATE: ContextVar[Gate | None] = ContextVar("gitdns_request_gate", default=None)


def _throttle(exc: Exception) -> ThrottledError | None:
    return exc if isinstance(exc, ThrottledError) else None


def send(request: Callable[[], T], throttled: Callable[[Exception], ThrottledError | None] = _throttle,
         kind: str | None = None) -> T:
    """Send ONE request to the service: every request a provider sends goes through here (each
    page of a listing, each batch, each record set written).

    When an agent's budget pays for the call (`request_gate`), the gate first waits for the
    request's token.  A request the service throttled did nothing, so the gate waits what the
    service asked (Retry-After, or a backoff) and sends **that request** again, alone: a call of
    many requests (Route53's batches, Google's change per group, Azure's record sets one by one,
    a listing's pages) never sends again a request that already landed, which a retry of the
    whole call would (an Azure group's ownership TXT, written, then sent again with
    ``If-None-Match: *``, is refused as stale).  ``throttled`` tells a throttling answer from
    the others (the gitdns error for it, or None) for a provider whose request raises its
    service's own errors; other errors pass through unchanged.  ``kind`` ("read", "write") says
    what the request is where that differs from the call (a read inside an apply).  Without a
    gate (the CLI) a throttle is raised to the caller."""
    gate = _GATE.get()
    attempt = 0
    while True:
        if gate is not None:
            gate(kind)
        try:
            return request()
        except Exception as exc:
            mapped = throttled(exc)
            if mapped is None:
                raise
            if gate is None or not gate.again(mapped, attempt):
                if mapped is exc:
                    raise
                raise mapped from None
            attempt += 1


_PROGRESS: ContextVar[Progress] = ContextVar("gitdns_apply_progress", default=NO_PROGRESS)


@contextmanager
def reporting(progress: Progress) -> Iterator[None]:
    """Run provider calls with ``progress`` told of the changes each apply lands, as they land
    (a batch, a change group, a record set at a time: `ApplyOutcome.land`, `landed`).  Without
    it (the agent) the steps go nowhere."""
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def landed(zone: str, done: int, total: int) -> None:
    """``done`` of the ``total`` changes an apply to ``zone`` was given have landed."""
    progress = _PROGRESS.get()
    if progress is not NO_PROGRESS:
        progress.step(done, total or None, f"writing {zone}")


@contextmanager
def request_gate(gate: Gate) -> Iterator[None]:
    """Run a provider call with ``gate`` around each request it sends (`send`)."""
    token = _GATE.set(gate)
    try:
        yield
    finally:
        _GATE.reset(token)
