"""The orchestrator's Kubernetes objects, and what a refusal tells the operator (docs/health.md,
"RBAC"): its Lease under a name RBAC can list, the ConfigMap it delivers to, who it runs as.

    Calls(api)                   an API object that remembers its last failed call and status
    service_account()            "ServiceAccount NS/NAME" of this pod (its token's subject)
    PoolLease                    the node pool's Lease (`lease_name`); a 403 names the rule
    CheckedConfigMap(delivery)   a 404 is ``ConfigMapMissing`` (the kubectl command to create
                                 it), a 403 ``ConfigMapForbidden`` (the Role rule)

No module here imports the kubernetes client: refusals are told apart by the ``status`` the
client's exceptions carry, as `Calls` records it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from gitdns.adapters.coredns_delivery import ConfigMapDelivery, DeliveryResult
from gitdns.adapters.leases import Clock, KubeLease, LeaseState
from gitdns.errors import AuthError, ConfigError, GitdnsError
from gitdns.orchestrator.config import lease_name

TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
_TOKEN_MAX = 64 * 1024
_SUBJECT = re.compile(r"system:serviceaccount:([a-z0-9][-a-z0-9.]{0,252}):([a-z0-9][-a-z0-9.]{0,252})\Z")
UNAUTHORIZED = ("the API server did not accept the orchestrator's credentials (the pod's service account token, "
                "else the kubeconfig)")
VERBS = {"read": "get", "create": "create", "replace": "update", "patch": "patch", "list": "list"}


@dataclass(frozen=True, slots=True)
class Failed:
    method: str  # the client's method, e.g. read_namespaced_lease
    status: int | None  # the HTTP status (None: no answer)

    @property
    def verb(self) -> str:
        """The RBAC verb of the call (get, create, update, ...)."""
        return VERBS.get(self.method.split("_", 1)[0], self.method)


class Calls:
    """Wraps a kubernetes API object: every call goes through, and one that raises leaves its
    method and HTTP status in ``failed`` (reset it before the calls of interest)."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self.failed: Failed | None = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except Exception as exc:
                status = getattr(exc, "status", None)
                self.failed = Failed(name, status if isinstance(status, int) else None)
                raise

        return call


def service_account(namespace: str = "", token_file: str | None = None) -> str:
    """Who the orchestrator runs as, for messages: ``ServiceAccount NS/NAME`` from the subject of
    its service account token (read from the mounted token; only the subject is kept), else a
    description.  Nothing of the token itself is ever returned."""
    try:
        raw = Path(token_file or TOKEN_FILE).read_bytes()[:_TOKEN_MAX]
    except OSError:
        return "the orchestrator's identity (no service account token: the kubeconfig's user)"
    where = f" in {namespace}" if namespace else ""
    parts = raw.strip().split(b".")
    subject = None
    if len(parts) == 3:
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + b"=" * (-len(parts[1]) % 4)))
        except (ValueError, binascii.Error):
            claims = None
        if isinstance(claims, dict) and isinstance(claims.get("sub"), str):
            subject = _SUBJECT.match(claims["sub"])
    if subject is None:
        return f"the pod's ServiceAccount{where}"
    return f"ServiceAccount {subject.group(1)}/{subject.group(2)}"


def lease_rule(namespace: str, name: str) -> str:
    """The Role rules the orchestrator's Lease needs, as a message names them."""
    return (f"a Role in {namespace} bound to it with {{apiGroups: [coordination.k8s.io], resources: [leases], "
            f"resourceNames: [{name}], verbs: [get, update]}} and {{apiGroups: [coordination.k8s.io], "
            "resources: [leases], verbs: [create]}} (a create cannot be narrowed to a name)")


def configmap_rule(namespace: str, name: str) -> str:
    return (f"a Role in {namespace} bound to it with {{apiGroups: [\"\"], resources: [configmaps], "
            f"resourceNames: [{name}], verbs: [get, update]}}")


class PoolLease(KubeLease):
    """The node pool's coordination.k8s.io/v1 Lease, named by `lease_name` (not the agent's
    ``gitdns-<hash8>``); a refused call says which Lease, namespace, identity and rule."""

    def __init__(self, namespace: str, pool: str, *, duration: float, clock: Clock, identity: str,
                 account: Callable[[], str] | None = None) -> None:
        super().__init__(namespace, pool, duration=duration, clock=clock, identity=identity)
        self.name = lease_name(pool)
        self.pool = pool
        self.calls = Calls(self.api)
        self.api = cast(Any, self.calls)
        self.account = account or (lambda: service_account(namespace))
        self.forbidden = False  # the last acquire was refused by authorisation

    def acquire(self) -> LeaseState:
        self.calls.failed = None
        state = super().acquire()
        failed = self.calls.failed
        self.forbidden = not state.held and failed is not None and failed.status == 403
        if state.held:
            return state
        if failed is not None and failed.status == 401:
            return replace(state, message=f"Lease {self.namespace}/{self.name}: {failed.verb} refused (401): "
                                          f"{UNAUTHORIZED}")
        if self.forbidden:
            assert failed is not None
            return replace(state, message=(
                f"Lease {self.namespace}/{self.name}: {failed.verb} refused ({failed.status}) for "
                f"{self.account()}; it needs {lease_rule(self.namespace, self.name)}; "
                f"`gitdns lease-name --node-pool {self.pool}` prints the name (docs/health.md, \"RBAC\")"))
        if state.holder not in ("", "unknown"):
            return replace(state, message=f"Lease {self.namespace}/{self.name} is held by {state.holder}: another "
                                          f"orchestrator serves node pool {self.pool}")
        return replace(state, message=f"Lease {self.namespace}/{self.name}: {state.message}")


class CheckedConfigMap:
    """ConfigMap delivery whose refusals say what to do: a missing ConfigMap
    (``ConfigMapMissing``: the kubectl command; the orchestrator never creates it) and a
    forbidden call (``ConfigMapForbidden``: the Role rule)."""

    def __init__(self, delivery: ConfigMapDelivery, account: Callable[[], str]) -> None:
        self.delivery = delivery
        self.calls = Calls(delivery.api)
        delivery.api = self.calls
        self.account = account

    @property
    def target(self) -> str:
        return self.delivery.target

    def deliver(self, files: Mapping[str, str]) -> DeliveryResult:
        self.calls.failed = None
        try:
            return self.delivery.deliver(files)
        except GitdnsError:
            failed = self.calls.failed
            if failed is None or failed.status not in (401, 403, 404):
                raise
            raise self.refusal(failed) from None

    def refusal(self, failed: Failed) -> GitdnsError:
        ns, name = self.delivery.namespace, self.delivery.name
        if failed.status == 401:
            return AuthError(f"ConfigMap {ns}/{name}: {failed.verb} refused (401): {UNAUTHORIZED}")
        if failed.status == 404:
            return ConfigError(
                f"ConfigMap {ns}/{name} does not exist: create it once with `kubectl -n {ns} create configmap "
                f"{name}` (the orchestrator only gets and updates it), and make CoreDNS import its *.server files "
                "and mount it: only k3s's stock Corefile does (docs/health.md, \"ConfigMap delivery\")",
                reason="ConfigMapMissing")
        return AuthError(f"ConfigMap {ns}/{name}: {failed.verb} refused ({failed.status}) for {self.account()}; "
                         f"it needs {configmap_rule(ns, name)} (docs/health.md, \"RBAC\")",
                         reason="ConfigMapForbidden")
