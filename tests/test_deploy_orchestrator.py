"""deploy/orchestrator/ and the orchestrator overlays: rendered by ``kubectl kustomize``
(tests/test_deploy.py), validated strictly, and checked against the orchestrator itself.

- its settings come from a generated ConfigMap and resolve with the real settings code
  (`gitdns.commands.orchestrate`), the transport from the same variables as the agent's;
- the Lease RBAC names the pool's Lease for any pool (the lease-name transformer's replacement),
  tested with pools not named ``edge``;
- the kube-system grant stays in kube-system when the install moves (the layout the overlay
  ships, and the subject patch its README shows);
- the rendered RBAC, loaded into the fake Kubernetes API with RBAC enforced, lets the
  orchestrator's own calls through (its Lease, the ConfigMap, a headersSecret, Nodes with
  discovery) and refuses their neighbours;
- the PrometheusRule (a CRD: checked by hand) reads only metrics the orchestrator exports;
- the sidecar variant merges into a CoreDNS Deployment that still validates.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gitdns.cli import build_parser
from gitdns.commands.git.remote import TRANSPORT, git_auth
from gitdns.commands.orchestrate import lease_name as lease_name_command
from gitdns.commands.orchestrate import resolve
from gitdns.orchestrator.config import SETTINGS, lease_name
from gitdns.orchestrator.metrics import OrchestratorMetrics
from tests.test_deploy import (
    CLUSTER_SCOPED,
    COMPONENTS,
    DEPLOY,
    KUSTOMIZATIONS,
    ORCHESTRATOR_BASE,
    as_service_account,
    cluster_scoped_names,
    crd_problems,
    find,
    granted,
    includes,
    kustomize,
    load_rbac,
    only,
    reference_problems,
    secret_files,
    settings_merge,
    settings_of,
    write_kustomization,
)

ROOT = Path(__file__).resolve().parent.parent
ORCH = DEPLOY / "orchestrator"
CONFIGMAP_OVERLAY = DEPLOY / "overlays" / "orchestrator-configmap"
SIDECAR_OVERLAY = DEPLOY / "overlays" / "orchestrator-sidecar"
MEASURED_HWM_MIB = 86  # bench/bench_failover.py, 10,000 targets (docs/health.md)
ADMIN_PORT = 9090
ORCH_DIRS = [d for d in KUSTOMIZATIONS if includes(d, ORCHESTRATOR_BASE)]


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.fixture(scope="module", params=ORCH_DIRS, ids=_id)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return kustomize(request.param)


def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in find(docs, "Deployment")
                if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/name") == "gitdns-orchestrator"]
    return found


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = deployment(docs)["spec"]["template"]["spec"]["containers"]
    assert c["name"] == "orchestrator"
    return c


def environment(docs: list[dict[str, Any]], pod_name: str = "orchestrator-0") -> dict[str, str]:
    """The container's environment as the kubelet builds it (downward API filled in)."""
    dep = deployment(docs)
    namespace = dep["metadata"]["namespace"]
    env = settings_of(docs, container(docs), namespace)
    for entry in container(docs)["env"]:
        field = entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if field:
            env[entry["name"]] = {"metadata.name": pod_name, "metadata.namespace": namespace}[field]
    return env


def pool_of(docs: list[dict[str, Any]]) -> str:
    return environment(docs)["GITDNS_NODE_POOL"]


def lease_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (role,) = [r for r in find(docs, "Role") if r["metadata"]["name"].endswith("gitdns-orchestrator-lease")]
    return role


# --- the Deployment -------------------------------------------------------------------------------


def test_one_orchestrator_per_pool(rendered: list[dict[str, Any]]) -> None:
    dep = deployment(rendered)
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    assert environment(rendered)["GITDNS_LEASE"] == "kubernetes"


