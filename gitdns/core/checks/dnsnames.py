"""The DNS gate: names are checked as DNS names (docs/spec.md, "DNS names are checked as DNS").

Its other parts: CNAME loops (`gitdns.core.checks.cnames`), cluster ids unique ignoring case
(`gitdns.core.checks.references.duplicate_cluster_ids`), numbers finite in every field (the
loader's parse, `gitdns.core.yamlparse`).  Here:

* **Reserved domains** (`reserved_error`, one function for Zones and tenant zones): a zone has at
  least two labels and is not a public suffix (``co.uk``, ``github.io``: the Public Suffix List
  bundled in the ``publicsuffixlist`` package, never fetched), not ``cluster.local`` or below it
  (Kubernetes' cluster domain), not below ``arpa`` (reverse zones).
* **Zones inside zones** (`zone_domains`): a Zone inside another Zone of the repository needs
  that parent (its closest enclosing Zone) to delegate to it: NS records at the child's domain
  in a RecordSet of the parent (``spec.zone``), or the child served by CoreDNS primaries, whose
  delegation the primaries publish in the parent (`gitdns.core.delegation.delegation_records`).
  Without it the child would take names of the parent's (records there are planned for the
  child) that resolvers never ask it for.
* **Names a policy publishes** (`policy_names`): a RecordSet holds no name a DNSPolicy publishes
  (`PublishedNames`: the host, every name at or below ``klb.H``, every name below a wildcard
  host ``*.H``), and no NS, SOA or CNAME at its zone's apex (`apex_records`).

Every name of the model is lower-case already (`gitdns.core.model.build.host`), so comparing
names here is comparing them case-insensitively.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache

from publicsuffixlist import PSLFILE, PublicSuffixList

from gitdns.core.addresses import host_error
from gitdns.core.checks.index import Index, on, problem, where
from gitdns.core.delegation import parent_zone, served_zones
from gitdns.core.model import DNSPolicy, RecordSetDoc, Zone
from gitdns.core.names import KLB, lb_host
from gitdns.core.problems import Path, Problem, shown

CLUSTER_DOMAIN = "cluster.local"
REVERSE_ZONES = "arpa"
APEX_TYPES = ("NS", "SOA", "CNAME")  # what a RecordSet may not set at its zone's apex


@cache
def public_suffixes() -> PublicSuffixList:
    """The Public Suffix List bundled in the package: read on the first call, never fetched
    (a long-running caller may call this up front so its first check does not wait)."""
    return PublicSuffixList()


@cache
def _rule_tokens() -> str:
    """The first token of every line of the bundled list, lower-cased (its rules, and more): a
    few milliseconds, where `public_suffixes` takes tens (it IDN-encodes every rule)."""
    with open(PSLFILE, "rb") as source:
        text = source.read().decode("utf-8", "replace").lower()
    return "\n" + "\n".join(sorted({line.split(" ")[0].rstrip() for line in text.split("\n")})) + "\n"


def _is_public(name: str) -> bool:
    """`PublicSuffixList.is_public` of ``name`` (lower case, no trailing dot).  A name of two
    labels or more is public only by a rule ``name``, ``*.name`` or ``*.<parent>``: an ASCII name
    with no IDN label that no line of the list starts with is not, without building the list."""
    labels = name.split(".")
    if len(labels) >= 2 and all(labels) and name.isascii() and "xn--" not in name:
        tokens = _rule_tokens()
        if all(f"\n{t}\n" not in tokens for t in (name, f"*.{name}", f"*.{name.partition('.')[2]}")):
            return False
    return public_suffixes().is_public(name)


def inside(name: str, domain: str) -> bool:
    """``name`` is ``domain`` or below it."""
    return name == domain or name.endswith("." + domain)


def reserved_error(zone: str) -> str | None:
    """Why ``zone`` can never be a zone gitdns or a node pool serves (whatever the repository
    allows), or None: one label, Kubernetes' cluster domain or below, below ``arpa``, a public
    suffix.  Compared in lower case."""
    name = zone.lower().rstrip(".")
    if "." not in name:
        return f"zone {shown(zone)} has one label: a zone has at least two (example.com, tenant-a.io)"
    if inside(name, CLUSTER_DOMAIN):
        return f"zone {shown(zone)} is Kubernetes' cluster domain {CLUSTER_DOMAIN} or below it"
    if inside(name, REVERSE_ZONES):
        return f"zone {shown(zone)} is a reverse zone (below {REVERSE_ZONES})"
    if _is_public(name):
        return (f"zone {shown(zone)} is a public suffix (Public Suffix List): names below it belong to "
                "whoever registers them")
    return None


# --- Zones ----------------------------------------------------------------------------------


def _delegations(ix: Index) -> set[tuple[str, str]]:
    """(parent zone name, child domain) for every delegation the repository publishes: NS
    records at a child's domain in a RecordSet of the parent, and the cut primaries publish in
    the closest parent of every zone they serve."""
    out: set[tuple[str, str]] = set()
    for doc in ix.state.record_sets:
        if doc.zone is not None:
            out.update((doc.zone, r.name) for r in doc.records if r.type == "NS")
    for child in served_zones(ix.state):
        parent = parent_zone(ix.state, child)
        if parent is not None:
            out.add((parent.name, child.domain))
    return out


def enclosing_zone(ix: Index, zone: Zone) -> Zone | None:
    """The closest Zone of the repository strictly above ``zone``'s domain."""
    _, dot, rest = zone.domain.partition(".")
    name = ix.lookup.zone_of(rest) if dot else None
    return ix.zones.get(name) if name is not None else None


