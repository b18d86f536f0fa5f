"""Delegation through Kubernetes (Kuadrant's "Cluster Aware DNSRecord Delegation" RFC): source
DNSRecords, owners and status entries (pure).

A primary reads ``kuadrant.io/v1alpha1`` DNSRecords on its own cluster and on every remote
cluster, groups them by ``(namespace, rootHost)`` and merges each group into one
authoritative DNSRecord on the primary.  This module holds the pure half:

* which records delegate (`is_delegating`): not an authoritative record itself, and either
  ``spec.delegate: true`` (Kuadrant's flag) or no ``spec.providerRef`` (the RFC: a record
  without a provider is published by a primary); a record with its own provider and no
  ``delegate`` publishes itself and is left alone;
* each record's owner (`owner_id`): ``spec.ownerID``, else ``status.ownerID`` (Kuadrant sets
  one for every record it reconciles), else a stable id from cluster, namespace and name;
* the owner → cluster map kept in an annotation of the authoritative record, so a primary
  knows whose endpoints to keep when a cluster cannot be reached and whose to drop when a
  record or a cluster secret is gone;
* the per-primary status entry written back on each source record, under
  ``status.remoteRecordStatuses[<primary cluster id>]`` as Kuadrant's multi-primary support
  does (dns-operator #571), so primaries never overwrite each other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitdns.core.endpoints import SourceEndpoints, is_authoritative, kuadrant_hash, root_host, source_endpoints
from gitdns.core.jsonread import strict_loads

OWNERS_ANNOTATION = "gitdns.io/delegation-owners"  # JSON {owner id: cluster} on the authoritative record
REMOTE_STATUSES = "remoteRecordStatuses"  # Kuadrant's per-primary status map
LOCAL_CLUSTER = "local"  # the primary's own cluster in results and in the owner map
READY = "Ready"
MERGED = "gitdns.io/Merged"

# reasons of the conditions written on source records (Kubernetes status, not gitdns's status branch)
PROVIDER_SUCCESS = "ProviderSuccess"  # Kuadrant's reason: merged and published
MERGED_NOT_PUBLISHED = "MergedNotPublished"
NAMESPACE_MISSING = "NamespaceMissingOnPrimary"
INVALID_ENDPOINTS = "InvalidEndpoints"
DUPLICATE_OWNER = "DuplicateOwner"
CONFLICT = "Conflict"
WRITE_FAILED = "WriteFailed"
ENDPOINTS_MERGED = "EndpointsMerged"
STATUS_REASONS = frozenset({PROVIDER_SUCCESS, MERGED_NOT_PUBLISHED, NAMESPACE_MISSING, INVALID_ENDPOINTS,
                            DUPLICATE_OWNER, CONFLICT, WRITE_FAILED, ENDPOINTS_MERGED,
                            "DefaultProviderNotFound", "MultipleDefaultProviders", "NoZoneForHost"})

_OWNER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One delegating DNSRecord on one cluster."""

    cluster: str  # the cluster secret's name, or LOCAL_CLUSTER
    namespace: str
    name: str
    root: str  # spec.rootHost, normalised, ``*.`` dropped
    owner: str
    generation: int
    endpoints: SourceEndpoints
    status_entry: Mapping[str, Any] | None = None  # this primary's entry as the record holds it

    @property
    def ref(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.name}"


