"""The three setups of deploy/README.md, brought up from deploy/ as a user would, each pod run
with exactly the environment, files and arguments its manifests give it (tests/e2e/pod_kit.py:
the image's ENV and ENTRYPOINT, envFrom of the generated settings, the downward API, Secret
volumes, the service-account token, read-only root, uid 65532, an empty HOME), against the
fake Kubernetes API (HTTPS, bearer tokens, RBAC enforced from the rendered Roles) and real git
servers (OpenSSH, nginx + git http-backend over TLS):

1. deploy/examples/route53-github: one EKS cluster, Route53 through IRSA (moto standing in for
   AWS), the repository over SSH with a deploy key, GitHub's webhook secret;
2. deploy/examples/failover-fleet: the SAME rendered manifests on two clusters (two API
   servers, two kube-system UIDs, GITDNS_CLUSTER unset), failover groups in git, Route53 with
   a key Secret;
3. deploy/examples/edge-orchestrator for a pool named `metro`, its repository over SSH as the
   example ships it (a read-only deploy key), ConfigMap delivery into kube-system/coredns-custom
   (created first, as its prerequisite says).

Each is Ready by its readinessProbe, writes DNS (the Route53 zone, the CoreDNS ConfigMap), holds
its Lease and pushes its status; RBAC refuses it nothing but what its comments leave opt-in, and
every (verb, resource, resourceName) the rendered RBAC grants it is a call it made
(`assert_least_privilege`).
The user's steps are the examples' own: copy the kustomization, point its paths at deploy/, fill
in the placeholders, create the Secrets its header names (and no other: the test checks the pod
mounts exactly those), apply.
"""

from __future__ import annotations

import json
import os
import re
import socketserver
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.git_fixtures import https_fixture, sshd_fixture  # noqa: F401
from tests.e2e.git_servers import HttpsServer, SshServer, remote_ref
from tests.e2e.orchestrator_kit import NodeServer, start_nodes
from tests.e2e.pod_kit import (
    DEPLOY,
    Cluster,
    KitError,
    Manifests,
    MotoAws,
    Pod,
    add_literal,
    add_patch,
    copy_kustomization,
    eks_pod_identity,
    grants,
    header_comment,
    push_tree,
    require,
    require_pod_runtime,
    set_literal,
    unused_grants,
)

DESIRED = Path(__file__).resolve().parent / "pod_desired"
ALPHA_ID = "6f1c0b7a-2d4e-4f5a-9b8c-1d2e3f4a5b6c"
BETA_ID = "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f"


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoAws]:
    require_pod_runtime()
    try:
        moto = MotoAws(tmp_path_factory.mktemp("moto"))
    except KitError as exc:
        require(False, str(exc))
        raise
    yield moto
    moto.stop()


@pytest.fixture
def aws(moto: MotoAws) -> MotoAws:
    """AWS as moto stands in for it, reset: no zone of another test."""
    moto.reset()
    return moto


@pytest.fixture(autouse=True)
def _pod_runtime() -> None:
    require_pod_runtime()


def example(name: str, destination: Path) -> Path:
    """deploy/examples/<name> copied as a user copies it into a GitOps repository."""
    source = DEPLOY / "examples" / name
    assert source.is_dir(), f"deploy/examples/{name} is missing (deploy/README.md names it)"
    return copy_kustomization(source, destination)


def edit(path: Path, *changes: tuple[str, str]) -> None:
    text = path.read_text()
    for key, value in changes:
        text = set_literal(text, key, value)
    path.write_text(text)


def assert_documented(kustomization: Path, pod: Pod, values: dict[str, dict[str, bytes | str]]) -> None:
    """The Secrets the test creates are those the pod mounts, with the keys it mounts, and the
    example's header names each of them with its keys."""
    header = header_comment(kustomization)
    used = pod.secrets_used()
    assert {n: set(k) for n, k in values.items()} == used, f"the pod reads {used}"
    for name, keys in used.items():
        assert name in header, f"{kustomization}: the header does not say to create Secret {name}"
        for key in keys - {"*"}:
            assert key in header, f"{kustomization}: the header does not name key {key} of Secret {name}"


