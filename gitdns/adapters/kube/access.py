"""Kubernetes access, imported only when a command needs it (the client is heavy)."""

from __future__ import annotations

from gitdns.adapters.kube.client import load_default
from gitdns.errors import UnreachableError


def kube_system_uid() -> str:
    """The UID of the running cluster's kube-system namespace: the cluster id gitdns and
    Kuadrant use as the owner id.  In-cluster credentials first, then the kubeconfig."""
    load_default("cluster-id")
    from kubernetes import client

    try:
        namespace = client.CoreV1Api().read_namespace("kube-system", _request_timeout=10)
    except Exception as exc:  # the client raises urllib3 and ApiException types
        status = getattr(exc, "status", None)
        why = f"HTTP {status} {getattr(exc, 'reason', '')}".strip() if status else type(exc).__name__
        raise UnreachableError(f"cluster-id: cannot read namespace kube-system: {why}") from exc
    uid = namespace.metadata.uid if namespace.metadata is not None else None
    if not uid:
        raise UnreachableError("cluster-id: namespace kube-system has no UID")
    return str(uid)


def configmap_data(namespace: str, name: str) -> dict[str, str] | None:
    """The data of a ConfigMap of this cluster (in-cluster credentials, else the kubeconfig);
    None when it does not exist.  Raises UnreachableError when the API cannot be asked."""
    load_default("reading a ConfigMap")
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        cm = client.CoreV1Api().read_namespaced_config_map(name, namespace, _request_timeout=10)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise UnreachableError(f"configmap {namespace}/{name}: HTTP {exc.status} {exc.reason}") from exc
    except Exception as exc:  # urllib3 errors
        raise UnreachableError(f"configmap {namespace}/{name}: {type(exc).__name__}") from exc
    return {str(k): str(v) for k, v in (cm.data or {}).items()}
