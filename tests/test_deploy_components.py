"""The agent's components, overlays and examples under deploy/, as users compose them.

- the workload-identity overlays give the provider SDKs what they look for (an IRSA role, a
  GKE service account, an Azure client id and pod label) and the agent no Secret access;
  the credentials gitdns's own provider code then builds are the identity's;
- the transport and webhook Secrets an overlay mounts are the ones its header tells the user
  to create, with the same keys;
- gateway-status, composed as its README says (RoleBindings written by `kubectl create
  rolebinding --dry-run=client` for the namespaces of a Cluster's spec.gateways), binds
  nowhere else, also for an install moved with ``namespace:``;
- the alerts read only metrics the agent exports, and the PodMonitor scrapes the admin port;
- the rendered RBAC, loaded into the fake Kubernetes API with RBAC enforced, lets the agent's
  own calls through (the cluster id, its Lease, the mode ConfigMap, a provider Secret, a
  Gateway's status) and refuses their neighbours.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.agent.metrics import Metrics
from tests.test_deploy import (
    BASE,
    COMPONENTS,
    DEPLOY,
    KUBERNETES_VERSION,
    NAMESPACE,
    agent_container,
    agent_deployment,
    as_service_account,
    crd_problems,
    find,
    granted,
    kubernetes_validate_or_skip,
    kustomize,
    load_documents,
    load_rbac,
    only,
    provider_secret_patches,
    reference_problems,
    require_kubectl,
    rules,
    schema_problems,
    secret_files,
    settings_merge,
    settings_of,
    write_kustomization,
)
from tests.test_deploy_secrets import secret_grant_problems

ROOT = Path(__file__).resolve().parent.parent
OVERLAYS = DEPLOY / "overlays"
EXAMPLES = DEPLOY / "examples"
GATEWAYS = ("gateway.networking.k8s.io", "v1", "gateways")


def no_secret_access(docs: list[dict[str, Any]]) -> bool:
    return not any("secrets" in rule["resources"] for _, rule in rules(docs))


# --- workload identity ----------------------------------------------------------------------------


def test_route53_irsa(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    docs = kustomize(OVERLAYS / "route53-irsa")
    account = only(docs, "ServiceAccount")
    arn = account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
    assert re.fullmatch(r"arn:aws:iam::\d{12}:role/[\w+=,.@/-]+", arn)
    assert no_secret_access(docs)  # the role is the credential: no provider Secret is read
    env = settings_of(docs, agent_container(docs), NAMESPACE)
    assert not [name for name in env if name.startswith("AWS_")]
    # What EKS's pod identity webhook injects is what botocore's chain, in the client gitdns
    # builds for a Zone without credentials, takes up (no request is sent to build it).
    from gitdns.providers.route53.api import boto3_client

    token = tmp_path / "token"
    token.write_text("header.payload.signature")
    monkeypatch.setenv("AWS_ROLE_ARN", arn)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    credentials = boto3_client(None, None, {})._request_signer._credentials  # type: ignore[attr-defined]
    assert credentials.method == "assume-role-with-web-identity"


def test_google_workload_identity() -> None:
    docs = kustomize(OVERLAYS / "google-workload-identity")
    email = only(docs, "ServiceAccount")["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
    assert re.fullmatch(r"[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com", email)
    assert no_secret_access(docs)
    # A Zone without credentials: no explicit credentials, google-auth's default chain (the
    # GKE metadata server) is used.
    from gitdns.core.model import ProviderRef
    from gitdns.providers.fences import Fences
    from gitdns.providers.google.provider import _credentials

    assert _credentials(ProviderRef("google", (("project", "p"),)), None, Fences()) == (None, None)


def test_azure_workload_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    docs = kustomize(OVERLAYS / "azure-workload-identity")
    client_id = only(docs, "ServiceAccount")["metadata"]["annotations"]["azure.workload.identity/client-id"]
    assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", client_id)
    deployment = agent_deployment(docs)
    assert deployment["spec"]["template"]["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    assert "azure.workload.identity/use" not in deployment["spec"]["selector"]["matchLabels"]  # immutable
    assert no_secret_access(docs)
    # What the webhook injects for that label and annotation is what DefaultAzureCredential,
    # as gitdns builds it for a Zone without a client secret, turns into a workload identity.
    from gitdns.providers.azure.provider import make_credential

    token = tmp_path / "azure-identity-token"
    token.write_text("header.payload.signature")
    monkeypatch.delenv("AZURE_TOKEN_CREDENTIALS", raising=False)  # the test session's restriction
    for name, value in (("AZURE_CLIENT_ID", client_id), ("AZURE_TENANT_ID", "11111111-1111-1111-1111-111111111111"),
                        ("AZURE_FEDERATED_TOKEN_FILE", str(token)),
                        ("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com/")):
        monkeypatch.setenv(name, value)
    credential = make_credential({})
    assert "WorkloadIdentityCredential" in [type(c).__name__ for c in credential.credentials]


def test_identity_overlays_keep_the_transport_composable(tmp_path: Path) -> None:
    """The identity components combine with a transport: setup 1's example is that."""
    docs = kustomize(EXAMPLES / "route53-github")
    files = secret_files(agent_deployment(docs)["spec"]["template"]["spec"], agent_container(docs))
    assert set(files.values()) == {("gitdns-git-ssh", "ssh-privatekey"), ("gitdns-git-ssh", "known_hosts"),
                                   ("gitdns-webhook", "github-secret")}
    assert "eks.amazonaws.com/role-arn" in only(docs, "ServiceAccount")["metadata"]["annotations"]
    assert settings_of(docs, agent_container(docs), NAMESPACE)["GITDNS_REPO"].startswith("ssh://git@github.com/")
    assert no_secret_access(docs)


