"""YAML documents in, `DesiredState` and schema problems out.

`load` takes ``{relative_path: text}`` (the adapter reads the files) and the JSON schemas by
kind.  Files parse with ruamel.yaml's C loader; each document is checked for its envelope
(apiVersion, kind) and against its kind's schema, and every document that passes becomes a
model object.  Line numbers are recovered (`gitdns.core.locate`) only for documents with
problems.  Each problem names the zones it blocks, so one broken file holds back only the
zones it touches.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jsonschema import Draft202012Validator
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.cyaml import CParser  # type: ignore[attr-defined]
from ruamel.yaml.error import YAMLError
from ruamel.yaml.resolver import VersionedResolver

from gitdns.core.locate import describe, line_of, quick_check
from gitdns.core.model import (
    API_VERSION,
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
from gitdns.core.problems import Problem

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


@dataclass(frozen=True, slots=True)
class LoadResult:
    state: DesiredState
    problems: list[Problem] = field(default_factory=list)
    # (kind, metadata.name) of documents left out because they did not pass their schema
    rejected: frozenset[tuple[str, str]] = frozenset()


class ZoneLookup:
    """The most specific zone (by metadata.name) containing a host: one dict probe per label."""

    __slots__ = ("_by_domain",)

    def __init__(self, zones: Iterable[tuple[str, str]]) -> None:
        self._by_domain: dict[str, str] = {}
        for name, domain in zones:
            self._by_domain.setdefault(domain, name)

    def zone_of(self, host: str) -> str | None:
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
class _Doc:
    file: str
    index: int
    line: int
    kind: str
    name: str | None
    body: Json


class _FastLoader(CParser, SafeConstructor, VersionedResolver):  # type: ignore[misc]
    """What ``YAML(typ="safe", pure=False)`` builds (libyaml's C parser, the safe constructor,
    YAML 1.2 resolution), except that the resolver table is looked up once per stream instead of
    once per scalar (ruamel finds the version by two failed attribute look-ups each time), which
    halves the time to load a large repository."""

    def __init__(self, stream: str) -> None:
        CParser.__init__(self, stream)
        self._parser = self._composer = self
        SafeConstructor.__init__(self, loader=self)
        VersionedResolver.__init__(self, version=(1, 2), loader=self)
        self._resolvers = VersionedResolver.versioned_resolver.fget(self)  # type: ignore[attr-defined]

    @property
    def versioned_resolver(self) -> Any:
        return self._resolvers


def host(name: str) -> str:
    """A host name normalised: lower-case, no surrounding blanks, no trailing dot."""
    return name.strip().lower().rstrip(".")


def load(files: Mapping[str, str], schemas: Mapping[str, Mapping[str, Any]]) -> LoadResult:
    """Parse, envelope-check and schema-check every document; build the desired state."""
    validators = {kind: Draft202012Validator(schema) for kind, schema in schemas.items()}
    quick = {kind: quick_check(schema) for kind, schema in schemas.items()}
    problems: list[Problem] = []
    good: list[_Doc] = []
    bad: list[tuple[_Doc, list[Problem]]] = []
    for file in sorted(files):
        parsed, parse_problem = _parse(file, files[file])
        if parse_problem is not None:
            problems.append(parse_problem)
        for index, line, data in parsed:
            doc, envelope_problem = _envelope(file, index, line, data)
            if doc is None:
                problems.append(_located(files, index, envelope_problem))
                continue
            validator, fast = validators.get(doc.kind), quick.get(doc.kind)
            passed = validator is None or (fast is not None and fast(data))
            errors = [] if passed else list(validator.iter_errors(data))  # type: ignore[union-attr]
            found = [envelope_problem] if envelope_problem else [p for e in errors for p in describe(file, e)]
            if found:
                bad.append((doc, found))
            else:
                good.append(doc)
    state, lookup = _build(good, bad)
    for doc, found in bad:
        zones = _raw_zones(doc, lookup, state)
        for problem in found:
            blocked = replace(problem, zones=zones or (), blocks_all=zones is None)
            problems.append(_located(files, doc.index, blocked))
    rejected = frozenset((doc.kind, doc.name) for doc, _ in bad if doc.name)
    return LoadResult(state, problems, rejected)


def _located(files: Mapping[str, str], index: int, problem: Problem | None) -> Problem:
    assert problem is not None
    return replace(problem, line=line_of(files[problem.file], index, problem.path) or problem.line)


def _parse(file: str, text: str) -> tuple[list[tuple[int, int, Any]], Problem | None]:
    """(index, first line, data) of every non-empty document, or the problem that stopped it."""
    docs: list[tuple[int, int, Any]] = []
    try:
        loader = _FastLoader(text)
        try:
            index = 0
            while loader.check_node():
                node = loader.get_node()
                data = loader.construct_document(node)
                if data is not None:
                    docs.append((index, node.start_mark.line + 1, data))
                index += 1
        finally:
            loader.dispose()
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problem = Problem(
            file,
            (),
            f"the file is not valid YAML: {what}",
            hint="fix the YAML syntax; documents in this file are ignored until then",
            line=mark.line + 1 if mark is not None else 0,
            blocks_all=True,
            code="ParseError",
        )
        return [], problem
    return docs, None


def _envelope(file: str, index: int, line: int, data: Any) -> tuple[_Doc | None, Problem | None]:
    """Check apiVersion and kind.  No doc: the kind is unknown and so are the zones it touches."""
    if not isinstance(data, dict):
        hint = "write a mapping with apiVersion, kind, metadata and spec"
        return None, _whole(file, (), "a document must be a mapping", hint, line, "InvalidDocument")
    kind = data.get("kind")
    kinds = ", ".join(KINDS)
    if kind is None:
        return None, _whole(file, (), "the document has no kind", f"add kind: one of {kinds}", line, "NoKind")
    if kind not in KINDS:
        close = [k for k in KINDS if str(kind).lower() == k.lower()]
        close = close or difflib.get_close_matches(str(kind), KINDS, n=1)
        hint = f"did you mean {close[0]}?" if close else f"use one of {kinds}"
        return None, _whole(file, ("kind",), f"unknown kind {kind!r}", hint, line, "UnknownKind")
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    doc = _Doc(file, index, line, kind, name if isinstance(name, str) else None, data)
    api = data.get("apiVersion")
    if api == API_VERSION:
        return doc, None
    message = "the document has no apiVersion" if api is None else f"unsupported apiVersion {api!r}"
    hint = f"use apiVersion: {API_VERSION}"
    return doc, Problem(file, ("apiVersion",), message, hint=hint, line=line, code="WrongApiVersion")


def _whole(file: str, path: tuple[str, ...], message: str, hint: str, line: int, code: str) -> Problem:
    return Problem(file, path, message, hint=hint, line=line, blocks_all=True, code=code)


# --- zones a rejected document blocks --------------------------------------------------------


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _raw_hosts(doc: _Doc, state: DesiredState) -> list[str]:
    spec = doc.body.get("spec")
    if doc.kind == "Cluster":
        gateways = _list(_dig(spec, "gateways"))
        listeners = [ls for g in gateways if isinstance(g, dict) for ls in _list(g.get("listeners"))]
        return [host(h) for ls in listeners for h in _strings(_dig(ls, "hostname"))]
    if doc.kind == "DNSPolicy":
        hosts = [host(h) for h in _strings(_dig(spec, "targetRef", "hosts"))]
        gateway, namespace = _dig(spec, "targetRef", "gateway"), _dig(spec, "targetRef", "namespace")
        return hosts + [
            ls.hostname
            for c in state.clusters
            for g in c.gateways
            if g.name == gateway and namespace in (None, g.namespace)
            for ls in g.listeners
        ]
    if doc.kind == "Tenant":
        return [host(h) for h in _strings(_dig(spec, "domains"))]
    if doc.kind == "NodePool":
        return [d for t in state.tenants if t.node_pool == doc.name for d in t.domains]
    if doc.kind == "RecordSet":
        names = [_dig(r, "name") for r in _list(_dig(spec, "records"))]
        return [host(n) for n in names if isinstance(n, str)]
    return []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _raw_zones(doc: _Doc, lookup: ZoneLookup, state: DesiredState) -> tuple[str, ...] | None:
    """The zones a rejected document touches; None when they cannot be known (blocks all)."""
    spec = doc.body.get("spec")
    if doc.kind == "Zone":
        return (doc.name,) if doc.name else None
    if doc.kind == "ActiveGroups":
        zone = _dig(spec, "zone")
        return (zone,) if isinstance(zone, str) else None
    zones = set(lookup.zones_of(_raw_hosts(doc, state)))
    zone = _dig(spec, "zone")
    if doc.kind == "RecordSet" and isinstance(zone, str):
        zones.add(zone)
    return tuple(sorted(zones))


# --- building model objects from documents that passed their schema ---------------------------


def _build(good: list[_Doc], bad: list[tuple[_Doc, list[Problem]]]) -> tuple[DesiredState, ZoneLookup]:
    raw_zones = [d for d in good if d.kind == "Zone"] + [d for d, _ in bad if d.kind == "Zone"]
    domains: dict[str, str] = {}
    for doc in raw_zones:
        domain = _dig(doc.body, "spec", "domain")
        if doc.name and isinstance(domain, str):
            domains.setdefault(doc.name, host(domain))
    lookup = ZoneLookup((name, domain) for name, domain in domains.items())
    by_kind: dict[str, list[object]] = {kind: [] for kind in KINDS}
    for doc in good:
        origin = Origin(doc.file, doc.index, doc.line)
        name = doc.name or ""
        spec = doc.body["spec"]
        if doc.kind == "RecordSet":
            by_kind[doc.kind].append(_record_set(name, spec, origin, domains, lookup))
        else:
            by_kind[doc.kind].append(_BUILDERS[doc.kind](name, spec, origin))
    state = DesiredState(**{_FIELDS[kind]: tuple(objs) for kind, objs in by_kind.items()})  # type: ignore[arg-type]
    return state, lookup


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
    gateways = tuple(
        Gateway(
            name=g["name"],
            namespace=g["namespace"],
            addresses=tuple(host(a) for a in g["addresses"]),
            listeners=tuple(Listener(host(ls["hostname"]), ls.get("name", "")) for ls in g.get("listeners", ())),
        )
        for g in spec.get("gateways", ())
    )
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
    return NodePool(name=name, nodes=nodes, health=health, discovery_selector=selector, origin=origin)


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
