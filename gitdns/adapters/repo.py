"""Reading a desired-state repository from disk (the I/O half of `gitdns.core.validate.check`).

    read_tree(root)   every *.yaml / *.yml below root as {relative posix path: text}
    load_schemas()    the packaged JSON schemas, keyed by kind
    load_repo(root)   read + load + schema-check + validate, every problem with its line
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

from gitdns.core.loader import LoadResult
from gitdns.core.validate import check
from gitdns.errors import ConfigError

log = logging.getLogger(__name__)

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "data" / "schemas"
_SUFFIXES = (".yaml", ".yml")


def read_tree(root: Path) -> dict[str, str]:
    """Every YAML file below ``root`` (hidden directories and files skipped), sorted by path."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"desired-state directory {root} does not exist or is not a directory")
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or path.suffix not in _SUFFIXES:
            continue
        if path.is_file():
            files[rel.as_posix()] = path.read_text(encoding="utf-8", errors="replace")
    return files


@lru_cache(maxsize=1)
def _schemas() -> tuple[tuple[str, Any], ...]:
    out = []
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        out.append((schema["properties"]["kind"]["const"], schema))
    if not out:
        raise ConfigError(f"no JSON schemas found in {SCHEMA_DIR}")
    return tuple(out)


def load_schemas() -> dict[str, dict[str, Any]]:
    """The JSON schema of every kind, keyed by kind (read once per process)."""
    return {kind: schema for kind, schema in _schemas()}


def load_repo(root: Path) -> LoadResult:
    """Load and validate the desired repository at ``root``."""
    files = read_tree(root)
    result = check(files, load_schemas())
    log.debug("loaded: root=%s files=%d problems=%d", root, len(files), len(result.problems))
    return result
