"""The traffic split of loadbalanced hosts, read from a zone (docs/records.md, "Reading the
traffic split").

A host ``H`` is loadbalanced when its record is ``H CNAME klb.H``.  The geo rows of ``klb.H``
send each geo code (``*`` for the default row, ``""`` when ``klb.H`` is a plain CNAME) to a pool
name ``<geo>.klb.H``; the weighted rows there name the targets.  A target's share is its weight
over the sum of the weights in its pool (0 when that sum is 0); weight 0 is a withdrawn target.
The cluster behind a row is the owner whose ownership TXT claims its target; a row nobody
claims is foreign.

Every name shown here came from a zone or a repository: the renderers put it through the text
gate (`gitdns.core.text`), and the Mermaid labels through `mermaid_label` as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gitdns.core import names as dns_names
from gitdns.core.plan.context import claimed
from gitdns.core.plan.planner import decode_zone
from gitdns.core.records import RecordSet, ZoneSnapshot
from gitdns.core.text import inline, md_code

__all__ = ["Pool", "Split", "SplitChange", "Target", "changed_splits", "mermaid_label", "split_mermaid",
           "split_table", "split_text", "traffic_splits"]

DEFAULT_GEO = "*"  # the geo of the `default` row: every client no other row matches
NO_GEO = ""  # klb.H is a plain CNAME: every client


@dataclass(frozen=True, slots=True)
class Target:
    """One weighted row of a pool."""

    target: str
    weight: int
    share: float  # weight / the sum of the pool's weights; 0 when that sum is 0
    owners: tuple[str, ...]  # the clusters claiming the row (a name from `names`, else the owner id); () = foreign

    @property
    def withdrawn(self) -> bool:
        return self.weight == 0


@dataclass(frozen=True, slots=True)
class Pool:
    """A ``<geo>.klb.H`` name, the geo codes ``klb.H`` sends there, and its weighted rows."""

    name: str
    geos: tuple[str, ...]
    targets: tuple[Target, ...]


@dataclass(frozen=True, slots=True)
class Split:
    host: str
    klb: str
    pools: tuple[Pool, ...]

    def rows(self) -> frozenset[tuple[str, str, str, tuple[str, ...], int | None]]:
        """``(geo, pool, target, owners, weight)`` for every geo and target; a pool without a
        weighted row gives ``(geo, pool, "", (), None)``.  Two splits route alike when equal."""
        out: set[tuple[str, str, str, tuple[str, ...], int | None]] = set()
        for pool in self.pools:
            for geo in pool.geos:
                out.update((geo, pool.name, t.target, t.owners, t.weight) for t in pool.targets)
                if not pool.targets:
                    out.add((geo, pool.name, "", (), None))
        return frozenset(out)


@dataclass(frozen=True, slots=True)
class SplitChange:
    """A host whose split changed; ``before`` or ``after`` is None for a host that appears or
    disappears."""

    host: str
    before: Split | None
    after: Split | None


def _geo_order(code: str) -> tuple[int, str]:
    return (2 if code == DEFAULT_GEO else 0 if code == NO_GEO else 1, code)


def traffic_splits(snapshot: ZoneSnapshot, names: Mapping[str, str] | None = None) -> dict[str, Split]:
    """The split of every loadbalanced host of ``snapshot``, by host; ``names`` maps owner ids
    to cluster names."""
    obs = decode_zone(snapshot)
    label = dict(names or {})
    cnames: dict[str, list[RecordSet]] = {}
    for rec in obs.data.values():
        if rec.type == "CNAME":
            cnames.setdefault(rec.name, []).append(rec)

    def owners_of(rec: RecordSet, value: str) -> tuple[str, ...]:
        entries = obs.owners.get(rec.key, {})
        return tuple(sorted({label.get(o, o) for o, e in entries.items() if value in claimed(e, rec)}))

    splits: dict[str, Split] = {}
    for host, recs in sorted(cnames.items()):
        klb = dns_names.klb_name(host)
        if not any(not r.set_id and r.values == (klb,) for r in recs):
            continue
        routes: dict[str, list[str]] = {}  # pool name -> geo codes
        geo_rows = sorted(cnames.get(klb, []), key=lambda r: _geo_order(r.geo if r.geo is not None else r.set_id))
        for row in geo_rows:
            for pool_name in row.values:
                routes.setdefault(pool_name, []).append(row.geo if row.geo is not None else row.set_id)
        pools = []
        for pool_name, geos in routes.items():
            rows = sorted((r for r in cnames.get(pool_name, []) if r.weight is not None), key=lambda r: r.set_id)
            total = sum(max(r.weight or 0, 0) for r in rows)
            targets = tuple(
                Target(value, r.weight or 0, max(r.weight or 0, 0) / total if total else 0.0, owners_of(r, value))
                for r in rows for value in r.values)
            pools.append(Pool(pool_name, tuple(geos), targets))
        splits[host] = Split(host, klb, tuple(pools))
    return splits


def changed_splits(before: ZoneSnapshot | None, after: ZoneSnapshot | None,
                   names: Mapping[str, str] | None = None) -> list[SplitChange]:
    """The hosts whose set of (geo, cluster, target, weight) differs between two snapshots of a
    zone (None: no zone), by host."""
    old = traffic_splits(before, names) if before is not None else {}
    new = traffic_splits(after, names) if after is not None else {}
    out = []
    for host in sorted(old.keys() | new.keys()):
        was, now = old.get(host), new.get(host)
        if was is None or now is None or was.rows() != now.rows():
            out.append(SplitChange(host, was, now))
    return out


# -- rendering -------------------------------------------------------------------------------

_NONE = "—"


@dataclass(frozen=True, slots=True)
class _Row:
    pool: str
    geos: tuple[tuple[str, ...] | None, tuple[str, ...] | None]
    target: str
    sides: tuple[Target | None, Target | None]


def _rows(change: SplitChange) -> list[_Row]:
    """The rows of both sides paired by (pool, target): the after side's order, then what left."""
    sides = [change.before, change.after]
    pools = [{p.name: p for p in s.pools} if s else {} for s in sides]
    keys: dict[tuple[str, str], None] = {}
    for split in (change.after, change.before):
        for pool in split.pools if split else ():
            keys.update({(pool.name, t.target): None for t in pool.targets} or {(pool.name, ""): None})
    out = []
    for name, target in keys:
        found = [p.get(name) for p in pools]
        geos = (found[0].geos if found[0] else None, found[1].geos if found[1] else None)
        hits = tuple(next((t for t in p.targets if t.target == target), None) if p else None for p in found)
        out.append(_Row(name, geos, target, (hits[0], hits[1])))
    return out


