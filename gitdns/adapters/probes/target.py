"""A target on the monitor's loop (`_Target`: its probe, built once, its schedule and health),
and what the monitor tells of its targets (`ProbeTiming`, `MonitorStats`)."""

from __future__ import annotations

from dataclasses import dataclass

from gitdns.adapters.probes.wire import _request_ends, request_parts
from gitdns.core.health import HealthSettings, ProbeSpec, TargetHealth, is_ip, spec_error


@dataclass(frozen=True, slots=True)
class ProbeTiming:
    """The last round of one target: how long it took and when it ended (monitor clock)."""

    last_round_duration: float
    last_check_time: float


@dataclass(frozen=True, slots=True)
class MonitorStats:
    targets: int
    in_flight: int
    completed: int  # probes finished since start
    skipped_slots: int  # scheduled rounds not run because an earlier one overran
    max_start_lag: float  # the latest a round started after its due time (seconds)
    stalled: int = 0  # probes whose timeout was inconclusive: the loop stalled during them


class _Target:
    """One target on the monitor's loop: its probe, built once, and its schedule."""

    __slots__ = ("begun", "due", "duration", "ended", "ends", "error", "fast", "health", "host", "late", "live",
                 "refusal", "request_size", "resolve", "retry", "settings", "spec", "stalls", "started", "tid")

    def __init__(self, tid: str, spec: ProbeSpec, settings: HealthSettings) -> None:
        self.tid = tid
        self.spec = spec
        self.settings = settings
        # the request, built once (`request_parts`): its ends shared with other targets, the Host value its own
        head, self.host, tail = request_parts(spec)
        self.ends = _request_ends(spec.path, spec.protocol, spec.headers)
        self.request_size = len(head) + len(self.host) + len(tail)
        self.error = spec_error(spec)  # reported instead of probing
        self.resolve = not is_ip(spec.address)  # a host name: resolved (and judged) at every probe
        # an IP literal: the connection gate's verdict ("" allowed), the same at every probe (the reach is
        # fixed), given by `Prober.destination` at the target's first probe; None until then
        self.refusal: str | None = None
        self.fast = spec.protocol == "HTTP" and not self.resolve  # a kept connection may serve it directly
        self.health = TargetHealth()  # what is known of it (`observe`), read under the monitor's lock
        self.due = 0.0
        self.live = True  # False once removed or replaced: a round due or a probe in flight is then ignored
        self.started = 0.0
        self.duration = 0.0
        self.ended = 0.0
        self.begun = 0.0  # loop time the current probe started
        self.late = False  # the current probe timed out after a stall of the loop (`Prober.timed_out`)
        self.stalls = 0  # consecutive inconclusive probes (late timeouts)
        self.retry = False  # the current round is a probe again after an inconclusive one
