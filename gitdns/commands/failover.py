"""`gitdns failover simulate`: the zone as it will be after an active-groups switch (docs/failover.md).

    simulate_switch(desired, zone, now, groups, status=...) -> Switch
    current_zone(desired, zone, provider) -> (snapshot, note)
    absent_zone(provider, zone) -> str    the note when a `local` store holds no such zone
    endpoint_diff(before, after) -> EndpointDiff
    to_text(switch) / to_markdown(switch) / to_json(switch)
    endpoints_dict(diff, absent) -> dict   the endpoints as JSON (shared with `groups get`)
    simulate(repo, zone, groups, fmt) -> Result          the command

The switch is computed with the agents' own pipeline (`gitdns.reconcile.preview`): the zone's
ActiveGroups is replaced by the target groups (serial + 1), then every cluster serving the zone
runs its steps in turn against a copy of what the zone holds now — the active-groups mirror,
its own records, and for grouped active clusters the removal of inactive groups' records,
values and ownership TXT; clusters in inactive groups publish nothing (they do not even
withdraw their own records: the active agents do).  The switch counts as reviewed, as it is
for the agents after the merge (exempt from the mass-change guard).  The passes repeat until
nothing changes (agents converge over cycles); membership is an exact match
(`gitdns.core.groups.is_active`).

Each cluster's health is what its status branch last said (`groups.status`: origin's branches
for the groups verbs, the repository's own for `failover simulate`).  When the `local` store
read holds no file for the zone (the agents' store lives elsewhere: ``--store-dir``), the
preview says so and the endpoint counts carry a caveat: they are counted from no zone at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gitdns.commands import Result
from gitdns.commands.groups.check import check_group_names, show
from gitdns.commands.groups.status import FleetStatus, local_status, published_health
from gitdns.commands.zones import need_zone
from gitdns.core import builder, groups
from gitdns.core.desired import Desired
from gitdns.core.model import ActiveGroups, Cluster, DesiredState, Origin, Zone
from gitdns.core.owner.zone import HEARTBEAT_PREFIX
from gitdns.core.plan.planner import decode_zone
from gitdns.core.plan.values import Plan
from gitdns.core.records import RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.text import inline, md_block, md_text
from gitdns.errors import GitdnsError
from gitdns.providers.base import Provider
from gitdns.providers.fences import STRICT, Fences
from gitdns.providers.local import LocalProvider
from gitdns.providers.memory import MemoryProvider
from gitdns.reconcile.preview import NOTHING_PUBLISHED, preview_zone

MAX_PASSES = 4
ABSENT_CAVEAT = "counted from no zone at all, not from what the agents published: see the note above"
_MARKER_PREFIXES = (groups.KUADRANT_PREFIX, groups.GITDNS_PREFIX, HEARTBEAT_PREFIX, "gitdns-lock-")


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    """One published value: a record row (name, type, set identifier) and one of its values."""

    name: str
    type: str
    set_id: str
    value: str
    ttl: int = 0
    weight: int | None = None
    geo: str | None = None

    def line(self) -> str:
        routing = " ".join(p for p in (f"set={self.set_id}" if self.set_id else "",
                                       f"weight={self.weight}" if self.weight is not None else "",
                                       f"geo={self.geo}" if self.geo is not None else "") if p)
        return inline(f"{self.name} {self.type} {self.value}" + (f" ({routing})" if routing else ""))


@dataclass(frozen=True, slots=True)
class EndpointDiff:
    added: tuple[Endpoint, ...]
    removed: tuple[Endpoint, ...]
    changed: tuple[tuple[RecordSet, RecordSet], ...]  # same values, other TTL or routing

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


@dataclass(frozen=True, slots=True)
class Switch:
    """A simulated switch of one zone's active groups."""

    zone: Zone
    groups_before: tuple[str, ...]  # active now (empty: every group)
    groups_after: tuple[str, ...]
    serial_after: int
    publishing: tuple[str, ...]  # cluster names that publish after the switch
    silent: tuple[str, ...]  # cluster names in inactive groups (publish nothing)
    plans: tuple[tuple[str, Plan], ...]  # (cluster name, plan), in the order applied
    before: ZoneSnapshot
    after: ZoneSnapshot
    diff: EndpointDiff
    notes: tuple[str, ...] = ()
    absent: str = ""  # the zone compared with does not exist (`absent_zone`): the counts carry a caveat


def _is_marker(rec: RecordSet) -> bool:
    return rec.type == "TXT" and rec.name.startswith(_MARKER_PREFIXES)


