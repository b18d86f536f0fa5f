"""The shipped Roles grant Secrets by name only, and only the names the settings list.

A Secret the repository names (a Zone's ``credentials.secret``, a ``healthCheck.headersSecret``) is
read only when the daemon's settings list it (``GITDNS_CREDENTIALS_SECRETS``,
``GITDNS_HEADERS_SECRETS``; gitdns/core/reach.py, gitdns/providers/credentials.py
``secret_gate``).  The RBAC is the second line: every Role or ClusterRole rule on Secrets in every
render of deploy/ (each kustomization, and the bases with each opt-in component) must

* ``get`` by ``resourceNames``, each name one the settings of the workload it is bound to list —
  never every Secret of the namespace, where the git credential and the webhook secret live too;
* never ``list``/``watch``, except the features that must find a Secret by label (RBAC cannot
  narrow a list by label), each scoped to one namespace or left for the user to bind: `LISTS`;
* never list, in the settings, a Secret the workload mounts for something else (a git credential).

`secret_grant_problems` is the check; the tests below also show it failing on grants too wide.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from tests.test_deploy import (
    BASE,
    COMPONENTS,
    DEPLOY,
    KUSTOMIZATIONS,
    ORCHESTRATOR_BASE,
    _id,
    find,
    kustomize,
    provider_secret_patches,
    secret_files,
    settings_merge,
    settings_of,
    write_kustomization,
)

# (kind, name) -> why it lists Secrets: the features that find a Secret by its label.
LISTS = {
    ("Role", "gitdns-default-provider"): "default-provider-secret: the Secret labelled "
                                         "kuadrant.io/default-provider=true in the agent's namespace",
    ("Role", "gitdns-cluster-secrets"): "remote-cluster/primary: kubeconfig Secrets labelled "
                                        "kuadrant.io/multicluster-kubeconfig, in kuadrant-system only",
    ("ClusterRole", "gitdns-default-provider-reader"): "remote-cluster/primary: bound by the user, per namespace",
}
LISTED = ("GITDNS_CREDENTIALS_SECRETS", "GITDNS_HEADERS_SECRETS")  # the settings naming readable Secrets
ORCHESTRATOR_COMPONENTS = DEPLOY / "orchestrator" / "components"


def _entries(value: str, namespace: str) -> set[str]:
    """A list setting's Secret names, in ``namespace`` (``NS/NAME`` entries of another are not)."""
    out = set()
    for entry in re.split(r"[,\s]+", value or ""):
        ns, _, name = entry.rpartition("/")
        if entry and ns in ("", namespace):
            out.add(name)
    return out


