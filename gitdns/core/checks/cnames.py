"""CNAME chains defined inside the repository do not loop (docs/spec.md, "DNS names").

The graph: every static CNAME (a RecordSet's name to each of its values), and every CNAME a
DNSPolicy publishes (the record builder's own layouts, `gitdns.core.builder`: ``H CNAME klb.H``,
the geo and weighted rows, ``H CNAME <gateway host name>`` of a simple host whose gateway has
no IP).  A target that no record of the repository names is answered by the wildcard of its
closest encloser, as a DNS server would (``*.x CNAME a.x`` loops: ``a.x`` is answered by the
wildcard).  Names are lower-case in the model; CNAME values are compared in lower case too.

The layout's own edges always lead down the name tree (``H`` → ``klb.H`` → ``<geo>.klb.H``),
so every loop holds a static CNAME or a gateway host name: the search starts at those, builds
the layout of a host only when a chain reaches it, and each loop is reported at every static
record and gateway address on it (file, line and field), blocking the zones of its names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gitdns.core import builder
from gitdns.core.checks.index import Index, Obj, problem
from gitdns.core.model import Cluster, DNSPolicy, Gateway, Strategy, Zone
from gitdns.core.names import KLB, lb_host, root_host_of
from gitdns.core.problems import Path, Problem, shown
from gitdns.core.records import RecordSet

MAX_SHOWN = 8  # names of a loop a message lists


@dataclass(frozen=True, slots=True)
class Edge:
    """``name CNAME target``; ``obj``/``path`` say where the repository writes it (None for the
    policy layout's own rows, which never close a loop alone)."""

    name: str
    target: str
    obj: Obj | None = None
    path: Path = ()


def target_name(value: str) -> str:
    """A CNAME value as a name: lower case, no blanks, no trailing dot."""
    return value.strip().lower().rstrip(".")


class _Policies:
    """The policy covering a listener host on a gateway: `gitdns.core.builder.policy_for` with
    its order (explicit hosts, then the gateway reference, then the zone's defaultPolicy), by
    dictionary instead of a scan per host."""

    def __init__(self, policies: Iterable[DNSPolicy]) -> None:
        self.policies = tuple(policies)
        self.explicit: dict[str, DNSPolicy] = {}
        self.by_name: dict[str, DNSPolicy] = {}
        for policy in self.policies:
            for host in policy.target.hosts:
                self.explicit.setdefault(host, policy)
            self.by_name.setdefault(policy.name, policy)
        self._gateways: dict[tuple[str, str], DNSPolicy | None] = {}

    def of(self, zone: Zone, gateway: Gateway, host: str) -> DNSPolicy | None:
        found = self.explicit.get(host)
        if found is not None:
            return found
        key = (gateway.name, gateway.namespace)
        if key not in self._gateways:
            self._gateways[key] = next((p for p in self.policies if p.target.gateway == gateway.name
                                        and p.target.namespace in (None, gateway.namespace)), None)
        found = self._gateways[key]
        if found is None and zone.default_policy:
            found = self.by_name.get(zone.default_policy)
        return found


class _Serving:
    """The listener hosts of every gateway by their lb host (`gitdns.core.names.lb_host`), those
    served by a gateway with a host name among its addresses, and every name they hold (with the
    names above them): read from the Clusters alone, so kept while those are unchanged."""

    __slots__ = ("_names", "named", "serving", "wildcard_hosts")

    def __init__(self, ix: Index) -> None:
        self.serving: dict[str, list[tuple[Cluster, int, Gateway, str]]] = {}  # lb host -> listeners
        self.named: set[str] = set()  # lb hosts served by a gateway with a host name among its addresses
        self.wildcard_hosts = False
        for cluster in ix.state.clusters:
            for gi, gateway in enumerate(cluster.gateways):
                named = bool(gateway.listeners) and bool(builder.split_addresses(gateway.addresses).hostnames)
                for host in dict.fromkeys(ls.hostname for ls in gateway.listeners):
                    base = lb_host(host)
                    self.serving.setdefault(base, []).append((cluster, gi, gateway, host))
                    self.wildcard_hosts = self.wildcard_hosts or host.startswith("*.")
                    if named:
                        self.named.add(base)
        self._names: set[str] | None = None

    def names(self) -> set[str]:
        """Every name the hosts hold, and those above them (built when first asked, from what
        this holds alone)."""
        if self._names is None:
            self._names = set()
            for base, listeners in self.serving.items():
                _exist(self._names, f"{KLB}.{base}")
                for _, _, _, host in listeners:
                    _exist(self._names, host)
        return self._names


def _exist(names: set[str], name: str) -> None:
    """``name`` and every name above it (an empty non-terminal exists too) into ``names``."""
    while name and name not in names:
        names.add(name)
        name = name.partition(".")[2]


class Graph:
    """The CNAME graph of a repository; a host's layout is built the first time a chain reaches
    one of its names."""

    def __init__(self, ix: Index) -> None:
        self.ix = ix
        self.static: dict[str, list[Edge]] = {}
        for doc in ix.state.record_sets:
            for i, record in enumerate(doc.records):
                if record.type == "CNAME":
                    for j, value in enumerate(record.values):
                        edge = Edge(record.name, target_name(value), doc, ("spec", "records", i, "values", j))
                        self.static.setdefault(record.name, []).append(edge)
        served = ix.derived("cnames.serving", _Serving)
        self.serving = served.serving
        self.named = served.named
        self._served = served
        self.policies = _Policies(ix.state.policies)
        self._layouts: dict[str, dict[str, list[Edge]]] = {}
        # wildcard matching needs every name that exists; without a wildcard CNAME it is never asked
        self.wildcards = served.wildcard_hosts or any(name.startswith("*") for name in self.static)
        self._static_names: set[str] | None = None

    def exists(self, name: str) -> bool:
        """Whether ``name`` holds a record of the repository (static or a policy's host and its
        klb name), or is above one (an empty non-terminal exists too)."""
        if self._static_names is None:
            self._static_names = set()
            for doc in self.ix.state.record_sets:
                for record in doc.records:
                    _exist(self._static_names, record.name)
        return name in self._static_names or name in self._served.names()

    def seeds(self) -> Iterator[str]:
        """Every name whose CNAME the repository writes itself: statics, and the hosts whose
        gateways have host names (their rows point out of the layout)."""
        yield from list(self.static)
        for base in sorted(self.named):
            yield from list(self._layout(base))

    def layout(self, name: str) -> list[Edge]:
        """The CNAMEs policies publish at ``name``."""
        out: list[Edge] = []
        for base in dict.fromkeys((root_host_of(name), lb_host(name))):
            if base in self.serving:
                out += self._layout(base).get(name, ())
        return out

    def _layout(self, base: str) -> dict[str, list[Edge]]:
        found = self._layouts.get(base)
        if found is None:
            found = self._layouts[base] = {}
            for cluster, gi, gateway, host in self.serving[base]:
                for edge in self._host_edges(cluster, gi, gateway, host):
                    found.setdefault(edge.name, []).append(edge)
        return found

    def _host_edges(self, cluster: Cluster, gi: int, gateway: Gateway, host: str) -> Iterator[Edge]:
        zone_name = self.ix.lookup.zone_of(host)
        zone = self.ix.zones.get(zone_name) if zone_name is not None else None
        policy = self.policies.of(zone, gateway, host) if zone is not None else None
        if zone is None or policy is None:
            return
        addrs = builder.split_addresses(gateway.addresses, policy.exclude_addresses)
        records: list[RecordSet]
        if policy.strategy is Strategy.LOADBALANCED and not policy.flattened:
            records = builder.loadbalanced_records(host, cluster, gateway, policy, addrs, zone)
        else:
            records = builder.simple_records(host, addrs, 0)
        for record in records:
            if record.type != "CNAME":
                continue
            target = record.values[0]
            at = next((ai for ai, a in enumerate(gateway.addresses) if target_name(a) == target), None)
            if at is None or target not in addrs.hostnames:
                yield Edge(record.name, target)
            else:
                yield Edge(record.name, target, cluster, ("spec", "gateways", gi, "addresses", at))

    def edges(self, name: str) -> list[Edge]:
        return [*self.static.get(name, ()), *self.layout(name)]

    def resolve(self, target: str) -> str:
        """The node answering ``target``: itself, or the wildcard of its closest encloser when no
        record names it (DNS wildcard matching)."""
        if not self.wildcards or target in self.static or self.exists(target) or self.layout(target):
            return target
        encloser = target.partition(".")[2]
        while encloser and not self.exists(encloser):
            encloser = encloser.partition(".")[2]
        wildcard = f"*.{encloser}" if encloser else "*"
        return wildcard if wildcard in self.static or self.layout(wildcard) else target


def loops(graph: Graph) -> list[list[str]]:
    """Every strongly connected component of the graph reachable from its seeds that holds a
    loop (two names or more, or a name pointing at itself), as found (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    successors: dict[str, list[str]] = {}

    def succ(node: str) -> list[str]:
        found = successors.get(node)
        if found is None:
            found = successors[node] = [graph.resolve(e.target) for e in graph.edges(node)]
        return found

    for seed in graph.seeds():
        if seed in index:
            continue
        work: list[tuple[str, int]] = [(seed, 0)]
        index[seed] = low[seed] = len(index)
        stack.append(seed)
        on_stack.add(seed)
        while work:
            node, at = work[-1]
            nexts = succ(node)
            if at < len(nexts):
                work[-1] = (node, at + 1)
                child = nexts[at]
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in succ(node):
                    out.append(component)
    return out


def _path(graph: Graph, start: str, goal: str, members: set[str]) -> list[str]:
    """The shortest chain from ``start`` to ``goal`` inside one component (both in it)."""
    before: dict[str, str] = {start: start}
    frontier = [start]
    while frontier and goal not in before:
        step: list[str] = []
        for node in frontier:
            for edge in graph.edges(node):
                nxt = graph.resolve(edge.target)
                if nxt in members and nxt not in before:
                    before[nxt] = node
                    step.append(nxt)
        frontier = step
    chain = [goal]
    while chain[-1] != start:
        chain.append(before[chain[-1]])
    return chain[::-1]


def _shown_chain(names: list[str]) -> str:
    if len(names) > MAX_SHOWN:
        names = [*names[: MAX_SHOWN - 1], "…", names[-1]]
    return " → ".join(n if n == "…" else shown(n) for n in names)


def cname_loops(ix: Index) -> Iterable[Problem]:
    """Each loop of CNAMEs, at every static record and gateway address on it."""
    graph = Graph(ix)
    for component in loops(graph):
        members = set(component)
        zones = ix.lookup.zones_of(members)
        for node in sorted(members):
            for edge in graph.edges(node):
                target = graph.resolve(edge.target)
                if edge.obj is None or target not in members:
                    continue
                chain = [node, *_path(graph, target, node, members)] if target != node else [node, node]
                message = f"CNAME chain loops: {_shown_chain(chain)}; a resolver following it never gets an answer"
                if isinstance(edge.obj, Cluster):
                    message = f"gateway address {shown(edge.target)} is the target of {shown(node)}: {message}"
                hint = "point one CNAME of the chain at a name that holds addresses (or outside the loop)"
                yield problem(edge.obj.origin, edge.path, message, hint, (*zones, *ix.zones_of(edge.obj)),
                              "CNAMELoop")
