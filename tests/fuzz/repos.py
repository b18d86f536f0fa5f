"""The example repositories the fuzzing starts from, and which zones a document touches.

    REPOS                 name -> directory: example-repo/ and every docs/examples/*/ that is one
    repo_files(name)      its YAML files as bytes (a repository with no Cluster gets `HARNESS`,
                          a Cluster with no gateway, so an agent can run on it; it is never mutated)
    mutable(name)         the files a mutation may change
    clusters(name)        the names of its Clusters
    touched(state, body)  the zones (domains) a document touches, read from the document as it
                          was: an oracle written apart from the loader's own
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from gitdns.core.model import DesiredState
from gitdns.core.yamlparse import parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
REPOS: dict[str, Path] = {
    "example-repo": ROOT / "example-repo",
    **{p.name: p for p in sorted(EXAMPLES.iterdir()) if p.is_dir() and any(p.glob("*.yaml"))},
}
HARNESS = "zz-fuzz-harness.yaml"
_HARNESS_CLUSTER = (b"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {name: fuzz-harness}\n"
                    b"spec: {id: fuzz-harness-uid, geo: GEO-EU}\n")


@cache
def repo_files(name: str) -> dict[str, bytes]:
    base = REPOS[name]
    files = {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*.yaml"))
             if ".gitdns" not in p.parts}
    if not any(b"kind: Cluster" in text for text in files.values()):
        files[HARNESS] = _HARNESS_CLUSTER
    return files


def mutable(name: str) -> list[str]:
    return sorted(f for f in repo_files(name) if f != HARNESS)


@cache
def clusters(name: str) -> list[str]:
    out = []
    for text in repo_files(name).values():
        for doc in parse(text.decode()):
            if isinstance(doc.data, dict) and doc.data.get("kind") == "Cluster":
                out.append(doc.data["metadata"]["name"])
    return sorted(out)


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _zones_of_hosts(state: DesiredState, hosts: list[str]) -> set[str]:
    out = set()
    for host in hosts:
        zone = state.zone_for_host(host.lower().rstrip(".").removeprefix("*."))
        if zone is not None:
            out.add(zone.domain)
    return out


def _listeners(gateways: list[Any]) -> list[str]:
    return [h for g in gateways for ls in _items(_get(g, "listeners"))
            if isinstance(h := _get(ls, "hostname"), str)]


def touched(state: DesiredState, body: Any) -> set[str]:
    """The domains of the zones ``body`` (a document of a valid repository, as plain data) touches."""
    kind, spec = _get(body, "kind"), _get(body, "spec")
    name = _get(body, "metadata", "name")
    if kind == "Zone":
        zone = state.zone(name)
        return {zone.domain} if zone else set()
    if kind in ("ActiveGroups", "RecordSet") and isinstance(_get(spec, "zone"), str):
        zone = state.zone(_get(spec, "zone"))
        return {zone.domain} if zone else set()
    if kind == "RecordSet":
        names = [n for r in _items(_get(spec, "records")) if isinstance(n := _get(r, "name"), str)]
        return _zones_of_hosts(state, names)
    if kind == "Cluster":
        return _zones_of_hosts(state, _listeners(_items(_get(spec, "gateways"))))
    if kind == "DNSPolicy":
        hosts = [h for h in _items(_get(spec, "targetRef", "hosts")) if isinstance(h, str)]
        gateway, namespace = _get(spec, "targetRef", "gateway"), _get(spec, "targetRef", "namespace")
        for cluster in state.clusters:
            hosts += [ls.hostname for g in cluster.gateways if g.name == gateway and namespace in (None, g.namespace)
                      for ls in g.listeners]
        return _zones_of_hosts(state, hosts)
    if kind == "Tenant":
        return _zones_of_hosts(state, [d for d in _items(_get(spec, "domains")) if isinstance(d, str)])
    if kind == "NodePool":
        return _zones_of_hosts(state, [d for t in state.tenants if t.node_pool == name for d in t.domains])
    return set()
