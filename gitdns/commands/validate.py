"""``gitdns validate``: every problem of the desired state at once, with file:line."""

from __future__ import annotations

import json
from pathlib import Path

from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.core.model import DesiredState
from gitdns.core.problems import Problem


def validate(path: Path, fmt: str = "text", probe_ranges: str | None = None) -> Result:
    """``probe_ranges``: the operator's ``--probe-allow-ranges`` (else GITDNS_PROBE_ALLOW_RANGES),
    so validate refuses the probe targets the daemons would, no more."""
    import os

    from gitdns.core.limits import DEFAULT_LIMITS
    from gitdns.core.reach import PROBE_FLAG, parse_ranges
    from gitdns.core.validate import warnings
    from gitdns.errors import ConfigError
    from gitdns.reconcile.engine import load

    try:
        ranges = parse_ranges(probe_ranges if probe_ranges is not None else os.environ.get("GITDNS_PROBE_ALLOW_RANGES"),
                              PROBE_FLAG)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    desired = load(path, DEFAULT_LIMITS, ranges)
    problems = sorted(desired.problems, key=lambda p: (p.file, p.line, p.yaml_path))
    notes = warnings(desired.state, desired.rejected)  # say, never hold: e.g. no ActiveGroups document
    notes += _nothing_here(path, desired.state) if not problems else []
    from gitdns.commands.serialcheck import serial_warnings

    notes += serial_warnings(desired)  # a committed serial at or below one the status branches report applied
    result = Result(EXIT_ERROR if problems else EXIT_OK)
    if fmt == "json":
        doc = {"valid": not problems, "problems": [p.as_dict() for p in problems],
               "warnings": [w.as_dict() for w in notes], "blockedZones": sorted(desired.blocked)}
        result.block(json.dumps(doc, indent=2, sort_keys=True))
        return result
    result.lines([problem.format() for problem in problems])
    result.lines([f"warning: {w.format()}" for w in notes])
    state = desired.state
    summary = (f"{len(state.zones)} zone(s), {len(state.clusters)} cluster(s), "
               f"{len(state.policies)} policy(ies), {len(state.record_sets)} record set(s), "
               f"{len(state.tenants)} tenant(s)")
    from gitdns.providers.defaultprovider import default_provider_notes

    result.lines([f"note: {note}" for note in default_provider_notes(state)])
    if problems:
        held = ", ".join(sorted(desired.blocked)) or "none"
        result.line(f"{len(problems)} problem(s); zones held: {held}; {summary}")
    else:
        result.line(f"valid: {summary}")
    return result


def _nothing_here(path: Path, state: DesiredState) -> list[Problem]:
    """The wrong directory, most likely: a warning rather than a bare "valid"."""
    if state.zones or state.clusters or state.policies or state.record_sets or state.tenants:
        return []
    bare = (path / "HEAD").is_file() and (path / "objects").is_dir()
    return [Problem(str(path), (), "no desired state here: no Zone, Cluster, DNSPolicy, RecordSet or Tenant in "
                    "any .yaml/.yml file below it" + (" (a bare git repository)" if bare else ""),
                    hint="point validate at a checkout of the desired repository (its top directory)",
                    code="NoDesiredState")]
