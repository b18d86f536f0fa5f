"""The `endpoint` provider: a Kubernetes resource's ``spec.endpoints`` as the zone (Kuadrant's
"Cluster Aware DNSRecord Delegation" RFC).

Kuadrant's dns-operator ships an "endpoint" provider whose zone is one resource with the
external-dns Endpoint contract — by default a ``kuadrant.io/v1alpha1`` DNSRecord — picked
by a label selector; the delegation primaries merge every cluster's records into such an
"authoritative" DNSRecord.  This is the same contract behind gitdns's provider protocol:

* ``zones()`` lists the resources of the configured type in the namespace that match the
  selector: id = ``metadata.name``, domain = ``spec.rootHost`` (a leading ``*.`` dropped).
* ``read(zone)`` finds the zone's resource (by name, rootHost or a key-only selector label
  whose value is the domain) and returns ``spec.endpoints`` as record sets
  (`gitdns.core.endpoints`), ownership TXT included; ``version`` is the resourceVersion.
* ``apply()`` reads the resource again, applies the change groups with the exact
  compare-and-swap of every record store (`gitdns.core.store.apply_changes`: a group lands
  only when what the planner read is what the resource holds now; otherwise it is refused
  as stale), and writes the object back with a PUT carrying the resourceVersion it read.
  A 409 (another writer in between) refuses every group as stale: the caller re-reads and
  re-plans, as after any stale write.  Only ``spec.endpoints`` is rewritten (canonical
  order; the Kuadrant-only per-endpoint ``labels`` are not kept).

Settings (``spec.provider.settings`` or the keys of a ``kuadrant.io/endpoint`` Secret named
by ``spec.provider.credentials``): ``namespace``; ``ENDPOINT_GVR``
(``kuadrant.io/v1alpha1.dnsrecords``, Kuadrant) or ``ENDPOINT_GVK``
(``kuadrant.io/v1alpha1.DNSRecord``, the delegation RFC); ``ENDPOINT_ZONE_RECORD_LABEL`` (Kuadrant,
default ``kuadrant.io/zone-record=true``) and/or ``CRD_ZONE_RECORD_LABEL`` (the RFC);
``kubeconfigContext`` (else in-cluster credentials, else the current context).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from gitdns.adapters.kube.client import api_client
from gitdns.core.endpoints import (
    GVK_KEY,
    GVR_KEY,
    Gvr,
    endpoint_gvr,
    endpoints_from_records,
    records_from_endpoints,
    root_host,
    selector_text,
    zone_selector,
)
from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import PROVIDER_TYPES, capabilities_of, missing_settings
from gitdns.core.providertypes.settings import endpoint_resource_error, namespace_error
from gitdns.core.records import Change, Guard, RecordKey, ZoneSnapshot, normalize_name
from gitdns.core.store import apply_changes, group_changes
from gitdns.errors import AuthError, ConfigError, UnreachableError
from gitdns.providers.base import ApplyResult, ZoneInfo
from gitdns.providers.fences import STRICT, Fences, refuse_static
from gitdns.providers.memory import filter_names, snapshot_names, split_valid

log = logging.getLogger(__name__)

CAPABILITIES = capabilities_of("endpoint")  # declared in gitdns.core.providertypes
SETTING_KEYS = (GVR_KEY, GVK_KEY, "ENDPOINT_ZONE_RECORD_LABEL", "CRD_ZONE_RECORD_LABEL")
REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read


class EndpointProvider:
    """One namespace's zone resources of one type.  ``api_client`` is a
    ``kubernetes.client.ApiClient``."""

    name = "endpoint"
    capabilities = CAPABILITIES

    def __init__(self, api_client: Any, namespace: str, *, gvr: Gvr | None = None,
                 selector: Sequence[tuple[str, str | None]] | None = None, account: str = "endpoint") -> None:
        from kubernetes import client

        self.namespace = namespace
        self.gvr = gvr or endpoint_gvr({})
        self.selector = tuple(selector) if selector is not None else zone_selector({})
        self.account = account
        self._api: Any = client.CustomObjectsApi(api_client)

    # --- the protocol ---------------------------------------------------------------------

    def zones(self) -> list[ZoneInfo]:
        return sorted((ZoneInfo(id=obj["metadata"]["name"], domain=_domain(obj)) for obj in self._list()),
                      key=lambda z: (z.domain, z.id))

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        zone = normalize_name(zone)
        obj = self._find(zone)
        records = self._records(obj, zone)
        return ZoneSnapshot(zone=zone, records=filter_names(records, names), complete=True,
                            version=str(obj["metadata"].get("resourceVersion", "")), names=snapshot_names(names))

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        zone = normalize_name(zone)
        good, failed = split_valid(zone, changes)
        if not good:
            return ApplyResult(failed=failed)
        try:
            obj = self._find(zone)
        except ConfigError as exc:
            return ApplyResult(failed=failed + tuple((g, str(exc)) for g in group_changes(good)))
        current = {r.key: r for r in self._records(obj, zone)}
        result = apply_changes(current, good, guards)
        if not result.changed:
            return ApplyResult(refused=result.refused, failed=failed)
        version = self._write(obj, result.records)
        if version is None:
            why = "the zone resource changed since it was read (resourceVersion conflict)"
            stale = tuple((g, why) for g in group_changes(result.applied))
            return ApplyResult(refused=result.refused + stale, failed=failed)
        if result.refused or failed:
            log.info("apply: zone=%s resource=%s applied=%d refused=%d failed=%d", zone, obj["metadata"]["name"],
                     len(result.applied), len(result.refused), len(failed))
        return ApplyResult(applied=result.applied, refused=result.refused, failed=failed,
                           change_ids=(f"{obj['metadata']['name']}@{version}",))

    # --- the resource ---------------------------------------------------------------------

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            if exc.status in (401, 403):
                raise AuthError(f"endpoint provider: not allowed to {what} ({self.gvr}, namespace "
                                f"{self.namespace}): HTTP {exc.status}") from None
            raise
        except (HTTPError, OSError) as exc:
            raise UnreachableError(f"endpoint provider: {what} failed: {type(exc).__name__}") from exc

    def _list(self) -> list[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        g = self.gvr
        try:
            listed = self._call("list zone resources", self._api.list_namespaced_custom_object, g.group, g.version,
                                self.namespace, g.plural, label_selector=selector_text(self.selector))
        except ApiException as exc:
            raise UnreachableError(f"endpoint provider: list {g} in {self.namespace}: HTTP {exc.status}") from None
        items: list[dict[str, Any]] = listed.get("items") or []
        return items

    def _find(self, zone: str) -> dict[str, Any]:
        keys = {key for key, value in self.selector if value is None}
        found = [obj for obj in self._list()
                 if obj["metadata"]["name"] == zone or _domain(obj) == zone
                 or any((obj["metadata"].get("labels") or {}).get(k) == zone for k in keys)]
        if not found:
            raise ConfigError(f"endpoint provider: no {self.gvr} in namespace {self.namespace} with labels "
                              f"{selector_text(self.selector)} is the zone {zone}")
        if len(found) > 1:
            names = ", ".join(sorted(o["metadata"]["name"] for o in found))
            raise ConfigError(f"endpoint provider: several {self.gvr} are the zone {zone}: {names}")
        return found[0]

    def _records(self, obj: Mapping[str, Any], zone: str) -> list[Any]:
        try:
            return list(records_from_endpoints((obj.get("spec") or {}).get("endpoints")))
        except ValueError as exc:
            raise ConfigError(f"endpoint provider: {self.namespace}/{obj['metadata']['name']} (zone {zone}): "
                              f"{exc}") from None

    def _write(self, obj: Mapping[str, Any], records: Mapping[RecordKey, Any]) -> str | None:
        """PUT the object with the new endpoints; its new resourceVersion, None on a 409."""
        from kubernetes.client.exceptions import ApiException

        body = copy.deepcopy(dict(obj))
        body.setdefault("spec", {})["endpoints"] = endpoints_from_records(records.values())
        body.pop("status", None)
        g, name = self.gvr, obj["metadata"]["name"]
        try:
            written = self._call("update the zone resource", self._api.replace_namespaced_custom_object, g.group,
                                 g.version, self.namespace, g.plural, name, body)
        except ApiException as exc:
            if exc.status == 409:
                log.info("apply: resourceVersion conflict: resource=%s/%s", self.namespace, name)
                return None
            raise UnreachableError(f"endpoint provider: update {self.namespace}/{name}: HTTP {exc.status}") from None
        return str(written["metadata"].get("resourceVersion", ""))


def _domain(obj: Mapping[str, Any]) -> str:
    return root_host(str((obj.get("spec") or {}).get("rootHost") or ""))


def settings_of(ref: ProviderRef, zone_domain: str, fences: Fences = STRICT) -> dict[str, str]:
    """Settings from the zone's provider settings, overridden by a ``kuadrant.io/endpoint``
    Secret's keys when ``spec.provider.credentials`` names one (a source the fences allow)."""
    settings = dict(ref.settings)
    if ref.credentials is not None:
        from gitdns.providers.credentials import load_credentials

        creds = load_credentials(ref.credentials, provider="endpoint", fences=fences)
        settings.update({k: v for k, v in creds.items() if k in (*SETTING_KEYS, "namespace")})
    return settings


def api_client_for(context: str | None = None) -> Any:
    """An ApiClient: in-cluster credentials, else the kubeconfig (``context`` or current)."""
    return api_client("endpoint provider", context=context)


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: Fences = STRICT) -> EndpointProvider:
    """The settings of the zone (`refuse_static`: as `gitdns validate` judges them), completed by
    the Secret its credentials name; what the Secret gives judged by the same functions."""
    refuse_static(zone_domain, ref)
    settings = settings_of(ref, zone_domain, fences)
    namespace = settings.get("namespace", "").strip()
    if missing_settings(PROVIDER_TYPES["endpoint"], settings.get):
        raise ConfigError(f"spec.provider.settings.namespace: required for an endpoint zone ({zone_domain})")
    wrong = namespace_error(namespace) or endpoint_resource_error(settings)
    if wrong is not None:
        raise ConfigError(f"spec.provider.settings (endpoint zone {zone_domain}): {wrong}")
    gvr, selector = endpoint_gvr(settings), zone_selector(settings)
    context = settings.get("kubeconfigContext") or None
    return EndpointProvider(api_client_for(context), namespace, gvr=gvr, selector=selector,
                            account=f"endpoint:{context or 'in-cluster'}:{namespace}")
