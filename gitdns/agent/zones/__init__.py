"""Which zones a pass reconciles, under which desired state, and when each is validated again.

Validation holds per zone: a zone the new revision breaks keeps the last desired state under
which it validated (also after a restart: the applied revision's files).  A zone that left the
cluster, or a Cluster removed from git, is still reconciled so its records are removed.

Which zones it left is known from the passes of a running agent and from the revision it
applied; after a start, every zone in git it does not publish in is also read once
(`gitdns.core.plan.leave`): one that still holds an ownership TXT or a heartbeat of its own is
reconciled as left too, whatever the state directory remembers.  A left zone is reconciled until
nothing of the cluster is left in it (`forget`), then no more.

The package's other modules: `work` — One zone, one pass, in the agent: the pipeline for its
role, then what only a running agent does around it (what the report shows of the pass, the ….
`primed` — A whole-zone read lent to the zone's next pass in the same cycle.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from pathlib import Path

from gitdns.agent import identity
from gitdns.agent.config import AgentConfig
from gitdns.agent.ports import DesiredLoader, Source, load_desired
from gitdns.agent.roles import Role
from gitdns.agent.state import AgentState, ZoneTrack
from gitdns.core import builder
from gitdns.core.desired import Desired, HeadInfo
from gitdns.core.model import Cluster, DesiredState, Mode, Publisher, Zone
from gitdns.core.plan.leave import holds
from gitdns.core.records import ZoneSnapshot
from gitdns.errors import GitdnsError, RetryableError
from gitdns.reconcile.zonepass import ZoneOutcome

log = logging.getLogger(__name__)

Planned = tuple[Zone, Desired, bool]  # (zone, the desired state to use for it, held?)
ReadZone = Callable[[Zone], ZoneSnapshot]  # a whole-zone read through the agent's provider factory


class Zones:
    def __init__(self, state: AgentState, config: AgentConfig, source: Source, role: Role,
                 rng: random.Random, loader: DesiredLoader = load_desired) -> None:
        self.state = state
        self.loader = loader
        self.config = config
        self.source = source
        self.role = role
        self.rng = rng
        self.root = Path(config.state_dir)
        self._restart_checked = False  # the applied revision's zones were looked at after a start
        self._reader: ReadZone | None = None
        self._looked: set[str] = set()  # zones read for our leftovers since the start
        self._finished: set[str] = set()  # left zones cleaned up: not reconciled again unless rejoined

    def lend_reader(self, read: ReadZone) -> None:
        """The zone reader of `gitdns.agent.zones.work.ZoneWork`, which holds the provider factory
        (given once, while the agent is built)."""
        self._reader = read

    def cluster_of(self, desired: Desired) -> Cluster | None:
        """The Cluster git names for us (by the configured id or name, else the last known id)."""
        known = self.state.known_cluster
        cluster = desired.state.cluster(self.config.cluster)
        if cluster is None and known is not None:
            cluster = desired.state.cluster(known.id)
        if cluster is not None and cluster != known:
            self.state.known_cluster = cluster
            identity.save_identity(self.root, cluster)
        return cluster

    def planned(self, desired: Desired) -> list[Planned]:
        """Every zone to reconcile this pass."""
        out: list[Planned] = []
        cluster = self.cluster_of(desired)
        if cluster is None and self.state.cluster_problem is not None:
            return self._hold_all()
        if cluster is None:
            self._track_removed_zones()
        wanted = self.role.zones(desired, cluster) if cluster else []
        names = {z.name for z in wanted}
        self._finished -= names  # rejoined
        if cluster is not None:
            self._track_applied_zones(cluster, names)
        self._track_held_zones(desired, cluster, names)
        for zone in wanted:
            if zone.name not in desired.blocked:
                out.append((zone, desired, False))
                continue
            track = self.state.tracks.get(zone.name) or self._track_from_applied(zone)
            if track is not None:
                out.append((zone, track.desired, True))
            else:
                self.state.held_without_state.add(zone.name)
        for name, track in self.state.tracks.items():
            if name not in names and name not in desired.blocked:
                out.append((self.zone_in(track.desired, name), desired, False))  # left the cluster
        return out

    def _track_removed_zones(self) -> None:
        """Our Cluster was removed from git: the zones it published (per the applied revision,
        or the last revision that named it) are tracked so its records are cleaned up, even by
        an agent that starts after the removal."""
        known = self.state.known_cluster
        old = self.desired_at(self.state.applied_sha) or self.state.history_desired
        if known is None or old is None:
            return
        cluster = old.state.cluster(known.id) or known
        for zone in builder.zones_for_cluster(old.state, cluster):
            if zone.name not in self._finished:
                self.state.tracks.setdefault(zone.name, ZoneTrack(old))

    def _track_applied_zones(self, cluster: Cluster, wanted: set[str]) -> None:
        """After a start: zones the cluster reconciled at the applied revision and no longer
        does are tracked, so its records there are removed as a running agent would."""
        if self._restart_checked or self.state.tracks or not self.state.applied_sha:
            return
        self._restart_checked = True
        old = self.desired_at(self.state.applied_sha)
        if old is None:
            return
        was = old.state.cluster(cluster.id) or cluster
        for zone in self.role.zones(old, was):
            if zone.name not in wanted:
                self.state.tracks.setdefault(zone.name, ZoneTrack(old))

    def _track_held_zones(self, desired: Desired, cluster: Cluster | None, wanted: set[str]) -> None:
        """Once after a start: zones in git we do not publish in but still hold something in
        (an ownership TXT or a heartbeat of ours) are tracked, so our records there are
        removed.  A zone whose read fails for a passing reason is read again on the next pass;
        one this agent has no provider for (credentials, fences, library) is not."""
        known = self.state.known_cluster
        owner = cluster.id if cluster is not None else (known.id if known is not None else "")
        if self._reader is None or not owner or self.role.mode is Mode.REMOTE:
            return  # a remote writes no zone (and holds no credentials)
        for zone in desired.state.zones:
            if (zone.name in wanted or zone.name in self._looked or zone.name in self.state.tracks
                    or zone.name in desired.blocked or zone.publisher is Publisher.KUADRANT):
                continue
            try:
                snapshot = self._reader(zone)
            except RetryableError as exc:  # read again on the next pass
                log.warning("looking for own records failed: zone=%s error=%s", zone.domain, exc)
                continue
            except Exception as exc:  # no provider for it here (credentials, fences, library): not again
                self._looked.add(zone.name)
                log.warning("looking for own records failed: zone=%s error=%s: %s; not tried again until a "
                            "restart", zone.domain, type(exc).__name__, exc)
                continue
            self._looked.add(zone.name)
            if holds(snapshot, owner):
                log.info("own records in a zone this cluster left: zone=%s owner=%s", zone.domain, owner)
                self.state.tracks[zone.name] = ZoneTrack(desired)

    def forget(self, name: str) -> None:
        """A left zone holds nothing of ours any more: stop reconciling it (until it is ours again)."""
        self.state.tracks.pop(name, None)
        self.state.heartbeats.pop(name, None)
        self.state.health_results.pop(name, None)
        self._finished.add(name)

    def _hold_all(self) -> list[Planned]:
        """Our own Cluster document is broken (or unknown): keep every zone as it was."""
        known = self.state.known_cluster
        old = self.desired_at(self.state.applied_sha)
        if old is not None and known is not None:
            for zone in builder.zones_for_cluster(old.state, known):
                if zone.name not in self.state.tracks:
                    self._track_from_applied(zone)
        return [(self.zone_in(t.desired, name), t.desired, True) for name, t in self.state.tracks.items()]

    def _track_from_applied(self, zone: Zone) -> ZoneTrack | None:
        """The last good state of a zone after a restart: the applied revision's files."""
        old = self.desired_at(self.state.applied_sha)
        if old is None or zone.name in old.blocked or old.state.zone(zone.name) is None:
            return None
        track = self.state.tracks[zone.name] = ZoneTrack(old)
        return track

    @staticmethod
    def zone_in(desired: Desired, name: str) -> Zone:
        zone = desired.state.zone(name)
        assert zone is not None
        return zone

    def desired_at(self, sha: str | None) -> Desired | None:
        if not sha:
            return None
        try:  # with its revision: a zone held at it reports it as its last good revision
            return self.loader(self.root, self.source.files_at(sha), HeadInfo(self.source.revision_at(sha), "", ""))
        except GitdnsError:
            return None

    def state_at(self, sha: str) -> DesiredState | None:
        if self.state.applied_state is not None and sha == self.state.applied_sha:
            return self.state.applied_state
        old = self.desired_at(sha)
        return old.state if old is not None else None

    # --- the validation schedule ---------------------------------------------------------
    def track(self, zone: Zone, desired: Desired) -> ZoneTrack:
        track = self.state.tracks.get(zone.name)
        if track is None:
            track = self.state.tracks[zone.name] = ZoneTrack(desired)
        return track

    def schedule(self, zone: Zone, desired: Desired, outcome: ZoneOutcome, now: float, soon: bool = False) -> None:
        """Validate soon (5 s + jitter) after a write or a failure, or when asked (``soon``: a
        change pass that found nothing to write reads its keys again); otherwise back off to the
        quiet period, each step no sooner than the agent's share of the account pays for a
        validation (`ZoneTrack.quiet_floor`): at a thousand clusters the ramp after a rollout
        would otherwise spend the whole account on validations and starve every change."""
        track = self.track(zone, desired)
        if zone.name not in desired.blocked:
            track.desired = desired
        track.memory.last = outcome
        delay = self.config.validate_delay
        if outcome.applied or outcome.pending_after_apply or outcome.errors or soon:
            track.interval = delay
            track.next_validation = now + delay + self.rng.uniform(0, delay)
        elif track.next_validation is None or track.next_validation <= now:
            quiet = max(self.config.quiet_period, track.quiet_floor)
            track.interval = min(max(track.interval * 2, delay), quiet)
            # up to a quarter longer, at random: a fleet rolled out together would otherwise
            # validate together at every step of the ramp (at 100 Route53 agents, 3 times the
            # steady rate in the minute after a push)
            track.next_validation = now + max(track.interval, track.quiet_floor) * self.rng.uniform(1.0, 1.25)

    def due(self, now: float) -> list[tuple[str, ZoneTrack]]:
        return [(n, t) for n, t in self.state.tracks.items()
                if t.next_validation is not None and t.next_validation <= now]

    def next_validation(self) -> float | None:
        times = [t.next_validation for t in self.state.tracks.values() if t.next_validation is not None]
        return min(times) if times else None
