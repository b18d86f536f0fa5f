"""How much desired state a reader takes in, and the files it leaves unread.

Every reader of desired-state files (a git commit for the agent, a checkout for the CLI) sorts
the ``*.yaml``/``*.yml`` paths and, with one `ReadBudget`, reads a file only when

- it is a regular file or blob, not a symlink (a symlink is never followed, wherever it points),
- its size, known before reading it (``lstat``, the git object header), is at most
  ``file_bytes``, and
- the files read so far plus this one stay within ``commit_bytes``.

A file left unread stands in the files mapping as an `Unread`: a ``str`` whose text is not
YAML (so a reader that loses the type still fails to parse it) and whose attributes say why.
`gitdns.core.loader` turns it into a problem naming the file, its size and the cap.  The caps
are the operator's (agent and CLI settings), never the repository's; the defaults below
serve both.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB, MiB, GiB = 1024, 1024 * 1024, 1024 * 1024 * 1024
# Loading costs about 12 bytes of memory per byte of YAML for real desired state (the 100,000-host
# benchmark repository: 9.4 MB) and at most about 25 for any input (docs/spec.md, "Limits").
MAX_FILE_BYTES = 4 * MiB  # a file larger than this is not read: ~90,000 listeners in one Cluster
# nor a file that would bring the files read past this: 5 MiB of the worst shape takes an agent on
# Route53 with the Kubernetes Lease to 263 MiB, under the shipped 400 MiB memory limit
# (docs/benchmarks.md, Memory); raise both together
MAX_COMMIT_BYTES = 5 * MiB
_SETTING_HINT = "the caps are the operator's settings maxFileBytes and maxCommitBytes, not the repository's"
_UNITS = {"": 1, "b": 1, "k": KiB, "kb": KiB, "kib": KiB, "m": MiB, "mb": MiB, "mib": MiB, "g": GiB, "gb": GiB,
          "gib": GiB}


@dataclass(frozen=True, slots=True)
class ReadLimits:
    file_bytes: int = MAX_FILE_BYTES
    commit_bytes: int = MAX_COMMIT_BYTES

    def __post_init__(self) -> None:
        if self.file_bytes <= 0 or self.commit_bytes <= 0:
            raise ValueError(f"read limits must be positive (file {self.file_bytes}, commit {self.commit_bytes})")


DEFAULT_LIMITS = ReadLimits()


def parse_size(text: str | int) -> int:
    """``4194304``, ``4MiB``, ``512 KiB``, ``1g`` as bytes (units of 1024); ValueError else."""
    if isinstance(text, int) and not isinstance(text, bool):
        number, unit = str(text), ""
    else:
        raw = str(text).strip().lower()
        digits = len(raw) - len(raw.lstrip("0123456789"))
        number, unit = raw[:digits], raw[digits:].strip()
    if not number or unit not in _UNITS or int(number) <= 0:
        raise ValueError(f"{str(text)[:40]!r} is not a size (e.g. 4194304, 4MiB, 512KiB)")
    return int(number) * _UNITS[unit]


class Unread(str):
    """A file that was not read, in place of its text: ``message``, ``hint`` and ``code`` of
    the problem it is, and whether that problem holds every zone (its content is unknown)."""

    message: str
    hint: str
    code: str
    blocks_all: bool

    def __new__(cls, message: str, hint: str, code: str, *, blocks_all: bool) -> Unread:
        self = super().__new__(cls, f"\x00{code}: {message}")
        self.message, self.hint, self.code, self.blocks_all = message, hint, code, blocks_all
        return self


def size_text(size: int) -> str:
    """``8 MiB``, ``40.0 MiB (41943040 bytes)``, ``512 bytes``."""
    if size < MiB:
        return f"{size} bytes"
    whole = size % MiB == 0
    return f"{size // MiB} MiB" if whole else f"{size / MiB:.1f} MiB ({size} bytes)"


def symlink() -> Unread:
    """A symlink in the repository: never followed, whether it points inside or outside."""
    return Unread("the file is a symlink; symlinks are not followed", "commit the file itself, not a link to it",
                  "SymlinkRefused", blocks_all=False)


def not_regular() -> Unread:
    return Unread("not a regular file; it is not read", "commit a regular file", "NotARegularFile",
                  blocks_all=False)


def changed() -> Unread:
    return Unread("the file grew while it was read; it is not read", "validate again once it is written",
                  "FileChanged", blocks_all=True)


class ReadBudget:
    """The caps of one read of a repository (one commit, one checkout)."""

    def __init__(self, limits: ReadLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.used = 0

    def refuse(self, size: int) -> Unread | None:
        """Why a file of ``size`` bytes is not read, or None (then it counts as read)."""
        if size > self.limits.file_bytes:
            return Unread(
                f"the file is {size_text(size)}, over the cap of {size_text(self.limits.file_bytes)} per file; "
                "it is not read, and every zone is held until it is smaller",
                f"split it into smaller files; {_SETTING_HINT}", "FileTooLarge", blocks_all=True)
        if self.used + size > self.limits.commit_bytes:
            return Unread(
                f"the YAML files read before this one total {size_text(self.used)}; with this one "
                f"({size_text(size)}) they would pass the cap of {size_text(self.limits.commit_bytes)} per commit; "
                "it is not read, and every zone is held until the repository is smaller",
                _SETTING_HINT, "CommitTooLarge", blocks_all=True)
        self.used += size
        return None
