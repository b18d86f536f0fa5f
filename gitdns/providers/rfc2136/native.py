"""Pure conversion and message building for the `rfc2136` provider (no network).

- `to_native` / `from_native`: a `RecordSet` ↔ a dnspython rrset; `snapshot` turns an AXFR
  into a `ZoneSnapshot` (the SOA serial as its version, the SOA itself left out).
- `batches`: one batch per change group with that group's guards; `build_update` turns one
  into an UPDATE message whose prerequisites make it a compare-and-swap (it lands only when
  the zone still holds exactly what the plan read).

dnspython is imported inside the functions that use it, never when this module is imported.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from gitdns.core.providertypes import capabilities_of
from gitdns.core.records import Change, Guard, RecordKey, RecordSet, ZoneSnapshot, in_zone, normalize_name
from gitdns.core.store import ContradictoryGroup, group_changes, group_states
from gitdns.providers.memory import filter_names, snapshot_names

if TYPE_CHECKING:
    import dns.rrset
    import dns.update

RECORD_TYPES = capabilities_of("rfc2136").record_types  # declared in gitdns.core.providertypes
TXT_CHUNK = 255


# --- conversion ---------------------------------------------------------------------------------


def absolute(name: str) -> str:
    return name if name.endswith(".") else name + "."


def _txt_strings(value: str) -> list[bytes]:
    raw = value.encode("utf-8")
    return [raw[i:i + TXT_CHUNK] for i in range(0, len(raw), TXT_CHUNK)] or [b""]


def to_native(rec: RecordSet) -> dns.rrset.RRset:
    """A record set as a dnspython rrset (absolute name; CNAME/NS targets made absolute; a TXT
    value as one string, split in 255-octet strings when longer).  Raises
    ``dns.exception.DNSException`` for a value that is not valid rdata."""
    import dns.name
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype
    import dns.rdtypes.ANY.TXT
    import dns.rrset

    rdtype = dns.rdatatype.from_text(rec.type)
    rdatas: list[dns.rdata.Rdata] = []
    for value in rec.values:
        if rec.type == "TXT":
            rdatas.append(dns.rdtypes.ANY.TXT.TXT(dns.rdataclass.IN, rdtype, _txt_strings(value)))
        elif rec.type in ("CNAME", "NS"):
            rdatas.append(dns.rdata.from_text(dns.rdataclass.IN, rdtype, absolute(value)))
        else:
            rdatas.append(dns.rdata.from_text(dns.rdataclass.IN, rdtype, value, origin=dns.name.root,
                                              relativize=False))
    return dns.rrset.from_rdata_list(dns.name.from_text(absolute(rec.name)), rec.ttl, rdatas)


def _value(rdata: object, rdtype: str) -> str:
    if rdtype == "TXT":
        return b"".join(rdata.strings).decode("utf-8", "replace")  # type: ignore[attr-defined]
    if rdtype in ("CNAME", "NS"):
        return normalize_name(rdata.target.to_text())  # type: ignore[attr-defined]
    return str(rdata.to_text())  # type: ignore[attr-defined]


def from_native(rrset: dns.rrset.RRset) -> RecordSet | None:
    """A dnspython rrset as a record set; None for the SOA and for types gitdns does not manage
    (DNSSEC records, PTR, ...)."""
    import dns.rdatatype

    rdtype = dns.rdatatype.to_text(rrset.rdtype)
    if rdtype not in RECORD_TYPES:
        return None
    return RecordSet(normalize_name(rrset.name.to_text()), rdtype, int(rrset.ttl),
                     tuple(_value(rd, rdtype) for rd in rrset))


def snapshot(domain: str, rrsets: Sequence[dns.rrset.RRset], names: Collection[str] | None) -> ZoneSnapshot:
    """The snapshot of an AXFR: records inside ``domain`` (the zone may be a parent of it),
    version = the SOA serial."""
    import dns.rdatatype

    records: list[RecordSet] = []
    skipped: list[RecordKey] = []
    version = ""
    for rrset in rrsets:
        if rrset.rdtype == dns.rdatatype.SOA:
            version = str(rrset[0].serial)
            continue
        rec = from_native(rrset)
        if rec is not None and in_zone(rec.name, domain):
            records.append(rec)
        elif rec is None:
            name = normalize_name(rrset.name.to_text())
            if in_zone(name, domain) and (names is None or name in names):
                skipped.append(RecordKey(name, dns.rdatatype.to_text(rrset.rdtype)))
    return ZoneSnapshot(zone=domain, records=filter_names(records, names), complete=True, version=version,
                        names=snapshot_names(names), skipped=tuple(skipped))


# --- messages -----------------------------------------------------------------------------------


class StaleGroup(Exception):
    """The changes of one group contradict each other (a later change's ``old`` is not what
    the earlier one wrote): stale before it is even sent."""


def unsupported(change: Change) -> str:
    """Why a change cannot be expressed in plain DNS ("" when it can)."""
    for rec in (change.old, change.new):
        if rec is None:
            continue
        if rec.set_id or rec.weight is not None or rec.geo is not None:
            return (f"{rec.key}: rfc2136 zones have no routing policies (set identifier, weight or geo); "
                    "use strategy simple, or a flattened loadbalanced policy")
        if rec.type not in RECORD_TYPES:
            return f"{rec.key}: record type {rec.type} is not supported by rfc2136"
    return ""


def batches(changes: Sequence[Change], guards: Sequence[Guard] = ()) -> list[tuple[RecordKey, list[Change],
                                                                                    list[Guard]]]:
    """One batch per change group, in first-seen order, with the guards of that group: each
    becomes one UPDATE message, so one stale name never sinks the others."""
    by_group: dict[RecordKey, list[Guard]] = {}
    for guard in guards:
        by_group.setdefault(guard.group, []).append(guard)
    return [(group, members, by_group.get(group, [])) for group, members in group_changes(changes).items()]


def _expected_states(changes: Sequence[Change]) -> tuple[dict[RecordKey, RecordSet | None],
                     dict[RecordKey, RecordSet | None]]:
    try:
        return group_states(changes)
    except ContradictoryGroup as exc:
        raise StaleGroup(str(exc)) from None


def build_update(zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> dns.update.UpdateMessage:
    """One unsigned UPDATE for one change group, as a compare-and-swap:

    prerequisites — per key: the exact old rrset (value dependent, every rdata) or, for a
    create, "rrset does not exist" (a CNAME create: "name not in use"; any other create:
    "no CNAME at the name", since a server silently ignores data added beside a CNAME);
    per guard: "rrset does not exist" (``present=False``) or "rrset exists" (``present=True``).
    updates — per key: delete the old rrset, add the new one (TTL included).
    """
    import dns.update

    before, after = _expected_states(changes)
    message = dns.update.UpdateMessage(absolute(zone))
    for key, old in before.items():
        name = absolute(key.name)
        if old is not None:
            for rdata in to_native(old):
                message.present(name, rdata)
        elif key.type == "CNAME":
            message.absent(name)
        else:
            message.absent(name, key.type)
            message.absent(name, "CNAME")
    for guard in guards:
        if guard.present:
            message.present(absolute(guard.key.name), guard.key.type)
        else:
            message.absent(absolute(guard.key.name), guard.key.type)
    for key, new in after.items():
        name = absolute(key.name)
        if before[key] is not None:
            message.delete(name, key.type)
        if new is not None:
            rrset = to_native(new)
            message.add(name, new.ttl, *rrset)
    return message
