"""Where the orchestrator's inputs come from: the desired state (a directory or a git remote;
a revision that does not parse keeps the last good one; a node address that is no IP or a
fenced tenant keeps its last good version), the pool's probe targets, and the nodes
Kubernetes lists for a pool's ``discovery.labelSelector`` (those with an IP address)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from gitdns.adapters.repo import check_files, load_schemas, read_tree
from gitdns.core.addresses import ip_error
from gitdns.core.checks.tenants import refused_tenants
from gitdns.core.corefile.check import shown
from gitdns.core.desired import Desired
from gitdns.core.health import HealthSettings, ProbeSpec, TargetRefused, node_probe
from gitdns.core.model import DesiredState, Node, NodePool
from gitdns.core.reach import Network, ProbeReach
from gitdns.errors import ConfigError

HOLD_CODES = frozenset({"ParseError", "InvalidDocument", "NoKind", "UnknownKind", "WrongApiVersion",
                        # a file left unread or refused: its content is unknown, so nothing it held goes
                        "FileTooLarge", "CommitTooLarge", "FileChanged", "AliasRefused", "MergeKeyRefused"})
Targets = dict[str, tuple[ProbeSpec, HealthSettings]]


class DesiredSource(Protocol):
    def read(self) -> Desired | None: ...  # None: unchanged since the last read


def desired_from(root: Path, files: Mapping[str, str], probe_ranges: Sequence[Network] = ()) -> Desired:
    """The desired state of ``files`` (loaded, schema-checked, validated) with the probes allowed to
    reach the operator's ``probe_ranges``: a node on an address they allow is no problem here (the
    orchestrator probes it), as it is none for the agent given the same setting."""
    result = check_files(files, load_schemas(), None, probe_ranges)
    state = result.state if result.state.revision is None else replace(result.state, revision=None)
    return Desired(str(root), state, tuple(result.problems), None, None, result.rejected)


def _digest(files: Mapping[str, str]) -> bytes:
    """What tells one tree of files from another (the texts are not kept between polls)."""
    h = hashlib.blake2b(digest_size=32)
    for name, text in files.items():
        for part in (name, text):
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "big"))
            h.update(data)
    return h.digest()


class DirectorySource:
    """A plain directory, re-read every poll (only a change of its YAML files counts)."""

    def __init__(self, root: Path, probe_ranges: Sequence[Network] = ()) -> None:
        self.root = root
        self.probe_ranges = tuple(probe_ranges)  # the operator's (--probe-allow-ranges), for validation
        self._seen: bytes | None = None  # the digest of the files last read

    def read(self) -> Desired | None:
        if not self.root.is_dir():
            raise ConfigError(f"desired repository {self.root} is not a directory")
        files = read_tree(self.root)
        seen = _digest(files)
        if seen == self._seen:
            return None
        self._seen = seen
        return desired_from(self.root, files, self.probe_ranges)


class GitDesiredSource:
    """A git remote through GitSource: ``ls-remote`` each poll, a fetch only for a new head."""

    def __init__(self, source: Any, root: Path, probe_ranges: Sequence[Network] = ()) -> None:
        self.source = source
        self.root = root
        self.probe_ranges = tuple(probe_ranges)
        self._sha: str | None = None

    def read(self) -> Desired | None:
        sha = self.source.remote_head()
        if sha == self._sha:
            return None
        fetched = self.source.fetch(sha)
        self._sha = sha
        return desired_from(self.root, fetched.files, self.probe_ranges)


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


def hold_addresses(state: DesiredState, previous: DesiredState | None, pool: str) -> tuple[DesiredState, list[str]]:
    """The pool with IP addresses only: a node whose ``ip`` is not one keeps the pool's last
    good version when there is one, else that node is left out (validation reports it too)."""
    current = next((p for p in state.node_pools if p.name == pool), None)
    wrong = [(node, why) for node in (current.nodes if current else ()) if (why := ip_error(node.ip)) is not None]
    if current is None or not wrong:
        return state, []
    reasons = "; ".join(f"node {shown(node.name)}: ip {why}" for node, why in wrong)
    before = next((p for p in previous.node_pools if p.name == pool), None) if previous is not None else None
    if before is not None and all(ip_error(n.ip) is None for n in before.nodes):
        chosen, note = before, f"NodePool {pool}: {reasons}: its last good version is kept"
    else:
        bad = {id(node) for node, _ in wrong}
        chosen = replace(current, nodes=tuple(n for n in current.nodes if id(n) not in bad))
        note = f"NodePool {pool}: {reasons}: left out"
    pools = tuple(chosen if p is current else p for p in state.node_pools)
    return replace(state, node_pools=pools), [note]


def hold_fenced(state: DesiredState, previous: DesiredState | None,
                pool: str) -> tuple[DesiredState, dict[str, str], list[str]]:
    """The tenants `gitdns.core.checks.tenants` refuses (name -> why), after giving each of
    ``pool``'s refused tenants its last good version when that one is not refused."""
    refused = refused_tenants(state)
    earlier = {t.name: t for t in previous.tenants if t.node_pool == pool} if previous is not None else {}
    swap = {id(t): earlier[t.name] for t in state.tenants
            if t.node_pool == pool and t.name in refused and t.name in earlier and earlier[t.name] != t}
    if not swap:
        return state, refused, []
    trial = refused_tenants(replace(state, tenants=tuple(swap.get(id(t), t) for t in state.tenants)))
    swap = {key: old for key, old in swap.items() if old.name not in trial}
    if not swap:
        return state, refused, []
    kept = replace(state, tenants=tuple(swap.get(id(t), t) for t in state.tenants))
    notes = [f"Tenant {old.name}: {refused[old.name]}: its last good version is kept" for old in swap.values()]
    return kept, refused_tenants(kept), notes


