"""`gitdns history NAME`: how a DNS name's desired records changed, commit by commit, and who
changed them (what an auditor asks).

    history_command(name, repo, ..., fmt=, auth=) -> Result            the command
    history(name, repo, branch=, path=, max_commits=, state_dir=, auth=) -> History
    trace(name, commits, files_at, baseline=None) -> list[Entry]     the walk, without git
    merge(per_cluster) -> tuple[Merged, ...]                         the fleet's records per key
    to_text(history) / to_json(history)

This is the DESIRED state read from git — what the agents were asked to publish at each
revision — not what the providers published: that (and whether a cluster applied a revision)
is on the status branches (`gitdns status`).  Health and active-group filtering, which happen
at publish time, are not applied here.

NAME selects a host family: every record whose ``root_host_of(record) == root_host_of(NAME)``,
so ``api.example.com`` (a listener host) brings its ``klb`` names along, and any of those names
selects the same family.  At each revision the records are the union over every cluster of
``builder.desired_for_zone`` for the zone holding NAME (static RecordSets included), merged per
record key the way they are published: multi-value records without a set identifier are united;
any other key holds one record, and when clusters want different content for it every variant
is shown and the key is marked as a conflict.

The branch's commits that touched ``*.yaml``/``*.yml`` below ``path`` are walked oldest to
newest (at most ``max_commits``; one more older commit, when there is one, is the baseline the
first is compared with).  Each commit is loaded with the agent's loader (`engine.from_files`);
a commit whose problems hold NAME's zone is reported ``invalid`` with its problems and skipped —
the agents keep the last valid revision for that zone — and the next valid commit is compared
with the last valid one (and reported ``fixed`` even when nothing changed).  Trees are memoised
on the hashes of their files' contents, so a revision is validated once however often it recurs.

The walk follows ``git log`` order.  With merge commits, side-branch commits are listed between
mainline ones and each is compared with the commit listed before it, so a change may show on
the side-branch commit that wrote it rather than on the merge that brought it to the branch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitdns.adapters.gitauth import GitAuth
from gitdns.adapters.gitsource import CommitInfo, GitSource
from gitdns.commands import Result
from gitdns.core import builder
from gitdns.core.desired import Desired
from gitdns.core.names import root_host_of
from gitdns.core.planfmt import record_dict
from gitdns.core.problems import blocked_zones
from gitdns.core.records import MULTI_VALUE_TYPES, RecordKey, RecordSet, normalize_name
from gitdns.reconcile.engine import from_files

PATHS = ("*.yaml", "*.yml")
GIT_TIMEOUT = 120.0  # a first run fetches the branch's full history

FilesAt = Callable[[str], Mapping[str, str]]


# -- values ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Merged:
    """The fleet's records for one key: one variant, or several when clusters disagree.
    ``owners[i]`` are the clusters (metadata.name) wanting ``variants[i]``; not compared."""

    key: RecordKey
    variants: tuple[RecordSet, ...]
    owners: tuple[tuple[str, ...], ...] = field(default=(), compare=False)

    @property
    def conflict(self) -> bool:
        return len(self.variants) > 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """NAME's merged records at one revision; ``problems`` non-empty: the zone is held there."""

    zone: str  # the zone's domain ("" when no zone holds NAME)
    zone_name: str  # its metadata.name
    records: tuple[Merged, ...] = ()
    problems: tuple[str, ...] = ()

    def by_key(self) -> dict[RecordKey, Merged]:
        return {m.key: m for m in self.records}


@dataclass(frozen=True, slots=True)
class RecordDiff:
    op: str  # "+" added, "-" removed, "~" changed
    key: RecordKey
    old: Merged | None
    new: Merged | None


