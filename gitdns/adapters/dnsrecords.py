"""Kuadrant DNSRecords through the Kubernetes API: the calls delegation through Kubernetes
makes on the primary and on its remote clusters.

    list_dnsrecords(client) -> [object]          every DNSRecord of a cluster (one list call)
    namespace_names(client) -> frozenset[str]    the namespaces of a cluster
    patch_dnsrecord_status(client, ns, name, body)   a merge patch on ``/status``
    core_api(client)                             the CoreV1Api (default provider secrets)
    AuthRecords(client)                          the primary's authoritative DNSRecords:
                                                 get, ensure (create and label), patch
                                                 metadata, delete under a resourceVersion

``client`` is a ``kubernetes.client.ApiClient`` (`gitdns.adapters.kube.client`, or a cluster
Secret's from `gitdns.adapters.kube.clusters`).  Failures become UnreachableError (a conflict:
StaleWriteError; a missing object: LookupError), naming the call and the HTTP status only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from gitdns.core.endpoints import (
    DNSRECORD_GROUP,
    DNSRECORD_PLURAL,
    DNSRECORD_VERSION,
    authoritative_labels,
    authoritative_record_name,
)
from gitdns.core.kubesources import OWNERS_ANNOTATION
from gitdns.errors import StaleWriteError, UnreachableError

log = logging.getLogger(__name__)

READ_TIMEOUT = (5.0, 20.0)
WRITE_TIMEOUT = (5.0, 30.0)


def core_api(client: Any) -> Any:
    from kubernetes import client as kube

    return kube.CoreV1Api(client)


def list_dnsrecords(client: Any) -> list[dict[str, Any]]:
    from kubernetes import client as kube
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        api: Any = kube.CustomObjectsApi(client)
        listed = api.list_cluster_custom_object(
            DNSRECORD_GROUP, DNSRECORD_VERSION, DNSRECORD_PLURAL, _request_timeout=READ_TIMEOUT)
    except ApiException as exc:
        raise UnreachableError(f"list DNSRecords: HTTP {exc.status}") from None
    except (HTTPError, OSError) as exc:
        raise UnreachableError(f"list DNSRecords: {type(exc).__name__}") from None
    items: list[dict[str, Any]] = listed.get("items") or []
    return items


def namespace_names(core: Any) -> frozenset[str]:
    """The namespaces ``core`` (a CoreV1Api) lists."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        listed = core.list_namespace(_request_timeout=READ_TIMEOUT)
    except (ApiException, HTTPError, OSError) as exc:
        raise UnreachableError(f"list namespaces on the primary: {type(exc).__name__}") from None
    return frozenset(ns.metadata.name for ns in listed.items or [])


def patch_dnsrecord_status(client: Any, namespace: str, name: str, body: dict[str, Any]) -> None:
    """Merge-patch a DNSRecord's status; UnreachableError ("HTTP <status>" or the error's kind)."""
    from kubernetes import client as kube
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        kube.CustomObjectsApi(client).patch_namespaced_custom_object_status(
            DNSRECORD_GROUP, DNSRECORD_VERSION, namespace, DNSRECORD_PLURAL, name, body,
            _request_timeout=READ_TIMEOUT)
    except (ApiException, HTTPError, OSError) as exc:
        status = getattr(exc, "status", None)
        raise UnreachableError(f"HTTP {status}" if status else type(exc).__name__) from None


class AuthRecords:
    """Authoritative DNSRecords on the primary (create, label, annotate, delete)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.api_client = api_client
        self._api: Any = client.CustomObjectsApi(api_client)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(DNSRECORD_GROUP, DNSRECORD_VERSION, *args, _request_timeout=WRITE_TIMEOUT, **kwargs)
        except ApiException as exc:
            if exc.status == 409:
                raise StaleWriteError(f"{what}: conflict") from None
            if exc.status == 404:
                raise LookupError(what) from None
            raise UnreachableError(f"{what}: HTTP {exc.status}") from None
        except (HTTPError, OSError) as exc:
            raise UnreachableError(f"{what}: {type(exc).__name__}") from None

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self._call(f"get {namespace}/{name}", self._api.get_namespaced_custom_object,
                                         namespace, DNSRECORD_PLURAL, name)
        return obj

    def ensure(self, namespace: str, root: str, existing: dict[str, Any] | None) -> dict[str, Any]:
        """The authoritative record, created when missing, its labels completed."""
        name = authoritative_record_name(root)
        labels = authoritative_labels(root)
        obj = existing
        if obj is None:
            body = {"apiVersion": f"{DNSRECORD_GROUP}/{DNSRECORD_VERSION}", "kind": "DNSRecord",
                    "metadata": {"name": name, "namespace": namespace, "labels": labels,
                                 "annotations": {OWNERS_ANNOTATION: "{}"}},
                    "spec": {"rootHost": root, "endpoints": []}}
            try:
                obj = self._call(f"create {namespace}/{name}", self._api.create_namespaced_custom_object,
                                 namespace, DNSRECORD_PLURAL, body)
                log.info("authoritative record created: record=%s/%s root=%s", namespace, name, root)
            except StaleWriteError:  # created meanwhile (409 AlreadyExists)
                obj = self.get(namespace, name)
        assert obj is not None
        have = (obj.get("metadata") or {}).get("labels") or {}
        if any(have.get(k) != v for k, v in labels.items()):
            obj = self.patch_meta(namespace, name, str(obj["metadata"]["resourceVersion"]), labels=labels)
        return obj

    def patch_meta(self, namespace: str, name: str, version: str, *, labels: Mapping[str, str] | None = None,
                   annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Merge-patch labels / annotations with a resourceVersion precondition (StaleWriteError on 409)."""
        meta: dict[str, Any] = {"resourceVersion": version}
        if labels:
            meta["labels"] = dict(labels)
        if annotations:
            meta["annotations"] = dict(annotations)
        obj: dict[str, Any] = self._call(f"patch {namespace}/{name}", self._api.patch_namespaced_custom_object,
                                         namespace, DNSRECORD_PLURAL, name, {"metadata": meta})
        return obj

    def delete(self, namespace: str, name: str, version: str) -> bool:
        """Delete when still at ``version``; False when it changed (or is gone)."""
        from kubernetes import client

        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=version))
        try:
            self._call(f"delete {namespace}/{name}", self._api.delete_namespaced_custom_object,
                       namespace, DNSRECORD_PLURAL, name, body=options)
        except (StaleWriteError, LookupError):
            return False
        return True