def zone_domains(ix: Index) -> Iterable[Problem]:
    """A Zone's domain is not reserved (`reserved_error`), and a Zone inside another is delegated
    there by its closest parent Zone."""
    delegated: set[tuple[str, str]] | None = None
    for zone in ix.state.zones:
        if host_error(zone.domain) is not None or zone.domain.startswith("*."):
            continue  # addressing.host_names reports it
        wrong = reserved_error(zone.domain)
        if wrong is not None:
            code = "TopLevelDomain" if "." not in zone.domain else "ReservedZone"
            hint = "a domain registered to you, below a public suffix: example.com, not com or co.uk"
            yield on(ix, zone, ("spec", "domain"), wrong, hint, code)
            continue
        parent = enclosing_zone(ix, zone)
        if parent is None or parent.domain == zone.domain or reserved_error(parent.domain) is not None:
            continue  # no parent, a duplicate (DuplicateZone), or a parent refused itself (it holds no child)
        if delegated is None:
            delegated = _delegations(ix)
        if (parent.name, zone.domain) in delegated:
            continue
        message = (f"domain {shown(zone.domain)} is inside Zone {parent.name!r} ({where(parent.origin)}), which "
                   "does not delegate it: its names would be planned here, and resolvers would never ask")
        hint = (f"delegate it from the parent: a RecordSet with spec.zone: {parent.name} and NS records named "
                f"{zone.domain} (or serve it from CoreDNS primaries); or drop this Zone")
        yield problem(zone.origin, ("spec", "domain"), message, hint, (zone.name, parent.name), "ZoneInsideZone")


# --- names a policy publishes ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """A name a DNSPolicy publishes: the listener host it derives from, and the policy."""

    host: str
    policy: DNSPolicy