@dataclass(frozen=True, slots=True)
class Entry:
    commit: CommitInfo
    zone: str
    status: str  # "changed" | "invalid" (zone held, skipped) | "fixed" (valid again)
    changes: tuple[RecordDiff, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.commit.revision.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class History:
    name: str
    branch: str
    path: str
    commits: int  # commits examined
    truncated: bool  # older commits exist beyond max_commits
    entries: tuple[Entry, ...]


# -- merging and diffing (pure) ------------------------------------------------------------------


def _order(rec: RecordSet) -> tuple[int, int, str, tuple[str, ...]]:
    return (rec.ttl, -1 if rec.weight is None else rec.weight, rec.geo or "", rec.values)


def merge(per_cluster: Iterable[tuple[str, Iterable[RecordSet]]]) -> tuple[Merged, ...]:
    """Per key: multi-value records without a set identifier united (per TTL and routing),
    everything else one record; distinct contents are kept as conflicting variants."""
    by_key: dict[RecordKey, dict[RecordSet, tuple[RecordSet, set[str]]]] = {}
    for cluster, records in per_cluster:
        for rec in records:
            unite = rec.type in MULTI_VALUE_TYPES and not rec.set_id
            shape = replace(rec, values=()) if unite else rec
            variants = by_key.setdefault(rec.key, {})
            have = variants.get(shape)
            if have is None:
                variants[shape] = (rec, {cluster})
            else:
                merged = have[0].with_values(set(have[0].values) | set(rec.values)) if unite else have[0]
                variants[shape] = (merged, have[1] | {cluster})
    out: list[Merged] = []
    for key in sorted(by_key):
        found = sorted(by_key[key].values(), key=lambda v: _order(v[0]))
        out.append(Merged(key, tuple(r for r, _ in found), tuple(tuple(sorted(o)) for _, o in found)))
    return tuple(out)


def diff(old: Sequence[Merged], new: Sequence[Merged]) -> tuple[RecordDiff, ...]:
    before = {m.key: m for m in old}
    after = {m.key: m for m in new}
    out: list[RecordDiff] = []
    for key in sorted(before.keys() | after.keys()):
        was, now = before.get(key), after.get(key)
        if was is None:
            out.append(RecordDiff("+", key, None, now))
        elif now is None:
            out.append(RecordDiff("-", key, was, None))
        elif was != now:
            out.append(RecordDiff("~", key, was, now))
    return tuple(out)


def snapshot(desired: Desired, name: str, fallback_zone: str = "") -> Snapshot:
    """NAME's merged records in ``desired``; ``fallback_zone`` (metadata.name of the zone that
    held NAME last time) is judged held when this revision lost the zone to a broken file."""
    state = desired.state
    zone = state.zone_for_host(name)
    zone_name = zone.name if zone is not None else fallback_zone
    if zone_name:
        known = [z.name for z in state.zones] + [zone_name]
        if zone_name in blocked_zones(desired.problems, known):
            held = tuple(p.format() for p in desired.problems if p.blocks_all or zone_name in p.zones)
            return Snapshot(zone.domain if zone is not None else "", zone_name, (), held)
    if zone is None:
        return Snapshot("", "")
    root = root_host_of(name)
    per_cluster = []
    for cluster in state.clusters:
        if zone not in builder.zones_for_cluster(state, cluster):
            continue
        records = builder.desired_for_zone(state, cluster, zone)
        per_cluster.append((cluster.name, [r for r in records if root_host_of(r.name) == root]))
    return Snapshot(zone.domain, zone.name, merge(per_cluster))


class _Loader:
    """Loads a commit's files once per distinct tree (keyed on the hashes of their contents)."""

    def __init__(self, name: str, files_at: FilesAt) -> None:
        self.name = name
        self.files_at = files_at
        self.loaded: dict[tuple[tuple[str, str], ...], Desired] = {}
        self.snapshots: dict[tuple[tuple[tuple[str, str], ...], str], Snapshot] = {}

    def at(self, sha: str, fallback_zone: str) -> Snapshot:
        files = self.files_at(sha)
        tree = tuple((path, hashlib.sha256(text.encode("utf-8")).hexdigest())
                     for path, text in sorted(files.items()))
        memo = (tree, fallback_zone)
        found = self.snapshots.get(memo)
        if found is None:
            desired = self.loaded.get(tree)
            if desired is None:
                desired = self.loaded[tree] = from_files(Path("."), files, None)
            found = self.snapshots[memo] = snapshot(desired, self.name, fallback_zone)
        return found


def trace(name: str, commits: Sequence[CommitInfo], files_at: FilesAt,
          baseline: CommitInfo | None = None) -> list[Entry]:
    """The entries for ``commits`` (oldest first); ``baseline`` is the state compared with first."""
    name = normalize_name(name)
    loader = _Loader(name, files_at)
    last = Snapshot("", "")
    if baseline is not None:
        base = loader.at(baseline.sha, "")
        last = base if not base.problems else Snapshot("", base.zone_name)
    entries: list[Entry] = []
    held = False
    for commit in commits:
        snap = loader.at(commit.sha, last.zone_name)
        if snap.problems:
            entries.append(Entry(commit, snap.zone or last.zone, "invalid", problems=snap.problems))
            held = True
            continue
        changes = diff(last.records, snap.records)
        if changes or held:
            entries.append(Entry(commit, snap.zone or last.zone, "fixed" if held else "changed", changes))
        held = False
        last = snap
    return entries


# -- the command ---------------------------------------------------------------------------------


def repo_url(repo: str) -> str:
    """A local path made absolute (git runs inside its cache); URLs as given."""
    if "://" not in repo and os.path.exists(repo):
        return str(Path(repo).absolute())
    return repo


@contextlib.contextmanager
def scratch_dir(state_dir: str | Path | None, name: str) -> Iterator[Path]:
    """``state_dir/name`` (kept, a cache for the next run), else a temporary directory removed afterwards."""
    if state_dir is not None:
        path = Path(state_dir) / name
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=f"gitdns-{name}-") as tmp:
        yield Path(tmp)


