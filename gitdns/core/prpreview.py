"""The pull-request preview a reviewer reads in ten seconds (`gitdns plan --all-clusters`).

One verdict line (record changes, zones, conflicts, guard stalls, clusters affected), then per
zone the changed records old → new, taken from the zone before and after every cluster's pass
(not from the per-cluster plans, where several clusters touch one record); the ownership TXT
each cluster writes summarised as a count (in full with ``verbose`` and in JSON); for every
loadbalanced host whose split changes, the split before and after (`gitdns.core.split`: a
Mermaid diagram and a table in markdown); for a zone whose active groups switch, the groups,
the targets that leave and join, and what the health gate said.

    review_zone(...) -> ZoneReview     one zone's part, from its preview
    verdict(zones) -> str              the first line
    to_text / to_markdown / to_json    the three formats (markdown within ``limit`` characters:
                                       one GitHub comment; beyond it, a summary and how to see
                                       the rest)

Every value from a zone or a repository goes through the text gate (`gitdns.core.text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gitdns.core.plan import fmt as planfmt
from gitdns.core.plan.planner import decode_zone
from gitdns.core.plan.values import Plan
from gitdns.core.records import RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.split import SplitChange, changed_splits, split_mermaid, split_table, split_text
from gitdns.core.text import inline, lines, md_code, md_text

GITHUB_COMMENT = 65_536  # characters GitHub keeps of one comment
HEALTH_NOTE = "has published no status; every target is taken as healthy"  # said once, in the notes


@dataclass(frozen=True, slots=True)
class Failover:
    """A zone's active groups switching: before and after (serials), what leaves and joins,
    and the health gate's answer (its problems; none: every group activated has a target)."""

    groups_before: tuple[str, ...]
    groups_after: tuple[str, ...]
    serial_before: int | None
    serial_after: int | None
    leaving: tuple[str, ...]
    joining: tuple[str, ...]
    gate: tuple[str, ...]
    activated: tuple[str, ...] = ()  # the groups the switch makes active that were not


@dataclass(frozen=True, slots=True)
class ZoneReview:
    zone: str
    changes: tuple[tuple[RecordKey, RecordSet | None, RecordSet | None], ...]  # (key, old, new), data records
    plans: tuple[tuple[str, Plan], ...]  # (cluster name, its effective plan)
    splits: tuple[SplitChange, ...]
    failover: Failover | None = None
    notes: tuple[str, ...] = ()
    held: str = ""  # why the zone was not previewed

    @property
    def ownership(self) -> dict[str, int]:
        """Ownership TXT changes per cluster."""
        out: dict[str, int] = {}
        for name, plan in self.plans:
            count = sum(1 for c in plan.changes if c.key != c.group)
            if count:
                out[name] = out.get(name, 0) + count
        return out

    @property
    def conflicts(self) -> list[tuple[str, str]]:
        return [(name, planfmt.conflict_line(c)) for name, plan in self.plans for c in plan.real_conflicts]

    @property
    def stalls(self) -> list[tuple[str, str]]:
        return [(name, plan.stalled) for name, plan in self.plans if plan.stalled]

    @property
    def affected(self) -> list[str]:
        return [name for name, plan in self.plans if plan.changes]


@dataclass(frozen=True, slots=True)
class Review:
    zones: tuple[ZoneReview, ...]
    notes: tuple[str, ...] = ()
    # zone -> each cluster's plan and the merged zone, as text and as markdown (``verbose``)
    detail: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def review_zone(zone: str, before: ZoneSnapshot, after: ZoneSnapshot, plans: Sequence[tuple[str, Plan]], *,
                names: Mapping[str, str] | None = None, failover: Failover | None = None) -> ZoneReview:
    """One zone's part: its data records that differ, before → after; its changed splits."""
    old, new = decode_zone(before).data, decode_zone(after).data
    changes = tuple((key, old.get(key), new.get(key)) for key in sorted(old.keys() | new.keys())
                    if old.get(key) != new.get(key))
    notes = tuple(dict.fromkeys(n for _, plan in plans for n in plan.notes if not n.endswith(HEALTH_NOTE)))
    return ZoneReview(zone, changes, tuple(plans), tuple(changed_splits(before, after, names)), failover, notes)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def verdict(zones: Sequence[ZoneReview]) -> str:
    """``3 record changes in 1 zone; no conflicts; no guard stalls; clusters affected: a, b``."""
    changed = [z for z in zones if z.changes]
    total = sum(len(z.changes) for z in zones)
    conflicts = sum(len(z.conflicts) for z in zones)
    stalls = sum(len(z.stalls) for z in zones)
    held = [z.zone for z in zones if z.held]
    affected = sorted({name for z in zones for name in z.affected})
    parts = [f"{_count(total, 'record change')} in {_count(len(changed), 'zone')}" if total else "no record changes",
             _count(conflicts, "conflict") if conflicts else "no conflicts",
             _count(stalls, "guard stall") if stalls else "no guard stalls",
             f"clusters affected: {', '.join(affected)}" if affected else "no cluster writes"]
    if held:
        parts.append(f"held (not previewed): {', '.join(held)}")
    return inline("; ".join(parts))


