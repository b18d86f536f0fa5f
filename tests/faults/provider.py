"""A fault-injecting provider wrapper, for tests and the soak (bench/soak.py) only.

`FaultyProvider(inner, plan)` implements the provider protocol of `gitdns.providers.base`
(``zones()``, ``read()``, ``apply()``, ``capabilities``; anything else, such as the `local`
store's ``views_dir``, is the wrapped provider's) and, from ``plan.seed``, decides for each call
whether to inject a fault and which:

    timeout-before    nothing reaches the provider; the call raises the flavour's connect timeout
    timeout-after     the write lands; the caller sees the flavour's read timeout
    5xx               nothing lands; the flavour's server error
    throttled         nothing lands; the flavour's throttling error (Route53 ``Throttling``,
                      Google 429, Azure 429 with Retry-After ``plan.retry_after``)
    partial-batch     the first k of the call's n change groups land (with the azure flavour,
                      sometimes the first member of the next group too, as Azure's one write per
                      record set leaves it), then the flavour's 5xx: what every cloud adapter
                      does when a later request of a batch fails
    stale-read        a read answers with an older snapshot of the same read (replication lag)
    connection-reset  the provider did the work; the response is cut (the flavour's reset)

Reads get timeout-before, 5xx, throttled, stale-read and connection-reset; writes every kind but
stale-read; partial-batch needs two groups (a call with one draws among the others), and a
stale read is answered only when the read's earlier answers hold one that differs from the
current (the real read is made first); otherwise the call goes through untouched.  The errors
are those the real adapters raise (`tests.faults.flavours`).  Each fault is recorded
(`Fault`: kind, zone, operation, flavour, time, error) in ``faults`` and, with ``plan.log``, as
one JSON line in that file, so the soak can count them by kind.  Faults are injected only while
``plan.switch`` exists (when given): the soak removes it to stop them.

**Never in production wiring.**  The module lives under ``tests/``, which is no part of the
installed package (``[tool.setuptools.packages.find] include = ["gitdns*"]``; the image copies
``gitdns/`` only), and no module of ``gitdns`` imports it or reads its plan: an agent gets it only
when it is started through `tests.faults.launch` (``python -m tests.faults.launch PLAN -- agent
…``), an entry point of its own that replaces the agent's provider factory in that process before
it runs the ordinary CLI.  ``tests/faults/test_fault_provider.py`` holds both: an import walk over
``gitdns/`` and the packaging settings.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitdns.core.records import Change, Guard, RecordKey, ZoneSnapshot, normalize_name
from gitdns.core.store import group_changes
from gitdns.providers.base import ApplyResult, Provider, ZoneInfo
from tests.faults import flavours

KINDS = ("timeout-before", "timeout-after", "5xx", "throttled", "partial-batch", "stale-read", "connection-reset")
READ_KINDS = ("timeout-before", "5xx", "throttled", "stale-read", "connection-reset")
WRITE_KINDS = ("timeout-before", "timeout-after", "5xx", "throttled", "partial-batch", "connection-reset")


@dataclass(frozen=True)
class FaultPlan:
    """What to inject: ``rate`` is the chance that one call gets a fault, ``kinds`` the kinds
    drawn from (uniformly, among those the call allows), ``flavour`` whose errors
    (`tests.faults.flavours`; ``auto``: the wrapped provider's own).  ``label`` names the
    process in the log (the soak: the cluster)."""

    seed: int
    rate: float = 0.1
    kinds: tuple[str, ...] = KINDS
    flavour: str = "auto"
    retry_after: float = 1.0
    switch: str = ""
    log: str = ""
    label: str = ""
    history: int = 4

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown or not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault plan: unknown kinds {unknown} or a rate outside 0..1 ({self.rate})")

    def dump(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> FaultPlan:
        raw = json.loads(path.read_text())
        raw["kinds"] = tuple(raw.get("kinds", KINDS))
        return cls(**raw)


@dataclass(frozen=True)
class Fault:
    kind: str
    zone: str
    op: str  # read | apply | zones
    flavour: str
    at: float
    label: str = ""
    error: str = ""


@dataclass
class _Draw:
    kind: str
    flavour: str
    rng: random.Random = field(repr=False)


class FaultyProvider:
    """``inner`` with faults injected as ``plan`` says (module doc)."""

    def __init__(self, inner: Provider, plan: FaultPlan, *, stream: str = "",
                 clock: Callable[[], float] = time.time) -> None:
        self.inner = inner
        self.plan = plan
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.account = getattr(inner, "account", inner.name)
        self.flavour = flavours.flavour_of(inner, plan.flavour)
        self.faults: list[Fault] = []
        self._rng = random.Random(f"{plan.seed}/{plan.label}/{stream}")
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, frozenset[str] | None], deque[ZoneSnapshot]] = {}

    def __getattr__(self, item: str) -> object:  # views_dir and other extras of the inner provider
        return getattr(self.inner, item)

    # --- the protocol ------------------------------------------------------------------------
    def zones(self) -> list[ZoneInfo]:
        draw = self._draw("zones", ("timeout-before", "5xx", "throttled", "connection-reset"))
        if draw is None:
            return self.inner.zones()
        if draw.kind == "connection-reset":
            self.inner.zones()
        raise self._fail(draw, "", "zones")

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        key = (normalize_name(zone), None if names is None else frozenset(normalize_name(n) for n in names))
        draw = self._draw("read", READ_KINDS)
        if draw is not None and draw.kind in ("timeout-before", "5xx", "throttled"):
            raise self._fail(draw, zone, "read")
        snapshot = self.inner.read(zone) if names is None else self.inner.read(zone, names)
        if draw is not None and draw.kind == "connection-reset":  # the server answered, the answer was cut
            raise self._fail(draw, zone, "read")
        with self._lock:
            seen = self._seen.setdefault(key, deque(maxlen=self.plan.history))
            older = [s for s in seen if s.records != snapshot.records]
            if not seen or seen[-1].records != snapshot.records:
                seen.append(snapshot)
        if draw is not None and older:  # stale-read (with nothing older to give, no fault)
            stale = draw.rng.choice(older)
            self._record(draw, zone, "read", f"answered with an older snapshot (version {stale.version or '?'}, "
                                             f"current {snapshot.version or '?'})")
            return stale
        return snapshot

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        groups = group_changes(changes)
        kinds = WRITE_KINDS if len(groups) > 1 else tuple(k for k in WRITE_KINDS if k != "partial-batch")
        draw = self._draw("apply", kinds) if changes else None
        if draw is None:
            return self.inner.apply(zone, changes, guards)
        if draw.kind in ("timeout-after", "connection-reset"):
            self.inner.apply(zone, changes, guards)  # it landed; the caller never hears so
        elif draw.kind == "partial-batch":
            landed, total = self._partial(zone, groups, guards, draw)
            flavour = flavours.resolve(self.flavour, "5xx", draw.rng)
            exc = flavours.error(flavour, "5xx", "apply", normalize_name(zone), draw.rng, self.plan.retry_after,
                                 self.inner)
            self._record(_Draw(draw.kind, flavour, draw.rng), zone, "apply",
                         f"{landed} of {total} groups landed, then: {exc}")
            raise exc
        raise self._fail(draw, zone, "apply")

    # --- the faults --------------------------------------------------------------------------
    def _draw(self, op: str, kinds: Sequence[str]) -> _Draw | None:
        allowed = [k for k in kinds if k in self.plan.kinds]
        with self._lock:
            roll, pick = self._rng.random(), self._rng.random()
            rng = random.Random(self._rng.getrandbits(64))
        if not allowed or roll >= self.plan.rate or (self.plan.switch and not os.path.exists(self.plan.switch)):
            return None
        kind = allowed[min(int(pick * len(allowed)), len(allowed) - 1)]
        flavour = flavours.resolve(self.flavour, kind, rng) if kind in flavours.ALL_KINDS else self.flavour
        return _Draw(kind, flavour, rng)

    def _partial(self, zone: str, groups: dict[RecordKey, list[Change]], guards: Sequence[Guard],
                 draw: _Draw) -> tuple[int, int]:
        """Sends the first groups (at least one, not all); how many landed, of how many."""
        order = list(groups)
        landed = order[:draw.rng.randint(1, len(order) - 1)]
        sent = [c for g in landed for c in groups[g]]
        following = groups[order[len(landed)]]
        if self.flavour == "azure" and len(following) > 1 and draw.rng.random() < 0.5:
            sent.append(following[0])  # Azure writes a group's record sets one by one
        kept = set(landed) | {c.group for c in sent}
        self.inner.apply(zone, sent, [g for g in guards if g.group in kept])
        return len(landed), len(order)

    def _fail(self, draw: _Draw, zone: str, op: str) -> Exception:
        exc = flavours.error(draw.flavour, draw.kind, op, normalize_name(zone) if zone else "", draw.rng,
                             self.plan.retry_after, self.inner)
        self._record(draw, zone, op, str(exc))
        return exc

    def _record(self, draw: _Draw, zone: str, op: str, error: str) -> None:
        fault = Fault(draw.kind, normalize_name(zone) if zone else "", op, draw.flavour, self._clock(),
                      self.plan.label, error[:300])
        with self._lock:
            self.faults.append(fault)
            if self.plan.log:
                with open(self.plan.log, "a", encoding="utf-8") as out:
                    out.write(json.dumps(asdict(fault), sort_keys=True) + "\n")

    def counts(self) -> Counter[str]:
        return Counter(f.kind for f in self.faults)


def read_log(path: Path) -> list[Fault]:
    """The faults a plan's log holds (every process appends to its own file)."""
    if not path.exists():
        return []
    return [Fault(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def wrap_factory(factory: Callable[[Any], Provider], plan: FaultPlan) -> Callable[[Any], Provider]:
    """A provider factory (``zone -> Provider``, as `gitdns.reconcile.engine.default_factory`
    makes) whose providers are wrapped, one `FaultyProvider` per zone, each with its own
    random stream (the zone's domain)."""
    made: dict[str, Provider] = {}

    def wrapped(zone: Any) -> Provider:
        if zone.name not in made:
            made[zone.name] = FaultyProvider(factory(zone), plan, stream=str(zone.domain))
        return made[zone.name]

    return wrapped
