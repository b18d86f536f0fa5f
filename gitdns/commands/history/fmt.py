"""Text and JSON of a `gitdns.commands.history.trace.History`, and the ``gitdns history`` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.git.source import CommitInfo
from gitdns.commands import Result
from gitdns.commands.history.diff import Applied, Entry, Merged, RecordDiff, iso_date
from gitdns.commands.history.trace import History, history
from gitdns.commands.history.walk import Commit
from gitdns.commands.history.who import MARKS, who_dict, who_lines
from gitdns.core.plan.fmt import record_dict
from gitdns.core.progress import NO_PROGRESS, Progress
from gitdns.core.records import RecordSet
from gitdns.core.text import inline
from gitdns.core.text import lines as text_lines


def _content(rec: RecordSet) -> str:
    routing = [f"ttl={rec.ttl}"]
    if rec.weight is not None:
        routing.append(f"weight={rec.weight}")
    if rec.geo is not None:
        routing.append(f"geo={rec.geo}")
    return inline(f"{' '.join(routing)} [{', '.join(rec.values)}]")


def _merged_text(m: Merged) -> str:
    if not m.conflict:
        return _content(m.variants[0])
    parts = [f"{_content(v)} wanted by {', '.join(o) or '?'}"
             for v, o in zip(m.variants, m.owners or ((),) * len(m.variants), strict=True)]
    return "CONFLICT: clusters disagree: " + " | ".join(parts)


def change_line(change: RecordDiff) -> str:
    head = f"{change.op} {change.key}"
    if change.op == "~":
        assert change.old is not None and change.new is not None
        return f"{head} {_merged_text(change.old)} -> {_merged_text(change.new)}"
    rec = change.new if change.new is not None else change.old
    assert rec is not None
    return f"{head} {_merged_text(rec)}"


def _who(c: CommitInfo | Commit) -> str:
    if isinstance(c, Commit) and c.committer and c.committer != c.author:
        return f"{c.author} (committed by {c.committer})"
    return c.author


def applied_text(a: Applied) -> str:
    if a.held_since:
        return (f"{a.cluster}: held {iso_date(a.held_since)}: zone {a.held_zone} stays at "
                f"{a.last_good or 'its last good revision'} ({a.held_reason}); not applied")
    if not a.branch:
        return f"{a.cluster}: not applied yet (no status branch)"
    if not a.at and not a.in_git:
        return f"{a.cluster}: not in git at this revision"
    if not a.at:
        return f"{a.cluster}: not applied yet"
    later = "" if a.exact else f" (as part of {a.revision[:7]})"
    return f"{a.cluster}: applied {iso_date(a.at)}{later}"


def to_text(result: History) -> str:
    where = f" path {result.path}" if result.path else ""
    more = ", older commits not examined (raise --max-commits)" if result.truncated else ""
    what = "value" if result.by_value else "name"
    commits = [e for e in result.entries if e.status not in ("health", "invalid")]
    invalid = sum(1 for e in result.entries if e.status == "invalid")
    held = f" and {invalid} invalid commit(s)" if invalid else ""
    lines = [f"history of {what} {result.name}: {len(commits)} change(s){held} in {result.commits} commit(s) of branch "
             f"{result.branch}{where}{_window(result)}, {result.status_branches} status branch(es){more}"]
    if not result.entries:
        lines.append(f"no commit changed the desired records of {result.name}"
                     + (" in that window" if result.since is not None or result.until is not None else ""))
    lines.extend(f"hint: {h}" for h in result.hints)
    if not result.by_value:
        for entry in result.entries:
            lines.extend(_entry_text(entry, None))
        return text_lines(lines)
    for name in sorted({n for e in result.entries for n in e.names}):
        lines += ["", f"== {name}"]
        for entry in result.entries:
            if entry.status != "health" and (name in entry.names or _held_for(entry, name)):
                lines.extend(_entry_text(entry, name))
    health = [e for e in result.entries if e.status == "health"]
    if health:  # a withdrawal names the host and the address, not one record name: listed once
        lines += ["", f"== {result.name} withdrawn or restored by health checks (status branches)"]
        for entry in health:
            lines.extend(_entry_text(entry, None))
    return text_lines(lines)


def _held_for(entry: Entry, name: str) -> bool:
    """An invalid entry holds ``name``: it is in (or is) one of the entry's zones."""
    return entry.status == "invalid" and any(name == z or name.endswith("." + z)
                                             for z in (d.strip() for d in entry.zone.split(",")) if z)


