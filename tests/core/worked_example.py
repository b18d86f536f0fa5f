"""The worked example of docs/records.md as model objects (shared by several tests)."""

from __future__ import annotations

from gitdns.core.model import (
    Cluster,
    DesiredState,
    DNSPolicy,
    Gateway,
    Listener,
    ProviderRef,
    Revision,
    Strategy,
    TargetRef,
    Zone,
)

ZONE = Zone(name="example-com", domain="example.com", provider=ProviderRef("memory"))
HOST = "api.example.com"


def cluster(name: str, ident: str, ip: str, geo: str, **kw: object) -> Cluster:
    gateway = Gateway("api-gw", "ingress", (ip,), (Listener(HOST),))
    return Cluster(name=name, id=ident, geo=geo, gateways=(gateway,), **kw)  # type: ignore[arg-type]


CLUSTER_A = cluster("cluster-a", "cluster-a-uid", "1.1.1.1", "GEO-EU")
CLUSTER_B = cluster("cluster-b", "cluster-b-uid", "2.2.2.2", "US")
POLICY = DNSPolicy(
    name="api",
    target=TargetRef(gateway="api-gw"),
    strategy=Strategy.LOADBALANCED,
    default_geo="GEO-EU",
)
STATE = DesiredState(zones=(ZONE,), clusters=(CLUSTER_A, CLUSTER_B), policies=(POLICY,))
REV = Revision(1_700_000_000, "abcdef0123456789")
