"""The status-branch side of `gitdns history`: when each cluster applied a commit of the
branch (`AppliedIndex`), and the entries for the health checks that withdrew or restored a
target of the names followed (`health_entries`).

    AppliedIndex(rows, order).applied(sha, in_git, zones) -> tuple[Applied, ...]
    said_once(per_entry) -> list[tuple[Applied, ...]]  a cluster no longer in git said so once
    health_entries(query, rows, names) -> list[Entry]
    resolve(revision, shas) -> full sha | ""       an appliedRevision among the branch's commits
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

from gitdns.commands.history.diff import Applied, Entry, Query, canonical_value
from gitdns.commands.history.held import applied_or_held
from gitdns.commands.history.walk import Commit, StatusCommit
from gitdns.commands.status.view import label_sha
from gitdns.core.names import root_host_of

T = TypeVar("T")


class AppliedIndex:
    """Per cluster, when it first applied each commit of the branch: built once from the status
    rows (oldest first), asked once per entry.

    A cluster applied ``sha`` at the first status commit whose appliedRevision is ``sha`` or a
    later commit of the branch (``exact`` False then) and that does not hold the entry's zone
    below ``sha`` (`history.held.applied_or_held`, as `gitdns status --revision` decides); one
    that holds it is Applied with ``held_since``; a cluster that never got there is
    Applied(cluster) alone."""

    def __init__(self, rows: Sequence[StatusCommit], order: Mapping[str, int]) -> None:
        self.order = order
        self.names: dict[str, str] = {}
        # cluster id -> (running maximum of the applied position, where the row that raised it is
        # in ``rows``)
        self.reached: dict[str, tuple[list[int], list[int]]] = {}
        # cluster id -> every row with an applied revision of the branch: (position, row, its full sha)
        self.rows: dict[str, list[tuple[int, StatusCommit, str]]] = {}
        self.shas = shas = list(order)
        self.labels: dict[str, int | None] = {}
        full_of: dict[str, str] = {}
        for row in rows:
            self.names[row.cluster_id] = row.cluster
            if not row.applied:
                continue
            full = full_of.get(row.applied)
            if full is None:
                full = full_of[row.applied] = resolve(row.applied, shas) if len(row.applied) < 40 else row.applied
            index = order.get(full)
            if index is None:
                continue
            mine = self.rows.setdefault(row.cluster_id, [])
            mine.append((index, row, full))
            highs, starts = self.reached.setdefault(row.cluster_id, ([], []))
            if not highs or index > highs[-1]:
                highs.append(index)
                starts.append(len(mine) - 1)

    def _position(self, label: str | None) -> int | None:
        """Where a held zone's last good revision (a ``<time>.<sha7>`` label) is in the branch."""
        if not label:
            return None
        if label not in self.labels:
            full = resolve(label_sha(label), self.shas)
            self.labels[label] = self.order.get(full) if full else None
        return self.labels[label]

    def applied(self, sha: str, in_git: frozenset[str] | None = None, zones: Collection[str] | None = None,
                roster: Sequence[tuple[str, str]] = ()) -> tuple[Applied, ...]:
        """``in_git``: the Clusters git names at ``sha`` (ids and names); a cluster outside it
        that never applied ``sha`` is said to be not in git then, rather than not applied yet.
        ``zones``: the zones the entry's records are in (None: every zone), the ones whose
        held state counts.  ``roster``: the (id, name) of the Clusters git names at ``sha``; one
        without a status branch never applied it (Applied with ``branch`` False)."""
        at = self.order.get(sha)
        out: dict[str, Applied] = {}
        if at is not None:
            def contains(label: str | None) -> bool:
                where = self._position(label)
                return where is not None and where >= at

            for cid, (highs, starts) in self.reached.items():
                i = bisect.bisect_left(highs, at)
                if i >= len(highs):
                    continue
                reached = ((step, step[1].zones) for step in self.rows[cid][starts[i]:] if step[0] >= at)
                found = applied_or_held(reached, contains, zones)
                if found.applied is not None:
                    _, row, full = found.applied
                    out[cid] = Applied(row.cluster, full, row.time, row.sha, full == sha)
                elif found.since is not None and found.latest is not None:
                    zone, state = next(iter(sorted(found.held.items())))
                    _, row, full = found.latest
                    out[cid] = Applied(row.cluster, full, 0, row.sha, held_since=found.since[1].time,
                                       held_zone=zone, last_good=label_sha(state.applied or "")[:7],
                                       held_reason=state.reason)
        names = self.names

        def missing(cid: str) -> Applied:
            return Applied(names[cid], in_git=in_git is None or cid in in_git or names[cid] in in_git)

        rows = [out.get(cid) or missing(cid) for cid in names]
        known = set(names.values())
        rows += [Applied(name or cid, branch=False) for cid, name in roster if cid not in names and name not in known]
        return tuple(sorted(rows, key=lambda a: a.cluster))


