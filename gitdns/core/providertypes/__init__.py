"""Every provider type gitdns runs, declared once (pure data).

`PROVIDER_TYPES` holds one `ProviderType` per value ``spec.provider.type`` may take: its name,
the module that implements it (an import path, imported only when a zone uses the type), what
it talks to, its `Capabilities` (record types, routing, compare-and-swap, guards, batch limits,
geo codes, weight range, request budgets, read page size), the credential references it takes,
the Kubernetes Secret type Kuadrant gives it, and the pip extra that brings its SDK.

Who reads it:

- validation (`gitdns.core.checks.providers`): which types exist, which record types,
  routing, geo codes and weights each accepts, which credentials and required settings;
- the factory (`gitdns.providers.factory`): imports ``module`` and calls its
  ``from_ref(zone_domain, ref, base_dir)``; a missing SDK names ``extra``;
- credentials (`gitdns.providers.credentials`): which Secret types name which provider;
- each provider module: its ``capabilities`` is its entry's (`capabilities_of`);
- ``docs/providers.md``: its provider table is checked against this one by a test.

To add a provider: write ``gitdns/providers/<name>.py`` (the protocol of
`gitdns.providers.base` plus ``from_ref``) and add its entry below.

CoreDNS is not a provider type: CoreDNS serves what primaries render from the `local` store
(RFC 1035 views and a Corefile snippet), so a zone served by CoreDNS names ``type: local``.
A ``kuadrant.io/coredns`` Secret therefore names no provider (`UNSERVED_SECRET_TYPES`).

The package's other module: `settings` — What a Zone's ``spec.provider`` may say, whatever the
operator allows (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from gitdns.core.geo import ANY_CODE, AZURE_STYLE, GOOGLE_STYLE, ROUTE53_STYLE, GeoCodes
from gitdns.core.records import RECORD_TYPES

# The `local` store's CoreDNS settings (read by `gitdns.core.zonecorefile`, which needs jinja2;
# named here so that the settings checks, which `gitdns --help` reaches, stay light).
VIEW_CLIENTS = "viewClients"
COREDNS_DIR = "corednsDir"


class Routing(StrEnum):
    NONE = "none"  # plain DNS: no set identifiers
    WEIGHTED = "weighted"  # weighted rows only
    GEO = "geo"  # weighted and geo rows


class CasGranularity(StrEnum):
    NONE = "none"  # the service cannot refuse a stale write (window documented)
    RECORD = "record"  # per record set (exact match, ETag, prerequisite)
    ZONE = "zone"  # whole-zone version


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider can do; the planner, the batcher and the agent's budget read it."""

    record_types: frozenset[str]
    routing: Routing
    cas: CasGranularity
    guards: bool = False  # can it make a group conditional on other names (absent/present)?
    max_changes_per_batch: int = 0  # 0: unlimited
    max_values_per_batch: int = 0
    max_chars_per_batch: int = 0
    geo: GeoCodes = ANY_CODE  # the geo codes it accepts
    weights: tuple[int, int] = (0, 255)  # the inclusive range of weights it accepts
    # request budgets of the service, per account; 0: unlimited.  The agent owns the budget
    # (a token bucket per account); providers only report throttling.
    reads_per_minute: float = 0.0
    writes_per_minute: float = 0.0
    one_budget: bool = False  # reads and writes spend one budget (reads_per_minute) of the account
    quota_window: float = 1.0  # seconds over which the service counts its quota (Route53: per second;
    # Google's and Azure's: per minute): what an agent may send at once is bounded by it
    # reads by name with their own quota (Azure: a GET per record set, 1,000 a minute per zone,
    # beside 60 listings); 0: they spend the read budget
    name_reads_per_minute: float = 0.0
    # read cost: records per page of a whole-zone read (0: the whole zone in one call, as a
    # local file or an AXFR); per-name reads cost one call per name
    page_size: int = 0

    @property
    def name_read_cost(self) -> float:
        """What reading one name costs, in whole-zone pages: 1 (one call per name), or where
        names are read from their own quota, the record sets probed at a name (`NAME_PROBES`)
        priced at that quota's rate against the listings'."""
        if self.name_reads_per_minute > 0 and self.reads_per_minute > 0:
            return NAME_PROBES * self.reads_per_minute / self.name_reads_per_minute
        return 1.0

    @property
    def weight_zero_allowed(self) -> bool:
        """Whether a weighted row may carry weight 0 (health withdraws a row that way)."""
        return self.weights[0] == 0


