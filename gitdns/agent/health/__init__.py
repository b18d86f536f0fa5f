"""The agent's DNSPolicy probes: the HealthMonitor behind the cycle's HealthSource protocol.

Targets come from the hosts this cluster publishes whose policy has a health check: every
address of those hosts, this cluster's and the other clusters' (`gitdns.core.health.filter.
fleet_targets`), so the agent knows on its own when every target of a host is down (fail open,
docs/health.md).  Each is probed on its own schedule, all concurrently.  A state change marks the
agent dirty and pokes the scheduler, so a failed target leaves DNS in one cycle, not at the next
poll.  `unhealthy` answers for every target probed; `states` (the status branch's ``health.yaml``)
only for this cluster's own.

Probe headers (``healthCheck.headersSecret``) come from `gitdns.providers.probeheaders.ProbeHeaders`,
read again whenever the targets are set; a Secret the operator does not list (``--headers-secrets``)
or one that cannot be read is said once in the log and probed without (or with the headers read
before).  Every probe connection passes the monitor's gate with the operator's ``--probe-allow-ranges``.

The package's other module: `inputs` — What the probes say, as a zone pass takes it: unhealthy
target ids, the hosts whose every target is down (fail open), and the hosts whose withdrawals ….
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from gitdns.adapters.probes import HealthMonitor
from gitdns.core.health import HealthSettings, ProbeSpec, State, TargetHealth, probe_spec, published
from gitdns.core.health.filter import HealthTarget
from gitdns.core.names import lb_host
from gitdns.core.reach import ProbeReach
from gitdns.errors import GitdnsError

log = logging.getLogger(__name__)


HeaderSource = Callable[[str], tuple[tuple[str, str], ...]]  # raises GitdnsError (``kept``: headers read before)


class MonitorHealth:
    def __init__(self, on_change: Callable[[], None], headers: HeaderSource | None = None,
                 reach: ProbeReach = ProbeReach()) -> None:  # noqa: B008 - frozen value
        self.on_change = on_change
        self.headers = headers
        self.monitor = HealthMonitor(on_change=self._changed, reach=reach)
        self._header_errors: dict[str, str] = {}  # headersSecret -> the error said last (said once)
        self.settings: dict[str, HealthSettings] = {}
        self.started = False
        self.current: dict[str, tuple[ProbeSpec, HealthSettings]] = {}
        self.own: frozenset[str] = frozenset()  # this cluster's target ids (the others' are probed too)
        self._changed_flag = threading.Event()

    def _changed(self, target_id: str, before: TargetHealth, after: TargetHealth) -> None:
        log.info("target %s: target=%s of=%s error=%s", after.state.value, target_id,
                 "this-cluster" if target_id in self.own else "another-cluster", after.last_error or "-")
        self._changed_flag.set()
        self.on_change()

    def take_changed(self) -> bool:
        """Whether a target changed state since the last call (the next pass re-plans)."""
        changed = self._changed_flag.is_set()
        self._changed_flag.clear()
        return changed

    def _read_headers(self, names: set[str]) -> dict[str, tuple[tuple[str, str], ...]]:
        """Each headersSecret's headers, read once per call; an unreadable or unlisted one: the
        headers read before, else none (said once in the log, never with a value)."""
        found: dict[str, tuple[tuple[str, str], ...]] = {}
        for name in sorted(names):
            if self.headers is None:
                found[name] = ()
                continue
            try:
                found[name] = self.headers(name)
            except GitdnsError as exc:
                kept = getattr(exc, "kept", None)
                found[name] = kept or ()
                if self._header_errors.get(name) != str(exc):
                    log.warning("probe headers unavailable: secret=%s reason=%s %s", name, exc.reason, exc)
                self._header_errors[name] = str(exc)
            else:
                self._header_errors.pop(name, None)
        return found

    def set_targets(self, targets: list[HealthTarget]) -> None:
        wanted: dict[str, tuple[ProbeSpec, HealthSettings]] = {}
        secrets = self._read_headers({t.check.headers_secret for t in targets if t.check.headers_secret})
        for target in targets:
            headers = secrets[target.check.headers_secret] if target.check.headers_secret else ()
            spec = probe_spec(target.target_id, target.check, target.address, host=lb_host(target.host),
                              headers=headers)
            wanted[target.target_id] = (spec, HealthSettings.for_policy(target.check))
        self.own = frozenset(t.target_id for t in targets if t.own)
        if wanted == self.current:
            return
        self.current = wanted
        self.settings = {k: v[1] for k, v in wanted.items()}
        if wanted and not self.started:
            self.monitor.start()
            self.started = True
        self.monitor.set_targets(wanted)

    def unhealthy(self) -> frozenset[str]:
        """Every target probed (this cluster's and the others') that its health does not publish."""
        snap = self.monitor.snapshot()
        return frozenset(k for k, h in snap.items() if k in self.settings and not published(h, self.settings[k]))

    def states(self) -> Mapping[str, Mapping[str, Any]]:
        """Per target of this cluster: the state, and the error while unhealthy (no counters or
        times: the status branch would change every probe).  The other clusters' targets are
        left out: each cluster's ``health.yaml`` speaks of its own."""
        out: dict[str, dict[str, Any]] = {}
        for key, health in self.monitor.snapshot().items():
            if key not in self.own:
                continue
            doc: dict[str, Any] = {"state": health.state.value}
            if health.state is State.UNHEALTHY and health.last_error:
                doc["error"] = health.last_error[:120]
            out[key] = doc
        return out

    def stop(self) -> None:
        if self.started:
            self.monitor.stop()
