"""DNSPolicy health in the records a cluster publishes (docs/health.md, "DNSPolicy targets").

An agent withdraws its own unhealthy targets and re-adds them on recovery:

- simple strategy: unhealthy addresses leave the host's A/AAAA values;
- loadbalanced: unhealthy addresses leave the cluster's A/AAAA name; when all of the
  cluster's addresses for the host are down, its weighted row goes to weight 0 where the
  provider allows (Route53 answers all-zero rows equally: a built-in fail open; Kuadrant keeps
  the row at full weight), else the row is withdrawn.  The geo rows of ``klb.H`` — the
  default-geo row among them — are never touched, so no geo loses its answer.

**Fail open.**  When every target of a host — every cluster's, not only this one's — is
unhealthy, nothing of the host is withdrawn: every cluster publishes all its targets, as
Route53 and Kuadrant's dns-operator answer with all records when all are unhealthy.  Each
agent probes every target of the hosts it publishes (`host_targets`, `fleet_targets`: its own
and the other clusters' addresses, from git), so every agent reaches the same verdict from its own probes
(`every_target_down`), whatever order the failures were detected in; the verdict travels to
`apply_health` as the target id ``<host>|*`` (`fail_open_id`) among the unhealthy ones.

Never the last path, while the agents' views still differ: `withdrawn` remembers what each
changed record was, and the plan step puts it back when a withdrawal would delete the record
outright (no other owner's value or row left).  Withdrawals freeze for hosts in ``frozen`` (a
large share of the fleet's targets failing at once, or right after a revision change: a wrong
health path merged to git must not become a global outage).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gitdns.core import builder
from gitdns.core.builder import BuiltHost
from gitdns.core.groups import is_active
from gitdns.core.model import Cluster, DesiredState, HealthCheck, Strategy, Zone
from gitdns.core.records import RecordKey, RecordSet

EVERY_TARGET = "*"  # the address of the host-level verdict "every target of the host is unhealthy"


@dataclass(frozen=True, slots=True)
class HealthTarget:
    """One address a cluster publishes for a host, and how to probe it.  ``own``: this
    cluster's (False: another cluster's target, probed only to know whether every target of
    the host is down; never withdrawn here nor reported on this cluster's status branch)."""

    host: str
    address: str
    check: HealthCheck
    own: bool = True

    @property
    def target_id(self) -> str:
        return f"{self.host}|{self.address}"


def fail_open_id(host: str) -> str:
    """The target id saying that every target of ``host`` is unhealthy: among the unhealthy
    ids given to `apply_health`, nothing of the host is withdrawn (fail open)."""
    return f"{host}|{EVERY_TARGET}"


def fail_open_hosts(unhealthy: Iterable[str]) -> frozenset[str]:
    """The hosts whose `fail_open_id` is among ``unhealthy``."""
    suffix = "|" + EVERY_TARGET
    return frozenset(t[: -len(suffix)] for t in unhealthy if t.endswith(suffix))


@dataclass(frozen=True, slots=True)
class HostTargets:
    """Every target of one host across the fleet: the health-checked addresses of each cluster
    publishing it (this cluster's marked ``own``), and whether some cluster publishes it
    without a check that can fail (no health check, or a host-name target, which is never
    probed): such a host always has a published target, so it never fails open."""

    host: str
    targets: tuple[HealthTarget, ...] = ()
    unchecked: bool = False


@dataclass(slots=True)
class HealthResult:
    records: list[RecordSet]
    withdrawn: dict[RecordKey, RecordSet] = field(default_factory=dict)  # key -> what it was
    unhealthy: dict[str, list[str]] = field(default_factory=dict)  # host -> addresses
    frozen: list[str] = field(default_factory=list)  # hosts whose withdrawals were frozen
    fail_open: list[str] = field(default_factory=list)  # hosts whose every target is down: all published
    notes: list[str] = field(default_factory=list)


