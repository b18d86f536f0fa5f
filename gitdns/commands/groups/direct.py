"""``gitdns groups add|remove|set --direct``: break-glass when git is unreachable (docs/failover.md).

Both active-group TXT are written straight to the zone with a serial above git's and the
zone's (compare-and-swap, re-read and retried on refusal); nothing changes in git.  Agents then
follow the zone and report ``GroupsDivergedFromGit`` until ``groups reconcile`` is merged.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gitdns.commands import Result, failover
from gitdns.commands.groups.check import Request, read_groups, show, target_groups
from gitdns.commands.groups.health import activation_problems, refuse_unhealthy
from gitdns.commands.zones import find_zone
from gitdns.core import groups
from gitdns.core.desired import Desired
from gitdns.core.model import CredentialsRef, ProviderRef, Zone
from gitdns.core.records import normalize_name
from gitdns.errors import ConfigError, GitdnsError, UnreachableError
from gitdns.providers.base import Provider
from gitdns.reconcile.engine import load

log = logging.getLogger(__name__)

DIRECT_ATTEMPTS = 5


def provider_ref(zone: Zone | None, req: Request) -> ProviderRef:
    """The Zone's provider reference, overridden from the command line."""
    if zone is None and not req.provider_type:
        raise ConfigError(f"zone {req.zone}: not in {req.repo}; give --provider-type (and its settings and "
                          "credentials) to write to it directly")
    base = zone.provider if zone is not None else ProviderRef(req.provider_type or "")
    settings = dict(base.settings)
    for item in req.provider_settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--provider-setting {item!r}: expected KEY=VALUE")
        settings[key.strip()] = value
    creds = base.credentials
    if req.credentials_env or req.credentials_file:
        creds = CredentialsRef(env=req.credentials_env, file=req.credentials_file)
    return ProviderRef(req.provider_type or base.type, tuple(sorted(settings.items())), creds,
                       base.default_namespace if not req.provider_type else None)


def direct(req: Request) -> Result:
    """Break-glass: write both TXT straight to the zone; git is not touched."""
    if req.action in ("add", "remove") and not req.groups:
        raise ConfigError(f"groups {req.action}: name at least one group")
    result = Result()
    from gitdns.commands.committed import acting_on

    result.line(acting_on(req.repo, from_worktree=req.from_worktree))
    try:
        desired: Desired | None = load(req.repo)
    except GitdnsError as exc:
        desired = None
        result.err.append(f"warning: no local checkout at {req.repo} ({exc}): the health check and the "
                          "endpoint list need it")
    zone = find_zone(desired, req.zone) if desired is not None else None
    ref = provider_ref(zone, req)
    domain = zone.domain if zone is not None else normalize_name(req.zone)
    if zone is None:
        zone = Zone(domain.replace(".", "-"), domain, ref)
    else:
        zone = replace(zone, provider=ref)
    from gitdns.providers.registry import make_provider

    # credentials named on the command line are the operator's own choice
    fences = req.fences.allowing_credentials(env=req.credentials_env, file=req.credentials_file)
    provider = make_provider(domain, ref, Path(req.repo), fences=fences)
    doc = desired.state.groups_for_zone(zone.name) if desired is not None else None
    git_serial = doc.serial if doc else 0
    state = read_groups(provider, zone)
    base = groups.decide(doc, state, domain).active
    target = target_groups(req.action, base, req.groups)
    activated = [g for g in target if not base or g not in base]
    if desired is not None:
        refuse_unhealthy(activation_problems(desired, zone, activated, None), req.force, result)
    elif activated:
        refuse_unhealthy([f"group {g}: cannot be checked without a local checkout" for g in activated],
                          req.force, result)
    absent = failover.absent_zone(provider, zone)
    if absent:
        result.err.append(f"warning: {absent}; this write creates it there")
    sim: failover.Switch | None = None
    if desired is not None:
        from gitdns.commands.groups.status import local_status

        now, note = failover.current_zone(desired, zone, provider)
        sim = failover.simulate_switch(desired, zone, now, target, serial=max(git_serial, state.serial or 0) + 1,
                                       notes=[note] if note else [], status=local_status(Path(req.repo)),
                                       absent=absent)
    serial = write_direct(provider, zone, target, git_serial, state)
    result.line(f"zone {domain}: active groups {show(base)} -> {show(target)}, written directly "
                f"(serial {serial}; git has {git_serial})")
    result.line(f"git is unchanged: agents follow the zone and report GroupsDivergedFromGit until "
                f"`gitdns groups reconcile {zone.name} --repo PATH` is run and its pull request merged")
    if sim is not None:
        result.lines(failover.summary_lines(sim)[1:])
        result.lines(failover.endpoint_lines(sim.diff, sim.absent))
    return result


def write_direct(provider: Provider, zone: Zone, target: Sequence[str], git_serial: int,
                  state: groups.ZoneGroups) -> int:
    """Compare-and-swap both TXT; a refusal re-reads and retries with jittered backoff."""
    last = ""
    for attempt in range(DIRECT_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0, 0.05 * 2 ** attempt))
            state = read_groups(provider, zone)
        serial, changes = groups.direct_changes(state, zone.domain, target, git_serial)
        applied = provider.apply(zone.domain, changes)
        if applied.failed:
            raise UnreachableError(f"zone {zone.domain}: writing the active-groups TXT failed: "
                                   + "; ".join(f"{k}: {why}" for k, why in applied.failed))
        if not applied.refused:
            return serial
        last = "; ".join(f"{k}: {why}" for k, why in applied.refused)
        log.info("direct groups write refused (attempt %d): %s", attempt + 1, last)
    raise UnreachableError(f"zone {zone.domain}: the active-groups TXT changed under us {DIRECT_ATTEMPTS} times "
                           f"({last}); try again")
