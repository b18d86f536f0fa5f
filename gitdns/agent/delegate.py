"""Delegation through git in the agent: a primary reads the remotes' status branches.

A remote's side (`remote_endpoints`) and the primary's per-zone inputs are in
`gitdns.reconcile.delegation`.

A **primary** reads every status branch once per pass (`StatusInputs`), and per zone hands the
pure merge (`gitdns.core.delegation`) the remotes' payloads.  Reading the branches is one
``git fetch``; a digest of what matters (payloads, and who is stale now) tells whether anything
changed since the last pass, so an idle primary plans nothing.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gitdns.core.delegation import Payload, is_stale, payload_from_status, remotes_of
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster
from gitdns.core.status.doc import StatusTree
from gitdns.core.status.doc import load as load_yaml
from gitdns.errors import GitdnsError

log = logging.getLogger(__name__)

@dataclass(slots=True)
class StatusInputs:
    """Every cluster's status branch, parsed for a primary: modes and per-zone payloads."""

    modes: dict[str, str] = field(default_factory=dict)  # cluster id -> mode its status says
    payloads: dict[str, dict[str, Payload]] = field(default_factory=dict)  # zone domain -> id -> payload
    problems: list[str] = field(default_factory=list)
    error: str = ""  # the branches could not be read: nothing changes this pass

    def for_zone(self, domain: str) -> dict[str, Payload]:
        return self.payloads.get(domain, {})


def parse_trees(trees: Mapping[str, StatusTree], own_id: str) -> StatusInputs:
    out = StatusInputs()
    for cluster_id, tree in sorted(trees.items()):
        if cluster_id == own_id or "summary.yaml" not in tree.files:
            continue
        try:
            summary = load_yaml(tree.files["summary.yaml"])
        except ValueError as exc:
            out.problems.append(f"{cluster_id}: summary.yaml unreadable: {exc}")
            continue
        mode = str(summary.get("mode") or "default")
        out.modes[cluster_id] = mode
        if mode != "remote":
            continue
        for path, text in tree.files.items():
            if not (path.startswith("zones/") and path.endswith(".yaml")):
                continue
            try:
                doc = load_yaml(text)
            except ValueError as exc:
                out.problems.append(f"{cluster_id}: {path} unreadable: {exc}")
                continue
            payload, problems = payload_from_status(cluster_id, summary, doc)
            out.problems.extend(f"{cluster_id}: {path}: {p}" for p in problems)
            if payload is not None:
                out.payloads.setdefault(str(doc.get("zone") or path[6:-5]), {})[cluster_id] = payload
    return out


class DelegationSource:
    """Reads the status branches for a primary and says whether a new pass is needed."""

    def __init__(self, read: Callable[[], Mapping[str, StatusTree]], *, stale_after: float,
                 default_poll: float, clock: Callable[[], float]) -> None:
        self._read = read
        self.stale_after = stale_after
        self.default_poll = default_poll
        self.clock = clock
        self.inputs = StatusInputs()
        self.digest = ""

    def refresh(self, desired: Desired, own: Cluster | None) -> bool:
        """Re-read; True when a primary pass would now plan something different."""
        own_id = own.id if own else ""
        try:
            trees = self._read()
        except GitdnsError as exc:
            log.warning("status branches unreadable: error=%s", exc)
            self.inputs.error = f"status branches unreadable: {exc}; the last merge stays"
            return False
        self.inputs = parse_trees(trees, own_id)
        digest = self._digest(desired, own_id)
        changed = digest != self.digest
        self.digest = digest
        return changed

    def remotes(self, desired: Desired, own_id: str) -> list[Cluster]:
        return remotes_of(desired.state, self.inputs.modes, own_id)

    def _digest(self, desired: Desired, own_id: str) -> str:
        now = self.clock()
        h = hashlib.sha256()
        for remote in self.remotes(desired, own_id):
            for domain, payloads in sorted(self.inputs.payloads.items()):
                payload = payloads.get(remote.id)
                if payload is None:
                    continue
                stale = is_stale(payload, now, self.stale_after, self.default_poll)
                h.update(f"{remote.id}|{domain}|{stale}|{payload.revision}|".encode())
                h.update(repr(payload.records).encode())
        return h.hexdigest()


def status_reader(url: str, workdir: Any, timeout: float, auth: Any = None) -> Callable[[], Mapping[str, StatusTree]]:
    """Every status branch with one fetch (`gitdns.adapters.status.branch.read_all`), over the
    agent's git transport (``auth``: a `GitAuth`)."""
    def read() -> Mapping[str, StatusTree]:
        from gitdns.adapters.status.branch import read_all

        return read_all(url, workdir=workdir, timeout=timeout, auth=auth)
    return read