def endpoints(snapshot: ZoneSnapshot) -> dict[RecordKey, RecordSet]:
    """The zone's data records: ownership TXT and gitdns's marker TXT left out."""
    return {k: r for k, r in decode_zone(snapshot).data.items() if not _is_marker(r)}


def _points(rec: RecordSet, values: Iterable[str]) -> list[Endpoint]:
    return [Endpoint(rec.name, rec.type, rec.set_id, v, rec.ttl, rec.weight, rec.geo) for v in sorted(values)]


def endpoint_diff(before: ZoneSnapshot, after: ZoneSnapshot) -> EndpointDiff:
    old, new = endpoints(before), endpoints(after)
    added: list[Endpoint] = []
    removed: list[Endpoint] = []
    changed: list[tuple[RecordSet, RecordSet]] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a is None and b is not None:
            added += _points(b, b.values)
        elif b is None and a is not None:
            removed += _points(a, a.values)
        elif a is not None and b is not None:
            removed += _points(a, set(a.values) - set(b.values))
            added += _points(b, set(b.values) - set(a.values))
            if set(a.values) & set(b.values) and not a.same_routing(b):
                changed.append((a, b))
    return EndpointDiff(tuple(sorted(added)), tuple(sorted(removed)), tuple(changed))


def with_groups(state: DesiredState, zone: Zone, target: Sequence[str], serial: int) -> DesiredState:
    """``state`` with the zone's ActiveGroups replaced (or added)."""
    old = state.groups_for_zone(zone.name)
    new = ActiveGroups(old.name if old else f"{zone.name}-groups", zone.name, serial,
                       tuple(sorted(set(target))), old.origin if old else Origin(""))
    rest = tuple(g for g in state.active_groups if g.zone != zone.name)
    return replace(state, active_groups=(*rest, new))


def serving(state: DesiredState, zone: Zone) -> list[Cluster]:
    return [c for c in state.clusters if zone in builder.zones_for_cluster(state, c)]


def effective_groups(desired: Desired, zone: Zone, now: ZoneSnapshot | None) -> tuple[tuple[str, ...], int, bool]:
    """The groups active now, the serial in force and whether the zone is ahead of git:
    git's ActiveGroups unless the zone holds a higher serial (a break-glass switch)."""
    git = desired.state.groups_for_zone(zone.name)
    state = groups.read_zone_groups(now, zone.domain) if now is not None else groups.ZoneGroups(None, None, None)
    decision = groups.decide(git, state, zone.domain)
    return tuple(sorted(decision.active)), decision.serial, decision.diverged


def simulate_switch(desired: Desired, zone: Zone, now: ZoneSnapshot, target: Sequence[str], *,
                    serial: int | None = None, notes: Sequence[str] = (), status: FleetStatus | None = None,
                    absent: str = "") -> Switch:
    """Every cluster serving the zone runs the agents' own pipeline in turn (the preview role)
    on a copy of ``now``, with the zone's active groups set to ``target`` (empty: every group
    active), as a merged switch: the removals it causes are reviewed.  Passes repeat until the
    zone stops changing (agents converge over cycles).  Each cluster's health is what
    ``status`` (its status branch) says; None: nothing is known (every target healthy).
    ``absent``: the note saying that ``now`` is a zone the store does not hold."""
    before_groups, in_force, _ = effective_groups(desired, zone, now)
    serial = serial if serial is not None else in_force + 1
    active = frozenset(target)
    state = with_groups(desired.state, zone, target, serial)
    switched = replace(desired, state=state, previous=lambda: desired.state)
    health, health_notes = published_health(state, zone, status) if status is not None else (NOTHING_PUBLISHED, [])
    mirror = groups.decide(state.groups_for_zone(zone.name), groups.read_zone_groups(now, zone.domain), zone.domain)
    clusters = serving(state, zone)
    plans: list[tuple[str, Plan]] = []
    after = now
    for attempt in range(MAX_PASSES):
        sim = preview_zone(switched, zone, MemoryProvider({zone.domain: after.records}), clusters=clusters,
                           health=health)
        for cluster, plan in sim.plans:
            if attempt == 0 or plan.changes:
                plans.append((cluster.name if attempt == 0 else f"{cluster.name} (pass {attempt + 1})", plan))
        if sim.after.records == after.records:
            break
        after = sim.after
    extra = [*([absent] if absent else []), *notes, *health_notes]
    if mirror.diverged:
        extra.append(f"the zone holds serial {mirror.serial} (groups {show(mirror.active)}), above the "
                     f"simulated serial {serial}: agents keep the zone's groups until git's serial is higher")
    publishing = [c.name for c in clusters if groups.is_active(c.group, active)]
    silent = [c.name for c in clusters if not groups.is_active(c.group, active)]
    return Switch(zone, before_groups, tuple(sorted(active)), serial, tuple(publishing),
                  tuple(silent), tuple(plans), now, after, endpoint_diff(now, after), tuple(extra), absent)


