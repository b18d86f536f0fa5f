"""Reading a desired-state repository from disk (the I/O half of `gitdns.core.validate.check`).

    read_tree(root)   every *.yaml / *.yml below root as {relative posix path: text}, within
                      the caps of `gitdns.core.limits` (symlinks never followed)
    load_schemas()    the packaged JSON schemas, keyed by kind
    load_repo(root)   read + load + schema-check + validate, every problem with its line
    check_files(...)  `gitdns.core.validate.check` with Python's cyclic collector paused: what
                      every caller that loads a tree runs
"""

from __future__ import annotations

import errno
import gc
import json
import logging
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from gitdns.core.blobcache import ValidationCache
from gitdns.core.limits import DEFAULT_LIMITS, ReadBudget, ReadLimits, changed, not_regular, symlink
from gitdns.core.loader import LoadResult, ParseMemo
from gitdns.core.reach import Network
from gitdns.core.validate import check
from gitdns.errors import ConfigError

log = logging.getLogger(__name__)

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "data" / "schemas"
_SUFFIXES = (".yaml", ".yml")


def read_tree(root: Path, limits: ReadLimits = DEFAULT_LIMITS) -> dict[str, str]:
    """Every YAML file below ``root`` (hidden directories and files skipped), sorted by path.

    Read as the agent reads a commit (`gitdns.adapters.git.source`): a symlink is never
    followed (the directory walk does not enter linked directories, and a ``*.yaml`` link is
    an `Unread`, wherever it points), nor is anything but a regular file read; a file over
    ``limits`` is an `Unread` too, its size known from ``lstat`` before it is opened."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"desired-state directory {root} does not exist or is not a directory")
    found: dict[str, Path] = {}
    for directory, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        base = Path(directory)
        for name in (*dirs, *names):
            if not name.startswith(".") and name.endswith(_SUFFIXES):
                found[(base / name).relative_to(root).as_posix()] = base / name
    budget = ReadBudget(limits)
    files: dict[str, str] = {}
    for rel in sorted(found):
        text = _read(found[rel], budget)
        if text is not None:
            files[rel] = text
    return files


def _read(path: Path, budget: ReadBudget) -> str | None:
    """The text of one file, an `Unread` saying why not, or None for a directory."""
    try:
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode):
            return None
        if stat.S_ISLNK(info.st_mode):
            return symlink()
        if not stat.S_ISREG(info.st_mode):
            return not_regular()
        refused = budget.refuse(info.st_size)
        if refused is not None:
            return refused
        # no symlink swapped in since, no FIFO to block on, and never more than was counted
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # it became a symlink after lstat
            return symlink()
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return not_regular()
        data = handle.read(info.st_size + 1)
    if len(data) > info.st_size:
        return changed()  # it grew after it was counted: never read more than was
    return data.decode("utf-8", errors="replace")


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


def load_repo(root: Path, limits: ReadLimits = DEFAULT_LIMITS, probe_ranges: Sequence[Network] = ()) -> LoadResult:
    """Load and validate the desired repository at ``root`` (read within ``limits``; probes may
    reach ``probe_ranges``, `gitdns.core.validate.validate`)."""
    files = read_tree(root, limits)
    result = check_files(files, load_schemas(), probe_ranges=probe_ranges)
    log.debug("loaded: root=%s files=%d problems=%d", root, len(files), len(result.problems))
    return result


def check_files(files: Mapping[str, str], schemas: Mapping[str, Mapping[str, Any]],
                memo: ParseMemo | ValidationCache | None = None, probe_ranges: Sequence[Network] = (),
                blob_ids: Mapping[str, str] | None = None) -> LoadResult:
    """`gitdns.core.validate.check` of ``files`` with the cyclic collector paused
    (`collector_paused`): what the agent, the orchestrator and the commands run.  The pure
    check leaves the process's collector alone; the pause is process state, so it is set here."""
    with collector_paused():
        return check(files, schemas, memo, probe_ranges, blob_ids)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a tree loads and validates, then as it was.
    Everything a load makes lives to its end, yet the heap it grows (a dict per listener, a
    model object per host) set off full collections walking all of it: two of them were an
    eighth of a cold 10,000-host validate.  Nothing a load makes forms reference cycles;
    whatever other threads make meanwhile is collected once it runs again (the CLI's one-shot
    thresholds, `gitdns.cli.ONE_SHOT_GC`, are the same idea for a whole command)."""
    running = gc.isenabled()
    if running:
        gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
