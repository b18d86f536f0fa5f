#!/usr/bin/env bash
# The release (.github/workflows/release.yml, docs/image.md "Releases") without Docker and without
# pushing anything: the steps of it that can run on any machine, as .ci/run's "release dry-run".
#   1. deploy/ names the placeholder image at pyproject.toml's version, as the release's first job
#      checks (scripts/release-manifests.py check);
#   2. the wheel and the sdist the release publishes (python -m build), twine check --strict;
#   3. a fresh venv with the image's install, from the built wheel: pip install --require-hashes
#      -r requirements.lock, then the wheel with --no-deps; pip check;
#   4. an SBOM of that venv (cyclonedx-py environment: CycloneDX JSON, checked against its schema),
#      which must list every distribution constraints.txt pins at that version, and gitdns at the
#      project's version depending on each of its runtime dependencies (its own and gitdns[all]'s);
#   5. the release's rewrite of deploy/, on a copy, with a stand-in image
#      (ghcr.io/release-dry-run/gitdns:<version>@sha256:<the sdist's sha256>): every reference
#      rewritten, every kustomization rendered with kubectl naming that image and no other gitdns.
# What the release does besides (build and push the image, sign it, its SBOMs and their
# attestations, PyPI, the GitHub release) needs a registry, an OIDC token or Docker: actionlint
# checks that workflow instead (.ci/run).
# Needs the package index (or pip's cache) and kubectl (the test extra). cyclonedx-py goes into a
# tools venv of its own: its schema validation brings jsonschema's format checkers (rfc3987-syntax,
# which compiles a grammar on import: a second on every gitdns start where it is installed).
#
#   scripts/release-dry-run.sh [--keep DIR]    --keep: leave the dist, the SBOM and deploy/'s copy in DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
keep=""
case "${1:-}" in
    "") ;;
    --keep) keep="${2:?usage: scripts/release-dry-run.sh [--keep DIR]}" ;;
    *) echo "usage: scripts/release-dry-run.sh [--keep DIR]" >&2; exit 2 ;;
esac

say() { printf 'release-dry-run: %s\n' "$*"; }
fail() { printf 'release-dry-run: %s\n' "$*" >&2; exit 1; }

for program in kubectl twine; do
    command -v "$program" >/dev/null 2>&1 || fail "$program is not on PATH (the test extra: scripts/install-test-deps.sh)"
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/gitdns-release-dry-run.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
version="$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"

# 1. deploy/ at the version a tag v<version> would release.
"$PYTHON" scripts/release-manifests.py check

# 2. The wheel and the sdist.
say "python -m build --sdist --wheel; twine check --strict"
"$PYTHON" -m build --sdist --wheel --outdir "$tmp/dist" . >"$tmp/build.log" 2>&1 \
    || { cat "$tmp/build.log" >&2; fail "python -m build failed"; }
