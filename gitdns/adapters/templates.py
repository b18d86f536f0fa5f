"""Read Jinja template sources from disk: the packaged defaults, optionally overridden.

The packaged templates live in ``gitdns/data/templates`` (in the source tree a symlink to
the repository's ``templates/``).  An operator may point at a directory of their own: a file
there with the same relative name (e.g. ``kuadrant/dnsrecord.yaml.j2``) replaces the
packaged one; other packaged templates stay available.  The sources go to
`gitdns.core.render.make_environment`, which never touches the disk.
"""

from __future__ import annotations

import logging
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from gitdns.errors import ConfigError

log = logging.getLogger(__name__)

PACKAGE = "gitdns"
TEMPLATES_DIR = ("data", "templates")


def load_template_sources(override: Path | None = None) -> dict[str, str]:
    """Every template as ``{posix relative name: text}``; ``override`` files win."""
    root = resources.files(PACKAGE).joinpath(*TEMPLATES_DIR)
    sources = dict(_walk(root, ""))
    if not sources:
        raise ConfigError(f"no packaged templates found under {root}")
    if override is not None:
        if not override.is_dir():
            raise ConfigError(f"template override {override} is not a directory")
        extra = dict(_walk(override, ""))
        log.info("load: templates=%d override=%s overridden=%d", len(sources), override, len(extra))
        sources.update(extra)
    return sources


def _walk(node: Traversable, prefix: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name.startswith(".") or child.name == "__pycache__":
            continue
        name = f"{prefix}{child.name}"
        if child.is_dir():
            out.extend(_walk(child, name + "/"))
        elif child.is_file():
            out.append((name, child.read_text(encoding="utf-8")))
    return out
