"""`gitdns status`: the fleet's status branches, aggregated, and who lags the desired head.

    status(repo, cluster=, branch=, fmt=, state_dir=, auth=) -> Result   the command (exit 0: the fleet is ready)
    fleet_status(repo, cluster=, branch=, state_dir=, auth=) -> dict    statusview.aggregate + lag fields
    with_lag(agg, head, branch) -> dict                          pure: adds the lag fields
    lag_text(agg) -> str                                         the lines added below statusview.to_text

Every ``gitdns-status/*`` branch of ``repo`` is read with one fetch (`statusbranch.read_all`)
into ``state_dir/status`` (a temporary directory, removed afterwards, without ``state_dir``).
The head of the desired branch comes from ``git ls-remote`` on the same repository; when that
fails (the desired repository is elsewhere, or unreachable) the lag is simply not shown.
Both go through one git transport, ``auth`` (the verb's --ssh-key, --known-hosts, --token-file,
--token-env, --ca-file: `gitdns.commands.gitremote`).

Added to the aggregate: ``desiredHead`` (the branch head's sha, or None when unknown),
``desiredBranch``, and per cluster ``behindHead`` — the head sha when the cluster's
``appliedRevision`` is not that commit (None otherwise, and when the head is unknown).
Lagging the head does not make the fleet not-ready: an agent picks a new head up within its
poll interval; readiness is what the agents report.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitdns.adapters.gitauth import GitAuth, check_url
from gitdns.adapters.gitsource import GitSource
from gitdns.adapters.statusbranch import read_all
from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.commands.history import repo_url, scratch_dir
from gitdns.commands.statusview import aggregate, to_json, to_text
from gitdns.errors import GitdnsError

log = logging.getLogger(__name__)


def status(repo: str, *, cluster: str | None = None, branch: str = "main", fmt: str = "text",
           state_dir: str | Path | None = None, auth: GitAuth | None = None) -> Result:
    """``gitdns status``: exit 0 when every cluster and policy is Ready, else 1."""
    agg = fleet_status(repo, cluster=cluster, branch=branch, state_dir=state_dir, auth=auth)
    result = Result(EXIT_OK if agg["ready"] else EXIT_ERROR)
    if cluster and not agg["clusters"]:
        result.err.append(f"no status branch for cluster {cluster}")
    result.out.append(to_json(agg) if fmt == "json" else to_text(agg) + lag_text(agg))
    return result


def fleet_status(repo: str, *, cluster: str | None = None, branch: str = "main",
                 state_dir: str | Path | None = None, timeout: float = 30.0,
                 auth: GitAuth | None = None) -> dict[str, Any]:
    url = repo_url(repo)
    check_url(url)  # no password in --repo: the token comes from --token-file or --token-env
    auth = auth or GitAuth()
    with scratch_dir(state_dir, "status") as workdir:
        trees = read_all(url, workdir=workdir / "branches", timeout=timeout, auth=auth)
        head = desired_head(url, branch, workdir / "desired", timeout, auth)
    return with_lag(aggregate(trees, cluster), head, branch)


def desired_head(url: str, branch: str, workdir: Path, timeout: float,
                 auth: GitAuth | None = None) -> str | None:
    """The sha of the desired branch's head, or None when it cannot be listed."""
    try:
        return GitSource(url, branch=branch, workdir=workdir, timeout=timeout,
                         auth=auth or GitAuth()).remote_head()
    except GitdnsError as exc:
        log.debug("skipped: check=desired-head url=%s error=%s", url, exc)
        return None


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
    behind = [(c["cluster"], c.get("appliedRevision")) for c in agg["clusters"].values() if c.get("behindHead")]
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
