"""Gateways discovered from the cluster (docs/agent.md, "Gateways discovered from the cluster").

A Cluster's gateway entry that leaves out ``addresses`` (and ``listeners``) is read from the
agent's own cluster on every poll (`gitdns.adapters.gateway.read`); what was read replaces the
entry's addresses (and listeners) in the desired state before anything is built
(`gitdns.core.model.build.with_observed`), so a changed address is planned on the next pass,
without a commit.

* A Gateway read: its addresses and listeners, as read.
* A Gateway that does not exist (404): nothing, so its records are withdrawn as a removed
  listener's are.
* A read that fails (refused, unreachable): the last observation stays; nothing is withdrawn
  because something could not be read.  While a discovered gateway of this cluster has never
  been read since the agent started (or no Kubernetes API is there to read it), the agent
  reconciles nothing: `blocking` says why (Ready False), and the zones keep what they hold.

What was observed is published on the status branch (``gateways.yaml``): the PR preview
(`gitdns plan --all-clusters`) uses it for discovered gateways.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from gitdns.adapters.gateway.read import ObservedGateway
from gitdns.core.conditions import Condition
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, Gateway, Listener
from gitdns.core.model.build import with_observed
from gitdns.core.problems import Problem
from gitdns.core.status.report import gateway_entry
from gitdns.errors import AuthError, GitdnsError

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


class GatewayReader(Protocol):
    def read(self, namespace: str, name: str) -> ObservedGateway | None: ...


def default_reader() -> GatewayReader | None:
    """In a pod (KUBERNETES_SERVICE_HOST set): the Kubernetes API with the pod's credentials;
    elsewhere none (a discovered gateway is then a problem naming its file and field)."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    from gitdns.adapters.gateway.read import KubeGatewayReader

    return KubeGatewayReader()


@dataclass(frozen=True, slots=True)
class Seen:
    """What is known of one discovered gateway."""

    found: bool  # the Gateway exists (False: read as missing)
    addresses: tuple[str, ...] = ()
    listeners: tuple[Listener, ...] = ()
    since: float = 0.0  # when what it says was first read (the clock's seconds)
    error: str = ""  # why the last read failed (the observation above stays)
    skipped: tuple[str, ...] = ()


