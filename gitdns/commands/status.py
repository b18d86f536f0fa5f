"""`gitdns status`: the fleet's status branches, aggregated, with each cluster's history.

    status(repo, cluster=, branch=, fmt=, state_dir=, auth=, revision=) -> Result   the command
    fleet_status(...) -> dict          statusview.aggregate + lag, history and retired fields
    with_lag(agg, head, branch) -> dict                pure: adds behindHead / desiredHead
    lag_text(agg) -> str                               the lines added below statusview.to_text
    revision_status(...) -> dict                       ``--revision``: one commit across the fleet

Every ``gitdns-status/*`` branch of ``repo`` and the desired branch are fetched into one bare
cache, ``state_dir/status`` (a temporary directory, removed afterwards, without ``state_dir``),
through one git transport, ``auth`` (`gitdns.commands.gitremote`).  When the desired branch
cannot be fetched (the desired repository is elsewhere, or unreachable) the lag and the retired
clusters are simply not shown.

Per cluster (docs/cli.md, "gitdns status"):
- ``appliedAt``: the time of the first status commit of the run ending at the tip whose
  ``appliedRevision`` is the current one (when the agent reported applying it);
- ``lag``: ``commits`` the desired head has that ``appliedRevision`` has not, ``since`` the
  committer time of the oldest of them, ``seconds`` from then to now;
- ``lastError``: the most recent status commit whose summary was not Ready (its Ready reason and
  message; ``current`` when it is the tip);
- ``retired``: git's head names no Cluster with this id or name; ``removedFromGit`` is the last
  desired commit (first parents) that changed the id's occurrences (the commit that removed the
  Cluster), ``recordsRemoved`` the first status commit whose ``appliedRevision`` contains that
  commit (the agent applied the removal, which leaves its zones); None: its agent never did
  (`gitdns prune-owner`).  A retired cluster counts neither for readiness nor for the policies.
Lagging the head does not make the fleet not-ready: an agent picks a new head up within its
poll interval; readiness is what the agents report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitdns.adapters.gitauth import GitAuth, check_url
from gitdns.adapters.statusbranch import READ_CACHE, read_all
from gitdns.adapters.statuscache import StatusCache, sanitize
from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.commands.history import repo_url, scratch_dir
from gitdns.commands.statuslog import Entry, FleetLog
from gitdns.commands.statusview import _table, aggregate, to_json, to_text
from gitdns.errors import ConfigError

log = logging.getLogger(__name__)


def status(repo: str, *, cluster: str | None = None, branch: str = "main", fmt: str = "text",
           state_dir: str | Path | None = None, auth: GitAuth | None = None,
           revision: str | None = None) -> Result:
    """``gitdns status``: exit 0 when every cluster and policy is Ready (with ``revision``: when
    every cluster git names has applied it), else 1."""
    agg = fleet_status(repo, cluster=cluster, branch=branch, state_dir=state_dir, auth=auth, revision=revision)
    if revision is not None:
        rev = agg["revision"]
        done = bool(rev["clusters"]) and all(v["state"] in ("applied", "retired") for v in rev["clusters"].values())
        result = Result(EXIT_OK if done else EXIT_ERROR)
        result.out.append(to_json(rev) if fmt == "json" else revision_text(rev))
        return result
    result = Result(EXIT_OK if agg["ready"] else EXIT_ERROR)
    if cluster and not agg["clusters"]:
        result.err.append(f"no status branch for cluster {cluster}")
    result.out.append(to_json(agg) if fmt == "json" else to_text(agg) + lag_text(agg))
    return result


def fleet_status(repo: str, *, cluster: str | None = None, branch: str = "main",
                 state_dir: str | Path | None = None, timeout: float = 30.0,
                 auth: GitAuth | None = None, revision: str | None = None,
                 now: float | None = None) -> dict[str, Any]:
    url = repo_url(repo)
    check_url(url)  # no password in --repo: the token comes from --token-file or --token-env
    auth = auth or GitAuth()
    with scratch_dir(state_dir, "status") as workdir:
        trees = read_all(url, workdir=workdir / "branches", timeout=timeout, auth=auth)
        flog = FleetLog(StatusCache(workdir / "branches" / READ_CACHE, timeout))
        head = flog.fetch_desired(url, branch, auth)
        if revision is not None and head is None:
            raise ConfigError(f"--revision needs the desired branch {branch}: it cannot be fetched from "
                              f"{sanitize(url)} (--branch names it)")
        known = flog.clusters_at(head) if head else None
        agg = with_lag(aggregate(trees, cluster, known), head, branch)
        when = time.time() if now is None else now
        for cid, c in agg["clusters"].items():
            with_history(c, flog.entries(cid), flog, head, when)
        if revision is not None:
            assert head is not None
            agg["revision"] = revision_status(agg, flog, revision, head, branch)
    return agg


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


def revision_status(agg: Mapping[str, Any], flog: FleetLog, revision: str, head: str,
                    branch: str) -> dict[str, Any]:
    """Where one desired commit stands in each cluster: applied (the status history has an
    appliedRevision that is it or a descendant), failed (a later attempt at it or after it
    reported Ready False while the applied revision is older), pending otherwise; retired
    clusters are said so."""
    found = flog.commit(revision)
    if found is None or not flog.contains(found[0], head):
        raise ConfigError(f"--revision {revision}: not a commit of the desired branch {branch}")
    sha, when = found
    out: dict[str, Any] = {}
    for cid, c in agg["clusters"].items():
        entries = flog.entries(cid)
        first = next((e for e in entries if flog.contains(sha, e.applied)), None)
        last = entries[-1] if entries else None
        row: dict[str, Any] = {"cluster": c["cluster"], "appliedRevision": c.get("appliedRevision")}
        if c.get("retired"):  # and when it applied the commit before it left, if it did
            row["state"] = "retired"
            if first is not None:
                row.update(at=iso(first.time), appliedRevision=first.applied)
        elif first is not None:
            row.update(state="applied", at=iso(first.time), appliedRevision=first.applied)
        elif last is not None and not last.ready and flog.contains(sha, last.attempted):
            attempt = next(e for e in entries if flog.contains(sha, e.attempted) and not e.ready)
            row.update(state="failed", at=iso(attempt.time), attemptedRevision=last.attempted,
                       reason=last.reason, message=last.message)
        else:
            row["state"] = "pending"
        out[cid] = row
    return {"revision": sha, "committedAt": iso(when), "desiredBranch": branch, "clusters": out,
            "counts": {state: sum(1 for r in out.values() if r["state"] == state)
                       for state in ("applied", "pending", "failed", "retired")}}


def revision_text(rev: Mapping[str, Any]) -> str:
    rows = [("CLUSTER", "ID", "STATE", "AT", "DETAIL")]
    for cid, r in rev["clusters"].items():
        detail = {"applied": f"applied {_short(r.get('appliedRevision'))}",
                  "failed": f"{r.get('reason', '')}: {r.get('message', '')}".strip(": "),
                  "pending": f"applied {_short(r.get('appliedRevision'))}",
                  "retired": "no longer in git" + (f"; had applied it ({_short(r.get('appliedRevision'))})"
                                                     if r.get("at") else "; never applied it")}[r["state"]]
        rows.append((r["cluster"], cid[:13], r["state"], r.get("at") or "-", detail))
    counts = rev["counts"]
    lines = [f"revision {rev['revision'][:7]} ({rev['desiredBranch']}, committed {rev['committedAt']})", "",
             *_table(rows), "",
             ", ".join(f"{counts[s]} {s}" for s in ("applied", "pending", "failed", "retired") if counts[s])
             or "no cluster"]
    return "\n".join(lines) + "\n"


def iso(when: float | int | None) -> str | None:
    """A UTC time as ``2023-11-14T22:13:20Z``."""
    if when is None:
        return None
    return datetime.fromtimestamp(int(when), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    head = agg.get("desiredHead")
    if not head:
        return ""
    behind = [(c["cluster"], c.get("appliedRevision")) for c in agg["clusters"].values()
              if c.get("behindHead") and not c.get("retired")]
    lines = ["", f"desired head ({agg.get('desiredBranch', 'main')}): {head[:7]}"]
    if behind:
        lines.append(f"behind {head[:7]}: " + ", ".join(
            f"{name} (applied {_short(applied)})" for name, applied in behind))
    elif agg["clusters"]:
        lines.append(f"every cluster has applied {head[:7]}")
    return "\n".join(lines) + "\n"


def _short(revision: object) -> str:
    if not revision:
        return "nothing yet"
    text = str(revision)
    return text[:7] if len(text) >= 40 else text
