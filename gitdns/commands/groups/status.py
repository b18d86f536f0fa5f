"""What the clusters' status branches say, for the groups verbs and `failover simulate`.

Every agent publishes ``health.yaml`` and ``summary.yaml`` on ``gitdns-status/<cluster-id>``
(docs/agent.md).  A failover preview runs each cluster's pipeline with the health its agent
last published, so it must read those branches where they are:

    fleet_status(root, url, auth) -> FleetStatus   origin's ``refs/heads/gitdns-status/*`` with
                                                   one fetch (groups add|remove|set|reconcile|get);
                                                   without origin, or when origin cannot be read,
                                                   the repository's own refs (below)
    local_status(root) -> FleetStatus              the repository's local ``gitdns-status/*``
                                                   branches and its remote-tracking
                                                   ``refs/remotes/<remote>/gitdns-status/*``
                                                   (failover simulate: no fetch)
    published_health(state, zone, status) -> (Published, notes)

A cluster with no branch keeps the preview's own sentence ("has published no status").  When
the branches could not be read at all, no cluster is said to have published nothing: one note
says what could not be read and why.  Status branches are written by anyone who can push to
them: a file larger than `MAX_FILE`, or one that does not parse, is read as saying nothing.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitdns.adapters.git.auth import GitAuth, check_url
from gitdns.adapters.status.cache import run_git
from gitdns.adapters.status.refs import PREFIX, cluster_of
from gitdns.core import builder
from gitdns.core.model import DesiredState, Zone
from gitdns.core.status.doc import StatusTree
from gitdns.errors import GitdnsError
from gitdns.reconcile.preview import Published
from gitdns.reconcile.run import applied_of, unhealthy_of

log = logging.getLogger(__name__)

FILES = ("health.yaml", "summary.yaml")
MAX_FILE = 1 << 20  # bytes: a status file larger than this is not read
LOCAL_TIMEOUT = 15.0
REMOTE_TIMEOUT = 15.0
FETCH_HINT = "git fetch origin '+refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*'"


@dataclass(frozen=True, slots=True)
class FleetStatus:
    """The status branches as one read found them: cluster id -> the tip of its branch."""

    trees: Mapping[str, StatusTree] = field(default_factory=dict)
    where: str = ""  # where they were read: "origin", "this repository's gitdns-status/* refs"
    error: str = ""  # why they (or origin's, see ``fallback``) could not be read; "" when they were
    fetched: bool = False  # read from origin now (else from refs the repository holds, maybe behind)
    fallback: bool = False  # origin could not be read (``error``): ``trees`` are the repository's own


NOT_READ = FleetStatus(where="nowhere", error="not asked for")


# -- the repository's own refs ---------------------------------------------------------------


def _git(root: Path, args: Sequence[str], stdin: bytes | None = None) -> bytes:
    out = run_git(list(args), cwd=root, timeout=LOCAL_TIMEOUT, stdin=stdin)
    if out.rc != 0:
        raise GitdnsError(f"git {args[0]} failed: {out.stderr.strip()[-300:] or f'exit {out.rc}'}")
    return out.stdout


def _tips(root: Path) -> dict[str, tuple[str, int]]:
    """Each cluster's status commit: the newest (by commit time) of its local branch and its
    remote-tracking refs; a local branch wins a tie."""
    listing = _git(root, ["for-each-ref", "--format=%(objecttype) %(objectname) %(committerdate:unix) %(refname)",
                          "refs/heads/" + PREFIX, "refs/remotes/"]).decode("utf-8", "replace")
    found: dict[str, tuple[int, bool, str]] = {}
    for line in listing.splitlines():
        kind, sha, when, ref = [*line.split(" ", 3), "", "", ""][:4]
        cluster = cluster_of(ref)
        if cluster is None or kind != "commit":
            continue
        rank = (int(when) if when.isdigit() else 0, ref.startswith("refs/heads/"), sha)
        if cluster not in found or rank[:2] > found[cluster][:2]:
            found[cluster] = rank
    return {cluster: (sha, when) for cluster, (when, _, sha) in found.items()}


def _batch(root: Path, specs: Sequence[str], check: bool) -> dict[str, tuple[str, bytes]]:
    """``git cat-file --batch(-check)`` of ``specs``: spec -> (type, content or b"<size>")."""
    raw = _git(root, ["cat-file", "--batch-check" if check else "--batch"],
               stdin="".join(f"{s}\n" for s in specs).encode())
    out: dict[str, tuple[str, bytes]] = {}
    pos = 0
    for spec in specs:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].decode("utf-8", "replace").split()
        pos = end + 1
        if len(header) < 3 or header[-1] == "missing":
            continue
        size = int(header[2])
        if check:
            out[spec] = (header[1], header[2].encode())
        else:
            out[spec] = (header[1], raw[pos:pos + size])
            pos += size + 1
    return out


def local_status(root: Path) -> FleetStatus:
    """The status branches the repository ``root`` lies in already holds (no fetch)."""
    where = "this repository's gitdns-status/* branches and refs/remotes/*/gitdns-status/*"
    try:
        _git(root, ["rev-parse", "--git-dir"])
    except (GitdnsError, OSError) as exc:
        why = f"{root} is not in a git repository" if "not a git repository" in str(exc) else str(exc)
        return FleetStatus(where=where, error=why)
    try:
        tips = _tips(root)
        specs = [f"{sha}:{name}" for sha, _ in tips.values() for name in FILES]
        sizes = _batch(root, specs, check=True) if specs else {}
        wanted = [s for s, (kind, size) in sizes.items() if kind == "blob" and int(size) <= MAX_FILE]
        blobs = _batch(root, wanted, check=False) if wanted else {}
    except (GitdnsError, OSError, ValueError) as exc:
        return FleetStatus(where=where, error=f"reading them failed: {exc}")
    trees = {cluster: StatusTree(sha, {name: blobs[f"{sha}:{name}"][1].decode("utf-8", "replace")
                                       for name in FILES if f"{sha}:{name}" in blobs}, "", when)
             for cluster, (sha, when) in sorted(tips.items())}
    return FleetStatus(trees, where)


# -- origin ------------------------------------------------------------------------------------


def origin_status(url: str, auth: GitAuth | None = None) -> FleetStatus:
    """Every status branch on ``url`` (origin), with one fetch into a throw-away cache."""
    from gitdns.adapters.status.branch import read_all

    try:
        check_url(url)  # origin's URL would go on git's command line: no token in it
        with tempfile.TemporaryDirectory(prefix="gitdns-groups-") as tmp:
            trees = read_all(url, workdir=Path(tmp), timeout=REMOTE_TIMEOUT, auth=auth)
    except (GitdnsError, OSError) as exc:
        log.debug("status branches not read: %s", exc)
        reason = f" (reason: {exc.reason})" if isinstance(exc, GitdnsError) else ""
        return FleetStatus(where="origin", error=f"{exc}{reason}")
    return FleetStatus(trees, "origin (fetched now)", fetched=True)


def fleet_status(root: Path, url: str | None, auth: GitAuth | None = None) -> FleetStatus:
    """Origin's status branches when the work tree has an origin; else, or when origin cannot
    be read, the repository's own (``fallback``, with origin's error)."""
    if not url:
        return local_status(root)
    remote = origin_status(url, auth)
    if not remote.error:
        return remote
    local = local_status(root)
    if local.error:
        return FleetStatus(where="origin", error=f"origin: {remote.error}; the repository's own: {local.error}")
    return FleetStatus(local.trees, local.where, remote.error, fallback=True)


# -- what they say -------------------------------------------------------------------------------


def _checked(state: DesiredState, zone: Zone) -> list[str]:
    """Ids of the clusters serving ``zone`` that publish a health-checked target in it."""
    from gitdns.core.health.filter import health_targets

    return [c.id for c in state.clusters if zone in builder.zones_for_cluster(state, c)
            and health_targets(builder.build_hosts(state, c, zone))]


def published_health(state: DesiredState, zone: Zone, status: FleetStatus) -> tuple[Published, list[str]]:
    """The health each cluster published (as `gitdns plan` reads it, fail open included), and
    the notes a reviewer needs about where it came from.  A cluster missing from ``status``
    stays unknown (the preview says it "has published no status") only when the branches were
    read; otherwise it is taken as healthy and a note says why nothing is known of it."""
    from gitdns.core.health.filter import every_target_down, fail_open_id, host_targets

    unhealthy: dict[str, frozenset[str]] = {}
    applied: dict[str, str] = {}
    for cluster in state.clusters:
        tree = status.trees.get(cluster.id)
        if tree is None:
            continue
        unhealthy[cluster.id] = unhealthy_of(tree.files.get("health.yaml", ""))
        sha = applied_of(tree.files.get("summary.yaml", ""))
        if sha:
            applied[cluster.id] = sha
    everyone: frozenset[str] = frozenset().union(*unhealthy.values())
    for cluster in state.clusters:  # a host whose every target is reported unhealthy fails open
        if cluster.id in unhealthy:
            down = every_target_down(host_targets(state, cluster), everyone)
            unhealthy[cluster.id] |= {fail_open_id(host) for host in down}
    names = {c.id: c.name for c in state.clusters}
    missing = [cid for cid in _checked(state, zone) if cid not in status.trees]
    notes: list[str] = []
    if status.error and not status.fallback:
        if _checked(state, zone):
            notes.append(f"health: the clusters' status branches could not be read ({status.error}): nothing is "
                         "known of their health, so every target is taken as healthy")
        unhealthy.update({cid: frozenset() for cid in missing})
    elif status.fallback:
        found = "" if not missing else (
            f"; {', '.join(names[c] for c in missing)} not found there either: taken as healthy")
        notes.append(f"health: origin's status branches could not be read ({status.error}): read from "
                     f"{status.where}, which may be behind origin{found}")
        unhealthy.update({cid: frozenset() for cid in missing})
    elif missing and not status.fetched:
        notes.append(f"health: read from {status.where} (nothing is fetched): none for "
                     f"{', '.join(names[c] for c in missing)}; if their agents pushed them to origin, fetch them "
                     f"first: {FETCH_HINT}")
    return Published(unhealthy, applied), notes
