"""The agent's reconcile cycle: a list of steps with one signature.

    fetch → load → reconcile (the zone pipeline, per zone) → report

Each step takes the `Cycle` (this pass's scratch state) and returns whether to go on.  What
survives between passes is in `AgentState`; the agent's parts (git source, status branch,
provider factory, lease, probes, clock) come in as one `AgentPorts`.  Nothing is deleted because
something could not be read; a failing step leaves the last good revision in force.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from gitdns.adapters.leases import Lease, LeaseState, NoLease
from gitdns.agent.applied import save_applied
from gitdns.agent.config import AgentConfig
from gitdns.agent.discovery import Discovery, GatewayReader, default_reader
from gitdns.agent.health.inputs import HealthInputs
from gitdns.agent.loading import Cycle, Loading
from gitdns.agent.ports import AgentPorts, AgentView
from gitdns.agent.reporting import Reporter
from gitdns.agent.roles import Role
from gitdns.agent.state import AgentState
from gitdns.agent.zones import Zones
from gitdns.agent.zones.work import ZoneWork
from gitdns.core.desired import Desired
from gitdns.core.status.report import ClusterReport
from gitdns.errors import GitdnsError
from gitdns.reconcile.zonepass import ZoneOutcome

log = logging.getLogger(__name__)

__all__ = ["Agent", "Cycle", "files_of"]


class Agent:
    def __init__(self, config: AgentConfig, ports: AgentPorts, gateways: GatewayReader | None = None) -> None:
        self.config = config
        self.ports = ports
        self.state = AgentState()
        self.lease: Lease = ports.lease or NoLease()
        self.role = Role(configured=config.mode, poll_interval=config.poll_interval, stale_after=config.stale_after,
                         clock=ports.clock, configmap=ports.configmap_mode, delegation=ports.delegation,
                         env=ports.mode_env)
        self.zones = Zones(self.state, config, ports.source, self.role, ports.rng, ports.loader)
        self.health = HealthInputs(self.state, ports.probes, ports.fleet_health, ports.clock)
        self.work = ZoneWork(self.state, config, ports, self.role, self.zones, self.health)
        # discovered gateways (gitdns.agent.discovery): read on every poll, from ``gateways`` (else
        # the Kubernetes API when in a pod)
        self.discovery = Discovery(gateways or default_reader(), ports.clock)
        self._polled = False  # the discovered gateways were read this pass
        self.loading = Loading(self.state, config, ports, self.role, self.zones, self._changed,
                               self.work.groups_moved, self.work.own_revision)
        self.reporter = Reporter(self.state, config, self.role, ports, self.zones, self.discovery)
        self._identity_check = ports.identity_check  # checked once, on the first reconcile
        self._lease_builder = ports.lease_builder  # used once, when the cluster's zones are known
        self._saved: str | None = None  # the applied revision last recorded in the state directory

    @property
    def last_report(self) -> ClusterReport | None:
        return self.state.last_report

    @property
    def serving(self) -> bool:
        """``/readyz``: a desired revision is loaded and no other agent holds this owner's lease,
        so the agent serves what it reconciles from it (its webhook among them).  Not the Ready
        condition: a conflict or a held zone shows
        in /status, the conditions and the metrics, and must not take the pod out of the
        Service that delivers the webhook bringing the fix."""
        report = self.state.last_report
        if report is None or self.state.current is None:
            return False
        # a standby (another holder has the lease) writes nothing: it stays out of the Service
        return not any(c.type == "LeaseHeld" and not c.status and c.reason == "LeaseHeldByAnother"
                       for c in report.conditions)

    def view(self) -> AgentView:
        return AgentView(self.state.known_cluster, self.role.mode, self.state.current)

    # --- the poll ----------------------------------------------------------------
    def run(self, trigger: str = "poll", *, force: bool = False) -> Cycle:
        """One pass.  With the revision unchanged and no validation due it returns after one
        remote ref check: no provider call, no status push."""
        cycle = Cycle(trigger)
        self._polled = False
        source_before = self.state.source_condition
        reported = False
        steps: tuple[tuple[str, Callable[[Cycle], bool]], ...] = (
            ("fetch", lambda c: self.loading.fetch(c, force)), ("load", self.loading.load),
            ("reconcile", self._reconcile), ("report", self._report))
        try:
            for name, step in steps:
                if not step(cycle):
                    break
                reported = name == "report"
        finally:
            if reported:
                pass
            elif self.state.current is not None and self.reporter.push_due():
                self.reporter.publish()  # the last status push failed: try again, on its own backoff
            elif self.state.source_condition != source_before:
                self.refresh_report()  # the source went away, came back or refused the head: say so now
            self._poll_hooks()
            self.work.drop_primed()
        return cycle

    def next_git_attempt(self) -> float | None:
        """Seconds until a git operation that failed is tried again (None: nothing waits)."""
        now = self.ports.clock()
        waits = [self.state.git_wait.remaining(now)]
        if self.reporter.push_pending():
            waits.append(self.state.push_wait.remaining(now))
        known = [w for w in waits if w is not None]
        return min(known) if known else None

    def git_kicked(self, desired_branch: bool = False) -> None:
        """A webhook delivery: the next pass tries git at once, whatever the backoff; a push to
        the desired branch is fetched without listing the branch first."""
        self.state.git_wait.reset()
        self.state.push_wait.reset()
        if desired_branch:
            self.loading.directed_fetch()

    def _changed(self) -> bool:
        """A probe changed state or a discovered gateway changed: a pass is due (both are read)."""
        moved = self._poll_gateways()
        return self.health.changed() or moved

    def _poll_gateways(self) -> bool:
        self._polled = True
        current = self.state.current
        return self.discovery.poll(self.zones.cluster_of(current)) if current is not None else False

    def _poll_hooks(self) -> None:
        view = self.view()
        for hook in self.ports.poll_hooks:
            try:
                hook(view)
            except Exception as exc:
                log.warning("poll hook failed: error=%s: %s", type(exc).__name__, exc)

    def refresh_report(self) -> None:
        """Rebuild the report without publishing it (the remote may be the thing that is down)."""
        self.state.last_report = self.reporter.shown()

    def report(self) -> ClusterReport:
        return self.reporter.report()

    def _report(self, cycle: Cycle) -> bool:
        self.reporter.publish()
        return True

    # --- per zone ----------------------------------------------------------------
    def _acquire(self) -> bool:
        state, builder = self.state, self._lease_builder
        if isinstance(self.lease, NoLease) and builder is not None and state.current is not None:
            cluster = self.zones.cluster_of(state.current)
            if cluster is not None:
                self.lease = builder(state.current, cluster, self.role.zones(state.current, cluster), self.role.mode)
                self._lease_builder = None
        try:
            state.lease_state = self.lease.acquire()
        except GitdnsError as exc:
            state.lease_state = LeaseState(False, "unknown", 0.0, f"lease: {exc}")
        if not state.lease_state.held:
            log.warning("lease held: %s", state.lease_state.message)
        return state.lease_state.held

    def _reconcile(self, cycle: Cycle) -> bool:
        desired = cycle.desired
        assert desired is not None
        self.state.held_without_state = set()
        if self._identity_check is not None:
            self._identity_check(self.zones.cluster_of(desired))
            self._identity_check = None
        cluster = self.zones.cluster_of(desired)
        if not self._polled:
            self._poll_gateways()
        if self.discovery.blocking(cluster):
            return True  # a discovered gateway never read: nothing is reconciled (Ready says why)
        desired = cycle.desired = self.state.current = self.discovery.substitute(desired, cluster)
        can_write = self._acquire()
        self.health.update_targets(desired, self.zones.cluster_of(desired))
        for zone, zdesired, held in self.zones.planned(desired):
            outcome = self.work.run(zone, zdesired, desired, can_write)
            if held:
                outcome.skipped = "held: this revision does not validate for the zone; the last good one stays"
            cycle.outcomes.append(outcome)
            cycle.wrote = cycle.wrote or outcome.applied > 0
            cycle.yielded = cycle.yielded or bool(outcome.plan and outcome.plan.yielded)
        if cycle.fetched is not None and can_write and not any(o.errors for o in cycle.outcomes):
            if self._saved != cycle.fetched.sha:
                save_applied(self.zones.root, cycle.fetched.sha)
                self._saved = cycle.fetched.sha
            self.state.applied_sha = cycle.fetched.sha
            self.state.applied_state = desired.state
        return True

    # --- validation loop (Kuadrant's DNS controller: re-check after a write) ----------------
    def validate(self, outcomes: list[ZoneOutcome] | None = None) -> int:
        """Re-check due zones; re-apply where own records are missing or overwritten.
        Returns the number of zones re-applied; each pass's outcome is added to ``outcomes``."""
        desired = self.state.current
        if desired is None:
            return 0
        reapplied = 0
        can_write: bool | None = None
        for name, track in self.zones.due(self.ports.clock()):
            zone = self.zones.zone_in(track.desired, name)
            wait = self.work.postpone(zone, track)
            if wait > 0:  # a validation waits until the share affords it and a change after it
                # up to half as long again, at random: a fleet's buckets fill at the same pace, and
                # its validations, all waiting for them, would otherwise come due together (at
                # 1,000 Route53 agents: 800 throttled requests a minute)
                track.next_validation = self.ports.clock() + wait * self.ports.rng.uniform(1.0, 1.5)
                continue
            if can_write is None:
                can_write = self._acquire()
            outcome = self.work.run(zone, track.desired, desired, can_write, validation=True)
            reapplied += 1 if outcome.applied else 0
            if outcomes is not None:
                outcomes.append(outcome)
        if can_write:
            self._applied_by_validation(desired)
        if can_write is not None:
            self.reporter.publish()
        return reapplied

    def _applied_by_validation(self, desired: Desired) -> None:
        """A revision whose own pass failed (a write refused too long, a throttled read) is
        applied once the validation loop brought every zone level with it: recorded as applied,
        as its pass would have, so the next revision is read as a change from it (and not as a
        restart that looks for what its records carry)."""
        state = self.state
        sha = state.fetched_sha
        if state.applied_sha is not None or sha is None or not state.tracks or desired.blocked:
            return
        if all(t.last is not None and t.last.ok and not t.last.pending_after_apply for t in state.tracks.values()):
            save_applied(self.zones.root, sha)
            self._saved = sha
            state.applied_sha, state.applied_state = sha, desired.state

    def validation_due(self) -> bool:
        return bool(self.zones.due(self.ports.clock()))

    def next_validation(self) -> float | None:
        return self.zones.next_validation()


def files_of(report: ClusterReport, dump: Callable[[Mapping[str, Any]], str]) -> dict[str, str]:
    from gitdns.core.status.report import documents

    return {path: dump(doc) for path, doc in documents(report).items()}
