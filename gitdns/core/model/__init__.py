"""The desired-state model: one frozen dataclass per kind (fields: docs/spec.md).

Values only.  `gitdns.core.loader` turns YAML documents into these; `gitdns.core.validate`
checks them across files.  Every object remembers the document it came from (`Origin`)
so that errors can name the file, line and YAML path.

The package's other module: `build` — Model objects from the documents that passed their schema
(`gitdns.core.loader` parses and checks them): one builder per kind, host names normalised, ….
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

API_VERSION = "gitdns.io/v1alpha1"
KINDS = ("Zone", "Cluster", "DNSPolicy", "RecordSet", "Tenant", "NodePool", "ActiveGroups")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a document came from: a path relative to the repo root and its index in
    a multi-document file."""

    file: str
    index: int = 0
    line: int = 0  # the document's first line (1-based); 0 when unknown


class Strategy(StrEnum):
    SIMPLE = "simple"
    LOADBALANCED = "loadbalanced"


class Mode(StrEnum):
    DEFAULT = "default"
    PRIMARY = "primary"
    REMOTE = "remote"


class Publisher(StrEnum):
    GITDNS = "gitdns"
    KUADRANT = "kuadrant"


@dataclass(frozen=True, slots=True)
class CredentialsRef:
    """Where a provider's secret lives.  Never the secret itself."""

    env: str | None = None  # an environment variable prefix or name
    file: str | None = None  # a file path on the agent's machine
    secret: str | None = None  # a Kubernetes Secret name
    namespace: str | None = None  # the Secret's namespace


# The provider type of a Zone without ``spec.provider``: its provider is chosen at run time
# from the one Secret labelled ``kuadrant.io/default-provider=true`` in its namespace.
DEFAULT_PROVIDER = "default"