# Each identity component: the ServiceAccount annotations and the pod-template labels it adds.
IDENTITIES = {
    "route53-irsa": ({"eks.amazonaws.com/role-arn"}, set()),
    "google-workload-identity": ({"iam.gke.io/gcp-service-account"}, set()),
    "azure-workload-identity": ({"azure.workload.identity/client-id"}, {"azure.workload.identity/use"}),
}
IDENTITY_SETS = [combo for n in range(1, len(IDENTITIES) + 1) for combo in itertools.combinations(IDENTITIES, n)]
# The user's own, set below the components: an identity component adds its keys beside them.
OWN_ANNOTATION = ("example.com/owner", "dns-team")
OWN_LABEL = ("example.com/team", "dns")
OWN = """\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: gitdns
  annotations:
    example.com/owner: dns-team
"""
OWN_LABEL_PATCH = """\
- op: add
  path: /spec/template/metadata/labels/example.com~1team
  value: dns
"""


def _identity_problems(docs: list[dict[str, Any]], identities: tuple[str, ...], *, keyed: bool,
                       values: dict[str, str] | None = None) -> list[str]:
    """What a render with ``identities`` (and provider-secret when ``keyed``) must hold: every
    annotation and label of each, the user's own kept, the provider Secret Role exactly when a
    key-based provider is configured, valid and consistent manifests."""
    problems = []
    annotations = only(docs, "ServiceAccount")["metadata"].get("annotations") or {}
    template = agent_deployment(docs)["spec"]["template"]
    labels = template["metadata"]["labels"]
    for identity in identities:
        keys, pod_labels = IDENTITIES[identity]
        problems += [f"{identity}: annotation {k} missing" for k in keys if not annotations.get(k)]
        problems += [f"{identity}: pod label {k} missing" for k in pod_labels if labels.get(k) != "true"]
    for other in set(IDENTITIES) - set(identities):
        problems += [f"annotation {k} of {other}, not listed" for k in IDENTITIES[other][0] if k in annotations]
    for key, value in (values or {}).items():
        if annotations.get(key) != value:
            problems.append(f"annotation {key}: {annotations.get(key)!r}, not the overlay's {value!r}")
    if annotations.get(OWN_ANNOTATION[0]) != OWN_ANNOTATION[1]:
        problems.append(f"the ServiceAccount's own annotation was replaced: {annotations}")
    if labels.get(OWN_LABEL[0]) != OWN_LABEL[1] or "prometheus.io/scrape" not in template["metadata"]["annotations"]:
        problems.append(f"the pod template's own labels or annotations were replaced: {template['metadata']}")
    if set(agent_deployment(docs)["spec"]["selector"]["matchLabels"]) - {"app.kubernetes.io/name",
                                                                         "app.kubernetes.io/component"}:
        problems.append("the Deployment's selector changed (it is immutable)")
    env = settings_of(docs, agent_container(docs), agent_deployment(docs)["metadata"]["namespace"])
    roles = [r for r in find(docs, "Role") if r["metadata"]["name"].endswith("gitdns-provider-credentials")]
    if keyed:
        if [r["rules"] for r in roles] != [[{"apiGroups": [""], "resources": ["secrets"],
                                             "resourceNames": ["gitdns-provider"], "verbs": ["get"]}]]:
            problems.append(f"a key-based provider is configured, yet the Secret Role is {roles}")
        if env.get("GITDNS_CREDENTIALS_SECRETS") != "gitdns-provider":
            problems.append(f"GITDNS_CREDENTIALS_SECRETS={env.get('GITDNS_CREDENTIALS_SECRETS')!r}")
    elif roles or env.get("GITDNS_CREDENTIALS_SECRETS"):
        problems.append("no key-based provider, yet a provider Secret is listed or granted")
    problems += secret_grant_problems(docs) + reference_problems(docs)
    return problems