def _bound_workloads(docs: list[dict[str, Any]], role: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The (pod spec, its namespace) of every Deployment whose ServiceAccount a binding in ``docs``
    gives ``role`` to."""
    out = []
    for binding in find(docs, "RoleBinding") + find(docs, "ClusterRoleBinding"):
        ref = binding["roleRef"]
        if ref["kind"] != role["kind"] or ref["name"] != role["metadata"]["name"]:
            continue
        if binding["kind"] == "RoleBinding" and binding["metadata"].get("namespace") != role["metadata"].get(
                "namespace") and role["kind"] == "Role":
            continue
        for subject in binding.get("subjects") or []:
            for deployment in find(docs, "Deployment"):
                pod = deployment["spec"]["template"]["spec"]
                if subject.get("kind") == "ServiceAccount" and pod.get("serviceAccountName") == subject["name"] \
                        and deployment["metadata"].get("namespace") == subject.get("namespace"):
                    out.append((pod, deployment["metadata"]["namespace"]))
    return out


def secret_grant_problems(docs: list[dict[str, Any]]) -> list[str]:
    """Every Secret rule of ``docs`` wider than the settings of the workloads it is bound to."""
    problems = []
    for role in find(docs, "Role") + find(docs, "ClusterRole"):
        where = f"{role['kind']} {role['metadata'].get('namespace', '')}/{role['metadata']['name']}"
        workloads = _bound_workloads(docs, role)
        for rule in role.get("rules") or []:
            if not {"", "*"} & set(rule.get("apiGroups") or []) or not {"secrets", "*"} & set(rule["resources"]):
                continue
            verbs = set(rule["verbs"])
            if verbs - {"get"}:
                if verbs != {"list"} or (role["kind"], role["metadata"]["name"]) not in LISTS \
                        or rule.get("resourceNames"):
                    problems.append(f"{where}: {sorted(verbs)} on Secrets (only `get` by name; `list` only for "
                                    "a feature that finds a Secret by label)")
                continue
            names = rule.get("resourceNames") or []
            if not names:
                problems.append(f"{where}: get on every Secret of its namespace (no resourceNames)")
            if "*" in names:
                problems.append(f"{where}: resourceNames '*'")
            for pod, namespace in workloads:
                listed: set[str] = set()
                for container in pod["containers"]:
                    env = settings_of(docs, container, namespace)
                    listed |= {n for key in LISTED for n in _entries(env.get(key, ""), namespace)}
                for name in names:
                    if name not in listed:
                        problems.append(f"{where}: may get Secret {name!r}, which the workload's settings do "
                                        f"not list ({', '.join(LISTED)}: {sorted(listed) or 'none'})")
    for deployment in find(docs, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        namespace = deployment["metadata"].get("namespace", "")
        for container in pod["containers"]:
            env = settings_of(docs, container, namespace)
            listed = {n for key in LISTED for n in _entries(env.get(key, ""), namespace)}
            mounted = {name for name, _ in secret_files(pod, container).values()}
            for name in sorted(listed & mounted):
                problems.append(f"Deployment {deployment['metadata']['name']}: its settings let the repository "
                                f"name Secret {name!r}, which it mounts for something else")
    return problems


# --- every render of deploy/ ----------------------------------------------------------------------


def _with_component(tmp: Path, base: Path, component: Path) -> list[dict[str, Any]]:
    return kustomize(write_kustomization(tmp / component.name, resources=[base], components=[component]))


def test_every_shipped_secret_grant_is_by_name_and_listed() -> None:
    problems = {_id(d): secret_grant_problems(kustomize(d)) for d in KUSTOMIZATIONS}
    assert {d: p for d, p in problems.items() if p} == {}


def test_the_bases_with_each_component_grant_secrets_by_name(tmp_path: Path) -> None:
    renders = {f"base+{c.name}": _with_component(tmp_path / "agent", BASE, c)
               for c in sorted(p for p in COMPONENTS.iterdir() if p.is_dir())}
    orchestrator = sorted(p for p in ORCHESTRATOR_COMPONENTS.iterdir() if p.is_dir() and p.name != "sidecar")
    renders.update({f"orchestrator+{c.name}": _with_component(tmp_path / "orchestrator", ORCHESTRATOR_BASE, c)
                    for c in orchestrator})
    problems = {name: secret_grant_problems(docs) for name, docs in renders.items()}
    assert {name: p for name, p in problems.items() if p} == {}


def test_the_bases_grant_exactly_the_listed_default_names(tmp_path: Path) -> None:
    agent, orchestrator = kustomize(BASE), kustomize(ORCHESTRATOR_BASE)
    # The agent's base reads no Secret through the API: it lists none and grants none.
    assert not find(agent, "Role", "gitdns-provider-credentials")
    (config,) = find(agent, "ConfigMap")
    assert config["data"]["GITDNS_CREDENTIALS_SECRETS"] == ""
    assert not config["data"].get("GITDNS_HEADERS_SECRETS")  # a DNSPolicy's headersSecret: none by default
    # components/provider-secret names one and grants exactly it, both halves together.
    keyed = _with_component(tmp_path, BASE, COMPONENTS / "provider-secret")
    (role,) = find(keyed, "Role", "gitdns-provider-credentials")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["gitdns-provider"],
                              "verbs": ["get"]}]
    (config,) = find(keyed, "ConfigMap")
    assert config["data"]["GITDNS_CREDENTIALS_SECRETS"] == "gitdns-provider"
    (role,) = find(orchestrator, "Role", "gitdns-orchestrator-secrets")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["gitdns-probe-headers"],
                              "verbs": ["get"]}]
    (config,) = find(orchestrator, "ConfigMap")
    assert config["data"]["GITDNS_HEADERS_SECRETS"] == "gitdns-probe-headers"
    assert config["data"]["GITDNS_PROBE_ALLOW_RANGES"] == ""


@pytest.mark.parametrize("overlay", ["route53-irsa", "google-workload-identity", "azure-workload-identity"])
def test_the_workload_identities_read_no_provider_secret(overlay: str) -> None:
    docs = kustomize(DEPLOY / "overlays" / overlay)
    assert not find(docs, "Role", "gitdns-provider-credentials")
    (config,) = find(docs, "ConfigMap")
    assert config["data"]["GITDNS_CREDENTIALS_SECRETS"] == ""


# --- grants too wide fail -------------------------------------------------------------------------


def _widened(docs: list[dict[str, Any]], role: str, change: Any) -> list[dict[str, Any]]:
    out = copy.deepcopy(docs)
    (doc,) = [d for d in out if d["kind"] in ("Role", "ClusterRole") and d["metadata"]["name"] == role]
    change(doc["rules"][0])
    return out


@pytest.mark.parametrize(("base", "role"), [(BASE, "gitdns-provider-credentials"),
                                            (ORCHESTRATOR_BASE, "gitdns-orchestrator-secrets")], ids=["agent", "orch"])
def test_a_grant_too_wide_fails_the_check(base: Path, role: str, tmp_path: Path) -> None:
    docs = _with_component(tmp_path, base, COMPONENTS / "provider-secret") if base == BASE else kustomize(base)
    assert secret_grant_problems(docs) == []
    every = _widened(docs, role, lambda rule: rule.pop("resourceNames"))
    assert any("no resourceNames" in p for p in secret_grant_problems(every))
    star = _widened(docs, role, lambda rule: rule.update(resourceNames=["*"]))
    assert secret_grant_problems(star)
    unlisted = _widened(docs, role, lambda rule: rule["resourceNames"].append("gitdns-git-ssh"))
    assert any("'gitdns-git-ssh'" in p and "do not list" in p for p in secret_grant_problems(unlisted))
    listing = _widened(docs, role, lambda rule: rule.update(verbs=["get", "list"]))
    assert any("'list'" in p for p in secret_grant_problems(listing))
    watching = _widened(docs, role, lambda rule: rule.update(verbs=["watch"]))
    assert secret_grant_problems(watching)
    wildcard = _widened(docs, role, lambda rule: rule.update(resources=["*"], resourceNames=[]))
    assert secret_grant_problems(wildcard)


def test_an_overlay_granting_a_name_it_does_not_list_fails(tmp_path: Path) -> None:
    """The failover-fleet way, with the settings forgotten: the Role names a Secret the agent
    would refuse to read, and the check says so."""
    assert secret_grant_problems(kustomize(BASE)) == []
    role_only = provider_secret_patches("gitdns-route53")[1:]
    docs = kustomize(write_kustomization(tmp_path / "forgot", resources=[BASE],
                                         components=[COMPONENTS / "provider-secret"], patches=role_only))
    assert any("'gitdns-route53'" in p for p in secret_grant_problems(docs))
    # A generator merge in the kustomization listing the component is no way to list it: the
    # component's merge runs after it (the header says so); the check sees it.
    merged = kustomize(write_kustomization(
        tmp_path / "merged", resources=[BASE], components=[COMPONENTS / "provider-secret"], patches=role_only,
        configMapGenerator=settings_merge("gitdns-config", GITDNS_CREDENTIALS_SECRETS="gitdns-route53")))
    assert any("'gitdns-route53'" in p for p in secret_grant_problems(merged))
    fixed = kustomize(write_kustomization(tmp_path / "fixed", resources=[BASE],
                                          components=[COMPONENTS / "provider-secret"],
                                          patches=provider_secret_patches("gitdns-route53")))
    assert secret_grant_problems(fixed) == []
    assert find(fixed, "ConfigMap")[0]["data"]["GITDNS_CREDENTIALS_SECRETS"] == "gitdns-route53"


def test_listing_a_mounted_credential_fails(tmp_path: Path) -> None:
    """The git deploy key listed as a Secret the repository may name: refused by the check."""
    assert secret_grant_problems(kustomize(BASE)) == []
    docs = kustomize(write_kustomization(
        tmp_path / "leak", resources=[BASE], components=[COMPONENTS / "github-ssh"],
        configMapGenerator=settings_merge("gitdns-config", GITDNS_HEADERS_SECRETS="gitdns-git-ssh")))
    assert any("'gitdns-git-ssh'" in p and "mounts" in p for p in secret_grant_problems(docs))
