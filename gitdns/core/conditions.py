"""Conditions and the closed set of reasons (docs/agent.md lists them with their meaning).

Types follow Flux: ``Ready`` (the summary), ``Reconciling``, ``Stalled`` (needs a human),
plus ``UnresolvedConflictDiscovered`` (Kuadrant's "Distributed DNS Load Balancing" RFC) and the
source/lease/health conditions.

A condition's status is two-valued here (True/False; Kubernetes' ``Unknown`` is not used): what
was not measured says so in its reason, e.g. ``Healthy`` True with ``NoTargetsProbed`` (nothing
is withdrawn, and no probe answered), never ``TargetsHealthy``.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPES = (
    "Ready",
    "Reconciling",
    "Stalled",
    "SourceAvailable",
    "UnresolvedConflictDiscovered",
    "LeaseHeld",
    "Healthy",
    "GroupsDivergedFromGit",
    "ModeMatchesGit",
    "Delegation",
    "StatusPublished",
)

REASONS = frozenset({
    # Ready
    "ReconcileSucceeded",
    "ReconcileFailed",
    "Progressing",
    # source
    "GitOperationSucceeded",
    "GitUnreachable",
    "GitConnectionRefused",
    "SignatureRefused",
    "RollbackRefused",
    "ValidationFailed",
    "RevisionNotFound",
    "AuthenticationFailed",
    "HostKeyMismatch",
    "HostKeyUnknown",
    "KeyPermissions",
    "KeyMissing",
    "RepositoryNotFound",
    "TLSVerificationFailed",
    "PushDeclined",
    "CacheBusy",
    "CacheUnreadable",
    "GitTimeout",
    "StatusPushRefused",
    "StatusPushRaced",
    "StatusCacheError",
    "StatusPushed",
    "StatusPushFailed",
    # zones
    "ZoneHeld",
    "ProviderUnreachable",
    "ProviderError",
    "Throttled",
    "StaleWriteRetried",
    "MassChangeRefused",
    "StoreBusy",
    "StoreCorrupt",
    "InvalidConfiguration",
    "DefaultProviderNotFound",
    "MultipleDefaultProviders",
    # the load-balancing RFC's vocabulary, and the planner's conflict reasons
    "RecordsMissing",
    "ConflictingStrategyDiscovered",
    "ConflictingValues",
    "RecordTypeConflict",
    "ForeignRecordInTheWay",
    "DeadEndCNAME",
    "NewerRevisionSeen",
    "TargetsLabelOverflow",
    # one writer per owner
    "LeaseAcquired",
    "LeaseHeldByAnother",
    "ClusterIdMismatch",
    # failover groups
    "ZoneSerialAhead",
    "GroupsLevelWithGit",
    # DNSPolicy health
    "TargetsHealthy",
    "NoTargetsProbed",
    "TargetsWithdrawn",
    "AllTargetsUnhealthy",
    "WithdrawalsFrozen",
    # modes and delegation through git
    "ModeAsGit",
    "ModeOverridden",
    "RemotesMerged",
    "RemotesStale",
    "RemoteRecordsRefused",
    "DelegatedToPrimaries",
    "DelegationUnreadable",
    "NoPrimaryInGit",
    # the Gateway's PolicyAffected condition (Kuadrant's DNSPolicy RFC)
    "PolicyApplied",
    "PolicyInvalid",
})


@dataclass(frozen=True, slots=True, order=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str = ""

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"condition reason {self.reason!r} is not in the closed set")

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": "True" if self.status else "False",
                "reason": self.reason, "message": self.message}
