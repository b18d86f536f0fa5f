"""The components that place the workloads and fence their network, rendered with the setups
they are for by the real ``kubectl kustomize`` and validated strictly with kubernetes-validate:

- ``network-policy`` (the agent's, deploy/components; the orchestrator's,
  deploy/orchestrator/components): with each setup of deploy/README.md, every need of that setup
  is let through -- DNS to kube-dns, the Kubernetes API, the git host of its GITDNS_REPO, the
  provider APIs, the RFC2136 server of its GITDNS_RFC2136_SERVERS, the pool's health endpoints;
  in, the webhook and the admin port from their namespaces -- and nothing else: both directions
  default-deny, no rule without ports, no port no need names;
- ``edge-pool`` (deploy/orchestrator/components): the orchestrator's Deployment, and only it,
  gets the nodeSelector, the toleration and the priorityClassName, its PriorityClass in the
  render (a namePrefix followed); every value is one its header tells the user to change.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.test_deploy import (
    BASE,
    COMPONENTS,
    DEPLOY,
    ORCHESTRATOR_BASE,
    find,
    kubernetes_validate_or_skip,
    kustomize,
    load_documents,
    only,
    provider_secret_patches,
    reference_problems,
    schema_problems,
    settings_merge,
    settings_of,
    versions,
    write_kustomization,
)

EXAMPLES = DEPLOY / "examples"
ORCHESTRATOR_COMPONENTS = DEPLOY / "orchestrator" / "components"
AGENT_POLICY = COMPONENTS / "network-policy"
ORCHESTRATOR_POLICY = ORCHESTRATOR_COMPONENTS / "network-policy"
EDGE_POOL = ORCHESTRATOR_COMPONENTS / "edge-pool"
# Stand-ins for the addresses a name resolves to: a public host (the git host, a provider API)
# and an API server's address (kind's, k3s's); any address the shipped ranges are meant to admit.
PUBLIC = "140.82.112.3"
API_SERVERS = [("10.96.0.1", 443), ("172.18.0.2", 6443)]
KUBE_DNS = {"namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}}
# The NodePool health endpoint of docs/health.md, which the orchestrator's placeholders admit.
HEALTH_ENDPOINT = "http://10.0.0.1:15021/healthz/ready"
CHANGE_RFC2136 = [{"target": {"kind": "NetworkPolicy", "name": "gitdns"},
                   "patch": "- op: replace\n  path: /spec/egress/4/to/0/ipBlock/cidr\n  value: 198.51.100.53/32"}]


# --- what a NetworkPolicy lets through ------------------------------------------------------------


def _port_matches(entry: dict[str, Any], port: int | str, protocol: str) -> bool:
    if entry.get("protocol", "TCP") != protocol:
        return False
    if "endPort" in entry:
        return isinstance(port, int) and int(entry["port"]) <= port <= int(entry["endPort"])
    return entry.get("port") == port


def _peer_has_address(peer: dict[str, Any], address: str) -> bool:
    block = peer.get("ipBlock")
    if not block:
        return False
    ip = ipaddress.ip_address(address)
    return ip in ipaddress.ip_network(block["cidr"]) and not any(
        ip in ipaddress.ip_network(e) for e in block.get("except") or [])


def _peer_is_pod(peer: dict[str, Any], namespace: str, labels: dict[str, str]) -> bool:
    ns = (peer.get("namespaceSelector") or {}).get("matchLabels")
    pods = (peer.get("podSelector") or {}).get("matchLabels")
    return ns == {"kubernetes.io/metadata.name": namespace} and pods is not None and pods.items() <= labels.items()


def egress_to_address(policy: dict[str, Any], address: str, port: int, protocol: str = "TCP") -> bool:
    return any(any(_port_matches(p, port, protocol) for p in rule.get("ports") or [])
               and any(_peer_has_address(peer, address) for peer in rule.get("to") or [])
               for rule in policy["spec"].get("egress") or [])


def egress_to_pod(policy: dict[str, Any], namespace: str, labels: dict[str, str], port: int, protocol: str) -> bool:
    return any(any(_port_matches(p, port, protocol) for p in rule.get("ports") or [])
               and any(_peer_is_pod(peer, namespace, labels) for peer in rule.get("to") or [])
               for rule in policy["spec"].get("egress") or [])


def ingress_from_namespace(policy: dict[str, Any], namespace: str, port: str) -> bool:
    return any(any(_port_matches(p, port, "TCP") for p in rule.get("ports") or [])
               and any((peer.get("namespaceSelector") or {}).get("matchLabels") ==
                       {"kubernetes.io/metadata.name": namespace} for peer in rule.get("from") or [])
               for rule in policy["spec"].get("ingress") or [])


def _ports(rules: list[dict[str, Any]]) -> set[tuple[Any, str]]:
    return {(p.get("port"), p.get("protocol", "TCP")) for rule in rules for p in rule.get("ports") or []}


def git_port(repo: str) -> int:
    """The port GITDNS_REPO connects to: its own, else the scheme's."""
    url = urlsplit(repo)
    return url.port or {"ssh": 22, "https": 443}[url.scheme]