NAME_PROBES = 4  # record sets read at a data name where a read is per name and type (A, AAAA, CNAME, its own)

CREDENTIAL_REFERENCES = ("env", "file", "secret")  # the kinds of spec.provider.credentials
GITDNS_SECRET_PREFIX = "gitdns.io/"  # gitdns's own Secret types: gitdns.io/<provider type>


@dataclass(frozen=True, slots=True)
class ProviderType:
    name: str
    module: str  # import path of the module exposing from_ref(zone_domain, ref, base_dir)
    service: str  # what it reads and writes, in a few words
    capabilities: Capabilities
    credentials: tuple[str, ...] = CREDENTIAL_REFERENCES  # references it takes; () takes none
    kuadrant_secret: str | None = None  # the Secret type Kuadrant gives this provider
    required_settings: tuple[str, ...] = ()  # spec.provider.settings it cannot run without ...
    settings_from_credentials: bool = False  # ... unless its credentials (when named) may hold them
    settings: tuple[str, ...] = ()  # every key of spec.provider.settings it reads (others are refused)
    extra: str | None = None  # the pip extra that brings its SDK (None: in the base install)
    sdk: tuple[str, ...] = ()  # the modules of that extra it imports (checked before a zone uses it)
    page: str | None = None  # its page under docs/

    @property
    def secret_types(self) -> tuple[str, ...]:
        """The Secret types that name this provider: Kuadrant's, then ``gitdns.io/<name>``."""
        own = GITDNS_SECRET_PREFIX + self.name
        return (self.kuadrant_secret, own) if self.kuadrant_secret else (own,)


# the record stores (`local`, `memory`) keep every row with its set identifier, weight and geo code
_STORE = Capabilities(RECORD_TYPES, Routing.GEO, CasGranularity.RECORD, guards=True, geo=ROUTE53_STYLE)

