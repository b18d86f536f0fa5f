"""Every provider call the agent makes, counted and its faults classified (docs/agent.md,
"Faults and alerts").

`observed_factory` wraps the agent's provider factory: each zone's provider is an
`ObservedProvider` inside the request budget (`gitdns.agent.budget`), so a throttled answer the
budget waits out and retries is counted as well as one that ends the pass.  It counts
``gitdns_provider_calls_total{zone,op}`` and, for each fault, one of `PROVIDER_ERROR_KINDS` in
``gitdns_provider_errors_total{zone,kind}``: by the error's type (the adapters map their SDK's
errors onto `gitdns.errors`), never by its text.  Nothing is retried or swallowed here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

from gitdns.core.records import Change, Guard, ZoneSnapshot
from gitdns.errors import (
    AuthError,
    PermanentError,
    RetryableError,
    StaleWriteError,
    ThrottledError,
    TimedOutError,
    UnreachableError,
)
from gitdns.providers.base import ApplyResult, Capabilities, Provider, ZoneInfo

__all__ = ["ObservedProvider", "error_kind", "observed_factory", "result_kinds"]


class FaultSink(Protocol):
    def record_provider_call(self, zone: str, op: str, n: int = 1) -> None: ...

    def record_provider_error(self, zone: str, kind: str, n: int = 1) -> None: ...


def error_kind(exc: BaseException) -> str:
    """The fault kind of an error a provider call raised (the most specific type first)."""
    if isinstance(exc, ThrottledError):
        return "throttled"
    if isinstance(exc, TimedOutError):
        return "timeout"
    if isinstance(exc, UnreachableError):
        return "connection"
    if isinstance(exc, StaleWriteError):
        return "stale_write"
    if isinstance(exc, RetryableError):
        return "server_error"
    if isinstance(exc, AuthError):
        return "auth"
    if isinstance(exc, PermanentError):
        return "rejected"
    return "unexpected"


def result_kinds(result: ApplyResult) -> dict[str, int]:
    """The faults an apply's result reports: each group refused as stale, each group failed, and
    one partial batch when some groups landed and others did not."""
    kinds = {"stale_write": len(result.refused), "change_refused": len(result.failed),
             "partial_batch": 1 if result.applied and (result.refused or result.failed) else 0}
    return {kind: n for kind, n in kinds.items() if n}


class ObservedProvider:
    """The provider protocol, each call counted and its faults classified for one zone."""

    def __init__(self, inner: Provider, zone: str, sink: FaultSink) -> None:
        self.inner = inner
        self.zone = zone
        self.sink = sink
        self.name = inner.name
        self.capabilities: Capabilities = inner.capabilities
        self.account = getattr(inner, "account", inner.name)

    def __getattr__(self, item: str) -> object:  # views_dir and other extras of the inner provider
        return getattr(self.inner, item)

    def _call(self, op: str, fn: Callable[[], Any]) -> Any:
        self.sink.record_provider_call(self.zone, op)
        try:
            return fn()
        except Exception as exc:
            self.sink.record_provider_error(self.zone, error_kind(exc))
            raise

    def zones(self) -> list[ZoneInfo]:
        result: list[ZoneInfo] = self._call("zones", self.inner.zones)
        return result

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        if names is None:
            snapshot: ZoneSnapshot = self._call("read", lambda: self.inner.read(zone))
        else:
            snapshot = self._call("read", lambda: self.inner.read(zone, names))
        return snapshot

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        result: ApplyResult = self._call("apply", lambda: self.inner.apply(zone, changes, guards))
        for kind, n in result_kinds(result).items():
            self.sink.record_provider_error(self.zone, kind, n)
        return result


def observed_factory(plain: Callable[[Any], Provider], sink: FaultSink,
                     wrap: Callable[[Provider], Provider] = lambda provider: provider) -> Callable[[Any], Provider]:
    """The agent's provider factory: one provider per zone (built once), observed, then ``wrap``
    (the request budget: outside, so each throttled answer it retries is seen)."""
    built: dict[str, Provider] = {}

    def factory(zone: Any) -> Provider:
        if zone.name not in built:
            built[zone.name] = wrap(ObservedProvider(plain(zone), zone.domain, sink))
        return built[zone.name]

    return factory
