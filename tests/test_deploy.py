"""The deployment: Dockerfile, .dockerignore and the Kustomize manifests under deploy/.

The manifests are rendered here without kubectl by a minimal Kustomize (``render``): it
implements only what deploy/ uses (``resources``, ``images``, JSON 6902 ``patches``) and
refuses any other kustomization key, so nothing is silently ignored. Each rendered document
is validated offline against the Kubernetes OpenAPI schemas with ``kubernetes-validate``
(strict: unknown fields fail), then checked for what the agent needs: one replica with
Recreate (one writer per owner: docs/agent.md), probes, a locked-down pod, least
privilege RBAC.  Where kubectl exists the renderer is also compared with ``kubectl kustomize``.

Run as a module to validate or print the manifests (scripts/validate-deploy.sh does):
    python3 -m tests.test_deploy --validate
    python3 -m tests.test_deploy --render deploy/overlays/example
"""

from __future__ import annotations

import argparse
import copy
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"
OVERLAYS = sorted(p.parent for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
KUSTOMIZATIONS = [BASE, *OVERLAYS]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

# The oldest Kubernetes minor the manifests must be valid for; the newest schemas
# kubernetes-validate ships are checked too (an API removed upstream shows up there).
KUBERNETES_VERSION = "1.30"
NAMESPACE = "gitdns-system"
IMAGE = "ghcr.io/example/gitdns"
STATE_DIR = "/var/lib/gitdns"
NONROOT_UID = 65532
PORT = 8080
ADMIN_PORT = 9090


# --- a minimal Kustomize -------------------------------------------------------------------


class RenderError(Exception):
    pass


SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "images", "patches"}
SUPPORTED_TARGET_KEYS = {"group", "version", "kind", "name", "namespace"}


def _yaml() -> YAML:
    return YAML(typ="safe", pure=True)


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in _yaml().load_all(path.read_text()) if doc is not None]


def resource_id(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"]


def render(directory: Path) -> list[dict[str, Any]]:
    """The documents ``kubectl kustomize DIRECTORY`` would print (for the features we use)."""
    kustomization_file = directory / "kustomization.yaml"
    if not kustomization_file.is_file():
        raise RenderError(f"{directory}: no kustomization.yaml")
    (kustomization,) = load_documents(kustomization_file)
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise RenderError(f"{kustomization_file}: unsupported by this renderer: {sorted(unsupported)} "
                          f"(supported: {sorted(SUPPORTED_KEYS)})")
    if kustomization.get("kind", "Kustomization") != "Kustomization":
        raise RenderError(f"{kustomization_file}: kind must be Kustomization")
    docs: list[dict[str, Any]] = []
    for entry in kustomization.get("resources") or []:
        path = (directory / entry).resolve()
        docs.extend(render(path) if path.is_dir() else load_documents(path))
    seen: set[tuple[str, str, str, str]] = set()
    for doc in docs:
        rid = resource_id(doc)
        if rid in seen:
            raise RenderError(f"{directory}: {rid} defined twice")
        seen.add(rid)
    # Kustomize's order: patches first, then transformers such as images.
    for patch in kustomization.get("patches") or []:
        apply_patch(docs, patch, directory)
    for image in kustomization.get("images") or []:
        apply_image(docs, image)
    return docs


def _matches_target(doc: dict[str, Any], target: dict[str, Any]) -> bool:
    group, _, version = doc["apiVersion"].rpartition("/")
    meta = doc.get("metadata") or {}
    actual = {"group": group, "version": version, "kind": doc["kind"], "name": meta.get("name"),
              "namespace": meta.get("namespace", "")}
    return all(actual[key] == value for key, value in target.items())


def apply_patch(docs: list[dict[str, Any]], patch: dict[str, Any], directory: Path) -> None:
    if set(patch) != {"target", "patch"}:
        raise RenderError(f"{directory}: only inline patches with a target are supported, got {sorted(patch)}")
    target = patch["target"]
    if set(target) - SUPPORTED_TARGET_KEYS:
        raise RenderError(f"{directory}: unsupported patch target keys {sorted(set(target) - SUPPORTED_TARGET_KEYS)}")
    operations = _yaml().load(patch["patch"])
    if not isinstance(operations, list):
        raise RenderError(f"{directory}: only JSON 6902 patches (a list of operations) are supported")
    matched = [doc for doc in docs if _matches_target(doc, target)]
    if not matched:
        raise RenderError(f"{directory}: patch target {target} matches no resource")
    for doc in matched:
        for operation in operations:
            json_patch(doc, operation)


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise RenderError(f"JSON pointer {path!r} must start with /")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, *, append: bool) -> int:
    if append and token == "-":
        return len(container)
    if not token.isdigit():
        raise RenderError(f"{token!r} is not a list index")
    index = int(token)
    if index > len(container) or (not append and index == len(container)):
        raise RenderError(f"list index {index} out of range")
    return index