def ssh_secret(sshd: SshServer, key: Path | None = None) -> dict[str, bytes | str]:
    return {"ssh-privatekey": (key or sshd.deploy_key).read_bytes(), "known_hosts": sshd.known_hosts.read_bytes()}


def assert_runs_as_the_pod_spec_says(pod: Pod) -> None:
    """The container's processes: uid/gid 65532, fsGroup as supplementary group, no capability,
    no_new_privs, read-only root, the image's HOME and no GITDNS_CLUSTER."""
    procs = pod.processes()
    gitdns = [pid for pid, argv in procs if any(a.endswith("gitdns") for a in argv[:2])]
    assert gitdns, procs
    if not pod.notes:  # the image's init is process 1 of the pod, gitdns its child
        assert os.path.basename(procs[0][1][0]) == os.path.basename(pod.image.entrypoint[0]), procs
        assert procs[0][0] != gitdns[0]
    status = Path(f"/proc/{gitdns[0]}/status").read_text()
    assert re.search(r"^Uid:\s+65532\s+65532\s+65532\s+65532$", status, re.M), status
    assert re.search(r"^Gid:\s+65532\s+65532\s+65532\s+65532$", status, re.M), status
    assert re.search(r"^Groups:\s+65532\s*$", status, re.M), status
    assert re.search(r"^CapEff:\s+0+$", status, re.M) and re.search(r"^CapBnd:\s+0+$", status, re.M)
    assert re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    root = [line.split() for line in Path(f"/proc/{gitdns[0]}/mountinfo").read_text().splitlines()
            if line.split()[4] == "/"]
    assert root and root[-1][5].split(",")[0] == "ro", root
    environ = dict(e.split("=", 1) for e in Path(f"/proc/{gitdns[0]}/environ").read_bytes().decode().split("\0")
                   if "=" in e)
    assert environ["HOME"] == "/var/lib/gitdns" and "GITDNS_CLUSTER" not in environ


# Requests RBAC may refuse the agent: its call is there, its grant an opt-in component.
OPT_IN_REFUSALS = {
    "gateways": "the PolicyAffected condition on Gateways: components/gateway-status, bound by the user per "
                "namespace; without it the agent logs the refusal once and serves the rest",
}
# Grants the shipped RBAC keeps for a path these runs do not exercise: (verb, resource, resourceName)
# -> why it stays. A grant of the rendered RBAC that the run never used and is not here fails the test.
UNUSED_GRANTS: dict[tuple[str, str, str], str] = {}


def assert_least_privilege(cluster: Cluster, pod: Pod, *, refusals: Mapping[str, str] = OPT_IN_REFUSALS,
                           unused: Mapping[tuple[str, str, str], str] = UNUSED_GRANTS) -> None:
    """The rendered RBAC is exactly what the pod called, over its whole run (call it once the pod
    stopped: releasing the Lease is a call too): RBAC refused it nothing but requests on the
    resources of ``refusals`` (each an opt-in component), and every (verb, resource, resourceName)
    granted to its ServiceAccount is one a request of the pod used, but those of ``unused``, each
    kept for the reason given there (and each of those really unused: the list cannot go stale)."""
    refused = [a for a in cluster.refused(pod.user) if a.resource not in refusals]
    assert not refused, f"RBAC refused {pod.user}: {refused}"
    granted = grants(pod.manifests, pod.namespace, pod.service_account_name)
    assert granted or not unused
    never = unused_grants(granted, cluster.calls(pod.user))
    surplus = [str(g) for g in never if g.key not in unused]
    assert not surplus, f"granted to {pod.user}, never called in the run: {surplus}"
    stale = set(unused) - {g.key for g in never}
    assert not stale, f"allowed as unused, yet called or not granted: {sorted(stale)}"


# -- setup 1: Route53 with IRSA, the repository over SSH with a deploy key -----------------------


