"""Model objects from the documents that passed their schema (`gitdns.core.loader` parses
and checks them): one builder per kind, host names normalised, RecordSet names made
absolute against the zones the repository declares (`ZoneLookup`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gitdns.core.model import (
    DEFAULT_PROVIDER,
    KINDS,
    ActiveGroups,
    Cluster,
    CredentialsRef,
    CustomWeight,
    DesiredState,
    DNSPolicy,
    Gateway,
    HealthCheck,
    Listener,
    Mode,
    Nameserver,
    Node,
    NodePool,
    Origin,
    PolicyTTLs,
    ProviderRef,
    Publisher,
    RecordSetDoc,
    Safety,
    StaticRecord,
    Strategy,
    TargetRef,
    Tenant,
    Zone,
    ZoneTTLs,
)

Json = dict[str, Any]
_FIELDS = {
    "Zone": "zones",
    "Cluster": "clusters",
    "DNSPolicy": "policies",
    "RecordSet": "record_sets",
    "Tenant": "tenants",
    "NodePool": "node_pools",
    "ActiveGroups": "active_groups",
}
STATIC_TTL = 300
_MAX_FOUND = 1 << 20  # hosts whose zone a ZoneLookup remembers


class ZoneLookup:
    """The most specific zone (by metadata.name) containing a host: one dict probe per label."""

    __slots__ = ("_by_domain", "_found")

    def __init__(self, zones: Iterable[tuple[str, str]]) -> None:
        self._by_domain: dict[str, str] = {}
        for name, domain in zones:
            self._by_domain.setdefault(domain, name)
        self._found: dict[str, str | None] = {}  # host -> its zone, as found (many checks ask for the same hosts)

    def zone_of(self, host: str) -> str | None:
        found = self._found
        if host in found:
            return found[host]
        if len(found) >= _MAX_FOUND:
            found.clear()
        zone = found[host] = self._find(host)
        return zone

    def _find(self, host: str) -> str | None:
        name = host[2:] if host.startswith("*.") else host
        while True:
            hit = self._by_domain.get(name)
            if hit is not None:
                return hit
            dot = name.find(".")
            if dot < 0:
                return None
            name = name[dot + 1 :]

    def zones_of(self, hosts: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({z for z in map(self.zone_of, hosts) if z is not None}))


@dataclass(frozen=True, slots=True)
class Doc:
    """One YAML document: where it is, its kind and metadata.name, and its data."""

    file: str
    index: int
    line: int
    kind: str
    name: str | None
    body: Json


def host(name: str) -> str:
    """A host name normalised: lower-case, no surrounding blanks, no trailing dot."""
    return name.strip().lower().rstrip(".")


def build(good: Sequence[Doc], domains: Mapping[str, str], lookup: ZoneLookup) -> DesiredState:
    """The desired state of the documents ``good``; ``domains`` maps every Zone's
    metadata.name to its domain (rejected Zones too), ``lookup`` finds a host's zone."""
    return assemble([doc.kind for doc in good], [build_one(doc, domains, lookup) for doc in good])


def build_one(doc: Doc, domains: Mapping[str, str], lookup: ZoneLookup) -> object:
    """The model object of one document that passed its schema (a RecordSet's names read
    ``domains`` and ``lookup``; no other kind's object reads anything but its document)."""
    origin = Origin(doc.file, doc.index, doc.line)
    name = doc.name or ""
    spec = doc.body["spec"]
    if doc.kind == "RecordSet":
        return _record_set(name, spec, origin, domains, lookup)
    return _BUILDERS[doc.kind](name, spec, origin)


def assemble(kinds: Sequence[str], objects: Sequence[object]) -> DesiredState:
    """The desired state of model objects of the given kinds, each kind in the order given."""
    by_kind: dict[str, list[object]] = {kind: [] for kind in KINDS}
    for kind, obj in zip(kinds, objects, strict=True):
        by_kind[kind].append(obj)
    return DesiredState(**{_FIELDS[kind]: tuple(objs) for kind, objs in by_kind.items()})  # type: ignore[arg-type]


def _provider(spec: Json) -> ProviderRef:
    """``spec.provider``; without one, type `default`: the default provider secret of the
    agent's namespace (or ``spec.defaultProviderNamespace``), chosen at run time."""
    provider = spec.get("provider")
    namespace = spec.get("defaultProviderNamespace")
    if provider is None:
        return ProviderRef(DEFAULT_PROVIDER, default_namespace=namespace)
    creds = provider.get("credentials")
    return ProviderRef(
        type=provider["type"],
        settings=tuple(sorted((k, str(v)) for k, v in provider.get("settings", {}).items())),
        credentials=CredentialsRef(**creds) if creds is not None else None,
        default_namespace=namespace,  # meaningless here: validate says so
    )


