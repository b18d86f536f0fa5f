"""Where the orchestrator's inputs come from: the desired state (a directory or a git remote;
a revision that does not parse keeps the last good one), the pool's probe targets, and the
nodes Kubernetes lists for a pool's ``discovery.labelSelector``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from gitdns.adapters.repo import read_tree
from gitdns.core.desired import Desired
from gitdns.core.health import HealthSettings, ProbeSpec, node_probe
from gitdns.core.model import DesiredState, Node, NodePool
from gitdns.errors import ConfigError
from gitdns.reconcile.engine import from_files

HOLD_CODES = frozenset({"ParseError", "InvalidDocument", "NoKind", "UnknownKind", "WrongApiVersion"})
Targets = dict[str, tuple[ProbeSpec, HealthSettings]]


class DesiredSource(Protocol):
    def read(self) -> Desired | None: ...  # None: unchanged since the last read


class DirectorySource:
    """A plain directory, re-read every poll (only a change of its YAML files counts)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: dict[str, str] | None = None

    def read(self) -> Desired | None:
        if not self.root.is_dir():
            raise ConfigError(f"desired repository {self.root} is not a directory")
        files = read_tree(self.root)
        if files == self._files:
            return None
        self._files = files
        return from_files(self.root, files, None)


class GitDesiredSource:
    """A git remote through GitSource: ``ls-remote`` each poll, a fetch only for a new head."""

    def __init__(self, source: Any, root: Path) -> None:
        self.source = source
        self.root = root
        self._sha: str | None = None

    def read(self) -> Desired | None:
        sha = self.source.remote_head()
        if sha == self._sha:
            return None
        fetched = self.source.fetch(sha)
        self._sha = sha
        return from_files(self.root, fetched.files, None)


def hold_good(desired: Desired, previous: DesiredState | None, pool: str) -> tuple[DesiredState, list[str]]:
    """The state to act on and notes on what was held back (a failure never destroys
    what the last good revision built)."""
    notes = [p.format() for p in desired.problems if p.code in HOLD_CODES]
    if previous is not None and notes:
        return previous, ["held the last good desired state: " + n for n in notes]
    state = desired.state
    if ("NodePool", pool) in desired.rejected and previous is not None:
        kept = tuple(p for p in previous.node_pools if p.name == pool)
        state = replace(state, node_pools=(*state.node_pools, *kept))
        notes.append(f"NodePool {pool} does not validate: its last good version is kept")
    if previous is not None:
        held = tuple(t for t in previous.tenants if ("Tenant", t.name) in desired.rejected and t.node_pool == pool)
        if held:
            state = replace(state, tenants=(*state.tenants, *held))
            notes += [f"Tenant {t.name} does not validate: its last good version is kept" for t in held]
    return state, notes


def pool_targets(pool: NodePool, nodes: tuple[Node, ...],
                 headers: tuple[tuple[str, str], ...] = ()) -> tuple[Targets, list[str]]:
    """One probe per node (target id: the node name; the first of a duplicated name wins);
    ``headers`` come from the pool's ``healthCheck.headersSecret``."""
    settings = HealthSettings.for_node_pool(pool.health)
    targets: Targets = {}
    notes: list[str] = []
    for node in nodes:
        if node.name in targets:
            notes.append(f"node {node.name}: listed twice; the first is probed")
            continue
        try:
            targets[node.name] = (node_probe(node.name, node, pool.health, headers=headers), settings)
        except ValueError as exc:
            notes.append(str(exc))
    return targets, notes


def discover_nodes(api: Any, pool: NodePool) -> tuple[Node, ...]:
    """Kubernetes Nodes matching the pool's label selector, by InternalIP; their health
    endpoint from the pool's check (``http://<ip>:15021/healthz/ready`` by default)."""
    if not pool.discovery_selector:
        return ()
    found = []
    for item in api.list_node(label_selector=pool.discovery_selector, _request_timeout=10).items:
        addresses = (item.status.addresses or []) if item.status is not None else []
        ip = next((a.address for a in addresses if a.type == "InternalIP"), None)
        if ip is None:
            continue
        host = f"[{ip}]" if ":" in ip else ip
        check = pool.health
        found.append(Node(item.metadata.name, ip, f"{check.protocol.lower()}://{host}:{check.port}{check.path}"))
    return tuple(sorted(found, key=lambda n: n.name))