def policy_problems(docs: list[dict[str, Any]], *, deployment: str, needs: dict[str, tuple[str, int, str]],
                    ingress: dict[str, str], egress_ports: set[tuple[Any, str]]) -> list[str]:
    """What the one NetworkPolicy of ``docs`` must hold for the Deployment ``deployment``: it
    selects that Deployment's pods (its namespace, its labels), denies by default both ways, lets
    through every need of ``needs`` (what -> (address, port, protocol); address "kube-dns": the
    cluster's resolver) and every ``ingress`` (namespace -> named port), and no port beyond
    ``egress_ports`` and the ingress ports."""
    problems = []
    (policy,) = find(docs, "NetworkPolicy")
    (dep,) = [d for d in find(docs, "Deployment") if d["metadata"]["name"].endswith(deployment)]
    if policy["metadata"]["namespace"] != dep["metadata"]["namespace"]:
        problems.append(f"the policy is in {policy['metadata']['namespace']}, "
                        f"the pods in {dep['metadata']['namespace']}")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    if not policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items():
        problems.append("the policy does not select the Deployment's pods")
    if sorted(policy["spec"].get("policyTypes") or []) != ["Egress", "Ingress"]:
        problems.append(f"not default-deny both ways: policyTypes {policy['spec'].get('policyTypes')}")
    for what, (address, port, protocol) in needs.items():
        ok = egress_to_pod(policy, KUBE_DNS["namespace"], KUBE_DNS["labels"], port, protocol) \
            if address == "kube-dns" else egress_to_address(policy, address, port, protocol)
        if not ok:
            problems.append(f"{what}: egress to {address}:{port}/{protocol} is not let through")
    for namespace, port in ingress.items():
        if not ingress_from_namespace(policy, namespace, port):
            problems.append(f"ingress from namespace {namespace} to port {port} is not let through")
    for direction in ("ingress", "egress"):
        for rule in policy["spec"].get(direction) or []:
            if not rule.get("ports"):
                problems.append(f"an {direction} rule without ports lets every port through: {rule}")
            if not rule.get("to" if direction == "egress" else "from"):
                problems.append(f"an {direction} rule without peers lets every address through: {rule}")
    extra = _ports(policy["spec"].get("egress") or []) - egress_ports
    if extra:
        problems.append(f"egress ports no need names: {sorted(extra, key=str)}")
    extra = _ports(policy["spec"].get("ingress") or []) - {(p, "TCP") for p in ingress.values()}
    if extra:
        problems.append(f"ingress ports no need names: {sorted(extra, key=str)}")
    return problems


