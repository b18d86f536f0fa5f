"""Whether the groups a ``groups`` change activates have a healthy endpoint.

Activating a group is refused without ``--force`` unless the group has a healthy endpoint: its
clusters publish at least one record in the zone, and (when the status branches on ``origin``
can be read) none of them reports ``Ready`` false nor all its health-checked targets unhealthy.
The status branches are read through the verb's git transport (`gitdns.commands.git.remote`),
by `gitdns.commands.groups.status`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitdns.adapters.git.auth import GitAuth
from gitdns.commands import Result
from gitdns.commands.failover import serving
from gitdns.commands.groups.check import GroupsRefused
from gitdns.commands.groups.status import FleetStatus, origin_status
from gitdns.core import builder
from gitdns.core.desired import Desired
from gitdns.core.model import Zone
from gitdns.core.status.doc import StatusTree
from gitdns.core.status.doc import load as load_yaml
from gitdns.reconcile.engine import intent_for


def own_records(desired: Desired, cluster_name: str, zone: Zone) -> int:
    """Records the cluster's gateways publish in the zone (static records not counted)."""
    cluster = desired.state.cluster(cluster_name)
    if cluster is None:
        return 0
    static = {r.key for r in builder.static_records(desired.state, zone)}
    return sum(1 for r in intent_for(desired, cluster, zone).records if r.key not in static)


def _summary_not_ready(tree: StatusTree) -> bool:
    text = tree.files.get("summary.yaml")
    if text is None:
        return False
    try:
        doc = load_yaml(text)
    except ValueError:
        return False
    if doc.get("ready") is False:
        return True
    conditions = doc.get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") in (False, "False")
               for c in conditions)


def _all_targets_unhealthy(tree: StatusTree) -> int:
    """The number of targets when every one is unhealthy, else 0."""
    text = tree.files.get("health.yaml")
    if text is None:
        return 0
    try:
        targets = load_yaml(text).get("targets") or {}
    except ValueError:
        return 0
    if not isinstance(targets, Mapping) or not targets:
        return 0
    states = [doc.get("state") if isinstance(doc, Mapping) else None for doc in targets.values()]
    return len(states) if all(s == "unhealthy" for s in states) else 0


def activation_problems(desired: Desired, zone: Zone, activated: Sequence[str],
                        trees: Mapping[str, StatusTree] | None) -> list[str]:
    """Why activating each group would leave the zone without a healthy endpoint."""
    problems: list[str] = []
    clusters = serving(desired.state, zone)
    for group in sorted(set(activated)):
        members = [c for c in clusters if c.group == group]
        publishing = [c for c in members if own_records(desired, c.name, zone) > 0]
        if not publishing:
            who = f" (clusters in the group: {', '.join(c.name for c in members)})" if members else \
                " (no Cluster in git has this group)"
            problems.append(f"group {group}: no endpoint: none of its clusters publishes a record in zone "
                            f"{zone.domain}{who}")
            continue
        if trees is None:
            continue
        for cluster in publishing:
            tree = trees.get(cluster.id)
            if tree is None:
                continue
            if _summary_not_ready(tree):
                problems.append(f"group {group}: cluster {cluster.name} reports Ready false "
                                f"(status branch gitdns-status/{cluster.id})")
            count = _all_targets_unhealthy(tree)
            if count:
                problems.append(f"group {group}: cluster {cluster.name}: all {count} of its health-checked "
                                f"targets are unhealthy (health.yaml on gitdns-status/{cluster.id})")
    return problems


def status_trees(url: str | None, auth: GitAuth | None = None,
                 result: Result | None = None) -> dict[str, StatusTree] | None:
    """Every status branch on ``url``, read through the git transport ``auth``; None when there
    is no remote or it cannot be read (then a warning with the cause goes to ``result``)."""
    if not url:
        return None
    return health_trees(origin_status(url, auth), result)


def health_trees(status: FleetStatus, result: Result | None = None) -> dict[str, StatusTree] | None:
    """The branches an activation is judged by: None when origin's could not be read (then a
    warning with the cause goes to ``result``: the reported health is not checked) or there
    are none."""
    if status.error:
        if result is not None:
            where = "on origin" if status.fallback or status.where == "origin" else f"in {status.where}"
            result.err.append(f"warning: the status branches {where} were not read, so the clusters' "
                              f"reported health is not checked: {status.error}")
        return None
    return dict(status.trees) or None


def refuse_unhealthy(problems: list[str], force: bool, result: Result) -> None:
    if not problems:
        return
    if not force:
        raise GroupsRefused("activating a group without a healthy endpoint (pass --force to do it anyway):\n  "
                            + "\n  ".join(problems))
    result.err.extend(f"warning (--force): {p}" for p in problems)
