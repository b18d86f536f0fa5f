"""The image's build context, and the image deploy/ names.

- What .dockerignore lets into the Docker build, and that the builder stage copies every file the
  package links to (gitdns/data/* are symlinks into the repository).  The Dockerfile itself
  (stages, extras, programs, entrypoint) is tests/test_image.py's.
- deploy/ names the image by the documented placeholder, ``ghcr.io/example/gitdns:<version>``
  (manifests, overlays' ``images:`` entries, what renders) and its remote bases as
  ``github.com/example/gitdns//...?ref=v<version>``; a release's rewrite
  (scripts/release-manifests.py pin, run by .github/workflows/release.yml) names its image by tag
  and digest everywhere, keeps every other line, renders, and refuses another version or form;
  the check names each reference that is neither.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.test_deploy import kustomization_kind, require_kubectl
from tests.test_image import stages  # the Dockerfile's stages, parsed once for both test modules

ROOT = Path(__file__).resolve().parent.parent
DOCKERIGNORE = ROOT / ".dockerignore"


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
    for path in ("gitdns/cli/__init__.py", "gitdns/data/schemas", "gitdns/py.typed", "pyproject.toml", "README.md",
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


# --- the image deploy/ names, and a release's rewrite of it (docs/image.md, "Releases") -------

RELEASE_MANIFESTS = ROOT / "scripts" / "release-manifests.py"
PLACEHOLDER = "ghcr.io/example/gitdns"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
DIGEST = "sha256:" + hashlib.sha256(b"a stand-in for the pushed index").hexdigest()


def release_manifests(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RELEASE_MANIFESTS), *map(str, args)], capture_output=True, text=True,
                          timeout=300, check=False)


def repository_copy(tmp_path: Path) -> Path:
    """What the release's rewrite reads: deploy/ and pyproject.toml."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "deploy", root / "deploy", symlinks=True)
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def gitdns_images(docs: Iterable[Any]) -> list[str]:
    """Every container image of the rendered documents whose repository is .../gitdns."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("containers", "initContainers") and isinstance(value, list):
                    found.extend(c["image"] for c in value if re.search(r"(^|/)gitdns[:@]", c.get("image", "")))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(list(docs))
    return found


def image_entries(root: Path) -> dict[Path, list[dict[str, Any]]]:
    """The gitdns entries of every kustomization's ``images:`` under root's deploy/."""
    out = {}
    for path in sorted((root / "deploy").rglob("kustomization.yaml")):
        doc = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
        entries = [e for e in doc.get("images") or [] if re.search(r"(^|/)gitdns$", e["name"])]
        if entries:
            out[path.relative_to(root)] = entries
    return out


def rendered_images(root: Path) -> dict[str, list[str]]:
    kubectl = require_kubectl()
    out = {}
    for directory in sorted(p.parent for p in (root / "deploy").rglob("kustomization.yaml")):
        if kustomization_kind(directory) != "Kustomization":
            continue
        done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120,
                              check=False, env={**os.environ, "KUBECONFIG": os.devnull})
        assert done.returncode == 0, done.stderr
        images = gitdns_images(YAML(typ="safe", pure=True).load_all(done.stdout))
        if images:
            out[directory.relative_to(root / "deploy").as_posix()] = images
    return out


def test_deploy_names_the_placeholder_at_the_projects_version() -> None:
    """In the repository every reference is the documented placeholder, at the version a tag
    v<version> releases: the manifests, the overlays' images: entries and what renders."""
    done = release_manifests("check", "--render")
    assert done.returncode == 0, done.stderr
    entries = image_entries(ROOT)
    overlays = {p.parent.relative_to("deploy").as_posix() for p in entries}
    assert {"overlays/github-ssh", "examples/route53-github", "examples/failover-fleet"} <= overlays
    for path, listed in entries.items():
        assert listed == [{"name": PLACEHOLDER, "newTag": VERSION}], path
    rendered = rendered_images(ROOT)
    assert {"base", "orchestrator/base", "overlays/github-ssh", "overlays/orchestrator-sidecar"} <= set(rendered)
    assert {image for images in rendered.values() for image in images} == {f"{PLACEHOLDER}:{VERSION}"}


def test_the_remote_bases_use_one_spelling_at_the_projects_version() -> None:
    """deploy/'s remote bases name the owner as the image does (``example``) and the release tag
    v<version>; each names a directory that exists. The release notes print the real one."""
    pattern = re.compile(r"https://github\.com/([^/\s]+)/gitdns//([^?\s`]+)\?ref=([^\s`)]+)")
    found = [(path, match) for path in sorted((ROOT / "deploy").rglob("*")) if path.suffix in (".md", ".yaml")
             for match in pattern.finditer(path.read_text(encoding="utf-8"))]
    assert any(path.name == "README.md" for path, _ in found)
    for path, match in found:
        owner, directory, ref = match.groups()
        assert (owner, ref) == ("example", f"v{VERSION}"), (path, match[0])
        assert (ROOT / directory).is_dir(), (path, directory)
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    notes = re.search(r"https://github\.com/\$\{GITHUB_REPOSITORY\}//([^?\s]+)\?ref=\$\{TAG\}", workflow)
    assert notes and (ROOT / notes[1]).is_dir()
    assert f"- name: {PLACEHOLDER}\n" in workflow, "the notes' images: entry replaces the placeholder"


