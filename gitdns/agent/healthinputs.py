"""What the probes say, as a zone pass takes it: unhealthy target ids, and the hosts whose
withdrawals are frozen because much of the fleet's targets for them fail at once (or a new
revision was loaded moments ago, when a failing probe may be a wrong health path just merged)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from gitdns.agent.ports import HealthSource
from gitdns.agent.state import AgentState
from gitdns.core import builder
from gitdns.core.desired import Desired
from gitdns.core.healthfilter import HealthTarget, fleet_frozen, health_targets
from gitdns.core.model import Cluster
from gitdns.errors import GitdnsError

log = logging.getLogger(__name__)

FREEZE_SHARE = 0.5  # freeze a host's withdrawals once this share of the fleet's targets fails
REVISION_GRACE = 120.0  # seconds after a new revision in which any failing host is frozen


class HealthInputs:
    def __init__(self, state: AgentState, probes: HealthSource | None,
                 fleet: Callable[[str], Mapping[str, tuple[int, int]]] | None, clock: Callable[[], float]) -> None:
        self.state = state
        self.probes = probes
        self.fleet = fleet
        self.clock = clock
        self.freeze_share = FREEZE_SHARE
        self.revision_grace = REVISION_GRACE

    def update_targets(self, desired: Desired, cluster: Cluster | None) -> None:
        if self.probes is None:
            return
        targets: list[HealthTarget] = []
        if cluster is not None:
            for zone in builder.zones_for_cluster(desired.state, cluster):
                targets.extend(health_targets(builder.build_hosts(desired.state, cluster, zone)))
        self.probes.set_targets(targets)

    def changed(self) -> bool:
        """A target changed state since the last look (the probes mark it)."""
        return self.probes is not None and self.probes.take_changed()

    def inputs(self) -> tuple[frozenset[str], frozenset[str]]:
        """(unhealthy target ids, hosts whose withdrawals are frozen)."""
        if self.probes is None:
            return frozenset(), frozenset()
        unhealthy = self.probes.unhealthy()
        if not unhealthy:
            return unhealthy, frozenset()
        shares = self._fleet_shares()
        for host, (bad, total) in self._own_shares(unhealthy).items():
            other_bad, other_total = shares.get(host, (0, 0))
            shares[host] = (bad + other_bad, total + other_total)
        loaded = self.state.revision_loaded_at
        fresh = loaded is not None and self.clock() - loaded < self.revision_grace
        if fresh:  # a new revision: freeze even a lone failing target
            return unhealthy, fleet_frozen(shares, self.freeze_share, minimum=1)
        return unhealthy, fleet_frozen(shares, self.freeze_share)

    def _fleet_shares(self) -> dict[str, tuple[int, int]]:
        if self.fleet is None:
            return {}
        own = self.state.known_cluster.id if self.state.known_cluster else ""
        try:
            return dict(self.fleet(own))
        except GitdnsError as exc:
            log.warning("fleet health unavailable: error=%s", exc)
            return {}

    def _own_shares(self, unhealthy: frozenset[str]) -> dict[str, tuple[int, int]]:
        assert self.probes is not None
        out: dict[str, tuple[int, int]] = {}
        for target_id in self.probes.states():
            host = target_id.split("|", 1)[0]
            bad, total = out.get(host, (0, 0))
            out[host] = (bad + (1 if target_id in unhealthy else 0), total + 1)
        return out
