"""Delegation through Kubernetes (Kuadrant's "Cluster Aware DNSRecord Delegation" RFC): a primary
merges the DNSRecords of its own and of remote clusters into authoritative DNSRecords and
publishes them.

One pass (`KubeDelegation.run_once`, safe to call every agent cycle):

1. list the cluster secrets (`gitdns.adapters.kube.clusters`), the primary's DNSRecords and
   its namespaces, and every remote's DNSRecords — list calls only when nothing changed;
2. group the delegating records (`gitdns.core.kubesources`) by ``(namespace, rootHost)``
   and check the delegation RFC's namespace requirements: the namespace must exist on the primary
   (else the group is refused and said so on each record), and the default provider secret
   must be in it (else the group is merged but not published);
3. merge each group into its authoritative record (`gitdns.kubedelegation.merge`), publish the
   record's data to the zone's provider (`gitdns.kubedelegation.publish`), delete the record once
   it is empty and withdrawn from DNS.  When a source carries a failover group
   (``status.group``, the field dns-operator sets and its primary reads), the zone's active
   groups are read first (`Publisher.active_groups`: the zone's TXT and, when the pass is
   given the desired state, git's ActiveGroups, decided as on the git path) and a source of an
   inactive group contributes nothing;
4. write this primary's entry in ``status.remoteRecordStatuses[<cluster id>]`` of every
   source record, by merge patch on ``/status`` (other primaries' entries are untouched),
   only when something in it changed.

A remote that cannot be reached changes nothing — its endpoints stay — and the other
remotes go on; it is reported in the result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitdns.adapters.dnsrecords import AuthRecords, core_api, list_dnsrecords, namespace_names, patch_dnsrecord_status
from gitdns.adapters.kube.clusters import ClusterSecrets, Discovery
from gitdns.core.endpoints import endpoints_from_records, is_authoritative, root_host
from gitdns.core.kubesources import (
    DUPLICATE_OWNER,
    INVALID_ENDPOINTS,
    LOCAL_CLUSTER,
    MERGED_NOT_PUBLISHED,
    NAMESPACE_MISSING,
    PROVIDER_SUCCESS,
    REMOTE_STATUSES,
    Outcome,
    SourceRecord,
    entry_changed,
    group_sources,
    parse_source,
    status_entry,
)
from gitdns.core.model import DesiredState
from gitdns.errors import GitdnsError, UnreachableError
from gitdns.kubedelegation.merge import INACTIVE_GROUP, ClusterView, GroupMerge, GroupResult, Groups, merge_group
from gitdns.kubedelegation.publish import ProviderFactory, Published, Publisher
from gitdns.providers.fences import STRICT, Fences

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024
PUBLISH_REASONS = ("DefaultProviderNotFound", "MultipleDefaultProviders", "NoZoneForHost")


@dataclass(frozen=True, slots=True)
class ClusterReport:
    name: str  # cluster secret name, or "local"
    reachable: bool
    records: int = 0  # delegating records listed
    error: str = ""


@dataclass(frozen=True, slots=True)
class HostReport:
    """One ``(namespace, rootHost)`` group."""

    namespace: str
    root_host: str
    record: str  # the authoritative record ("" when none)
    merged: tuple[str, ...] = ()  # sources merged (cluster/namespace/name)
    refused: tuple[tuple[str, str], ...] = ()  # (source, reason: message)
    removed_owners: tuple[str, ...] = ()
    kept_owners: tuple[str, ...] = ()  # owners of unreachable clusters whose endpoints stay
    published: bool = False
    zone: str = ""
    violations: tuple[str, ...] = ()  # the delegation RFC's namespace requirements
    errors: tuple[str, ...] = ()
    deleted: bool = False  # the empty authoritative record was removed
    inactive: tuple[tuple[str, str], ...] = ()  # (source, its group): a failover group not active
    active_groups: tuple[str, ...] | None = None  # the zone's active groups when read (empty: all)


@dataclass(frozen=True, slots=True)
class DelegationResult:
    clusters: tuple[ClusterReport, ...] = ()
    hosts: tuple[HostReport, ...] = ()
    errors: tuple[str, ...] = ()
    status_writes: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors and all(c.reachable for c in self.clusters) and all(
            not h.errors and not h.refused and not h.violations for h in self.hosts)

    def host(self, namespace: str, root: str) -> HostReport | None:
        return next((h for h in self.hosts if h.namespace == namespace and h.root_host == root), None)

    def cluster(self, name: str) -> ClusterReport | None:
        return next((c for c in self.clusters if c.name == name), None)


@dataclass(slots=True)
class _Listing:
    sources: list[SourceRecord] = field(default_factory=list)
    auth: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    clients: dict[str, Any] = field(default_factory=dict)  # cluster -> api client
    groups: dict[str, str] = field(default_factory=dict)  # source ref -> status.group (grouped only)
    reports: list[ClusterReport] = field(default_factory=list)


def _timestamp(clock: Callable[[], float]) -> str:
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeDelegation:
    """A primary's delegation through Kubernetes.  ``primary`` is the ApiClient of the
    primary's own cluster; ``cluster_id`` keys this primary's status entries; ``owner_id``
    (default the cluster id) owns what it publishes in the real zones."""

    def __init__(self, primary: Any, cluster_id: str, *, secrets: ClusterSecrets,
                 provider_factory: ProviderFactory | None = None, base_dir: Path = Path("."),
                 owner_id: str | None = None, clock: Callable[[], float] = time.time,
                 republish_interval: float = 900.0, metrics: Any | None = None, fences: Fences = STRICT) -> None:
        self.primary = primary
        self.cluster_id = cluster_id
        self.secrets = secrets
        self.clock = clock
        self.auth = AuthRecords(primary)
        self._core: Any = core_api(primary)
        self.publisher = Publisher(self._core, owner_id or cluster_id, base_dir=base_dir,
                                   factory=provider_factory, clock=clock,
                                   republish_interval=republish_interval, metrics=metrics, fences=fences)

    @property
    def metrics(self) -> Any | None:
        """The agent's metrics (zone writes and stale-write retries)."""
        return self.publisher.metrics

    @metrics.setter
    def metrics(self, value: Any | None) -> None:
        self.publisher.metrics = value

    # --- one pass ---------------------------------------------------------------------------

    def run_once(self, state: DesiredState | None = None) -> DelegationResult:
        """One pass.  ``state`` (the agent's desired state) adds git's ActiveGroups document
        of a zone to what the zone's TXT says, as on the git path; without it the zone's TXT
        alone decides (kept in step with git by the agents that serve the zone)."""
        started = time.monotonic()
        try:
            discovery = self.secrets.discover()
            listing = self._list(discovery)
            namespaces = self._namespaces()
        except GitdnsError as exc:
            log.warning("delegation pass skipped: error=%s", exc)
            return DelegationResult(errors=(str(exc),))
        self.publisher.begin_pass()
        view = ClusterView(frozenset(c.name for c in listing.reports if c.reachable),
                           frozenset(discovery.names) | {LOCAL_CLUSTER})
        groups = group_sources(listing.sources)
        keys = sorted(set(groups) | set(listing.auth))
        outcomes: dict[str, Outcome] = {}
        hosts: list[HostReport] = []
        merged: dict[tuple[str, str], tuple[GroupResult, GroupMerge]] = {}
        for key in keys:
            sources = groups.get(key, [])
            if key[0] not in namespaces:
                hosts.append(self._namespace_missing(key, sources, outcomes))
                continue
            found = self._groups(key, sources, listing, state)
            if isinstance(found, GroupResult):
                merged[key] = (found, GroupMerge(self.auth, found, view))
                continue
            merged[key] = merge_group(self.auth, key[0], key[1], sources, listing.auth.get(key), view, found)
        wanted = {k: frozenset(r.name for r in res.data) for k, (res, _) in merged.items()}
        for key, (res, merge) in merged.items():
            others = frozenset().union(*(v for k, v in wanted.items() if k != key))
            hosts.append(self._finish(res, merge, groups.get(key, []), others, outcomes))
        writes = self._write_statuses(listing, outcomes)
        result = DelegationResult(tuple(listing.reports), tuple(sorted(hosts, key=lambda h: (h.namespace,
                                                                                          h.root_host))),
                                  tuple(f"cluster secret {n}: {why}" for n, why in discovery.problems.items()),
                                  writes)
        log.info("delegation pass: clusters=%d unreachable=%d hosts=%d refused=%d status_writes=%d seconds=%.3f",
                 len(result.clusters), sum(not c.reachable for c in result.clusters), len(result.hosts),
                 sum(len(h.refused) for h in result.hosts), writes, time.monotonic() - started)
        return result

    def close(self) -> None:
        self.secrets.close()

    # --- listing ----------------------------------------------------------------------------

    def _list(self, discovery: Discovery) -> _Listing:
        listing = _Listing()
        local = list_dnsrecords(self.primary)  # the primary must answer: else the pass stops
        clusters: list[tuple[str, Any, list[dict[str, Any]] | None]] = [(LOCAL_CLUSTER, self.primary, local)]
        clusters += [(name, api, None) for name, api in sorted(discovery.clients.items())]
        for name in sorted(discovery.problems):
            listing.reports.append(ClusterReport(name, False, error=discovery.problems[name]))
        for name, api_client, items in clusters:
            try:
                objs = items if items is not None else list_dnsrecords(api_client)
            except UnreachableError as exc:
                listing.reports.append(ClusterReport(name, False, error=str(exc)))
                log.warning("remote cluster unreachable: cluster=%s error=%s", name, exc)
                continue
            found: list[SourceRecord] = []
            for obj in objs:
                src = parse_source(obj, name, self.cluster_id)
                if src is None:
                    continue
                found.append(src)
                group = (obj.get("status") or {}).get("group")
                if isinstance(group, str) and group.strip():
                    listing.groups[src.ref] = group.strip()
            listing.sources.extend(found)
            listing.clients[name] = api_client
            listing.reports.append(ClusterReport(name, True, len(found)))
        for obj in local:
            meta = obj.get("metadata") or {}
            if is_authoritative(meta.get("labels")):
                key = (str(meta.get("namespace")), root_host(str((obj.get("spec") or {}).get("rootHost") or "")))
                listing.auth[key] = obj
        listing.reports.sort(key=lambda c: (c.name != LOCAL_CLUSTER, c.name))
        return listing

    def _groups(self, key: tuple[str, str], sources: Sequence[SourceRecord], listing: _Listing,
                state: DesiredState | None) -> Groups | GroupResult | None:
        """The failover groups of one merge; None when no source is grouped (nothing read); a
        failed `GroupResult` (nothing merged, the record left as it is) when the zone's active
        groups cannot be read."""
        of = {s.ref: listing.groups[s.ref] for s in sources if s.ref in listing.groups}
        if not of:
            return None
        try:
            active, zone = self.publisher.active_groups(key[0], key[1], state)
        except GitdnsError as exc:
            why = f"{key[0]}/{key[1]}: the zone's active groups cannot be read, nothing merged: {exc}"
            log.warning("active groups not read: namespace=%s root=%s error=%s", key[0], key[1], exc)
            return GroupResult(key[0], key[1], errors=[why])
        return Groups(zone, active, of)

    def _namespaces(self) -> frozenset[str]:
        return namespace_names(self._core)

    # --- per group --------------------------------------------------------------------------

    def _namespace_missing(self, key: tuple[str, str], sources: Sequence[SourceRecord],
                           outcomes: dict[str, Outcome]) -> HostReport:
        why = (f"namespace {key[0]} does not exist on primary {self.cluster_id}: a delegating DNSRecord must be "
               "in a namespace of the same name on the primary")
        for src in sources:
            outcomes[src.ref] = Outcome(False, NAMESPACE_MISSING, why)
        return HostReport(key[0], key[1], "", refused=tuple((s.ref, f"{NAMESPACE_MISSING}: {why}") for s in sources),
                          violations=(why,))

    def _finish(self, res: GroupResult, merge: GroupMerge, sources: Sequence[SourceRecord],
                others: frozenset[str], outcomes: dict[str, Outcome]) -> HostReport:
        published = Published(False)
        violations: list[str] = []
        deleted = False
        errors = list(res.errors)
        if res.retries and self.metrics is not None:
            self.metrics.record_stale_retries(res.root, res.retries)
        try:
            if res.record and not res.errors:
                published = self.publisher.publish(res.namespace, res.root, res.data, others)
                if not published.ok:
                    errors.append(f"publish: {published.reason}: {published.message}")
                    if published.reason in ("DefaultProviderNotFound", "MultipleDefaultProviders"):
                        violations.append(published.message)
                elif not res.data:
                    deleted = merge.delete_if_empty()
                    if deleted:
                        self.publisher.forget(res.namespace, res.root)
        except GitdnsError as exc:
            errors.append(f"{res.namespace}/{res.root}: {exc}")
        except Exception as exc:  # one group's unexpected failure must not stop the pass
            errors.append(f"{res.namespace}/{res.root}: unexpected {type(exc).__name__}")
            log.warning("publish failed: namespace=%s root=%s error=%s", res.namespace, res.root, type(exc).__name__)
        owners = res.owners
        for src in sources:
            outcomes[src.ref] = self._outcome(src, res, published, owners)
        refused = tuple((ref, f"{v.reason}: {v.message}") for ref, v in sorted(res.verdicts.items())
                        if not v.ready and v.reason != INACTIVE_GROUP)
        inactive = tuple((ref, merge.groups.of.get(ref, "")) for ref, v in sorted(res.verdicts.items())
                         if v.reason == INACTIVE_GROUP)
        merged = tuple(ref for ref, v in sorted(res.verdicts.items()) if v.ready)
        active = tuple(sorted(merge.groups.active)) if merge.groups.of else None
        return HostReport(res.namespace, res.root, res.record, merged, refused, tuple(res.removed),
                          tuple(res.kept), published.ok, published.zone, tuple(violations), tuple(errors), deleted,
                          inactive, active)

    def _outcome(self, src: SourceRecord, res: GroupResult, published: Published,
                 owners: tuple[str, ...]) -> Outcome:
        verdict = res.verdicts.get(src.ref)
        if verdict is None:  # the group failed before this record was planned
            ready, reason, message, changed = False, "WriteFailed", "; ".join(res.errors) or "not merged", False
        elif not verdict.ready:
            ready, reason, message, changed = False, verdict.reason, verdict.message, verdict.merged_changed
        elif published.ok:
            ready, reason, changed = True, PROVIDER_SUCCESS, verdict.merged_changed
            message = (f"merged into {res.namespace}/{res.record} and published to zone {published.zone} by "
                       f"primary {self.cluster_id}")
        else:
            ready, changed = False, verdict.merged_changed
            reason = published.reason if published.reason in PUBLISH_REASONS else MERGED_NOT_PUBLISHED
            message = (f"merged into {res.namespace}/{res.record} by primary {self.cluster_id}, not published: "
                       f"{published.message}")
        merged = verdict is not None and (verdict.ready or reason not in (INVALID_ENDPOINTS, DUPLICATE_OWNER,
                                                                          INACTIVE_GROUP))
        endpoints = tuple(endpoints_from_records(src.endpoints.records)) if merged and res.record else ()
        return Outcome(ready, reason, message[:MAX_MESSAGE], endpoints, changed, published.zone, published.secret,
                       owners)

    # --- status write-back ------------------------------------------------------------------

    def _write_statuses(self, listing: _Listing, outcomes: Mapping[str, Outcome]) -> int:
        now = _timestamp(self.clock)
        writes = 0
        for src in listing.sources:
            outcome = outcomes.get(src.ref)
            api_client = listing.clients.get(src.cluster)
            if outcome is None or api_client is None:
                continue
            entry = status_entry(src, outcome, self.cluster_id, now)
            if not entry_changed(src.status_entry, entry):
                continue
            body = {"status": {REMOTE_STATUSES: {self.cluster_id: entry}}}
            try:
                patch_dnsrecord_status(api_client, src.namespace, src.name, body)
                writes += 1
            except UnreachableError as exc:
                log.warning("status write failed: source=%s error=%s", src.ref, exc)
        return writes


