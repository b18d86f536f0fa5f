"""Crash-safe file replacement, shared by the providers and the adapters (both do file I/O;
the layer contracts keep them from importing each other, so this sits beside errors.py)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

TEMP_MARK = ".tmp-"  # temporary files are ``.<name>.tmp-<pid>-<random>`` beside their target


def temp_glob(path: Path) -> str:
    """A glob for the temporary files a crashed writer of ``path`` may have left."""
    return f".{path.name}{TEMP_MARK}*"


def remove_stray_temps(directory: Path, pattern: str) -> list[Path]:
    """Remove the temporary files matching ``pattern`` in ``directory`` that a crashed writer
    left (call it only while holding the lock every writer of those files takes); returns them."""
    removed = []
    for stray in directory.glob(pattern):
        with contextlib.suppress(OSError):
            stray.unlink()
            removed.append(stray)
    return removed


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data``: a temporary file beside it, fsync, (chmod), rename,
    fsync of the directory.  A crash at any point leaves the old or the new file, never a mix."""
    tmp = path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_if_changed(path: Path, data: bytes, *, mode: int | None = None) -> bool:
    """`write_atomic` unless ``path`` already holds exactly ``data``; True when written."""
    with contextlib.suppress(FileNotFoundError):
        if path.read_bytes() == data:
            return False
    write_atomic(path, data, mode=mode)
    return True
