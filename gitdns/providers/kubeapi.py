"""The providers' Kubernetes client: the one module of `gitdns.providers` that loads
credentials and creates an API client (the `endpoint` provider, the default provider secret
and ``credentials.secret`` all come here).  The providers and the adapters are independent
layers, so this is the providers' counterpart of `gitdns.adapters.kubeclient`.

The ``kubernetes`` package is optional (``pip install 'gitdns[kubernetes]'``): it is imported
inside the function, only when a zone needs a cluster.
"""

from __future__ import annotations

import os
from typing import Any

from gitdns.errors import ConfigError


def api_client(what: str, *, context: str | None = None) -> Any:
    """An ApiClient: in-cluster credentials unless ``context`` is named, else the kubeconfig
    ($KUBECONFIG, read now, else ~/.kube/config) at ``context`` (else its current context).
    ``what`` names the caller in errors; ConfigError when nothing loads."""
    try:
        from kubernetes import client
        from kubernetes import config as kube_config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:
        raise ConfigError(f"{what} needs the kubernetes client: pip install 'gitdns[kubernetes]'") from None
    loader: Any = kube_config  # the loaders are untyped
    if not context:
        try:
            loader.load_incluster_config()
            return client.ApiClient()
        except ConfigException:
            pass
    try:
        return loader.new_client_from_config(config_file=os.environ.get("KUBECONFIG") or None, context=context or None)
    except (ConfigException, FileNotFoundError) as exc:
        where = f"kubeconfig context {context}" if context else "no in-cluster credentials and no usable kubeconfig"
        raise ConfigError(f"{what}: {where} ({type(exc).__name__})") from None


def core_v1(what: str) -> Any:
    """A CoreV1Api on `api_client`."""
    from kubernetes import client

    return client.CoreV1Api(api_client(what))