def current_zone(desired: Desired, zone: Zone, provider: Provider | None) -> tuple[ZoneSnapshot, str]:
    """What the zone holds now; when the provider cannot be read, the zone the current desired
    state would produce from an empty one (and a note saying so)."""
    if provider is not None:
        try:
            return provider.read(zone.domain), ""
        except GitdnsError as exc:
            why = f"{exc} ({exc.reason})"
    else:
        why = "no provider"
    active, serial, _ = effective_groups(desired, zone, None)
    empty = ZoneSnapshot(zone.domain, ())
    sim = simulate_switch(desired, zone, empty, active, serial=serial)
    return sim.after, (f"the zone could not be read ({why}): compared with the zone the current "
                       "desired state produces")


def absent_zone(provider: Provider | None, zone: Zone) -> str:
    """The note when ``provider`` is a `local` store that holds no file for the zone (an empty
    zone that exists is not absent): the verbs read the store inside the repository unless
    ``--store-dir`` names the agents' one, so what they published is not what was read."""
    if not isinstance(provider, LocalProvider):
        return ""
    try:
        if provider.path(zone.domain).exists():
            return ""
    except (GitdnsError, OSError):
        return ""  # the read says why
    return (f"the local store {provider.directory} holds no zone {zone.domain}: pass --store-dir (the agents' "
            "--store-dir / state directory) to compare with what they published")


def summary_lines(switch: Switch) -> list[str]:
    return [
        f"zone {switch.zone.domain}: active groups {show(switch.groups_before)} -> "
        f"{show(switch.groups_after)} (serial {switch.serial_after})",
        f"publishing after the switch: {', '.join(switch.publishing) or 'no cluster'}",
        f"publishing nothing (inactive groups): {', '.join(switch.silent) or 'none'}",
    ]


def endpoint_lines(diff: EndpointDiff, absent: str = "") -> list[str]:
    """The endpoints added, removed and changed; with ``absent`` (the zone compared with does
    not exist) the count says it is not the switch's effect."""
    lines = [f"endpoints added: {len(diff.added)}, removed: {len(diff.removed)}"
             + (f", changed: {len(diff.changed)}" if diff.changed else "")
             + (f" ({ABSENT_CAVEAT})" if absent else "")]
    lines += [f"+ {e.line()}" for e in diff.added]
    lines += [f"- {e.line()}" for e in diff.removed]
    lines += [f"~ {a.describe()} -> {b.describe()}" for a, b in diff.changed]
    return lines


def to_text(switch: Switch, names: dict[str, str] | None = None) -> str:
    from gitdns.core import inventory
    from gitdns.core.plan import fmt as planfmt

    out = summary_lines(switch)
    out += [f"note: {inline(n)}" for n in switch.notes]
    out += endpoint_lines(switch.diff, switch.absent)
    out.append("")
    out.append(planfmt.to_text([p for _, p in switch.plans], show_txt=False, names=names).rstrip("\n"))
    out.append("")
    out.append("zone after the switch:")
    out.append(inventory.to_text(switch.zone.domain, inventory.inventory(switch.after, names)).rstrip("\n"))
    return "\n".join(out) + "\n"


def to_markdown(switch: Switch, title: str | None = None, names: dict[str, str] | None = None) -> str:
    from gitdns.core import inventory
    from gitdns.core.plan import fmt as planfmt

    title = title or f"Failover of {switch.zone.domain}: {show(switch.groups_before)} -> {show(switch.groups_after)}"
    out = [f"## {title}", ""]
    out += [f"- {line}" for line in summary_lines(switch)]
    out += [f"> {md_text(n)}" for n in switch.notes]
    caveat = f" ({ABSENT_CAVEAT})" if switch.absent else ""
    out += ["", f"### Endpoints: {len(switch.diff.added)} added, {len(switch.diff.removed)} removed{caveat}", ""]
    if switch.diff.empty:
        out.append("_No endpoint changes._")
    else:
        out.append("```diff")
        out += endpoint_lines(switch.diff)[1:]
        out.append("```")
    out.append("")
    out.append(planfmt.to_markdown([p for _, p in switch.plans if p.changes or p.conflicts],
                                   title="Plans, every publishing cluster in turn", names=names))
    out.append("<details><summary>Zone after the switch</summary>\n")
    out.append(md_block(inventory.to_text(switch.zone.domain, inventory.inventory(switch.after, names))))
    out.append("</details>\n")
    return "\n".join(out)