def test_settings_resolve_with_the_orchestrators_own_code(rendered: list[dict[str, Any]]) -> None:
    env = environment(rendered)
    known = {f"GITDNS_{name.upper()}" for name in (*SETTINGS, *TRANSPORT)}
    assert {n for n in env if n.startswith("GITDNS_")} <= known, sorted(set(env) - known)
    args = build_parser().parse_args(container(rendered)["args"])
    assert args.command == "orchestrator"
    config = resolve(vars(args), env)  # the settings code the command runs
    namespace = deployment(rendered)["metadata"]["namespace"]
    assert config.configmap == ("kube-system", "coredns-custom") and config.out is None
    assert config.node_pool == pool_of(rendered)
    assert config.pod_namespace == namespace and config.identity == "orchestrator-0"
    assert config.listen == "" and config.admin_listen == f"0.0.0.0:{ADMIN_PORT}"
    assert str(config.state_dir) == "/var/lib/gitdns" and config.lease == "kubernetes"
    assert re.match(r"(https|ssh)://", config.repo)
    # The transport comes from the agent's variables; its files are the Secret volume's.
    auth = git_auth({}, env)
    files = secret_files(deployment(rendered)["spec"]["template"]["spec"], container(rendered))
    for path in (auth.ssh_key, auth.known_hosts, auth.token_file, auth.ca_file):
        if path is not None:
            assert str(path) in files, path


def test_settings_are_a_generated_configmap(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    (source,) = container(rendered)["envFrom"]
    assert re.fullmatch(r"([a-z0-9-]+-)?gitdns-orchestrator-config-[a-z0-9]{10}", source["configMapRef"]["name"])
    env = {e["name"] for e in container(rendered)["env"]}
    assert {"GITDNS_POD_NAME", "GITDNS_POD_NAMESPACE", "GITDNS_STATE_DIR", "GITDNS_LISTEN",
            "GITDNS_ADMIN_LISTEN"} <= env
    assert not env & set(settings_of(rendered, {"envFrom": [source]}, deployment(rendered)["metadata"]["namespace"]))


def test_admin_port_alone_and_no_service(rendered: list[dict[str, Any]]) -> None:
    c = container(rendered)
    assert c["ports"] == [{"name": "admin", "containerPort": ADMIN_PORT, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    # It takes no webhook: nothing to publish, so no Service (its /status and /metrics stay on
    # the pod IP, for the kubelet and Prometheus).
    assert not find(rendered, "Service")


def test_pod_is_locked_down(rendered: list[dict[str, Any]]) -> None:
    pod = deployment(rendered)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["enableServiceLinks"] is False
    sc = container(rendered)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}


def test_memory_limit_is_above_the_measurement(rendered: list[dict[str, Any]]) -> None:
    resources = container(rendered)["resources"]
    assert _mib(resources["limits"]["memory"]) >= 2 * MEASURED_HWM_MIB
    assert _mib(resources["requests"]["memory"]) > MEASURED_HWM_MIB


def _mib(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * (1024 if unit == "Gi" else 1)


# --- RBAC -------------------------------------------------------------------------------------


def test_the_lease_rbac_names_the_pools_lease(rendered: list[dict[str, Any]]) -> None:
    pool = pool_of(rendered)
    # What `gitdns lease-name --node-pool POOL` prints is what the Role names.
    assert lease_name_command(node_pool=pool).text == lease_name(pool) + "\n"
    assert lease_name(pool) == f"gitdns-orchestrator-{pool}"
    role = lease_role(rendered)
    # In the pod's own namespace (GITDNS_POD_NAMESPACE), where the Lease lives.
    assert role["metadata"]["namespace"] == environment(rendered)["GITDNS_POD_NAMESPACE"]
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease_name(pool)],
         "verbs": ["get", "update"]}]


def test_headers_secrets_are_read_in_the_orchestrators_namespace(rendered: list[dict[str, Any]]) -> None:
    namespace = deployment(rendered)["metadata"]["namespace"]
    (role,) = [r for r in find(rendered, "Role") if r["metadata"]["name"].endswith("gitdns-orchestrator-secrets")]
    assert role["metadata"]["namespace"] == namespace == environment(rendered)["GITDNS_POD_NAMESPACE"]
    # by name, exactly the Secrets a headersSecret may name (tests/test_deploy_secrets.py)
    listed = environment(rendered)["GITDNS_HEADERS_SECRETS"].split(",")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": listed, "verbs": ["get"]}]


