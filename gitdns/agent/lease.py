"""One writer per owner (ARCHITECTURE.md §5): a lease per owner id.

Two agents with one owner id would delete each other's values, so an agent writes only
while it holds the lease.  In a cluster the lease is a Kubernetes Lease; elsewhere it is a
lock TXT record in the owner's first zone, ``gitdns-lock-<hash8(owner)>.<zone>`` with value
``holder=<nonce>,expires=<unix seconds>``, taken and renewed under the provider's
compare-and-swap.  A second agent with the same id waits and says who holds it.
"""

from __future__ import annotations

import logging
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitdns.core.names import short_hash
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.base import Provider

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class LeaseState:
    held: bool
    holder: str  # who holds it (ours or the other's identity)
    expires: float
    message: str


class Lease:
    """The lease protocol the agent uses."""

    def acquire(self) -> LeaseState:  # take or renew; never blocks
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


class NoLease(Lease):
    def acquire(self) -> LeaseState:
        return LeaseState(True, "unleased", float("inf"), "leases disabled (--lease none)")

    def release(self) -> None:
        return None


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


class KubeLease(Lease):
    """A coordination.k8s.io/v1 Lease named ``gitdns-<hash8(owner)>`` in the agent's namespace."""

    def __init__(self, namespace: str, owner: str, *, duration: float, clock: Clock, identity: str) -> None:
        from kubernetes import client
        from kubernetes import config as kube_config

        loader: Any = kube_config  # the loaders are untyped
        try:
            loader.load_incluster_config()
        except kube_config.ConfigException:
            loader.load_kube_config()
        self.api = client.CoordinationV1Api()
        self.namespace = namespace
        self.name = f"gitdns-{short_hash(owner, 8)}"
        self.duration = duration
        self.clock = clock
        self.identity = identity

    def acquire(self) -> LeaseState:
        from datetime import UTC, datetime

        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        # Lease times are MicroTime: the API server wants exactly six fractional digits, and the
        # client writes isoformat(), which drops the fraction at a whole second.
        now = datetime.now(UTC)
        if now.microsecond == 0:
            now = now.replace(microsecond=1)
        spec = client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=int(self.duration),
                                  renew_time=now, acquire_time=now)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                return LeaseState(False, "unknown", 0.0, f"lease {self.name}: API error {exc.status}")
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name), spec=spec)
            try:
                self.api.create_namespaced_lease(self.namespace, body)
            except ApiException as create_exc:
                return LeaseState(False, "unknown", 0.0, f"lease {self.name}: create refused ({create_exc.status})")
            return LeaseState(True, self.identity, self.clock() + self.duration, f"holding lease {self.name}")
        current = lease.spec or client.V1LeaseSpec()
        holder = current.holder_identity or ""
        renew = current.renew_time
        expired = renew is None or (now - renew).total_seconds() > (current.lease_duration_seconds or 0)
        if holder not in ("", self.identity) and not expired:
            return LeaseState(False, holder, 0.0, f"lease {self.name} is held by {holder}; "
                                                  "another agent runs with this cluster id")
        lease.spec = spec
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)  # resourceVersion-checked
        except ApiException as exc:
            return LeaseState(False, "unknown", 0.0, f"lease {self.name}: update refused ({exc.status})")
        return LeaseState(True, self.identity, self.clock() + self.duration, f"holding lease {self.name}")

    def release(self) -> None:
        """Give the lease up on shutdown, so the next pod (a new name after a Recreate
        rollout) takes it at once instead of waiting for it to expire."""
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.renew_time = None
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            log.warning("lease release failed: name=%s status=%s", self.name, exc.status)