PROVIDER_TYPES: Mapping[str, ProviderType] = {
    entry.name: entry
    for entry in (
        ProviderType(
            "local", "gitdns.providers.local",
            "embedded record store (the default); rendered to geo views that BIND and CoreDNS serve",
            _STORE,
            credentials=(), settings=("path", "viewClients", "corednsDir"),
        ),
        ProviderType(
            "memory", "gitdns.providers.memory", "in-process record store (tests; lost when the process ends)",
            _STORE,
            credentials=(),
        ),
        ProviderType(
            "rfc2136", "gitdns.providers.rfc2136.provider",
            "BIND, PowerDNS or any RFC 2136 server (dynamic update, AXFR)",
            Capabilities(RECORD_TYPES, Routing.NONE, CasGranularity.RECORD, guards=True, geo=ROUTE53_STYLE),
            required_settings=("server",), page="providers/rfc2136.md",
            settings=("server", "port", "tsigKeyName", "tsigAlgorithm", "timeout", "zone"),
        ),
        ProviderType(
            "route53", "gitdns.providers.route53.provider", "AWS Route53",
            Capabilities(RECORD_TYPES, Routing.GEO, CasGranularity.RECORD, max_values_per_batch=1000,
                         max_chars_per_batch=32000, geo=ROUTE53_STYLE, weights=(0, 255),
                         reads_per_minute=300.0, writes_per_minute=300.0,  # 5 requests/s per account, shared
                         one_budget=True,  # by reads and writes together
                         page_size=300),  # ListResourceRecordSets pages: per-name reads win for small changes
            kuadrant_secret="kuadrant.io/aws", extra="route53", sdk=("botocore",),
            page="providers/route53.md",
            settings=("hostedZoneId", "private", "region", "endpoint", "waitInsync", "healthChecks"),
        ),
        ProviderType(
            "google", "gitdns.providers.google.provider", "Google Cloud DNS",
            Capabilities(RECORD_TYPES, Routing.GEO, CasGranularity.RECORD,  # the unit is one rrset
                         geo=GOOGLE_STYLE, weights=(0, 1000), reads_per_minute=240.0, writes_per_minute=60.0,
                         quota_window=60.0,  # quotas per minute per project
                         # rrsets.list pages (the server chooses their size; 100 assumed for the
                         # estimate, the budget charges the pages sent): per-name reads win for a
                         # small change of a large zone
                         page_size=100),
            kuadrant_secret="kuadrant.io/gcp", required_settings=("project",),  # or PROJECT_ID, the key's project_id
            settings_from_credentials=True, extra="google", page="providers/google.md",
            sdk=("google.cloud.dns", "google.auth", "google.api_core"),
            settings=("project", "managedZone", "endpoint", "defaultGeoLocation", "timeout"),
        ),
        ProviderType(
            # Azure DNS answers geo/weighted only through Traffic Manager profiles, which gitdns
            # does not drive: its record sets hold no set identifiers, so it routes nothing.
            "azure", "gitdns.providers.azure.provider", "Azure DNS",
            Capabilities(RECORD_TYPES, Routing.NONE, CasGranularity.RECORD, geo=AZURE_STYLE, weights=(1, 1000),
                         reads_per_minute=60.0,  # list operations, in pages of 100 record sets
                         name_reads_per_minute=1000.0,  # gets: a read by name GETs each record set
                         writes_per_minute=40.0, page_size=100,
                         quota_window=60.0),  # limits per minute per zone
            kuadrant_secret="kuadrant.io/azure", required_settings=("subscriptionId", "resourceGroup"),
            settings_from_credentials=True, extra="azure", page="providers/azure.md",  # or in azure.json
            sdk=("azure.mgmt.dns", "azure.identity", "azure.core"),
            settings=("subscriptionId", "resourceGroup", "endpoint", "trafficManager"),
        ),
        ProviderType(
            "endpoint", "gitdns.providers.endpoint",
            "a Kubernetes resource's spec.endpoints (a Kuadrant DNSRecord) as the zone",
            # set identifiers with provider-specific weight / geo-code, kept as written: the
            # service that publishes the resource checks the codes and weights
            Capabilities(RECORD_TYPES, Routing.GEO, CasGranularity.RECORD,  # made atomic by resourceVersion
                         guards=True, geo=ANY_CODE, weights=(0, 1000)),
            kuadrant_secret="kuadrant.io/endpoint", required_settings=("namespace",),
            settings_from_credentials=True,  # a kuadrant.io/endpoint Secret may carry the settings
            extra="kubernetes", sdk=("kubernetes",), page="providers/endpoint.md",
            settings=("namespace", "ENDPOINT_GVR", "ENDPOINT_GVK", "ENDPOINT_ZONE_RECORD_LABEL",
                      "CRD_ZONE_RECORD_LABEL", "kubeconfigContext"),
        ),
    )
}

# Kuadrant Secret types that name no gitdns provider, with what to do instead.
UNSERVED_SECRET_TYPES: Mapping[str, str] = {
    "kuadrant.io/coredns": "gitdns has no coredns provider to publish through it: CoreDNS serves the zones that "
    "primaries render from the local store (docs/coredns-primaries.md)",
}


def missing_settings(entry: ProviderType, setting: Callable[[str], str | None]) -> list[str]:
    """The required settings of ``entry`` that ``setting`` (key -> value) does not give: what
    `gitdns validate` reports (``MissingSetting``) and each provider refuses."""
    return [key for key in entry.required_settings if not (setting(key) or "").strip()]


def known_types() -> tuple[str, ...]:
    """Every provider type, in the table's order."""
    return tuple(PROVIDER_TYPES)


def capabilities_of(name: str) -> Capabilities:
    """The capabilities of provider type ``name`` (KeyError for an unknown type)."""
    return PROVIDER_TYPES[name].capabilities


def type_of_secret(secret_type: str | None) -> str | None:
    """The provider type a Secret's ``type`` names (``kuadrant.io/aws`` -> ``route53``,
    ``gitdns.io/rfc2136`` -> ``rfc2136``); None for ``Opaque``, other types and unknown names."""
    for entry in PROVIDER_TYPES.values():
        if secret_type in entry.secret_types:
            return entry.name
    return None


def widest_weights() -> tuple[int, int]:
    """The weights some provider accepts (a zone on the default provider secret may land on any)."""
    ranges = [entry.capabilities.weights for entry in PROVIDER_TYPES.values()]
    return min(low for low, _ in ranges), max(high for _, high in ranges)
