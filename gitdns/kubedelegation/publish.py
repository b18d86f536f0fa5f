"""Publish an authoritative record's data to the zone's real DNS provider (delegation
through Kubernetes).

The provider is chosen by the namespace's default provider secret
(`gitdns.providers.defaultprovider.find_default_provider`); the zone is the longest of the
provider's zones holding the root host (or the secret's ``settings.gitdns.io/zone``
annotation for a store that lists no zone before its first write).  The primary publishes
the record's data endpoints — never its internal ownership TXT — under its own owner id, so
two primaries publish identical content under two owner ids and never fight.

Each publication is scoped to the root host: the plan sees only the names the record holds
now plus the names this owner published under the root host before and no other
authoritative record wants (a per-name snapshot), so publishing one host never withdraws
another's.  Revisions order the primaries when they disagree for a moment: a primary's
revision is when it last saw the record's content change, so the one with the newest view wins.

Nothing is read from the provider while the record's content is what was last published
(a digest), except every ``republish_interval`` seconds, to repair drift.

**Active groups** (`active_groups`): the zone's two active-group TXT records, read once per
zone per pass by name, and git's ActiveGroups document for that zone when the agent's desired
state is given, decided exactly as on the git path (`gitdns.core.groups.decide`: git's list
unless the zone holds a higher serial; empty or absent: every group).
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitdns.core import groups
from gitdns.core.endpoints import data_names
from gitdns.core.model import DesiredState, Revision
from gitdns.core.names import lb_host
from gitdns.core.plan.planner import decode_zone, plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import RecordSet, ZoneSnapshot, in_zone
from gitdns.errors import ConfigError, GitdnsError
from gitdns.providers.base import Provider
from gitdns.providers.defaultprovider import DefaultProvider, find_default_provider, make_default_provider
from gitdns.providers.fences import STRICT, Fences

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
NO_ZONE = "NoZoneForHost"
ProviderFactory = Callable[[DefaultProvider, str], Provider]  # (default provider, root host) -> provider


@dataclass(frozen=True, slots=True)
class Published:
    """The outcome of publishing one root host."""

    ok: bool
    zone: str = ""
    secret: str = ""  # the default provider secret's name
    reason: str = ""  # why not (DefaultProviderNotFound, MultipleDefaultProviders, NoZoneForHost, ...)
    message: str = ""
    applied: int = 0
    conflicts: tuple[str, ...] = ()
    skipped: bool = False  # content unchanged since the last publication: nothing read


def digest(zone: str, records: Iterable[RecordSet]) -> str:
    text = "\n".join(r.describe() for r in sorted(records, key=lambda r: (r.name, r.type, r.set_id)))
    return hashlib.sha256(f"{zone}\n{text}".encode()).hexdigest()


class Publisher:
    """Publishes root hosts for one owner.  ``core_api`` is the primary's CoreV1Api."""

    def __init__(self, core_api: Any, owner: str, *, base_dir: Path, factory: ProviderFactory | None = None,
                 clock: Callable[[], float] = time.time, republish_interval: float = 900.0,
                 metrics: Any | None = None, fences: Fences = STRICT) -> None:
        self.core_api = core_api
        self.fences = fences  # what a default provider secret's settings may name (the operator's)
        self.owner = owner
        self.base_dir = base_dir
        self.factory = factory
        self.clock = clock
        self.republish_interval = republish_interval
        self.metrics = metrics
        self._providers: dict[tuple[Any, ...], Provider] = {}
        self._last: dict[tuple[str, str], tuple[str, float]] = {}  # (ns, root) -> (digest, when published)
        self._seen: dict[tuple[str, str], tuple[str, int]] = {}  # (ns, root) -> (digest, revision time)
        self._defaults: dict[str, DefaultProvider | GitdnsError] = {}
        self._groups: dict[str, frozenset[str]] = {}  # zone -> active groups, this pass

    def begin_pass(self) -> None:
        self._defaults.clear()
        self._groups.clear()

    def active_groups(self, namespace: str, root: str, state: DesiredState | None) -> tuple[frozenset[str], str]:
        """The groups active in the zone ``root`` is published to (empty: every group), and
        that zone.  Raises `GitdnsError` when the zone or its records cannot be read."""
        found = self.default_provider(namespace)
        provider = self._provider(found, root)
        zone = self._zone(provider, found, root)
        active = self._groups.get(zone)
        if active is None:
            names = [groups.kuadrant_name(zone), groups.gitdns_name(zone)]
            zone_state = groups.read_zone_groups(provider.read(zone, names=names), zone)
            git_zone = next((z for z in state.zones if z.domain == zone), None) if state is not None else None
            git = state.groups_for_zone(git_zone.name) if state is not None and git_zone is not None else None
            active = groups.decide(git, zone_state, zone).active
            self._groups[zone] = active
        return active, zone

    def default_provider(self, namespace: str) -> DefaultProvider:
        """The namespace's default provider secret (one list call per namespace per pass)."""
        found = self._defaults.get(namespace)
        if found is None:
            try:
                found = find_default_provider(namespace, api=self.core_api)
            except GitdnsError as exc:
                found = exc
            self._defaults[namespace] = found
        if isinstance(found, GitdnsError):
            raise found
        return found

    def publish(self, namespace: str, root: str, data: tuple[RecordSet, ...], others: frozenset[str]) -> Published:
        """Publish ``data`` (the record's data endpoints) for ``root``; ``others`` are the
        names other authoritative records hold now (never withdrawn from here)."""
        try:
            found = self.default_provider(namespace)
        except GitdnsError as exc:
            return Published(False, reason=exc.reason, message=str(exc))
        try:
            provider = self._provider(found, root)
            zone = self._zone(provider, found, root)
        except GitdnsError as exc:
            return Published(False, secret=found.secret_name, reason=exc.reason, message=str(exc))
        key = (namespace, root)
        content = digest(zone, data)
        last = self._last.get(key)
        now = self.clock()
        if last is not None and last[0] == content and now - last[1] < self.republish_interval:
            return Published(True, zone, found.secret_name, skipped=True)
        try:
            result = self._sync(provider, zone, root, data, others, self._revision(key, content, now))
        except GitdnsError as exc:
            self._last.pop(key, None)
            return Published(False, zone, found.secret_name, exc.reason, f"zone {zone}: {exc}")
        if result.ok:
            self._last[key] = (content, now)
        else:
            self._last.pop(key, None)
        return Published(result.ok, zone, found.secret_name, result.reason, result.message, result.applied,
                         result.conflicts)

    def forget(self, namespace: str, root: str) -> None:
        self._last.pop((namespace, root), None)
        self._seen.pop((namespace, root), None)

    def _revision(self, key: tuple[str, str], content: str, now: float) -> Revision:
        seen = self._seen.get(key)
        if seen is None or seen[0] != content:
            when = max(int(now), seen[1] + 1) if seen is not None else int(now)
            seen = (content, when)
            self._seen[key] = seen
        return Revision(seen[1], content[:12])

    def _provider(self, found: DefaultProvider, root: str) -> Provider:
        creds = hashlib.sha256(repr(sorted(found.credentials.items())).encode()).hexdigest()
        key = (found.secret_ref, found.provider_type, found.settings, creds)
        provider = self._providers.get(key)
        if provider is None:
            if self.factory is not None:
                provider = self.factory(found, root)
            else:
                provider = make_default_provider(root, found, self.base_dir, self.fences)
            self._providers[key] = provider
        return provider

    def _zone(self, provider: Provider, found: DefaultProvider, root: str) -> str:
        candidates = [z.domain for z in provider.zones() if in_zone(root, z.domain)]
        explicit = dict(found.settings).get("zone", "").strip().lower().rstrip(".")
        if explicit and in_zone(root, explicit):
            candidates.append(explicit)
        if not candidates:
            raise ConfigError(f"the provider of default secret {found.secret_ref} has no zone holding {root} "
                              "(set the annotation settings.gitdns.io/zone on the Secret for a store that "
                              "lists no zone yet)", reason=NO_ZONE)
        return max(candidates, key=len)

    def _scoped(self, snapshot: ZoneSnapshot, root: str, data: tuple[RecordSet, ...],
                others: frozenset[str]) -> ZoneSnapshot:
        obs = decode_zone(snapshot)
        base = lb_host(root)
        mine = {k.name for k, entries in obs.owners.items()
                if self.owner in entries and in_zone(k.name, base) and k.name not in others}
        names = frozenset(data_names(data) | mine)
        records = tuple(r for r in snapshot.records if data_names((r,)) <= names)
        return ZoneSnapshot(snapshot.zone, records, snapshot.complete, snapshot.version, names)

    def _sync(self, provider: Provider, zone: str, root: str, data: tuple[RecordSet, ...],
              others: frozenset[str], revision: Revision) -> Published:
        intent = Intent(self.owner, data, revision)
        policy = PlanPolicy(zone=zone, reviewed=True)
        applied = 0
        conflicts: tuple[str, ...] = ()
        for attempt in range(MAX_ATTEMPTS):
            snapshot = self._scoped(provider.read(zone), root, data, others)
            p = plan(intent, snapshot, policy)
            conflicts = tuple(f"{c.reason}: {c.message}" for c in p.real_conflicts)
            if not p.applicable:
                break
            result = provider.apply(zone, p.applicable, p.guards)
            applied += len(result.applied)
            if self.metrics is not None and result.applied:
                deletes = sum(1 for c in result.applied if c.new is None and c.key == c.group)
                self.metrics.record_apply(zone, writes=len(result.applied) - deletes, deletes=deletes)
            if result.failed:
                why = "; ".join(f"{g}: {w}" for g, w in result.failed)
                return Published(False, zone, reason="WriteFailed", message=why, applied=applied)
            if not result.refused:
                break
            if self.metrics is not None:
                self.metrics.record_stale_retries(zone, len(result.refused))
            time.sleep(random.uniform(0, min(0.5, 0.01 * 2 ** attempt)))
        else:
            return Published(False, zone, reason="StaleWrite",
                             message=f"stale writes still refused after {MAX_ATTEMPTS} re-plans", applied=applied)
        if applied:
            log.info("published: zone=%s root=%s owner=%s changes=%d", zone, root, self.owner, applied)
        if conflicts:
            return Published(False, zone, reason="Conflict", message="; ".join(conflicts), applied=applied,
                             conflicts=conflicts)
        return Published(True, zone, applied=applied)
