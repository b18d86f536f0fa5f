"""Where one desired commit stands across the fleet: ``gitdns status --revision``.

Per cluster: applied (a status commit has an appliedRevision that is it or a descendant, and no
zone held below it), held (a zone kept at a last good revision older than it), failed (a later
attempt reported Ready False while the applied revision is older), pending (none of these, or
no status branch yet) or retired.  The decision between applied and held is the one
``gitdns history`` makes (`history.held.applied_or_held`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from gitdns.commands.history.held import applied_or_held
from gitdns.commands.status.log import Entry, FleetLog, ZoneState
from gitdns.commands.status.view import UNPUBLISHED, label_sha, table
from gitdns.core.text import lines as text_lines
from gitdns.errors import ConfigError

STATES = ("applied", "pending", "held", "failed", "retired")


def revision_status(agg: Mapping[str, Any], flog: FleetLog, revision: str, head: str, branch: str, *,
                    found: tuple[str, int] | None = None, where: str = "") -> dict[str, Any]:
    """Where one desired commit stands in each cluster: applied (a status commit has an
    appliedRevision that is it or a descendant, and no zone held below it), held (such a status
    commit holds a zone at a last good revision older than it: the revision does not validate
    for the zone), failed (a later attempt at it or after it reported Ready False while the
    applied revision is older), pending otherwise; retired clusters are said so.  ``found``:
    the revision resolved (`FleetLog.resolve`), else ``revision`` is resolved in the cache."""
    found = found if found is not None else flog.commit(revision)
    if found is None:
        text, there = revision.strip(), where or "the desired repository"
        if len(text) >= 7 and all(ch in "0123456789abcdefABCDEF" for ch in text):
            raise ConfigError(f"--revision {revision}: no commit of the desired branch {branch} of {there} has "
                              f"that sha (only {branch}'s history is read: a commit on another branch is applied "
                              "once merged)")
        raise ConfigError(f"--revision {revision}: git cannot resolve it in {there} (give a commit sha or an "
                          f"abbreviation, a tag, HEAD or {branch})")
    if not flog.contains(found[0], head):
        named = "" if found[0].startswith(revision.strip().lower()) else f" ({found[0][:7]})"
        raise ConfigError(f"--revision {revision}{named}: not a commit of the desired branch {branch}")
    sha, when = found
    out: dict[str, Any] = {}
    for cid, c in agg["clusters"].items():
        entries = flog.entries(cid)
        reached = [e for e in entries if flog.contains(sha, e.applied)]
        first = reached[0] if reached else None
        last = entries[-1] if entries else None
        row: dict[str, Any] = {"cluster": c["cluster"], "appliedRevision": c.get("appliedRevision")}
        if c.get("retired"):  # and when it applied the commit before it left, if it did
            row["state"] = "retired"
            if first is not None:
                row.update(at=iso(first.time), appliedRevision=first.applied)
        elif first is not None:
            row.update(_applied_or_held(flog, cid, sha, reached))
        elif last is not None and not last.ready and flog.contains(sha, last.attempted):
            attempt = next(e for e in entries if flog.contains(sha, e.attempted) and not e.ready)
            row.update(state="failed", at=iso(attempt.time), attemptedRevision=last.attempted,
                       reason=last.reason, message=last.message)
        else:
            row["state"] = "pending"
        out[cid] = row
    for waiting in agg.get("unpublished", ()):
        out[waiting["id"] or waiting["cluster"]] = {"cluster": waiting["cluster"], "appliedRevision": None,
                                                    "state": "pending", "unpublished": True}
    asked = "" if sha.startswith(revision.strip().lower()) else revision.strip()
    counts = {state: sum(1 for r in out.values() if r["state"] == state) for state in STATES}
    counts["unpublished"] = sum(1 for r in out.values() if r.get("unpublished"))
    return {"revision": sha, "asked": asked or None, "committedAt": iso(when), "desiredBranch": branch,
            "clusters": out, "counts": counts}


def _applied_or_held(flog: FleetLog, cid: str, sha: str, reached: Sequence[Entry]) -> dict[str, Any]:
    """The status commits whose appliedRevision contains ``sha``, oldest first: applied or held
    as `history.held.applied_or_held` decides (``gitdns history`` decides so too) — when held,
    the zones still held at the latest of them, and why."""
    decision = applied_or_held(_zones_of(flog, cid, reached), lambda label: _label_contains(flog, sha, label))
    if decision.applied is not None:
        return {"state": "applied", "at": iso(decision.applied.time), "appliedRevision": decision.applied.applied}
    since, latest = decision.since, decision.latest
    assert since is not None and latest is not None
    return {"state": "held", "at": iso(since.time), "appliedRevision": latest.applied, "statusCommit": latest.sha,
            "heldZones": {zone: {"appliedRevision": z.applied, "reason": z.reason, "problems": list(z.problems)}
                          for zone, z in sorted(decision.held.items())}}


def _zones_of(flog: FleetLog, cid: str, entries: Sequence[Entry]) -> Iterator[tuple[Entry, dict[str, ZoneState]]]:
    """Each entry with its zones' states, read in growing batches (most answers need the first few)."""
    start, size = 0, 8
    while start < len(entries):
        batch = entries[start:start + size]
        states = flog.zone_states(cid, [e.sha for e in batch])
        for entry in batch:
            yield entry, states.get(entry.sha, {})
        start, size = start + size, size * 2


def _label_contains(flog: FleetLog, sha: str, label: str | None) -> bool:
    """A held zone's last good revision (a ``<time>.<sha7>`` label) is ``sha`` or a descendant."""
    if not label:
        return False
    text = label_sha(label)
    found = flog.commit(text) if len(text) >= 7 else None
    return found is not None and flog.contains(sha, found[0])


def revision_text(rev: Mapping[str, Any]) -> str:
    rows = [("CLUSTER", "ID", "STATE", "AT", "DETAIL")]
    for cid, r in rev["clusters"].items():
        rows.append((r["cluster"], cid[:13], r["state"], r.get("at") or "-", _detail(r)))
    counts = rev["counts"]
    asked = f" = {rev['asked']}" if rev.get("asked") else ""
    lines = [f"revision {rev['revision'][:7]}{asked} ({rev['desiredBranch']}, committed {rev['committedAt']})", "",
             *table(rows), "",
             ", ".join(f"{counts[s]} {s}" for s in STATES if counts.get(s)) or "no cluster"]
    return text_lines(lines)


def _detail(r: Mapping[str, Any]) -> str:
    state = r["state"]
    if r.get("unpublished"):
        return f"no status branch: {UNPUBLISHED}"
    if state in ("applied", "pending"):
        return f"applied {short_revision(r.get('appliedRevision'))}"
    if state == "failed":
        return f"{r.get('reason', '')}: {r.get('message', '')}".strip(": ")
    if state == "held":
        return "; ".join(f"zone {zone} stays at {_last_good(z.get('appliedRevision'))}: {z['reason']}"
                         for zone, z in r["heldZones"].items())
    return "no longer in git" + (f"; had applied it ({short_revision(r.get('appliedRevision'))})" if r.get("at")
                                 else "; never applied it")


def _last_good(label: str | None) -> str:
    return short_revision(label_sha(label)) if label else "its last good revision"


def iso(when: float | int | None) -> str | None:
    """A UTC time as ``2023-11-14T22:13:20Z``."""
    if when is None:
        return None
    return datetime.fromtimestamp(int(when), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def short_revision(revision: object) -> str:
    if not revision:
        return "nothing yet"
    text = str(revision)
    return text[:7] if len(text) >= 40 else text
