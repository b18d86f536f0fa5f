"""DNSPolicy health in the records a cluster publishes (docs/health-probes.md).

An agent withdraws its own unhealthy targets and re-adds them on recovery:

- simple strategy: unhealthy addresses leave the host's A/AAAA values;
- loadbalanced: unhealthy addresses leave the cluster's A/AAAA name; when all of the
  cluster's addresses for the host are down, its weighted row goes to weight 0 where the
  provider allows (Route53 answers all-zero rows equally: a built-in fail open; Kuadrant keeps
  the row at full weight), else the row is withdrawn.  The geo rows of ``klb.H`` — the
  default-geo row among them — are never touched, so no geo loses its answer.

Never the last path: `withdrawn` remembers what each changed record was, and the plan step
puts it back when a withdrawal would delete the record outright (no other owner's value or row
left): the last published set stays and the Healthy condition says so.  Withdrawals freeze
for hosts in ``frozen`` (a large share of the fleet's targets failing at once, or right after
a revision change: a wrong health path merged to git must not become a global outage).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gitdns.core.builder import BuiltHost
from gitdns.core.model import HealthCheck, Strategy
from gitdns.core.records import RecordKey, RecordSet


@dataclass(frozen=True, slots=True)
class HealthTarget:
    """One address this cluster publishes for a host, and how to probe it."""

    host: str
    address: str
    check: HealthCheck

    @property
    def target_id(self) -> str:
        return f"{self.host}|{self.address}"


@dataclass(slots=True)
class HealthResult:
    records: list[RecordSet]
    withdrawn: dict[RecordKey, RecordSet] = field(default_factory=dict)  # key -> what it was
    unhealthy: dict[str, list[str]] = field(default_factory=dict)  # host -> addresses
    frozen: list[str] = field(default_factory=list)  # hosts whose withdrawals were frozen
    notes: list[str] = field(default_factory=list)


def _address_records(built: BuiltHost) -> list[RecordSet]:
    return [r for r in built.records if r.type in ("A", "AAAA") and (
        built.strategy is Strategy.SIMPLE or r.name != built.host)]


def health_targets(hosts: Iterable[BuiltHost]) -> list[HealthTarget]:
    """Every (host, address) a policy with a health check asks to probe."""
    out: dict[str, HealthTarget] = {}
    for built in hosts:
        if built.health is None:
            continue
        for rec in _address_records(built):
            for value in rec.values:
                target = HealthTarget(built.host, value, built.health)
                out[target.target_id] = target
    return [out[k] for k in sorted(out)]


def apply_health(records: Sequence[RecordSet], hosts: Iterable[BuiltHost], unhealthy: frozenset[str], *,
                 frozen: frozenset[str] = frozenset(), weight_zero: bool = True) -> HealthResult:
    """``records`` with this cluster's unhealthy targets withdrawn.  ``unhealthy`` holds
    target ids (``host|address``)."""
    by_key = {r.key: r for r in records}
    result = HealthResult(list(records))
    for built in hosts:
        if built.health is None:
            continue
        bad = {rec.key: [v for v in rec.values if f"{built.host}|{v}" in unhealthy]
               for rec in _address_records(built)}
        down = sorted({v for values in bad.values() for v in values})
        if not down:
            continue
        result.unhealthy[built.host] = down
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