def _zone(name: str, spec: Json, origin: Origin) -> Zone:
    ttl = spec.get("ttl", {})
    safety = spec.get("safety", {})
    return Zone(
        name=name,
        domain=host(spec["domain"]),
        provider=_provider(spec),
        ttl=ZoneTTLs(ttl.get("simple", 60), ttl.get("loadbalanced", 300), ttl.get("loadbalancedInner", 60)),
        registry=spec.get("registry", "txt"),
        publisher=Publisher(spec.get("publisher", "gitdns")),
        safety=Safety(
            float(safety.get("maxChangeFraction", 0.30)),
            safety.get("minManaged", 10),
            safety.get("acknowledge"),
        ),
        default_policy=spec.get("defaultPolicy"),
        origin=origin,
    )


def _cluster(name: str, spec: Json, origin: Origin) -> Cluster:
    gateways = tuple(_gateway(g) for g in spec.get("gateways", ()))
    return Cluster(
        name=name,
        id=spec["id"],
        geo=spec.get("geo"),
        attributes=tuple(sorted(spec.get("attributes", {}).items())),
        group=spec.get("group"),
        mode=Mode(spec.get("mode", "default")),
        gateways=gateways,
        origin=origin,
        nameserver=_nameserver(spec.get("nameserver")),
    )


def _gateway(g: Json) -> Gateway:
    """A gateway entry; without ``addresses`` it is discovered (its addresses, and its
    listeners when those are left out too, are read from the Gateway in the agent's own
    cluster): until then it has none, and publishes nothing."""
    discovered = "addresses" not in g
    return Gateway(
        name=g["name"],
        namespace=g["namespace"],
        addresses=tuple(host(a) for a in g.get("addresses", ())),
        listeners=tuple(Listener(host(ls["hostname"]), ls.get("name", "")) for ls in g.get("listeners", ())),
        discovered=discovered,
        discovered_listeners=discovered and "listeners" not in g,
    )


def _nameserver(raw: Json | None) -> Nameserver | None:
    """``spec.nameserver`` (CoreDNS primaries); addresses kept in written order."""
    if raw is None:
        return None
    return Nameserver(host(raw["name"]), tuple(str(a).strip().lower() for a in raw["addresses"]))


_HEALTH_FIELDS = {
    "protocol": "protocol",
    "port": "port",
    "path": "path",
    "interval": "interval",
    "timeout": "timeout",
    "failureThreshold": "failure_threshold",
    "successThreshold": "success_threshold",
    "headersSecret": "headers_secret",
    "insecure": "insecure",
    "publishUnchecked": "publish_unchecked",
}


def _health(raw: Json, base: HealthCheck) -> HealthCheck:
    values: dict[str, Any] = {_HEALTH_FIELDS[k]: v for k, v in raw.items() if k in _HEALTH_FIELDS}
    for key in ("interval", "timeout"):
        if key in values:
            values[key] = float(values[key])
    if "expectedCodes" in raw:
        values["expected_codes"] = tuple(raw["expectedCodes"])
    return replace(base, **values)


def _policy(name: str, spec: Json, origin: Origin) -> DNSPolicy:
    target = spec["targetRef"]
    lb = spec.get("loadBalancing", {})
    weighted = lb.get("weighted", {})
    ttl = spec.get("ttl", {})
    health = spec.get("healthCheck")
    return DNSPolicy(
        name=name,
        target=TargetRef(target.get("gateway"), target.get("namespace"), tuple(map(host, target.get("hosts", ())))),
        strategy=Strategy(spec.get("strategy", "simple")),
        flattened=spec.get("flattened", False),
        default_weight=weighted.get("defaultWeight", 120),
        custom_weights=tuple(CustomWeight(c["attribute"], c["value"], c["weight"]) for c in weighted.get("custom", ())),
        default_geo=lb.get("geo", {}).get("defaultGeo"),
        health=_health(health, HealthCheck()) if health is not None else None,
        ttl=PolicyTTLs(ttl.get("simple"), ttl.get("loadbalanced"), ttl.get("loadbalancedInner")),
        exclude_addresses=tuple(spec.get("excludeAddresses", ())),
        origin=origin,
    )