def _address_records(built: BuiltHost) -> list[RecordSet]:
    return [r for r in built.records if r.type in ("A", "AAAA") and (
        built.strategy is Strategy.SIMPLE or r.name != built.host)]


def health_targets(hosts: Iterable[BuiltHost], *, own: bool = True) -> list[HealthTarget]:
    """Every (host, address) a policy with a health check asks to probe."""
    out: dict[str, HealthTarget] = {}
    for built in hosts:
        if built.health is None:
            continue
        for rec in _address_records(built):
            for value in rec.values:
                target = HealthTarget(built.host, value, built.health, own)
                out[target.target_id] = target
    return [out[k] for k in sorted(out)]


def fleet_targets(own: Iterable[BuiltHost], others: Iterable[BuiltHost],
                  unknown: Iterable[str] = ()) -> dict[str, HostTargets]:
    """For each host of ``own`` (this cluster's hosts) with a health check, every target of
    the host: this cluster's and those of ``others`` (the other clusters' hosts that publish
    in the zone; hosts this cluster does not publish are left out).  A target id both
    publish is this cluster's.  Hosts in ``unknown`` have a target whose address this
    cluster cannot know (another cluster's discovered gateway): they count as unchecked."""
    own = list(own)
    checked = {b.host for b in own if b.health is not None}
    targets: dict[str, dict[str, HealthTarget]] = {h: {} for h in checked}
    unchecked: set[str] = set(unknown) & checked
    for built, mine in [*((b, False) for b in others), *((b, True) for b in own)]:
        if built.host not in checked:
            continue
        found = health_targets([built], own=mine)
        if built.health is None or (not found and built.records):
            unchecked.add(built.host)
        for target in found:
            targets[built.host][target.target_id] = target
    return {h: HostTargets(h, tuple(targets[h][k] for k in sorted(targets[h])), h in unchecked)
            for h in sorted(checked)}


def host_targets(state: DesiredState, cluster: Cluster) -> dict[str, HostTargets]:
    """`fleet_targets` of every zone ``cluster`` publishes in: each host it publishes with a
    health check, with the targets of every other cluster publishing it (clusters of a
    failover group git marks inactive in the zone publish nothing there and are left out)."""
    out: dict[str, HostTargets] = {}
    others = [c for c in state.clusters if c.id != cluster.id]
    for zone in builder.zones_for_cluster(state, cluster):
        own = builder.build_hosts(state, cluster, zone)
        if not any(b.health is not None for b in own):
            continue
        active = [c for c in others if _publishes(state, zone, c)]
        peers = [b for c in active for b in builder.build_hosts(state, c, zone)]
        unknown = {b.host for b in own for c in active if _discovered_serves(state, zone, c, b.host)}
        out.update(fleet_targets(own, peers, unknown))
    return out


def _discovered_serves(state: DesiredState, zone: Zone, cluster: Cluster, host: str) -> bool:
    """Whether a gateway of ``cluster`` whose addresses only its own agent reads from its
    cluster (docs/agent.md, "Gateways discovered from the cluster") may serve ``host``: its
    listeners name it, or are discovered too and a policy would cover the host there."""
    for gateway in cluster.gateways:
        if not gateway.discovered:
            continue
        if gateway.discovered_listeners and not gateway.listeners:
            if builder.policy_for(state, zone, gateway, host) is not None:
                return True
        elif any(listener.hostname == host for listener in gateway.listeners):
            return True
    return False


def _publishes(state: DesiredState, zone: Zone, cluster: Cluster) -> bool:
    groups = state.groups_for_zone(zone.name)
    return is_active(cluster.group, frozenset(groups.groups) if groups is not None else frozenset())


