"""Writing change groups to one Route53 hosted zone, for the `route53` provider.

Each change group (a data record and its ownership TXT) becomes Route53 changes — ``DELETE``
of the exact old rrset and ``CREATE`` of the new one, which Route53 applies atomically and
refuses when the old rrset is not exactly what the zone holds (a compare-and-swap) — and
groups are packed into ``ChangeResourceRecordSets`` requests within Route53's limits
(`route53_batch.batches`), converted only as the requests fill.  A refused request is
narrowed to the groups its ``InvalidChangeBatch`` message names (else bisected) and the rest
is sent again: stale groups go to ``refused``, others to ``failed``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from gitdns.core.records import Change, Guard, RecordKey, RecordSet
from gitdns.core.store import group_changes
from gitdns.providers.base import ApplyOutcome
from gitdns.providers.memory import invalid_groups
from gitdns.providers.route53.api import Rejected
from gitdns.providers.route53.batch import (
    STALE_PHRASES,
    GroupOps,
    StaleGroup,
    batches,
    group_ops,
    native_key,
    oversize,
    parse_batch_error,
    request_changes,
    unsupported,
    with_unchanged,
)
from gitdns.providers.route53.health import HealthChecks

Outcome = ApplyOutcome


class ChangeApplier:
    """Sends change groups through ``call`` (the provider's mapped SDK call).  ``health_ids``
    (zone -> record key -> health check id, shared with the provider's reads) is kept up to
    date with what landed; ``sent`` is called with each request's change id and status."""

    def __init__(self, call: Callable[..., dict[str, Any]], health_ids: dict[str, dict[RecordKey, str]],
                 health: HealthChecks | None, sent: Callable[[str, str], None]) -> None:
        self._call = call
        self._health_ids = health_ids
        self._health = health
        self._sent = sent

    def apply(self, domain: str, zone_id: str, changes: Sequence[Change], guards: Sequence[Guard] = (),
              held: Mapping[RecordKey, RecordSet] | None = None) -> Outcome:
        """``guards``: the ``present`` ones, with ``held`` the records they name as read just
        before (each becomes an unchanged pair in its group's request: `with_unchanged`)."""
        out = Outcome(zone=domain, total=len(changes))
        # groups are converted as the batches fill and each request is built when it is
        # sent: only one request's Route53 dicts are alive at a time
        for batch in batches(self._prepare(domain, changes, out, guards, held or {})):
            self._send(domain, zone_id, batch, out)
        return out

    def _prepare(self, domain: str, changes: Sequence[Change], out: Outcome, guards: Sequence[Guard],
                 held: Mapping[RecordKey, RecordSet]) -> Iterator[GroupOps]:
        """The groups to send, one at a time; the others go to ``out`` on the way."""
        bad = invalid_groups(domain, changes)
        observed = self._health_ids.get(domain, {})
        for group, members in group_changes(changes).items():
            present = [g for g in guards if g.group == group and g.present]
            gone = next((g for g in present if g.key not in held), None)
            if gone is not None:
                out.refused.append((group, f"{gone.key} disappeared ({gone.why})" if gone.why else
                                    f"{gone.key} disappeared"))
                continue
            why = bad.get(group) or next((w for c in members for r in (c.old, c.new) if r is not None
                                          for w in [unsupported(r)] if w), "")
            if why:
                out.failed.append((group, why))
                continue
            try:
                wanted = self._health.ids_for(members, changes) if self._health else {}
                ops = group_ops(group, members, observed, wanted)
            except StaleGroup as exc:
                out.refused.append((group, str(exc)))
                continue
            except (ValueError, Rejected) as exc:
                out.failed.append((group, f"{group}: {exc}"))
                continue
            too_big = oversize(ops)
            if too_big:
                out.failed.append((group, too_big))
            elif not ops.deletes and not ops.creates:
                out.land(members)
            else:
                yield with_unchanged(ops, [held[k] for k in dict.fromkeys(g.key for g in present)])

    def _send(self, domain: str, zone_id: str, batch: Sequence[GroupOps], out: Outcome) -> None:
        try:
            response = self._call("change_resource_record_sets", HostedZoneId=zone_id,
                                  ChangeBatch={"Comment": "gitdns", "Changes": request_changes(batch)})
        except Rejected as exc:
            self._narrow(domain, zone_id, batch, exc, out)
            return
        out.land([c for ops in batch for c in ops.changes])
        change_id = str((response.get("ChangeInfo") or {}).get("Id", "")).rsplit("/", 1)[-1]
        if change_id:
            out.change_ids.append(change_id)
        self._landed(domain, batch)
        self._sent(change_id, (response.get("ChangeInfo") or {}).get("Status", ""))

    def _narrow(self, domain: str, zone_id: str, batch: Sequence[GroupOps], exc: Rejected, out: Outcome) -> None:
        """After a refused request: drop the groups the message names (stale → refused,
        else failed) and send the rest again; when it names none, bisect."""
        culprits: dict[RecordKey, tuple[bool, str]] = {}
        if exc.code == "InvalidChangeBatch":
            for problem in parse_batch_error(exc.detail):
                for ops in batch:
                    hit = problem.key in ops.keys if problem.key else any(k.name == problem.name for k in ops.keys)
                    if hit:
                        culprits.setdefault(ops.group, (problem.stale, problem.text))
        if culprits:
            for ops in batch:
                if ops.group in culprits:
                    stale, text = culprits[ops.group]
                    target = out.refused if stale else out.failed
                    target.append((ops.group, f"{ops.group}: route53 refused the change: {text}"))
            rest = [ops for ops in batch if ops.group not in culprits]
            if rest:
                self._send(domain, zone_id, rest, out)
            return
        if len(batch) == 1:
            group = batch[0].group
            stale = exc.code == "InvalidChangeBatch" and any(p in exc.detail for p in STALE_PHRASES)
            (out.refused if stale else out.failed).append((group, f"{group}: route53 refused the change: {exc}"))
            return
        mid = len(batch) // 2
        self._send(domain, zone_id, batch[:mid], out)
        self._send(domain, zone_id, batch[mid:], out)

    def _landed(self, domain: str, batch: Sequence[GroupOps]) -> None:
        """Remember the health check ids the zone now holds; retire the checks no row uses."""
        health = self._health_ids.setdefault(domain, {})
        dropped: set[str] = set()
        for ops in batch:
            for rrs in ops.deletes:
                key = native_key(rrs)
                if health.pop(key, None) and rrs.get("HealthCheckId"):
                    dropped.add(str(rrs["HealthCheckId"]))
            for rrs in ops.creates:
                if rrs.get("HealthCheckId"):
                    health[native_key(rrs)] = str(rrs["HealthCheckId"])
        if self._health is not None:
            self._health.retire(dropped - set(health.values()))