def record_name(raw: str, zone_domain: str | None, lookup: ZoneLookup) -> str:
    """``@`` is the zone apex; a name under a known zone (or ending in a dot) is absolute;
    anything else is relative to ``zone_domain`` (kept as written when there is none)."""
    name = raw.strip().lower()
    if name == "@":
        return zone_domain or name
    if name.endswith(".") or lookup.zone_of(name) is not None or zone_domain is None:
        return name.rstrip(".")
    return f"{name}.{zone_domain}"


def _record_set(name: str, spec: Json, origin: Origin, domains: Mapping[str, str], lookup: ZoneLookup) -> RecordSetDoc:
    zone = spec.get("zone")
    domain = domains.get(zone) if zone is not None else None
    records = tuple(
        StaticRecord(record_name(r["name"], domain, lookup), r["type"], r.get("ttl", STATIC_TTL), tuple(r["values"]))
        for r in spec["records"]
    )
    return RecordSetDoc(name=name, zone=zone, records=records, origin=origin)


_NODE_POOL_HEALTH = HealthCheck(protocol="HTTP", port=15021, path="/healthz/ready")  # NodePool's default


def _node_pool(name: str, spec: Json, origin: Origin) -> NodePool:
    health = _health(spec.get("healthCheck", {}), _NODE_POOL_HEALTH)
    scheme = health.protocol.lower()

    def endpoint(ip: str) -> str:
        address = f"[{ip}]" if ":" in ip else ip
        return f"{scheme}://{address}:{health.port}{health.path}"

    nodes = tuple(Node(n["name"], n["ip"], n.get("healthEndpoint") or endpoint(n["ip"])) for n in spec.get("nodes", ()))
    selector = spec.get("discovery", {}).get("labelSelector")
    allow = tuple(d.lower().rstrip(".") for d in spec.get("tenants", {}).get("allowInside", ()))  # checks.tenants
    return NodePool(name, nodes, health=health, discovery_selector=selector, origin=origin, allow_inside=allow)


def _tenant(name: str, spec: Json, origin: Origin) -> Tenant:
    zone = spec.get("zone")
    domains = tuple(map(host, spec["domains"]))
    return Tenant(name, domains, spec["nodePool"], host(zone) if zone else None, origin)


def _active_groups(name: str, spec: Json, origin: Origin) -> ActiveGroups:
    return ActiveGroups(name, spec["zone"], spec["serial"], tuple(spec["groups"]), origin)


_BUILDERS: dict[str, Callable[[str, Json, Origin], object]] = {
    "Zone": _zone,
    "Cluster": _cluster,
    "DNSPolicy": _policy,
    "Tenant": _tenant,
    "NodePool": _node_pool,
    "ActiveGroups": _active_groups,
}


# what was observed of a discovered gateway: (addresses, listeners), or None when the Gateway is
# gone (it publishes nothing, as a removed listener); a gateway absent from the mapping was never
# observed and keeps what git gives it (nothing, where git leaves it out)
Observed = Mapping[tuple[str, str], tuple[tuple[str, ...], tuple[Listener, ...]] | None]


def with_observed(state: DesiredState, cluster_id: str, observed: Observed) -> DesiredState:
    """``state`` with the discovered gateways of the cluster ``cluster_id`` given what was
    observed of them (keyed by (namespace, name)); written addresses and listeners are never
    replaced.  Observed host names are normalised as written ones are (`host`)."""
    folded = cluster_id.lower()
    cluster = next((c for c in state.clusters if c.id == cluster_id), None) or next(
        (c for c in state.clusters if c.id.lower() == folded), None)
    if cluster is None or not any(g.discovered for g in cluster.gateways):
        return state
    gateways = []
    for gateway in cluster.gateways:
        key = (gateway.namespace, gateway.name)
        if not gateway.discovered or key not in observed:
            gateways.append(gateway)
            continue
        seen = observed[key]
        addresses, listeners = seen if seen is not None else ((), ())
        listeners = tuple(replace(ls, hostname=host(ls.hostname)) for ls in listeners)
        gateways.append(replace(gateway, addresses=tuple(host(a) for a in addresses),
                                listeners=listeners if gateway.discovered_listeners else gateway.listeners))
    changed = replace(cluster, gateways=tuple(gateways))
    if changed == cluster:
        return state
    return replace(state, clusters=tuple(changed if c is cluster else c for c in state.clusters))