class Discovery:
    def __init__(self, reader: GatewayReader | None, clock: Callable[[], float]) -> None:
        self.reader = reader
        self.clock = clock
        self.seen: dict[Key, Seen] = {}
        self.errors: dict[Key, str] = {}  # gateways never read whose read failed
        self.refused: set[Key] = set()  # ... because the API refused (RBAC)
        self._logged: set[tuple[Key, str]] = set()
        self._cluster: Cluster | None = None

    @staticmethod
    def discovered(cluster: Cluster | None) -> list[tuple[int, Gateway]]:
        return [(i, g) for i, g in enumerate(cluster.gateways) if g.discovered] if cluster is not None else []

    def poll(self, cluster: Cluster | None) -> bool:
        """Read every discovered gateway of ``cluster``; True when what is known changed."""
        self._cluster = cluster
        wanted = self.discovered(cluster)
        keys = {(g.namespace, g.name) for _, g in wanted}
        changed = False
        for key in [k for k in self.seen if k not in keys]:  # no longer discovered: forgotten
            del self.seen[key]
        self.errors = {k: v for k, v in self.errors.items() if k in keys}
        if self.reader is None:
            return False
        for _, gateway in wanted:
            changed = self._read(gateway) or changed
        return changed

    def _read(self, gateway: Gateway) -> bool:
        key = (gateway.namespace, gateway.name)
        before = self.seen.get(key)
        assert self.reader is not None
        try:
            got = self.reader.read(gateway.namespace, gateway.name)
        except GitdnsError as exc:
            message = str(exc)
            if (key, message) not in self._logged:
                self._logged.add((key, message))
                log.warning("gateway read failed: gateway=%s/%s error=%s%s", *key, message,
                            "; the last observation stays" if before is not None else "; nothing reconciled "
                            "until it is read")
            if before is None:
                self.errors[key] = message
                if isinstance(exc, AuthError):
                    self.refused.add(key)
            else:
                self.seen[key] = replace(before, error=message)
            return False
        self._logged = {item for item in self._logged if item[0] != key}
        self.errors.pop(key, None)
        self.refused.discard(key)
        now = Seen(False) if got is None else Seen(True, got.addresses, got.listeners, skipped=got.skipped)
        if before is not None and (before.found, before.addresses, before.listeners, before.skipped) == (
                now.found, now.addresses, now.listeners, now.skipped):
            if before.error:
                self.seen[key] = replace(before, error="")
            return False
        self.seen[key] = replace(now, since=self.clock())
        if got is None:
            log.info("gateway not found: gateway=%s/%s; its records are withdrawn", *key)
        else:
            log.info("gateway observed: gateway=%s/%s addresses=%s listeners=%s", *key,
                     ",".join(got.addresses) or "-", ",".join(ls.hostname for ls in got.listeners) or "-")
            for why in got.skipped:
                log.warning("gateway %s/%s: left out: %s", *key, why)
        return True

    def substitute(self, desired: Desired, cluster: Cluster | None) -> Desired:
        """``desired`` with this cluster's discovered gateways as observed."""
        if cluster is None or not self.seen:
            return desired
        observed = {k: ((s.addresses, s.listeners) if s.found else None) for k, s in self.seen.items()}
        state = with_observed(desired.state, cluster.id, observed)
        return desired if state is desired.state else replace(desired, state=state)

    def blocking(self, cluster: Cluster | None) -> tuple[Problem, ...]:
        """Why nothing may be reconciled: a discovered gateway never read (no Kubernetes API to
        read it from, or its read failed), each naming the Cluster's file and field."""
        out: list[Problem] = []
        for index, gateway in self.discovered(cluster):
            key = (gateway.namespace, gateway.name)
            if key in self.seen:
                continue
            assert cluster is not None
            origin = cluster.origin
            path = ("spec", "gateways", index, "addresses")
            if self.reader is None:
                out.append(Problem(origin.file, path, f"gateway {gateway.namespace}/{gateway.name} has no addresses: "
                                   "they are read from the Gateway in the agent's own cluster, but this agent "
                                   "does not run in Kubernetes",
                                   "write spec.gateways[].addresses (and listeners) in git for a cluster "
                                   "outside Kubernetes", origin.line, code="GatewayNotDiscoverable"))
            else:
                out.append(Problem(origin.file, path, f"gateway {gateway.namespace}/{gateway.name} has not been read "
                                   f"from the cluster yet: {self.errors.get(key, 'not read yet')}",
                                   "nothing is reconciled until every discovered gateway has been read once",
                                   origin.line, code="GatewayUnread"))
        return tuple(out)

    def condition(self, cluster: Cluster | None) -> Condition | None:
        """Ready False while `blocking` holds (InvalidConfiguration without a Kubernetes API or
        with the read refused, ReconcileFailed while it fails otherwise)."""
        problems = self.blocking(cluster)
        if not problems:
            return None
        refused = bool(self.refused & set(self.errors))
        reason = "InvalidConfiguration" if self.reader is None or refused else "ReconcileFailed"
        return Condition("Ready", False, reason, "nothing reconciled: " + "; ".join(p.format() for p in problems))

    def report(self, cluster: Cluster | None) -> dict[str, dict[str, Any]]:
        """The ``gateways.yaml`` entries of this cluster's discovered gateways (status branch)."""
        out: dict[str, dict[str, Any]] = {}
        for _, gateway in self.discovered(cluster):
            key = (gateway.namespace, gateway.name)
            seen = self.seen.get(key)
            name = f"{gateway.namespace}/{gateway.name}"
            if seen is None:
                out[name] = gateway_entry("unobserved", "", message=self.errors.get(key, "not read yet"))
                continue
            message = "; ".join([*(f"left out: {s}" for s in seen.skipped),
                                 *([f"last read failed, this observation stays: {seen.error}"] if seen.error else [])])
            out[name] = gateway_entry("observed" if seen.found else "missing", _iso(seen.since), seen.addresses,
                                      ((ls.hostname, ls.name) for ls in seen.listeners), message)
        return out


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["Discovery", "GatewayReader", "Seen", "default_reader"]
