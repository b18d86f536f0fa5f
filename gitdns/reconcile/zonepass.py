"""The state of one zone pass, the closed set of step results, and what survives a pass.

A pass is one run of the pipeline for a (cluster, zone) pair.  Every step reads and writes the
one `ZonePass`; nothing is copied in or out.  What the agent keeps between passes (the last
intent, the zone's size, the groups serial pruned for) lives in a `ZoneMemory` that the pass
holds by reference: a step that learns something updates it in place.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from gitdns.core.delegation import Merged
from gitdns.core.desired import Desired
from gitdns.core.groups import Decision
from gitdns.core.health.filter import HealthResult
from gitdns.core.model import Cluster, Zone
from gitdns.core.plan.values import Intent, Plan, PlanMode
from gitdns.core.records import Change, Guard, RecordKey, RecordSet, ZoneSnapshot
from gitdns.errors import ConfigError
from gitdns.providers.base import ApplyResult, Capabilities, CasGranularity, Provider, Routing, ZoneInfo
from gitdns.reconcile.delegation import PrimaryInputs


class NoProvider:
    """The provider of a cluster that holds none (remote mode): any call is a bug, said so."""

    name = "none"
    capabilities = Capabilities(frozenset(), Routing.NONE, CasGranularity.NONE)

    def zones(self) -> list[ZoneInfo]:
        raise ConfigError("remote mode: this agent holds no provider")

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        raise ConfigError(f"remote mode: this agent holds no provider to read {zone}")

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        raise ConfigError(f"remote mode: this agent holds no provider to write {zone}")


NO_PROVIDER = NoProvider()


class Result(StrEnum):
    """What a step tells the pipeline (the closed set; the first that is not CONTINUE ends
    the pass, and only the role's closing steps run after it)."""

    CONTINUE = "continue"  # go on with the next step
    DONE = "done"  # nothing more to do in this zone this pass
    HELD = "held"  # writing is not allowed now (another agent holds the owner lease)
    STALLED = "stalled"  # the plan stalled (a guard refused it): nothing is written


@dataclass(frozen=True, slots=True)
class Failure:
    """A change group the provider did not write (a refusal that is not a stale read: re-planning
    does not help; the next pass tries again): the changes it held and why, as the provider said
    it, without the group's name in front."""

    group: RecordKey
    changes: tuple[Change, ...]
    why: str

    @property
    def error(self) -> str:
        """The error line's text: the group named once, then why."""
        return f"{self.group}: {self.why}"


@dataclass(slots=True)
class ZoneOutcome:
    """What a pass did in one zone (the value every entry point reports).  ``errors`` holds
    each error once, with its reason (a failed change group's among them: ``failed`` says
    which changes it held); ``pending_after_apply`` counts only what is missing for another
    reason (a co-owner wrote in between), never a failed group again."""

    zone: Zone
    plan: Plan | None = None
    applied: int = 0
    refused_retries: int = 0
    stale_out: bool = False  # the stale-write retries ran out of time: the validation loop takes over
    skipped: str = ""  # why nothing was planned (blocked, publisher kuadrant, ...)
    errors: list[str] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)  # change groups the provider did not write
    views: dict[str, str] = field(default_factory=dict)
    reloads: list[str] = field(default_factory=list)  # what telling the server to load the views did
    pending_after_apply: int = 0  # verify: changes a fresh plan still wants (RecordsMissing)
    result: Result = Result.CONTINUE  # how the pass ended
    steps: tuple[str, ...] = ()  # the steps that ran

    @property
    def ok(self) -> bool:
        return not self.errors and (self.plan is None or not self.plan.stalled)

    def fail(self, group: RecordKey, why: str, changes: Sequence[Change], context: str = "") -> None:
        """Record that the provider did not write ``group``: one error, the group named once
        (providers may name it in ``why`` already), however many times the pass tried it.
        ``context`` says which write it was when not the plan's (``retiring former primary x``)."""
        prefix = f"{group}:"
        why = why[len(prefix):].lstrip() if why.startswith(prefix) else why
        why = f"{context}: {why}" if context else why
        failure = Failure(group, tuple(c for c in changes if c.group == group), why)
        for i, known in enumerate(self.failed):
            if known.group == group:  # tried again this pass: its latest reason, in its place
                if known.error in self.errors:
                    self.errors[self.errors.index(known.error)] = failure.error
                self.failed[i] = failure if failure.changes else replace(failure, changes=known.changes)
                return
        self.failed.append(failure)
        self.errors.append(failure.error)

    @property
    def failed_groups(self) -> frozenset[RecordKey]:
        return frozenset(f.group for f in self.failed)

    def record(self, result: ApplyResult, changes: Sequence[Change], context: str) -> bool:
        """Count a write made beside the plan (mirroring the active groups, retiring a former
        primary, a peer's claims, leaving a zone): its applied changes, and each group the
        provider failed as one error saying which write it was.  Stale refusals are not errors
        (the next pass re-reads).  Returns whether everything landed."""
        self.applied += len(result.applied)
        for group, why in result.failed:
            self.fail(group, why, changes, context)
        return result.ok


