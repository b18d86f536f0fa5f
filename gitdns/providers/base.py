"""The provider protocol (ARCHITECTURE.md §3).

A provider implements `zones()`, `read()` and `apply()` and declares `capabilities`.  It
never diffs, never decides ownership and never chooses a retry policy: the planner decides
what to write, the agent decides when to retry.  Conversion to and from the native shape
and batching are pure functions beside each provider.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from gitdns.core.records import Change, Guard, RecordKey, ZoneSnapshot


class Routing(StrEnum):
    NONE = "none"  # plain DNS: no set identifiers
    WEIGHTED = "weighted"  # weighted rows only
    GEO = "geo"  # weighted and geo rows


class CasGranularity(StrEnum):
    NONE = "none"  # the service cannot refuse a stale write (window documented)
    RECORD = "record"  # per record set (exact match, ETag, prerequisite)
    ZONE = "zone"  # whole-zone version


@dataclass(frozen=True, slots=True)
class Capabilities:
    record_types: frozenset[str]
    routing: Routing
    cas: CasGranularity
    guards: bool = False  # can it make a group conditional on other names (absent/present)?
    max_changes_per_batch: int = 0  # 0: unlimited
    max_values_per_batch: int = 0
    max_chars_per_batch: int = 0
    weight_zero_allowed: bool = True
    geo_codes: str = "any"  # "any" | "route53" | "google" | "azure": which codes it accepts
    # request budgets of the service (§5), per account; 0: unlimited.  The agent owns the
    # budget (a token bucket per account); providers only report throttling.
    reads_per_minute: float = 0.0
    writes_per_minute: float = 0.0
    # read cost: records per page of a whole-zone read (0: the whole zone in one call, as a
    # local file or an AXFR); per-name reads cost one call per name
    page_size: int = 0


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