def json_patch(doc: dict[str, Any], operation: dict[str, Any]) -> None:
    """RFC 6902 add, remove, replace and test."""
    op = operation["op"]
    *parents, last = _pointer(operation["path"])
    node: Any = doc
    for token in parents:
        node = node[_index(node, token, append=False)] if isinstance(node, list) else node[token]
    value = copy.deepcopy(operation.get("value"))
    if op == "add":
        if isinstance(node, list):
            node.insert(_index(node, last, append=True), value)
        else:
            node[last] = value
    elif op in ("replace", "remove", "test"):
        key: Any = _index(node, last, append=False) if isinstance(node, list) else last
        if not isinstance(node, list) and key not in node:
            raise RenderError(f"{op} {operation['path']}: no such member")
        if op == "replace":
            node[key] = value
        elif op == "remove":
            del node[key]
        elif node[key] != value:
            raise RenderError(f"test {operation['path']}: {node[key]!r} != {value!r}")
    else:
        raise RenderError(f"unsupported JSON patch operation {op!r}")


def split_image(image: str) -> tuple[str, str, str]:
    """(name, tag, digest) of an image reference."""
    name, _, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = ""
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _containers(item)


def apply_image(docs: list[dict[str, Any]], image: dict[str, Any]) -> None:
    for container in (c for doc in docs for c in _containers(doc)):
        name, tag, digest = split_image(container.get("image", ""))
        if name != image["name"]:
            continue
        name = image.get("newName", name)
        if "digest" in image:
            container["image"] = f"{name}@{image['digest']}"
        elif "newTag" in image:
            container["image"] = f"{name}:{image['newTag']}"
        else:
            container["image"] = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def dump(docs: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    yaml = _yaml()
    yaml.default_flow_style = False
    yaml.dump_all(docs, out)
    return out.getvalue()


# --- helpers -------------------------------------------------------------------------------


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def only(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def agent_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = only(docs, "Deployment", "gitdns")["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "gitdns"]
    return container


def kubernetes_validate_or_skip() -> Any:
    try:
        import kubernetes_validate
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("kubernetes-validate is missing (pip install -e '.[test]'); CI=true requires it")
        pytest.skip("kubernetes-validate is not installed (pip install kubernetes-validate)")
    return kubernetes_validate


@pytest.fixture(scope="module", params=KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(request.param)


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(BASE)


# --- the renderer itself -------------------------------------------------------------------


def test_there_is_an_example_overlay() -> None:
    assert DEPLOY / "overlays" / "example" in OVERLAYS


def test_renderer_refuses_what_it_does_not_implement(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")
    with pytest.raises(RenderError, match="namePrefix"):
        render(tmp_path)


def test_json_patch_and_images() -> None:
    doc: dict[str, Any] = {"spec": {"containers": [{"name": "a", "image": "reg:5000/x/app:1", "env": []}]}}
    json_patch(doc, {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "A"}})
    json_patch(doc, {"op": "add", "path": "/spec/containers/0/env/0", "value": {"name": "B"}})
    json_patch(doc, {"op": "replace", "path": "/spec/containers/0/name", "value": "b"})
    json_patch(doc, {"op": "test", "path": "/spec/containers/0/env/1/name", "value": "A"})
    with pytest.raises(RenderError):
        json_patch(doc, {"op": "replace", "path": "/spec/missing", "value": 1})
    apply_image([doc], {"name": "reg:5000/x/app", "newName": "other/app", "newTag": "2"})
    assert doc["spec"]["containers"][0] == {"name": "b", "image": "other/app:2", "env": [{"name": "B"}, {"name": "A"}]}
    assert split_image("reg:5000/x/app@sha256:ab") == ("reg:5000/x/app", "", "sha256:ab")


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_renderer_agrees_with_kubectl_kustomize(directory: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: the renderer is checked against it where it exists")
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    theirs = {resource_id(d): d for d in _yaml().load_all(result.stdout) if d is not None}
    ours = {resource_id(d): d for d in render(directory)}
    assert sorted(ours) == sorted(theirs)
    for rid, doc in ours.items():
        assert doc == theirs[rid], f"{rid} differs from kubectl kustomize"


# --- schema validation ---------------------------------------------------------------------


def _versions() -> list[str]:
    try:
        from kubernetes_validate.utils import latest_version
    except ImportError:
        return [KUBERNETES_VERSION]
    latest = ".".join(latest_version().split(".")[:2])
    return [KUBERNETES_VERSION] if latest == KUBERNETES_VERSION else [KUBERNETES_VERSION, latest]


@pytest.mark.parametrize("version", _versions())
def test_every_document_is_valid_kubernetes(rendered: list[dict[str, Any]], version: str) -> None:
    kubernetes_validate = kubernetes_validate_or_skip()
    problems = []
    for doc in rendered:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.path)
            problems.append(f"{resource_id(doc)} at {path or '(top)'}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{resource_id(doc)}: {exc.message}")
    assert not problems, "\n".join(problems)


# --- one writer per owner, probes, the pod -------------------------------------------------


def test_one_writer_per_owner(rendered: list[dict[str, Any]]) -> None:
    (deployment,) = find(rendered, "Deployment")
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
    # probed on the admin port: a flood of connections to the webhook cannot get the pod restarted
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    service = only(rendered, "Service", "gitdns")
    assert service["spec"]["type"] == "ClusterIP"
    # the webhook's Service exposes the webhook port only: /status and /metrics are on `admin`
    assert service["spec"]["ports"] == [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}]
    assert "prometheus.io/port" not in service["metadata"].get("annotations", {})
    pod_annotations = only(rendered, "Deployment", "gitdns")["spec"]["template"]["metadata"]["annotations"]
    assert pod_annotations["prometheus.io/port"] == str(ADMIN_PORT)
    pod_labels = only(rendered, "Deployment", "gitdns")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_pod_is_locked_down(rendered: list[dict[str, Any]]) -> None:
    pod = only(rendered, "Deployment", "gitdns")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == NONROOT_UID
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
    mounts = {m["mountPath"]: m["name"] for m in agent_container(rendered)["volumeMounts"]}
    assert "emptyDir" in volumes[mounts[STATE_DIR]]
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_resources(rendered: list[dict[str, Any]]) -> None:
    resources = agent_container(rendered)["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"memory"}  # no CPU limit: throttling only slows a pass


def test_configuration_comes_from_the_configmap_and_downward_api(rendered: list[dict[str, Any]]) -> None:
    container = agent_container(rendered)
    assert container["envFrom"] == [{"configMapRef": {"name": "gitdns-config"}}]
    env = {e["name"]: e for e in container["env"]}
    assert env["GITDNS_POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["GITDNS_POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    config = only(rendered, "ConfigMap", "gitdns-config")["data"]
    assert config["GITDNS_REPO"].startswith("https://")
    assert config["GITDNS_POLL_INTERVAL"] == "60"
    assert config["GITDNS_LOG_FORMAT"] == "json"
    assert "GITDNS_CLUSTER" not in config  # the agent reads the kube-system UID
    assert all(isinstance(v, str) for v in config.values())
    # Secrets are files, never values in the ConfigMap or the environment.
    assert not any(re.search(r"TOKEN$|SECRET$|PASSWORD$|KEY$", name) for name in [*config, *env])


def test_every_setting_is_one_the_agent_knows(rendered: list[dict[str, Any]]) -> None:
    config_module = pytest.importorskip("gitdns.agent.config")
    known = {config_module.env_name(field) for field in config_module.flag_names()} | {"GITDNS_CONFIG"}
    container = agent_container(rendered)
    names = {*only(rendered, "ConfigMap", "gitdns-config")["data"], *(e["name"] for e in container["env"])}
    assert {n for n in names if n.startswith("GITDNS_")} <= known
    config = config_module.resolve({}, {**only(rendered, "ConfigMap", "gitdns-config")["data"],
                                        **{e["name"]: e.get("value", "x") for e in container["env"]}})
    assert config.state_dir == STATE_DIR
    assert config.listen.endswith(f":{PORT}")


def test_namespaced_resources_live_in_gitdns_system(rendered: list[dict[str, Any]]) -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for doc in rendered:
        if doc["kind"] in cluster_scoped:
            assert "namespace" not in doc["metadata"], resource_id(doc)
        else:
            assert doc["metadata"].get("namespace") == NAMESPACE, resource_id(doc)
    namespace = only(rendered, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_no_secret_values_in_git(rendered: list[dict[str, Any]]) -> None:
    for secret in find(rendered, "Secret"):
        assert not secret.get("data") and not secret.get("stringData"), resource_id(secret)


# --- RBAC ----------------------------------------------------------------------------------


def _rules(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in ("Role", "ClusterRole"):
            for rule in doc.get("rules") or []:
                yield f"{doc['kind']}/{doc['metadata']['name']}", rule


def test_no_wildcards_anywhere(rendered: list[dict[str, Any]]) -> None:
    for where, rule in _rules(rendered):
        for key in ("verbs", "resources", "apiGroups", "resourceNames", "nonResourceURLs"):
            values = rule.get(key) or []
            assert not any("*" in value for value in values), f"{where}: wildcard in {key}: {rule}"
        assert "nonResourceURLs" not in rule, where
    for doc in rendered:
        assert "aggregationRule" not in doc, resource_id(doc)


def test_cluster_roles_read_kube_system_and_write_only_gateway_status(rendered: list[dict[str, Any]]) -> None:
    roles = {r["metadata"]["name"]: r["rules"] for r in find(rendered, "ClusterRole")}
    assert roles == {
        "gitdns-cluster-id": [
            {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["kube-system"], "verbs": ["get"]},
        ],
        # The PolicyAffected condition (gitdns/adapters/gateways.py): read a Gateway, PUT its status.
        "gitdns-gateway-status": [
            {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways"], "verbs": ["get"]},
            {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways/status"], "verbs": ["update"]},
        ],
    }


def test_namespaced_role_is_exactly_what_the_agent_uses(rendered: list[dict[str, Any]]) -> None:
    role = only(rendered, "Role", "gitdns-agent")
    granted = {(group, resource): sorted(rule["verbs"]) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]}
    assert granted == {
        ("coordination.k8s.io", "leases"): ["create", "get", "patch", "update"],
        ("", "configmaps"): ["get", "list", "watch"],
        ("", "secrets"): ["get", "list"],  # list: the default provider secret (docs/providers.md)
    }


def test_bindings_give_the_roles_to_the_agent_only(rendered: list[dict[str, Any]]) -> None:
    account = only(rendered, "ServiceAccount", "gitdns")
    assert only(rendered, "Deployment", "gitdns")["spec"]["template"]["spec"]["serviceAccountName"] == "gitdns"
    subject = {"kind": "ServiceAccount", "name": "gitdns", "namespace": account["metadata"]["namespace"]}
    bindings = find(rendered, "RoleBinding") + find(rendered, "ClusterRoleBinding")
    assert len(bindings) == 3
    for binding in bindings:
        assert binding["subjects"] == [subject], resource_id(binding)
        role_kind = binding["roleRef"]["kind"]
        assert role_kind == ("ClusterRole" if binding["kind"] == "ClusterRoleBinding" else "Role")
        only(rendered, role_kind, binding["roleRef"]["name"])


# --- base and the example overlay ----------------------------------------------------------


def test_base_image_is_the_placeholder(base: list[dict[str, Any]]) -> None:
    assert agent_container(base)["image"] == f"{IMAGE}:0.1.0"


def test_example_overlay() -> None:
    docs = render(DEPLOY / "overlays" / "example")
    container = agent_container(docs)
    assert not container["image"].startswith(IMAGE + ":")  # overridden with kustomize images:
    env = {e["name"]: e.get("value") for e in container["env"]}
    token_file = env["GITDNS_TOKEN_FILE"]
    assert token_file == "/var/run/gitdns/token"
    webhook_file = env["GITDNS_WEBHOOK_GITHUB_SECRET_FILE"]
    # Both files come from Secrets mounted read-only in a projected volume (no subPath, so
    # rotations reach the agent).
    pod = only(docs, "Deployment", "gitdns")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    files = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        for source in volume.get("projected", {}).get("sources", []):
            assert mount.get("readOnly") is True and "subPath" not in mount
            for item in source["secret"]["items"]:
                files[f"{mount['mountPath']}/{item['path']}"] = (source["secret"]["name"], item["key"])
    assert token_file in files and webhook_file in files
    assert only(docs, "ConfigMap", "gitdns-config")["data"]["GITDNS_REPO"] != \
        only(render(BASE), "ConfigMap", "gitdns-config")["data"]["GITDNS_REPO"]


# --- Dockerfile and .dockerignore ----------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    assert not pending, "Dockerfile ends in a continuation line"
    out = []
    for line in lines:
        instruction, _, args = line.partition(" ")
        out.append((instruction.upper(), args.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction, args in dockerfile_instructions():
        if instruction == "FROM":
            result.append([])
        elif instruction not in ("ARG",):
            assert result, f"{instruction} before the first FROM"
        if result:
            result[-1].append((instruction, args))
    return result


def test_dockerfile_is_multi_stage_on_one_base() -> None:
    froms = [args.split() for instruction, args in dockerfile_instructions() if instruction == "FROM"]
    assert len(froms) == 2
    assert froms[0][0] == froms[1][0] == "python:3.11-slim"  # the venv's interpreter comes from the base
    assert [w.lower() for w in froms[0][1:]] == ["as", "builder"]


def test_dockerfile_builder_installs_the_wheel_with_the_extras() -> None:
    builder = " ".join(args for _, args in stages()[0])
    assert "pip wheel" in builder or "python -m build" in builder
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    match = re.search(r"\[([a-z0-9_,-]+)\]", builder)
    assert match, "the wheel is installed with its extras"
    assert set(match.group(1).split(",")) == {"kubernetes", "route53"} <= set(extras)


def test_dockerfile_final_stage() -> None:
    final = stages()[-1]
    instructions = dict(final)
    text = " ".join(args for _, args in final)
    assert "pip install" not in text and "pip3 install" not in text
    assert "COPY" in instructions and "--from=builder" in " ".join(a for i, a in final if i == "COPY")
    (run,) = [args for instruction, args in final if instruction == "RUN" and "apt-get install" in args]
    words = shlex.split(run.replace("&&", " && "))
    install = words[words.index("install"):]
    install = install[:install.index("&&")] if "&&" in install else install
    assert "--no-install-recommends" in install
    assert {w for w in install[1:] if not w.startswith("-")} == {"git", "openssh-client", "ca-certificates"}
    assert "rm -rf /var/lib/apt/lists/*" in run
    user = instructions["USER"].split(":")
    assert user[0].isdigit() and int(user[0]) == NONROOT_UID != 0
    assert instructions["WORKDIR"] == STATE_DIR
    assert instructions["ENTRYPOINT"] == '["gitdns"]'  # exec form: signals reach the agent
    assert instructions["CMD"] == '["agent"]'
    assert instructions["EXPOSE"] == str(PORT)
    env = " ".join(args for instruction, args in final if instruction == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
    assert all(instruction != "HEALTHCHECK" for instruction, _ in dockerfile_instructions())
    # The last USER is the one the container runs as.
    assert [i for i, _ in final].index("USER") > max(n for n, (i, _) in enumerate(final) if i == "RUN")


def _dockerignore_regex(pattern: str) -> re.Pattern[str]:
    """Go filepath.Match syntax plus Docker's ``**`` (any number of directories)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + "$")


def dockerignored(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    excluded = False
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip("/"))
        regex = _dockerignore_regex(pattern)
        if any(regex.match(prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def test_dockerignore() -> None:
    for path in ("tests/test_cli.py", "bench/bench_core.py", ".git/HEAD", ".pytest_cache/v/x",
                 ".mypy_cache/x", ".ruff_cache/x", "gitdns/__pycache__/cli.cpython-311.pyc",
                 "gitdns.egg-info/PKG-INFO", "example-repo/zones/example.com.yaml", "deploy/base/x.yaml"):
        assert dockerignored(path), path
    # What the builder stage copies must reach it.
    copied = [args.split()[:-1] for instruction, args in stages()[0] if instruction == "COPY"]
    sources = [s for words in copied for s in words if not s.startswith("--")]
    assert sources, "the builder copies the sources"
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not dockerignored(source.rstrip("/")), source
    for path in ("gitdns/cli.py", "gitdns/data/schemas", "gitdns/py.typed", "pyproject.toml", "README.md",
                 "schemas/zone.schema.json", "templates/kuadrant/dnsrecord.yaml.j2"):
        assert not dockerignored(path), path


def test_builder_copies_what_the_package_links_to() -> None:
    """gitdns/data/* are symlinks into the repository: their targets must be in the image's build."""
    copied = [args.split() for instruction, args in stages()[0] if instruction == "COPY"]
    sources = set()
    for words in copied:
        *srcs, destination = [w for w in words if not w.startswith("--")]
        if len(srcs) == 1 and srcs[0] not in ("pyproject.toml", "README.md"):
            # The repository layout is kept, so the relative links still resolve in /src.
            assert destination.removeprefix("./").rstrip("/") == srcs[0].rstrip("/"), words
        sources.update(s.rstrip("/") for s in srcs)
    links = [p for p in (ROOT / "gitdns").rglob("*") if p.is_symlink()]
    for link in links:
        target = link.resolve().relative_to(ROOT).as_posix()
        assert any(target == s or target.startswith(s + "/") for s in sources), f"{link} -> {target} not copied"
        assert not dockerignored(target), target


# --- command line --------------------------------------------------------------------------


def _validate_all() -> int:
    import kubernetes_validate

    failures = 0
    for directory in KUSTOMIZATIONS:
        docs = render(directory)
        for version in _versions():
            for doc in docs:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
                    failures += 1
                    print(f"{directory.relative_to(ROOT)}: {resource_id(doc)}: {exc.message} (Kubernetes {version})",
                          file=sys.stderr)
        print(f"{directory.relative_to(ROOT)}: {len(docs)} documents rendered, "
              f"validated against Kubernetes {' and '.join(_versions())}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.test_deploy", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--render", metavar="DIR", type=Path, help="print the manifests of a kustomization")
    group.add_argument("--validate", action="store_true", help="render and schema-validate base and overlays")
    args = parser.parse_args(argv)
    try:
        if args.render:
            sys.stdout.write(dump(render(args.render)))
            return 0
        return _validate_all()
    except RenderError as exc:
        print(f"render error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
