"""The status documents an agent commits to its status branch (docs/agent.md).

Pure: values in, ``{path: document}`` out (the agent serialises them deterministically).
No field changes every cycle: the heartbeat is coarse (rounded down to the hour), so a
status commit happens only when something an operator cares about changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitdns.core.conditions import Condition
from gitdns.core.plan.fmt import record_dict
from gitdns.core.plan.values import Plan
from gitdns.core.records import RecordSet

HEARTBEAT_GRANULARITY = 3600


@dataclass(frozen=True, slots=True)
class ZoneReport:
    zone: str  # domain
    provider: str
    held: bool = False
    problems: tuple[str, ...] = ()
    owned: tuple[RecordSet, ...] = ()  # what this owner wants published (the endpoint payload)
    plan: Plan | None = None  # the last plan (its conflicts are reported)
    applied_revision: str | None = None
    error: str = ""
    change_ids: tuple[str, ...] = ()
    missing: int = 0  # changes a fresh read still wanted after the last apply (RecordsMissing)
    # remote mode (delegation through git): the records this cluster asks primaries to publish, after health
    endpoints: tuple[RecordSet, ...] | None = None
    # primary mode: what was published for each remote (cluster id -> Verdict.as_dict())
    delegation: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # what the layouts of this cluster's hosts in the zone leave out (flattened, no addresses):
    # the same notes as the plan's, changing only with the revision
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterReport:
    cluster: str
    cluster_id: str
    mode: str
    group: str | None
    desired_revision: str | None
    applied_revision: str | None
    attempted_revision: str | None
    conditions: tuple[Condition, ...]
    zones: tuple[ZoneReport, ...]
    policies: Mapping[str, Sequence[str]] = field(default_factory=dict)  # policy -> hosts here
    heartbeat: float = 0.0
    # target id (host|address) -> {state, since, checks, lastError}; empty without health checks
    health: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # zone -> {group, active, activeGroups, serial, diverged}; empty when no zone has groups
    groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    poll_interval: float = 0.0  # primaries judge a remote stale by it
    # how coarse the heartbeat is: an hour, or for a remote a few poll intervals (liveness)
    heartbeat_granularity: float = HEARTBEAT_GRANULARITY
    # discovered gateways ("namespace/name" -> gateway_entry(...)); empty when none is discovered
    gateways: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # not Ready only because of some zones (held, stalled, errors) or of the status push: the other
    # zones' policies are published, so each policy is judged by its own hosts' zones
    zones_only: bool = False
    rejected_policies: tuple[str, ...] = ()  # DNSPolicy documents that did not validate at this revision

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status for c in self.conditions)


def _conflicts(plan: Plan | None) -> list[dict[str, Any]]:
    if plan is None:
        return []
    return [{"reason": c.reason, "key": str(c.key), "message": c.message, "owners": list(c.owners)}
            for c in plan.conflicts]


def _sorted_records(records: Iterable[RecordSet]) -> list[dict[str, object] | None]:
    return [record_dict(r) for r in sorted(records, key=lambda r: (r.name, r.type, r.set_id))]


def zone_document(report: ZoneReport) -> dict[str, Any]:
    doc = {
        "zone": report.zone,
        "provider": report.provider,
        "held": report.held,
        "problems": list(report.problems),
        "appliedRevision": report.applied_revision,
        "owned": _sorted_records(report.owned),
        "conflicts": _conflicts(report.plan),
        "stalled": report.plan.stalled if report.plan is not None else None,
        "error": report.error,
        "recordsMissing": report.missing,
        "lastChangeIds": list(report.change_ids),
    }
    if report.notes:
        doc["notes"] = list(report.notes)
    if report.endpoints is not None:
        doc["endpoints"] = _sorted_records(report.endpoints)
    if report.delegation:
        doc["delegation"] = {k: dict(v) for k, v in sorted(report.delegation.items())}
    return doc


def _policy_status(report: ClusterReport) -> dict[str, Any]:
    """Per DNSPolicy: ready when its hosts' zones were reconciled (a zone held, stalled or in
    error keeps its last published DNS, and the policies with hosts there are not ready); when
    the cluster is not Ready for another reason, none is."""
    held_zones = {z.zone for z in report.zones if z.held or z.error or (z.plan is not None and z.plan.stalled)}
    out: dict[str, Any] = {}
    for policy, hosts in sorted(report.policies.items()):
        lagging = sorted(h for h in hosts if any(h == z or h.endswith("." + z) for z in held_zones))
        ready = (report.ready or report.zones_only) and not lagging
        message = ("published" if ready else
                   "the last published DNS has been preserved: " + (", ".join(lagging) or "not ready"))
        out[policy] = {"ready": ready, "hosts": sorted(hosts), "message": message}
    for policy in sorted(set(report.rejected_policies) - set(out)):
        out[policy] = {"ready": False, "hosts": [], "message": "its DNSPolicy document does not validate at this "
                       "revision: the last published DNS has been preserved"}
    return out


def heartbeat_value(now: float, granularity: float) -> int:
    step = max(granularity, 1.0)
    return int(now // step * step)


def summary_document(report: ClusterReport) -> dict[str, Any]:
    return {
        "cluster": report.cluster,
        "clusterId": report.cluster_id,
        "mode": report.mode,
        "group": report.group,
        "desiredRevision": report.desired_revision,
        "appliedRevision": report.applied_revision,
        "attemptedRevision": report.attempted_revision,
        "ready": report.ready,
        "conditions": [c.as_dict() for c in sorted(report.conditions)],
        "policies": _policy_status(report),
        "heartbeat": heartbeat_value(report.heartbeat, report.heartbeat_granularity),
        "pollInterval": report.poll_interval,
    }


def documents(report: ClusterReport) -> dict[str, dict[str, Any]]:
    """``{relative path: document}`` for the status branch."""
    docs = {"summary.yaml": summary_document(report)}
    for zone in report.zones:
        docs[f"zones/{zone.zone}.yaml"] = zone_document(zone)
    if report.groups:
        docs["groups.yaml"] = {"zones": {k: dict(v) for k, v in sorted(report.groups.items())}}
    if report.gateways:
        docs["gateways.yaml"] = {"gateways": {k: dict(v) for k, v in sorted(report.gateways.items())}}
    if report.health:
        docs["health.yaml"] = {"targets": {k: dict(v) for k, v in sorted(report.health.items())}}
    return docs


# --- discovered gateways (gateways.yaml; docs/agent.md, "Gateways discovered from the cluster") ---

GATEWAY_STATES = ("observed", "missing", "unobserved")


def gateway_entry(state: str, observed_at: str, addresses: Iterable[str] = (),
                  listeners: Iterable[tuple[str, str]] = (), message: str = "") -> dict[str, Any]:
    """One discovered gateway as published: ``state`` observed (the Gateway read, its addresses
    and listeners as read), missing (no such Gateway: it publishes nothing) or unobserved (never
    read: nothing published for it); ``observed_at`` (UTC, ISO 8601) when what it says was first
    read (empty when never); ``message`` why the last read failed or what was left out."""
    if state not in GATEWAY_STATES:
        raise ValueError(f"gateway state must be one of {GATEWAY_STATES}, not {state!r}")
    return {"state": state, "observedAt": observed_at, "addresses": sorted(addresses),
            "listeners": [{"hostname": h, "name": n} if n else {"hostname": h} for h, n in sorted(listeners)],
            "message": message}


@dataclass(frozen=True, slots=True)
class PublishedGateway:
    """A discovered gateway as a cluster's status branch last published it."""

    state: str
    observed_at: str
    addresses: tuple[str, ...]
    listeners: tuple[tuple[str, str], ...]  # (hostname, listener name)
    message: str = ""