def _window(result: History) -> str:
    """The window as git read --since/--until (on when each commit reached the branch)."""
    if result.since is None and result.until is None:
        return ""
    lo = iso_date(result.since) if result.since is not None else "the start"
    hi = iso_date(result.until) if result.until is not None else "now"
    return f" that reached it from {lo} to {hi}"


def _entry_text(entry: Entry, only: str | None) -> list[str]:
    c = entry.commit
    lines = [""]
    if entry.status == "health":
        lines.append(f"{c.sha[:7]}  {entry.date}  status of {entry.cluster}")
        lines.extend(f"  {n}" for n in entry.notes)
        return lines
    if entry.who is not None:  # the commit that brought the change onto the branch, then who made it
        lines.append(f"{c.sha[:7]}  {entry.date}  [{MARKS.get(entry.mark, entry.mark)}]  {c.subject}")
        lines.extend(f"  {line}" for line in who_lines(entry.who))
    else:  # a commit without parents (`trace` given CommitInfo)
        lines.append(f"{c.sha[:7]}  {entry.date}  {_who(c)}  [{MARKS.get(entry.mark, entry.mark)}]  {c.subject}")
    if entry.status == "invalid":
        lines.append(f"  invalid: {len(entry.problems)} problem(s) hold zone {entry.zone or '?'}; "
                     "the last valid revision stays in force")
        lines.extend(f"    {p}" for p in entry.problems)
        return lines
    if entry.status == "fixed":
        lines.append(f"  valid again{'' if entry.changes else '; no change since the last valid revision'}")
    lines.extend(f"  {n}" for n in entry.notes)
    lines.extend(f"  {change_line(d)}" for d in entry.changes if only is None or d.key.name == only)
    lines.extend(f"  {applied_text(a)}" for a in entry.applied)
    return lines


def _merged_json(m: Merged | None) -> list[dict[str, object]] | None:
    if m is None:
        return None
    out: list[dict[str, object]] = []
    for i, rec in enumerate(m.variants):
        doc = record_dict(rec) or {}
        if m.conflict and i < len(m.owners):
            doc["clusters"] = list(m.owners[i])
        out.append(doc)
    return out


def entry_dict(entry: Entry) -> dict[str, Any]:
    c = entry.commit
    return {
        "sha": c.sha,
        "sha7": c.sha[:7],
        "date": entry.date,
        "author": c.author,
        "committer": c.committer if isinstance(c, Commit) else None,
        "authorDate": iso_date(c.author_time) if isinstance(c, Commit) else None,
        "signature": entry.mark or None,
        **who_dict(entry.who),
        "subject": c.subject,
        "zone": entry.zone or None,
        "status": entry.status,
        "cluster": entry.cluster or None,
        "problems": list(entry.problems),
        "notes": list(entry.notes),
        "changes": [{"op": d.op, "record": str(d.key), "name": d.key.name, "type": d.key.type,
                     "setIdentifier": d.key.set_id or None,
                     "conflict": bool((d.old and d.old.conflict) or (d.new and d.new.conflict)),
                     "old": _merged_json(d.old), "new": _merged_json(d.new)}
                    for d in entry.changes],
        "applied": [{"cluster": a.cluster, "revision": a.revision or None, "at": iso_date(a.at) if a.at else None,
                     "statusCommit": a.status_sha or None, "exact": a.exact, "inGit": a.in_git,
                     "statusBranch": a.branch,
                     "held": {"since": iso_date(a.held_since), "zone": a.held_zone, "lastGood": a.last_good or None,
                              "reason": a.held_reason} if a.held_since else None}
                    for a in entry.applied],
    }


def to_json(result: History) -> str:
    doc = {"query": result.name, "byValue": result.by_value, "branch": result.branch,
           "commits": result.commits, "truncated": result.truncated, "statusBranches": result.status_branches,
           "since": iso_date(result.since) if result.since is not None else None,
           "until": iso_date(result.until) if result.until is not None else None,
           "hints": list(result.hints), "entries": [entry_dict(e) for e in result.entries]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def history_command(name: str, repo: str, *, branch: str = "main", path: str = "", max_commits: int = 0,
                    state_dir: str | Path | None = None, fmt: str = "text", auth: GitAuth | None = None,
                    since: str | None = None, until: str | None = None, progress: Progress = NO_PROGRESS) -> Result:
    """``gitdns history NAME|VALUE``: text or JSON (``progress``: told the commits read)."""
    result = history(name, repo, branch=branch, path=path, max_commits=max_commits, state_dir=state_dir,
                     auth=auth, since=since, until=until, progress=progress)
    return Result(out=[to_json(result) if fmt == "json" else to_text(result)])
