"""Geo views of a record store, for plain DNS servers (docs/records.md).

A plain zone holds one CNAME per name and no set identifiers, so the store's routed rows
are resolved per *view*: one view per geo code found on geo rows, plus ``default``.

- A geo-routed name (rows with ``geo``) answers in view X with the row whose geo is X,
  else with the default row (geo ``*``).
- A weighted name (rows with a set identifier and no geo) is flattened: each row's CNAME
  target is followed inside the store to its A/AAAA values and one A/AAAA rrset holding
  every target's values is published at the weighted name.  Rows of weight 0 are left out
  unless every row has weight 0 (fail open).  The weights (address -> weight) go out with
  the view for a CoreDNS ``loadbalance weighted`` file.  When a target has no address in
  the store (a gateway hostname) the name cannot be flattened: a single row is published
  as its CNAME; among several, the highest weight wins (ties by set identifier) and the
  view carries a note.
- Ownership TXT rows (which copy their record's set identifier and routing) are merged:
  one TXT rrset per name holding the union of the values.
- Everything else passes through unchanged.

Pure: values in, values out.  Serialising a view is `gitdns.adapters.zonefile`'s job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gitdns.core.records import MULTI_VALUE_TYPES, RecordSet, in_zone

DEFAULT_VIEW = "default"
DEFAULT_GEO = "*"
ADDRESS_TYPES = ("A", "AAAA")
MAX_CNAME_HOPS = 8
MAX_WEIGHT = 255  # CoreDNS weight files take 1..255


@dataclass(frozen=True, slots=True)
class View:
    name: str
    records: tuple[RecordSet, ...]  # plain record sets: no set ids, weights or geo
    weights: tuple[tuple[str, str, int], ...] = ()  # (name, address, weight)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Index:
    """The store split by routing kind, keyed by (name, type)."""

    plain: dict[tuple[str, str], RecordSet]
    geo: dict[tuple[str, str], tuple[RecordSet, ...]]
    weighted: dict[tuple[str, str], tuple[RecordSet, ...]]
    txt: dict[str, tuple[RecordSet, ...]]


def _index(records: Iterable[RecordSet]) -> _Index:
    plain: dict[tuple[str, str], RecordSet] = {}
    geo: dict[tuple[str, str], list[RecordSet]] = {}
    weighted: dict[tuple[str, str], list[RecordSet]] = {}
    txt: dict[str, list[RecordSet]] = {}
    for rec in records:
        if not rec.set_id and rec.weight is None and rec.geo is None:
            plain[(rec.name, rec.type)] = rec
        elif rec.type == "TXT":
            txt.setdefault(rec.name, []).append(rec)
        elif rec.geo is not None:
            geo.setdefault((rec.name, rec.type), []).append(rec)
        else:
            weighted.setdefault((rec.name, rec.type), []).append(rec)

    def frozen(d: dict[tuple[str, str], list[RecordSet]]) -> dict[tuple[str, str], tuple[RecordSet, ...]]:
        return {k: tuple(sorted(v, key=lambda r: r.set_id)) for k, v in d.items()}

    return _Index(
        plain=plain,
        geo=frozen(geo),
        weighted=frozen(weighted),
        txt={k: tuple(sorted(v, key=lambda r: r.set_id)) for k, v in txt.items()},
    )


def geo_codes(records: Iterable[RecordSet]) -> tuple[str, ...]:
    """The geo codes that get a view of their own (the default row's ``*`` does not)."""
    codes = {r.geo for r in records if r.geo is not None and r.geo != DEFAULT_GEO and r.type != "TXT"}
    return tuple(sorted(c for c in codes if c is not None and c != DEFAULT_VIEW))


def _plain(rec: RecordSet, values: Iterable[str] | None = None) -> RecordSet:
    vals = tuple(sorted(set(values))) if values is not None else rec.values
    return RecordSet(rec.name, rec.type, rec.ttl, vals)


# --- geo -----------------------------------------------------------------------------


def _choose_geo(rows: tuple[RecordSet, ...], view: str) -> tuple[RecordSet, str]:
    for wanted in (view, DEFAULT_GEO):
        for row in rows:
            if row.geo == wanted:
                return row, ""
    row = rows[0]
    note = f"{row.name} {row.type}: no row for geo {view} and no default row (geo *); using [{row.set_id}]"
    return row, note


# --- weighted ------------------------------------------------------------------------


def _addresses(index: _Index, target: str) -> dict[str, RecordSet]:
    """The A/AAAA record sets ``target`` resolves to inside the store (plain records,
    following plain CNAMEs); empty when it leaves the store."""
    name = target.rstrip(".").lower()
    for _ in range(MAX_CNAME_HOPS):
        found = {t: index.plain[(name, t)] for t in ADDRESS_TYPES if (name, t) in index.plain}
        if found:
            return found
        nxt = index.plain.get((name, "CNAME"))
        if nxt is None or not nxt.values:
            return {}
        name = nxt.values[0].rstrip(".").lower()
    return {}


def _eligible(rows: tuple[RecordSet, ...]) -> tuple[RecordSet, ...]:
    live = tuple(r for r in rows if (r.weight if r.weight is not None else 1) > 0)
    return live or rows  # every row at weight 0: fail open, answer with all of them


def _weight(row: RecordSet) -> int:
    return row.weight if row.weight is not None else 1


def _best(rows: tuple[RecordSet, ...]) -> RecordSet:
    return sorted(rows, key=lambda r: (-_weight(r), r.set_id))[0]


def _weights_for(name: str, rows: list[tuple[RecordSet, tuple[str, ...]]]) -> list[tuple[str, str, int]]:
    """Address weights: a row's weight is shared among its addresses (a cluster with three
    gateway IPs gets the same share as one with one), summed per address, kept in 1..255."""
    raw: dict[str, float] = {}
    for row, values in rows:
        for value in values:
            raw[value] = raw.get(value, 0.0) + max(_weight(row), 0) / len(values)
    if raw and all(w == 0 for w in raw.values()):
        raw = dict.fromkeys(raw, 1.0)
    return [(name, v, min(MAX_WEIGHT, max(1, round(w)))) for v, w in sorted(raw.items())]


def _flatten(
    index: _Index, rows: tuple[RecordSet, ...]
) -> tuple[list[RecordSet], list[tuple[str, str, int]], list[str]]:
    """Published records, weights and notes for one weighted (name, type)."""
    first = rows[0]
    chosen = _eligible(rows)
    if first.type in ADDRESS_TYPES:
        ttl = min(r.ttl for r in chosen)
        rec = RecordSet(first.name, first.type, ttl, tuple(v for r in chosen for v in r.values))
        return [rec], _weights_for(first.name, [(r, r.values) for r in chosen]), []
    if first.type != "CNAME":
        return [_plain(first, [v for r in chosen for v in r.values])], [], []
    targets = [(row, _addresses(index, row.values[0])) for row in chosen]
    if any(not found for _, found in targets):
        return _cname_fallback(first, chosen)
    ttl = min(r.ttl for r in chosen)
    out: list[RecordSet] = []
    weights: list[tuple[str, str, int]] = []
    for rtype in ADDRESS_TYPES:
        per_row = [(row, found[rtype].values) for row, found in targets if rtype in found]
        if per_row:
            out.append(RecordSet(first.name, rtype, ttl, tuple(v for _, vals in per_row for v in vals)))
            weights.extend(_weights_for(first.name, per_row))
    return out, weights, []


def _cname_fallback(
    first: RecordSet, chosen: tuple[RecordSet, ...]
) -> tuple[list[RecordSet], list[tuple[str, str, int]], list[str]]:
    best = _best(chosen)
    rec = RecordSet(first.name, "CNAME", best.ttl, best.values)
    if len(chosen) == 1:
        return [rec], [], []
    dropped = ", ".join(r.set_id for r in chosen if r is not best)
    note = (
        f"{first.name}: a weighted target has no address in the store, so the rows cannot be "
        f"flattened; publishing [{best.set_id}] (weight {_weight(best)}) only, dropping {dropped}"
    )
    return [rec], [], [note]


# --- assembly ------------------------------------------------------------------------


def _merge(out: dict[tuple[str, str], RecordSet], rec: RecordSet, notes: list[str]) -> None:
    key = (rec.name, rec.type)
    have = out.get(key)
    if have is None:
        out[key] = rec
    elif rec.type in MULTI_VALUE_TYPES:
        out[key] = RecordSet(rec.name, rec.type, min(have.ttl, rec.ttl), have.values + rec.values)
    elif have != rec:
        notes.append(f"{rec.name} {rec.type}: two different values in one view; keeping {have.values[0]}")


def _cname_clashes(out: dict[tuple[str, str], RecordSet], notes: list[str]) -> None:
    """A name holding a CNAME holds nothing else: the other data wins, as A wins over CNAME."""
    names_with_other = {name for (name, rtype) in out if rtype != "CNAME"}
    for name, rtype in list(out):
        if rtype == "CNAME" and name in names_with_other:
            del out[(name, rtype)]
            notes.append(f"{name}: CNAME dropped, the name also holds other data")


def _render_one(index: _Index, view: str, geo: str) -> View:
    out: dict[tuple[str, str], RecordSet] = {}
    weights: list[tuple[str, str, int]] = []
    notes: list[str] = []
    for rec in index.plain.values():
        _merge(out, rec, notes)
    for name, rows in index.txt.items():
        values = tuple(v for r in rows for v in r.values)
        _merge(out, RecordSet(name, "TXT", min(r.ttl for r in rows), values), notes)
    for rows in index.geo.values():
        row, note = _choose_geo(rows, geo)
        _merge(out, _plain(row), notes)
        notes.extend([note] if note else [])
    for rows in index.weighted.values():
        recs, wts, nts = _flatten(index, rows)
        for rec in recs:
            _merge(out, rec, notes)
        weights.extend(wts)
        notes.extend(nts)
    _cname_clashes(out, notes)
    records = tuple(sorted(out.values(), key=lambda r: (r.name, r.type)))
    return View(view, records, tuple(sorted(weights)), tuple(notes))


def render_views(domain: str, records: Iterable[RecordSet]) -> dict[str, View]:
    """One `View` per geo code on the zone's geo rows, plus ``"default"`` (which answers
    with the default rows, geo ``*``).  Records outside ``domain`` are ignored."""
    recs = [r for r in records if in_zone(r.name, domain)]
    index = _index(recs)
    views = [(code, code) for code in geo_codes(recs)] + [(DEFAULT_VIEW, DEFAULT_GEO)]
    return {name: _render_one(index, name, geo) for name, geo in views}