def _identity_render(directory: Path, resource: Path, identities: tuple[str, ...], *,
                     keyed: bool) -> list[dict[str, Any]]:
    """``resource`` (the base or an overlay) with the user's own annotation and pod label, and on top
    the identity components (and provider-secret when ``keyed``), as a user composes them."""
    own = write_kustomization(directory / "own", resources=[resource], patches=[
        {"target": {"version": "v1", "kind": "ServiceAccount", "name": "gitdns"}, "patch": OWN},
        {"target": {"group": "apps", "kind": "Deployment", "name": "gitdns"}, "patch": OWN_LABEL_PATCH}])
    components = [COMPONENTS / i for i in identities] + [COMPONENTS / "provider-secret"] * keyed
    return kustomize(write_kustomization(directory / "top", resources=[own], components=components))


@pytest.mark.parametrize("keyed", [False, True], ids=["identity-only", "and-provider-secret"])
@pytest.mark.parametrize("identities", IDENTITY_SETS, ids="+".join)
def test_identity_components_compose_with_each_other_and_a_provider_secret(
        identities: tuple[str, ...], keyed: bool, tmp_path: Path) -> None:
    """Each alone, every pair and all three, on the base: each adds its annotation (and label) by
    key, none removes another's, the user's own or the provider Secret Role; a Cloud DNS zone
    through Workload Identity beside an RFC2136 zone with a TSIG Secret is the second case."""
    docs = _identity_render(tmp_path, BASE, identities, keyed=keyed)
    assert _identity_problems(docs, identities, keyed=keyed) == []
    kubernetes_validate_or_skip()
    assert schema_problems(docs, KUBERNETES_VERSION) == []


@pytest.mark.parametrize("keyed", [False, True], ids=["identity-only", "and-provider-secret"])
@pytest.mark.parametrize(("overlay", "other"), [(o, c) for o in IDENTITIES for c in IDENTITIES if c != o],
                         ids=lambda v: v)
def test_an_identity_overlay_takes_another_identity_component(overlay: str, other: str, keyed: bool,
                                                               tmp_path: Path) -> None:
    """deploy/overlays/<identity> (its own value patched in) with another identity component."""
    (key,) = IDENTITIES[overlay][0]
    value = only(kustomize(OVERLAYS / overlay), "ServiceAccount")["metadata"]["annotations"][key]
    docs = _identity_render(tmp_path, OVERLAYS / overlay, (other,), keyed=keyed)
    assert _identity_problems(docs, (overlay, other), keyed=keyed, values={key: value}) == []


