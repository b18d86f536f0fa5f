"""The zones as the fleet publishes them at a base revision, from git alone (``--base REV``).

A pull request's preview compares the fleet's publication at the base (the branch it merges
into) with the same at its head.  Neither side reads a record store or a provider: the zone at
the base is built by the agents' own pipeline in its preview role, every cluster serving it in
turn, from an empty zone, until it stops changing (agents converge over cycles); the head's
preview then runs over that zone as every agent would over the real one.

    load_base(repo, rev)                      Desired at ``rev`` (ConfigError naming --base)
    published_zone(desired, zone, ...)        the zone as the fleet publishes ``desired``
    BaseZones(base, health, now, ...)         per zone, lazily: ``provider(zone)`` a copy of
                                              the base's zone for the head's preview
    over_base(head, base)                     the head as it will merge: newer than the base
    applied_at_base(health, base, head)       every cluster judged against the base

Where the zone does not validate at the base, the agents keep its last good revision: the
base's first-parent ancestors are tried, newest first (at most `MAX_BACK`), and a note says
which one was used.  What each cluster observed (health, gateways) is its status branch's, on
both sides, so only git's change shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from gitdns.core.desired import Desired
from gitdns.core.model import Revision, Zone
from gitdns.core.records import ZoneSnapshot
from gitdns.errors import ConfigError
from gitdns.providers.base import Provider
from gitdns.reconcile.preview import Published, preview_zone

MAX_PASSES = 4  # cycles a fleet needs to settle a zone built from nothing
MAX_BACK = 20  # first-parent ancestors of the base tried for a zone that does not validate there
BASE_FLAG = "--base"


def load_base(repo: Path, rev: str) -> Desired:
    """The desired state at ``rev`` of the repository at ``repo`` (its files below ``repo``
    as git holds them at that commit); a `ConfigError` naming ``--base`` when git does not know
    the revision."""
    from gitdns.adapters.git.rev import commit_at, files_at
    from gitdns.reconcile.engine import from_files

    head = commit_at(repo, rev) if rev.strip() and not rev.startswith("-") else None
    files = files_at(repo, head.revision.sha) if head is not None else None
    if head is None or files is None:
        raise ConfigError(f"{BASE_FLAG} {rev[:80]!r}: not a revision of the repository at {repo} (fetch it first: "
                          "git fetch origin <branch>; in CI, check out with the whole history)")
    return from_files(repo, files, head)


def published_zone(desired: Desired, zone: Zone, *, health: Published, now: float,
                   records: ZoneSnapshot | None = None) -> tuple[ZoneSnapshot, bool]:
    """The zone as every cluster serving it leaves it, starting from ``records`` (default: an
    empty zone), passes repeated until it stops changing; whether it settled."""
    from gitdns.providers.memory import MemoryProvider
    from gitdns.reconcile.run import revisions

    state_at = revisions(desired)
    after = records if records is not None else ZoneSnapshot(zone.domain, ())
    for _ in range(MAX_PASSES):
        sim = preview_zone(desired, zone, MemoryProvider({zone.domain: after.records}), health=health,
                           state_at=state_at, now=now)
        if sim.after.records == after.records:
            return sim.after, True
        after = sim.after
    return after, False


def seeded(zone: Zone, records: ZoneSnapshot) -> Provider:
    """A provider holding ``records`` for the zone, with the capabilities of the zone's own
    provider type (the pipeline decides weight 0 and page sizes by them)."""
    from gitdns.core.providertypes import PROVIDER_TYPES
    from gitdns.providers.memory import MemoryProvider

    kind = zone.provider.type if zone.provider is not None else ""
    caps = PROVIDER_TYPES[kind].capabilities if kind in PROVIDER_TYPES else None
    return MemoryProvider({zone.domain: records.records}, capabilities=caps)


@dataclass
class BaseZones:
    """The base's zones, each built on first use (``provider(zone)`` for the head's preview);
    ``notes`` says what a reviewer must know of how (a zone held at the base, one that did not
    settle, one new at the head)."""

    base: Desired
    health: Published
    now: float
    repo: Path
    notes: list[str] = field(default_factory=list)
    _zones: dict[str, ZoneSnapshot] = field(default_factory=dict)

    def zone(self, domain: str) -> ZoneSnapshot:
        if domain not in self._zones:
            self._zones[domain] = self._build(domain)
        return self._zones[domain]

    def provider(self, zone: Zone) -> Provider:
        return seeded(zone, self.zone(zone.domain))

    def _build(self, domain: str) -> ZoneSnapshot:
        short = self.base.head.revision.sha[:7] if self.base.head else "the base"
        source = self._valid_at(domain)
        if source is None:
            self.notes.append(f"zone {domain} is not in git at {short}: compared with an empty zone")
            return ZoneSnapshot(domain, ())
        desired, where = source
        if where:
            self.notes.append(f"zone {domain} does not validate at {short}: agents keep its last good revision, "
                              f"{where[:7]}, which the comparison uses")
        zone = next(z for z in desired.state.zones if z.domain == domain)
        snapshot, settled = published_zone(desired, zone, health=self.health, now=self.now)
        if not settled:
            self.notes.append(f"zone {domain} at {short} did not settle in {MAX_PASSES} passes: compared with "
                              "the last one")
        return snapshot

    def _valid_at(self, domain: str) -> tuple[Desired, str] | None:
        """The base (or, where the zone does not validate there, its newest first-parent
        ancestor where it does) and the sha used when it is not the base itself."""
        from gitdns.adapters.git.rev import first_parents

        def holds(desired: Desired) -> Zone | None:
            zone = next((z for z in desired.state.zones if z.domain == domain), None)
            return zone if zone is not None and zone.name not in desired.blocked else None

        if holds(self.base) is not None:
            return self.base, ""
        if not any(z.domain == domain for z in self.base.state.zones):
            return None
        sha = self.base.head.revision.sha if self.base.head else ""
        for older in first_parents(self.repo, sha, MAX_BACK + 1)[1:] if sha else []:
            desired = load_base(self.repo, older)
            if holds(desired) is not None:
                return desired, older
        return None


def over_base(head: Desired, base: Desired) -> tuple[Desired, str]:
    """The head as the agents will apply it: its merge onto the base is newer than the base.
    A pull request branch cut before the base moved has an older commit time than the base; the
    agents would see the base's owners as newer and yield to them, so the head's revision is
    taken as one second after the base's (with a note).  Unchanged otherwise."""
    if head.head is None or base.head is None or head.head.revision.time > base.head.revision.time:
        return head, ""
    bumped = Revision(base.head.revision.time + 1, head.head.revision.sha)
    note = (f"{head.head.revision.sha[:7]} is older than the base {base.head.revision.sha[:7]}: previewed as "
            "its merge, newer than the base")
    return replace(head, state=replace(head.state, revision=bumped), head=replace(head.head, revision=bumped)), note


def applied_at_base(health: Published, base: Desired, head: Desired) -> Published:
    """The head's health with every cluster having applied the base: the mass-change guard
    judges the head's removals against the base, as agents that applied it will."""
    if base.head is None:
        return health
    sha = base.head.revision.sha
    return replace(health, applied={c.id: sha for c in head.state.clusters})

