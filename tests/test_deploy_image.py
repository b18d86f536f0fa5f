"""The image's build context: what .dockerignore lets into the Docker build, and that the
builder stage copies every file the package links to (gitdns/data/* are symlinks into the
repository).  The Dockerfile itself (stages, extras, programs, entrypoint) is tests/test_image.py's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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