def test_the_identity_check_could_fail(tmp_path: Path) -> None:
    """The old way (an `add` of the whole annotations map, the Secret Role deleted) fails it."""
    docs = _identity_render(tmp_path, BASE, ("route53-irsa",), keyed=True)
    account = only(docs, "ServiceAccount")
    account["metadata"]["annotations"] = {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/x"}
    docs = [d for d in docs if not d["metadata"]["name"].endswith("gitdns-provider-credentials")]
    problems = _identity_problems(docs, ("route53-irsa",), keyed=True)
    assert any("own annotation was replaced" in p for p in problems)
    assert any("Secret Role" in p for p in problems)


def test_an_https_transport_with_a_private_ca_for_both_workloads(tmp_path: Path) -> None:
    from gitdns.commands.git.remote import git_auth

    for base, name in ((BASE, "gitdns"), (DEPLOY / "orchestrator" / "base", "gitdns-orchestrator")):
        docs = kustomize(write_kustomization(tmp_path / name, resources=[base],
                                             components=[COMPONENTS / "https-token", COMPONENTS / "git-ca"]))
        (deployment,) = find(docs, "Deployment", name)
        pod = deployment["spec"]["template"]["spec"]
        files = secret_files(pod, pod["containers"][0])
        assert set(files.values()) == {("gitdns-git-token", "token"), ("gitdns-git-ca", "ca.crt")}
        env = {e["name"]: e["value"] for e in pod["containers"][0]["env"] if "value" in e}
        auth = git_auth({}, env)  # the transport both workloads build from these variables
        assert str(auth.token_file) in files and str(auth.ca_file) in files


def test_the_fleet_example_is_one_manifest_for_every_cluster() -> None:
    docs = kustomize(EXAMPLES / "failover-fleet")
    env = settings_of(docs, agent_container(docs), NAMESPACE)
    assert "GITDNS_CLUSTER" not in env  # each agent reads its kube-system UID
    assert granted(docs, "ClusterRole", "gitdns-cluster-id") == {("", "namespaces"): (["get"], ["kube-system"])}
    # The one provider Secret, by name.
    assert granted(docs, "Role", "gitdns-provider-credentials") == {("", "secrets"): (["get"], ["gitdns-route53"])}
    header = (EXAMPLES / "failover-fleet" / "kustomization.yaml").read_text()
    assert "gitdns-route53" in header and "kuadrant.io/aws" in header


def provider_snippets() -> list[tuple[Path, str]]:
    """Every ``spec.provider {...}`` the docs and headers under deploy/ tell users to write."""
    out = []
    for path in [*DEPLOY.rglob("*.md"), *DEPLOY.rglob("kustomization.yaml")]:
        text = path.read_text().replace("\n#", " ")
        for match in re.finditer(r"spec\.provider:?\s*`?\{", text):
            start, depth = match.end() - 1, 0
            for end in range(start, len(text)):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                if depth == 0:
                    out.append((path, text[start:end + 1]))
                    break
    return out


def test_the_zones_the_instructions_give_validate() -> None:
    import json

    import jsonschema
    from ruamel.yaml import YAML

    schema = json.loads((ROOT / "schemas" / "zone.schema.json").read_text())
    provider = schema["properties"]["spec"]["properties"]["provider"]
    snippets = provider_snippets()
    assert len(snippets) >= 5
    for path, snippet in snippets:
        value = YAML(typ="safe").load(snippet.replace("...", "x"))
        errors = list(jsonschema.Draft202012Validator(provider).iter_errors(value))
        assert not errors, f"{path}: {snippet}: {errors[0].message}"
    # The check could fail: the key is `type`.
    assert list(jsonschema.Draft202012Validator(provider).iter_errors({"name": "route53"}))


# --- what the headers tell users to create ---------------------------------------------------------


@pytest.mark.parametrize("directory", [d for d in (*OVERLAYS.iterdir(), *EXAMPLES.iterdir())
                                       if (d / "kustomization.yaml").is_file()], ids=lambda d: d.name)
def test_the_header_names_every_secret_and_key_the_pods_mount(directory: Path) -> None:
    docs = kustomize(directory)
    header = "\n".join(
        line for path in [directory / "kustomization.yaml", *directory.glob("*/kustomization.yaml")]
        for line in path.read_text().splitlines() if line.startswith("#"))
    for deployment in find(docs, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"]:
            for secret, key in secret_files(pod, container).values():
                assert secret in header, f"{directory.name}: the header does not say to create Secret {secret}"
                assert key in header, f"{directory.name}: the header does not name the key {key} of {secret}"


# --- gateway-status ------------------------------------------------------------------------------


def gateway_namespaces(cluster_file: Path) -> list[str]:
    (cluster,) = load_documents(cluster_file)
    return sorted({g["namespace"] for g in cluster["spec"]["gateways"]})


def rolebindings(namespaces: list[str], subject: str) -> str:
    """What the component's README loop writes: `kubectl create rolebinding --dry-run=client`."""
    kubectl = require_kubectl()
    out = []
    for namespace in namespaces:
        done = subprocess.run([kubectl, "create", "rolebinding", "gitdns-gateway-status", "--namespace", namespace,
                               "--clusterrole", "gitdns-gateway-status", "--serviceaccount", subject,
                               "--dry-run=client", "-o", "yaml"], capture_output=True, text=True, timeout=60,
                              check=True, env={"PATH": "/usr/bin:/bin", "KUBECONFIG": "/dev/null"})
        out.append(done.stdout)
    return "---\n".join(out)


def test_the_gateway_readme_recipe(tmp_path: Path) -> None:
    readme = (COMPONENTS / "gateway-status" / "README.md").read_text()
    assert "kubectl create rolebinding gitdns-gateway-status" in readme and "spec.gateways" in readme
    namespaces = gateway_namespaces(ROOT / "example-repo" / "clusters" / "eu-west-1.yaml")
    assert namespaces == ["ingress", "web"]
    overlay = tmp_path / "agent"
    overlay.mkdir()
    (overlay / "gateway-rolebindings.yaml").write_text(rolebindings(namespaces, "gitdns-system:gitdns"))
    docs = kustomize(write_kustomization(overlay, resources=[BASE, "gateway-rolebindings.yaml"],
                                         components=[COMPONENTS / "gateway-status"]))
    assert granted(docs, "ClusterRole", "gitdns-gateway-status") == {
        ("gateway.networking.k8s.io", "gateways"): (["get"], []),
        ("gateway.networking.k8s.io", "gateways/status"): (["update"], []),
    }
    bound = [b for b in find(docs, "RoleBinding") if b["roleRef"]["name"] == "gitdns-gateway-status"]
    assert sorted(b["metadata"]["namespace"] for b in bound) == namespaces
    assert not [b for b in find(docs, "ClusterRoleBinding") if b["roleRef"]["name"] == "gitdns-gateway-status"]
    assert not reference_problems(docs, external_namespaces=namespaces), reference_problems(docs)


def test_gateway_bindings_beside_a_moved_install(tmp_path: Path) -> None:
    """The README's layout for an install moved with namespace: a sibling kustomization with
    the same namePrefix holds the ClusterRole and the RoleBindings (their subject written
    for the moved ServiceAccount), under a top kustomization that sets no namespace."""
    namespaces = ["ingress", "web"]
    agent = write_kustomization(tmp_path / "top" / "agent", resources=[BASE], namespace="dns-team",
                                namePrefix="team-")
    gateways = tmp_path / "top" / "gateways"
    gateways.mkdir()
    (gateways / "gateway-rolebindings.yaml").write_text(rolebindings(namespaces, "dns-team:team-gitdns"))
    write_kustomization(gateways, resources=["gateway-rolebindings.yaml"], namePrefix="team-",
                        components=[COMPONENTS / "gateway-status"])
    docs = kustomize(write_kustomization(tmp_path / "top", resources=[agent, gateways]))
    assert not reference_problems(docs, external_namespaces=namespaces), reference_problems(docs)
    bound = [b for b in find(docs, "RoleBinding") if b["roleRef"]["name"] == "team-gitdns-gateway-status"]
    assert sorted(b["metadata"]["namespace"] for b in bound) == namespaces
    for binding in bound:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "team-gitdns", "namespace": "dns-team"}]


