"""Pure conversion and batching for the `azure` provider (no SDK, no network).

- `to_native` / `from_native`: a `RecordSet` ↔ an ARM record set body.  Names are relative
  to the zone (``@`` for the apex); MX/SRV targets and CNAME/NS names go without their
  trailing dot and come back absolute; a TXT value is split in 255-octet strings.
- Azure DNS has no set identifiers: geo and weighted answers need Traffic Manager, which
  gitdns does not drive, so a record with routing does not convert (`unsupported`).
- `batches`: one batch per change group; every change is one request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gitdns.core.providertypes import capabilities_of
from gitdns.core.records import Change, RecordKey, RecordSet, normalize_name
from gitdns.core.store import group_changes

RECORD_TYPES = capabilities_of("azure").record_types  # declared in gitdns.core.providertypes
TXT_CHUNK = 255
ROUTING_REFUSED = ("azure: the loadbalanced strategy needs Traffic Manager, which gitdns does not drive yet; "
                   "use the flattened form or another provider")
ARRAY_KEYS = {"A": "ARecords", "AAAA": "AAAARecords", "TXT": "TXTRecords", "MX": "MXRecords",
              "SRV": "SRVRecords", "CAA": "caaRecords", "NS": "NSRecords"}


def relative_name(name: str, zone: str) -> str:
    """The Azure record-set name of an absolute gitdns name: ``@`` for the apex."""
    name, zone = normalize_name(name), normalize_name(zone)
    return "@" if name == zone else name[: -len(zone) - 1]


def absolute_name(relative: str, zone: str) -> str:
    relative = normalize_name(relative)
    return normalize_name(zone) if relative in ("@", "") else f"{relative}.{normalize_name(zone)}"


def _dotless(target: str) -> str:
    return target[:-1] if target.endswith(".") else target


def _txt_chunks(value: str) -> list[str]:
    raw = value.encode("utf-8")
    return [raw[i:i + TXT_CHUNK].decode("utf-8", "ignore") for i in range(0, len(raw), TXT_CHUNK)] or [""]


def _caa_value(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


def _native_value(rtype: str, value: str) -> dict[str, Any]:
    """One value as its Azure record object; ValueError when the rdata text does not parse."""
    fields = value.split()
    if rtype == "A":
        return {"ipv4Address": value}
    if rtype == "AAAA":
        return {"ipv6Address": value}
    if rtype == "TXT":
        return {"value": _txt_chunks(value)}
    if rtype == "NS":
        return {"nsdname": _dotless(value)}
    if rtype == "MX" and len(fields) == 2:
        return {"preference": int(fields[0]), "exchange": _dotless(fields[1])}
    if rtype == "SRV" and len(fields) == 4:
        return {"priority": int(fields[0]), "weight": int(fields[1]), "port": int(fields[2]),
                "target": _dotless(fields[3])}
    if rtype == "CAA" and len(fields) >= 3:
        return {"flags": int(fields[0]), "tag": fields[1], "value": _caa_value(value.split(None, 2)[2])}
    raise ValueError(f"{value!r} is not valid {rtype} rdata")


def to_native(rec: RecordSet, zone: str, metadata: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """A record set as ``(relative name, ARM request body)``.  MX/SRV targets and CNAME/NS
    names go without their trailing dot.  Raises ValueError for a value that does not parse
    and for routing (set identifier, weight, geo), which Azure DNS cannot hold."""
    if rec.set_id or rec.weight is not None or rec.geo is not None:
        raise ValueError(ROUTING_REFUSED)
    props: dict[str, Any] = {"TTL": rec.ttl}
    if metadata:
        props["metadata"] = dict(metadata)
    if rec.type == "CNAME":
        if len(rec.values) != 1:
            raise ValueError(f"{rec.key}: a CNAME holds exactly one value")
        props["CNAMERecord"] = {"cname": _dotless(rec.values[0])}
    elif rec.type in ARRAY_KEYS:
        props[ARRAY_KEYS[rec.type]] = [_native_value(rec.type, v) for v in rec.values]
    else:
        raise ValueError(f"{rec.key}: record type {rec.type} is not supported by azure")
    return relative_name(rec.name, zone), {"properties": props}


def _absolute(target: Any) -> str:
    return normalize_name(str(target)) + "."


def _values(rtype: str, props: Mapping[str, Any]) -> list[str]:
    if rtype == "CNAME":
        cname = (props.get("CNAMERecord") or {}).get("cname")
        return [normalize_name(str(cname))] if cname else []
    items: list[dict[str, Any]] = props.get(ARRAY_KEYS[rtype]) or []
    if rtype == "A":
        return [str(i["ipv4Address"]) for i in items]
    if rtype == "AAAA":
        return [str(i["ipv6Address"]) for i in items]
    if rtype == "TXT":
        return ["".join(i.get("value") or []) for i in items]
    if rtype == "NS":
        return [normalize_name(str(i["nsdname"])) for i in items]
    if rtype == "MX":
        return [f"{i['preference']} {_absolute(i['exchange'])}" for i in items]
    if rtype == "SRV":
        return [f"{i['priority']} {i['weight']} {i['port']} {_absolute(i['target'])}" for i in items]
    return [f"{i['flags']} {i['tag']} \"{i['value']}\"" for i in items]  # CAA


def native_type(body: Mapping[str, Any]) -> str:
    """``Microsoft.Network/dnszones/A`` -> ``A``."""
    return str(body.get("type", "")).rsplit("/", 1)[-1].upper()


def from_native(body: Mapping[str, Any], zone: str) -> RecordSet | None:
    """An ARM record set as a record set; None for SOA, PTR and other types gitdns does not
    manage, and for a record set with no values (an empty set Azure keeps, or an alias)."""
    rtype = native_type(body)
    if rtype not in RECORD_TYPES:
        return None
    props: Mapping[str, Any] = body.get("properties") or {}
    values = _values(rtype, props)
    if not values:
        return None
    return RecordSet(absolute_name(str(body.get("name", "@")), zone), rtype, int(props.get("TTL") or 0),
                     tuple(values))


def unsupported(change: Change) -> str:
    """Why a change cannot be written to Azure DNS ("" when it can)."""
    for rec in (change.old, change.new):
        if rec is None:
            continue
        if rec.set_id or rec.weight is not None or rec.geo is not None:
            return ROUTING_REFUSED
        if rec.type not in RECORD_TYPES:
            return f"{rec.key}: record type {rec.type} is not supported by azure"
    return ""


def batches(changes: Sequence[Change]) -> list[tuple[RecordKey, list[Change]]]:
    """One batch per change group, in first-seen order, each in the planner's order (TXT
    before data on create, data before TXT on delete): every change is one request."""
    return list(group_changes(changes).items())