def test_route53_github_comes_up_ready_and_writes_route53(sshd: SshServer, aws: MotoAws, tmp_path: Path) -> None:
    bare = sshd.create_repo("setup1")
    push_tree(bare, DESIRED / "route53-github", {"CLUSTER_ID": ALPHA_ID}, tmp_path)
    zone_id = aws.create_zone("example.com")
    foreign = {"Name": "legacy.example.com.", "Type": "A", "TTL": 300, "ResourceRecords": [{"Value": "203.0.113.99"}]}
    aws.route53().change_resource_record_sets(HostedZoneId=zone_id, ChangeBatch={"Changes": [
        {"Action": "CREATE", "ResourceRecordSet": foreign}]})
    gitops = example("route53-github", tmp_path / "gitops")
    edit(gitops / "kustomization.yaml", ("GITDNS_REPO", sshd.url(bare)))
    top = gitops / "kustomization.yaml"
    top.write_text(top.read_text().replace("111122223333", MotoAws.ACCOUNT))  # your role's ARN
    manifests = Manifests.render(gitops)

    with Cluster(tmp_path / "cluster", kube_system_uid=ALPHA_ID, name="eks-eu-1") as cluster:
        cluster.apply(manifests)
        secrets = {"gitdns-git-ssh": ssh_secret(sshd), "gitdns-webhook": {"github-secret": os.urandom(16).hex()}}
        for name, data in secrets.items():
            cluster.create_secret("gitdns-system", name, data)
        irsa_env, irsa_volume, irsa_mount = eks_pod_identity(cluster.get("ServiceAccount", "gitdns", "gitdns-system")
                                                             or {})
        injection = aws.injection()
        injection.env.update(irsa_env)
        injection.volumes.append(irsa_volume)
        injection.mounts.append(irsa_mount)
        pod = Pod(cluster, manifests, tmp_path / "pod", reach=[("127.0.0.1", sshd.port), aws.address],
                  injection=injection)
        assert_documented(top, pod, secrets)
        pod.start()
        try:
            pod.wait_ready()
            records = pod.wait(lambda: (r := aws.records(zone_id)).get(("app.example.com", "A")) and r,
                               "app.example.com in Route53")
            assert records[("app.example.com", "A")] == ["192.0.2.20"]
            # legacy.example.com is someone else's: a conflict in /status, the pod stays Ready
            pod.wait(lambda: "legacy.example.com" in json.dumps(pod.status().get("zones") or pod.status()),
                     "the conflict on legacy.example.com in /status")
            assert pod.probe()[0] == 200
            assert aws.records(zone_id)[("legacy.example.com", "A")] == ["203.0.113.99"]
            assert remote_ref(bare, f"refs/heads/gitdns-status/{ALPHA_ID}"), "no status branch pushed"
            (lease,) = cluster.leases("gitdns-system")
            assert lease["spec"]["holderIdentity"] == pod.name
            assert_runs_as_the_pod_spec_says(pod)
            assert "ProviderLibraryMissing" not in pod.logs()
        finally:
            pod.stop()
        # SIGTERM reached gitdns through the image's init: it gave its Lease up
        (lease,) = cluster.leases("gitdns-system")
        assert not lease["spec"].get("holderIdentity"), lease
        # IRSA alone: no Secret is granted, and every grant was called
        assert not [g for g in grants(manifests, pod.namespace, pod.service_account_name) if g.resource == "secrets"]
        assert_least_privilege(cluster, pod)
    assert pod.proc is not None and pod.proc.returncode == 0, pod.logs()[-3000:]


# -- setup 2: one manifest, two clusters, failover groups -----------------------------------------


