"""``gitdns add-cluster-secret``: let a primary read a remote cluster's DNSRecords
(delegation through Kubernetes); ``gitdns cluster-id``:
the id of the cluster the current credentials reach.

On the REMOTE cluster (``--remote-context``) it ensures, idempotently:

1. the namespace ``--remote-namespace`` (default kuadrant-system) and in it the
   ServiceAccount ``--service-account`` (default gitdns-delegation);
2. the ClusterRole ``gitdns-remote-cluster`` — the minimal remote-cluster role of Kuadrant's
   "Cluster Aware DNSRecord Delegation" RFC:
   ``dnsrecords`` get/list/watch, ``dnsrecords/status`` get/patch/update in kuadrant.io —
   and a ClusterRoleBinding of the ServiceAccount to it;
3. a long-lived token: a Secret of type ``kubernetes.io/service-account-token`` annotated
   with the ServiceAccount's name, which the cluster's token controller fills (the command
   waits for it).  A token from the TokenRequest API would expire, and a kubeconfig stored
   in a Secret must keep working; deleting this Secret revokes the primary's access.

On the PRIMARY cluster (``--primary-context``) it creates or updates the Secret ``NAME`` in
``--cluster-secret-namespace`` labelled ``<--cluster-secret-label>=true`` whose key
``kubeconfig`` holds a kubeconfig for the remote: its API server (``--remote-server``, else
the remote context's), the cluster CA (from the token Secret) and the token.

``--dry-run`` prints every manifest instead, the token and CA redacted, and calls no API.
The token never appears in output, logs or errors.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitdns.adapters.kube.client import ClusterApi, api_client, server_and_ca
from gitdns.commands import Result
from gitdns.errors import UnreachableError

CLUSTER_ROLE = "gitdns-remote-cluster"
DEFAULT_SERVICE_ACCOUNT = "gitdns-delegation"
DEFAULT_REMOTE_NAMESPACE = "kuadrant-system"
DEFAULT_SECRET_NAMESPACE = "kuadrant-system"
DEFAULT_LABEL = "kuadrant.io/multicluster-kubeconfig"
TOKEN_TYPE = "kubernetes.io/service-account-token"
SA_ANNOTATION = "kubernetes.io/service-account.name"
REDACTED = "<redacted>"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gitdns"}
# Exactly what a primary calls on a remote (gitdns/adapters/dnsrecords.py): one cluster-wide
# list of DNSRecords per pass, and a merge patch of its own entry in a record's status. Narrower
# than the delegation RFC's role (get/list/watch, status get/patch/update): nothing gets one
# record, watches, or replaces a status.
RULES = [
    {"apiGroups": ["kuadrant.io"], "resources": ["dnsrecords"], "verbs": ["list"]},
    {"apiGroups": ["kuadrant.io"], "resources": ["dnsrecords/status"], "verbs": ["patch"]},
]

@dataclass(frozen=True, slots=True)
class SecretPlan:
    name: str
    remote_namespace: str
    service_account: str
    secret_namespace: str
    label: str
    server: str

    @property
    def token_secret(self) -> str:
        return f"{self.service_account}-token"

    @property
    def binding(self) -> str:
        return f"{CLUSTER_ROLE}-{self.remote_namespace}-{self.service_account}"[:253]


def remote_manifests(plan: SecretPlan) -> list[dict[str, Any]]:
    ns = plan.remote_namespace
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": plan.service_account, "namespace": ns, "labels": dict(MANAGED_BY)}},
        cluster_role(),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": plan.binding, "labels": dict(MANAGED_BY)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": plan.service_account, "namespace": ns}]},
        {"apiVersion": "v1", "kind": "Secret", "type": TOKEN_TYPE,
         "metadata": {"name": plan.token_secret, "namespace": ns, "labels": dict(MANAGED_BY),
                      "annotations": {SA_ANNOTATION: plan.service_account}}},
    ]


def cluster_role() -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": CLUSTER_ROLE, "labels": dict(MANAGED_BY)}, "rules": [dict(r) for r in RULES]}


def kubeconfig_text(plan: SecretPlan, ca_pem: str, token: str) -> str:
    """A kubeconfig for the remote; ``ca_pem`` and ``token`` as given (redacted in a dry run)."""
    from io import StringIO

    from ruamel.yaml import YAML

    cluster: dict[str, Any] = {"server": plan.server}
    if ca_pem:
        cluster["certificate-authority-data"] = (ca_pem if ca_pem == REDACTED
                                                 else base64.b64encode(ca_pem.encode()).decode())
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": plan.name,
           "clusters": [{"name": plan.name, "cluster": cluster}],
           "users": [{"name": f"{plan.name}-{plan.service_account}", "user": {"token": token}}],
           "contexts": [{"name": plan.name, "context": {"cluster": plan.name,
                                                        "user": f"{plan.name}-{plan.service_account}"}}]}
    out = StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(doc, out)
    return out.getvalue()


def cluster_secret(plan: SecretPlan, kubeconfig: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": plan.name, "namespace": plan.secret_namespace,
                         "labels": {plan.label: "true", **MANAGED_BY}},
            "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}}


def _b64decode(value: str | None) -> str:
    return base64.b64decode(value or "").decode("utf-8") if value else ""


def _ensure_role_and_binding(remote: ClusterApi, plan: SecretPlan, manifests: list[dict[str, Any]]) -> None:
    role = remote.call("read ClusterRole", remote.rbac.read_cluster_role, CLUSTER_ROLE)
    if role is None:
        remote.ensure("ClusterRole", None, cluster_role())
    else:
        have = [{"apiGroups": r.api_groups, "resources": r.resources, "verbs": r.verbs} for r in role.rules or []]
        if have != RULES:
            body = cluster_role()
            body["metadata"]["resourceVersion"] = role.metadata.resource_version
            remote.call("replace ClusterRole", remote.rbac.replace_cluster_role, CLUSTER_ROLE, body)
    binding = manifests[3]
    found = remote.call("read ClusterRoleBinding", remote.rbac.read_cluster_role_binding, plan.binding)
    if found is not None and (found.role_ref.name != CLUSTER_ROLE or not any(
            s.name == plan.service_account and s.namespace == plan.remote_namespace for s in found.subjects or [])):
        remote.call("delete ClusterRoleBinding", remote.rbac.delete_cluster_role_binding, plan.binding)
        found = None  # roleRef cannot change: re-create
    if found is None:
        remote.ensure("ClusterRoleBinding", None, binding)


def _wait_for_token(remote: ClusterApi, plan: SecretPlan, timeout: float,
                    sleep: Callable[[float], None]) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        secret = remote.call("read token Secret", remote.core.read_namespaced_secret, plan.token_secret,
                             plan.remote_namespace)
        data = (secret.data or {}) if secret is not None else {}
        if data.get("token"):
            return _b64decode(data.get("token")), _b64decode(data.get("ca.crt"))
        if time.monotonic() >= deadline:
            raise UnreachableError(f"remote: the token controller did not fill Secret {plan.remote_namespace}/"
                                   f"{plan.token_secret} within {timeout:g}s (does ServiceAccount "
                                   f"{plan.service_account} exist?)")
        sleep(0.5)


def provision(remote_client: Any, primary_client: Any, plan: SecretPlan, *, timeout: float = 60.0,
              ca_fallback: str = "", sleep: Callable[[float], None] = time.sleep) -> str:
    """Do it: 'created', 'updated' or 'unchanged' (the primary's Secret)."""
    remote = ClusterApi(remote_client, "remote")
    manifests = remote_manifests(plan)
    remote.ensure("Namespace", None, manifests[0])
    remote.ensure("ServiceAccount", plan.remote_namespace, manifests[1])
    _ensure_role_and_binding(remote, plan, manifests)
    remote.ensure("Secret", plan.remote_namespace, manifests[4])
    token, ca_pem = _wait_for_token(remote, plan, timeout, sleep)
    wanted = cluster_secret(plan, kubeconfig_text(plan, ca_pem or ca_fallback, token))
    primary = ClusterApi(primary_client, "primary")
    primary.ensure("Namespace", None, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": plan.secret_namespace}})
    found = primary.call("read cluster Secret", primary.core.read_namespaced_secret, plan.name,
                         plan.secret_namespace)
    if found is None:
        primary.call("create cluster Secret", primary.core.create_namespaced_secret, plan.secret_namespace, wanted)
        return "created"
    labels = found.metadata.labels or {}
    if (found.data or {}).get("kubeconfig") == wanted["data"]["kubeconfig"] and labels.get(plan.label) == "true":
        return "unchanged"
    wanted["metadata"]["labels"] = {**labels, **wanted["metadata"]["labels"]}
    wanted["metadata"]["annotations"] = dict(found.metadata.annotations or {})
    wanted["metadata"]["resourceVersion"] = found.metadata.resource_version
    wanted["data"] = {**(found.data or {}), **wanted["data"]}
    primary.call("update cluster Secret", primary.core.replace_namespaced_secret, plan.name, plan.secret_namespace,
                 wanted)
    return "updated"


# --- the commands ------------------------------------------------------------------------------


def _dump(doc: dict[str, Any], where: str) -> str:
    from io import StringIO

    from ruamel.yaml import YAML

    out = StringIO()
    YAML().dump(doc, out)  # round-trip dumper: block style, literal kubeconfig
    return f"---\n# {where}\n{out.getvalue()}"


def _dry_run(plan: SecretPlan, remote_context: str, primary_context: str | None, with_ca: bool) -> str:
    from ruamel.yaml.scalarstring import LiteralScalarString

    secret = cluster_secret(plan, "")
    del secret["data"]
    text = kubeconfig_text(plan, REDACTED if with_ca else "", REDACTED)
    secret["stringData"] = {"kubeconfig": LiteralScalarString(text)}
    remote = f"on the remote cluster (context {remote_context})"
    primary = f"on the primary cluster (context {primary_context or 'current'})"
    return "".join([*(_dump(doc, remote) for doc in remote_manifests(plan)), _dump(secret, primary)])


def add_cluster_secret(name: str, *, remote_context: str, primary_context: str | None = None,
                       kubeconfig: str | None = None, remote_server: str | None = None,
                       remote_namespace: str = DEFAULT_REMOTE_NAMESPACE,
                       service_account: str = DEFAULT_SERVICE_ACCOUNT,
                       cluster_secret_namespace: str = DEFAULT_SECRET_NAMESPACE,
                       cluster_secret_label: str = DEFAULT_LABEL, timeout: float = 60.0,
                       dry_run: bool = False) -> Result:
    """``gitdns add-cluster-secret``: the manifests (``dry_run``), or what was done."""
    config_file = kubeconfig or os.environ.get("KUBECONFIG") or None
    remote_client = api_client("add-cluster-secret", context=remote_context, config_file=config_file,
                               in_cluster=False)
    server, ca = server_and_ca(remote_client)
    plan = SecretPlan(name, remote_namespace, service_account, cluster_secret_namespace, cluster_secret_label,
                      remote_server or server)
    if dry_run:
        return Result(out=[_dry_run(plan, remote_context, primary_context, bool(ca))])
    primary_client = api_client("add-cluster-secret", context=primary_context, config_file=config_file,
                                in_cluster=False)
    outcome = provision(remote_client, primary_client, plan, timeout=timeout, ca_fallback=ca)
    result = Result()
    result.line(f"cluster secret {plan.secret_namespace}/{plan.name} {outcome} on the primary "
                f"({primary_context or 'current context'}): remote {plan.server} as ServiceAccount "
                f"{plan.remote_namespace}/{plan.service_account} bound to ClusterRole {CLUSTER_ROLE}")
    return result


def cluster_id(instance: str = "", read_uid: Callable[[], str] | None = None) -> Result:
    """``gitdns cluster-id``: the running cluster's kube-system namespace UID, or with
    ``instance`` that install's owner id ``<UID>.<instance>`` (`gitdns.core.owner.install`)."""
    from gitdns.core.owner.install import check_instance, owner_id
    from gitdns.errors import ConfigError

    try:
        if instance:
            check_instance(instance)  # a bad name is refused before the cluster is asked
    except ValueError as exc:
        raise ConfigError(f"--instance {exc}") from None
    if read_uid is None:
        from gitdns.adapters.kube.access import kube_system_uid

        read_uid = kube_system_uid
    try:
        ident = owner_id(read_uid(), instance)
    except ValueError as exc:
        raise ConfigError(f"--instance {exc}") from None
    return Result(out=[ident + "\n"])
