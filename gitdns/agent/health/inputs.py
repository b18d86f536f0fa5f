"""What the probes say, as a zone pass takes it: unhealthy target ids, the hosts whose every
target is down (fail open), and the hosts whose withdrawals are frozen because much of the
fleet's targets for them fail at once (or a new revision was loaded moments ago, when a
failing probe may be a wrong health path just merged).

The probes cover every target of the hosts this cluster publishes with a health check — its
own and the other clusters' addresses for those hosts, from git (`gitdns.core.health.filter.
host_targets`) — so each agent judges "every
target of the host is unhealthy" from its own probes (`gitdns.core.health.filter.
every_target_down`) and all agents reach the same verdict whatever order they saw the failures
in.  The verdict goes to the zone pass as ``<host>|*`` among the unhealthy ids: nothing of that
host is withdrawn (docs/health.md, "DNSPolicy targets")."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from gitdns.agent.ports import HealthSource
from gitdns.agent.state import AgentState
from gitdns.core.desired import Desired
from gitdns.core.health.filter import HostTargets, every_target_down, fail_open_id, fleet_frozen, host_targets
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
        self.hosts: dict[str, HostTargets] = {}  # host -> every target of it, the fleet's
        self._built_for: tuple[object, Cluster | None] | None = None

    def update_targets(self, desired: Desired, cluster: Cluster | None) -> None:
        if self.probes is None:
            return
        if self._built_for is None or self._built_for[0] is not desired.state or self._built_for[1] != cluster:
            self.hosts = host_targets(desired.state, cluster) if cluster is not None else {}
            self._built_for = (desired.state, cluster)
        self.probes.set_targets([t for ht in self.hosts.values() for t in ht.targets])

    def changed(self) -> bool:
        """A target changed state since the last look (the probes mark it)."""
        return self.probes is not None and self.probes.take_changed()

    def inputs(self) -> tuple[frozenset[str], frozenset[str]]:
        """(unhealthy target ids, each host whose every target is down as its ``host|*``; hosts
        whose withdrawals are frozen).  A host failing open is never frozen: nothing of it is
        withdrawn either way, and the condition says which it is.  The fleet's shares are read
        only when one of this cluster's own targets is unhealthy (only its own are withdrawn)."""
        if self.probes is None:
            return frozenset(), frozenset()
        unhealthy = self.probes.unhealthy()
        own = {t.target_id for ht in self.hosts.values() for t in ht.targets if t.own}
        if not unhealthy & own:
            return unhealthy, frozenset()
        down = every_target_down(self.hosts, unhealthy)
        if down:
            unhealthy = unhealthy | {fail_open_id(h) for h in down}
        shares = self._fleet_shares()
        for host, (bad, total) in self._own_shares(unhealthy).items():
            other_bad, other_total = shares.get(host, (0, 0))
            shares[host] = (bad + other_bad, total + other_total)
        loaded = self.state.revision_loaded_at
        fresh = loaded is not None and self.clock() - loaded < self.revision_grace
        if fresh:  # a new revision: freeze even a lone failing target
            return unhealthy, fleet_frozen(shares, self.freeze_share, minimum=1) - down
        return unhealthy, fleet_frozen(shares, self.freeze_share) - down

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
        """This cluster's own targets per host: (unhealthy, total), as its ``health.yaml`` counts
        them (the other clusters' come from their own reports)."""
        out: dict[str, tuple[int, int]] = {}
        for host, ht in self.hosts.items():
            mine = [t.target_id for t in ht.targets if t.own]
            if mine:
                out[host] = (sum(1 for t in mine if t in unhealthy), len(mine))
        return out