def test_a_pool_not_named_edge_gets_its_lease(tmp_path: Path) -> None:
    for pool in ("eu-west-2", "a", "pool-with-a-rather-long-name-of-43-chars-x"):
        assert len(pool) <= 43
        docs = kustomize(write_kustomization(
            tmp_path / pool, resources=[ORCHESTRATOR_BASE], transformers=[ORCH / "lease-name"],
            namespace="edge-dns", namePrefix="eu-",
            configMapGenerator=settings_merge("gitdns-orchestrator-config", GITDNS_NODE_POOL=pool)))
        assert pool_of(docs) == pool
        assert lease_role(docs)["rules"][1]["resourceNames"] == [lease_name(pool)] == [f"gitdns-orchestrator-{pool}"]
        assert lease_role(docs)["metadata"]["namespace"] == "edge-dns"
        assert not reference_problems(docs), reference_problems(docs)
    # Listed again on top of an install that already set a pool (dashes and all): the
    # delimiter is the whole prefix, so the new pool lands whole.
    top = kustomize(write_kustomization(
        tmp_path / "top", resources=[tmp_path / "eu-west-2"], transformers=[ORCH / "lease-name"],
        configMapGenerator=settings_merge("gitdns-orchestrator-config", GITDNS_NODE_POOL="x-y-z")))
    assert lease_role(top)["rules"][1]["resourceNames"] == ["gitdns-orchestrator-x-y-z"]


def test_the_transformer_acts_where_it_is_listed(tmp_path: Path) -> None:
    """What the README warns of: a pool set without listing lease-name keeps the base's Lease."""
    docs = kustomize(write_kustomization(
        tmp_path / "forgot", resources=[ORCHESTRATOR_BASE],
        configMapGenerator=settings_merge("gitdns-orchestrator-config", GITDNS_NODE_POOL="eu-west-2")))
    assert lease_role(docs)["rules"][1]["resourceNames"] == ["gitdns-orchestrator-edge"] != [lease_name("eu-west-2")]
    readme = (ORCH / "README.md").read_text()
    assert "orchestrator/lease-name" in readme and "same kustomization" in readme