twine check --strict "$tmp"/dist/*
wheels=("$tmp"/dist/gitdns-"$version"-*.whl)
sdists=("$tmp"/dist/gitdns-"$version".tar.gz)
[ -f "${wheels[0]}" ] && [ -f "${sdists[0]}" ] || fail "no gitdns-$version wheel and sdist in $(ls "$tmp/dist")"

# 3. The image's install from the lock, and the wheel the release publishes.
say "fresh venv: pip install --require-hashes -r requirements.lock, then the wheel --no-deps"
"$PYTHON" -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --require-hashes --only-binary :all: -r requirements.lock
"${pip[@]}" install -q --no-deps --no-index "${wheels[0]}"
"${pip[@]}" check

# 4. The SBOM of that environment, and what it must list.
say "cyclonedx-py environment (CycloneDX JSON, validated), from a tools venv"
"$PYTHON" -m venv "$tmp/tools"
"$tmp/tools/bin/python" -m pip install -q --disable-pip-version-check "cyclonedx-bom>=7.5" "cyclonedx-python-lib[validation]"
"$tmp/tools/bin/cyclonedx-py" environment --output-reproducible --of JSON --validate -o "$tmp/sbom.cdx.json" \
    "$tmp/venv/bin/python"
"$tmp/tools/bin/python" - "$tmp/sbom.cdx.json" constraints.txt pyproject.toml "$version" <<'PY'
import json
import re
import sys
import tomllib

from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.validation import make_schemabased_validator


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


path, constraints_path, pyproject_path, version = sys.argv[1:]
text = open(path, encoding="utf-8").read()
bom = json.loads(text)
if bom.get("bomFormat") != "CycloneDX":
    sys.exit(f"release-dry-run: {path} is not a CycloneDX BOM (bomFormat {bom.get('bomFormat')!r})")
schema = SchemaVersion.from_version(bom["specVersion"])
error = make_schemabased_validator(OutputFormat.JSON, schema).validate_str(text)
if error is not None:
    sys.exit(f"release-dry-run: the SBOM is not valid CycloneDX {bom['specVersion']}: {error}")

components = {}
for component in bom.get("components", []):
    # gitdns is installed from the wheel just built, a local file: it has no package URL yet.
    purl = component.get("purl", "")
    if not purl.startswith("pkg:pypi/") and norm(component["name"]) != "gitdns":
        sys.exit(f"release-dry-run: component {component.get('name')} has no pypi purl ({purl!r})")
    components[norm(component["name"])] = component
wanted = {}
for raw in open(constraints_path, encoding="utf-8"):
    line = raw.split("#", 1)[0].strip()
    if line:
        name, _, pinned = line.partition("==")
        wanted[norm(name)] = pinned
wanted["gitdns"] = version


def purl_of(component):
    """(normalized name, version) of a pkg:pypi/NAME@VERSION[?qualifiers] package URL."""
    match = re.fullmatch(r"pkg:pypi/([^@?#]+)@([^?#]+)(?:[?#].*)?", component.get("purl", ""))
    return (norm(match[1]), match[2]) if match else None


missing = [f"{n}=={v}" for n, v in sorted(wanted.items())
           if n not in components or components[n]["version"] != v
           or (n != "gitdns" and purl_of(components[n]) != (n, v))]
if missing:
    sys.exit(f"release-dry-run: the SBOM lacks (or names at another version): {', '.join(missing)}")

project = tomllib.load(open(pyproject_path, "rb"))["project"]
direct = {norm(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0])
          for r in project["dependencies"] + project["optional-dependencies"]["all"]}
refs = {c["bom-ref"]: norm(c["name"]) for c in components.values()}
graph = {refs.get(d["ref"]): {refs.get(r) for r in d.get("dependsOn", [])} for d in bom.get("dependencies", [])}
lacking = sorted(direct - graph.get("gitdns", set()))
if lacking:
    sys.exit(f"release-dry-run: the SBOM does not show gitdns depending on {', '.join(lacking)}")
print(f"release-dry-run: SBOM valid CycloneDX {bom['specVersion']}, {len(components)} components: gitdns {version}, "
      f"the {len(wanted) - 1} pins of constraints.txt at their versions, gitdns's {len(direct)} direct dependencies")
PY

# 5. The release's rewrite of deploy/, on a copy, with a stand-in image.
digest="sha256:$(sha256sum "${sdists[0]}" | cut -d' ' -f1)"
ref="ghcr.io/release-dry-run/gitdns:${version}@${digest}"
mkdir "$tmp/repo"
cp -R deploy pyproject.toml "$tmp/repo/"
say "deploy/ pinned to a stand-in release image, every kustomization rendered"
"$PYTHON" scripts/release-manifests.py pin --root "$tmp/repo" --render "$ref"
if grep -rn "ghcr.io/example/gitdns" "$tmp/repo/deploy" --include='*.yaml'; then
    fail "the placeholder image is left in the rewritten deploy/ (above)"
fi

if [ -n "$keep" ]; then
    mkdir -p "$keep"
    cp -R "$tmp/dist" "$tmp/sbom.cdx.json" "$keep/"
    cp -R "$tmp/repo/deploy" "$keep/deploy"
    say "kept in $keep: dist/, sbom.cdx.json, deploy/"
fi
say "passed"