def published_gateways(doc: Mapping[str, Any]) -> dict[tuple[str, str], PublishedGateway]:
    """``gateways.yaml`` read back, keyed by (namespace, name); entries that are not what
    `gateway_entry` writes are left out (never guessed)."""
    out: dict[tuple[str, str], PublishedGateway] = {}
    entries = doc.get("gateways") if isinstance(doc, Mapping) else None
    if not isinstance(entries, Mapping):
        return out
    for key, raw in entries.items():
        namespace, sep, name = str(key).partition("/")
        if not sep or not isinstance(raw, Mapping) or raw.get("state") not in GATEWAY_STATES:
            continue
        addresses = _list(raw.get("addresses"))
        listeners = _list(raw.get("listeners"))
        out[(namespace, name)] = PublishedGateway(
            str(raw["state"]), str(raw.get("observedAt") or ""),
            tuple(str(a) for a in addresses if isinstance(a, str)),
            tuple((str(ls["hostname"]), str(ls.get("name") or "")) for ls in listeners
                  if isinstance(ls, Mapping) and isinstance(ls.get("hostname"), str)),
            str(raw.get("message") or ""))
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def summary_line(report: ClusterReport) -> str:
    zones = len(report.zones)
    held = sum(1 for z in report.zones if z.held)
    conflicts = sum(len(z.plan.real_conflicts) for z in report.zones if z.plan is not None)
    parts = [f"{zones} zone(s)"]
    if held:
        parts.append(f"{held} held")
    if conflicts:
        parts.append(f"{conflicts} conflict(s)")
    return ", ".join(parts)


def not_ready_reasons(conditions: Iterable[Condition]) -> list[str]:
    return sorted({c.reason for c in conditions if c.type == "Ready" and not c.status})