@dataclass(frozen=True, slots=True)
class ProviderRef:
    type: str  # a name in gitdns.core.providertypes.PROVIDER_TYPES, or `default`
    settings: tuple[tuple[str, str], ...] = ()  # non-secret settings, sorted
    credentials: CredentialsRef | None = None
    # the namespace searched for the default provider secret (type `default` only; None: the
    # agent's own namespace)
    default_namespace: str | None = None

    @property
    def is_default(self) -> bool:
        """Whether the zone names no provider and relies on the default provider secret."""
        return self.type == DEFAULT_PROVIDER

    def setting(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.settings:
            if key == name:
                return value
        return default


@dataclass(frozen=True, slots=True)
class ZoneTTLs:
    simple: int = 60
    loadbalanced: int = 300  # H and klb.H
    loadbalanced_inner: int = 60  # geo.klb.H and cluster A names


@dataclass(frozen=True, slots=True)
class Safety:
    max_change_fraction: float = 0.30
    min_managed: int = 10
    acknowledge: str | None = None  # a commit sha whose mass change is acknowledged


@dataclass(frozen=True, slots=True)
class Zone:
    name: str  # metadata.name
    domain: str  # normalised, no trailing dot
    provider: ProviderRef
    ttl: ZoneTTLs = ZoneTTLs()
    registry: str = "txt"  # txt | none
    publisher: Publisher = Publisher.GITDNS
    safety: Safety = Safety()
    default_policy: str | None = None  # DNSPolicy name applied to gateways with none
    origin: Origin = Origin("")


@dataclass(frozen=True, slots=True)
class Listener:
    hostname: str  # normalised; may start with "*."
    name: str = ""


@dataclass(frozen=True, slots=True)
class Gateway:
    name: str
    namespace: str
    addresses: tuple[str, ...]  # IPv4, IPv6 or hostnames
    listeners: tuple[Listener, ...]
    # addresses left out in git: the agent reads them from the Gateway in its own cluster
    # (status.addresses; gitdns.agent.discovery), and the listeners too when those are left out
    discovered: bool = False
    discovered_listeners: bool = False


@dataclass(frozen=True, slots=True)
class Nameserver:
    """The DNS server (CoreDNS) a primary runs for the zones it serves (docs/coredns-primaries.md)."""

    name: str  # normalised, no trailing dot
    addresses: tuple[str, ...]  # IPv4/IPv6 addresses (glue)


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    id: str  # the kube-system namespace UID (the owner id)
    geo: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    group: str | None = None
    mode: Mode = Mode.DEFAULT
    gateways: tuple[Gateway, ...] = ()
    origin: Origin = Origin("")
    nameserver: Nameserver | None = None  # only meaningful with mode primary

    def attribute(self, name: str) -> str | None:
        for key, value in self.attributes:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class CustomWeight:
    attribute: str
    value: str
    weight: int


@dataclass(frozen=True, slots=True)
class HealthCheck:
    protocol: str = "HTTPS"  # HTTP | HTTPS | TCP
    port: int = 443
    path: str = "/"
    interval: float = 5.0
    timeout: float = 2.0
    failure_threshold: int = 2
    success_threshold: int = 1
    headers_secret: str | None = None
    insecure: bool = False
    expected_codes: tuple[int, ...] = (200,)
    publish_unchecked: bool = True  # publish a target before its first verdict (see docs/health.md)


@dataclass(frozen=True, slots=True)
class TargetRef:
    gateway: str | None = None
    namespace: str | None = None  # None: the gateway name in any namespace
    hosts: tuple[str, ...] = ()  # explicit listener hosts (any gateway serving them)


@dataclass(frozen=True, slots=True)
class PolicyTTLs:
    simple: int | None = None
    loadbalanced: int | None = None
    loadbalanced_inner: int | None = None


@dataclass(frozen=True, slots=True)
class DNSPolicy:
    name: str
    target: TargetRef
    strategy: Strategy = Strategy.SIMPLE
    flattened: bool = False  # loadbalanced on zones without routing: one multi-value A/AAAA
    default_weight: int = 120
    custom_weights: tuple[CustomWeight, ...] = ()
    default_geo: str | None = None
    health: HealthCheck | None = None
    ttl: PolicyTTLs = PolicyTTLs()
    exclude_addresses: tuple[str, ...] = ()
    origin: Origin = Origin("")


@dataclass(frozen=True, slots=True)
class StaticRecord:
    name: str  # absolute, normalised
    type: str
    ttl: int
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RecordSetDoc:
    name: str
    zone: str | None  # Zone metadata.name, or None to pick by suffix
    records: tuple[StaticRecord, ...]
    origin: Origin = Origin("")


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    ip: str
    health_endpoint: str


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    nodes: tuple[Node, ...]
    health: HealthCheck = HealthCheck(protocol="HTTP", port=15021, path="/healthz/ready")
    discovery_selector: str | None = None  # Kubernetes node label selector
    origin: Origin = Origin("")
    allow_inside: tuple[str, ...] = ()  # spec.tenants.allowInside: domains its tenants may sit inside


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    domains: tuple[str, ...]
    node_pool: str
    zone: str | None = None  # the DNS zone the tenant's CoreDNS server block answers for
    origin: Origin = Origin("")


@dataclass(frozen=True, slots=True)
class ActiveGroups:
    name: str
    zone: str  # Zone metadata.name
    serial: int
    groups: tuple[str, ...]
    origin: Origin = Origin("")


@dataclass(frozen=True, slots=True)
class DesiredState:
    """Everything one revision of the repository asks for."""

    zones: tuple[Zone, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    policies: tuple[DNSPolicy, ...] = ()
    record_sets: tuple[RecordSetDoc, ...] = ()
    tenants: tuple[Tenant, ...] = ()
    node_pools: tuple[NodePool, ...] = ()
    active_groups: tuple[ActiveGroups, ...] = ()
    revision: Revision | None = None

    def zone(self, name: str) -> Zone | None:
        return next((z for z in self.zones if z.name == name), None)

    def cluster(self, ident: str) -> Cluster | None:
        """By cluster id or by metadata.name, ignoring letter case (as validation compares ids:
        two ids equal but for case are refused); an exact match first."""
        found = next((c for c in self.clusters if ident in (c.id, c.name)), None)
        if found is None:
            folded = ident.lower()
            found = next((c for c in self.clusters if folded in (c.id.lower(), c.name)), None)
        return found

    def zone_for_host(self, host: str) -> Zone | None:
        """The most specific zone whose domain contains ``host``."""
        bare = host[2:] if host.startswith("*.") else host
        best: Zone | None = None
        for zone in self.zones:
            inside = bare == zone.domain or bare.endswith("." + zone.domain)
            if inside and (best is None or len(zone.domain) > len(best.domain)):
                best = zone
        return best

    def groups_for_zone(self, zone_name: str) -> ActiveGroups | None:
        return next((g for g in self.active_groups if g.zone == zone_name), None)


@dataclass(frozen=True, slots=True, order=True)
class Revision:
    """A desired revision: commit time (seconds since the epoch) and commit sha."""

    time: int
    sha: str = field(compare=False)

    @property
    def label(self) -> str:
        return f"{self.time}.{self.sha[:7]}"

    @staticmethod
    def parse(label: str) -> Revision | None:
        head, _, sha = label.partition(".")
        if not head.isdigit() or not sha:
            return None
        return Revision(int(head), sha)
