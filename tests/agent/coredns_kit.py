"""A fleet for CoreDNS primaries: two primaries, each with its OWN `local` store for the served
zone ``app.example.com``, two remotes, and the parent zone ``example.com`` in one shared memory
provider (any provider would do)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gitdns.agent.cycle import Agent
from gitdns.agent.main import make_lease
from gitdns.core.model import Zone
from gitdns.core.records import RecordSet
from gitdns.providers.base import Provider
from gitdns.providers.local import LocalProvider
from tests.agent.delegation_kit import ZONE as PARENT_ZONE
from tests.agent.delegation_kit import Fleet, cluster_doc

SERVED = "app.example.com"
PARENT = "example.com"
COREDNS_DIR = "/etc/coredns/gitdns/app.example.com.views"
EU_CLIENT = "127.0.0.2"  # viewClients routes it to GEO-EU; anyone else gets the default view
NAMESERVERS = {"p1": ("ns-p1.example.com", "192.0.2.1"), "p2": ("ns-p2.example.com", "192.0.2.2")}

SERVED_ZONE = f"""apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {{name: app}}
spec:
  domain: {SERVED}
  provider:
    type: local
    settings: {{viewClients: "GEO-EU={EU_CLIENT}/32", corednsDir: {COREDNS_DIR}}}
"""

POLICY = """apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata: {name: api}
spec:
  targetRef: {gateway: gw, namespace: ingress}
  strategy: loadbalanced
  loadBalancing:
    geo: {defaultGeo: US}
"""


def primary_doc(name: str) -> str:
    ns, address = NAMESERVERS[name]
    return cluster_doc(name, "primary") + f"  nameserver: {{name: {ns}, addresses: [{address}]}}\n"


def files(*primaries: str) -> dict[str, str]:
    out = {
        "zones/example.yaml": PARENT_ZONE,
        "zones/app.yaml": SERVED_ZONE,
        "policies/api.yaml": POLICY,
        "clusters/r1.yaml": cluster_doc("r1", "remote", ["10.0.0.1"], (f"api.{SERVED}", f"www.{SERVED}"),
                                        geo="GEO-EU"),
        "clusters/r2.yaml": cluster_doc("r2", "remote", ["10.0.0.2"], (f"api.{SERVED}",), geo="US"),
    }
    out.update({f"clusters/{p}.yaml": primary_doc(p) for p in primaries})
    return out


@dataclass
class PrimariesFleet(Fleet):
    """`Fleet` whose primaries keep the served zone in a store of their own."""

    stores: dict[str, LocalProvider] = field(default_factory=dict)

    def agent(self, name: str, *, remote: bool = False, **config: object) -> Agent:
        if remote:
            return super().agent(name, remote=remote, **config)
        store = self.stores[name] = LocalProvider(self.tmp / name / "store")

        def factory(zone: Zone) -> Provider:
            return store if zone.provider.type == "local" else self.zone

        # the TXT lease as the agent's wiring builds it: its lock lands in the first zone
        # it reconciles, the served zone, so the views must leave it out to stay identical
        return super().agent(name, remote=remote, factory=factory, lease_builder=make_lease, **config)

    def run(self, *names: str) -> None:
        for name in names:
            self.agents[name].run()

    def views_dir(self, name: str) -> Path:
        return self.stores[name].views_dir(SERVED)

    def rendered(self, name: str) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.views_dir(name).iterdir())}

    def parent(self) -> dict[tuple[str, str], tuple[str, ...]]:
        return {(r.name, r.type): r.values for r in self.zone.read(PARENT).records if r.type != "TXT"}

    def served(self, name: str) -> list[RecordSet]:
        return list(self.stores[name].read(SERVED).records)


def start(tmp: Path) -> PrimariesFleet:
    fleet = PrimariesFleet(tmp)
    fleet.source.commit(files("p1", "p2"), "two primaries")
    for name in ("r1", "r2"):
        fleet.agent(name, remote=True)
    for name in ("p1", "p2"):
        fleet.agent(name)
    fleet.run("r1", "r2", "p1", "p2")
    return fleet
