"""Remote clusters from kubeconfig Secrets (the cluster-aware controller of Kuadrant's "Cluster
Aware DNSRecord Delegation" RFC).

A primary finds its remote clusters as Secrets labelled ``<label>=true`` (default label
``kuadrant.io/multicluster-kubeconfig``) in one namespace (default ``kuadrant-system``); each
holds a kubeconfig under the key ``kubeconfig`` (the RFC's format, and what
``gitdns add-cluster-secret`` writes).  `ClusterSecrets.discover` lists them and returns one
``kubernetes.client.ApiClient`` per Secret, built with
`gitdns.adapters.kube.client.api_client_from_dict` and kept while the kubeconfig stays the
same (a changed Secret rebuilds its client, a removed one closes it).

The kubeconfig is a credential: it never appears in a log line, an error or a result — a
Secret that does not load is reported by name and the kind of error only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from gitdns.errors import AuthError, UnreachableError

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "kuadrant-system"
DEFAULT_LABEL = "kuadrant.io/multicluster-kubeconfig"
KUBECONFIG_KEY = "kubeconfig"
REQUEST_TIMEOUT = (5.0, 20.0)


@dataclass(frozen=True, slots=True)
class Discovery:
    """The remote clusters found: API clients by Secret name, and Secrets that did not load."""

    clients: dict[str, Any] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.clients) | frozenset(self.problems)


class ClusterSecrets:
    """``api_client`` reaches the primary's own cluster (None: the client's default)."""

    def __init__(self, api_client: Any, namespace: str = DEFAULT_NAMESPACE, label: str = DEFAULT_LABEL) -> None:
        self.api_client = api_client
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.label = label or DEFAULT_LABEL
        self._cache: dict[str, tuple[str, Any]] = {}  # name -> (digest of the kubeconfig, client)

    def discover(self) -> Discovery:
        """One list call; clients are built only for new or changed Secrets.  Raises
        AuthError / UnreachableError when the primary's API cannot list the Secrets."""
        secrets = self._list()
        found = Discovery()
        for secret in secrets:
            name = secret.metadata.name
            try:
                found.clients[name] = self._client(name, (secret.data or {}).get(KUBECONFIG_KEY))
            except ValueError as exc:
                found.problems[name] = str(exc)
                log.warning("cluster secret unusable: secret=%s/%s why=%s", self.namespace, name, exc)
        for gone in set(self._cache) - set(found.clients):
            self._close(gone)
        return found

    def close(self) -> None:
        for name in list(self._cache):
            self._close(name)

    def _list(self) -> list[Any]:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        selector = f"{self.label}=true"
        try:
            core: Any = client.CoreV1Api(self.api_client)
            listed = core.list_namespaced_secret(
                self.namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status in (401, 403):
                raise AuthError(f"cluster secrets: not allowed to list Secrets in namespace {self.namespace} "
                                "(grant list on secrets there)") from None
            raise UnreachableError(f"cluster secrets: list Secrets {selector} in {self.namespace}: "
                                   f"HTTP {exc.status}") from None
        except (HTTPError, OSError) as exc:
            raise UnreachableError(f"cluster secrets: list failed: {type(exc).__name__}") from None
        # the selector asks for "true"; a server that ignores it must not widen the choice
        return [s for s in (listed.items or []) if (s.metadata.labels or {}).get(self.label) == "true"]

    def _client(self, name: str, encoded: str | None) -> Any:
        if not encoded:
            raise ValueError(f"no {KUBECONFIG_KEY!r} key")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"the {KUBECONFIG_KEY!r} key is not base64") from None
        digest = hashlib.sha256(raw).hexdigest()
        cached = self._cache.get(name)
        if cached is not None and cached[0] == digest:
            return cached[1]
        api_client = _load(raw)
        if cached is not None:
            self._close(name)
        self._cache[name] = (digest, api_client)
        log.info("cluster secret loaded: secret=%s/%s", self.namespace, name)
        return api_client

    def _close(self, name: str) -> None:
        _, api_client = self._cache.pop(name)
        close = getattr(api_client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing a pool must never stop a pass
                log.debug("cluster secret client close failed: secret=%s", name)


def _load(raw: bytes) -> Any:
    """An ApiClient from kubeconfig bytes; ValueError naming only the kind of problem."""
    from ruamel.yaml import YAML

    from gitdns.adapters.kube.client import api_client_from_dict

    try:
        doc = YAML(typ="safe").load(raw.decode("utf-8"))
    except Exception:  # the parser's message would quote the kubeconfig: say only what failed
        raise ValueError("the kubeconfig is not YAML") from None
    if not isinstance(doc, dict) or not doc.get("clusters"):
        raise ValueError("the kubeconfig names no cluster")
    try:
        return api_client_from_dict(doc)
    except Exception as exc:  # ConfigException and the loaders' own errors; never echo the content
        raise ValueError(f"the kubeconfig does not load ({type(exc).__name__})") from None