def test_failover_fleet_one_manifest_two_clusters_both_ready_and_writing(sshd: SshServer, aws: MotoAws,
                                                                         tmp_path: Path) -> None:
    bare = sshd.create_repo("setup2")
    push_tree(bare, DESIRED / "failover-fleet", {"ALPHA_ID": ALPHA_ID, "BETA_ID": BETA_ID}, tmp_path)
    zone_id = aws.create_zone("example.com")
    gitops = example("failover-fleet", tmp_path / "gitops")
    edit(gitops / "kustomization.yaml", ("GITDNS_REPO", sshd.url(bare)))
    manifests = Manifests.render(gitops)  # rendered once, applied unchanged on both clusters

    pods: list[Pod] = []
    clusters = [Cluster(tmp_path / name, kube_system_uid=uid, name=name).start()
                for name, uid in (("site-a-1", ALPHA_ID), ("site-b-1", BETA_ID))]
    try:
        for cluster in clusters:
            cluster.apply(manifests)
            secrets = {"gitdns-git-ssh": ssh_secret(sshd, sshd.add_key(f"deploy-{cluster.name}")),
                       "gitdns-route53": {"AWS_ACCESS_KEY_ID": f"AKIA{cluster.name.upper().replace('-', '')}",
                                          "AWS_SECRET_ACCESS_KEY": os.urandom(20).hex()}}
            cluster.create_secret("gitdns-system", "gitdns-git-ssh", secrets["gitdns-git-ssh"])
            cluster.create_secret("gitdns-system", "gitdns-route53", secrets["gitdns-route53"],
                                  type_="kuadrant.io/aws")
            pod = Pod(cluster, manifests, tmp_path / cluster.name / "pod",
                      reach=[("127.0.0.1", sshd.port), aws.address], injection=aws.injection())
            # the provider Secret is read through the API (RBAC), not mounted
            assert_documented(gitops / "kustomization.yaml", pod, {"gitdns-git-ssh": secrets["gitdns-git-ssh"]})
            assert "gitdns-route53" in header_comment(gitops / "kustomization.yaml")
            pods.append(pod.start())
        for pod in pods:
            pod.wait_ready()
        records = pods[0].wait(lambda: (r := aws.records(zone_id)).get(("app.example.com", "A"), []) and
                               len(r[("app.example.com", "A")]) == 2 and r, "both clusters' addresses in Route53")
        assert sorted(records[("app.example.com", "A")]) == ["192.0.2.10", "198.51.100.10"]
        for cluster, pod, uid in zip(clusters, pods, (ALPHA_ID, BETA_ID), strict=True):
            assert remote_ref(bare, f"refs/heads/gitdns-status/{uid}"), f"no status branch for {cluster.name}"
            (lease,) = cluster.leases("gitdns-system")
            assert lease["spec"]["holderIdentity"] == pod.name
            assert pod.status()["summary.yaml"]["clusterId"] == uid
            assert_runs_as_the_pod_spec_says(pod)
    finally:
        for pod in pods:
            pod.stop()
        for cluster in clusters:
            cluster.stop()
    assert [p.proc.returncode if p.proc else None for p in pods] == [0, 0], [p.logs()[-2000:] for p in pods]
    for cluster, pod in zip(clusters, pods, strict=True):
        assert_least_privilege(cluster, pod)  # the provider Secret gitdns-route53 among the calls


# -- setup 3: the orchestrator of the pool `metro`, HTTPS token, ConfigMap delivery ---------------


def nodes_yaml(nodes: list[NodeServer] | list[HeaderNode]) -> str:
    return "\n".join(f"    - {{name: {n.name}, ip: {n.ip}, healthEndpoint: \"{n.endpoint}\"}}" for n in nodes)


