"""Finding a zone (and its provider) by a name the user typed; ``gitdns zone show``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gitdns.commands import EXIT_OK, Result
from gitdns.core.desired import Desired
from gitdns.core.model import Zone
from gitdns.core.records import normalize_name
from gitdns.errors import ConfigError
from gitdns.providers.base import Provider
from gitdns.providers.fences import STRICT, Fences
from gitdns.reconcile.zonepass import ZoneOutcome


def find_zone(desired: Desired, ident: str) -> Zone | None:
    """The Zone whose metadata.name is ``ident`` or whose domain is ``ident`` (any case, a
    trailing dot allowed)."""
    bare = normalize_name(ident)
    return next((z for z in desired.state.zones if ident == z.name or bare == z.domain), None)


def need_zone(desired: Desired, ident: str, where: object) -> Zone:
    zone = find_zone(desired, ident)
    if zone is None:
        known = ", ".join(sorted(z.domain for z in desired.state.zones)) or "none"
        raise ConfigError(f"zone {ident}: not in {where} (known: {known})")
    return zone


def zone_and_provider(desired: Desired, ident: str, repo: Path,
                      fences: Fences = STRICT) -> tuple[Zone, Provider]:
    """The zone and its provider, built within the operator's ``fences``."""
    from gitdns.reconcile.engine import default_factory

    zone = need_zone(desired, ident, repo)
    return zone, default_factory(repo, fences=fences)(zone)


def problem_lines(desired: Desired) -> list[str]:
    """The desired state's problems and the zones they hold, for stderr."""
    lines = [p.format() for p in desired.problems]
    if desired.problems:
        lines.append(f"{len(desired.problems)} problem(s); zones held: {', '.join(sorted(desired.blocked)) or 'none'}")
    return lines


def held(desired: Desired, outcomes: Sequence[ZoneOutcome]) -> bool:
    """Whether a run must exit 1 for what it could not do: a zone it covered failed or is held,
    or a problem holds a zone the desired state no longer has (its Zone document refused:
    there is no outcome to show it) or every zone."""
    if any(o.errors for o in outcomes) or any(o.zone.name in desired.blocked for o in outcomes):
        return True
    known = {z.name for z in desired.state.zones}
    return bool(desired.blocked - known) or any(p.blocks_all for p in desired.problems)


def zone_show(repo: Path, ident: str, fmt: str = "text", *, fences: Fences = STRICT) -> Result:
    """``gitdns zone show``: what the zone publishes and who owns each value."""
    from gitdns.core import inventory
    from gitdns.reconcile.engine import load

    desired = load(repo)
    zone, provider = zone_and_provider(desired, ident, repo, fences)
    names = {c.id: c.name for c in desired.state.clusters}
    rows = inventory.inventory(provider.read(zone.domain), names)  # bookkeeping records named as gitdns's
    render = inventory.to_json if fmt == "json" else inventory.to_text
    return Result(EXIT_OK, [render(zone.domain, rows)])