class PublishedNames:
    """Every name the DNSPolicies of a repository publish (or would, once a gateway serving the
    host is known): each host a policy covers (targetRef.hosts, the listeners of its gateways,
    and the listeners a zone's defaultPolicy covers), every name at or below ``klb.H`` (the
    loadbalanced layout: ``klb.H``, ``<geo>.klb.H``, ``<hash>-<hash>.klb.H``; reserved for
    simple hosts too, whose strategy may switch), and every name below a wildcard host ``*.H``.
    `claim` looks a name up with one dict probe per label."""

    __slots__ = ("_hosts", "_lb")

    def __init__(self, ix: Index) -> None:
        self._hosts: dict[str, Claim] = {}
        for policy, covered in zip(ix.state.policies, ix.policy_hosts, strict=True):
            for host, _ in covered:
                if host not in self._hosts:
                    self._hosts[host] = Claim(host, policy)
        policies = {p.name: p for p in ix.state.policies}
        defaults = {z.name: policies[z.default_policy] for z in ix.state.zones
                    if z.default_policy and z.default_policy in policies}
        if defaults:  # listeners no policy covers, in zones with a defaultPolicy
            for host in ix.host_clusters:
                zone_name = ix.lookup.zone_of(host) if host not in self._hosts else None
                if zone_name in defaults:
                    self._hosts[host] = Claim(host, defaults[zone_name])
        self._lb: dict[str, Claim] | None = None

    def _klb(self, base: str) -> Claim | None:
        if self._lb is None:
            self._lb = {}
            for host, claim in self._hosts.items():
                self._lb.setdefault(lb_host(host), claim)
        return self._lb.get(base)

    def claim(self, name: str) -> Claim | None:
        """The policy host whose records take ``name``, or None."""
        found = self._hosts.get(name)
        if found is not None:
            return found
        suffix = name
        while True:
            if suffix != name:
                found = self._hosts.get("*." + suffix)
                if found is not None:
                    return found
            if suffix.startswith(KLB + "."):
                found = self._klb(suffix[len(KLB) + 1:])
                if found is not None:
                    return found
            dot = suffix.find(".")
            if dot < 0:
                return None
            suffix = suffix[dot + 1:]


def _records(ix: Index) -> Iterator[tuple[RecordSetDoc, int, Path]]:
    for doc in ix.state.record_sets:
        for i in range(len(doc.records)):
            yield doc, i, ("spec", "records", i, "name")


def policy_names(ix: Index) -> Iterable[Problem]:
    """No RecordSet holds a name a DNSPolicy publishes, whatever its type."""
    if not ix.state.policies or not ix.state.record_sets:
        return
    published = ix.derived("dnsnames.published", PublishedNames)  # kept while policies and hosts are unchanged
    for doc, i, path in _records(ix):
        record = doc.records[i]
        found = published.claim(record.name)
        if found is None:
            continue
        host, policy = found.host, found.policy
        how = "" if host == record.name else f" (derived from host {host!r}: {_derived(host)})"
        message = (f"{record.type} {record.name!r} is a name DNSPolicy {policy.name!r} ({where(policy.origin)}) "
                   f"publishes{how}; a RecordSet cannot take it")
        hint = "a name no policy publishes; change the policy or the listener to move the host"
        zones = (*ix.zones_of(doc), *ix.lookup.zones_of((host,)))
        yield problem(doc.origin, path, message, hint, zones, "NameOwnedByPolicy")


def _derived(host: str) -> str:
    base = lb_host(host)
    below = f"every name below {base}, " if host.startswith("*.") else ""
    return f"{below}{KLB}.{base} and every name below it"


def apex_records(ix: Index) -> Iterable[Problem]:
    """No NS, SOA or CNAME at a RecordSet's zone apex: the provider (or the primaries) keeps the
    apex NS and SOA, and a CNAME there would hide them."""
    by_domain = {z.domain: z for z in reversed(ix.state.zones)}
    for doc, i, path in _records(ix):
        record = doc.records[i]
        zone = by_domain.get(record.name)
        if zone is None or record.type not in APEX_TYPES or (doc.zone is not None and doc.zone != zone.name):
            continue  # not an apex; or a delegation in the parent (ZoneInsideZone) or outside (HostOutsideZones)
        if record.type == "CNAME":
            message = f"CNAME at the apex of zone {zone.name!r}: it would hide the zone's SOA and NS records"
            hint = "A/AAAA records at the apex, or a CNAME on a name below it (www)"
        else:
            message = (f"{record.type} at the apex of zone {zone.name!r}: the zone's provider keeps its apex "
                       f"{record.type} (CoreDNS primaries publish the apex NS)")
            hint = "remove it; to delegate a zone, put NS records named after it in its parent zone"
            parent = enclosing_zone(ix, zone)
            if record.type == "NS" and parent is not None:
                hint = (f"a delegation belongs in the parent zone: set spec.zone: {parent.name} "
                        f"on a RecordSet holding these NS records")
        yield on(ix, doc, (*path[:-1], "type"), message, hint, "ApexRecordRefused")