def _valid(docs: list[dict[str, Any]]) -> None:
    kubernetes_validate_or_skip()
    for version in versions():
        assert schema_problems(docs, version) == [], version
    assert reference_problems(docs) == []


# --- the agent's network-policy, with setups 1 and 2 and an RFC2136 overlay -------------------------


def _agent_needs(docs: list[dict[str, Any]]) -> dict[str, tuple[str, int, str]]:
    (dep,) = find(docs, "Deployment")
    env = settings_of(docs, dep["spec"]["template"]["spec"]["containers"][0], dep["metadata"]["namespace"])
    needs = {"DNS over UDP": ("kube-dns", 53, "UDP"), "DNS over TCP": ("kube-dns", 53, "TCP"),
             "the git host (GITDNS_REPO)": (PUBLIC, git_port(env["GITDNS_REPO"]), "TCP"),
             "the provider APIs over HTTPS": (PUBLIC, 443, "TCP")}
    needs.update({f"the Kubernetes API at {a}:{p}": (a, p, "TCP") for a, p in API_SERVERS})
    for server in filter(None, re.split(r"[,\s]+", env.get("GITDNS_RFC2136_SERVERS", ""))):
        host, _, port = server.partition(":")
        for protocol in ("UDP", "TCP"):
            needs[f"the RFC2136 server {server} over {protocol}"] = (host, int(port or 53), protocol)
    return needs


AGENT_EGRESS = {(53, "UDP"), (53, "TCP"), (443, "TCP"), (6443, "TCP"), (22, "TCP")}
AGENT_INGRESS = {"ingress": "http", "monitoring": "admin"}


@pytest.mark.parametrize("example", ["route53-github", "failover-fleet"])
def test_the_agent_policy_lets_each_setup_through(example: str, tmp_path: Path) -> None:
    """Setups 1 and 2: Route53 (IRSA's STS, or a key) and GitHub over SSH."""
    docs = kustomize(write_kustomization(tmp_path / example, resources=[EXAMPLES / example],
                                         components=[AGENT_POLICY]))
    needs = _agent_needs(docs)
    assert needs["the git host (GITDNS_REPO)"][1] == 22
    assert policy_problems(docs, deployment="gitdns", needs=needs, ingress=AGENT_INGRESS,
                           egress_ports=AGENT_EGRESS) == []
    _valid(docs)