# --- one change, old -> new -----------------------------------------------------------------------


def _routing(rec: RecordSet) -> list[str]:
    out = [f"ttl {rec.ttl}"]
    if rec.weight is not None:
        out.append(f"weight {rec.weight}")
    if rec.geo is not None:
        out.append(f"geo {rec.geo}")
    return out


def describe(old: RecordSet | None, new: RecordSet | None) -> tuple[str, str]:
    """What differs, as (before, after) texts: the values and the TTL, weight or geo that changed
    (all of them for a record created or deleted)."""
    if old is None or new is None:
        rec = old or new
        assert rec is not None
        text = f"{', '.join(rec.values)} ({', '.join(_routing(rec))})"
        return ("", text) if old is None else (text, "")
    was, now = [], []
    if old.values != new.values:
        was.append(", ".join(old.values))
        now.append(", ".join(new.values))
    for a, b in zip(_routing(old), _routing(new), strict=False):
        if a != b:
            was.append(a)
            now.append(b)
    if len(_routing(old)) != len(_routing(new)):
        was.append(", ".join(_routing(old)))
        now.append(", ".join(_routing(new)))
    return "; ".join(was), "; ".join(now)


def _sign(old: RecordSet | None, new: RecordSet | None) -> str:
    return "+" if old is None else "-" if new is None else "~"


def _key(key: RecordKey) -> str:
    return f"{key.name} {key.type}" + (f" [{key.set_id}]" if key.set_id else "")


# --- text -------------------------------------------------------------------------------------------


def to_text(review: Review, *, verbose: bool = False) -> str:
    out = [verdict(review.zones), *(f"note: {n}" for n in review.notes)]
    for zone in review.zones:
        out.append("")
        if zone.held:
            out.append(f"zone {zone.zone}: not previewed: {zone.held}")
            continue
        out.append(f"zone {zone.zone}: {_count(len(zone.changes), 'record change') if zone.changes else 'no changes'}")
        for key, old, new in zone.changes:
            was, now = describe(old, new)
            sep = " -> " if was and now else ""
            out.append(f"  {_sign(old, new)} {_key(key)}: {was}{sep}{now}")
        if zone.ownership:
            counts = ", ".join(f"{name} {n}" for name, n in zone.ownership.items())
            out.append(f"  ownership TXT changes: {counts}" + ("" if verbose else " (--verbose lists them)"))
        out += [f"  ! {name}: {text}" for name, text in zone.conflicts]
        out += [f"  stalled: {name}: {why}" for name, why in zone.stalls]
        if zone.failover is not None:
            out += [f"  {line}" for line in _failover_lines(zone.failover)]
        for change in zone.splits:
            out += [f"  {line}" for line in split_text(change)]
        out += [f"  note: {n}" for n in zone.notes]
    text = lines(out)
    if verbose:
        text += "".join(review.detail[z.zone][0] for z in review.zones if z.zone in review.detail)
    return text


def _failover_lines(f: Failover) -> list[str]:
    def groups(g: tuple[str, ...], serial: int | None) -> str:
        return (", ".join(g) or "every group") + (f" (serial {serial})" if serial is not None else "")

    out = [f"failover: active groups {groups(f.groups_before, f.serial_before)} -> "
           f"{groups(f.groups_after, f.serial_after)}"]
    out += [f"  leaves: {t}" for t in f.leaving] or ["  leaves: nothing"]
    out += [f"  joins: {t}" for t in f.joining] or ["  joins: nothing"]
    if f.gate:
        out += [f"  health gate: {g}" for g in f.gate]
    elif f.activated:
        out.append(f"  health gate: {', '.join(f.activated)} activated, each with a healthy target")
    else:
        out.append("  health gate: no group is activated (a narrowing: nothing to check)")
    return out


# --- markdown -----------------------------------------------------------------------------------------