def test_the_kube_system_grant(rendered: list[dict[str, Any]]) -> None:
    kube_system = [d for d in rendered if d["metadata"].get("namespace") == "kube-system"]
    if not kube_system:  # the install alone (install/ directories, the base): no grant there
        assert not any(d["kind"] in ("Role", "RoleBinding") and "coredns" in d["metadata"]["name"] for d in rendered)
        return
    assert sorted(d["kind"] for d in kube_system) == ["Role", "RoleBinding"]
    (role,) = find(kube_system, "Role")
    namespace, name = environment(rendered)["GITDNS_CONFIGMAP"].split("/")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name],
                              "verbs": ["get", "update"]}]
    assert namespace == role["metadata"]["namespace"] == "kube-system"
    (binding,) = find(kube_system, "RoleBinding")
    dep = deployment(rendered)
    account = dep["spec"]["template"]["spec"]["serviceAccountName"]
    namespace = dep["metadata"]["namespace"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    assert not reference_problems(rendered), reference_problems(rendered)


def _documented_subject_patch() -> dict[str, Any]:
    """The namePrefix and patch deploy/orchestrator/kube-system/kustomization.yaml shows in its
    comment, read from there (so the documentation is what is tested)."""
    text = (ORCH / "kube-system" / "kustomization.yaml").read_text()
    block = re.search(r"^#   namePrefix:.*?(?=^#\s*$|^[^#])", text, re.M | re.S)
    assert block, "the subject patch example is gone from deploy/orchestrator/kube-system"
    snippet = "\n".join(line[4:] for line in block.group(0).splitlines())
    doc: dict[str, Any] = YAML(typ="safe").load(snippet)
    return doc


def test_a_moved_install_keeps_its_grant_in_kube_system(tmp_path: Path) -> None:
    documented = _documented_subject_patch()
    subject = YAML(typ="safe").load(documented["patches"][0]["patch"])[0]["value"]
    prefix, namespace = documented["namePrefix"], subject["namespace"]
    install = write_kustomization(
        tmp_path / "edge" / "install", resources=[ORCHESTRATOR_BASE], namespace=namespace, namePrefix=prefix,
        components=[COMPONENTS / "github-ssh"], transformers=[ORCH / "lease-name"],
        configMapGenerator=settings_merge("gitdns-orchestrator-config", GITDNS_NODE_POOL="eu-west-2"))
    kube_system = write_kustomization(tmp_path / "edge" / "kube-system", resources=[ORCH / "kube-system"],
                                      namePrefix=prefix, patches=documented["patches"])
    docs = kustomize(write_kustomization(tmp_path / "edge", resources=[install, kube_system]))
    assert not reference_problems(docs), reference_problems(docs)
    assert subject == {"kind": "ServiceAccount", "name": f"{prefix}gitdns-orchestrator", "namespace": namespace}
    (binding,) = [b for b in find(docs, "RoleBinding") if b["metadata"]["namespace"] == "kube-system"]
    assert binding["roleRef"]["name"] == f"{prefix}gitdns-orchestrator-coredns"
    namespaces = {d["metadata"].get("namespace") for d in docs if d["kind"] not in CLUSTER_SCOPED}
    assert namespaces == {namespace, "kube-system"}
    # The hazard the layout avoids: one `namespace:` over both moves the grant out of kube-system.
    naive = kustomize(write_kustomization(tmp_path / "naive", resources=[CONFIGMAP_OVERLAY], namespace=namespace))
    assert not [d for d in naive if d["metadata"].get("namespace") == "kube-system"]


def test_two_pools_in_one_cluster_share_no_cluster_scoped_name(tmp_path: Path) -> None:
    renders = []
    for pool in ("edge-eu", "edge-us"):
        renders.append(kustomize(write_kustomization(
            tmp_path / pool, resources=[ORCHESTRATOR_BASE], namespace=f"dns-{pool}", namePrefix=f"{pool}-",
            components=[ORCH / "components" / "discovery"], transformers=[ORCH / "lease-name"],
            configMapGenerator=settings_merge("gitdns-orchestrator-config", GITDNS_NODE_POOL=pool))))
    assert cluster_scoped_names(renders[0]) and not cluster_scoped_names(renders[0]) & cluster_scoped_names(renders[1])
    for docs in renders:
        assert not reference_problems(docs), reference_problems(docs)


def test_node_discovery_component(tmp_path: Path) -> None:
    docs = kustomize(write_kustomization(tmp_path / "d", resources=[ORCHESTRATOR_BASE],
                                         components=[ORCH / "components" / "discovery"]))
    assert granted(docs, "ClusterRole", "gitdns-orchestrator-nodes") == {("", "nodes"): (["list"], [])}
    assert environment(docs)["GITDNS_DISCOVER_NODES"] == "true"
    config = resolve(vars(build_parser().parse_args(["orchestrator"])), environment(docs))
    assert config.discover_nodes is True
    assert not reference_problems(docs), reference_problems(docs)


# --- the rendered RBAC against the orchestrator's own calls -------------------------------------


@pytest.fixture
def fake() -> Iterator[Any]:
    pytest.importorskip("kubernetes.client")
    from tests.fakes.kube_apiserver import FakeKube

    kube = FakeKube()
    kube.start()
    yield kube
    kube.stop()


@pytest.mark.parametrize("with_discovery", [False, True], ids=["static", "discovery"])
def test_the_rendered_rbac_allows_the_orchestrators_calls_and_nothing_near(
        fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_discovery: bool) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from gitdns.adapters.coredns_delivery import ConfigMapDelivery
    from gitdns.core.model import Node, NodePool
    from gitdns.errors import AuthError
    from gitdns.orchestrator.kubeaccess import CheckedConfigMap, PoolLease
    from gitdns.orchestrator.sources import discover_nodes
    from gitdns.providers.probeheaders import HeadersNotListed, HeadersUnavailable, ProbeHeaders

    pool = "edge-eu"
    layout = tmp_path / "layout"
    install = write_kustomization(
        layout / "install", resources=[ORCHESTRATOR_BASE],
        components=[ORCH / "components" / "discovery"][:int(with_discovery)], transformers=[ORCH / "lease-name"],
        configMapGenerator=settings_merge("gitdns-orchestrator-config", GITDNS_NODE_POOL=pool))
    docs = kustomize(write_kustomization(layout, resources=[install, ORCH / "kube-system"]))
    namespace = deployment(docs)["metadata"]["namespace"]
    account = deployment(docs)["spec"]["template"]["spec"]["serviceAccountName"]
    load_rbac(fake, docs)
    fake.create("", "v1", "configmaps", {"metadata": {"name": "coredns-custom"}}, namespace="kube-system")
    fake.create("", "v1", "configmaps", {"metadata": {"name": "coredns"}, "data": {"Corefile": "."}},
                namespace="kube-system")
    listed = [environment(docs)["GITDNS_HEADERS_SECRETS"]]  # the headersSecret the settings list (one)
    fake.create("", "v1", "secrets", {"metadata": {"name": listed[0]}, "stringData": {"X-Probe": "1"}},
                namespace=namespace)
    fake.create("", "v1", "secrets", {"metadata": {"name": "other"}, "stringData": {"X-Probe": "2"}},
                namespace=namespace)
    fake.create("", "v1", "nodes", {"metadata": {"name": "n1", "labels": {"pool": pool}},
                                    "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.7"}]}})
    fake.enforce_rbac = True
    as_service_account(fake, namespace, account, tmp_path, monkeypatch)
    who = lambda: f"ServiceAccount {namespace}/{account}"  # noqa: E731

    # Its Lease: created, renewed, released.
    lease = PoolLease(namespace, pool, duration=30, clock=time.time, identity="orchestrator-0", account=who)
    assert lease.acquire().held and lease.acquire().held
    lease.release()
    assert not fake.forbidden
    # The ConfigMap: its own keys written into kube-system/coredns-custom.
    delivery = CheckedConfigMap(ConfigMapDelivery("kube-system", "coredns-custom", pool), who)
    delivery.deliver({f"{pool}.server": "example.org {\n}\n"})
    assert fake.get("", "v1", "configmaps", "coredns-custom", namespace="kube-system")["data"]
    # A headersSecret, by name, in its own namespace.
    headers = ProbeHeaders(listed, namespace, tmp_path, in_cluster=True, account=who)
    assert dict(headers.read(listed[0])) == {"X-Probe": "1"}
    # Nodes, with discovery.
    node_pool = NodePool(pool, (Node("static", "192.0.2.1", "http://192.0.2.1:15021/healthz/ready"),),
                         discovery_selector=f"pool={pool}")
    core = client.CoreV1Api()
    if with_discovery:
        assert [n.ip for n in discover_nodes(core, node_pool)] == ["192.0.2.7"]
    assert not fake.forbidden, fake.forbidden

    # ... and nothing near them.
    other = PoolLease(namespace, "another-pool", duration=30, clock=time.time, identity="x", account=who)
    assert not other.acquire().held and other.forbidden
    refused = CheckedConfigMap(ConfigMapDelivery("kube-system", "coredns", pool), who)
    with pytest.raises(AuthError, match=r"refused \(403\)"):
        refused.deliver({f"{pool}.server": "x {\n}\n"})
    with pytest.raises(HeadersUnavailable):
        ProbeHeaders(listed, "kube-system", tmp_path, in_cluster=True, account=who).read(listed[0])
    with pytest.raises(HeadersNotListed):  # not listed: never asked for
        headers.read("other")
    everything = ProbeHeaders([*listed, "other"], namespace, tmp_path, in_cluster=True, account=who)
    with pytest.raises(HeadersUnavailable, match="refused"):  # listed by mistake: the Role still says no
        everything.read("other")
    if not with_discovery:
        with pytest.raises(ApiException) as refused_list:
            discover_nodes(core, node_pool)
        assert refused_list.value.status == 403
    with pytest.raises(ApiException) as refused_secrets:
        core.list_namespaced_secret(namespace)
    assert refused_secrets.value.status == 403
    assert fake.forbidden