def _geo_label(geos: tuple[str, ...] | None) -> str:
    if geos is None:
        return _NONE
    return ", ".join("default (*)" if g == DEFAULT_GEO else "any (no geo)" if g == NO_GEO else g for g in geos)


def _owners_label(target: Target | None) -> str:
    if target is None:
        return _NONE
    return ", ".join(target.owners) if target.owners else "foreign (no ownership record)"


def _weight(target: Target | None) -> str:
    if target is None:
        return _NONE
    return f"{target.weight} (withdrawn)" if target.withdrawn else str(target.weight)


def _pct(share: float) -> str:
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 <= share < 1:
        return ">99%"
    return f"{int(share * 100 + 0.5)}%"


def _share(target: Target | None) -> str:
    return _NONE if target is None else _pct(target.share)


def _pair(before: str, after: str, cell: bool = False, arrow: str = "→") -> str:
    """``before → after``, or one value when both sides say the same."""
    if cell:
        before, after = (md_code(v) if v != _NONE else v for v in (before, after))
    return before if before == after else f"{before} {arrow} {after}"


def split_table(change: SplitChange) -> list[str]:
    """A markdown table (header and rows) of the host's split, before → after."""
    out = ["| geo | cluster | target | weight | share |", "|---|---|---|---|---|"]
    for row in _rows(change):
        was, now = row.sides
        target = md_code(row.target) if row.target else f"no weighted row at {md_code(row.pool)}"
        out.append(f"| {_pair(_geo_label(row.geos[0]), _geo_label(row.geos[1]), True)} "
                   f"| {_pair(_owners_label(was), _owners_label(now), True)} | {target} "
                   f"| {_pair(_weight(was), _weight(now))} | {_pair(_share(was), _share(now))} |")
    return out