def history(name: str, repo: str, *, branch: str = "main", path: str = "", max_commits: int = 200,
            state_dir: str | Path | None = None, auth: GitAuth | None = None) -> History:
    """Fetch the branch's history and trace NAME through its last ``max_commits`` YAML commits,
    through the git transport ``auth`` (default: the ambient git configuration)."""
    max_commits = max(1, max_commits)
    with scratch_dir(state_dir, "history") as workdir:
        source = GitSource(repo_url(repo), branch=branch, path=path, workdir=workdir, timeout=GIT_TIMEOUT,
                           auth=auth or GitAuth())
        newest_first = source.log(PATHS, max_count=max_commits + 1)
        truncated = len(newest_first) > max_commits
        baseline = newest_first[max_commits] if truncated else None
        commits = list(reversed(newest_first[:max_commits]))
        entries = trace(name, commits, source.files_at, baseline)
    return History(normalize_name(name), branch, source.path, len(commits), truncated, tuple(entries))


# -- output --------------------------------------------------------------------------------------


def _content(rec: RecordSet) -> str:
    routing = [f"ttl={rec.ttl}"]
    if rec.weight is not None:
        routing.append(f"weight={rec.weight}")
    if rec.geo is not None:
        routing.append(f"geo={rec.geo}")
    return f"{' '.join(routing)} [{', '.join(rec.values)}]"


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


def to_text(result: History) -> str:
    where = f" path {result.path}" if result.path else ""
    more = ", older commits not examined (raise --max-commits)" if result.truncated else ""
    lines = [f"history of {result.name}: {len(result.entries)} entr{'y' if len(result.entries) == 1 else 'ies'} "
             f"in {result.commits} commit(s) of branch {result.branch}{where}{more}",
             "desired state from git, not what providers published (see gitdns status)"]
    if not result.entries:
        lines.append(f"no commit changed the desired records of {result.name}")
    for entry in result.entries:
        c = entry.commit
        lines.append("")
        lines.append(f"{c.sha[:7]}  {entry.date}  {c.author}  {c.subject}")
        if entry.status == "invalid":
            lines.append(f"  invalid: {len(entry.problems)} problem(s) hold zone {entry.zone or '?'}; "
                         "the last valid revision stays in force")
            lines.extend(f"    {p}" for p in entry.problems)
            continue
        if entry.status == "fixed":
            lines.append(f"  valid again{'' if entry.changes else '; no change since the last valid revision'}")
        lines.extend(f"  {change_line(d)}" for d in entry.changes)
    return "\n".join(lines) + "\n"


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
        "subject": c.subject,
        "zone": entry.zone or None,
        "status": entry.status,
        "problems": list(entry.problems),
        "changes": [{"op": d.op, "record": str(d.key), "name": d.key.name, "type": d.key.type,
                     "setIdentifier": d.key.set_id or None,
                     "conflict": bool((d.old and d.old.conflict) or (d.new and d.new.conflict)),
                     "old": _merged_json(d.old), "new": _merged_json(d.new)}
                    for d in entry.changes],
    }


def to_json(result: History) -> str:
    return json.dumps([entry_dict(e) for e in result.entries], indent=2, sort_keys=True) + "\n"


def history_command(name: str, repo: str, *, branch: str = "main", path: str = "", max_commits: int = 200,
                    state_dir: str | Path | None = None, fmt: str = "text", auth: GitAuth | None = None) -> Result:
    """``gitdns history NAME``: text or JSON."""
    result = history(name, repo, branch=branch, path=path, max_commits=max_commits, state_dir=state_dir,
                     auth=auth)
    return Result(out=[to_json(result) if fmt == "json" else to_text(result)])
