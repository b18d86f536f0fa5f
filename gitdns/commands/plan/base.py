"""What a preview runs on (`gitdns plan`, `apply --dry-run`, `failover simulate`): the head's
desired state with the clusters' observed gateways, the providers — the Zones' own, or, with
``--base REV``, the zones as the fleet publishes REV, built from git alone
(`gitdns.reconcile.basezone`) — the clusters' published health, and the notes that say so."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from gitdns.core.desired import Desired
from gitdns.providers.fences import Fences
from gitdns.reconcile.engine import ProviderFactory
from gitdns.reconcile.preview import Published


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a preview runs on: the head's desired state (the status branches' observed gateways
    in), the providers, the clusters' published health, the time; ``notes`` to print first,
    ``late_notes`` after the zones were built (a base's zone held, not settled)."""

    desired: Desired
    factory: ProviderFactory
    health: Published
    now: float
    notes: tuple[str, ...]
    late_notes: Callable[[], list[str]]


def prepare(repo: Path, fences: Fences, base: str | None) -> Prepared:
    """The head (the work tree) and, with ``base``, the zones as the fleet publishes that
    revision (`gitdns.reconcile.basezone`) standing in for the providers; else the Zones'
    providers (``fences``: what they may name)."""
    from gitdns.commands.observed import observed_gateways
    from gitdns.reconcile.engine import default_factory, load, previous_state
    from gitdns.reconcile.run import published

    loaded = load(repo)
    desired, observed = observed_gateways(replace(loaded, previous=lambda: previous_state(loaded)))
    now = time.time()
    health = published(desired)
    if base is None:
        return Prepared(desired, default_factory(repo, fences=fences), health, now, tuple(observed), list)
    prepared = over(repo, desired, health, base, now)
    return replace(prepared, notes=(*prepared.notes, *observed))


def over(repo: Path, desired: Desired, health: Published, base: str, now: float) -> Prepared:
    """``desired`` previewed over the zones as the fleet publishes ``base``, built from git
    alone (`gitdns.reconcile.basezone`); the notes say so, and where the clusters' health comes
    from, in one line."""
    from gitdns.commands.observed import observed_gateways
    from gitdns.reconcile import basezone
    from gitdns.reconcile.run import published

    at_base, _ = observed_gateways(basezone.load_base(repo, base))
    zones = basezone.BaseZones(at_base, published(at_base), now, repo)
    desired, newer = basezone.over_base(desired, at_base)
    sha = at_base.head.revision.sha[:7] if at_base.head else base
    notes = (f"compared with {base} ({sha}) as the fleet publishes it, built from git: no record store and no "
             "provider read", *([newer] if newer else []), health_line(desired, health))
    return Prepared(desired, zones.provider, basezone.applied_at_base(health, at_base, desired), now, notes,
                    lambda: list(dict.fromkeys(zones.notes)))


def health_line(desired: Desired, health: Published) -> str:
    """One line: whose status branches the clusters' health comes from, and who published none
    (every target of those taken as healthy)."""
    known = [c.name for c in desired.state.clusters if health.of(c.id)[1]]
    unknown = [c.name for c in desired.state.clusters if not health.of(c.id)[1]]
    if not unknown:
        return f"health: from the status branches of {', '.join(known)}"
    if not known:
        return "health: no cluster has published a status: every target is taken as healthy"
    return (f"health: from the status branches of {', '.join(known)}; {', '.join(unknown)} published none: "
            "every target of theirs is taken as healthy")
