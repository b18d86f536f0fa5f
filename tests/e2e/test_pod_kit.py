"""The pod kit's own reading of the Dockerfile, the pod spec and the kubelet's conventions (no
pod started here: tests/e2e/test_deploy_pod.py does that)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.e2e.pod_kit import (
    DEPLOY,
    ROOT,
    Image,
    KitError,
    _expand,
    add_literal,
    copy_kustomization,
    header_comment,
    set_literal,
    write_atomic_volume,
)


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
