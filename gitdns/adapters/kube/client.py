"""The Kubernetes client: the one module that loads credentials and creates API clients.

The ``kubernetes`` package is heavy and optional (``pip install 'gitdns[kubernetes]'``): it is
imported inside the functions, only when a command or the agent talks to a cluster.

    load_default(what)                 in-cluster credentials, else the kubeconfig, loaded into
                                       the client's default configuration (API objects built
                                       without an ApiClient use it)
    api_client(what, context=, config_file=, in_cluster=)
                                       an ApiClient of its own: in-cluster credentials, else the
                                       kubeconfig at ``context`` (else its current context)
    api_client_from_dict(doc)          an ApiClient from a kubeconfig document (cluster Secrets)
    server_and_ca(api_client)          the API server URL and CA (PEM) an ApiClient talks to
    ClusterApi(api_client, label)      the few core and RBAC calls `add-cluster-secret` makes

``what`` names the caller in errors ("cluster-id", "the default provider secret", ...).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gitdns.errors import ConfigError, UnreachableError

REQUEST_TIMEOUT = (5.0, 30.0)


def _config_module(what: str) -> tuple[Any, type[Exception]]:
    """``kubernetes.config`` and its ConfigException; ConfigError when the client is missing."""
    try:
        from kubernetes import config as kube_config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:
        raise ConfigError(f"{what} needs the kubernetes client: pip install 'gitdns[kubernetes]'") from None
    return kube_config, ConfigException


def _kubeconfig(config_file: str | None) -> str | None:
    return config_file or os.environ.get("KUBECONFIG") or None  # read now, not at import


def load_default(what: str) -> None:
    """In-cluster credentials, else the kubeconfig ($KUBECONFIG, else ~/.kube/config), into the
    client's default configuration.  ConfigError when neither loads."""
    loader, config_exception = _config_module(what)
    try:
        loader.load_incluster_config()
    except config_exception:
        try:
            loader.load_kube_config(config_file=_kubeconfig(None))
        except (config_exception, FileNotFoundError) as exc:
            raise ConfigError(f"{what}: no in-cluster credentials and no usable kubeconfig "
                              f"({type(exc).__name__}: {exc})") from None


def api_client(what: str, *, context: str | None = None, config_file: str | None = None,
               in_cluster: bool = True) -> Any:
    """An ApiClient: in-cluster credentials when ``in_cluster`` and no ``context`` is named,
    else the kubeconfig (``config_file``, else $KUBECONFIG, else ~/.kube/config) at ``context``
    (else its current context).  ConfigError when nothing loads."""
    loader, config_exception = _config_module(what)
    if in_cluster and not context:
        try:
            loader.load_incluster_config()
            from kubernetes import client

            return client.ApiClient()
        except config_exception:
            pass
    try:
        return loader.new_client_from_config(config_file=_kubeconfig(config_file), context=context or None)
    except (config_exception, FileNotFoundError) as exc:
        if in_cluster and not context:
            raise ConfigError(f"{what}: no in-cluster credentials and no usable kubeconfig "
                              f"({type(exc).__name__}: {exc})") from None
        which = f"context {context}" if context else "the current context"
        raise ConfigError(f"{what}: kubeconfig {which} does not load ({type(exc).__name__}: {exc})") from None


def core_v1(what: str) -> Any:
    """A CoreV1Api on `api_client` (in-cluster credentials, else the kubeconfig)."""
    from kubernetes import client

    return client.CoreV1Api(api_client(what))


def api_client_from_dict(doc: dict[str, Any]) -> Any:
    """An ApiClient from a parsed kubeconfig (nothing persisted); the loader's own exceptions
    propagate (callers report only their kind: a kubeconfig is a credential)."""
    loader, _ = _config_module("a cluster secret")
    return loader.new_client_from_config_dict(doc, persist_config=False)


def server_and_ca(client: Any) -> tuple[str, str]:
    """The API server URL and its CA certificate (PEM; "" when none is configured)."""
    cfg = client.configuration
    ca = ""
    if cfg.ssl_ca_cert:
        try:
            with open(cfg.ssl_ca_cert, encoding="utf-8") as handle:
                ca = handle.read()
        except OSError:
            ca = ""
    return str(cfg.host), ca


class ClusterApi:
    """The few calls made on one cluster, through a ``kubernetes.client.ApiClient``: ``core``
    and ``rbac`` are the client's CoreV1Api and RbacAuthorizationV1Api."""

    def __init__(self, client: Any, label: str) -> None:
        from kubernetes import client as kube

        self.label = label
        self.core: Any = kube.CoreV1Api(client)
        self.rbac: Any = kube.RbacAuthorizationV1Api(client)

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """None on 404; UnreachableError naming the call on any other failure."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise UnreachableError(f"{self.label}: {what}: HTTP {exc.status} {exc.reason}") from None
        except (HTTPError, OSError) as exc:
            raise UnreachableError(f"{self.label}: {what}: {type(exc).__name__}") from None

    def ensure(self, kind: str, namespace: str | None, body: dict[str, Any]) -> str:
        """Create ``body`` when missing: 'created' or 'unchanged'."""
        name = body["metadata"]["name"]
        read, create = {
            "Namespace": (self.core.read_namespace, self.core.create_namespace),
            "ServiceAccount": (self.core.read_namespaced_service_account, self.core.create_namespaced_service_account),
            "Secret": (self.core.read_namespaced_secret, self.core.create_namespaced_secret),
            "ClusterRole": (self.rbac.read_cluster_role, self.rbac.create_cluster_role),
            "ClusterRoleBinding": (self.rbac.read_cluster_role_binding, self.rbac.create_cluster_role_binding),
        }[kind]
        where = (namespace,) if namespace is not None else ()
        if self.call(f"read {kind} {name}", read, name, *where) is not None:
            return "unchanged"
        self.call(f"create {kind} {name}", create, *where, body)
        return "created"
