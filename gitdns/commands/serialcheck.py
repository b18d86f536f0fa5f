"""`gitdns validate`'s warning that a committed active-groups serial is at or below one the
clusters already applied, judged from git alone: the ``groups.yaml`` of every status branch the
work tree's repository holds (local or remote-tracking; nothing is fetched), against the
ActiveGroups documents of the desired state (`gitdns.core.groups.serials`).

    serial_warnings(desired) -> [Problem]   [] outside a git repository, without status
                                             branches, or without ActiveGroups documents

A status file that cannot be read or parsed is left out (logged at debug): status branches are
written by anyone who can push to them, and a warning is never worth failing `validate` for.
"""

from __future__ import annotations

import logging
from pathlib import Path

from gitdns.core.desired import Desired
from gitdns.core.groups.serials import Report, applied_groups
from gitdns.core.groups.serials import serial_warnings as compare
from gitdns.core.locate import refine_lines
from gitdns.core.problems import Problem
from gitdns.core.status.doc import load

log = logging.getLogger(__name__)

GROUPS_FILE = "groups.yaml"
MAX_FILE = 1 << 20  # a desired file larger than this keeps its document's first line


def serial_warnings(desired: Desired) -> list[Problem]:
    if not desired.state.active_groups:
        return []
    from gitdns.adapters.status.refs import status_file

    reports: list[Report] = []
    for found in status_file(Path(desired.root), GROUPS_FILE):
        if found.text is None:
            log.debug("skipped: check=applied-serials ref=%s reason=%s", found.ref, found.why)
            continue
        try:
            doc = load(found.text)
        except ValueError as exc:  # StatusDocError, and an integer too long to convert
            log.debug("skipped: check=applied-serials ref=%s error=%s", found.ref, str(exc)[:200])
            continue
        reports.append(Report(found.cluster_id, found.ref, applied_groups(doc)))
    problems = compare(desired.state, reports)
    return refine_lines(problems, _files(Path(desired.root), {p.file for p in problems}))


def _files(root: Path, names: set[str]) -> dict[str, str]:
    """The texts of the files the warnings name (read again only to find the ``spec.serial`` line;
    a file that cannot be read keeps its document's first line)."""
    out: dict[str, str] = {}
    for name in sorted(names):
        path = root / name
        try:
            if path.is_symlink() or path.stat().st_size > MAX_FILE:
                continue
            out[name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return out
