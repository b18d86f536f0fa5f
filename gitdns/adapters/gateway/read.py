"""Reading a Gateway (Gateway API v1) for its addresses and listener host names.

A Cluster's gateway entry that leaves out ``addresses`` is discovered (docs/agent.md, "Gateways
discovered from the cluster"): the agent reads the Gateway by namespace and name from its own
cluster, as Kuadrant's DNS controller does:

* ``status.addresses[]``: type ``IPAddress`` (the default when no type is given) and
  ``Hostname``; a host name is published as a CNAME target, exactly as a host name written in
  git (`gitdns.core.builder`). Other types, and values that are not an IP address or a host
  name, are left out and said so in ``skipped``.
* ``spec.listeners[].hostname`` (with the listener's name); a listener without a hostname
  names no host and is left out, as Kuadrant does.

RBAC: ``get`` on ``gateways`` in group gateway.networking.k8s.io, in each Gateway's namespace
(the ClusterRole of deploy/components/gateway-status grants it); nothing else is read and
nothing is written here.

The kubernetes client is imported inside the functions: it is heavy and optional.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitdns.core.addresses import host_error
from gitdns.core.model import Listener
from gitdns.core.problems import shown
from gitdns.errors import AuthError, UnreachableError

GROUP = "gateway.networking.k8s.io"
VERSION = "v1"
PLURAL = "gateways"
ADDRESS_TYPES = ("IPAddress", "Hostname")


@dataclass(frozen=True, slots=True)
class ObservedGateway:
    """What a Gateway says of itself: normalised addresses (sorted, each once) and listeners."""

    addresses: tuple[str, ...]
    listeners: tuple[Listener, ...]
    resource_version: str = ""
    skipped: tuple[str, ...] = ()  # values left out, each with why


def parse_gateway(obj: Mapping[str, Any]) -> ObservedGateway:
    """The addresses and listeners of a Gateway object as the API returns it."""
    skipped: list[str] = []
    addresses: set[str] = set()
    status = _map(obj.get("status"))
    for entry in _items(status.get("addresses")):
        kind = entry.get("type") or "IPAddress"
        value = entry.get("value")
        if not isinstance(value, str) or not value.strip():
            skipped.append(f"status.addresses: an entry of type {shown(str(kind))} without a value")
            continue
        if kind not in ADDRESS_TYPES:
            skipped.append(f"status.addresses: {shown(value)} of type {shown(str(kind))} (only IPAddress and Hostname "
                           "are published)")
            continue
        normal = _address(kind, value.strip())
        if normal is None:
            skipped.append(f"status.addresses: {shown(value)} is not a valid {kind}")
            continue
        addresses.add(normal)
    listeners: dict[str, Listener] = {}
    spec = _map(obj.get("spec"))
    for entry in _items(spec.get("listeners")):
        hostname = entry.get("hostname")
        if not isinstance(hostname, str) or not hostname.strip():
            continue  # a listener for every host names none: nothing to publish (Kuadrant skips it too)
        name = hostname.strip().lower().rstrip(".")
        if host_error(name.removeprefix("*.")) is not None:
            skipped.append(f"spec.listeners: hostname {shown(hostname)} is not a valid host name")
            continue
        section = entry.get("name")
        listeners.setdefault(name, Listener(name, section if isinstance(section, str) else ""))
    metadata = _map(obj.get("metadata"))
    version = metadata.get("resourceVersion")
    return ObservedGateway(tuple(sorted(addresses)), tuple(listeners[h] for h in sorted(listeners)),
                           version if isinstance(version, str) else "", tuple(skipped))


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _address(kind: str, value: str) -> str | None:
    if kind == "IPAddress":
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            return None
    name = value.lower().rstrip(".")
    return name if host_error(name) is None else None


class KubeGatewayReader:
    """Reads Gateways through the Kubernetes API (``get`` only).

    ``api_client`` is a ``kubernetes.client.ApiClient``; None: the client's default
    configuration, loaded on the first read (in-cluster credentials, else the kubeconfig) unless
    ``load_credentials`` is False (it is loaded already)."""

    def __init__(self, api_client: Any = None, *, load_credentials: bool = True) -> None:
        self.api_client = api_client
        self._load = load_credentials and api_client is None

    def read(self, namespace: str, name: str) -> ObservedGateway | None:
        """The Gateway ``namespace/name``; None when it does not exist. AuthError (naming the
        RoleBinding to add) when refused, UnreachableError on any other failure."""
        if self._load:
            from gitdns.adapters.kube.client import load_default

            load_default("reading Gateways")
            self._load = False
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        where = f"gateway {namespace}/{name}"
        api = client.CustomObjectsApi(self.api_client)
        try:
            obj = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, _request_timeout=(5, 30))
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status in (401, 403):
                raise AuthError(f"{where}: not allowed to get gateways (HTTP {exc.status}): bind the ClusterRole "
                                f"gitdns-gateway-status to the agent's ServiceAccount with a RoleBinding in "
                                f"namespace {namespace}") from None
            raise UnreachableError(f"{where}: read failed: HTTP {exc.status} {exc.reason}") from None
        except (HTTPError, OSError) as exc:
            raise UnreachableError(f"{where}: read failed: {type(exc).__name__}") from None
        if not isinstance(obj, dict):
            raise UnreachableError(f"{where}: the API answered {type(obj).__name__}, not an object")
        return parse_gateway(obj)
