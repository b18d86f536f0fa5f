"""The agent's parts, passed in at construction as one `AgentPorts` object.

The wiring (`gitdns.agent.main`) builds them from real adapters; tests build them from fakes
the same way.  Hooks that need to know about the agent get an `AgentView` when they are
called, so nothing is patched into the agent after it is built.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gitdns.adapters.leases import Lease
from gitdns.agent.delegate import DelegationSource
from gitdns.core.desired import Desired, HeadInfo
from gitdns.core.health.filter import HealthTarget
from gitdns.core.model import Cluster, Mode, Revision, Zone
from gitdns.core.status.report import ClusterReport
from gitdns.reconcile.engine import ProviderFactory, from_files
from gitdns.reconcile.zonepass import REAL_TIME, Pacing, ZoneOutcome


class Fetched(Protocol):
    sha: str
    revision: Revision
    message: str
    author: str
    files: dict[str, str]


class Source(Protocol):
    """The desired branch (gitdns.adapters.git.source.GitSource)."""

    def remote_head(self) -> str: ...
    def fetch(self, sha: str | None = None) -> Any: ...
    def is_descendant(self, new: str, old: str) -> bool: ...
    def files_at(self, sha: str) -> dict[str, str]: ...
    def revision_at(self, sha: str) -> Revision: ...


class HealthSource(Protocol):
    """The DNSPolicy probes (gitdns.agent.health.MonitorHealth)."""

    def set_targets(self, targets: list[HealthTarget]) -> None: ...
    def unhealthy(self) -> frozenset[str]: ...
    def states(self) -> Mapping[str, Mapping[str, Any]]: ...
    def take_changed(self) -> bool: ...


class StatusSink(Protocol):
    def publish(self, report: ClusterReport) -> str | None: ...


@dataclass(frozen=True, slots=True)
class AgentView:
    """What hooks may know of the agent when they run."""

    cluster: Cluster | None  # the Cluster git names for this agent (the last known one)
    mode: Mode
    current: Desired | None  # the desired state in force


class Wake:
    """"Run a pass now": the probes and the webhook fire it, the scheduler listens."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[str], None]] = []

    def listen(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def fire(self, why: str) -> None:
        for listener in self._listeners:
            listener(why)


ReportHook = Callable[[ClusterReport, Desired | None], None]
# a commit's files as a Desired (root, files, head): `gitdns.reconcile.engine.from_files`
DesiredLoader = Callable[[Path, dict[str, str], HeadInfo], Desired]


def load_desired(root: Path, files: dict[str, str], head: HeadInfo) -> Desired:
    return from_files(root, files, head)
LeaseBuilder = Callable[[Desired, Cluster, list[Zone], Mode], Lease]


@dataclass(slots=True)
class AgentPorts:
    source: Source
    factory: ProviderFactory
    clock: Callable[[], float]
    rng: random.Random = field(default_factory=random.Random)
    status: StatusSink | None = None
    lease: Lease | None = None  # a fixed lease; otherwise ``lease_builder`` chooses one
    lease_builder: LeaseBuilder | None = None  # called once the cluster's zones are known
    probes: HealthSource | None = None
    # the fleet's (unhealthy, total) targets per host, other clusters than the given id
    fleet_health: Callable[[str], Mapping[str, tuple[int, int]]] | None = None
    restore: Callable[[str], str | None] | None = None  # the applied revision our status branch holds
    identity_check: Callable[[Cluster | None], None] | None = None  # refuses to run as another cluster
    delegation: DelegationSource | None = None  # a primary's view of the remotes' status branches
    configmap_mode: Callable[[], str | None] = lambda: None  # the mode ConfigMap
    mode_env: Mapping[str, str] | None = None  # where GITDNS_MODE / DNS_MODE are read (None: the process's)
    report_hooks: tuple[ReportHook, ...] = ()
    poll_hooks: tuple[Callable[[AgentView], None], ...] = ()  # after every poll
    load_hooks: tuple[Callable[[AgentView], None], ...] = ()  # after a revision is loaded, before any zone
    on_apply: Callable[[str, ZoneOutcome], None] | None = None
    wake: Wake = field(default_factory=Wake)
    pacing: Pacing = REAL_TIME  # the clock and pauses of a pass's stale-write retries
    loader: DesiredLoader = load_desired  # a fetched commit's files as a Desired