def is_delegating(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata") or {}
    if is_authoritative(meta.get("labels")):
        return False
    spec = obj.get("spec") or {}
    return spec.get("delegate") is True or not spec.get("providerRef")


def owner_id(obj: Mapping[str, Any], cluster: str) -> str:
    """``spec.ownerID``, ``status.ownerID``, else ``k8s-<hash8(cluster/namespace/name)>``."""
    for holder in (obj.get("spec") or {}, obj.get("status") or {}):
        value = holder.get("ownerID")
        if isinstance(value, str) and _OWNER_RE.fullmatch(value):
            return value
    meta = obj.get("metadata") or {}
    return "k8s-" + kuadrant_hash(f"{cluster}/{meta.get('namespace', '')}/{meta.get('name', '')}", 8)


def parse_source(obj: Mapping[str, Any], cluster: str, primary_id: str) -> SourceRecord | None:
    """The source record, or None when the DNSRecord does not delegate."""
    if not is_delegating(obj):
        return None
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    raw_root = str(spec.get("rootHost") or "")
    statuses = (obj.get("status") or {}).get(REMOTE_STATUSES) or {}
    entry = statuses.get(primary_id) if isinstance(statuses, Mapping) else None
    return SourceRecord(
        cluster=cluster, namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        root=root_host(raw_root), owner=owner_id(obj, cluster), generation=int(meta.get("generation") or 0),
        endpoints=source_endpoints(raw_root, spec.get("endpoints")),
        status_entry=entry if isinstance(entry, Mapping) else None,
    )


def group_sources(sources: Sequence[SourceRecord]) -> dict[tuple[str, str], list[SourceRecord]]:
    groups: dict[tuple[str, str], list[SourceRecord]] = {}
    for src in sorted(sources, key=lambda s: (s.namespace, s.root, s.cluster, s.name)):
        groups.setdefault((src.namespace, src.root), []).append(src)
    return groups


def split_duplicates(sources: Sequence[SourceRecord]) -> tuple[list[SourceRecord], list[SourceRecord]]:
    """Sources of one group with distinct owners, and those repeating an owner with other
    endpoints (refused; the same record seen twice, e.g. the primary also listed as a remote,
    is kept once)."""
    kept: dict[str, SourceRecord] = {}
    refused: list[SourceRecord] = []
    for src in sources:
        first = kept.get(src.owner)
        if first is None:
            kept[src.owner] = src
        elif first.endpoints.records != src.endpoints.records or not src.endpoints.ok:
            refused.append(src)
    return list(kept.values()), refused


def decode_owners(annotations: Mapping[str, str] | None) -> dict[str, str]:
    try:  # anyone who may edit the object wrote it: read strictly, never a RecursionError
        value = strict_loads((annotations or {}).get(OWNERS_ANNOTATION) or "{}")
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def encode_owners(owners: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(owners.items())), separators=(",", ":"))


def removable(owner: str, owners: Mapping[str, str], reachable: frozenset[str], configured: frozenset[str],
              all_reachable: bool) -> bool:
    """May the endpoints of an owner no source lists any more be removed?  Yes when its
    cluster answered this pass (the record was deleted or stopped delegating) or its cluster
    secret is gone; an owner of unknown origin only when every cluster answered."""
    cluster = owners.get(owner)
    if cluster is None:
        return all_reachable
    return cluster in reachable or (cluster != LOCAL_CLUSTER and cluster not in configured)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one source record in one pass, for its status entry."""

    ready: bool
    reason: str
    message: str
    endpoints: tuple[dict[str, Any], ...] = ()
    merged_changed: bool = False  # its endpoints changed in the authoritative record this pass
    zone: str = ""
    provider_secret: str = ""
    domain_owners: tuple[str, ...] = ()


def _condition(ctype: str, status: bool, reason: str, message: str, generation: int, now: str,
               old: Mapping[str, Any] | None, moved: bool = False) -> dict[str, Any]:
    text = "True" if status else "False"
    keep = old is not None and old.get("status") == text and not moved and old.get("lastTransitionTime")
    return {"type": ctype, "status": text, "reason": reason, "message": message, "observedGeneration": generation,
            "lastTransitionTime": old["lastTransitionTime"] if keep and old is not None else now}


def status_entry(src: SourceRecord, outcome: Outcome, primary_id: str, now: str) -> dict[str, Any]:
    """This primary's entry for ``status.remoteRecordStatuses[primary_id]`` of ``src``: a
    Ready condition (Kuadrant's type) and a ``gitdns.io/Merged`` condition whose
    lastTransitionTime is when its endpoints last changed in the authoritative record."""
    old = src.status_entry or {}
    old_conditions = {c.get("type"): c for c in old.get("conditions") or [] if isinstance(c, Mapping)}
    ready = _condition(READY, outcome.ready, outcome.reason, outcome.message, src.generation, now,
                       old_conditions.get(READY))
    merged_text = (f"endpoints merged by primary {primary_id} into the authoritative record"
                   if outcome.endpoints or outcome.ready else f"endpoints not merged by primary {primary_id}")
    merged = _condition(MERGED, bool(outcome.endpoints) or outcome.ready, ENDPOINTS_MERGED, merged_text,
                        src.generation, now, old_conditions.get(MERGED), moved=outcome.merged_changed)
    entry: dict[str, Any] = {"conditions": [ready, merged], "observedGeneration": src.generation,
                             "ownerID": src.owner, "endpoints": list(outcome.endpoints)}
    if outcome.zone:
        entry["zoneDomainName"] = outcome.zone
    if outcome.provider_secret:
        entry["providerRef"] = {"name": outcome.provider_secret}
    if outcome.domain_owners:
        entry["domainOwners"] = list(outcome.domain_owners)
    return entry


def _without_times(entry: Mapping[str, Any] | None) -> Any:
    if entry is None:
        return None
    out = dict(entry)
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                         for c in entry.get("conditions") or [] if isinstance(c, Mapping)]
    return out


def entry_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether the status must be written (timestamps alone never cause a write)."""
    return bool(_without_times(old) != _without_times(new))