def said_once(per_entry: Sequence[tuple[Applied, ...]]) -> list[tuple[Applied, ...]]:
    """Each entry's rows (entries oldest first), a cluster that git no longer names and that never
    applied the entry (``in_git`` False) said once: left out of the entries after, until git
    names it again."""
    out: list[tuple[Applied, ...]] = []
    gone: set[str] = set()
    for applied in per_entry:
        out.append(tuple(a for a in applied if a.at or a.held_since or a.in_git or a.cluster not in gone))
        gone |= {a.cluster for a in applied if not a.at and not a.held_since and not a.in_git}
        gone -= {a.cluster for a in applied if a.in_git}
    return out


def interleave(ordered: Sequence[T], extra: Iterable[T], time: Callable[[T], int]) -> list[T]:
    """``ordered`` (the branch's first-parent order, kept as it is even where committer times go
    backwards) with ``extra`` (entries from the status branches) placed by time: each before the
    first entry of ``ordered`` that is later than it, after those at the same time."""
    pending = sorted(extra, key=time)
    out: list[T] = []
    i = 0
    for entry in ordered:
        while i < len(pending) and time(pending[i]) < time(entry):
            out.append(pending[i])
            i += 1
        out.append(entry)
    out.extend(pending[i:])
    return out


def health_entries(query: Query, rows: Sequence[StatusCommit], names: set[str]) -> list[Entry]:
    """A status commit that withdrew or restored a target of the names followed: one entry."""
    def wanted(target: str) -> bool:
        host, _, address = target.partition("|")
        if query.by_value:
            return host in names or canonical_value(address) == query.text
        return root_host_of(host) == root_host_of(query.text) or host in names

    out: list[Entry] = []
    last: dict[str, frozenset[str]] = {}
    for row in rows:
        if not row.health_known and row.cluster_id not in last:
            continue
        before = last.get(row.cluster_id, frozenset())
        now = row.unhealthy
        last[row.cluster_id] = now
        down = sorted(t for t in now - before if wanted(t))
        up = sorted(t for t in before - now if wanted(t))
        if not down and not up:
            continue
        notes = tuple([f"withdrawn {t.replace('|', ' ')} (unhealthy)" for t in down]
                      + [f"restored {t.replace('|', ' ')} (healthy again)" for t in up])
        commit = Commit(row.sha, (), row.time, f"gitdns agent ({row.cluster})", row.time, "", "")
        out.append(Entry(commit, "", "health", notes=notes, cluster=row.cluster))
    return out


def resolve(revision: str, shas: Sequence[str]) -> str:
    """The full sha among ``shas`` that ``revision`` names (a sha, an abbreviation, or a
    ``<time>.<sha7>`` label), else ""."""
    text = revision.strip().lower()
    if "." in text:
        text = text.rsplit(".", 1)[1]
    if len(text) < 7:
        return ""
    return next((s for s in shas if s.startswith(text)), "")
