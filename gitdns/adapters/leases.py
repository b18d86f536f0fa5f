"""One writer at a time: the lease protocol and the leases kept outside DNS.

    Lease.acquire() -> LeaseState     take or renew; never blocks
    Lease.release()                   give it up (on shutdown)

    NoLease          leases off: always held
    KubeLease        a coordination.k8s.io/v1 Lease (the agent in a cluster, one per owner id;
                     the orchestrator with ConfigMap delivery, one per node pool)
    FileLease        an ``flock`` on a file (the orchestrator outside a cluster): held while the
                     process lives

The agent's lock TXT in the owner's first zone (`gitdns.agent.lease.TxtLease`) implements the
same protocol over a provider.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitdns.core.names import short_hash

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class LeaseState:
    held: bool
    holder: str  # who holds it (ours or the other's identity)
    expires: float
    message: str


class Lease:
    """The lease protocol the agent and the orchestrator use."""

    def acquire(self) -> LeaseState:  # take or renew; never blocks
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


class NoLease(Lease):
    def acquire(self) -> LeaseState:
        return LeaseState(True, "unleased", float("inf"), "leases disabled (--lease none)")

    def release(self) -> None:
        return None


class KubeLease(Lease):
    """A coordination.k8s.io/v1 Lease named ``gitdns-<hash8(owner)>`` in ``namespace``."""

    def __init__(self, namespace: str, owner: str, *, duration: float, clock: Clock, identity: str) -> None:
        from gitdns.adapters.kube.client import load_default

        load_default("the Kubernetes Lease")
        from kubernetes import client

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


class FileLease(Lease):
    """An ``flock`` on a file (the orchestrator's, in its state dir): held while this process
    lives (the kernel drops it when the process dies, so there is nothing to expire)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> LeaseState:
        if self._fd is not None:
            return LeaseState(True, str(os.getpid()), float("inf"), f"holding {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            return LeaseState(False, holder, 0.0, f"{self.path} is locked by {holder}: another orchestrator "
                                                  "serves this node pool")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{socket.gethostname()} pid {os.getpid()}\n".encode(), 0)
        self._fd = fd
        return LeaseState(True, str(os.getpid()), float("inf"), f"holding {self.path}")

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