def pool_targets(pool: NodePool, nodes: tuple[Node, ...], headers: tuple[tuple[str, str], ...] = (),
                 reach: ProbeReach = ProbeReach()) -> tuple[Targets, list[str], dict[str, str]]:  # noqa: B008
    """One probe per node (target id: the node name; the first of a duplicated name wins);
    ``headers`` come from the pool's ``healthCheck.headersSecret``.  Also the nodes that are not
    probed (name -> why): a healthEndpoint whose host is not the node's ip, or an address the
    operator's probe ranges ``reach`` do not allow (the prober would refuse it at every round)."""
    settings = HealthSettings.for_node_pool(pool.health)
    targets: Targets = {}
    notes: list[str] = []
    refused: dict[str, str] = {}
    for node in nodes:
        if node.name in targets or node.name in refused:
            notes.append(f"node {node.name}: listed twice; the first is probed")
            continue
        try:
            spec = node_probe(node.name, node, pool.health, headers=headers)
        except TargetRefused as exc:
            refused[node.name] = str(exc)
            continue
        except ValueError as exc:
            notes.append(str(exc))
            continue
        why = reach.refusal(spec.address)
        if why:
            refused[node.name] = f"node {node.name}: {why} (GITDNS_PROBE_ALLOW_RANGES)"
            continue
        targets[node.name] = (spec, settings)
    return targets, notes, refused


def discover_nodes(api: Any, pool: NodePool) -> tuple[Node, ...]:
    """Kubernetes Nodes matching the pool's label selector, by InternalIP; their health
    endpoint from the pool's check (``http://<ip>:15021/healthz/ready`` by default)."""
    if not pool.discovery_selector:
        return ()
    found = []
    for item in api.list_node(label_selector=pool.discovery_selector, _request_timeout=10).items:
        addresses = (item.status.addresses or []) if item.status is not None else []
        ip = next((a.address for a in addresses if a.type == "InternalIP"), None)
        if ip is None or ip_error(ip) is not None:
            continue
        host = f"[{ip}]" if ":" in ip else ip
        check = pool.health
        found.append(Node(item.metadata.name, ip, f"{check.protocol.lower()}://{host}:{check.port}{check.path}"))
    return tuple(sorted(found, key=lambda n: n.name))