KUBE_OWNER_SUFFIX = "-kube"  # the owner id of what a primary publishes for Kubernetes remotes


def build_kube_delegation(config: Any, cluster_id: str, metrics: Any | None = None) -> KubeDelegation:
    """Everything from the agent's configuration and in-cluster credentials (else the
    kubeconfig): ``kube_delegation`` must be on; cluster secrets in
    ``cluster_secret_namespace`` (empty: ``pod_namespace``, else kuadrant-system) labelled
    ``cluster_secret_label``; ``state_dir`` anchors a `local` store's relative path; an
    unchanged record is republished every ``quiet_period``.  Set ``.metrics`` to the agent's."""
    from gitdns.adapters.kube.client import api_client
    from gitdns.errors import ConfigError

    if not getattr(config, "kube_delegation", False):
        raise ConfigError("kube delegation is off: set --kube-delegation (GITDNS_KUBE_DELEGATION=true)")
    primary = api_client("kube delegation")
    namespace = config.cluster_secret_namespace or getattr(config, "pod_namespace", "") or ""
    secrets = ClusterSecrets(primary, namespace, config.cluster_secret_label)
    base_dir = Path(getattr(config, "state_dir", ".") or ".")
    from gitdns.providers.fences import SETTINGS, fences_from

    fences = fences_from({name: getattr(config, name, "") for name in SETTINGS}, {},
                         namespace=getattr(config, "pod_namespace", "") or None)  # the agent's, as build_agent
    # its own owner id: the same agent's git-path publishing (its cluster id) must not withdraw
    # the names this path publishes, nor the other way round
    return KubeDelegation(primary, cluster_id, secrets=secrets, base_dir=base_dir,
                          owner_id=cluster_id + KUBE_OWNER_SUFFIX, metrics=metrics,
                          republish_interval=float(getattr(config, "quiet_period", 900.0) or 900.0), fences=fences)
