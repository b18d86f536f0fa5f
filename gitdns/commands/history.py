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

import bisect
import contextlib
import hashlib
import ipaddress
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from gitdns.adapters.gitauth import GitAuth
from gitdns.adapters.gitcache import CacheCorrupt
from gitdns.adapters.gitsource import CommitInfo
from gitdns.commands.historywalk import Commit, StatusCommit, Walk, resolve
from gitdns.core import builder
from gitdns.core.desired import Desired
from gitdns.core.groups import ZoneGroups, decide, is_active
from gitdns.core.loader import ParseMemo
from gitdns.core.model import Cluster, DesiredState, Zone
from gitdns.core.names import root_host_of
from gitdns.core.problems import blocked_zones
from gitdns.core.records import MULTI_VALUE_TYPES, RecordKey, RecordSet, normalize_name
from gitdns.errors import ConfigError, RetryableError
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
    notes: tuple[str, ...] = ()  # the zone's active groups
    clusters: frozenset[str] | None = None  # ids and names of the Clusters in git (None: not known)

    def by_key(self) -> dict[RecordKey, Merged]:
        return {m.key: m for m in self.records}


@dataclass(frozen=True, slots=True)
class RecordDiff:
    op: str  # "+" added, "-" removed, "~" changed
    key: RecordKey
    old: Merged | None
    new: Merged | None


@dataclass(frozen=True, slots=True)
class Applied:
    """When one cluster applied a revision: ``revision`` is the entry's commit or a later one
    that contains it (``exact`` False); ``at`` 0 and ``status_sha`` "": it never did."""

    cluster: str
    revision: str = ""
    at: int = 0
    status_sha: str = ""
    exact: bool = False
    in_git: bool = True  # False: git named no such Cluster at the entry's commit nor just before it


@dataclass(frozen=True, slots=True)
class Entry:
    commit: CommitInfo | Commit
    zone: str
    status: str  # "changed" | "invalid" (zone held, skipped) | "fixed" (valid again) | "health"
    changes: tuple[RecordDiff, ...] = ()
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # e.g. "active groups [a] -> [a, b]"
    mark: str = ""  # git's %G? of the commit
    merge: Commit | None = None  # the merge commit that brought it to the branch
    applied: tuple[Applied, ...] = ()
    cluster: str = ""  # status == "health": the cluster reporting
    in_git: frozenset[str] | None = None  # ids and names of the Clusters git names at the commit

    @property
    def time(self) -> int:
        c = self.commit
        return c.time if isinstance(c, Commit) else c.revision.time

    @property
    def date(self) -> str:
        return iso_date(self.time)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted({d.key.name for d in self.changes}))


