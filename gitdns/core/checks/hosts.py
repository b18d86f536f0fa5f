"""Hosts and zones: every host and static record lies in a zone (NS records delegating a child
Zone lie in its parent), fits the ownership TXT registry, and static CNAMEs stand alone."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from gitdns.core.checks.dnsnames import enclosing_zone
from gitdns.core.checks.index import Index, on, problem, some
from gitdns.core.model import RecordSetDoc, StaticRecord, Zone
from gitdns.core.names import MAX_FIRST_LABEL_ON_TXT_ZONES, first_label
from gitdns.core.problems import Problem


def hosts_in_zones(ix: Index) -> Iterable[Problem]:
    if "Zone" in ix.rejected_kinds:
        return  # a rejected Zone document is reported; its hosts would only add noise
    yield from ix.derived("hosts.policy_hosts_in_zones", _policy_hosts_in_zones)  # kept while no policy host changes
    lookup, zones = ix.lookup, ix.zones
    for doc in ix.state.record_sets:
        zone = zones.get(doc.zone) if doc.zone else None
        for i, record in enumerate(doc.records):
            found = lookup.zone_of(record.name)
            if found is None or (zone is not None and found != zone.name and not _cut(ix, zone, found, record)):
                inside = f"zone {zone.domain!r}" if zone else "every zone"
                hint = "write an absolute name in the zone, '@' for the apex, or set spec.zone"
                message = f"record name {record.name!r} lies outside {inside}"
                yield on(ix, doc, ("spec", "records", i, "name"), message, hint, "HostOutsideZones")


def _policy_hosts_in_zones(ix: Index) -> list[Problem]:
    known = f"zones: {some(z.domain for z in ix.state.zones)}"
    lookup = ix.lookup
    seen: set[str] = set()
    out: list[Problem] = []
    for covered in ix.policy_hosts:
        for host, site in covered:
            if host not in seen and lookup.zone_of(host) is None:
                seen.add(host)
                message = f"host {host!r} is covered by a policy but lies outside every zone"
                hint = f"add a Zone for it, or fix the name; {known}"
                out.append(problem(site.origin, site.path, message, hint, (), "HostOutsideZones"))
    return out


def _cut(ix: Index, parent: Zone, child_name: str, record: StaticRecord) -> bool:
    """``record`` is a delegation: NS records named after a child Zone, in its closest parent."""
    child = ix.zones.get(child_name)
    if record.type != "NS" or child is None or record.name != child.domain:
        return False
    above = enclosing_zone(ix, child)
    return above is not None and above.name == parent.name


def txt_registry_names(ix: Index) -> Iterable[Problem]:
    limit = MAX_FIRST_LABEL_ON_TXT_ZONES
    seen: set[str] = set()
    lookup, zones = ix.lookup, ix.zones
    for covered in ix.policy_hosts:
        for host, site in covered:
            zone_name = lookup.zone_of(host)
            zone = zones.get(zone_name) if zone_name else None
            if zone is None or zone.registry != "txt" or host in seen:
                continue
            seen.add(host)
            label = "wildcard" if host.startswith("*.") else first_label(host)
            if host == zone.domain:
                message = f"host {host!r} is the apex of zone {zone.name!r}, whose registry is txt"
                hint = "ownership TXT records cannot sit beside an apex host; use a name below the apex"
            elif len(label.encode()) > limit:
                message = f"the first label of host {host!r} is {len(label.encode())} octets long"
                hint = f"on zones with registry txt it may be at most {limit} octets (the TXT prefix adds 24)"
            else:
                continue
            yield problem(site.origin, site.path, message, hint, (zone.name,), "NameTooLongForRegistry")



def static_records(ix: Index) -> Iterable[Problem]:
    by_name: dict[str, list[tuple[RecordSetDoc, int]]] = defaultdict(list)
    for doc in ix.state.record_sets:
        for i, record in enumerate(doc.records):
            by_name[record.name].append((doc, i))
    for name, entries in by_name.items():
        types = [doc.records[i].type for doc, i in entries]
        if "CNAME" not in types:
            continue
        for doc, i in entries:
            record, path = doc.records[i], ("spec", "records", i)
            if record.type == "CNAME" and len(types) > 1:
                others = (
                    some(t for t in types if t != "CNAME") if set(types) != {"CNAME"} else "another CNAME"
                )
                message = f"CNAME {name!r} shares its name with {others}; a CNAME must stand alone"
                yield on(
                    ix, doc, (*path, "type"), message, "rename it, or drop the other records", "CNAMEConflict"
                )
            elif record.type == "CNAME" and len(record.values) > 1:
                message = f"CNAME {name!r} has {len(record.values)} values; a CNAME holds exactly one"
                yield on(ix, doc, (*path, "values"), message, "keep one target", "CNAMEConflict")