def _rfc2136_overlay(directory: Path, server: str, patches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """deploy/README.md's own overlay (namespace and prefix), an RFC2136 zone with its TSIG Secret
    (provider-secret), the repository over HTTPS on a port of its own, and the policy."""
    return kustomize(write_kustomization(
        directory, resources=[BASE], namespace="dns-team", namePrefix="team-",
        components=[COMPONENTS / "https-token", COMPONENTS / "provider-secret", AGENT_POLICY],
        configMapGenerator=settings_merge("gitdns-config", GITDNS_REPO="https://git.example.com:443/dns.git",
                                          GITDNS_RFC2136_SERVERS=server),
        patches=[*provider_secret_patches("dns-tsig"), *patches]))


def test_the_agent_policy_lets_the_rfc2136_server_through_once_named(tmp_path: Path) -> None:
    """The RFC2136 rule's documentation address reaches nothing until the user names the server
    (the component's header shows the patch); then that server, and only it, is let through."""
    shipped = _rfc2136_overlay(tmp_path / "shipped", "198.51.100.53", [])
    problems = policy_problems(shipped, deployment="gitdns", needs=_agent_needs(shipped), ingress=AGENT_INGRESS,
                               egress_ports=AGENT_EGRESS)
    assert [p for p in problems if "RFC2136" in p] == problems and len(problems) == 2  # UDP and TCP
    docs = _rfc2136_overlay(tmp_path / "named", "198.51.100.53", CHANGE_RFC2136)
    assert policy_problems(docs, deployment="gitdns", needs=_agent_needs(docs), ingress=AGENT_INGRESS,
                           egress_ports=AGENT_EGRESS) == []
    (policy,) = find(docs, "NetworkPolicy")
    assert policy["metadata"]["name"] == "team-gitdns" and policy["metadata"]["namespace"] == "dns-team"
    assert not egress_to_address(policy, "192.0.2.53", 53, "UDP")  # the placeholder is gone
    _valid(docs)


def test_the_component_header_shows_the_patch_the_test_applies() -> None:
    header = (AGENT_POLICY / "kustomization.yaml").read_text()
    assert "path: /spec/egress/4/to/0/ipBlock/cidr" in header and "value: 198.51.100.53/32" in header
    (policy,) = load_documents(AGENT_POLICY / "networkpolicy.yaml")
    assert policy["spec"]["egress"][4]["to"][0]["ipBlock"]["cidr"] == "192.0.2.53/32"  # the RFC2136 rule
    orch = (ORCHESTRATOR_POLICY / "kustomization.yaml").read_text()
    assert "path: /spec/egress/3/to/0/ipBlock/cidr" in orch
    (policy,) = load_documents(ORCHESTRATOR_POLICY / "networkpolicy.yaml")
    assert [p["port"] for p in policy["spec"]["egress"][3]["ports"]] == [15021]  # the pool's nodes


# --- the orchestrator's network-policy, with setup 3 ----------------------------------------------


def _setup3(directory: Path, *components: Path, prefix: str = "") -> list[dict[str, Any]]:
    """examples/edge-orchestrator with ``components`` listed where its namespaced objects are
    (install/), as the components' headers say."""
    install = write_kustomization(directory / "install", resources=[EXAMPLES / "edge-orchestrator" / "install"],
                                  components=list(components), **({"namePrefix": prefix} if prefix else {}))
    system = EXAMPLES / "edge-orchestrator" / "kube-system"
    return kustomize(write_kustomization(directory, resources=[install, system]))


def test_the_orchestrator_policy_lets_setup_3_through(tmp_path: Path) -> None:
    docs = _setup3(tmp_path / "setup3", ORCHESTRATOR_POLICY)
    (dep,) = find(docs, "Deployment")
    env = settings_of(docs, dep["spec"]["template"]["spec"]["containers"][0], dep["metadata"]["namespace"])
    health = urlsplit(HEALTH_ENDPOINT)
    needs = {"DNS over UDP": ("kube-dns", 53, "UDP"), "DNS over TCP": ("kube-dns", 53, "TCP"),
             "the git host (GITDNS_REPO)": (PUBLIC, git_port(env["GITDNS_REPO"]), "TCP"),
             "a node's health endpoint": (str(health.hostname), int(health.port or 80), "TCP")}
    needs.update({f"the Kubernetes API at {a}:{p}": (a, p, "TCP") for a, p in API_SERVERS})
    assert policy_problems(docs, deployment="gitdns-orchestrator", needs=needs, ingress={"monitoring": "admin"},
                           egress_ports={(53, "UDP"), (53, "TCP"), (443, "TCP"), (6443, "TCP"), (22, "TCP"),
                                         (15021, "TCP")}) == []
    (policy,) = find(docs, "NetworkPolicy")
    assert not egress_to_address(policy, "192.168.1.10", 15021)  # the pool's nodes only, as written
    assert HEALTH_ENDPOINT in (ORCHESTRATOR_POLICY / "kustomization.yaml").read_text()
    _valid(docs)


def test_the_policy_check_could_fail(tmp_path: Path) -> None:
    """An allow-all egress rule, and a policy that forgets DNS, fail it."""
    docs = _setup3(tmp_path / "setup3", ORCHESTRATOR_POLICY)
    (policy,) = find(docs, "NetworkPolicy")
    policy["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]})
    del policy["spec"]["egress"][0]
    problems = policy_problems(docs, deployment="gitdns-orchestrator",
                               needs={"DNS over UDP": ("kube-dns", 53, "UDP")}, ingress={}, egress_ports=set())
    assert any("DNS over UDP" in p for p in problems)
    assert any("without ports" in p for p in problems)
    assert any("ingress ports no need names" in p for p in problems)


# --- edge-pool --------------------------------------------------------------------------------------


def _placement(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (dep,) = [d for d in find(docs, "Deployment") if d["metadata"]["name"].endswith(name)]
    spec = dep["spec"]["template"]["spec"]
    return {k: spec.get(k) for k in ("nodeSelector", "tolerations", "priorityClassName", "affinity")}


def test_edge_pool_places_the_orchestrator_on_its_pool(tmp_path: Path) -> None:
    docs = _setup3(tmp_path / "setup3", EDGE_POOL, ORCHESTRATOR_POLICY, prefix="eu-")
    placement = _placement(docs, "gitdns-orchestrator")
    assert placement == {"nodeSelector": {"node-pool": "edge-eu"},
                         "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "edge",
                                          "effect": "NoSchedule"}],
                         "priorityClassName": "eu-gitdns-orchestrator", "affinity": None}
    (priority,) = find(docs, "PriorityClass")
    assert priority["metadata"]["name"] == "eu-gitdns-orchestrator"  # cluster-scoped: the prefix follows
    assert 0 < priority["value"] < 2_000_000_000 and priority["globalDefault"] is False
    # the rest of the pod spec stays: the locked-down pod, its account, the settings
    (dep,) = find(docs, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] and spec["serviceAccountName"] == "eu-gitdns-orchestrator"
    # (the example's kube-system piece still names the unprefixed account: its header says to patch it)
    _valid([d for d in docs if d["metadata"].get("namespace") != "kube-system"])


def test_edge_pool_moves_the_orchestrator_alone(tmp_path: Path) -> None:
    """Listed where the agent is too, it leaves the agent where it was."""
    docs = kustomize(write_kustomization(tmp_path / "both", resources=[BASE, ORCHESTRATOR_BASE],
                                         components=[EDGE_POOL]))
    assert _placement(docs, "gitdns-orchestrator")["nodeSelector"] == {"node-pool": "edge-eu"}
    assert _placement(docs, "gitdns") == {"nodeSelector": None, "tolerations": None, "priorityClassName": None,
                                          "affinity": None}


def test_every_edge_pool_value_is_one_to_change() -> None:
    """Each value of the patch is named in the header's list of values to change, and marked
    CHANGE where it is set."""
    text = (EDGE_POOL / "kustomization.yaml").read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    patch = text.split("patch: |-", 1)[1]
    for value in ("node-pool: edge-eu", "dedicated=edge:NoSchedule", "priorityClassName  gitdns-orchestrator"):
        assert value in header, value
    for field in ("nodeSelector:", "tolerations:", "priorityClassName:"):
        before = patch.split(field, 1)[0].rstrip().splitlines()[-1]
        assert "# CHANGE:" in before, field


def test_the_readme_documents_both_components() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for name in ("edge-pool", "network-policy"):
        assert f"`{name}`" in readme, name
    assert "orchestrator/components/edge-pool" in readme and "components/network-policy" in readme


def test_both_policies_follow_a_moved_install(tmp_path: Path) -> None:
    """namespace: and namePrefix: move the policies with their workloads; the selectors (labels)
    still select them."""
    for base, policy, name in ((BASE, AGENT_POLICY, "gitdns"), (ORCHESTRATOR_BASE, ORCHESTRATOR_POLICY,
                                                                "gitdns-orchestrator")):
        docs = kustomize(write_kustomization(tmp_path / name, resources=[base], namespace="moved",
                                             namePrefix="x-", components=[policy]))
        doc = only(docs, "NetworkPolicy")
        assert (doc["metadata"]["namespace"], doc["metadata"]["name"]) == ("moved", f"x-{name}")
        assert reference_problems(docs) == []
