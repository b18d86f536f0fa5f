"""The release workflow (.github/workflows/release.yml, docs/image.md "Releases") and the CI one.

What cannot run here (a registry, an OIDC token, Docker) is checked by reading the workflow:
actionlint lints it in .ci/run, and these tests hold what the release promises.

- It runs on a pushed tag v* only; the workflow grants nothing by default and each job only what
  it uses: packages and id-token (cosign keyless) for the image, id-token alone for PyPI (trusted
  publishing, no stored token), contents: write for the GitHub release alone.
- The image: built for linux/amd64 and linux/arm64 from the repository's Dockerfile, pushed to
  ghcr.io/<owner>/gitdns:<version>; signed by digest; an SPDX SBOM per platform, attested.
- The tag must be pyproject.toml's version and deploy/ must name the placeholder at it before
  anything is built; deploy/ is then rewritten to the pushed image by tag and digest and attached.
- Every third-party action is pinned by a full commit sha with its version beside it, one sha per
  action across the project's workflows (and the documented examples).
- .ci/run lints these workflows and dry-runs the release before the tests; ci.yml runs .ci/run on
  pull requests.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
CI = WORKFLOWS / "ci.yml"
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<action>[^@\s]+)@(?P<ref>\S+)(?P<comment>\s+#.*)?$")


def load(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))  # YAML 1.2: `on` is a string


def jobs() -> dict[str, Any]:
    return load(RELEASE)["jobs"]  # type: ignore[no-any-return]


def steps(job: str) -> list[dict[str, Any]]:
    return jobs()[job]["steps"]  # type: ignore[no-any-return]


def uses(job: str, action: str) -> list[dict[str, Any]]:
    return [s for s in steps(job) if s.get("uses", "").split("@")[0] == action]


def script(job: str) -> str:
    return "\n".join(s.get("run", "") for s in steps(job))


def test_runs_on_a_version_tag_only_with_no_default_permissions() -> None:
    workflow = load(RELEASE)
    assert workflow["on"] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {}
    assert workflow["concurrency"]["cancel-in-progress"] is False, "a release is never cut off halfway"


def test_each_job_holds_only_what_it_uses() -> None:
    permissions = {name: job.get("permissions") for name, job in jobs().items()}
    assert permissions == {
        "prepare": {"contents": "read"},
        "image": {"contents": "read", "packages": "write", "id-token": "write"},
        "manifests": {"contents": "read"},
        "pypi": {"id-token": "write"},
        "release": {"contents": "write"},
    }
    # Credentials never linger in a checkout.
    for name in jobs():
        for step in uses(name, "actions/checkout"):
            assert step["with"]["persist-credentials"] is False, name


def test_every_action_is_pinned_by_sha_with_its_version() -> None:
    pins: dict[str, set[str]] = {}
    files = sorted(WORKFLOWS.glob("*.yml")) + sorted((ROOT / "docs" / "examples" / "ci" / "github").glob("*.yml"))
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = USES.match(line)
            if not match:
                continue
            assert re.fullmatch(r"[0-9a-f]{40}", match["ref"]), f"{path.name}:{n}: {match['action']} not pinned by sha"
            assert match["comment"] and re.fullmatch(r"\s+# v\d+\.\d+\.\d+", match["comment"]), \
                f"{path.name}:{n}: the version beside the sha"
            pins.setdefault(match["action"], set()).add(f"{match['ref']}{match['comment'].strip()}")
    assert {action for action, refs in pins.items() if len(refs) > 1} == set(), pins
    needed = {"actions/checkout", "actions/setup-python", "docker/setup-qemu-action", "docker/setup-buildx-action",
              "docker/login-action", "docker/build-push-action", "sigstore/cosign-installer", "anchore/sbom-action",
              "pypa/gh-action-pypi-publish", "actions/upload-artifact", "actions/download-artifact"}
    assert needed <= set(pins)


def test_the_tag_the_version_and_deploy_agree_before_anything_is_built() -> None:
    (check,) = [s for s in steps("prepare") if s.get("id") == "version"]
    assert check["env"]["TAG"] == "${{ github.ref_name }}"
    assert '"$TAG" != "v$version"' in check["run"] and "exit 1" in check["run"]
    assert "python3 scripts/release-manifests.py check" in check["run"]
    # The image's name: ghcr.io/<the repository, lower case>, the name deploy/ gives it.
    assert 'image=ghcr.io/${REPOSITORY,,}' in check["run"] and check["env"]["REPOSITORY"] == "${{ github.repository }}"
    assert jobs()["image"]["needs"] == "prepare"


def test_the_image_is_built_for_both_platforms_pushed_and_signed_by_digest() -> None:
    (build,) = uses("image", "docker/build-push-action")
    settings = build["with"]
    assert settings["context"] == "."  # the checkout: .dockerignore and the Dockerfile as CI checks them
    assert set(settings["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert settings["push"] is True and settings["tags"] == "${{ env.IMAGE }}:${{ env.VERSION }}"
    assert settings["sbom"] is True and settings["provenance"] == "mode=max"
    assert "org.opencontainers.image.source=" in settings["labels"]
    for action in ("docker/setup-qemu-action", "docker/setup-buildx-action", "sigstore/cosign-installer"):
        assert len(uses("image", action)) == 1, action
    (login,) = uses("image", "docker/login-action")
    assert login["with"]["registry"] == "ghcr.io" and login["with"]["password"] == "${{ secrets.GITHUB_TOKEN }}"
    run = script("image")
    assert 'cosign sign --yes --recursive "${IMAGE}@${DIGEST}"' in run
    assert jobs()["image"]["outputs"]["digest"] == "${{ steps.build.outputs.digest }}"
    # What a user runs to verify, the workflow runs too, with the identity docs/image.md gives.
    assert "cosign verify --certificate-identity" in run and "https://token.actions.githubusercontent.com" in run


def test_an_sbom_per_platform_is_attested_and_attached() -> None:
    sboms = uses("image", "anchore/sbom-action")
    assert [s["with"]["image"] for s in sboms] == [f"${{{{ env.IMAGE }}}}@${{{{ steps.platforms.outputs.{arch} }}}}"
                                                  for arch in ("amd64", "arm64")]
    assert {s["with"]["format"] for s in sboms} == {"spdx-json"}
    run = script("image")
    for arch in ("amd64", "arm64"):
        predicate = f'"sbom/gitdns-${{VERSION}}-linux-{arch}.spdx.json"'
        assert f"cosign attest --yes --type spdxjson --predicate {predicate}" in run
    uploads = [s["with"]["name"] for job in jobs() for s in uses(job, "actions/upload-artifact")]
    assert sorted(uploads) == ["release-dist", "release-manifests", "release-sbom"]
    (download,) = uses("release", "actions/download-artifact")
    assert download["with"]["pattern"] == "release-*" and download["with"]["merge-multiple"] is True
    assert "gh release create \"$TAG\"" in script("release") and "--verify-tag" in script("release")


def test_deploy_is_rewritten_to_the_pushed_image_and_rendered() -> None:
    manifests = jobs()["manifests"]
    assert manifests["env"]["REF"] == ("${{ needs.prepare.outputs.image }}:${{ needs.prepare.outputs.version }}"
                                       "@${{ needs.image.outputs.digest }}")
    run = script("manifests")
    assert 'python3 scripts/release-manifests.py pin --render "$REF"' in run
    assert 'tar -czf "manifests/gitdns-deploy-${VERSION}.tar.gz" deploy' in run


def test_pypi_by_trusted_publishing_after_the_image() -> None:
    pypi = jobs()["pypi"]
    assert set(pypi["needs"]) == {"prepare", "image"}
    assert pypi["environment"]["name"] == "pypi"
    (publish,) = uses("pypi", "pypa/gh-action-pypi-publish")
    assert "with" not in publish, "no password, no token: the job's OIDC token is the credential"
    assert "python3 -m build --sdist --wheel --outdir dist ." in script("prepare")
    assert "twine check --strict dist/*" in script("prepare")
    assert set(jobs()["release"]["needs"]) == {"prepare", "image", "manifests", "pypi"}


def _ci_steps() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_ci_lints_the_workflows_and_dry_runs_the_release_before_the_tests() -> None:
    lines = _ci_steps()
    assert "actionlint .github/workflows/*.yml docs/examples/ci/github/*.yml" in lines
    dry_run = lines.index("bash scripts/release-dry-run.sh")
    tests = next(n for n, line in enumerate(lines) if line.startswith("unshare -n"))
    assert lines.index("bash scripts/install-test-deps.sh") < dry_run < tests


def test_the_ci_workflow_runs_ci_run_on_pull_requests() -> None:
    workflow = load(CI)
    assert "pull_request" in workflow["on"]
    assert workflow["permissions"] == {"contents": "read"}
    runs = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert any(r.endswith("bash .ci/run") for r in runs)


@pytest.mark.parametrize("needle", [
    "cosign verify", "--certificate-identity-regexp", "--certificate-oidc-issuer https://token.actions.githubusercontent.com",
    "cosign verify-attestation --type spdxjson", "gitdns-deploy-", "release-manifests.py", "release-dry-run.sh",
])
def test_docs_say_how_to_verify_a_release(needle: str) -> None:
    releases = (ROOT / "docs" / "image.md").read_text(encoding="utf-8").split("\n## Releases\n", 1)
    assert len(releases) == 2, "docs/image.md has a Releases section"
    assert needle in releases[1].split("\n## ", 1)[0]