def split_text(change: SplitChange) -> list[str]:
    """The host's split for a terminal, one line per item (each through the text gate)."""
    what = ("new loadbalanced host" if change.before is None else
            "no longer loadbalanced" if change.after is None else "traffic split changed")
    out = [f"{change.host}: {what}"]
    pool = None
    for row in _rows(change):
        if row.pool != pool:
            pool = row.pool
            out.append(f"  {row.pool} (geo {_pair(_geo_label(row.geos[0]), _geo_label(row.geos[1]), arrow='->')})")
        was, now = row.sides
        if not row.target:
            out.append("    no weighted row")
            continue
        out.append(f"    {_pair(_owners_label(was), _owners_label(now), arrow='->')}  {row.target}  "
                   f"weight {_pair(_weight(was), _weight(now), arrow='->')}  "
                   f"share {_pair(_share(was), _share(now), arrow='->')}")
    return [inline(line) for line in out]


_MERMAID_ESCAPES = {c: f"#{ord(c)};" for c in "\"#<>`|\\%&:;[]{}"}


def mermaid_label(text: str) -> str:
    """``text`` as the inside of a quoted Mermaid label: line breaks and controls escaped by the
    text gate, then what Mermaid or markdown reads (quotes, ``#``, ``<``, ``>``, backticks, ``|``,
    the backslash, ``%`` of a ``%%{init}%%`` directive, ``&``, ``:``, ``;``, brackets and braces)
    written as Mermaid entity codes (``#34;``)."""
    return "".join(_MERMAID_ESCAPES.get(c, c) for c in inline(text))


def _diagram(split: Split | None, title: str, ids: list[int]) -> list[str]:
    def node(label: str, *more: str) -> str:
        ids[0] += 1
        text = "<br/>".join(mermaid_label(part) for part in (label, *more))
        out.append(f'    n{ids[0]}["{text}"]')
        return f"n{ids[0]}"

    ids[0] += 1
    out = [f'  subgraph n{ids[0]}["{mermaid_label(title)}"]']
    if split is None:
        node("not loadbalanced")
    else:
        host = node(split.host)
        for pool in split.pools:
            geo = node(pool.name) if pool.targets else node(pool.name, "no weighted row")
            for code in pool.geos:
                out.append(f'    {host} -->|"{mermaid_label(_geo_label((code,)))}"| {geo}')
            for target in pool.targets:
                cluster = node(_owners_label(target), target.target)
                weight = f"{target.weight} ({_pct(target.share)})" + (" withdrawn" if target.withdrawn else "")
                out.append(f'    {geo} {"-.->" if target.withdrawn else "-->"}|"{mermaid_label(weight)}"| {cluster}')
    out.append("  end")
    return out


def split_mermaid(change: SplitChange) -> str:
    """A fenced Mermaid ``flowchart LR`` block, before and after as two subgraphs: host → pool
    (the geo codes on the edges) → cluster (weight and share on the edge; dotted when
    withdrawn).  Node ids are synthetic; every label goes through `mermaid_label`, so no
    backtick reaches the block and the fence holds."""
    ids = [0]
    body = [*_diagram(change.before, "before", ids), *_diagram(change.after, "after", ids)]
    return "\n".join(["```mermaid", "flowchart LR", *body, "```"]) + "\n"
