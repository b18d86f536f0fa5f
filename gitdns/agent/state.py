"""What the agent keeps between passes, in one place (the report reads it, the cycle writes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitdns.adapters.leases import LeaseState
from gitdns.agent.gitwait import GitWait
from gitdns.core.conditions import Condition
from gitdns.core.desired import Desired
from gitdns.core.health.filter import HealthResult
from gitdns.core.model import Cluster, DesiredState
from gitdns.core.status.report import ClusterReport
from gitdns.reconcile.zonepass import ZoneMemory, ZoneOutcome


@dataclass(slots=True)
class ZoneTrack:
    """One zone between cycles: the state its passes read and update (`ZoneMemory`, held by
    reference by each pass) and the validation schedule."""

    desired: Desired  # the last desired state under which this zone validated
    next_validation: float | None = None
    interval: float = 0.0
    quiet_floor: float = 0.0  # the quiet interval's floor: what the agent's budget affords (gitdns.agent.zones.work)
    quiet_cost: int = 0  # requests the last quiet validation sent (what the next one waits to afford)
    read_cost: int = 0  # the most names one pass of this zone read by name (a validation's cost before one ran)
    memory: ZoneMemory = field(default_factory=ZoneMemory)

    @property
    def last(self) -> ZoneOutcome | None:
        return self.memory.last


@dataclass(slots=True)
class AgentState:
    applied_sha: str | None = None
    applied_state: DesiredState | None = None
    fetched_sha: str | None = None
    current: Desired | None = None  # the desired state in force
    tracks: dict[str, ZoneTrack] = field(default_factory=dict)
    source_condition: Condition = field(
        default_factory=lambda: Condition("SourceAvailable", True, "GitOperationSucceeded"))
    lease_state: LeaseState | None = None
    last_report: ClusterReport | None = None
    known_cluster: Cluster | None = None  # the last Cluster git named for us
    cluster_problem: Condition | None = None  # git names no usable Cluster for us
    history_desired: Desired | None = None  # the last revision that named our Cluster
    heartbeats: dict[str, float] = field(default_factory=dict)  # zone name -> when our heartbeat was refreshed
    held_without_state: set[str] = field(default_factory=set)  # held zones with no last good state known
    health_results: dict[str, HealthResult] = field(default_factory=dict)  # zone name -> last health filtering
    group_results: dict[str, dict[str, Any]] = field(default_factory=dict)  # zone domain -> groups verdict
    revision_loaded_at: float | None = None  # when a new revision was loaded (the health grace window)
    status_push: Condition | None = None  # how the last push of the status branch went
    push_failures: int = 0  # failed pushes of the status branch since the start (the metrics count them)
    git_wait: GitWait = field(default_factory=GitWait)  # the desired branch's fetch backs off alone
    push_wait: GitWait = field(default_factory=GitWait)  # and so does the status push
    refused_head: str | None = None  # a head refused (signature): not fetched again until it moves
