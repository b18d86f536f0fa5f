"""Plan values: what the planner decided, and why (conflicts and notes are data)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from gitdns.core.model import Revision
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet

# The closed set of conflict reasons the planner reports (docs/records.md lists them).
CONFLICT_REASONS = (
    "ConflictingValues",  # two owners on one revision (or a foreign owner) want other content
    "ConflictingStrategyDiscovered",  # simple vs loadbalanced on one host
    "RecordTypeConflict",  # CNAME vs A/AAAA (A wins) at one name
    "ForeignRecordInTheWay",  # a record with no ownership TXT where we want to write
    "DeadEndCNAME",  # a CNAME inside the root host pointing at a name nobody publishes
    "NewerRevisionSeen",  # a co-owner applied a newer revision: we yield and fetch
)


class PlanMode(StrEnum):
    SYNC = "sync"  # create, update and delete
    UPSERT_ONLY = "upsert-only"  # never delete or shrink
    CREATE_ONLY = "create-only"  # only create what is missing


class Authority(StrEnum):
    OWN = "own"  # own values only (the default)
    INACTIVE_GROUPS = "inactive-groups"  # also remove inactive failover groups' records
    PRUNE_OWNER = "prune-owner"  # remove one (dead) owner's records: operator-run


@dataclass(frozen=True, slots=True)
class Intent:
    """What one owner wants in one zone."""

    owner: str
    records: tuple[RecordSet, ...]
    revision: Revision | None = None
    group: str | None = None


@dataclass(frozen=True, slots=True)
class PlanPolicy:
    zone: str
    mode: PlanMode = PlanMode.SYNC
    authority: Authority = Authority.OWN
    active_groups: frozenset[str] = frozenset()  # INACTIVE_GROUPS: groups that stay
    prune_owner: str | None = None  # PRUNE_OWNER: the owner removed
    known_owners: tuple[str, ...] = ()  # owner ids named in git (join/leave guards)
    registry: bool = True  # ownership TXT on (False: zone registry "none")
    max_change_fraction: float = 0.30
    min_managed: int = 10
    reviewed: bool = False  # the changes follow from a reviewed removal/switch
    acknowledged: bool = False  # git acknowledges a mass change for this zone
    force: bool = False  # --force on the CLI


@dataclass(frozen=True, slots=True)
class Conflict:
    key: RecordKey
    reason: str
    message: str
    owners: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    zone: str
    owner: str
    authority: Authority
    changes: tuple[Change, ...] = ()
    guards: tuple[Guard, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    notes: tuple[str, ...] = ()
    managed: int = 0  # data records the owner manages in the zone before the plan
    stalled: str | None = None  # e.g. "MassChangeRefused": nothing may be applied
    revision: Revision | None = None
    counts: dict[str, int] = field(default_factory=dict)
    refused: tuple[Change, ...] = ()  # a preview of a stalled plan: what the guard refused to write

    @property
    def empty(self) -> bool:
        return not self.changes

    @property
    def yielded(self) -> bool:
        return any(c.reason == "NewerRevisionSeen" for c in self.conflicts)

    @property
    def real_conflicts(self) -> tuple[Conflict, ...]:
        """Conflicts that need an operator (yielding to a newer revision does not)."""
        return tuple(c for c in self.conflicts if c.reason != "NewerRevisionSeen")

    @property
    def applicable(self) -> tuple[Change, ...]:
        """What may be written: nothing while stalled."""
        return () if self.stalled else self.changes

    def summary(self) -> dict[str, int]:
        out = {"create": 0, "update": 0, "delete": 0}
        for change in self.changes:
            out[change.action.value] += 1
        return out


def annotated(plan: Plan, notes: tuple[str, ...] | list[str]) -> Plan:
    """``plan`` with ``notes`` added after its own (each once): what the builder says about the
    owner's hosts (`gitdns.core.builder.notes_for_zone`), shown wherever the plan is."""
    extra = tuple(n for n in dict.fromkeys(notes) if n not in plan.notes)
    return replace(plan, notes=(*plan.notes, *extra)) if extra else plan


def data_changes(changes: tuple[Change, ...] | list[Change]) -> list[Change]:
    return [c for c in changes if c.group == c.key]


def is_delete(change: Change) -> bool:
    return change.action is Action.DELETE
