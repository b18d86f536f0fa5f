"""Pure conversion and change building for the `google` provider (no SDK, no network).

Cloud DNS holds one resource record set (rrset) per name+type; gitdns holds one `RecordSet`
per set identifier.  `to_native` folds rows into one rrset and `from_native` unfolds it:

- rows without routing → one rrset with ``rrdatas`` (exactly one such row per name+type);
- weighted rows → one rrset with ``routingPolicy.wrr.items`` (weight + rrdatas per row).
  Cloud DNS keeps no set identifier: on read it is recovered from the item — the CNAME
  target for data rows (gitdns builds ``geo.klb.H`` rows with set_id == target), the
  ``external-dns/targets`` label for ownership TXT rows that copy that routing;
- geo rows → ``routingPolicy.geo.items`` (location = the geo code, a GCP region; set_id ==
  the geo code).  Cloud DNS has no ``*``: the default row (set_id ``default``, geo ``*``) is
  the item at ``defaultGeoLocation`` (setting, default ``europe-west1`` as Kuadrant's
  dns-operator maps it), so that region is reserved for the default row.

A fold that would not read back as the same rows (mixed routing, two TTLs, an
unrecoverable set identifier, two rows on one location) raises `FoldError`, never builds
something else; `representable` tells an rrset using features gitdns does not model.
`build_change` turns change groups into one Cloud DNS change (`batches`: the groups).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitdns.core import registry
from gitdns.core.records import Action, Change, RecordKey, RecordSet, normalize_name
from gitdns.core.store import group_changes

Native = dict[str, Any]  # a ResourceRecordSet as JSON
DEFAULT_GEO_LOCATION = "europe-west1"  # Kuadrant dns-operator's stand-in for geo "*"


# --- conversion --------------------------------------------------------------------------
class FoldError(ValueError):
    """Rows of one name+type that Cloud DNS cannot hold so that they read back the same."""


def absolute(name: str) -> str:
    return name if name.endswith(".") else name + "."


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unquote(text: str) -> str:
    """A TXT rrdata (one or more quoted strings, or bare text) as one plain string."""
    text = text.strip()
    if not text.startswith('"'):
        return text
    out: list[str] = []
    i, inside = 0, False
    while i < len(text):
        char = text[i]
        if char == "\\" and inside and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if char == '"':
            inside = not inside
        elif inside:
            out.append(char)
        i += 1
    return "".join(out)


def rdata(rtype: str, value: str) -> str:
    """A gitdns value as Cloud DNS rrdata: TXT quoted, CNAME/NS absolute with a dot."""
    if rtype == "TXT":
        return _quote(value)
    if rtype in ("CNAME", "NS"):
        return absolute(value)
    return value


def value(rtype: str, text: str) -> str:
    """Cloud DNS rrdata as a gitdns value (the inverse of `rdata`)."""
    if rtype == "TXT":
        return _unquote(text)
    if rtype in ("CNAME", "NS"):
        return normalize_name(text)
    return text


def wrr_set_id(rtype: str, values: Sequence[str]) -> str:
    """The set identifier of a weighted row, recovered from its values ("" when it cannot be)."""
    if rtype == "TXT":
        found = {t for v in values if (labels := registry.decode(v)) is not None for t in labels.targets or ()}
        return normalize_name(next(iter(found))) if len(found) == 1 else ""
    return values[0] if len(values) == 1 else ""


def _geo_set_id(geo: str) -> str:
    return "default" if geo == "*" else geo


def _values(rtype: str, item: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(value(rtype, str(r)) for r in item.get("rrdatas") or ())


def from_native(rrset: Mapping[str, Any], default_location: str = DEFAULT_GEO_LOCATION) -> list[RecordSet]:
    """The gitdns rows of one Cloud DNS rrset (unfold)."""
    name, rtype, ttl = normalize_name(str(rrset["name"])), str(rrset["type"]), int(rrset.get("ttl") or 0)
    policy = rrset.get("routingPolicy") or {}
    rows: list[RecordSet] = []
    for item in (policy.get("wrr") or {}).get("items") or ():
        values = _values(rtype, item)
        rows.append(RecordSet(name, rtype, ttl, values, set_id=wrr_set_id(rtype, values),
                              weight=round(float(item.get("weight", 0)))))
    for item in (policy.get("geo") or {}).get("items") or ():
        location = str(item.get("location", ""))
        geo = "*" if location == default_location else location
        rows.append(RecordSet(name, rtype, ttl, _values(rtype, item), set_id=_geo_set_id(geo), geo=geo))
    if not policy:
        rows.append(RecordSet(name, rtype, ttl, _values(rtype, rrset)))
    return rows


def _mode(rec: RecordSet) -> str:
    if rec.weight is not None and rec.geo is not None:
        raise FoldError(f"{rec.key}: Cloud DNS routes an rrset by weight or by geo, not both")
    return "wrr" if rec.weight is not None else "geo" if rec.geo is not None else "plain"


def to_native(rows: Sequence[RecordSet], default_location: str = DEFAULT_GEO_LOCATION) -> Native:
    """One Cloud DNS rrset holding ``rows`` (all of one name+type) (fold)."""
    if not rows:
        raise FoldError("no rows to fold")
    first = rows[0]
    modes = {_mode(r) for r in rows}
    if len(modes) > 1:
        raise FoldError(f"{first.name} {first.type}: Cloud DNS holds one rrset per name and type; rows with "
                        f"different routing ({', '.join(sorted(modes))}) cannot share it")
    if len({r.ttl for r in rows}) > 1:
        raise FoldError(f"{first.name} {first.type}: Cloud DNS holds one TTL per rrset; rows want "
                        f"{sorted({r.ttl for r in rows})}")
    native: Native = {"kind": "dns#resourceRecordSet", "name": absolute(first.name), "type": first.type,
                      "ttl": first.ttl}
    mode = modes.pop()
    ordered = sorted(rows, key=lambda r: r.set_id)
    if mode == "plain":
        if len(rows) > 1 or first.set_id:
            raise FoldError(f"{first.key}: a row without routing needs no set identifier and must be alone")
        native["rrdatas"] = [rdata(first.type, v) for v in first.values]
        return native
    items: list[dict[str, Any]] = []
    locations: set[str] = set()
    for rec in ordered:
        data = [rdata(rec.type, v) for v in rec.values]
        if mode == "wrr":
            assert rec.weight is not None
            if rec.weight < 0 or not rec.set_id or wrr_set_id(rec.type, rec.values) != rec.set_id:
                raise FoldError(f"{rec.key}: a weighted row needs a weight >= 0 and a set identifier Cloud DNS "
                                "can recover (the single target; for TXT its external-dns/targets label)")
            items.append({"weight": float(rec.weight), "rrdatas": data})
            continue
        assert rec.geo is not None
        location = default_location if rec.geo == "*" else rec.geo
        if rec.set_id != _geo_set_id(rec.geo) or location in locations or (
                rec.geo != "*" and rec.geo == default_location):
            raise FoldError(f"{rec.key}: a geo row's set identifier must be its geo code ('default' for '*') and "
                            f"each location used once; {default_location} is reserved for the default row "
                            "(setting defaultGeoLocation)")
        locations.add(location)
        items.append({"location": location, "rrdatas": data})
    native["routingPolicy"] = {mode: {"items": items}}
    return native


def canonical(rrset: Mapping[str, Any]) -> Any:
    """An rrset with `kind`, DNSSEC signatures and item order dropped (for comparison)."""
    rtype = str(rrset.get("type"))

    def clean(obj: Any) -> Any:
        if isinstance(obj, dict):
            out = {k: clean(v) for k, v in obj.items() if k not in ("kind", "signatureRrdatas")}
            if "rrdatas" in out:
                out["rrdatas"] = sorted(value(rtype, str(r)) for r in out["rrdatas"])
            if "weight" in out:
                out["weight"] = float(out["weight"])
            if "name" in out:
                out["name"] = normalize_name(str(out["name"]))
            if isinstance(out.get("items"), list):
                out["items"] = sorted(out["items"], key=lambda i: json.dumps(i, sort_keys=True))
            return out
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    return clean(dict(rrset))


def representable(rrset: Mapping[str, Any], default_location: str = DEFAULT_GEO_LOCATION) -> bool:
    """Whether gitdns can rewrite ``rrset`` without losing anything (unfold then fold is exact)."""
    try:
        again = to_native(from_native(rrset, default_location), default_location)
    except (FoldError, KeyError, TypeError, ValueError):
        return False
    return bool(canonical(again) == canonical(rrset))


# --- one change per group ----------------------------------------------------------------
class StaleGroup(Exception):
    """A change's ``old`` is not what the zone holds now: re-read and re-plan."""


