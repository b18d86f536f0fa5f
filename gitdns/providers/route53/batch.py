"""Pure conversion and batching for the `route53` provider (no SDK, no network).

- `to_native` / `from_native`: a `RecordSet` ↔ a Route53 ``ResourceRecordSet`` dict.  Names get
  a trailing dot on write; on read Route53's octal escapes (``\\052`` for ``*``) are decoded.
  TXT values are quoted on write (``"..."``; ``"`` and ``\\`` escaped, bytes outside printable
  ASCII as ``\\ddd``, strings over 255 octets split) and unquoted on read.  CNAME/NS targets
  get a trailing dot on write and lose it on read.  Weighted rows carry ``SetIdentifier`` +
  ``Weight``; geo rows ``SetIdentifier`` + ``GeoLocation`` (`geo_to_native`).
- `group_ops`: one change group as Route53 changes — a compare-and-swap: ``DELETE`` of the exact
  old rrset and ``CREATE`` of the new one, never ``UPSERT``.
- `batches`: groups packed into requests within Route53's limits (≤ 1,000 ``ResourceRecord``
  values, ≤ 32,000 value characters; UPSERT would count twice, DELETE + CREATE count each
  side once), a group never split; lazily, one request at a time.
- `parse_batch_error`: the records an ``InvalidChangeBatch`` message names, and whether each
  one was stale.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitdns.core.providertypes import capabilities_of
from gitdns.core.records import Change, RecordKey, RecordSet, normalize_name
from gitdns.core.store import ContradictoryGroup, group_states

_CAPABILITIES = capabilities_of("route53")  # the limits are declared in gitdns.core.providertypes
RECORD_TYPES = _CAPABILITIES.record_types
TXT_CHUNK = 255
MAX_VALUES = _CAPABILITIES.max_values_per_batch
MAX_CHARS = _CAPABILITIES.max_chars_per_batch
ALIAS_PREFIX = "ALIAS "
MAX_WEIGHT = _CAPABILITIES.weights[1]

Native = dict[str, Any]


# --- names ------------------------------------------------------------------------------------------


def absolute(name: str) -> str:
    return name if name.endswith(".") else name + "."


_ESCAPE = re.compile(r"\\(\d{3}|.)")


def decode_name(native: str) -> str:
    """A Route53 name (``\\052.example.com.``) as a gitdns name (``*.example.com``)."""
    return normalize_name(_ESCAPE.sub(lambda m: chr(int(m[1], 8)) if m[1].isdigit() else m[1], native))


def encode_name(name: str) -> str:
    return absolute(normalize_name(name))


# --- TXT --------------------------------------------------------------------------------------------


def _escape_txt(chunk: bytes) -> str:
    out: list[str] = []
    for byte in chunk:
        if byte in (0x22, 0x5C):
            out.append("\\" + chr(byte))
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def quote_txt(value: str) -> str:
    """One TXT value as Route53 takes it: quoted character strings of ≤ 255 octets each."""
    if len(value) <= TXT_CHUNK and value.isascii() and value.isprintable() and '"' not in value \
            and "\\" not in value:
        return f'"{value}"'  # one plain string, nothing to escape: the common case, without the loop
    return quote_octets(value)


def quote_octets(value: str) -> str:
    """`quote_txt` without its fast path: escape octet by octet, split every 255 octets."""
    raw = value.encode("utf-8")
    chunks = [raw[i:i + TXT_CHUNK] for i in range(0, len(raw), TXT_CHUNK)] or [b""]
    return " ".join(f'"{_escape_txt(chunk)}"' for chunk in chunks)


def unquote_txt(text: str) -> str:
    """The inverse of `quote_txt`: the character strings joined (unquoted text taken as is)."""
    if "\\" not in text and text.count('"') == 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1]  # one plain quoted string: the common case, without the loop
    out = bytearray()
    i, n = 0, len(text)
    quoted = False
    while i < n:
        ch = text[i]
        if ch == '"':
            quoted = not quoted
            i += 1
        elif ch == "\\" and i + 1 < n:
            digits = text[i + 1:i + 4]
            if len(digits) == 3 and digits.isdigit():
                out.append(int(digits, 8) & 0xFF)
                i += 4
            else:
                out.extend(text[i + 1].encode("utf-8"))
                i += 2
        elif ch.isspace() and not quoted:
            i += 1
        else:
            out.extend(ch.encode("utf-8"))
            i += 1
    return out.decode("utf-8", "replace")


# --- geo --------------------------------------------------------------------------------------------


def geo_to_native(code: str) -> dict[str, str]:
    """``GEO-EU`` → ``{ContinentCode: EU}``; ``US`` → ``{CountryCode: US}``; ``*`` →
    ``{CountryCode: *}`` (Route53's default location); ``US-CA`` → country + subdivision."""
    code = code.strip().upper()
    if code == "*":
        return {"CountryCode": "*"}
    if code.startswith("GEO-") and len(code) == 6 and code[4:].isalpha():
        return {"ContinentCode": code[4:]}
    if len(code) == 2 and code.isalpha():
        return {"CountryCode": code}
    country, _, sub = code.partition("-")
    if len(country) == 2 and country.isalpha() and sub and sub.isalnum() and len(sub) <= 3:
        return {"CountryCode": country, "SubdivisionCode": sub}
    raise ValueError(f"geo code {code!r} is neither GEO-<continent>, an ISO country code, nor *")


def geo_from_native(location: Mapping[str, str]) -> str:
    if "ContinentCode" in location:
        return "GEO-" + location["ContinentCode"].upper()
    country = location.get("CountryCode", "*").upper()
    if location.get("SubdivisionCode"):
        return f"{country}-{location['SubdivisionCode'].upper()}"
    return country


# --- record sets ------------------------------------------------------------------------------------


def _native_value(rtype: str, value: str) -> str:
    if rtype == "TXT":
        return quote_txt(value)
    if rtype in ("CNAME", "NS"):
        return absolute(value)
    return value


def _alias(value: str) -> Native | None:
    if not value.startswith(ALIAS_PREFIX):
        return None
    parts = value[len(ALIAS_PREFIX):].split()
    if len(parts) != 3:
        return None
    return {"HostedZoneId": parts[0], "DNSName": absolute(parts[1]), "EvaluateTargetHealth": parts[2] == "true"}


def to_native(rec: RecordSet, health_check_id: str | None = None) -> Native:
    """A record set as a ``ResourceRecordSet``.  Raises ValueError for a geo code Route53 has
    no location for.  An ``ALIAS <zone-id> <dns-name> <evaluate>`` value (how `from_native`
    shows an alias record) becomes an ``AliasTarget`` again."""
    out: Native = {"Name": encode_name(rec.name), "Type": rec.type}
    if rec.set_id:
        out["SetIdentifier"] = rec.set_id
    if rec.weight is not None:
        out["Weight"] = rec.weight
    if rec.geo is not None:
        out["GeoLocation"] = geo_to_native(rec.geo)
    alias = _alias(rec.values[0]) if len(rec.values) == 1 else None
    if alias is not None:
        out["AliasTarget"] = alias
    else:
        out["TTL"] = rec.ttl
        out["ResourceRecords"] = [{"Value": _native_value(rec.type, v)} for v in rec.values]
    if health_check_id:
        out["HealthCheckId"] = health_check_id
    return out


def _value_from_native(rtype: str, value: str) -> str:
    if rtype == "TXT":
        return unquote_txt(value)
    if rtype in ("CNAME", "NS"):
        return normalize_name(value)
    return value


_TYPES = {t: t for t in RECORD_TYPES}


def from_native(rrs: Mapping[str, Any]) -> RecordSet | None:
    """A ``ResourceRecordSet`` as a record set; None for types gitdns does not manage (SOA,
    PTR, SPF, ...).  An alias record reads as one value ``ALIAS <zone-id> <dns-name>
    <evaluate>`` (foreign to every owner); a row with a routing policy gitdns does not model
    (failover, latency, multivalue, CIDR, geoproximity) keeps only its set identifier."""
    rtype = _TYPES.get(str(rrs.get("Type", "")))  # one shared string per type, not one per row
    if rtype is None:
        return None
    alias = rrs.get("AliasTarget")
    if alias:
        evaluate = "true" if alias.get("EvaluateTargetHealth") else "false"
        values: tuple[str, ...] = (
            f"{ALIAS_PREFIX}{alias.get('HostedZoneId', '')} {normalize_name(alias.get('DNSName', ''))} {evaluate}",)
    else:
        values = tuple(_value_from_native(rtype, r["Value"]) for r in rrs.get("ResourceRecords", ()))
    geo = rrs.get("GeoLocation")
    weight = rrs.get("Weight")
    return RecordSet(
        name=decode_name(str(rrs["Name"])), type=rtype, ttl=int(rrs.get("TTL", 0)), values=values,
        set_id=str(rrs.get("SetIdentifier", "")), weight=None if weight is None else int(weight),
        geo=geo_from_native(geo) if geo else None,
    )


def unsupported(rec: RecordSet) -> str:
    """Why Route53 cannot hold ``rec`` as a gitdns row ("" when it can)."""
    if rec.type not in RECORD_TYPES:
        return f"{rec.key}: record type {rec.type} is not supported by route53"
    if rec.set_id and rec.weight is None and rec.geo is None:
        return f"{rec.key}: a set identifier needs a weight or a geo code on route53"
    if (rec.weight is not None or rec.geo is not None) and not rec.set_id:
        return f"{rec.key}: a weighted or geo row needs a set identifier on route53"
    if rec.weight is not None and rec.geo is not None:
        return f"{rec.key}: route53 takes one routing policy per row (weight or geo, not both)"
    if rec.weight is not None and not 0 <= rec.weight <= MAX_WEIGHT:
        return f"{rec.key}: route53 weights are 0..{MAX_WEIGHT}, got {rec.weight}"
    if len(rec.set_id) > 128:
        return f"{rec.key}: route53 set identifiers are at most 128 characters"
    if rec.geo is not None:
        try:
            geo_to_native(rec.geo)
        except ValueError as exc:
            return f"{rec.key}: {exc}"
    return ""


# --- change groups and batches ------------------------------------------------------------------------


class StaleGroup(Exception):
    """The changes of one group contradict each other: stale before it is sent."""


@dataclass(frozen=True, slots=True)
class GroupOps:
    """One change group as Route53 changes, with what it counts against the request limits."""

    group: RecordKey
    changes: tuple[Change, ...]
    deletes: tuple[Native, ...]
    creates: tuple[Native, ...]
    values: int
    chars: int

    @property
    def keys(self) -> frozenset[RecordKey]:
        return frozenset(native_key(r) for r in self.deletes + self.creates)


def native_key(rrs: Mapping[str, Any]) -> RecordKey:
    return RecordKey(decode_name(str(rrs["Name"])), str(rrs["Type"]), str(rrs.get("SetIdentifier", "")))


def _states(changes: Sequence[Change]) -> tuple[dict[RecordKey, RecordSet | None],
            dict[RecordKey, RecordSet | None]]:
    try:
        return group_states(changes)
    except ContradictoryGroup as exc:
        raise StaleGroup(str(exc)) from None


def _size(rrs: Native) -> tuple[int, int]:
    values = [r["Value"] for r in rrs.get("ResourceRecords", ())]
    return len(values), sum(len(v) for v in values)


def group_ops(group: RecordKey, changes: Sequence[Change], health_ids: Mapping[RecordKey, str] | None = None,
              new_health_ids: Mapping[RecordKey, str] | None = None) -> GroupOps:
    """The group as ``DELETE`` of every old rrset (exact, with the health check id it was
    read with: ``health_ids``) and ``CREATE`` of every new one (with ``new_health_ids[key]``
    when given, else the old row's health check id).  Raises `StaleGroup` or ValueError."""
    health_ids = health_ids or {}
    new_health_ids = new_health_ids or {}
    before, after = _states(changes)
    deletes: list[Native] = []
    creates: list[Native] = []
    for key, old in before.items():
        new = after[key]
        if old == new:
            continue
        if old is not None:
            deletes.append(to_native(old, health_ids.get(key)))
        if new is not None:
            creates.append(to_native(new, new_health_ids.get(key, health_ids.get(key))))
    values = chars = 0
    for rrs in deletes + creates:
        v, c = _size(rrs)
        values, chars = values + v, chars + c
    return GroupOps(group, tuple(changes), tuple(deletes), tuple(creates), values, chars)


def with_unchanged(ops: GroupOps, records: Sequence[RecordSet]) -> GroupOps:
    """``ops`` with a ``DELETE`` and a ``CREATE`` of each of ``records`` exactly as read: the
    request changes nothing there, and Route53 refuses it whole when one of them changed or
    went (the exact-match ``DELETE``), which is how a group is made conditional on another
    record being present (a ``present`` `Guard`)."""
    if not records:
        return ops
    natives = tuple(to_native(rec) for rec in records)
    values, chars = ops.values, ops.chars
    for rrs in natives:
        v, c = _size(rrs)
        values, chars = values + 2 * v, chars + 2 * c
    return GroupOps(ops.group, ops.changes, ops.deletes + natives, ops.creates + natives, values, chars)


def oversize(ops: GroupOps, max_values: int = MAX_VALUES, max_chars: int = MAX_CHARS) -> str:
    if ops.values > max_values:
        return f"{ops.group}: {ops.values} values exceed route53's {max_values} per request"
    if ops.chars > max_chars:
        return f"{ops.group}: {ops.chars} value characters exceed route53's {max_chars} per request"
    return ""


def batches(groups: Iterable[GroupOps], max_values: int = MAX_VALUES,
            max_chars: int = MAX_CHARS) -> Iterator[list[GroupOps]]:
    """Groups packed in order into requests within the limits, each request yielded as soon
    as it is full (so a caller converting groups lazily holds one request at a time); a
    group is never split (one that alone exceeds a limit gets a request of its own, which
    Route53 will refuse).  Each request but the last is full to within one group of a
    limit; with groups far below the limits (a record and its ownership TXT: a few values,
    a few hundred characters) that is at or near `lower_bound`, which no packing can beat."""
    current: list[GroupOps] = []
    values = chars = 0
    for ops in groups:
        if current and (values + ops.values > max_values or chars + ops.chars > max_chars):
            yield current
            current, values, chars = [], 0, 0
        current.append(ops)
        values, chars = values + ops.values, chars + ops.chars
    if current:
        yield current


def lower_bound(values: int, chars: int, max_values: int = MAX_VALUES, max_chars: int = MAX_CHARS) -> int:
    """The fewest requests that can carry ``values`` values of ``chars`` characters."""
    return max(-(-values // max_values), -(-chars // max_chars))


def request_changes(batch: Sequence[GroupOps]) -> list[Native]:
    """The ``ChangeBatch.Changes`` of one request: every DELETE, then every CREATE (so a swap
    between groups — a CNAME replaced by an A — validates)."""
    out = [{"Action": "DELETE", "ResourceRecordSet": r} for ops in batch for r in ops.deletes]
    out += [{"Action": "CREATE", "ResourceRecordSet": r} for ops in batch for r in ops.creates]
    return out


def request_size(changes: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(values, characters) a request counts against the limits; UPSERT counts twice."""
    values = chars = 0
    for change in changes:
        v, c = _size(dict(change["ResourceRecordSet"]))
        times = 2 if change["Action"] == "UPSERT" else 1
        values, chars = values + v * times, chars + c * times
    return values, chars


# --- InvalidChangeBatch messages -----------------------------------------------------------------------

_TRIED = re.compile(r"Tried to (?:create|delete|upsert) resource record set \[name='([^']*)', type='([^']*)'"
                    r"(?:, set-identifier='([^']*)')?\] but ([^,\]]*)")
_RRSET_NAME = re.compile(r"RRSet (?:of type \w+ )?with DNS name (\S+?)\.?[ ,]")
STALE_PHRASES = ("was not found", "do not match", "already exists")


@dataclass(frozen=True, slots=True)
class BatchProblem:
    name: str
    key: RecordKey | None  # None: only the name is known
    stale: bool
    text: str


def parse_batch_error(message: str) -> list[BatchProblem]:
    """The records an ``InvalidChangeBatch`` message names: ``Tried to delete resource record
    set [name='x.', type='A'] but it was not found`` (stale: not found, values do not match,
    already exists) and ``RRSet ... with DNS name x. ...`` (other problems at a name)."""
    out: list[BatchProblem] = []
    for m in _TRIED.finditer(message):
        key = RecordKey(decode_name(m[1]), m[2], m[3] or "")
        tail = m[4]
        out.append(BatchProblem(key.name, key, any(p in tail for p in STALE_PHRASES), m[0]))
    if not out:
        for m in _RRSET_NAME.finditer(message + " "):
            out.append(BatchProblem(decode_name(m[1]), None, False, message))
    return out
