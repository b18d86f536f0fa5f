"""One writer per owner: a lease per owner id.

Two agents with one owner id would delete each other's values, so an agent writes only
while it holds the lease.  In a cluster the lease is a Kubernetes Lease
(`gitdns.adapters.leases.KubeLease`, where the lease protocol lives too); elsewhere it is a
lock TXT record in the owner's first zone, ``gitdns-lock-<hash8(owner)>.<zone>`` with value
``holder=<nonce>,expires=<unix seconds>``, taken and renewed under the provider's
compare-and-swap.  A second agent with the same id waits and says who holds it.
"""

from __future__ import annotations

import logging
import secrets
import socket

from gitdns.adapters.leases import Clock, Lease, LeaseState, NoLease
from gitdns.core.names import short_hash
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.base import Provider

__all__ = ["Lease", "LeaseState", "NoLease", "TxtLease", "lock_name"]

log = logging.getLogger(__name__)


def lock_name(owner: str, zone: str) -> str:
    return f"gitdns-lock-{short_hash(owner, 8)}.{zone}"


def _parse(value: str) -> tuple[str, float]:
    fields = dict(part.partition("=")[::2] for part in value.strip('"').split(","))
    try:
        return fields.get("holder", ""), float(fields.get("expires", "0"))
    except ValueError:
        return fields.get("holder", ""), 0.0


class TxtLease(Lease):
    """A lock TXT under compare-and-swap (the provider refuses a stale write)."""

    def __init__(self, provider: Provider, zone: str, owner: str, *, duration: float, clock: Clock,
                 identity: str | None = None) -> None:
        self.provider = provider
        self.zone = zone
        self.name = lock_name(owner, zone)
        self.duration = duration
        self.clock = clock
        self.identity = identity or f"{socket.gethostname()}-{secrets.token_hex(4)}"

    def _record(self, expires: float) -> RecordSet:
        return RecordSet(self.name, "TXT", 60, (f"holder={self.identity},expires={int(expires)}",))

    def acquire(self) -> LeaseState:
        current = next((r for r in self.provider.read(self.zone, [self.name]).records
                        if r.name == self.name and r.type == "TXT"), None)
        now = self.clock()
        if current is not None:
            holder, expires = _parse(current.values[0]) if current.values else ("", 0.0)
            if holder != self.identity and expires > now:
                return LeaseState(False, holder, expires,
                                  f"owner lease {self.name} is held by {holder} for {expires - now:.0f}s more; "
                                  "another agent runs with this cluster id")
        new = self._record(now + self.duration)
        action = Action.CREATE if current is None else Action.UPDATE
        result = self.provider.apply(self.zone, [Change(action, current, new, new.key)])
        if not result.ok:
            return LeaseState(False, "unknown", 0.0, f"owner lease {self.name}: taken by another agent "
                                                     "at the same moment; retrying")
        return LeaseState(True, self.identity, now + self.duration, f"holding {self.name}")

    def release(self) -> None:
        current = next((r for r in self.provider.read(self.zone, [self.name]).records
                        if r.name == self.name), None)
        if current is None or not current.values or _parse(current.values[0])[0] != self.identity:
            return
        self.provider.apply(self.zone, [Change(Action.DELETE, current, None, current.key)])
        log.info("lease released: name=%s", self.name)
