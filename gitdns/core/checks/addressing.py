"""Addresses and host names are what they claim to be (`gitdns.core.addresses`): a gateway
address is an IP address or a host name, an excluded address an IP address or network, a
node's ip an IP address, and every host name a host name (``127.0.0.300`` is neither an
address nor a name).  Nameserver addresses are checked with the primaries
(`gitdns.core.checks.serving`), record values with the records (`gitdns.core.checks.records`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gitdns.core.addresses import address_error, ip_error, network_error
from gitdns.core.checks.index import Index, Obj, on
from gitdns.core.problems import Path, Problem

_ADDRESS_HINT = "an IPv4 address (192.0.2.10), an IPv6 address (2001:db8::10) or a host name (lb.example.net)"
_IP_HINT = "an IPv4 address such as 192.0.2.10 or an IPv6 address such as 2001:db8::10"


def gateway_addresses(ix: Index) -> Iterable[Problem]:
    for cluster in ix.state.clusters:
        for gi, gateway in enumerate(cluster.gateways):
            for ai, address in enumerate(gateway.addresses):
                wrong = address_error(address)
                if wrong is not None:
                    path: Path = ("spec", "gateways", gi, "addresses", ai)
                    message = f"gateway {gateway.name!r}: address {wrong}"
                    yield on(ix, cluster, path, message, _ADDRESS_HINT, "InvalidAddress")


def excluded_addresses(ix: Index) -> Iterable[Problem]:
    hint = "an IP address (192.0.2.7) or a network in CIDR form (10.0.0.0/8, 2001:db8::/32)"
    for policy in ix.state.policies:
        for i, entry in enumerate(policy.exclude_addresses):
            wrong = network_error(entry)
            if wrong is not None:
                message = f"excluded address {wrong}"
                yield on(ix, policy, ("spec", "excludeAddresses", i), message, hint, "InvalidAddress")


def node_addresses(ix: Index) -> Iterable[Problem]:
    for pool in ix.state.node_pools:
        for i, node in enumerate(pool.nodes):
            wrong = ip_error(node.ip)
            if wrong is not None:
                message = f"node {node.name!r}: ip {wrong}"
                yield on(ix, pool, ("spec", "nodes", i, "ip"), message, _IP_HINT, "InvalidAddress")


def _host_names(ix: Index) -> Iterator[tuple[Obj, Path, str]]:
    for zone in ix.state.zones:
        yield zone, ("spec", "domain"), zone.domain
    for cluster in ix.state.clusters:
        for gi, gateway in enumerate(cluster.gateways):
            for li, listener in enumerate(gateway.listeners):
                yield cluster, ("spec", "gateways", gi, "listeners", li, "hostname"), listener.hostname
        if cluster.nameserver is not None:
            yield cluster, ("spec", "nameserver", "name"), cluster.nameserver.name
    for policy in ix.state.policies:
        for i, name in enumerate(policy.target.hosts):
            yield policy, ("spec", "targetRef", "hosts", i), name
    for tenant in ix.state.tenants:
        for i, name in enumerate(tenant.domains):
            yield tenant, ("spec", "domains", i), name


def host_names(ix: Index) -> Iterable[Problem]:
    seen: dict[str, str | None] = {}  # a host is written by every cluster serving it: judge it once
    for obj, path, name in _host_names(ix):
        wrong = seen[name] if name in seen else seen.setdefault(name, ix.host_error(name))
        if wrong is not None:
            yield on(ix, obj, path, wrong, "a DNS name such as api.example.com", "InvalidHostname")
