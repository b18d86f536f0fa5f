"""The status-branch side of the history walk (`gitdns.commands.history.walk.Walk.status`): every
``gitdns-status/*`` branch's commits that changed what history reads, with what each says.

    read_status(run, git, facts_file, refs, groups=False) -> list[StatusCommit]   oldest first per branch

One ``git log --raw`` over every status branch lists the commits that changed ``summary.yaml``,
``health.yaml`` or a zone document (``zones/<zone>.yaml``), and with ``groups`` (`gitdns groups
log`) ``groups.yaml`` too; what each blob says is read once (`gitdns.commands.history.facts`,
kept by blob id).  Each row carries the blob ids of its files, so a caller can read a
document whole when a fact is not enough (the health gate of `gitdns.commands.groups.log`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitdns.adapters.git.cache import GitCache
from gitdns.commands.history.facts import NO_FACTS, read_facts
from gitdns.commands.status.log import NOT_HELD, ZoneState
from gitdns.core.groups.serials import Applied as GroupsApplied

STATUS_REFS = "refs/gitdns-status/"
_SEP, _END = "\x1f", "\x1e"
_READ = ("summary.yaml", "health.yaml")
GROUPS_FILE = "groups.yaml"


@dataclass(frozen=True, slots=True)
class StatusCommit:
    """One status-branch commit that changed summary.yaml, health.yaml or a zone document (and
    groups.yaml, when asked), as read back."""

    cluster_id: str
    sha: str
    time: int
    cluster: str  # summary.yaml "cluster" (metadata.name), else the id
    applied: str  # summary.yaml appliedRevision ("" when none)
    unhealthy: frozenset[str]  # health.yaml target ids ("host|address") in state unhealthy
    health_known: bool  # health.yaml present in this commit
    zones: Mapping[str, ZoneState] = field(default_factory=dict)  # zones/<zone>.yaml: held or not, and why
    # groups.yaml (read when asked): zone domain -> the serial and groups the agent applied there
    groups: Mapping[str, GroupsApplied] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)  # the files read: path -> blob id


def _wanted(name: str, groups: bool) -> bool:
    return name in _READ or (groups and name == GROUPS_FILE) or (name.startswith("zones/") and name.endswith(".yaml"))


def read_status(run: Callable[[list[str]], str], git: GitCache, facts_file: Path, refs: Sequence[str],
                groups: bool = False) -> list[StatusCommit]:
    """The rows of ``refs`` (every status branch), oldest first per branch; ``run`` runs one git
    command in the cache and returns its output."""
    if not refs:
        return []
    paths = ["summary.yaml", "health.yaml", "zones/", *([GROUPS_FILE] if groups else [])]
    out = run(["log", "--source", "--root", "--raw", "--no-abbrev", "--reverse", "--topo-order",
               f"--format={_END}%H{_SEP}%S{_SEP}%ct", *refs, "--", *paths])
    last: dict[str, dict[str, str]] = {}  # cluster id -> {file: blob}
    steps: list[tuple[str, str, str, dict[str, str]]] = []
    for entry in out.split(_END):
        if not entry.strip():
            continue
        head, *raw = entry.strip("\n").split("\n")
        sha, source, ctime = head.split(_SEP)
        cid = source[len(STATUS_REFS):] if source.startswith(STATUS_REFS) else source
        blobs = last.setdefault(cid, {})
        for line in raw:
            meta, _, name = line.partition("\t")
            fields = meta.split()
            if len(fields) >= 5 and _wanted(name, groups):
                if fields[4].startswith("D"):
                    blobs.pop(name, None)
                else:
                    blobs[name] = fields[3]
        steps.append((sha, cid, ctime, dict(blobs)))
    zone_blobs = {blob for _, _, _, blobs in steps for name, blob in blobs.items() if name.startswith("zones/")}
    group_blobs = {blobs[GROUPS_FILE] for _, _, _, blobs in steps if GROUPS_FILE in blobs}
    facts = read_facts(git, facts_file, [blob for _, _, _, blobs in steps for blob in blobs.values()], zone_blobs,
                       group_blobs)
    found: list[StatusCommit] = []
    for sha, cid, ctime, blobs in steps:
        summary = facts.get(blobs.get("summary.yaml", ""), NO_FACTS)
        health = facts.get(blobs.get("health.yaml", ""), NO_FACTS)
        zones = {}
        for name, blob in blobs.items():
            if name.startswith("zones/"):
                doc = facts.get(blob, NO_FACTS)
                zones[name[len("zones/"):-len(".yaml")]] = \
                    ZoneState(True, doc.applied or None, doc.reason) if doc.held else NOT_HELD
        applied_groups = dict(facts.get(blobs.get(GROUPS_FILE, ""), NO_FACTS).groups)
        found.append(StatusCommit(cid, sha, int(ctime), summary.cluster or cid, summary.applied,
                                  frozenset(health.unhealthy), "health.yaml" in blobs, zones, applied_groups,
                                  blobs))
    return found
