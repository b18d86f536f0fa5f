"""Who the agent is, across restarts and removals.

The Cluster git names for this agent (by id or metadata.name) is remembered in the state
directory (``cluster.json``: id, name, mode), so an agent started after its Cluster was removed
from git still knows whose records to clean up; failing that, the desired history is searched.
The instance's own lease identity is kept there too (``instance-id``: `instance_identity`).
Both are written whole (a temporary file renamed): a process killed while writing leaves the
old file or the new one.
``cluster_problem`` says when git names no usable Cluster for us.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gitdns.core.conditions import Condition
from gitdns.core.model import Cluster, Mode
from gitdns.errors import ConfigError, GitdnsError

if TYPE_CHECKING:
    from gitdns.agent.config import AgentConfig
    from gitdns.agent.state import AgentState
    from gitdns.core.desired import Desired

log = logging.getLogger(__name__)

IDENTITY_FILE = "cluster.json"


def instance_identity(state_dir: Path) -> str:
    """This agent instance's lease identity, kept in its state directory so a restart after a
    crash takes its own lease back at once, while a second agent (another state directory)
    with the same cluster id waits.  Written whole (a temporary file renamed): a process killed
    while writing leaves no file or the whole one, never an empty one that would give each
    restart a new identity, left waiting out the lease its crashed predecessor held.  A file
    that holds no identity (empty, or not one word) is replaced by a new one."""
    import os
    import secrets

    from gitdns import fsutil

    path = state_dir / "instance-id"
    try:
        found = path.read_text(errors="replace").strip()
    except FileNotFoundError:
        found = ""
    if found and len(found) <= 253 and all(c.isprintable() and not c.isspace() for c in found):
        return found
    state_dir.mkdir(parents=True, exist_ok=True)
    fsutil.remove_stray_temps(state_dir, fsutil.temp_glob(path))  # a killed predecessor's
    ident = f"{os.uname().nodename}-{secrets.token_hex(6)}"
    fsutil.write_atomic(path, f"{ident}\n".encode())
    return ident


def save_identity(root: Path, cluster: Cluster) -> None:
    """Remember ``cluster`` in ``root`` (whole: a temporary file renamed, so a process killed
    while writing leaves the old file or the new one; a failure is logged, never raised)."""
    import json

    from gitdns import fsutil

    path = root / IDENTITY_FILE
    try:
        root.mkdir(parents=True, exist_ok=True)
        fsutil.remove_stray_temps(root, fsutil.temp_glob(path))  # a killed predecessor's
        doc = json.dumps({"id": cluster.id, "name": cluster.name, "mode": cluster.mode.value}) + "\n"
        fsutil.write_atomic(path, doc.encode())
    except OSError as exc:
        log.warning("cannot keep the cluster identity: path=%s error=%s", path, exc)


def load_identity(root: Path, configured: str) -> Cluster | None:
    import json

    try:
        doc = json.loads((root / IDENTITY_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not doc.get("id"):
        return None
    if configured not in (doc.get("id"), doc.get("name")):
        return None
    raw = str(doc.get("mode") or "")
    mode = Mode(raw) if raw in {m.value for m in Mode} else Mode.DEFAULT
    return Cluster(name=str(doc.get("name") or doc["id"]), id=str(doc["id"]), mode=mode)


def cluster_from_history(state: AgentState, config: AgentConfig, source: object,
                         desired_at: Callable[[str], Desired | None]) -> Cluster | None:
    """The Cluster git last named for us, from this state dir or the desired history
    (an agent started after its Cluster was removed must still clean up)."""
    known = load_identity(Path(config.state_dir), config.cluster)
    if known is not None:
        return known
    log_fn = getattr(source, "log", None)
    if not callable(log_fn):
        return None
    try:
        commits = log_fn((), 100)
    except GitdnsError as exc:
        log.warning("history lookup failed: error=%s", exc)
        return None
    for commit in reversed(commits):  # newest first
        old = desired_at(commit.sha)
        if old is not None:
            found = old.state.cluster(config.cluster)
            if found is not None:
                state.history_desired = old
                return found
    return None


def resolve_identity(state: AgentState, config: AgentConfig, desired: Desired, cluster: Cluster | None,
                     history: Callable[[], Cluster | None]) -> None:
    """Set ``cluster_problem`` when git does not name a usable Cluster for us."""
    state.cluster_problem = None
    if cluster is not None:
        return
    rejected = {name for kind, name in desired.rejected if kind == "Cluster"}
    if state.known_cluster is None:
        state.known_cluster = history()
    names = {config.cluster} | ({state.known_cluster.name} if state.known_cluster else set())
    if names & rejected:
        state.cluster_problem = Condition(
            "Ready", False, "ValidationFailed",
            "this cluster's Cluster document does not validate: every zone keeps its last good revision")
    elif state.known_cluster is None:
        import os

        hint = ""
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            which = (f"kube-system Namespace UID and instance {config.instance} (`gitdns cluster-id --instance "
                     f"{config.instance}` prints it)" if config.instance
                     else "kube-system Namespace UID (`gitdns cluster-id` prints it)")
            hint = (f"; in a pod {config.cluster} is what the agent runs as: with GITDNS_CLUSTER unset it is this "
                    f"cluster's {which}: give that Cluster spec.id: {config.cluster}")
        state.cluster_problem = Condition(
            "Ready", False, "InvalidConfiguration",
            f"no Cluster {config.cluster} in git (by id or metadata.name), now or in recent history{hint}")


UID_ATTEMPTS = 5  # reading the kube-system UID at start: 1 + 2 + 4 + 8 s of waiting at most


def derive_cluster(config: AgentConfig, read_uid: Callable[[], str] | None = None,
                   sleep: Callable[[float], None] | None = None) -> AgentConfig:
    """``config`` with its cluster set: as given (``--cluster`` / ``GITDNS_CLUSTER``), else, in a
    pod, the kube-system Namespace UID (Kuadrant's owner id, seed 000): one manifest fits every
    cluster, and git names each Cluster by that id.  With ``--instance NAME`` (a second install
    in the cluster) the id is ``<UID>.NAME`` (`gitdns.core.owner.install`).  Outside Kubernetes
    ``--cluster`` is required and ``--instance`` refused (there is no UID to derive from).
    The API is asked a few times before giving up (a pod may start before its network is up)."""
    import dataclasses
    import os
    import time

    from gitdns.core.owner.install import owner_id

    outside = read_uid is None and not os.environ.get("KUBERNETES_SERVICE_HOST")
    if outside and config.instance:
        raise ConfigError("--instance (GITDNS_INSTANCE) names an install in a pod, whose owner id is "
                          "<kube-system UID>.<instance>; outside Kubernetes give each install its own --cluster")
    if config.cluster:
        return config
    if outside:
        raise ConfigError("--cluster (GITDNS_CLUSTER) is required outside Kubernetes: a Cluster id or "
                          "metadata.name from git; in a pod, left unset, it is the kube-system Namespace UID")
    if read_uid is None:
        from gitdns.adapters.kube.access import kube_system_uid

        read_uid = kube_system_uid
    wait = sleep or time.sleep
    for attempt in range(UID_ATTEMPTS):
        try:
            uid = read_uid()
        except GitdnsError as exc:
            if attempt + 1 == UID_ATTEMPTS:
                raise ConfigError(f"GITDNS_CLUSTER is unset and the kube-system Namespace UID cannot be read "
                                  f"({exc}); grant `get` on namespaces/kube-system (deploy/base/rbac.yaml, "
                                  "ClusterRole gitdns-cluster-id) or set GITDNS_CLUSTER") from None
            log.warning("cluster id: kube-system UID not read yet: attempt=%d error=%s", attempt + 1, exc)
            wait(float(2 ** attempt))
            continue
        try:
            ident = owner_id(uid, config.instance)
        except ValueError as exc:
            raise ConfigError(f"--instance (GITDNS_INSTANCE) {exc}") from None
        if config.instance:
            log.info("cluster id: %s: the kube-system Namespace UID %s and instance %s (GITDNS_CLUSTER unset)",
                     ident, uid, config.instance)
        else:
            log.info("cluster id: kube-system Namespace UID %s (GITDNS_CLUSTER unset)", uid)
        return dataclasses.replace(config, cluster=ident)
    raise AssertionError("unreachable")
