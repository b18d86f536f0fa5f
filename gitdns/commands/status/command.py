"""`gitdns status`: the fleet's status branches, aggregated, with each cluster's history.

    status(repo, cluster=, branch=, fmt=, state_dir=, auth=, revision=) -> Result   the command
    fleet_status(...) -> dict          statusview.aggregate + lag, history and retired fields
    with_lag(agg, head, branch) -> dict                pure: adds behindHead / desiredHead
    lag_text(agg) -> str                               the lines added below statusview.to_text
    revision_status(...) -> dict                       ``--revision``: one commit across the fleet

Every ``gitdns-status/*`` branch of ``repo`` and the desired branch are fetched into one bare
cache, ``state_dir/status`` (a temporary directory, removed afterwards, without ``state_dir``),
through one git transport, ``auth`` (`gitdns.commands.git.remote`).  When ``repo`` is a local
repository its refs are chosen by `gitdns.adapters.status.refs.local_refs` (a clone has the status
branches only as ``refs/remotes/origin/gitdns-status/*``, and its desired branch is
``origin/<branch>``), and the text says which were read when some were remote-tracking ones.
No status branch at all is an error that says how to get them.  A desired branch the repository
does not have is an error naming ``--branch`` (unless the repository holds only status branches:
status kept apart from the desired state); one that cannot be read for another reason (the
repository unreachable) leaves the lag and the retired clusters out, and stderr says why.

Per cluster (docs/cli.md, "gitdns status"):
- ``appliedAt``: the time of the first status commit of the run ending at the tip whose
  ``appliedRevision`` is the current one (when the agent reported applying it);
- ``lag``: ``commits`` the desired head has that ``appliedRevision`` has not, ``since`` the
  committer time of the oldest of them, ``seconds`` from then to now;
- ``lastError``: the most recent status commit whose summary was not Ready (its Ready reason and
  message; ``current`` when it is the tip);
- held zones: a zone document saying ``held: true`` (the revision does not validate for the
  zone; its last good one stays) means the cluster has not applied the revision there: the
  text lists them (``HELD``) and never says every cluster has applied the head while one is;
- ``retired``: git's head names no Cluster with this id or name; ``removedFromGit`` is the last
  desired commit (first parents) that changed the id's occurrences (the commit that removed the
  Cluster), ``recordsRemoved`` the first status commit whose ``appliedRevision`` contains that
  commit (the agent applied the removal, which leaves its zones); None: its agent never did
  (`gitdns prune-owner`).  A retired cluster counts neither for readiness nor for the policies.
- ``unpublished``: a Cluster the desired head names with no status branch: its agent never
  published, so nothing says its records are served; it counts as not ready (``pending`` for
  ``--revision``).
Lagging the head does not make the fleet not-ready: an agent picks a new head up within its
poll interval; readiness is what the agents report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gitdns.adapters.git.auth import GitAuth, check_url
from gitdns.adapters.repo import check_files, load_schemas
from gitdns.adapters.status.branch import READ_CACHE, TRACK, read_all
from gitdns.adapters.status.cache import StatusCache, fetch_error, run_remote, sanitize
from gitdns.adapters.status.objects import read_trees
from gitdns.adapters.status.refs import PREFIX, LocalRefs, local_refs
from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.commands.git.read import check_branch, no_status_branches, repo_url, scratch_dir
from gitdns.commands.status.log import DesiredRead, Entry, FleetLog
from gitdns.commands.status.revision import iso, revision_status, revision_text, short_revision
from gitdns.commands.status.view import aggregate, cluster_names, to_json, to_text
from gitdns.core.builder import build_hosts
from gitdns.core.status.doc import StatusTree
from gitdns.core.text import lines as text_lines
from gitdns.errors import ConfigError

log = logging.getLogger(__name__)


def status(repo: str, *, cluster: str | None = None, branch: str = "main", fmt: str = "text",
           state_dir: str | Path | None = None, auth: GitAuth | None = None,
           revision: str | None = None) -> Result:
    """``gitdns status``: exit 0 when every cluster and policy is Ready (with ``revision``: when
    every cluster git names has applied it), else 1."""
    agg = fleet_status(repo, cluster=cluster, branch=branch, state_dir=state_dir, auth=auth, revision=revision)
    source = "" if not agg["source"].get("tracking") else "\n" + agg["source"]["read"] + "\n"
    if revision is not None:
        rev = agg["revision"]
        done = bool(rev["clusters"]) and all(v["state"] in ("applied", "retired") for v in rev["clusters"].values())
        result = Result(EXIT_OK if done else EXIT_ERROR, err=list(agg["warnings"]))
        result.out.append(to_json({**rev, "source": agg["source"], "warnings": agg["warnings"]}) if fmt == "json"
                          else revision_text(rev) + source)
        return result
    result = Result(EXIT_OK if agg["ready"] else EXIT_ERROR, err=list(agg["warnings"]))
    result.out.append(to_json(agg) if fmt == "json" else to_text(agg) + lag_text(agg) + source)
    return result


def fleet_status(repo: str, *, cluster: str | None = None, branch: str = "main",
                 state_dir: str | Path | None = None, timeout: float = 30.0,
                 auth: GitAuth | None = None, revision: str | None = None,
                 now: float | None = None) -> dict[str, Any]:
    check_branch(branch)
    url = repo_url(repo)
    check_url(url)  # no password in --repo: the token comes from --token-file or --token-env
    auth = auth or GitAuth()
    local = local_refs(url, branch, timeout=timeout)  # None: a URL, fetched as it is
    where = sanitize(url)
    warnings = list(local.notes) if local else []
    with scratch_dir(state_dir, "status") as workdir:
        trees = read_branches(url, workdir / "branches", timeout, auth, local)
        if not trees:
            raise ConfigError(no_status_branches(where, local))
        flog = FleetLog(StatusCache(workdir / "branches" / READ_CACHE, timeout))
        read = (flog.fetch_desired(str(local.path), branch, auth, source=local.desired) if local and local.desired
                else DesiredRead(None, missing=True) if local else flog.fetch_desired(url, branch, auth))
        head = read.head
        if head is None:
            warnings.append(desired_problem(read, branch, where, local, flog, url, auth))
            if revision is not None:
                raise ConfigError(f"--revision needs the desired branch {branch}: it cannot be read from "
                                  f"{where} (--branch names it)")
        known = flog.clusters_at(head) if head else None
        if cluster is not None:
            cluster = check_cluster(cluster, trees, flog.cluster_docs(head) if head else [], known)
        agg = with_lag(aggregate(trees, cluster, known), head, branch)
        if head is not None:
            waiting = [w for w in unpublished(trees, flog.cluster_docs(head))
                       if cluster is None or cluster in (w["id"], w["cluster"])]
            with_unpublished(agg, waiting, served_by(flog.desired_files(head), waiting) if waiting else {})
        when = time.time() if now is None else now
        for cid, c in agg["clusters"].items():
            with_history(c, flog.entries(cid), flog, head, when)
        if revision is not None:
            assert head is not None
            found = flog.resolve(revision, branch, aliases=_aliases(branch, local),
                                 fallback=local.resolve if local else _tags_then(flog, url, auth))
            if found is None and local is not None and (elsewhere := local.resolve(revision)):
                raise ConfigError(f"--revision {revision} ({elsewhere[:7]}): not on the desired branch {branch}: "
                                  f"no agent applies it until it is merged into {branch}")
            agg["revision"] = revision_status(agg, flog, revision, head, branch, found=found, where=where)
    agg["warnings"] = warnings
    agg["source"] = (local.source() | {"tracking": local.tracking, "read": local.describe()} if local
                     else {"repository": where, "local": False, "tracking": False})
    return agg


def read_branches(url: str, workdir: Path, timeout: float, auth: GitAuth,
                  local: LocalRefs | None) -> dict[str, StatusTree]:
    """Every status branch: fetched from ``url`` (``refs/heads/gitdns-status/*``), or from a
    local repository the refs `local_refs` chose, each to its cluster id, with one fetch."""
    if local is None:
        return read_all(url, workdir=workdir, timeout=timeout, auth=auth)
    cache = StatusCache(workdir / READ_CACHE, timeout)
    with cache.lock:
        cache.ensure(sweep=True)
        stale = cache.local(["for-each-ref", "--format=%(refname)", TRACK]).decode().split()
        if stale:  # a kept cache's tips of an earlier run: only this run's refs are read
            cache.local(["update-ref", "--stdin"], stdin="".join(f"delete {ref}\n" for ref in stale).encode())
        specs = local.status_refspecs(TRACK)
        if specs:
            out = run_remote(cache, ["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--", str(local.path),
                                     *specs], auth)
            if out.rc != 0:
                raise fetch_error(cache, url, out)
        listing = cache.local(["for-each-ref", "--format=%(objectname) %(refname)", TRACK]).decode()
        tips = {ref[len(TRACK):]: sha for sha, ref in (line.split(" ", 1) for line in listing.splitlines())}
        return read_trees(cache, tips)


def desired_problem(read: DesiredRead, branch: str, where: str, local: LocalRefs | None, flog: FleetLog,
                    url: str, auth: GitAuth) -> str:
    """Why the desired branch is not shown (a warning), or a ConfigError when the repository
    has other branches but not this one (``--branch`` is wrong)."""
    if not read.missing:
        return (f"the desired branch {branch} could not be read from {where} ({read.error}): the lag and the "
                "retired clusters are not shown")
    others = list(local.branches) if local else _branches(flog, url, auth)
    if others:
        tried = (f"neither refs/heads/{branch} nor refs/remotes/{local.remote}/{branch}; " if local and local.remote
                 else "")
        listed = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        raise ConfigError(f"--branch {branch}: branch {branch} does not exist on {where} ({tried}its branches: "
                          f"{listed})")
    return (f"the desired branch {branch} is not in {where}, which holds only {PREFIX}* branches (status kept apart "
            "from the desired state): the lag and the retired clusters are not shown")


def _branches(flog: FleetLog, url: str, auth: GitAuth) -> list[str]:
    """The branches of ``url`` that are not status branches (when it cannot be listed: ``["?"]``,
    taken as having some)."""
    out = run_remote(flog.cache, ["ls-remote", "--heads", "--", url], auth)
    if out.rc != 0:
        return ["?"]
    refs = [line.partition("\t")[2] for line in out.stdout.decode("utf-8", "replace").splitlines()]
    return sorted(ref.removeprefix("refs/heads/") for ref in refs if ref and not ref.startswith(f"refs/heads/{PREFIX}"))


def check_cluster(cluster: str, trees: Mapping[str, StatusTree], docs: Sequence[tuple[str | None, str | None]],
                  known: set[str] | None) -> str:
    """What ``--cluster`` names: a cluster with a status branch or one git names (by id or name;
    an id may be shortened as the ID column shows it, when only one id starts so), else a
    ConfigError listing them."""
    names = cluster_names(trees)
    ids = set(names) | {cid for _, cid in docs if cid}
    if cluster not in ids and cluster not in set(names.values()) | {n for n, _ in docs if n}:
        longer = sorted(cid for cid in ids if len(cluster) >= 8 and cid.startswith(cluster))
        if len(longer) == 1:
            return longer[0]
    if any(cluster in (cid, name) for cid, name in names.items()) or any(cluster in doc for doc in docs):
        return cluster
    listed = [f"{name} ({cid}{', retired' if known is not None and cid not in known and name not in known else ''})"
              for cid, name in sorted(names.items(), key=lambda kv: (kv[1], kv[0]))]
    published = set(names) | set(names.values())
    listed += [f"{name or cid} ({cid or 'no spec.id'}, no status branch yet)"
               for name, cid in sorted(docs, key=lambda d: (d[0] or "", d[1] or ""))
               if cid not in published and name not in published]
    short = (" (an id is matched by its first 8 characters or more)"
             if len(cluster) < 8 and any(cid.startswith(cluster) for cid in ids) else "")
    raise ConfigError(f"--cluster {cluster}: no cluster has that id or name{short}; the clusters: {', '.join(listed)}")


def unpublished(trees: Mapping[str, StatusTree], docs: Sequence[tuple[str | None, str | None]]) -> list[dict[str, Any]]:
    """The Clusters git names (``docs``: `FleetLog.cluster_docs`) that have no status branch:
    their agent has not published a status yet (not started, or not reaching the repository)."""
    names = cluster_names(trees)
    published = set(names) | set(names.values())
    seen: set[tuple[str | None, str | None]] = set()
    out = []
    for name, cid in sorted(docs, key=lambda d: (d[0] or "", d[1] or "")):
        if cid in published or name in published or (name, cid) in seen:
            continue
        seen.add((name, cid))
        out.append({"cluster": name or cid, "id": cid})
    return out


def served_by(files: Mapping[str, str], waiting: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per DNSPolicy, the ``waiting`` clusters (`unpublished`) with hosts for it in the desired
    head ``files`` (by id, else name).  A head that does not validate says what it can."""
    state = check_files(files, load_schemas()).state
    out: dict[str, list[str]] = {}
    for w in waiting:
        member = state.cluster(w["id"] or w["cluster"])
        if member is None:
            continue
        for zone in state.zones:
            for policy in sorted({h.policy for h in build_hosts(state, member, zone)}):
                if (key := w["id"] or w["cluster"]) not in out.setdefault(policy, []):
                    out[policy].append(key)
    return out


def with_unpublished(agg: dict[str, Any], waiting: list[dict[str, Any]],
                     serving: Mapping[str, list[str]] | None = None) -> None:
    """Count the clusters git names but that never published a status as not ready: none of
    their records can be said to be served; nor can the policies they have hosts for
    (``serving``: `served_by`)."""
    agg["unpublished"] = waiting
    if not waiting:
        return
    agg["counts"]["clusters"] += len(waiting)
    agg["counts"]["clustersUnpublished"] = len(waiting)
    agg["ready"] = False
    for policy, keys in sorted((serving or {}).items()):
        p = agg["policies"].setdefault(policy, {"ready": False, "clusters": [], "lagging": [], "hosts": [],
                                                "messages": {}})
        for key in keys:
            p["clusters"].append(key)
            p["lagging"].append(key)
            p["messages"][key] = "no status yet"
        p["ready"] = False
    agg["policies"] = dict(sorted(agg["policies"].items()))
    agg["counts"]["policies"] = len(agg["policies"])
    agg["counts"]["policiesReady"] = sum(1 for p in agg["policies"].values() if p["ready"])


def _aliases(branch: str, local: LocalRefs | None) -> list[str]:
    """What else names the desired branch's head: ``origin/main`` and the tracked remote's."""
    remotes = {"origin", *([local.remote] if local and local.remote else [])}
    return [name for r in sorted(remotes) for name in (f"{r}/{branch}", f"refs/remotes/{r}/{branch}")]


def _tags_then(flog: FleetLog, url: str, auth: GitAuth) -> Callable[[str], str | None]:
    """For a repository read by URL: a revision the cache does not know may be a tag: fetch them."""
    def resolve(text: str) -> str | None:
        if not flog.fetch_tags(url, auth):
            return None
        found = flog.commit(text)
        return found[0] if found else None
    return resolve


def with_history(c: dict[str, Any], entries: list[Entry], flog: FleetLog, head: str | None, now: float) -> None:
    """Add to one cluster: appliedAt, lag, lastError, committedAt, and for a retired cluster
    removedFromGit and recordsRemoved (see docs/cli.md, gitdns status)."""
    c["committedAt"] = iso(c.get("committed"))
    applied = c.get("appliedRevision")
    since = None
    for entry in reversed(entries):  # the earliest push of the run that ends at the tip
        if entry.applied != applied:
            break
        since = entry
    c["appliedAt"] = iso(since.time) if since and applied else None
    failed = next((e for e in reversed(entries) if not e.ready), None)
    c["lastError"] = None if failed is None else {
        "at": iso(failed.time), "reason": failed.reason, "message": failed.message,
        "current": failed is entries[-1]}
    c["lag"] = None
    c["removedFromGit"] = c["recordsRemoved"] = None
    if head is None:
        return
    if c.get("retired"):
        gone = flog.removal(c["clusterId"], head)
        if gone is not None:
            sha, when, subject = gone
            c["removedFromGit"] = {"revision": sha, "at": iso(when), "subject": subject}
            first = next((e for e in entries if flog.contains(sha, e.applied)), None)
            if first is not None:
                c["recordsRemoved"] = {"at": iso(first.time), "appliedRevision": first.applied,
                                       "statusCommit": first.sha}
        return
    resolved = flog.commit(applied) if applied else None
    count, oldest = flog.unapplied(resolved[0] if resolved else None, head)
    c["lag"] = {"commits": count, "since": iso(oldest) if oldest else None,
                "seconds": int(now - oldest) if oldest else 0}


def same_commit(revision: object, sha: str) -> bool:
    """``revision`` (a sha, an abbreviation, or a ``<time>.<sha7>`` label) names commit ``sha``."""
    text = str(revision or "").strip().lower()
    if "." in text:
        text = text.rsplit(".", 1)[1]
    return len(text) >= 7 and sha.lower().startswith(text)


def with_lag(agg: Mapping[str, Any], head: str | None, branch: str) -> dict[str, Any]:
    clusters = {
        cid: {**c, "behindHead": head if head and not same_commit(c.get("appliedRevision"), head) else None}
        for cid, c in agg["clusters"].items()
    }
    return {**agg, "clusters": clusters, "desiredHead": head, "desiredBranch": branch}


def lag_text(agg: Mapping[str, Any]) -> str:
    """The desired head, the clusters behind it and those holding zones at an older revision;
    "every cluster has applied" only when no active cluster is behind and none holds a zone."""
    head = agg.get("desiredHead")
    if not head:
        return ""
    active = [c for c in agg["clusters"].values() if not c.get("retired")]
    behind = [(c["cluster"], c.get("appliedRevision")) for c in active if c.get("behindHead")]
    held = [(c["cluster"], c.get("heldZones") or []) for c in active if c.get("heldZones")]
    lines = ["", f"desired head ({agg.get('desiredBranch', 'main')}): {head[:7]}"]
    if behind:
        lines.append(f"behind {head[:7]}: " + ", ".join(
            f"{name} (applied {short_revision(applied)})" for name, applied in behind))
    if held:
        lines.append("zones held at their last good revision (the revision does not validate for them): " + ", ".join(
            f"{name} ({', '.join(zones)})" for name, zones in held))
    waiting = [w["cluster"] for w in agg.get("unpublished", ())]
    if waiting:
        lines.append(f"no status yet: {', '.join(waiting)}")
    if active and not behind and not held and not waiting:
        lines.append(f"every cluster has applied {head[:7]}")
    return text_lines(lines)
