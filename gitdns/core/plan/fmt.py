"""Plan output: text for terminals, markdown for pull-request comments, JSON for tools."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from gitdns.core.plan.values import Conflict, Plan
from gitdns.core.records import Action, Change, RecordSet
from gitdns.core.text import inline, md_code, md_text
from gitdns.core.text import lines as text_lines

_SIGN = {Action.CREATE: "+", Action.UPDATE: "~", Action.DELETE: "-"}


def _values(rec: RecordSet | None) -> str:
    if rec is None:
        return ""
    routing = []
    if rec.set_id:
        routing.append(f"set={rec.set_id}")
    if rec.weight is not None:
        routing.append(f"weight={rec.weight}")
    if rec.geo is not None:
        routing.append(f"geo={rec.geo}")
    extra = f" {' '.join(routing)}" if routing else ""
    return inline(f"ttl={rec.ttl}{extra} [{', '.join(rec.values)}]")


def change_line(change: Change) -> str:
    rec = change.record
    head = f"{_SIGN[change.action]} {inline(rec.name)} {rec.type}"
    if change.action is Action.UPDATE:
        return f"{head} {_values(change.old)} -> {_values(change.new)}"
    return f"{head} {_values(rec)}"


def failed_line(change: Change) -> str:
    """A change the provider did not write (its error, with the reason, follows the block)."""
    return f"failed: {change_line(change)}"


def errors_count(errors: Sequence[str]) -> str:
    """The summary's tail when a zone has errors (", 1 error(s)"): as many as the error lines
    printed under it; nothing when there is none."""
    return f", {len(errors)} error(s)" if errors else ""


def owner_label(owner: str, names: Mapping[str, str] | None) -> str:
    """A cluster by its Cluster name with its id beside it; an id git does not name as is."""
    name = (names or {}).get(owner)
    return f"cluster {name} ({owner})" if name and name != owner else f"owner {owner}"


def _headline(plan: Plan, names: Mapping[str, str] | None = None) -> str:
    data = [c for c in plan.changes if c.key == c.group]
    counts = {a: sum(1 for c in data if c.action is a) for a in Action}
    txt = len(plan.changes) - len(data)
    state = f" STALLED ({plan.stalled})" if plan.stalled else ""
    extra = f" (+{txt} ownership TXT change(s))" if txt else ""
    return (f"zone {plan.zone} {owner_label(plan.owner, names)}: {counts[Action.CREATE]} to create, "
            f"{counts[Action.UPDATE]} to update, {counts[Action.DELETE]} to delete{extra}, "
            f"{len(plan.conflicts)} conflict(s){state}")


def conflict_line(conflict: Conflict) -> str:
    who = f" [owners: {', '.join(conflict.owners)}]" if conflict.owners else ""
    return inline(f"{conflict.reason}: {conflict.message}{who}")


def to_text(plans: Sequence[Plan], *, show_txt: bool = True, names: Mapping[str, str] | None = None) -> str:
    lines: list[str] = []
    for plan in plans:
        lines.append(_headline(plan, names))
        if plan.authority.value != "own":
            lines.append(f"  authority: {plan.authority.value}")
        lines.extend(f"  {change_line(c)}" for c in plan.changes if show_txt or c.key == c.group)
        lines.extend(f"  refused: {change_line(c)}" for c in plan.refused if show_txt or c.key == c.group)
        lines.extend(f"  ! {conflict_line(c)}" for c in plan.conflicts)
        lines.extend(f"  note: {n}" for n in plan.notes)
    return text_lines(lines)


def to_markdown(plans: Sequence[Plan], title: str = "gitdns plan", names: Mapping[str, str] | None = None) -> str:
    out = [f"### {title}", ""]
    for plan in plans:
        out.append(f"**{_headline(plan, names)}**")
        out.append("")
        data = [c for c in plan.changes if c.key == c.group]
        if data:
            out.append("```diff")
            out.extend(change_line(c) for c in data)
            out.append("```")
            hidden = len(plan.changes) - len(data)
            if hidden:
                out.append(f"<sub>{hidden} ownership TXT change(s) not shown</sub>")
        elif plan.changes:
            out.append(f"_No record changes; {len(plan.changes)} ownership TXT change(s)._")
        else:
            out.append("_No changes._")
        refused = [c for c in plan.refused if c.key == c.group]
        if refused:
            out.append(f"Refused by the guard ({plan.stalled}), not written:")
            out.append("```diff")
            out.extend(change_line(c) for c in refused)
            out.append("```")
        if plan.conflicts:
            out.append("")
            out.append("| reason | record | detail |")
            out.append("|---|---|---|")
            for c in plan.conflicts:
                out.append(f"| {c.reason} | {md_code(str(c.key))} | {md_text(c.message)} |")
        out.extend(f"> {md_text(n)}" for n in plan.notes)
        out.append("")
    return "\n".join(out)


def record_dict(rec: RecordSet | None) -> dict[str, object] | None:
    if rec is None:
        return None
    out: dict[str, object] = {"name": rec.name, "type": rec.type, "ttl": rec.ttl,
                              "values": list(rec.values)}
    if rec.set_id:
        out["setIdentifier"] = rec.set_id
    if rec.weight is not None:
        out["weight"] = rec.weight
    if rec.geo is not None:
        out["geo"] = rec.geo
    return out


def change_dict(change: Change) -> dict[str, object]:
    return {"action": change.action.value, "group": str(change.group), "old": record_dict(change.old),
            "new": record_dict(change.new), **({"reason": change.reason} if change.reason else {})}


def plan_dict(plan: Plan, names: Mapping[str, str] | None = None) -> dict[str, object]:
    return {
        "zone": plan.zone,
        "owner": plan.owner,
        **({"cluster": names[plan.owner]} if names and plan.owner in names else {}),
        "authority": plan.authority.value,
        "revision": plan.revision.label if plan.revision else None,
        "stalled": plan.stalled,
        "managed": plan.managed,
        "summary": plan.summary(),
        "changes": [change_dict(c) for c in plan.changes],
        "guards": [{"key": str(g.key), "present": g.present, "group": str(g.group), "why": g.why}
                   for g in plan.guards],
        "refused": [{"action": c.action.value, "group": str(c.group), "old": record_dict(c.old),
                     "new": record_dict(c.new)} for c in plan.refused],
        "conflicts": [{"reason": c.reason, "key": str(c.key), "message": c.message,
                       "owners": list(c.owners)} for c in plan.conflicts],
        "notes": list(plan.notes),
    }


def to_json(plans: Iterable[Plan], extra: dict[str, object] | None = None,
            names: Mapping[str, str] | None = None) -> str:
    doc: dict[str, object] = {"plans": [plan_dict(p, names) for p in plans]}
    if extra:
        doc.update(extra)
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def bookkeeping(rec: RecordSet, names: Mapping[str, str] | None = None) -> str | None:
    """What gitdns's own bookkeeping record ``rec`` is, for a person ("gitdns heartbeat of
    eu-west-1", "gitdns active groups"), or None for any other record.  These TXT carry no
    ownership record of their own: shown as FOREIGN they would look like someone else's."""
    from gitdns.core.groups import GITDNS_PREFIX, KUADRANT_PREFIX
    from gitdns.core.owner.zone import HEARTBEAT_PREFIX, parse_heartbeat

    if rec.type != "TXT":
        return None
    if rec.name.startswith(HEARTBEAT_PREFIX):
        beat = parse_heartbeat(rec)
        if beat is None:
            return "gitdns heartbeat (unreadable value)"
        who = (names or {}).get(beat[0])
        return f"gitdns heartbeat of {who} ({beat[0]})" if who else f"gitdns heartbeat of owner {beat[0]}"
    if rec.name.startswith("gitdns-lock-"):
        fields = dict(part.partition("=")[::2] for part in (rec.values[0] if rec.values else "").strip('"').split(","))
        holder = fields.get("holder", "")
        return f"gitdns lease (held by {holder})" if holder else "gitdns lease"
    if rec.name.startswith(GITDNS_PREFIX):
        return "gitdns active groups"
    if rec.name.startswith(KUADRANT_PREFIX):
        return "active groups (Kuadrant's record, mirrored by gitdns)"
    return None