def test_a_release_pins_every_reference_by_tag_and_digest(tmp_path: Path) -> None:
    root = repository_copy(tmp_path)
    ref = f"ghcr.io/acme/gitdns:{VERSION}@{DIGEST}"
    before = {p: p.read_text(encoding="utf-8") for p in (root / "deploy").rglob("*.yaml")}
    done = release_manifests("pin", "--root", root, "--render", ref)
    assert done.returncode == 0, done.stderr
    # What renders, the images: entries and the manifests all name the release, and nothing else.
    assert {image for images in rendered_images(root).values() for image in images} == {ref}
    for path, listed in image_entries(root).items():
        assert listed == [{"name": "ghcr.io/acme/gitdns", "newTag": VERSION, "digest": DIGEST}], path
    for path, text in before.items():
        after = path.read_text(encoding="utf-8")
        assert PLACEHOLDER not in after, path
        # Comments and every other line are kept: only the references change, and a digest: is added.
        changed = [line for line in difflib.ndiff(text.splitlines(), after.splitlines()) if line[:2] in ("- ", "+ ")]
        assert all(re.search(r"gitdns|newTag:|digest:", line) for line in changed), (path, changed)
    assert "github.com/acme/gitdns//deploy/" in (root / "deploy" / "README.md").read_text(encoding="utf-8")
    assert release_manifests("check", "--root", root, "--release", ref).returncode == 0
    # Pinning again is a no-op; a later release pins over an earlier one.
    again = release_manifests("pin", "--root", root, ref)
    assert again.returncode == 0 and "(0 lines rewritten)" in again.stdout
    later = f"ghcr.io/acme/gitdns:{VERSION}@sha256:{'e' * 64}"
    assert release_manifests("pin", "--root", root, "--render", later).returncode == 0
    assert {image for images in rendered_images(root).values() for image in images} == {later}


@pytest.mark.parametrize(("edit", "complaint"), [
    (("deploy/overlays/github-ssh/kustomization.yaml", f"newTag: {VERSION}", "newTag: 0.0.1"), "newTag 0.0.1"),
    (("deploy/base/deployment.yaml", f"image: {PLACEHOLDER}:{VERSION}", "image: registry.example.com/gitdns:1"),
     "image registry.example.com/gitdns:1"),
    (("deploy/orchestrator/base/deployment.yaml", f"image: {PLACEHOLDER}:{VERSION}",
      f"image: {PLACEHOLDER}:{VERSION}@sha256:{'0' * 64}"), f"image {PLACEHOLDER}:{VERSION}@sha256"),
    (("deploy/README.md", "github.com/example/gitdns//deploy/overlays/github-ssh?ref=v",
      "github.com/ORG/gitdns//deploy/overlays/github-ssh?ref=v"), "remote base github.com/ORG/gitdns"),
    (("deploy/base/deployment.yaml", f"image: {PLACEHOLDER}:{VERSION}",
      f"image: ghcr.io/acme/gitdns:{VERSION}@sha256:{'0' * 64}"), "in more than one way"),
], ids=["overlay-tag", "other-registry", "placeholder-with-digest", "remote-base-owner", "one-pinned-alone"])
def test_the_check_names_a_reference_that_is_neither(tmp_path: Path, edit: tuple[str, str, str],
                                                     complaint: str) -> None:
    root = repository_copy(tmp_path)
    relative, old, new = edit
    path = root / relative
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    done = release_manifests("check", "--root", root)
    assert done.returncode == 1
    assert f"{relative}:" in done.stderr and complaint in done.stderr, done.stderr


def test_a_release_is_refused_at_another_version_or_in_another_form(tmp_path: Path) -> None:
    root = repository_copy(tmp_path)
    wrong_tag = release_manifests("pin", "--root", root, f"ghcr.io/acme/gitdns:9.9.9@{DIGEST}")
    assert wrong_tag.returncode == 1 and f"is not pyproject.toml's version {VERSION}" in wrong_tag.stderr
    for ref in (f"ghcr.io/Acme/gitdns:{VERSION}@{DIGEST}", f"ghcr.io/acme/gitdns:{VERSION}",
                f"docker.io/acme/gitdns:{VERSION}@{DIGEST}", f"ghcr.io/acme/other:{VERSION}@{DIGEST}"):
        done = release_manifests("pin", "--root", repository_copy(tmp_path / ref.replace("/", "_")), ref)
        assert done.returncode == 2 and "is not ghcr.io/<owner>/gitdns:<tag>@sha256:" in done.stderr, ref
    # A copy already pinned is not the placeholder any more: check --release of another image fails.
    assert release_manifests("pin", "--root", root, f"ghcr.io/acme/gitdns:{VERSION}@{DIGEST}").returncode == 0
    other = release_manifests("check", "--root", root, "--release", f"ghcr.io/other/gitdns:{VERSION}@{DIGEST}")
    assert other.returncode == 1 and "want ghcr.io/other/gitdns" in other.stderr
