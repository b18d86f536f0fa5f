"""Merge one ``(namespace, rootHost)`` group into its authoritative DNSRecord on the primary.

The authoritative record (``authoritative-record-<hash8(rootHost)>``, Kuadrant's name and
labels plus the delegation RFC's ``kuadrant.io/primary-authoritative-zone-record=<rootHost>``) is the
zone of an `EndpointProvider`; every source DNSRecord is one owner of it, planned with the
gitdns planner, so multi-owner merge, conflicts and ownership TXT work as in any zone.

* a valid source: its endpoints are its intent (one bad record is refused alone);
* an owner the record holds that no source lists any more: removed when its cluster answered
  this pass or its cluster secret is gone (`gitdns.core.kubesources.removable`), kept when
  its cluster could not be reached;
* the owner → cluster map rides in the ``gitdns.io/delegation-owners`` annotation, written
  before an owner's first endpoints land and trimmed after an owner left;
* failover groups (`Groups`): a source whose group (``status.group``, as dns-operator's
  primary reads a remote record's group) is not active in the zone contributes nothing: its
  endpoints and ownership leave the record in the same pass the active sources' land (active
  first, so the record is never empty in between; a source refused for a conflict with an
  inactive one is merged again once that one left).  Its verdict is ``MemberOfInactiveGroup``.

Stale writes (a 409 on the resource, or content changed since it was read) are re-read and
re-planned at once, with a short full-jitter backoff, up to `MAX_ATTEMPTS` times.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitdns.adapters.dnsrecords import AuthRecords
from gitdns.core.endpoints import AUTHORITATIVE_HASH_LABEL, AUTHORITATIVE_LABEL, kuadrant_hash, records_from_endpoints
from gitdns.core.groups import is_active
from gitdns.core.kubesources import (
    CONFLICT,
    DUPLICATE_OWNER,
    INVALID_ENDPOINTS,
    OWNERS_ANNOTATION,
    WRITE_FAILED,
    SourceRecord,
    decode_owners,
    encode_owners,
    removable,
    split_duplicates,
)
from gitdns.core.plan.planner import decode_zone, plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import RecordSet, ZoneSnapshot
from gitdns.core.store import apply_changes
from gitdns.errors import GitdnsError, StaleWriteError
from gitdns.providers.endpoint import EndpointProvider

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
BACKOFF_BASE = 0.01
BACKOFF_CAP = 0.5
INACTIVE_GROUP = "MemberOfInactiveGroup"  # dns-operator's reason for a record of an inactive group


@dataclass(frozen=True, slots=True)
class Groups:
    """The failover groups of one merge: the zone's active groups (empty: every group) and
    each source's group by ref (absent: ungrouped, always active)."""

    zone: str = ""
    active: frozenset[str] = frozenset()
    of: Mapping[str, str] = field(default_factory=dict)

    def inactive(self, src: SourceRecord) -> str | None:
        """The source's group when it is not active, else None."""
        group = self.of.get(src.ref)
        return None if is_active(group, self.active) else group


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Which clusters answered this pass and which have a cluster secret."""

    reachable: frozenset[str]
    configured: frozenset[str]

    @property
    def all_reachable(self) -> bool:
        return self.configured <= self.reachable


@dataclass(slots=True)
class SourceVerdict:
    ready: bool
    reason: str = ""
    message: str = ""
    merged_changed: bool = False


@dataclass(slots=True)
class GroupResult:
    namespace: str
    root: str
    record: str = ""  # the authoritative record's name ("" when there is none)
    verdicts: dict[str, SourceVerdict] = field(default_factory=dict)  # by source ref
    removed: list[str] = field(default_factory=list)  # owners whose endpoints left
    kept: list[str] = field(default_factory=list)  # owners of unreachable clusters, kept
    errors: list[str] = field(default_factory=list)
    snapshot: ZoneSnapshot | None = None  # the authoritative record after the merge
    retries: int = 0

    @property
    def data(self) -> tuple[RecordSet, ...]:
        if self.snapshot is None:
            return ()
        return tuple(sorted(decode_zone(self.snapshot).data.values(), key=lambda r: (r.name, r.type, r.set_id)))

    @property
    def owners(self) -> tuple[str, ...]:
        if self.snapshot is None:
            return ()
        return tuple(sorted({o for entries in decode_zone(self.snapshot).owners.values() for o in entries}))


def auth_selector(root: str) -> tuple[tuple[str, str | None], ...]:
    return ((AUTHORITATIVE_LABEL, "true"), (AUTHORITATIVE_HASH_LABEL, kuadrant_hash(root, 8)))


def snapshot_of(obj: Mapping[str, Any], root: str) -> ZoneSnapshot:
    records = records_from_endpoints((obj.get("spec") or {}).get("endpoints"))
    return ZoneSnapshot(root, tuple(sorted(records, key=lambda r: (r.name, r.type, r.set_id))), True,
                        str((obj.get("metadata") or {}).get("resourceVersion", "")))


def _sleep(attempt: int) -> None:
    time.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(attempt, 10))))


class GroupMerge:
    """One group's merge; ``run`` fills a `GroupResult`."""

    def __init__(self, auth: AuthRecords, result: GroupResult, view: ClusterView, groups: Groups | None = None) -> None:
        self.auth = auth
        self.groups = groups or Groups()
        self.result = result
        self.view = view
        self.root = result.root
        self.namespace = result.namespace
        self.provider = EndpointProvider(auth.api_client, result.namespace, selector=auth_selector(result.root))
        self.obj: dict[str, Any] = {}

    def run(self, sources: Sequence[SourceRecord], existing: dict[str, Any] | None) -> None:
        kept, duplicates = split_duplicates(sources)
        for src in duplicates:
            first = next(s for s in kept if s.owner == src.owner)
            self._refuse(src, DUPLICATE_OWNER, f"owner id {src.owner} is also the owner of {first.ref}")
        valid = [s for s in kept if s.endpoints.ok]
        for src in kept:
            if not src.endpoints.ok:
                self._refuse(src, INVALID_ENDPOINTS, "; ".join(src.endpoints.problems))
        inactive = [s for s in valid if self.groups.inactive(s) is not None]
        good = [s for s in valid if s not in inactive]
        if existing is None and not good:
            for src in inactive:
                self._inactive(src, False)
            return
        self.obj = self.auth.ensure(self.namespace, self.root, existing)
        self.result.record = self.obj["metadata"]["name"]
        try:
            self.result.snapshot = snapshot_of(self.obj, self.root)
        except ValueError as exc:
            self.result.errors.append(f"{self.namespace}/{self.result.record}: {exc}; not merged")
            return
        self._merge(kept, good, inactive)

    def _merge(self, listed: Sequence[SourceRecord], good: Sequence[SourceRecord],
               inactive: Sequence[SourceRecord] = ()) -> None:
        owners = decode_owners(self.obj["metadata"].get("annotations"))
        present = set(self.result.owners)
        names = {s.owner for s in listed}
        gone = sorted(present - names)
        remove = [o for o in gone if removable(o, owners, self.view.reachable, self.view.configured,
                                               self.view.all_reachable)]
        self.result.kept = [o for o in gone if o not in remove]
        wanted = {**owners, **{s.owner: s.cluster for s in good}}
        if wanted != owners:
            self._annotate(wanted)
        known = tuple(sorted(present | names))
        for src in good:
            self._sync(src, Intent(src.owner, src.endpoints.records), known)
        for src in inactive:  # after the active ones landed: the record is never empty between
            had = src.owner in self.result.owners
            if self._sync(None, Intent(src.owner, ()), known):
                self._inactive(src, had and src.owner not in self.result.owners)
        if inactive:  # a conflict with an owner of an inactive group is gone now
            for src in good:
                verdict = self.result.verdicts.get(src.ref)
                if verdict is not None and verdict.reason == CONFLICT:
                    del self.result.verdicts[src.ref]
                    self._sync(src, Intent(src.owner, src.endpoints.records), known)
        for owner in remove:
            if self._sync(None, Intent(owner, ()), known):
                self.result.removed.append(owner)
                log.info("owner withdrawn: record=%s/%s owner=%s cluster=%s", self.namespace, self.result.record,
                         owner, owners.get(owner, "unknown"))
        left = set(self.result.owners)
        trimmed = {o: c for o, c in wanted.items() if o in left or o in names}
        if trimmed != wanted:
            self._annotate(trimmed)

    def _inactive(self, src: SourceRecord, withdrawn: bool) -> None:
        active = ", ".join(sorted(self.groups.active)) or "every group"
        message = (f"group {self.groups.inactive(src)} is not active in zone {self.groups.zone} (active: {active}): "
                   "its endpoints are not merged")
        self.result.verdicts[src.ref] = SourceVerdict(False, INACTIVE_GROUP, message, merged_changed=withdrawn)
        log.info("source of an inactive group: source=%s group=%s withdrawn=%s", src.ref,
                 self.groups.inactive(src), withdrawn)

    def _annotate(self, owners: Mapping[str, str]) -> None:
        for attempt in range(MAX_ATTEMPTS):
            try:
                self.obj = self.auth.patch_meta(self.namespace, self.result.record,
                                                str(self.obj["metadata"]["resourceVersion"]),
                                                annotations={OWNERS_ANNOTATION: encode_owners(owners)})
                return
            except StaleWriteError:
                self.result.retries += 1
                _sleep(attempt)
                self.obj = self.auth.get(self.namespace, self.result.record)
        raise StaleWriteError(f"{self.namespace}/{self.result.record}: the owner annotation stayed contended")

    def _sync(self, src: SourceRecord | None, intent: Intent, known: tuple[str, ...]) -> bool:
        """Plan and apply one owner, re-reading after a stale write. True when it is in sync."""
        policy = PlanPolicy(zone=self.root, known_owners=known, reviewed=True)
        changed = False
        for attempt in range(MAX_ATTEMPTS):
            assert self.result.snapshot is not None
            p = plan(intent, self.result.snapshot, policy)
            if src is not None and p.real_conflicts:
                text = "; ".join(c.message for c in p.real_conflicts)
                self._refuse(src, CONFLICT, text, merged_changed=changed)
            if not p.applicable:
                break
            applied = self.provider.apply(self.root, p.applicable, p.guards)
            if applied.applied:
                changed = True
                now = apply_changes(self.result.snapshot.by_key(), applied.applied).records
                self.result.snapshot = ZoneSnapshot(self.root, tuple(now[k] for k in sorted(now)), True, "")
            if applied.failed:
                why = "; ".join(f"{g}: {w}" for g, w in applied.failed)
                if src is not None:
                    self._refuse(src, WRITE_FAILED, why, merged_changed=changed)
                self.result.errors.append(f"{intent.owner}: {why}")
                return False
            if not applied.refused:
                break
            self.result.retries += 1
            _sleep(attempt)
            self.result.snapshot = self.provider.read(self.root)
        else:
            why = f"stale writes still refused after {MAX_ATTEMPTS} re-plans"
            self.result.errors.append(f"{intent.owner}: {why}")
            if src is not None:
                self._refuse(src, WRITE_FAILED, why, merged_changed=changed)
            return False
        if src is not None and src.ref not in self.result.verdicts:
            self.result.verdicts[src.ref] = SourceVerdict(True, merged_changed=changed)
        return True

    def _refuse(self, src: SourceRecord, reason: str, message: str, merged_changed: bool = False) -> None:
        self.result.verdicts[src.ref] = SourceVerdict(False, reason, message, merged_changed)
        log.info("source refused: source=%s reason=%s", src.ref, reason)

    def delete_if_empty(self) -> bool:
        """Delete the authoritative record when nothing is left in it (Kuadrant keeps it)."""
        snap = self.result.snapshot
        if not self.result.record or snap is None or snap.records:
            return False
        try:
            obj = self.auth.get(self.namespace, self.result.record)
            if snapshot_of(obj, self.root).records:
                return False
        except (LookupError, ValueError):
            return False
        if self.auth.delete(self.namespace, self.result.record, str(obj["metadata"]["resourceVersion"])):
            log.info("authoritative record deleted: record=%s/%s (empty)", self.namespace, self.result.record)
            return True
        return False


def merge_group(auth: AuthRecords, namespace: str, root: str, sources: Sequence[SourceRecord],
                existing: dict[str, Any] | None, view: ClusterView,
                groups: Groups | None = None) -> tuple[GroupResult, GroupMerge]:
    result = GroupResult(namespace, root)
    merge = GroupMerge(auth, result, view, groups)
    try:
        merge.run(sources, existing)
    except (GitdnsError, LookupError) as exc:
        result.errors.append(f"{namespace}/{root}: {exc}")
        log.warning("merge failed: namespace=%s root=%s error=%s", namespace, root, exc)
    except Exception as exc:  # one group's unexpected failure must not stop the pass
        result.errors.append(f"{namespace}/{root}: unexpected {type(exc).__name__}")
        log.warning("merge failed: namespace=%s root=%s error=%s", namespace, root, type(exc).__name__)
    return result, merge