def iso_date(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class History:
    name: str
    branch: str
    path: str
    commits: int  # commits examined
    truncated: bool  # older commits exist beyond max_commits
    entries: tuple[Entry, ...]
    by_value: bool = False
    status_branches: int = 0
    since: int | None = None  # the window (unix seconds), on when each commit reached the branch
    until: int | None = None
    hints: tuple[str, ...] = ()  # e.g. the name is in no zone


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


@dataclass(frozen=True, slots=True)
class Query:
    """NAME (its host family), or VALUE: an address or target; ``names`` the record names that
    held VALUE somewhere in the walk (the second pass follows those names)."""

    text: str
    by_value: bool = False
    names: frozenset[str] = frozenset()

    def wants(self, rec: RecordSet) -> bool:
        if self.by_value:
            return rec.name in self.names
        return root_host_of(rec.name) == root_host_of(self.text)

    def holds(self, rec: RecordSet) -> bool:
        return any(_value(v) == self.text for v in rec.values)


def _value(text: str) -> str:
    """A value as compared: an address in its canonical form (``2001:DB8:0::10`` is
    ``2001:db8::10``), a name lower-case without the final dot."""
    bare = text.strip().strip('"')
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        return bare.lower().rstrip(".")


def is_value(text: str) -> bool:
    """An IP address is searched as a value; anything else as a name first."""
    try:
        ipaddress.ip_address(text.strip())
    except ValueError:
        return False
    return True


def _active(state: DesiredState, zone: Zone, cluster: Cluster) -> bool:
    """Whether ``cluster`` publishes in ``zone`` under git's ActiveGroups, as the agents decide
    (`gitdns.core.groups.decide` with no higher serial in the zone; `is_active`)."""
    groups = state.groups_for_zone(zone.name)
    active = decide(groups, ZoneGroups(None, None, None), zone.domain).active
    return is_active(cluster.group, active)


def _groups_note(state: DesiredState, zone: Zone) -> str:
    groups = state.groups_for_zone(zone.name)
    if groups is None:
        return "every group"
    return f"serial {groups.serial} [{', '.join(sorted(groups.groups))}]" if groups.groups else \
        f"serial {groups.serial} [] (every group)"


def zone_records(state: DesiredState, zone: Zone, keep: Callable[[RecordSet], bool]) -> tuple[Merged, ...]:
    per_cluster = []
    for cluster in state.clusters:
        if zone not in builder.zones_for_cluster(state, cluster) or not _active(state, zone, cluster):
            continue
        records = builder.desired_for_zone(state, cluster, zone)
        per_cluster.append((cluster.name, [r for r in records if keep(r)]))
    return merge(per_cluster)


def snapshot(desired: Desired, name: str | Query, fallback_zone: str = "") -> Snapshot:
    """The query's merged records in ``desired`` (inactive groups publish nothing); with NAME,
    ``fallback_zone`` (metadata.name of the zone that held NAME last time) is judged held when
    this revision lost the zone to a broken file."""
    query = name if isinstance(name, Query) else Query(normalize_name(name))
    state = desired.state
    if query.by_value:
        held = blocked_zones(desired.problems, [z.name for z in state.zones])
        if any(p.blocks_all for p in desired.problems):
            return Snapshot("", "", (), tuple(p.format() for p in desired.problems if p.blocks_all))
        found: list[Merged] = []
        notes: list[str] = []
        for zone in state.zones:
            if zone.name in held:
                continue
            got = zone_records(state, zone, query.wants)
            # the zone's active groups while it holds a name that held VALUE (also when a switch
            # has just taken VALUE away: the switch is the reason)
            if got or any(state.zone_for_host(n) is zone for n in query.names):
                notes.append(f"{zone.domain}: active groups {_groups_note(state, zone)}")
            found.extend(got)
        return Snapshot("", "", tuple(sorted(found, key=lambda m: m.key)), (), tuple(notes))
    found_zone = state.zone_for_host(query.text)
    zone_name = found_zone.name if found_zone is not None else fallback_zone
    if zone_name:
        known = [z.name for z in state.zones] + [zone_name]
        if zone_name in blocked_zones(desired.problems, known):
            problems = tuple(p.format() for p in desired.problems if p.blocks_all or zone_name in p.zones)
            return Snapshot(found_zone.domain if found_zone is not None else "", zone_name, (), problems)
    if found_zone is None:
        return Snapshot("", "")
    return Snapshot(found_zone.domain, found_zone.name, zone_records(state, found_zone, query.wants), (),
                    (f"active groups {_groups_note(state, found_zone)}",))


def holders(desired: Desired, query: Query) -> set[str]:
    """The record names holding VALUE in ``desired`` (every zone, every active cluster)."""
    state = desired.state
    out: set[str] = set()
    for zone in state.zones:
        for m in zone_records(state, zone, query.holds):
            out.add(m.key.name)
    return out


class _Loader:
    """Loads a commit's files once per distinct tree: keyed on its files' blob ids when the
    source gives them (``tree_key``), else on the hashes of their contents."""

    def __init__(self, query: Query, files_at: FilesAt,
                 tree_key: Callable[[str], tuple[tuple[str, str], ...]] | None = None) -> None:
        self.query = query
        self.files_at = files_at
        self.tree_key = tree_key
        self.loaded: dict[tuple[tuple[str, str], ...], Desired] = {}
        self.parsed: ParseMemo = {}  # files shared by many trees are parsed once
        self.snapshots: dict[tuple[object, ...], Snapshot] = {}

    def desired(self, sha: str) -> tuple[tuple[tuple[str, str], ...], Desired]:
        if self.tree_key is not None:
            tree = self.tree_key(sha)
            found = self.loaded.get(tree)
            if found is not None:
                return tree, found
            files = self.files_at(sha)
        else:
            files = self.files_at(sha)
            tree = tuple((path, hashlib.sha256(text.encode("utf-8")).hexdigest())
                         for path, text in sorted(files.items()))
        desired = self.loaded.get(tree)
        if desired is None:
            desired = self.loaded[tree] = from_files(Path("."), files, None, memo=self.parsed)
        return tree, desired

    def at(self, sha: str, fallback_zone: str) -> Snapshot:
        tree, desired = self.desired(sha)
        memo = (tree, fallback_zone, self.query)
        found = self.snapshots.get(memo)
        if found is None:
            known = None if any(p.blocks_all for p in desired.problems) else frozenset(
                name for c in desired.state.clusters for name in (c.id, c.name) if name)
            found = self.snapshots[memo] = replace(snapshot(desired, self.query, fallback_zone), clusters=known)
        return found


def trace(name: str | Query, commits: Sequence[CommitInfo | Commit], files_at: FilesAt,
          baseline: CommitInfo | Commit | None = None,
          tree_key: Callable[[str], tuple[tuple[str, str], ...]] | None = None) -> list[Entry]:
    """The entries for ``commits`` (oldest first); ``baseline`` is the state compared with first."""
    query = name if isinstance(name, Query) else Query(normalize_name(name))
    loader = _Loader(query, files_at, tree_key)
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
            notes = tuple(n for n in snap.notes if n not in last.notes) if changes else ()
            # the clusters git names before or at the commit: a cluster's own removal counts as its
            named = snap.clusters if last.clusters is None or snap.clusters is None else snap.clusters | last.clusters
            entries.append(Entry(commit, snap.zone or last.zone, "fixed" if held else "changed", changes,
                                 notes=notes, in_git=named))
        held = False
        last = snap
    return entries


def value_names(value: str, commits: Sequence[CommitInfo | Commit], files_at: FilesAt,
                baseline: CommitInfo | Commit | None = None,
                tree_key: Callable[[str], tuple[tuple[str, str], ...]] | None = None) -> frozenset[str]:
    """Every record name that held ``value`` at one of the commits (or the baseline)."""
    query = Query(_value(value), by_value=True)
    loader = _Loader(query, files_at, tree_key)
    seen: dict[tuple[tuple[str, str], ...], None] = {}
    names: set[str] = set()
    for commit in ([baseline] if baseline is not None else []) + list(commits):
        tree, desired = loader.desired(commit.sha)
        if tree in seen:
            continue
        seen[tree] = None
        names |= holders(desired, query)
    return frozenset(names)


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


def history(name: str, repo: str, *, branch: str = "main", path: str = "", max_commits: int = 0,
            state_dir: str | Path | None = None, auth: GitAuth | None = None, since: str | None = None,
            until: str | None = None, status: bool = True) -> History:
    """Fetch the branch (and every status branch) and trace NAME or VALUE through the YAML
    commits in the window (the newest ``max_commits`` when > 0), through the git transport
    ``auth`` (default: the ambient git configuration)."""
    from gitdns.adapters.gitauth import check_url

    text = name.strip()
    check_url(repo_url(repo))  # a token or password in the URL is refused before anything runs
    with scratch_dir(state_dir, "history") as workdir:
        for attempt in (1, 2):
            with Walk(repo_url(repo), branch=branch, path=_clean(path), workdir=workdir, timeout=GIT_TIMEOUT,
                      auth=auth or GitAuth()) as walk:
                try:
                    return _walk(walk, text, branch, path, max_commits, since, until, status)
                except CacheCorrupt as exc:
                    if attempt == 2 or not walk.recover():  # wiped when fsck confirms: fetched again
                        raise RetryableError(f"the history cache {workdir} cannot be read: {exc}",
                                             reason="CacheUnreadable") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _walk(walk: Walk, text: str, branch: str, path: str, max_commits: int, since: str | None,
          until: str | None, status: bool) -> History:
    if not text:
        raise ConfigError("history: give a NAME (a DNS name or listener host) or a VALUE (an address or target)")
    walk.fetch(status=status)
    lo, hi = walk.window(since, until)
    # every YAML commit is traced (each compared with the one before, the window's first too);
    # the window then keeps the commits that reached the branch in it (a merged commit: by its merge)
    commits, baseline, truncated = walk.commits(max_count=max_commits)
    by_value = is_value(text)
    entries: list[Entry] = []
    query = Query(normalize_name(text))
    if not by_value:
        entries = trace(query, commits, walk.files_at, baseline, walk.tree_key)
    if by_value or not entries:
        names = value_names(text, commits, walk.files_at, baseline, walk.tree_key)
        if names or by_value:
            by_value = True
            query = Query(_value(text), True, names)
            entries = trace(query, commits, walk.files_at, baseline, walk.tree_key)

    def inside(when: int) -> bool:
        return (lo is None or when >= lo) and (hi is None or when <= hi)

    def reached(sha: str, when: int) -> int:
        merge = walk.merged_by(sha)
        return merge.time if merge is not None else when

    examined = sum(1 for c in commits if inside(reached(c.sha, c.time)))
    entries = [e for e in entries if inside(reached(e.commit.sha, e.time))]
    marks = walk.marks([e.commit.sha for e in entries])
    rows = walk.status() if status else []
    index = AppliedIndex(rows, walk.order())
    done: list[Entry] = []
    for e in entries:
        merge = walk.merged_by(e.commit.sha)
        done.append(replace(e, mark=marks.get(e.commit.sha, ""), merge=merge,
                            applied=index.applied(e.commit.sha, e.in_git)))
    names_of_interest = {d.key.name for e in entries for d in e.changes}
    done.extend(e for e in health_entries(query, rows, names_of_interest) if inside(e.time))
    done.sort(key=lambda e: (e.time, e.status == "health"))
    clusters = len({r.cluster_id for r in rows})
    hints: list[str] = []
    if not by_value and not any(e.zone for e in entries) and commits:
        head = _Loader(query, walk.files_at, walk.tree_key).desired(commits[-1].sha)[1].state
        if head.zone_for_host(query.text) is None:
            zones = ", ".join(sorted(z.domain for z in head.zones)) or "none"
            hints.append(f"{query.text} is in no zone of the desired state at {commits[-1].sha[:7]} "
                         f"(zones: {zones}): a typo? A value (an address or a target) is searched as such")
    return History(normalize_name(text) if not by_value else _value(text), branch, _clean(path), examined,
                   truncated, tuple(done), by_value, clusters, lo, hi, (*walk.notes, *hints))


def _clean(path: str) -> str:
    return "/".join(p for p in path.strip().split("/") if p not in ("", "."))


class AppliedIndex:
    """Per cluster, when it first applied each commit of the branch: built once from the status
    rows (oldest first), asked once per entry.

    A cluster applied ``sha`` at the first status commit whose appliedRevision is ``sha`` or a
    later commit of the branch (``exact`` False then); a cluster that never got there is
    Applied(cluster) alone."""

    def __init__(self, rows: Sequence[StatusCommit], order: Mapping[str, int]) -> None:
        self.order = order
        self.names: dict[str, str] = {}
        # cluster id -> (running maximum of the applied position, the row that raised it, its full sha)
        self.reached: dict[str, tuple[list[int], list[StatusCommit], list[str]]] = {}
        shas = list(order)
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
            highs, firsts, fulls = self.reached.setdefault(row.cluster_id, ([], [], []))
            if not highs or index > highs[-1]:
                highs.append(index)
                firsts.append(row)
                fulls.append(full)

    def applied(self, sha: str, in_git: frozenset[str] | None = None) -> tuple[Applied, ...]:
        """``in_git``: the Clusters git names at ``sha`` (ids and names); a cluster outside it
        that never applied ``sha`` is said to be not in git then, rather than never applied."""
        at = self.order.get(sha)
        out: dict[str, Applied] = {}
        if at is not None:
            for cid, (highs, firsts, fulls) in self.reached.items():
                i = bisect.bisect_left(highs, at)
                if i < len(highs):
                    row, full = firsts[i], fulls[i]
                    out[cid] = Applied(row.cluster, full, row.time, row.sha, full == sha)
        names = self.names

        def missing(cid: str) -> Applied:
            return Applied(names[cid], in_git=in_git is None or cid in in_git or names[cid] in in_git)

        return tuple(out.get(cid) or missing(cid) for cid in sorted(names, key=lambda c: names[c]))


def health_entries(query: Query, rows: Sequence[StatusCommit], names: set[str]) -> list[Entry]:
    """A status commit that withdrew or restored a target of the names followed: one entry."""
    def wanted(target: str) -> bool:
        host, _, address = target.partition("|")
        if query.by_value:
            return host in names or _value(address) == query.text
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
