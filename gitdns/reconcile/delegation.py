"""Delegation inputs of a zone pass (the Kuadrant "cluster-aware delegation" design).

A **remote** reconciles no zone: per zone it builds its records, withdraws its unhealthy
targets and reports the result as ``endpoints`` on its status branch (`remote_endpoints`).
A **primary** merges every fresh remote's records into its own (`PrimaryInputs`, the
pipeline's merge step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gitdns.core import builder
from gitdns.core.delegation import Payload
from gitdns.core.desired import Desired
from gitdns.core.health.filter import HealthResult, apply_health
from gitdns.core.model import Cluster, Zone
from gitdns.core.records import RecordSet

# a remote's heartbeat moves every this many poll intervals (primaries withdraw it after
# --stale-after of them, at least 2 and by default 6)
REMOTE_HEARTBEAT_POLLS = 2.0


def remote_heartbeat_granularity(poll_interval: float) -> float:
    return max(poll_interval * REMOTE_HEARTBEAT_POLLS, 1.0)


def remote_endpoints(desired: Desired, cluster: Cluster, zone: Zone, unhealthy: frozenset[str],
                     frozen: frozenset[str]) -> tuple[tuple[RecordSet, ...], HealthResult | None]:
    """What a remote asks primaries to publish in ``zone``: its records after health.  Weight 0
    is used for a fully unhealthy weighted row; a primary whose provider cannot take weight 0
    withdraws the row instead."""
    records = builder.desired_for_zone(desired.state, cluster, zone)
    if not unhealthy:
        return records, None
    hosts = builder.build_hosts(desired.state, cluster, zone)
    result = apply_health(records, hosts, unhealthy, frozen=frozen, weight_zero=True)
    return tuple(result.records), result


@dataclass(frozen=True, slots=True)
class PrimaryInputs:
    """What a primary's zone pass merges: the remotes git knows and their payloads."""

    remotes: tuple[Cluster, ...]
    payloads: Mapping[str, Payload]  # cluster id -> payload for this zone
    now: float
    stale_after: float
    default_poll: float
    peers: tuple[str, ...] = ()  # the other primaries' cluster ids (their claims are kept in step)
    reviewed: bool = False  # the remotes' contributions changed: their removals are not a mass change