# --- monitoring -------------------------------------------------------------------------------------


def _exported_names() -> set[str]:
    names = set()
    for family in Metrics().registry.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                    "summary": ("_sum", "_count")}.get(family.type, ("",))
        names.update(family.name + s for s in suffixes)
    return names


def test_agent_alerts_and_pod_monitor(tmp_path: Path) -> None:
    docs = kustomize(write_kustomization(tmp_path / "m", resources=[BASE], namespace="dns-team", components=[
        COMPONENTS / "prometheus-rule", COMPONENTS / "pod-monitor"]))
    for doc in find(docs, "PrometheusRule") + find(docs, "PodMonitor"):
        assert not crd_problems(doc), crd_problems(doc)
        assert doc["metadata"]["namespace"] == "dns-team"
    assert not reference_problems(docs), reference_problems(docs)  # the PodMonitor: the agent's pod, port admin
    (endpoint,) = only(docs, "PodMonitor")["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "admin" and endpoint["path"] == "/metrics"
    alerts = {r["alert"]: r for g in only(docs, "PrometheusRule")["spec"]["groups"] for r in g["rules"]}
    # Zone errors, conflicts and stalls: what /readyz no longer reports.
    assert {"GitdnsZoneErrors", "GitdnsConflicts", "GitdnsStalled"} <= set(alerts)
    exported = _exported_names()
    for name, alert in alerts.items():
        used = re.findall(r"\bgitdns_[a-z_]+", alert["expr"])
        assert used, name
        for metric in used:
            assert metric in exported, f"{name}: {metric} is not a metric the agent exports"
    assert "gitdns_zone_errors_total" in alerts["GitdnsZoneErrors"]["expr"]
    assert "gitdns_conflicts" in alerts["GitdnsConflicts"]["expr"]
    assert "gitdns_last_success_timestamp_seconds" in alerts["GitdnsStalled"]["expr"]


def test_the_alert_check_could_fail(tmp_path: Path) -> None:
    assert "gitdns_zone_error_total" not in _exported_names()  # a near miss is not exported
    assert "gitdns_zone_errors_total" in _exported_names()


# --- the rendered RBAC against the agent's own calls -------------------------------------------------


@pytest.fixture
def fake() -> Iterator[Any]:
    pytest.importorskip("kubernetes.client")
    from tests.fakes.kube_apiserver import FakeKube

    kube = FakeKube(kube_system_uid="3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63")
    kube.register(*GATEWAYS, kind="Gateway")
    kube.start()
    yield kube
    kube.stop()


def _agent_install(tmp_path: Path, *components: str, gateways: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The agent moved and prefixed (dns-team, team-) with ``components`` and provider-secret, its
    provider Secret renamed gitdns-route53 as that component's header says; with ``gateways``, the
    gateway-status layout of the component's README (a sibling kustomization) binding those
    namespaces."""
    agent = write_kustomization(
        tmp_path / "top" / "agent", resources=[BASE], namespace="dns-team", namePrefix="team-",
        components=[COMPONENTS / c for c in ("provider-secret", *components)],
        patches=provider_secret_patches("gitdns-route53"),
        configMapGenerator=settings_merge("gitdns-config", GITDNS_REPO="ssh://git@github.com/ORG/REPO.git"))
    parts: list[Path] = [agent]
    if gateways:
        sibling = tmp_path / "top" / "gateways"
        sibling.mkdir()
        (sibling / "gateway-rolebindings.yaml").write_text(rolebindings(list(gateways), "dns-team:team-gitdns"))
        parts.append(write_kustomization(sibling, resources=["gateway-rolebindings.yaml"], namePrefix="team-",
                                         components=[COMPONENTS / "gateway-status"]))
    return kustomize(write_kustomization(tmp_path / "top", resources=parts))


@pytest.mark.parametrize("with_default_provider", [False, True], ids=["named-secret", "default-provider"])
def test_the_rendered_rbac_allows_the_agents_calls_and_nothing_near(
        fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_default_provider: bool) -> None:
    from kubernetes.client.exceptions import ApiException

    from gitdns.adapters.kube import access as kube_adapter
    from gitdns.adapters.leases import KubeLease
    from gitdns.core.model import CredentialsRef
    from gitdns.errors import AuthError
    from gitdns.providers import defaultprovider
    from gitdns.providers.credentials import SecretNotListed, load_credentials
    from gitdns.providers.fences import Fences

    docs = _agent_install(tmp_path, "github-ssh", *["default-provider-secret"][:int(with_default_provider)])
    deployment = agent_deployment(docs)
    namespace = deployment["metadata"]["namespace"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    env = settings_of(docs, agent_container(docs), namespace)
    load_rbac(fake, docs)
    for name in ("gitdns-route53", "someone-elses"):
        fake.create("", "v1", "secrets", {"metadata": {"name": name, "labels": {defaultprovider.LABEL: "true"}},
                                          "type": "kuadrant.io/aws",
                                          "stringData": {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
                                                         "AWS_SECRET_ACCESS_KEY": "not-a-secret"}},
                    namespace=namespace)
    fake.create("", "v1", "configmaps", {"metadata": {"name": env["GITDNS_MODE_CONFIGMAP"]},
                                         "data": {"DNS_MODE": "primary"}}, namespace=namespace)
    fake.create("", "v1", "configmaps", {"metadata": {"name": "another"}}, namespace=namespace)
    fake.enforce_rbac = True
    as_service_account(fake, namespace, account, tmp_path, monkeypatch)
    monkeypatch.setenv("GITDNS_POD_NAMESPACE", namespace)

    # The cluster id: the kube-system Namespace's UID.
    assert kube_adapter.kube_system_uid() == fake.kube_system_uid
    # Its Lease: created, renewed, released.
    lease = KubeLease(namespace, fake.kube_system_uid, duration=60, clock=time.time, identity="gitdns-0")
    assert lease.acquire().held and lease.acquire().held
    lease.release()
    # The mode ConfigMap, by the name the settings give.
    assert kube_adapter.configmap_data(namespace, env["GITDNS_MODE_CONFIGMAP"]) == {"DNS_MODE": "primary"}
    # The provider Secret the overlay narrowed the Role to, listed in its settings.
    fences = Fences.parse(credentials_secrets=env["GITDNS_CREDENTIALS_SECRETS"])
    creds = load_credentials(CredentialsRef(secret="gitdns-route53"), provider="route53", fences=fences)
    assert creds["AWS_ACCESS_KEY_ID"] == "AKIDEXAMPLE"
    # With the component, the default provider Secret is found by its label.
    if with_default_provider:
        assert len(defaultprovider._list_labelled(defaultprovider.core_api(), namespace)) == 2
    assert not fake.forbidden, fake.forbidden

    # ... and nothing near them.
    with pytest.raises(SecretNotListed):  # not listed: no request at all
        load_credentials(CredentialsRef(secret="someone-elses"), provider="route53", fences=fences)
    wider = Fences.parse(credentials_secrets="gitdns-route53,someone-elses")  # listed, yet not in the Role
    with pytest.raises(AuthError):
        load_credentials(CredentialsRef(secret="someone-elses"), provider="route53", fences=wider)
    with pytest.raises(Exception, match="HTTP 403"):
        kube_adapter.configmap_data(namespace, "another")
    if not with_default_provider:
        with pytest.raises(AuthError):
            defaultprovider._list_labelled(defaultprovider.core_api(), namespace)
    from kubernetes import client

    with pytest.raises(ApiException) as refused:
        client.CoreV1Api().read_namespace("default")
    assert refused.value.status == 403
    assert fake.forbidden


def test_the_rendered_gateway_rbac_reaches_the_bound_namespaces_only(
        fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitdns.adapters.gateway.conditions import CONDITION_TYPE, set_policy_affected
    from gitdns.adapters.kube.client import load_default
    from gitdns.errors import AuthError

    docs = _agent_install(tmp_path, gateways=("ingress",))  # bound in `ingress` only
    deployment = agent_deployment(docs)
    namespace = deployment["metadata"]["namespace"]
    for ns in ("ingress", "web"):
        fake.create("", "v1", "namespaces", {"metadata": {"name": ns}})
        fake.create(*GATEWAYS, {"metadata": {"name": f"{ns}-gw", "namespace": ns}, "spec": {"listeners": []}})
    load_rbac(fake, docs)
    fake.enforce_rbac = True
    as_service_account(fake, namespace, deployment["spec"]["template"]["spec"]["serviceAccountName"], tmp_path,
                       monkeypatch)
    load_default("test")
    assert set_policy_affected(None, namespace="ingress", name="ingress-gw", affected=True, reason="PolicyApplied",
                               message="ok")
    conditions = fake.get(*GATEWAYS, "ingress-gw", namespace="ingress")["status"]["conditions"]
    assert [c["type"] for c in conditions] == [CONDITION_TYPE]
    assert not fake.forbidden
    with pytest.raises(AuthError, match="RoleBinding"):  # refused: no RoleBinding in `web`
        set_policy_affected(None, namespace="web", name="web-gw", affected=True, reason="PolicyApplied", message="x")
    assert fake.forbidden and {f.attributes.namespace for f in fake.forbidden} == {"web"}
    assert "status" not in fake.get(*GATEWAYS, "web-gw", namespace="web")
