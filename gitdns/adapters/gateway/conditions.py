"""The ``gateway.networking.k8s.io/PolicyAffected`` condition on Gateways (Kuadrant's DNSPolicy RFC).

A Gateway's ``.status.conditions`` is shared by several controllers (the Gateway
implementation writes Accepted and Programmed, other policies their own), so this writes
only its own condition: it reads the Gateway, replaces or appends the one condition of type
``gateway.networking.k8s.io/PolicyAffected``, and writes ``/status`` with the
resourceVersion it read. A 409 means someone wrote in between: read again and retry
(bounded). Nothing is written when the condition is already as asked.

RBAC (deploy/base/rbac.yaml): ``get`` on ``gateways`` and ``update`` on ``gateways/status``
in group gateway.networking.k8s.io.

The kubernetes client is imported inside the functions: it is heavy and optional.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gitdns.core.model import Cluster
from gitdns.errors import AuthError, StaleWriteError, UnreachableError

log = logging.getLogger(__name__)

GROUP = "gateway.networking.k8s.io"
VERSION = "v1"
PLURAL = "gateways"
CONDITION_TYPE = "gateway.networking.k8s.io/PolicyAffected"
REASON_APPLIED = "PolicyApplied"
REASON_INVALID = "PolicyInvalid"
REASONS = (REASON_APPLIED, REASON_INVALID)
MAX_ATTEMPTS = 5
MAX_MESSAGE = 32768  # the Gateway CRD's maxLength for a condition message

Clock = Callable[[], float]


def _timestamp(clock: Clock) -> str:
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_policy_affected(api_client: Any, *, namespace: str, name: str, affected: bool, reason: str, message: str,
                        observed_generation: int | None = None, clock: Clock = time.time) -> bool:
    """Set our condition on the Gateway ``namespace/name``.

    ``api_client`` is a ``kubernetes.client.ApiClient`` (None: the client's default
    configuration). ``observed_generation`` defaults to the generation of the Gateway read.
    ``lastTransitionTime`` changes only when the condition's status changes.

    True: the Gateway carries the condition as asked (written now, or already so).
    False: the Gateway does not exist (logged; not an error for the agent).
    Raises StaleWriteError after MAX_ATTEMPTS conflicting writes, UnreachableError on any
    other API failure.
    """
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {REASONS}, not {reason!r}")
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    transport_errors = (HTTPError, OSError)

    api = client.CustomObjectsApi(api_client)
    status = "True" if affected else "False"
    where = f"gateway {namespace}/{name}"
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            read = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                log.info("%s: not found, condition %s not set", where, CONDITION_TYPE)
                return False
            _refused(exc.status, where, "get gateways", namespace)
            raise UnreachableError(f"{where}: read failed: HTTP {exc.status} {exc.reason}") from exc
        except transport_errors as exc:
            raise UnreachableError(f"{where}: read failed: {type(exc).__name__}") from exc
        if not isinstance(read, dict):
            raise UnreachableError(f"{where}: the API answered {type(read).__name__}, not an object")
        gateway: dict[str, Any] = read
        conditions: list[dict[str, Any]] = list((gateway.get("status") or {}).get("conditions") or [])
        index = next((i for i, c in enumerate(conditions) if c.get("type") == CONDITION_TYPE), None)
        existing = conditions[index] if index is not None else None
        generation = observed_generation if observed_generation is not None else \
            int(gateway.get("metadata", {}).get("generation") or 0)
        transition = existing.get("lastTransitionTime") if existing and existing.get("status") == status else None
        wanted = {
            "type": CONDITION_TYPE,
            "status": status,
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "lastTransitionTime": transition or _timestamp(clock),
            "observedGeneration": generation,
        }
        if existing == wanted:
            return True
        if index is None:
            conditions.append(wanted)
        else:
            conditions[index] = wanted
        gateway.setdefault("status", {})["conditions"] = conditions  # resourceVersion: the one read
        try:
            api.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, gateway)
        except ApiException as exc:
            if exc.status == 409:
                log.debug("%s: status changed since read (attempt %d of %d), re-reading", where, attempt,
                          MAX_ATTEMPTS)
                continue
            if exc.status == 404:
                log.info("%s: deleted while setting %s", where, CONDITION_TYPE)
                return False
            _refused(exc.status, where, "update gateways/status", namespace)
            raise UnreachableError(f"{where}: status update failed: HTTP {exc.status} {exc.reason}") from exc
        except transport_errors as exc:
            raise UnreachableError(f"{where}: status update failed: {type(exc).__name__}") from exc
        log.info("%s: %s=%s reason=%s", where, CONDITION_TYPE, status, reason)
        return True
    raise StaleWriteError(f"{where}: status changed on every one of {MAX_ATTEMPTS} attempts; "
                          f"{CONDITION_TYPE} not set")


def _refused(status: int | None, where: str, what: str, namespace: str) -> None:
    """AuthError naming the RoleBinding to add when the API refused (401/403): the agent's rights
    on Gateways are granted per namespace (deploy/README.md, "Gateway status")."""
    if status in (401, 403):
        raise AuthError(f"{where}: not allowed to {what} (HTTP {status}): bind the ClusterRole gitdns-gateway-status "
                        f"to the agent's ServiceAccount with a RoleBinding in namespace {namespace}")


@dataclass(frozen=True, slots=True)
class _Written:
    affected: bool
    reason: str
    message: str


class GatewayReporter:
    """Keeps the condition on a cluster's Gateways in line with its policies' verdicts.

    Writes only what changed since the last successful write of this process (kept in
    memory): an unchanged verdict costs no API call. A Gateway whose policy has no verdict
    in ``policies_ready`` is left alone.
    """

    def __init__(self, api_client: Any, *, clock: Clock = time.time) -> None:
        self.api_client = api_client
        self.clock = clock
        self._written: dict[tuple[str, str], _Written] = {}
        self._refused: set[tuple[str, str]] = set()  # logged once each, until allowed again

    def report(self, cluster: Cluster, policies_ready: Mapping[str, bool],
               policy_of_gateway: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], str]:
        """Per (namespace, name) of the Gateways considered: "set" (written, or found as
        wanted), "unchanged" (as last set: no API call),
        "missing" (no such Gateway), "forbidden" (no RoleBinding in its namespace: logged once,
        retried on the next report) or "failed" (logged; retried on the next report)."""
        outcome: dict[tuple[str, str], str] = {}
        for gateway in cluster.gateways:
            key = (gateway.namespace, gateway.name)
            policy = policy_of_gateway.get(key)
            if policy is None or policy not in policies_ready:
                continue
            ready = policies_ready[policy]
            wanted = _Written(ready, REASON_APPLIED if ready else REASON_INVALID,
                              f"DNSPolicy {policy} has been applied" if ready else
                              f"DNSPolicy {policy} is invalid: the DNS records already published are preserved")
            if self._written.get(key) == wanted:
                outcome[key] = "unchanged"
                continue
            try:
                found = set_policy_affected(self.api_client, namespace=gateway.namespace, name=gateway.name,
                                            affected=wanted.affected, reason=wanted.reason, message=wanted.message,
                                            clock=self.clock)
            except AuthError as exc:
                if key not in self._refused:
                    log.warning("%s", exc)
                    self._refused.add(key)
                self._written.pop(key, None)
                outcome[key] = "forbidden"
                continue
            except (StaleWriteError, UnreachableError) as exc:
                log.warning("gateway %s/%s: %s", gateway.namespace, gateway.name, exc)
                self._written.pop(key, None)
                outcome[key] = "failed"
                continue
            self._refused.discard(key)
            if found:
                self._written[key] = wanted
                outcome[key] = "set"
            else:
                self._written.pop(key, None)
                outcome[key] = "missing"
        return outcome