def every_target_down(fleet: Mapping[str, HostTargets], unhealthy: Collection[str]) -> frozenset[str]:
    """The hosts of ``fleet`` where no target is published by its health: every target is
    among ``unhealthy`` (target ids; a target not in it counts as published) and none is
    unchecked.  A pure function of the set, so the order the failures came in never matters."""
    return frozenset(h for h, ht in fleet.items()
                     if ht.targets and not ht.unchecked and all(t.target_id in unhealthy for t in ht.targets))


def apply_health(records: Sequence[RecordSet], hosts: Iterable[BuiltHost], unhealthy: frozenset[str], *,
                 frozen: frozenset[str] = frozenset(), weight_zero: bool = True) -> HealthResult:
    """``records`` with this cluster's unhealthy targets withdrawn.  ``unhealthy`` holds
    target ids (``host|address``); a host whose `fail_open_id` is among them fails open: its
    unhealthy targets are reported and none is withdrawn."""
    by_key = {r.key: r for r in records}
    result = HealthResult(list(records))
    failing_open = fail_open_hosts(unhealthy)
    for built in hosts:
        if built.health is None:
            continue
        bad = {rec.key: [v for v in rec.values if f"{built.host}|{v}" in unhealthy]
               for rec in _address_records(built)}
        down = sorted({v for values in bad.values() for v in values})
        if not down:
            continue
        result.unhealthy[built.host] = sorted({*result.unhealthy.get(built.host, ()), *down})
        if built.host in failing_open:
            if built.host not in result.fail_open:
                result.fail_open.append(built.host)
                result.notes.append(f"{built.host}: every target of the host is unhealthy, in every cluster: "
                                    "all are published (fail open)")
            continue
        if built.host in frozen:
            result.frozen.append(built.host)
            continue
        _withdraw(by_key, built, bad, weight_zero, result)
    result.records = [by_key[k] for k in sorted(by_key)]
    return result


def _withdraw(by_key: dict[RecordKey, RecordSet], built: BuiltHost, bad: dict[RecordKey, list[str]],
              weight_zero: bool, result: HealthResult) -> None:
    all_down = True
    for key, values in bad.items():
        rec = by_key.get(key)
        if rec is None:
            continue
        keep = tuple(v for v in rec.values if v not in values)
        if keep:
            all_down = False
            result.withdrawn.setdefault(key, rec)
            by_key[key] = rec.with_values(keep)
        elif built.strategy is Strategy.SIMPLE:
            result.withdrawn.setdefault(key, rec)
            del by_key[key]
    if built.strategy is Strategy.LOADBALANCED and all_down:
        _withdraw_row(by_key, built, weight_zero, result)


def _withdraw_row(by_key: dict[RecordKey, RecordSet], built: BuiltHost, weight_zero: bool,
                  result: HealthResult) -> None:
    targets = {r.name for r in _address_records(built)}
    for rec in built.records:
        if rec.type != "CNAME" or rec.weight is None or rec.set_id not in targets:
            continue
        current = by_key.get(rec.key)
        if current is None:
            continue
        result.withdrawn.setdefault(rec.key, current)
        if weight_zero:
            by_key[rec.key] = dataclasses.replace(current, weight=0)
            result.notes.append(f"{built.host}: every target of this cluster is unhealthy: its weighted row "
                                "goes to weight 0")
        else:
            del by_key[rec.key]
            result.notes.append(f"{built.host}: every target of this cluster is unhealthy: its weighted row "
                                "is withdrawn")


MIN_TARGETS_TO_FREEZE = 3


def fleet_frozen(hosts_unhealthy: dict[str, tuple[int, int]], share: float,
                 minimum: int = MIN_TARGETS_TO_FREEZE) -> frozenset[str]:
    """Hosts where ``unhealthy / total`` across the fleet reaches ``share``, among hosts with
    at least ``minimum`` targets (with fewer, one failing target is not a pattern; the
    never-the-last-path rule still keeps the host answering)."""
    return frozenset(h for h, (bad, total) in hosts_unhealthy.items()
                     if total >= minimum and bad / total >= share)