def endpoint_dict(point: Endpoint) -> dict[str, object]:
    """One endpoint as JSON, keyed as `planfmt.record_dict` keys a record (routing only when set)."""
    out: dict[str, object] = {"name": point.name, "type": point.type, "ttl": point.ttl, "value": point.value}
    if point.set_id:
        out["setIdentifier"] = point.set_id
    if point.weight is not None:
        out["weight"] = point.weight
    if point.geo is not None:
        out["geo"] = point.geo
    return out


def endpoints_dict(diff: EndpointDiff, absent: str = "") -> dict[str, object]:
    """`endpoint_lines` as JSON: added and removed endpoints, changed records (same values,
    other TTL or routing) before and after; ``caveat`` when the zone compared with does not exist."""
    from gitdns.core.plan.fmt import record_dict

    return {"added": [endpoint_dict(e) for e in diff.added], "removed": [endpoint_dict(e) for e in diff.removed],
            "changed": [{"before": record_dict(a), "after": record_dict(b)} for a, b in diff.changed],
            "caveat": ABSENT_CAVEAT if absent else None}


def _pass(step: str) -> int:
    """The agents' cycle a plan of `simulate_switch` belongs to: its label is the cluster's name,
    ``"<name> (pass N)"`` from the second pass on."""
    head, sep, tail = step.rpartition(" (pass ")
    return int(tail[:-1]) if sep and head and tail.endswith(")") and tail[:-1].isdigit() else 1


def to_json(switch: Switch, names: dict[str, str] | None = None, base: str | None = None) -> str:
    """The switch as one JSON document: the groups and serial, who publishes, the notes, the
    endpoints, every plan in the order applied (``step``: its label in the text, ``pass``: the
    cycle), and the zone after the switch (`inventory.to_json`'s records)."""
    from gitdns.core import inventory
    from gitdns.core.plan import fmt as planfmt

    doc = {
        "zone": switch.zone.domain,
        "zoneName": switch.zone.name,
        "base": base,
        "groupsBefore": list(switch.groups_before),
        "groupsAfter": list(switch.groups_after),
        "serialAfter": switch.serial_after,
        "publishing": list(switch.publishing),
        "silent": list(switch.silent),
        "notes": list(switch.notes),
        "endpoints": endpoints_dict(switch.diff, switch.absent),
        "plans": [{"step": step, "pass": _pass(step), **planfmt.plan_dict(plan, names)}
                  for step, plan in switch.plans],
        "after": inventory.to_dict(switch.zone.domain, inventory.inventory(switch.after, names)),
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def simulate(repo: Path, ident: str, target: Sequence[str], fmt: str = "text", *,
             fences: Fences = STRICT, base: str | None = None) -> Result:
    """``gitdns failover simulate ZONE --to GROUP...``: text, markdown or JSON.  ``base``: switch the
    zone as the fleet publishes that revision, built from git alone (`gitdns.commands.plan.command.over`),
    instead of reading it from its provider."""
    from gitdns.reconcile.engine import default_factory, load

    check_group_names(target)
    desired = load(repo)
    zone = need_zone(desired, ident, repo)
    notes: list[str] = []
    if zone.name in desired.blocked:
        notes.append(f"the desired state of {zone.domain} does not validate (`gitdns validate`): agents hold "
                     "the zone as it is until it does")
    provider: Provider | None = None
    if base is not None:
        from gitdns.commands.plan.base import over
        from gitdns.reconcile.run import published

        prepared = over(Path(repo), desired, published(desired), base, time.time())
        now, note = prepared.factory(zone).read(zone.domain), ""
        notes += [*prepared.notes[:1], *prepared.late_notes()]
    else:
        try:
            provider = default_factory(repo, fences=fences)(zone)
        except GitdnsError as exc:
            notes.append(f"no provider: {exc} ({exc.reason})")
        now, note = current_zone(desired, zone, provider)
    switch = simulate_switch(desired, zone, now, tuple(target), notes=[*notes, *([note] if note else [])],
                             status=local_status(Path(repo)), absent=absent_zone(provider, zone))
    names = {c.id: c.name for c in desired.state.clusters}
    if fmt == "json":
        return Result(out=[to_json(switch, names, base)])
    return Result(out=[to_markdown(switch, names=names) if fmt == "markdown" else to_text(switch, names)])
