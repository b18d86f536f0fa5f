"""The agent's delegation mode and what it changes in a cycle: `Role`.

* ``default``: the cycle as it always was.
* ``remote``: no zone is read or written and no provider is built; per zone the agent builds
  its records, applies health and reports them as ``endpoints`` on its status branch.  Its
  heartbeat there moves every two poll intervals (liveness for primaries), so an idle remote
  still pushes a small commit that often.
* ``primary``: reads every status branch each poll (one fetch), publishes its own records plus
  every fresh remote's (`gitdns.core.delegation`) under its own owner id, keeps the other
  primaries' claims equal to the same merge, and reports per remote what it published.

The Agent calls the hooks below; the state kept between passes (the mode, the delegation
source, the remotes' verdicts per zone) lives here so the cycle stays one list of steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gitdns.agent.delegate import DelegationSource
from gitdns.agent.modes import ModeChoice, choose
from gitdns.core import builder
from gitdns.core.conditions import Condition
from gitdns.core.delegation import (
    STATE_INACTIVE,
    STATE_MISSING,
    STATE_STALE,
    Merged,
    Verdict,
    zones_for_primary,
)
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, Mode, Zone
from gitdns.core.records import RecordSet
from gitdns.core.status.report import HEARTBEAT_GRANULARITY, heartbeat_value
from gitdns.reconcile.delegation import PrimaryInputs, remote_heartbeat_granularity

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Role:
    configured: str = ""  # AgentConfig.mode: flag, GITDNS_MODE or the config file
    poll_interval: float = 60.0
    stale_after: float = 6.0
    configmap: Callable[[], str | None] = lambda: None
    env: Mapping[str, str] | None = None
    delegation: DelegationSource | None = None  # set by the wiring (primary)
    clock: Callable[[], float] = lambda: 0.0
    choice: ModeChoice = field(default_factory=lambda: ModeChoice(Mode.DEFAULT, "default"))
    git_mode: Mode | None = None
    endpoints: dict[str, tuple[RecordSet, ...]] = field(default_factory=dict)  # remote: zone name -> records
    verdicts: dict[str, tuple[Verdict, ...]] = field(default_factory=dict)  # primary: zone domain -> verdicts
    conflicts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # primary: zone domain -> merge conflicts
    sent_heartbeat: int | None = None
    primaries: tuple[str, ...] = ()  # the Clusters git names as primaries (a remote's report)
    last_inputs: dict[str, Any] = field(default_factory=dict)

    # --- the mode ----------------------------------------------------------------------
    @property
    def mode(self) -> Mode:
        return self.choice.mode

    def resolve(self, cluster: Cluster | None) -> None:
        """Choose the mode once per loaded revision (git may have changed spec.mode)."""
        self.git_mode = cluster.mode if cluster is not None else None
        before = self.choice
        self.choice = choose(configured=self.configured, env=self.env, configmap=self.configmap,
                             git_mode=self.git_mode)
        if before != self.choice:
            log.info("mode: mode=%s source=%s git=%s", self.mode.value, self.choice.source,
                     self.git_mode.value if self.git_mode else "none")

    # --- the poll ----------------------------------------------------------------------
    def note_primaries(self, desired: Desired) -> None:
        self.primaries = tuple(sorted(c.name for c in desired.state.clusters if c.mode is Mode.PRIMARY))

    def due(self, desired: Desired | None, cluster: Cluster | None) -> bool:
        """Work beyond a new revision: a primary's remotes changed (or went stale), or a
        remote's heartbeat is due."""
        if desired is None:
            return False
        if self.mode is Mode.PRIMARY and self.delegation is not None:
            return self.delegation.refresh(desired, cluster)
        if self.mode is Mode.REMOTE:
            return heartbeat_value(self.clock(), self.granularity) != self.sent_heartbeat
        return False

    def refresh_for_revision(self, desired: Desired, cluster: Cluster | None) -> None:
        """A new revision is being reconciled: a primary re-reads its remotes first."""
        if self.mode is Mode.PRIMARY and self.delegation is not None:
            self.delegation.refresh(desired, cluster)

    @property
    def granularity(self) -> float:
        if self.mode is Mode.REMOTE:
            return remote_heartbeat_granularity(self.poll_interval)
        return HEARTBEAT_GRANULARITY

    def reported(self, heartbeat: float) -> None:
        self.sent_heartbeat = heartbeat_value(heartbeat, self.granularity)

    # --- zones ---------------------------------------------------------------------------
    def zones(self, desired: Desired, cluster: Cluster) -> list[Zone]:
        if self.mode is Mode.PRIMARY and self.delegation is not None:
            return zones_for_primary(desired.state, cluster, self.delegation.remotes(desired, cluster.id))
        return builder.zones_for_cluster(desired.state, cluster)

    def primary_inputs(self, desired: Desired, cluster: Cluster, zone: Zone) -> PrimaryInputs | None:
        if self.mode is not Mode.PRIMARY or self.delegation is None or desired.state.cluster(cluster.id) is None:
            return None  # not a primary, or removed from git: it publishes nothing for others any more
        source = self.delegation
        remotes = tuple(source.remotes(desired, cluster.id))
        peers = tuple(c.id for c in desired.state.clusters if c.id != cluster.id and c.mode is Mode.PRIMARY)
        payloads = source.inputs.for_zone(zone.domain)
        key = f"{source.digest}|{desired.state.revision.sha if desired.state.revision else ''}"
        reviewed = self.last_inputs.get(zone.name) not in (None, key)
        self.last_inputs[zone.name] = key
        return PrimaryInputs(remotes, payloads, self.clock(), self.stale_after, self.poll_interval, peers,
                             reviewed)

    def record_merge(self, zone: Zone, merged: Merged) -> None:
        self.verdicts[zone.domain] = merged.verdicts
        self.conflicts[zone.domain] = merged.conflicts

    # --- the report ----------------------------------------------------------------------
    def zone_extras(self, zone: Zone) -> dict[str, Any]:
        if self.mode is Mode.REMOTE:
            return {"endpoints": self.endpoints.get(zone.name, ())}
        if self.mode is Mode.PRIMARY:
            delegation: dict[str, Any] = {v.cluster_id: v.as_dict() for v in self.verdicts.get(zone.domain, ())}
            problems = list(self.conflicts.get(zone.domain, ()))
            if self.delegation is not None:
                problems += [p for p in self.delegation.inputs.problems if zone.domain in p]
            for cid in delegation:
                delegation[cid]["problems"] = sorted(p for p in problems if cid in p)
            return {"delegation": delegation}
        return {}

    def conditions(self) -> list[Condition]:
        out = [self.choice.condition(self.git_mode)] if self.git_mode is not None else []
        if self.mode is Mode.REMOTE and not self.primaries:
            out.append(Condition("Delegation", False, "NoPrimaryInGit",
                                 "no Cluster in git has mode: primary: nothing publishes this cluster's records"))
        elif self.mode is Mode.REMOTE:
            count = sum(len(r) for r in self.endpoints.values())
            out.append(Condition("Delegation", True, "DelegatedToPrimaries",
                                 f"{count} record set(s) in {len(self.endpoints)} zone(s) on the status branch "
                                 f"for the primaries ({', '.join(self.primaries)})"))
        elif self.mode is Mode.PRIMARY:
            out.append(self._primary_condition())
        return out

    def _primary_condition(self) -> Condition:
        if self.delegation is not None and self.delegation.inputs.error:
            return Condition("Delegation", False, "DelegationUnreadable", self.delegation.inputs.error)
        verdicts = [v for vs in self.verdicts.values() for v in vs]
        stale = sorted({v.cluster_id for v in verdicts if v.state.startswith(STATE_STALE)})
        refused = sorted({v.cluster_id for v in verdicts if v.refused and not v.state.startswith(STATE_STALE)})
        merged = sorted({v.cluster_id for v in verdicts if v.state not in (STATE_STALE, STATE_MISSING,
                                                                            STATE_INACTIVE)})
        stale_text = f"withdrawn (status older than {self.stale_after:g} polls): {', '.join(stale)}"
        if refused:
            return Condition("Delegation", False, "RemoteRecordsRefused",
                             f"records refused (not in their Cluster in git) from {', '.join(refused)}; "
                             "the rest merged" + (f"; {stale_text}" if stale else ""))
        if stale:
            return Condition("Delegation", False, "RemotesStale", stale_text)
        return Condition("Delegation", True, "RemotesMerged",
                         f"published for {len(merged)} remote(s): {', '.join(merged) or 'none'}")