# --- monitoring (opt-in components) -----------------------------------------------------------


def _exported_names() -> set[str]:
    metrics = OrchestratorMetrics()
    metrics.set_nodes({"n1": ("10.0.0.1", True, 0, 0.01)})
    names = set()
    for family in metrics.registry.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                    "summary": ("_sum", "_count")}.get(family.type, ("",))
        names.update(family.name + s for s in suffixes)
    return names


def test_alerts_and_pod_monitor(tmp_path: Path) -> None:
    docs = kustomize(write_kustomization(tmp_path / "m", resources=[ORCHESTRATOR_BASE], components=[
        ORCH / "components" / "prometheus-rule", ORCH / "components" / "pod-monitor"], namespace="edge-dns"))
    for doc in find(docs, "PrometheusRule") + find(docs, "PodMonitor"):
        assert not crd_problems(doc), crd_problems(doc)
        assert doc["metadata"]["namespace"] == "edge-dns"
    assert not reference_problems(docs), reference_problems(docs)  # the PodMonitor selects the pod, port admin
    rule = only(docs, "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {"LowHealthyNodes", "AllNodesDown", "HealthCheckSlow", "FailOpen", "OrchestratorNotReady"} <= set(alerts)
    assert alerts["HealthCheckSlow"]["expr"].startswith("health_orchestrator_last_check_duration_seconds ")
    exported = _exported_names()
    for alert in alerts.values():
        names = re.findall(r"health_orchestrator_[a-z_]+", alert["expr"])
        assert names, alert["alert"]
        for name in names:
            assert name in exported, f"{alert['alert']}: {name} is not exported"


# --- the sidecar variant ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sidecar_render() -> list[dict[str, Any]]:
    return kustomize(SIDECAR_OVERLAY)


def test_sidecar_shares_the_directory_with_coredns(sidecar_render: list[dict[str, Any]]) -> None:
    coredns = only(sidecar_render, "Deployment", "coredns")
    spec = coredns["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["custom-config-volume"] == {"name": "custom-config-volume", "emptyDir": {}}
    containers = {c["name"]: c for c in spec["containers"]}
    assert set(containers) == {"coredns", "gitdns-orchestrator"}
    mounts = {c: {m["mountPath"]: m["name"] for m in containers[c]["volumeMounts"]} for c in containers}
    assert mounts["coredns"]["/etc/coredns/custom"] == mounts["gitdns-orchestrator"]["/etc/coredns/custom"]
    assert not reference_problems(sidecar_render, external_subjects=True), reference_problems(
        sidecar_render, external_subjects=True)


def test_sidecar_settings_resolve_and_never_gate_coredns(sidecar_render: list[dict[str, Any]]) -> None:
    coredns = only(sidecar_render, "Deployment", "coredns")
    sidecar = next(c for c in coredns["spec"]["template"]["spec"]["containers"] if c["name"] == "gitdns-orchestrator")
    env = settings_of(sidecar_render, sidecar, "kube-system")
    env.update({"GITDNS_POD_NAME": "coredns-0", "GITDNS_POD_NAMESPACE": "kube-system"})
    config = resolve(vars(build_parser().parse_args(sidecar["args"])), env)
    assert str(config.out) == "/etc/coredns/custom" and config.configmap is None and config.lease == "file"
    assert config.admin_listen == f"0.0.0.0:{ADMIN_PORT}" and config.listen == ""
    assert re.fullmatch(r"gitdns-orchestrator-sidecar-[a-z0-9]{10}", sidecar["envFrom"][0]["configMapRef"]["name"])
    assert "readinessProbe" not in sidecar and sidecar["livenessProbe"]["httpGet"]["port"] == "orch-admin"
    ports = [(p["containerPort"], p["protocol"]) for c in coredns["spec"]["template"]["spec"]["containers"]
             for p in c["ports"]]
    assert len(ports) == len(set(ports))  # no clash with CoreDNS's own ports
    assert _mib(sidecar["resources"]["limits"]["memory"]) >= 2 * MEASURED_HWM_MIB
    sc = sidecar["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