@dataclass(slots=True)
class ZoneMemory:
    """What a zone keeps from one pass to the next (the agent holds one per zone; a one-shot
    run starts from an empty one)."""

    intent: tuple[RecordSet, ...] | None = None  # what the last successful pass wanted
    zone_size: int = 0  # records seen in the last whole-zone read (the read-cost estimate)
    pruned_serial: int | None = None  # the groups serial inactive groups were last pruned for
    cleaned: frozenset[str] | None = None  # merged remotes whose old claims a primary removed
    last: ZoneOutcome | None = None  # the last pass's outcome
    groups_watch: bool = False  # the zone has active groups: each poll checks its two TXT records
    groups_seen: tuple[object, ...] | None = None  # those records as last read (None: read again for a baseline)
    drift_due: float | None = None  # when a validation pass next reads the whole zone (the drift check)
    recheck: frozenset[RecordKey] = frozenset()  # groups the last write changed: the validation after it reads those


@dataclass(frozen=True, slots=True)
class Pacing:
    """The time a pass waits on: the clock, the pause and the jitter of its stale-write retries.
    Real time unless the caller gives its own (the agent passes its ports' pacing, so a
    simulation drives the retries in virtual time)."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    uniform: Callable[[float, float], float] = random.uniform


REAL_TIME = Pacing()


@dataclass(slots=True)
class ZonePass:
    zone: Zone
    desired: Desired  # the desired state in force for this zone (the last good one if held)
    cluster: Cluster
    provider: Provider
    can_write: bool  # the owner lease is held
    outcome: ZoneOutcome
    memory: ZoneMemory = field(default_factory=ZoneMemory)
    mode: PlanMode = PlanMode.SYNC
    force: bool = False  # --force: the mass-change guard is overridden
    intent: Intent | None = None
    notes: list[str] = field(default_factory=list)
    validation: bool = False  # a validation pass: check every owned name
    owners: tuple[str, ...] = ()  # owner ids git knows (their TXT names are read too)
    names: frozenset[str] | None = None  # what this pass reads; None: the whole zone
    always_verify: bool = False  # verify even a clean apply (one-shot runs)
    unhealthy: frozenset[str] = frozenset()  # target ids (host|address) the probes find unhealthy
    frozen: frozenset[str] = frozenset()  # hosts whose withdrawals are frozen
    health: HealthResult | None = None
    withdrawn: dict[RecordKey, RecordSet] = field(default_factory=dict)
    groups: Decision | None = None  # active failover groups, None: the zone has none
    inactive: bool = False  # this cluster's group is not active: it publishes nothing
    primary: PrimaryInputs | None = None  # primary mode: the remotes to publish for
    merged: Merged | None = None  # what the merge step made of them
    unchanged: bool = False  # the intent equals the last pass's: nothing was read
    endpoints: tuple[RecordSet, ...] = ()  # remote mode: what goes to the status branch
    pacing: Pacing = REAL_TIME  # the clock and pauses of the stale-write retries
    first_by_names: bool = False  # a first pass may read its intent's names (the agent never applied a revision)
    drift: bool = False  # a validation pass that reads the whole zone (the drift check)
    rechecked: bool = False  # a validation pass that read only what the last write changed
    attempted: frozenset[RecordKey] = frozenset()  # the groups this pass's first plan wrote (what verify reads)

    @property
    def reviewed(self) -> bool:
        """The primary's remotes changed: their removals are not a mass change."""
        return self.primary is not None and self.primary.reviewed
