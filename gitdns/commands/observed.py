"""The PR preview's discovered gateways (docs/agent.md, "Gateways discovered from the cluster").

A gateway that leaves out its addresses in git is read by its cluster's agent from the cluster
itself; the agent publishes what it read on its status branch (``gateways.yaml``).  The preview
(`gitdns plan --all-clusters`) has no cluster to read: it uses that last published observation
and says so ("addresses observed by eu-west-1 at …").  A gateway never observed (no status
branch, no entry, or an entry saying it was never read) is shown as such and publishes nothing
in the preview: nothing is guessed.  Values read back from a status branch are checked again
(an address that is not an IP address or host name is left out).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gitdns.core.addresses import address_error, host_error
from gitdns.core.desired import Desired
from gitdns.core.model import Listener
from gitdns.core.model.build import with_observed
from gitdns.core.problems import shown
from gitdns.core.status.doc import load as load_doc
from gitdns.core.status.report import published_gateways


def unobserved(desired: Desired, cluster_id: str) -> list[str]:
    """The discovered gateways of ``cluster_id`` that its agent never published an observation
    of ("namespace/name"): a one-shot verb acting as that cluster would withdraw their records."""
    cluster = next((c for c in desired.state.clusters if c.id == cluster_id), None)
    if cluster is None or not any(g.discovered for g in cluster.gateways):
        return []
    from gitdns.adapters.git.rev import status_files

    files = status_files(Path(desired.root), [cluster.id], ("gateways.yaml",)).get(cluster.id, {})
    text = files.get("gateways.yaml", "")
    try:
        published = published_gateways(load_doc(text)) if text else {}
    except ValueError:
        published = {}
    out = []
    for gateway in (g for g in cluster.gateways if g.discovered):
        seen = published.get((gateway.namespace, gateway.name))
        if seen is None or seen.state == "unobserved":
            out.append(f"{gateway.namespace}/{gateway.name}")
    return out


def observed_gateways(desired: Desired) -> tuple[Desired, list[str]]:
    """``desired`` with every cluster's discovered gateways as their status branches last
    published them, and one note per discovered gateway saying where its addresses come from."""
    clusters = [c for c in desired.state.clusters if any(g.discovered for g in c.gateways)]
    if not clusters:
        return desired, []
    from gitdns.adapters.git.rev import status_files

    branches = status_files(Path(desired.root), [c.id for c in clusters], ("gateways.yaml",))
    state, notes = desired.state, []
    for cluster in clusters:
        text = branches.get(cluster.id, {}).get("gateways.yaml", "")
        try:
            published = published_gateways(load_doc(text)) if text else {}
        except ValueError:
            published = {}
        observed: dict[tuple[str, str], tuple[tuple[str, ...], tuple[Listener, ...]] | None] = {}
        for gateway in (g for g in cluster.gateways if g.discovered):
            key, where = (gateway.namespace, gateway.name), f"gateway {gateway.namespace}/{gateway.name}"
            seen = published.get(key)
            if seen is None or seen.state == "unobserved":
                notes.append(f"{where} of {cluster.name}: addresses never observed by {cluster.name} (its status "
                             "branch publishes none): nothing is shown for it")
                continue
            if seen.state == "missing":
                observed[key] = None
                notes.append(f"{where} of {cluster.name}: not found in the cluster by {cluster.name} at "
                             f"{seen.observed_at}: nothing is shown for it")
                continue
            addresses = tuple(a for a in seen.addresses if address_error(a) is None)
            listeners = tuple(Listener(h, n) for h, n in seen.listeners if host_error(h.removeprefix("*.")) is None)
            observed[key] = (addresses, listeners)
            shown_addresses = ", ".join(shown(a) for a in addresses) or "none"
            notes.append(f"{where} of {cluster.name}: addresses observed by {cluster.name} at {seen.observed_at}: "
                         f"{shown_addresses}")
        state = with_observed(state, cluster.id, observed)
    return (desired if state is desired.state else replace(desired, state=state)), notes