def batches(changes: Sequence[Change]) -> list[tuple[RecordKey, list[Change]]]:
    """The change groups in first-seen order: a record and its ownership TXT always land
    together.  The provider sends the fresh ones in one change and, when Cloud DNS refuses or
    fails that, each alone: one stale name never sinks the others."""
    return list(group_changes(changes).items())


@dataclass
class ChangeBody:
    deletions: list[Native] = field(default_factory=list)
    additions: list[Native] = field(default_factory=list)
    after: dict[tuple[str, str], Native | None] = field(default_factory=dict)  # what the zone then holds

    def request(self) -> dict[str, Any]:
        return {"kind": "dns#change", "deletions": self.deletions, "additions": self.additions}


def build_change(members: Sequence[Change], current: Mapping[tuple[str, str], Native | None],
                 default_location: str = DEFAULT_GEO_LOCATION) -> ChangeBody:
    """The Cloud DNS change for one group, given the rrsets it touches as just read.
    Raises `StaleGroup` when a ``Change.old`` no longer matches, `FoldError` when the result
    cannot be held."""
    rows: dict[tuple[str, str], dict[str, RecordSet]] = {}
    for key, native in current.items():
        if native is not None and not representable(native, default_location):
            raise FoldError(f"{key[0]} {key[1]}: the rrset uses Cloud DNS features gitdns does not model "
                            "(health checks, primary/backup, fencing or non-integer weights); not rewritten")
        rows[key] = {r.set_id: r for r in from_native(native, default_location)} if native else {}
    for change in members:
        rec = change.record
        held = rows.setdefault((rec.name, rec.type), {})
        now = held.get(rec.set_id)
        if change.action is Action.CREATE and now is not None:
            raise StaleGroup(f"{change.key} already exists")
        if change.action is not Action.CREATE and now != change.old:
            raise StaleGroup(f"{change.key} {'no longer exists' if now is None else 'changed since it was read'}")
        if change.new is None:
            held.pop(rec.set_id, None)
        else:
            held[rec.set_id] = change.new
    body = ChangeBody()
    for key, held in rows.items():
        before = current.get(key)
        after = to_native(list(held.values()), default_location) if held else None
        if before is not None and after is not None and canonical(before) == canonical(after):
            body.after[key] = before
            continue
        if before is not None:
            body.deletions.append(dict(before))
        if after is not None:
            body.additions.append(after)
        body.after[key] = after
    return body
