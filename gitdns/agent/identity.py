"""Who the agent is, across restarts and removals (functions of the `Agent`).

The Cluster git names for this agent (by id or metadata.name) is remembered in the state
directory (``cluster.json``: id, name, mode), so an agent started after its Cluster was removed
from git still knows whose records to clean up; failing that, the desired history is searched.
``cluster_problem`` says when git names no usable Cluster for us.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from gitdns.core.conditions import Condition
from gitdns.core.model import Cluster, Mode
from gitdns.errors import GitdnsError

if TYPE_CHECKING:
    from gitdns.agent.cycle import Agent
    from gitdns.core.desired import Desired

log = logging.getLogger(__name__)


def identity_file(agent: Agent) -> Path:
    return agent.root / "cluster.json"


def save_identity(agent: Agent, cluster: Cluster) -> None:
    import json

    try:
        agent.root.mkdir(parents=True, exist_ok=True)
        identity_file(agent).write_text(json.dumps({"id": cluster.id, "name": cluster.name,
                                                     "mode": cluster.mode.value}) + "\n")
    except OSError as exc:
        log.warning("cannot keep the cluster identity: path=%s error=%s", identity_file(agent), exc)


def load_identity(agent: Agent) -> Cluster | None:
    import json

    try:
        doc = json.loads(identity_file(agent).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not doc.get("id"):
        return None
    if agent.config.cluster not in (doc.get("id"), doc.get("name")):
        return None
    raw = str(doc.get("mode") or "")
    mode = Mode(raw) if raw in {m.value for m in Mode} else Mode.DEFAULT
    return Cluster(name=str(doc.get("name") or doc["id"]), id=str(doc["id"]), mode=mode)


def cluster_from_history(agent: Agent) -> Cluster | None:
    """The Cluster git last named for us, from this state dir or the desired history
    (an agent started after its Cluster was removed must still clean up)."""
    known = load_identity(agent)
    if known is not None:
        return known
    log_fn = getattr(agent.source, "log", None)
    if not callable(log_fn):
        return None
    try:
        commits = log_fn((), 100)
    except GitdnsError as exc:
        log.warning("history lookup failed: error=%s", exc)
        return None
    for commit in reversed(commits):  # newest first
        old = agent._desired_at(commit.sha)
        if old is not None:
            found = old.state.cluster(agent.config.cluster)
            if found is not None:
                agent.history_desired = old
                return found
    return None


def resolve_identity(agent: Agent, desired: Desired) -> None:
    """Set ``cluster_problem`` when git does not name a usable Cluster for us."""
    agent.cluster_problem = None
    if agent.cluster_of(desired) is not None:
        return
    rejected = {name for kind, name in desired.rejected if kind == "Cluster"}
    if agent.known_cluster is None:
        agent.known_cluster = cluster_from_history(agent)
    names = {agent.config.cluster} | ({agent.known_cluster.name} if agent.known_cluster else set())
    if names & rejected:
        agent.cluster_problem = Condition(
            "Ready", False, "ValidationFailed",
            "this cluster's Cluster document does not validate: every zone keeps its last good revision")
    elif agent.known_cluster is None:
        agent.cluster_problem = Condition(
            "Ready", False, "InvalidConfiguration",
            f"no Cluster {agent.config.cluster} in git (by id or metadata.name), now or in recent history")
