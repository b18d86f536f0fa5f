"""The `memory` provider: the in-process reference store.

It holds each zone as ``dict[RecordKey, RecordSet]`` and writes through the pure
`gitdns.core.store.apply_changes`, so it has exactly the compare-and-swap semantics every
record store promises (no lost updates): a change group lands only when every ``Change.old`` matches
what the store holds now (values, TTL and routing) and every guard holds; otherwise the
group is refused as stale and nothing of it lands.  Tests and the conformance suite use
it; `local` shares its checks (`invalid_groups`, `filter_names`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import Capabilities, capabilities_of
from gitdns.core.records import (
    RECORD_TYPES,
    Change,
    Guard,
    RecordKey,
    RecordSet,
    ZoneSnapshot,
    in_zone,
    normalize_name,
)
from gitdns.core.store import apply_changes, group_changes
from gitdns.providers.base import ApplyResult, ZoneInfo
from gitdns.providers.fences import STRICT, Fences

log = logging.getLogger(__name__)


def _invalid_reason(zone: str, change: Change) -> str:
    for rec in (change.old, change.new):
        if rec is None:
            continue
        if rec.type not in RECORD_TYPES:
            return f"{rec.key}: record type {rec.type} is not supported"
        if not in_zone(rec.name, zone):
            return f"{rec.key}: name is outside zone {zone}"
        if not rec.values:
            return f"{rec.key}: a record set needs at least one value"
        if rec.ttl < 0:
            return f"{rec.key}: negative TTL {rec.ttl}"
    if change.old is not None and change.new is not None and change.old.key != change.new.key:
        return f"{change.old.key}: an update cannot change the key (to {change.new.key})"
    return ""


def invalid_groups(zone: str, changes: Sequence[Change]) -> dict[RecordKey, str]:
    """Groups holding a change no record store can take (bad type, out of zone, empty)."""
    bad: dict[RecordKey, str] = {}
    for group, members in group_changes(changes).items():
        for change in members:
            why = _invalid_reason(zone, change)
            if why:
                bad[group] = why
                break
    return bad


def split_valid(
    zone: str, changes: Sequence[Change]
) -> tuple[list[Change], tuple[tuple[RecordKey, str], ...]]:
    """The changes that may be applied, and the ``failed`` entries for the rest."""
    bad = invalid_groups(zone, changes)
    good = [c for c in changes if c.group not in bad]
    return good, tuple(bad.items())


def _sort_key(rec: RecordSet) -> tuple[str, str, str]:
    return (rec.name, rec.type, rec.set_id)  # RecordKey order, compared as plain tuples (fast)


def filter_names(records: Iterable[RecordSet], names: Collection[str] | None) -> tuple[RecordSet, ...]:
    """Records sorted by key; with ``names``, only records whose name is one of them."""
    if names is None:
        return tuple(sorted(records, key=_sort_key))
    wanted = {normalize_name(n) for n in names}
    return tuple(sorted((r for r in records if r.name in wanted), key=_sort_key))


def snapshot_names(names: Collection[str] | None) -> frozenset[str] | None:
    return None if names is None else frozenset(normalize_name(n) for n in names)


class MemoryProvider:
    """An in-process record store.  ``MemoryProvider()`` starts with no zones; a zone
    appears on its first write or through ``initial`` / `add_zone`."""

    name = "memory"
    capabilities = capabilities_of("memory")  # declared in gitdns.core.providertypes

    def __init__(self, initial: Mapping[str, Iterable[RecordSet]] | None = None, *,
                 capabilities: Capabilities | None = None) -> None:
        """``capabilities``: another provider type's (a preview standing in for that zone's
        provider, so the pipeline takes the same decisions: weight 0, page sizes)."""
        if capabilities is not None:
            self.capabilities = capabilities
        self._lock = threading.Lock()
        self._zones: dict[str, dict[RecordKey, RecordSet]] = {}
        self._versions: dict[str, int] = {}
        self._writes = 0
        for zone, records in (initial or {}).items():
            self.add_zone(zone, records)

    @property
    def version(self) -> str:
        """Increments on every successful write to any zone."""
        with self._lock:
            return str(self._writes)

    def add_zone(self, zone: str, records: Iterable[RecordSet] = ()) -> None:
        """Create (or replace) a zone with ``records``, bypassing compare-and-swap."""
        zone = normalize_name(zone)
        with self._lock:
            self._zones[zone] = {r.key: r for r in records}
            self._versions[zone] = self._versions.get(zone, 0) + 1
            self._writes += 1

    def zones(self) -> list[ZoneInfo]:
        with self._lock:
            return [ZoneInfo(id=z, domain=z) for z in sorted(self._zones)]

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        zone = normalize_name(zone)
        with self._lock:
            records = list(self._zones.get(zone, {}).values())
            version = str(self._versions.get(zone, 0))
        return ZoneSnapshot(
            zone=zone,
            records=filter_names(records, names),
            complete=True,
            version=version,
            names=snapshot_names(names),
        )

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        zone = normalize_name(zone)
        good, failed = split_valid(zone, changes)
        with self._lock:
            current = self._zones.get(zone, {})
            result = apply_changes(current, good, guards)
            if result.changed:
                self._zones[zone] = result.records
                self._versions[zone] = self._versions.get(zone, 0) + 1
                self._writes += 1
            version = self._versions.get(zone, 0)
        if result.refused or failed:
            log.info(
                "apply: zone=%s applied=%d refused=%d failed=%d",
                zone, len(result.applied), len(result.refused), len(failed),
            )
        change_ids = (f"{zone}@{version}",) if result.changed else ()
        return ApplyResult(
            applied=result.applied, refused=result.refused, failed=failed, change_ids=change_ids
        )


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: Fences = STRICT) -> MemoryProvider:
    """No settings, no credentials: an empty store that lives as long as the process."""
    return MemoryProvider()
