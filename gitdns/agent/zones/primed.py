"""A whole-zone read lent to the zone's next pass in the same cycle.

After a restart with no record of the revision it applied (no state directory, no status
branch), the agent reads its own records for the revision they carry
(`gitdns.agent.zones.work.ZoneWork.own_revision`).  When that read was of the whole zone, the
zone's pass in the same cycle plans on it instead of reading the zone again: at 20,000 record
sets on Route53 that is 67 pages, about 13 s of an account's 5 requests a second.  Nothing is
weakened: the pass's writes are compare-and-swap on what it read, as after any read, so a
record changed in between is refused and read again.  The first write ends the loan (the
verification and everything after it read the provider), and the agent drops what was not
borrowed at the end of the cycle (`ZoneWork.drop_primed`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from gitdns.core.records import Change, Guard, ZoneSnapshot, normalize_name
from gitdns.providers.base import ApplyResult, Provider, ZoneInfo


class Primed:
    """``inner``, with reads of ``snapshot``'s zone answered from it until the first write."""

    def __init__(self, inner: Provider, snapshot: ZoneSnapshot) -> None:
        self.inner = inner
        self.snapshot: ZoneSnapshot | None = snapshot
        self.name, self.capabilities = inner.name, inner.capabilities
        self.lent = 0  # reads answered from the snapshot

    def __getattr__(self, name: str) -> object:  # the budget's ready_to_write, views_dir and the like
        return getattr(self.inner, name)

    def zones(self) -> list[ZoneInfo]:
        return self.inner.zones()

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        snap = self.snapshot
        if snap is None or normalize_name(zone) != normalize_name(snap.zone):
            return self.inner.read(zone, names) if names is not None else self.inner.read(zone)
        self.lent += 1
        if names is None:
            return snap
        wanted = frozenset(normalize_name(n) for n in names)
        return replace(snap, records=tuple(r for r in snap.records if r.name in wanted), names=wanted,
                       skipped=tuple(k for k in snap.skipped if k.name in wanted))

    def ready_to_write(self, zone: str, names: Collection[str] | None = None) -> float:
        """The budget's wait before a read meant to be written (`gitdns.agent.budget`): a read
        answered from the loan sends nothing, so only the write's share is waited for."""
        ready = getattr(self.inner, "ready_to_write", None)
        if not callable(ready):
            return 0.0
        lent = self.snapshot is not None and normalize_name(zone) == normalize_name(self.snapshot.zone)
        waited = ready(zone, () if lent else names)
        return float(waited) if isinstance(waited, int | float) else 0.0

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        self.snapshot = None
        return self.inner.apply(zone, changes, guards)