def _zone_markdown(zone: ZoneReview, verbose: bool, review: Review) -> list[str]:
    if zone.held:
        return [f"#### {md_code(zone.zone)}: not previewed", "", f"> {md_text(zone.held)}", ""]
    head = _count(len(zone.changes), "record change") if zone.changes else "no changes"
    out = [f"#### {md_code(zone.zone)}: {head}", ""]
    if zone.changes:
        out += ["| | record | before | after |", "|---|---|---|---|"]
        for key, old, new in zone.changes:
            was, now = describe(old, new)
            out.append(f"| {_sign(old, new)} | {md_code(_key(key))} | {md_code(was) if was else ''} "
                       f"| {md_code(now) if now else ''} |")
        out.append("")
    if zone.ownership:
        counts = ", ".join(f"{md_text(name)} {n}" for name, n in zone.ownership.items())
        out += [f"Ownership TXT changes: {counts}" + ("" if verbose else " (`--verbose` lists them)"), ""]
    for name, text in zone.conflicts:
        out.append(f"- **conflict** ({md_text(name)}): {md_text(text)}")
    for name, why in zone.stalls:
        out.append(f"- **stalled** ({md_text(name)}): {md_text(why)}")
    if zone.conflicts or zone.stalls:
        out.append("")
    if zone.failover is not None:
        out += ["**Failover**", "", *(f"- {md_text(line.strip())}" for line in _failover_lines(zone.failover)), ""]
    for change in zone.splits:
        out += [f"**Traffic split of {md_code(change.host)}**", "", split_mermaid(change).rstrip("\n"), "",
                *split_table(change), ""]
    out += [f"> {md_text(n)}" for n in zone.notes]
    if verbose and zone.zone in review.detail:
        out += ["", review.detail[zone.zone][1].rstrip("\n")]
    return [*out, ""]


def to_markdown(review: Review, *, title: str = "gitdns preview", verbose: bool = False,
                limit: int = GITHUB_COMMENT, rest: str = "gitdns plan --all-clusters --format json") -> str:
    """The preview as one pull-request comment, within ``limit`` characters: zones that do not
    fit are listed by name with their counts, and ``rest`` says how to see them whole."""
    head = [f"### {md_text(title)}", "", f"**{md_text(verdict(review.zones))}**", ""]
    if review.notes:
        head += [*(f"> {md_text(n)}" for n in review.notes), ""]
    body: list[str] = []
    left_out: list[ZoneReview] = []
    used = len("\n".join(head)) + 400  # room for the summary of what is left out
    for zone in review.zones:
        part = _zone_markdown(zone, verbose, review)
        size = len("\n".join(part)) + 1
        if left_out or used + size > limit:
            left_out.append(zone)
            continue
        body += part
        used += size
    if left_out:
        body += [f"**{len(left_out)} more zone(s) not shown** (one comment holds {limit} characters): "
                 + ", ".join(f"{md_code(z.zone)} ({len(z.changes)})" for z in left_out[:50])
                 + (" …" if len(left_out) > 50 else "") + f". Run {md_code(rest)} to see every change.", ""]
    return "\n".join([*head, *body]).rstrip("\n") + "\n"


# --- JSON -------------------------------------------------------------------------------------------------


def zone_dict(zone: ZoneReview) -> dict[str, object]:
    """The reviewer's part of a zone in JSON (beside its plans and merged records)."""
    return {
        "changes": [{"action": {"+": "create", "-": "delete", "~": "update"}[_sign(old, new)],
                     "old": planfmt.record_dict(old), "new": planfmt.record_dict(new)}
                    for _, old, new in zone.changes],
        "ownership": zone.ownership,
        "conflicts": [{"cluster": name, "conflict": text} for name, text in zone.conflicts],
        "stalls": [{"cluster": name, "reason": why} for name, why in zone.stalls],
        "splits": [_split_dict(c) for c in zone.splits],
        "failover": None if zone.failover is None else {
            "groupsBefore": list(zone.failover.groups_before), "groupsAfter": list(zone.failover.groups_after),
            "serialBefore": zone.failover.serial_before, "serialAfter": zone.failover.serial_after,
            "leaving": list(zone.failover.leaving), "joining": list(zone.failover.joining),
            "activated": list(zone.failover.activated), "healthGate": list(zone.failover.gate)},
        "held": zone.held or None,
    }


def _split_dict(change: SplitChange) -> dict[str, object]:
    def side(split: object) -> object:
        if split is None:
            return None
        return [{"pool": p.name, "geos": list(p.geos),
                 "targets": [{"target": t.target, "weight": t.weight, "share": round(t.share, 4),
                              "clusters": list(t.owners)} for t in p.targets]}
                for p in split.pools]  # type: ignore[attr-defined]
    return {"host": change.host, "before": side(change.before), "after": side(change.after)}


def summary_dict(zones: Sequence[ZoneReview]) -> dict[str, object]:
    return {"verdict": verdict(zones),
            "recordChanges": sum(len(z.changes) for z in zones),
            "zonesChanged": [z.zone for z in zones if z.changes],
            "conflicts": sum(len(z.conflicts) for z in zones),
            "stalls": sum(len(z.stalls) for z in zones),
            "clustersAffected": sorted({n for z in zones for n in z.affected}),
            "held": [z.zone for z in zones if z.held]}