class HeaderNode:
    """A node's health endpoint that answers 200 only to a probe carrying ``header: value`` (a
    gateway behind an authenticating proxy), 401 otherwise; ``seen`` counts the probes by
    whether they carried it."""

    def __init__(self, name: str, ip: str, header: str, value: str) -> None:
        self.name, self.ip = name, ip
        self.seen = {"with": 0, "without": 0}
        node = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = self.headers.get(header) == value
                node.seen["with" if ok else "without"] += 1
                self.send_response(200 if ok and self.path == "/healthz/ready" else 401)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def server_bind(self) -> None:  # no reverse lookup of the address (HTTPServer's)
                socketserver.TCPServer.server_bind(self)

        self.httpd = Server((ip, 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.port}/healthz/ready"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_orchestrator_for_pool_metro_comes_up_ready_and_delivers(sshd: SshServer, tmp_path: Path) -> None:
    """The example as it ships: its repository over SSH with a deploy key (read access is enough,
    its header says: the key here is one the server refuses pushes from). Its nodes answer only
    probes carrying the header of the NodePool's headersSecret, a Secret in the orchestrator's own
    namespace (the header of the example says to create it there)."""
    probe_token = os.urandom(12).hex()
    nodes = [HeaderNode(f"node-{i}", f"127.0.0.{61 + i}", "X-Probe-Token", probe_token) for i in range(3)]
    try:
        bare = sshd.create_repo("setup3")
        push_tree(bare, DESIRED / "metro-pool", {"NODES": nodes_yaml(nodes),
                                                 "HEADERS_SECRET": "    headersSecret: gitdns-probe-headers"}, tmp_path)
        gitops = example("edge-orchestrator", tmp_path / "gitops")
        install = gitops / "install" / "kustomization.yaml"
        text = install.read_text()
        assert re.search(r"(?m)^\s*-\s+\S*/components/github-ssh$", text), "the example's transport is SSH"
        # the placeholders the header says to fill in: the repository, and here a pool of our own
        text = set_literal(text, "GITDNS_REPO", sshd.url(bare))
        text = set_literal(text, "GITDNS_NODE_POOL", "metro")
        # the nodes here are on loopback: probes reach them only once the operator allows it
        text = add_literal(text, "gitdns-orchestrator-config", "GITDNS_PROBE_ALLOW_RANGES", "127.0.0.0/8")
        install.write_text(text)
        manifests = Manifests.render(gitops)

        with Cluster(tmp_path / "cluster", kube_system_uid=ALPHA_ID, name="k3s-metro") as cluster:
            # the prerequisite the example's header names
            cluster.apply(Manifests.render(DEPLOY / "orchestrator" / "coredns-custom"))
            cluster.apply(manifests)
            secrets = {"gitdns-git-ssh": ssh_secret(sshd, sshd.readonly_key)}
            cluster.create_secret("dns-failover", "gitdns-git-ssh", secrets["gitdns-git-ssh"])
            assert "headersSecret" in header_comment(gitops / "kustomization.yaml")
            # the name the example's header gives (the one its settings list and its Role may get)
            assert "gitdns-probe-headers" in header_comment(gitops / "kustomization.yaml")
            cluster.create_secret("dns-failover", "gitdns-probe-headers", {"X-Probe-Token": probe_token})
            pod = Pod(cluster, manifests, tmp_path / "pod",
                      reach=[("127.0.0.1", sshd.port), *((n.ip, n.port) for n in nodes)])
            assert_documented(gitops / "kustomization.yaml", pod, secrets)
            pod.start()
            try:
                pod.wait_ready()

                def delivered() -> dict[str, str] | None:
                    data = (cluster.configmap("kube-system", "coredns-custom") or {}).get("data") or {}
                    text = "\n".join(data.values())
                    return data if all(d in text for d in ("shop.metro.test", "blog.metro.test")) else None
                data = pod.wait(delivered, "the pool's hosts in kube-system/coredns-custom")
                hosts = "\n".join(data.values())
                for node in nodes:
                    assert re.search(rf"^{re.escape(node.ip)}\s.*\bshop\.metro\.test\b", hosts, re.M), hosts
                assert all(n.seen["with"] for n in nodes) and not any(n.seen["without"] for n in nodes), \
                    [n.seen for n in nodes]
                lease = cluster.lease("dns-failover", "gitdns-orchestrator-metro")
                assert lease is not None and lease["spec"]["holderIdentity"] == pod.name
                assert_runs_as_the_pod_spec_says(pod)
                assert probe_token not in pod.logs()
                assert probe_token not in json.dumps(pod.status())
            finally:
                pod.stop()
            # the Lease of the pool, the headers Secret by name, the ConfigMap in kube-system
            assert_least_privilege(cluster, pod)
        assert pod.proc is not None and pod.proc.returncode == 0, pod.logs()[-3000:]
    finally:
        for node in nodes:
            node.stop()


# -- a user's own overlay: namespace and namePrefix (deploy/README.md, "Your own overlay") --------

USER_OVERLAY = """\
# deploy/README.md, "Your own overlay: namespace, prefix, patches"
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {deploy}/base
components:
  - {deploy}/components/github-ssh
  - {deploy}/components/provider-secret
namespace: dns-team
namePrefix: team-
configMapGenerator:
  - name: gitdns-config
    behavior: merge
    literals:
      - GITDNS_REPO={repo}
      - GITDNS_PATH=dns
      # the operator allows the Zones' DNS server (docs/agent.md: provider fences)
      - GITDNS_RFC2136_SERVERS={dns}
patches:
  # the Secret the Zone names, in the settings and the Role together (components/provider-secret)
  - target: {{kind: ConfigMap, name: gitdns-config}}
    patch: |-
      - op: replace
        path: /data/GITDNS_CREDENTIALS_SECRETS
        value: dns-tsig
  - target: {{kind: Role, name: gitdns-provider-credentials}}
    patch: |-
      - op: replace
        path: /rules/0/resourceNames
        value: ["dns-tsig"]
"""


def test_user_overlay_with_namespace_and_prefix_comes_up_and_writes_bind(sshd: SshServer, tmp_path: Path) -> None:
    """The base moved to another namespace and renamed, as the README shows: every reference
    follows (RBAC subjects, the settings ConfigMap, the Lease's namespace), the Secrets keep the
    names the headers give; it writes its zone into BIND by RFC 2136, the TSIG key read from a
    Secret through the API (the Role gitdns-provider-credentials, prefixed)."""
    from tests.e2e.dns_servers import SECRET, ToolMissing, start_bind

    try:
        bind = start_bind(tmp_path / "bind")
    except ToolMissing as exc:
        require(False, str(exc))
        raise
    try:
        bare = sshd.create_repo("own-overlay")
        push_tree(bare, DESIRED / "rfc2136-zone", {"CLUSTER_ID": BETA_ID, "DNS_PORT": str(bind.port)}, tmp_path)
        gitops = tmp_path / "gitops"
        gitops.mkdir()
        (gitops / "kustomization.yaml").write_text(USER_OVERLAY.format(
            deploy=os.path.relpath(DEPLOY, gitops), repo=sshd.url(bare), dns=f"127.0.0.1:{bind.port}"))
        manifests = Manifests.render(gitops)
        for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Deployment"):
            assert all(d["metadata"]["name"].startswith("team-") for d in manifests.all(kind)), kind

        with Cluster(tmp_path / "cluster", kube_system_uid=BETA_ID, name="lab-1") as cluster:
            cluster.apply(manifests)
            cluster.create_secret("dns-team", "gitdns-git-ssh", ssh_secret(sshd))
            cluster.create_secret("dns-team", "dns-tsig", {"TSIG_SECRET": SECRET})
            pod = Pod(cluster, manifests, tmp_path / "pod", reach=[("127.0.0.1", sshd.port), (bind.host, bind.port)])
            assert pod.namespace == "dns-team"
            pod.start()
            try:
                pod.wait_ready()
                assert pod.wait(lambda: bind.query("app.example.test.", "A"), "app.example.test in BIND") == \
                    ["192.0.2.30"]
                (lease,) = cluster.leases("dns-team")
                assert lease["spec"]["holderIdentity"] == pod.name
                assert_runs_as_the_pod_spec_says(pod)
                assert SECRET not in pod.logs()
            finally:
                pod.stop()
            assert_least_privilege(cluster, pod)  # get secrets/dns-tsig, by the prefixed Role
        assert pod.proc is not None and pod.proc.returncode == 0, pod.logs()[-3000:]
    finally:
        bind.stop()


# -- the orchestrator as a CoreDNS sidecar (deploy/overlays/orchestrator-sidecar) ------------------

SIDECAR_CREDENTIALS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
spec:
  template:
    spec:
      containers:
        - name: gitdns-orchestrator
          env:
            - name: GITDNS_TOKEN_FILE
              value: /var/run/gitdns/git-token/token
            - name: GITDNS_CA_FILE
              value: /var/run/gitdns/git-token/ca.crt
          volumeMounts:
            - name: git-token
              mountPath: /var/run/gitdns/git-token
              readOnly: true
      volumes:
        - name: git-token
          secret:
            secretName: gitdns-git-token
            defaultMode: 292
"""


def test_orchestrator_sidecar_for_pool_metro_writes_the_shared_volume(https: HttpsServer, tmp_path: Path) -> None:
    """The sidecar container of the CoreDNS pod (no fsGroup: the credentials 0444 as the
    component says), its files in the emptyDir CoreDNS imports; dnsmasq reads them as CoreDNS's
    hosts plugin would and answers for the tenants."""
    from tests.e2e.orchestrator_kit import Dnsmasq, dnsmasq_path

    binary = dnsmasq_path()
    require(binary is not None, "dnsmasq not found: apt-get install -y --no-install-recommends dnsmasq")
    nodes = start_nodes(2, first=71)
    try:
        bare = https.create_repo("sidecar")
        push_tree(bare, DESIRED / "metro-pool", {"NODES": nodes_yaml(nodes), "HEADERS_SECRET": ""}, tmp_path)
        gitops = copy_kustomization(DEPLOY / "overlays" / "orchestrator-sidecar", tmp_path / "gitops")
        top = gitops / "kustomization.yaml"
        text = set_literal(top.read_text(), "GITDNS_REPO", https.url(bare))
        text = set_literal(text, "GITDNS_NODE_POOL", "metro")
        # the nodes here are on loopback: probes reach them only once the operator allows it
        top.write_text(add_literal(text, "gitdns-orchestrator-sidecar", "GITDNS_PROBE_ALLOW_RANGES", "127.0.0.0/8"))
        # a private repository: "mount the git credentials into the sidecar like the transport
        # components do, with defaultMode 292 (0444)" (the sidecar component's header)
        add_patch(top, {"patch": SIDECAR_CREDENTIALS})
        manifests = Manifests.render(gitops)
        assert not manifests.all("Role") and not manifests.all("RoleBinding"), "the sidecar needs no RBAC"

        with Cluster(tmp_path / "cluster", kube_system_uid=ALPHA_ID, name="k3s-sidecar") as cluster:
            cluster.create_service_account("kube-system", "coredns")  # k3s's own
            cluster.apply(manifests)
            cluster.create_secret("kube-system", "gitdns-git-token", {"token": https.token,
                                                                      "ca.crt": https.ca_file.read_bytes()})
            pod = Pod(cluster, manifests, tmp_path / "pod", container="gitdns-orchestrator",
                      reach=[("127.0.0.1", https.port), *((n.ip, n.port) for n in nodes)])
            assert pod.fs_group is None
            pod.start()
            try:
                # no readinessProbe on the sidecar (it would gate CoreDNS's): its /readyz asked
                pod.wait_ready(endpoint=("orch-admin", "/readyz"))
                shared = pod.volumes["custom-config-volume"]
                pod.wait(lambda: any(shared.glob("*.server")) and "shop.metro.test" in "".join(
                    f.read_text() for f in shared.iterdir() if f.is_file() and not f.name.startswith(".")),
                    "the pool's files in the shared volume")
                assert_runs_as_the_pod_spec_says(pod)
                dnsmasq = Dnsmasq(shared, tmp_path, binary=binary or "").start()
                try:
                    answers = pod.wait(lambda: dnsmasq.answers("shop.metro.test"), "dnsmasq to answer")
                    assert answers == {n.ip for n in nodes}
                finally:
                    dnsmasq.stop()
            finally:
                pod.stop()
            assert not grants(manifests, pod.namespace, pod.service_account_name)
            assert_least_privilege(cluster, pod)  # nothing granted, nothing refused: it calls no API
        assert pod.proc is not None and pod.proc.returncode == 0, pod.logs()[-3000:]
    finally:
        for node in nodes:
            node.stop()
