"""What one plan works on (`gitdns.core.plan.planner`): the decoded zone (`Observed`), the plan's
state (`PlanContext`: intent, policy and what the plan has decided so far), and the
ownership facts every part of the planner asks — which values an owner claims, at which
revision it last wrote them, and whether the plan's authority removes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gitdns.core.model import Revision
from gitdns.core.plan.values import Authority, Conflict, Intent, PlanPolicy
from gitdns.core.records import Change, Guard, RecordKey, RecordSet
from gitdns.core.registry import OwnershipEntry


@dataclass(slots=True)
class Observed:
    """The decoded zone: data records, and ownership entries by data key."""

    data: dict[RecordKey, RecordSet] = field(default_factory=dict)
    owners: dict[RecordKey, dict[str, OwnershipEntry]] = field(default_factory=dict)
    by_name: dict[str, tuple[RecordKey, ...]] = field(default_factory=dict)
    complete: bool = True


def claimed(entry: OwnershipEntry, current: RecordSet | None) -> tuple[str, ...]:
    """The values an owner claims: its per-target label, else the record's values."""
    if entry.labels.targets is not None:
        return entry.labels.targets
    return current.values if current is not None else ()


def revision_of(entry: OwnershipEntry) -> Revision | None:
    return Revision.parse(entry.labels.rev) if entry.labels.rev else None


def same_commit(rev: Revision, mine: Revision) -> bool:
    """Whether an owner's revision is this plan's commit.  `Revision` orders by commit time
    alone, so two commits made in the same second compare equal; an owner on the other one is
    on no newer revision and on no same one (their order is unknown): the plan goes ahead, and
    whichever owner is behind follows when it loads the newest commit.  Taken for the same,
    every owner yielded to the others for good (a TTL or a CNAME target changed by the second
    of two commits in one second never reached the zone).  Labels keep 7 characters of the sha."""
    return rev == mine and rev.sha[:7] == mine.sha[:7]


@dataclass(slots=True)
class PlanContext:
    intent: Intent
    policy: PlanPolicy
    obs: Observed
    desired: dict[RecordKey, RecordSet]
    changes: list[Change] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    frozen_hosts: set[str] = field(default_factory=set)
    # a strategy switch this owner carries out (`planresolve.find_strategy_conflicts`): the
    # root hosts switching, and the (key, owner) claims on the old top record that the newer
    # revision overrides (read as no claim; the TXT stays for its owner to withdraw)
    switching: set[str] = field(default_factory=set)
    stale: set[tuple[RecordKey, str]] = field(default_factory=set)
    read_names: frozenset[str] | None = None  # a per-name read: only these names are known
    final: dict[RecordKey, RecordSet | None] = field(default_factory=dict)
    final_owners: dict[RecordKey, tuple[str, ...]] = field(default_factory=dict)  # tuples: one per key planned

    def conflict(self, key: RecordKey, reason: str, message: str, owners: Iterable[str] = ()) -> None:
        self.conflicts.append(Conflict(key, reason, message, tuple(sorted(owners))))


def stale_claim(ctx: PlanContext, entry: OwnershipEntry) -> bool:
    """An old-strategy claim a strategy switch on a newer revision overrides."""
    return (entry.key, entry.owner) in ctx.stale


def removed_by_authority(ctx: PlanContext, entry: OwnershipEntry) -> bool:
    policy = ctx.policy
    if entry.owner == ctx.intent.owner:
        return False
    if policy.authority is Authority.PRUNE_OWNER:
        return entry.owner == policy.prune_owner
    if policy.authority is Authority.INACTIVE_GROUPS:
        group = entry.labels.group  # an empty active set means every group is active
        return bool(group) and bool(policy.active_groups) and group not in policy.active_groups
    return False
