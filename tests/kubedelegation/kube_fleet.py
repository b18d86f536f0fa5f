"""Fake clusters for the delegation-through-Kubernetes tests: one or two primaries and two
remotes, each a `FakeKube` (HTTP, resourceVersion enforced) on its own port; the primaries
hold kubeconfig Secrets pointing at the remotes, and a default provider secret naming a
`local` record store shared by every primary."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitdns.adapters.kube.clusters import ClusterSecrets
from gitdns.core.endpoints import authoritative_record_name
from gitdns.kubedelegation.delegation import KubeDelegation
from gitdns.providers.local import LocalProvider
from tests.fakes.kube_apiserver import FakeKube

DNSR = ("kuadrant.io", "v1alpha1", "dnsrecords")
NS = "dnstest"
SECRETS_NS = "kuadrant-system"
ZONE = "example.com"
CLUSTER_LABEL = "kuadrant.io/multicluster-kubeconfig"


def kubeconfig(url: str, token: str = "t0k3n-never-logged") -> str:
    return (f"apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
            f"users: [{{name: u, user: {{token: {token}}}}}]\n"
            "contexts: [{name: c, context: {cluster: c, user: u}}]\n")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def a_endpoint(name: str, *targets: str, ttl: int = 60) -> dict[str, Any]:
    return {"dnsName": name, "recordType": "A", "recordTTL": ttl, "targets": list(targets)}


@dataclass
class Fleet:
    store: Path
    primaries: dict[str, FakeKube] = field(default_factory=dict)
    remotes: dict[str, FakeKube] = field(default_factory=dict)
    delegations: list[KubeDelegation] = field(default_factory=list)

    def new_fake(self) -> FakeKube:
        fake = FakeKube()
        fake.register(*DNSR, kind="DNSRecord")
        fake.create("", "v1", "namespaces", {"metadata": {"name": NS}})
        fake.start()
        return fake

    def add_remote(self, name: str) -> FakeKube:
        self.remotes[name] = self.new_fake()
        return self.remotes[name]

    def add_primary(self, name: str, *, default_provider: bool = True) -> FakeKube:
        fake = self.new_fake()
        fake.create("", "v1", "namespaces", {"metadata": {"name": SECRETS_NS}})
        if default_provider:
            self.default_provider(fake, NS)
        for remote, rfake in self.remotes.items():
            self.cluster_secret(fake, remote, kubeconfig(rfake.base_url))
        self.primaries[name] = fake
        return fake

    def default_provider(self, fake: FakeKube, namespace: str) -> None:
        fake.create("", "v1", "secrets", {
            "metadata": {"name": "dns-store", "namespace": namespace,
                         "labels": {"kuadrant.io/default-provider": "true"},
                         "annotations": {"settings.gitdns.io/path": str(self.store),
                                         "settings.gitdns.io/zone": ZONE}},
            "type": "gitdns.io/local", "data": {}})

    @staticmethod
    def cluster_secret(fake: FakeKube, name: str, text: str) -> None:
        fake.create("", "v1", "secrets", {"metadata": {"name": name, "namespace": SECRETS_NS,
                                                       "labels": {CLUSTER_LABEL: "true"}},
                                          "type": "Opaque", "data": {"kubeconfig": b64(text)}})

    def delegation(self, primary: str, cluster_id: str | None = None, **kwargs: Any) -> KubeDelegation:
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.primaries[primary].base_url
        api = client.ApiClient(cfg)
        delegation = KubeDelegation(api, cluster_id or primary, secrets=ClusterSecrets(api, SECRETS_NS),
                                    base_dir=self.store.parent, **kwargs)
        self.delegations.append(delegation)
        return delegation

    def stop(self) -> None:
        for d in self.delegations:
            d.close()
        for fake in [*self.primaries.values(), *self.remotes.values()]:
            fake.stop()


def record(fake: FakeKube, name: str, root: str, endpoints: list[dict[str, Any]], *, owner: str | None = None,
           namespace: str = NS, delegate: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"rootHost": root, "endpoints": endpoints}
    if delegate:
        spec["delegate"] = True
    if owner:
        spec["ownerID"] = owner
    return fake.create(*DNSR, {"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def auth(fake: FakeKube, root: str, namespace: str = NS) -> dict[str, Any]:
    return fake.get(*DNSR, authoritative_record_name(root), namespace=namespace)


def auth_exists(fake: FakeKube, root: str, namespace: str = NS) -> bool:
    try:
        auth(fake, root, namespace)
    except Exception:
        return False
    return True


def auth_data(fake: FakeKube, root: str, namespace: str = NS) -> dict[tuple[str, str], tuple[str, ...]]:
    return {(e["dnsName"], e["recordType"]): tuple(sorted(e["targets"]))
            for e in auth(fake, root, namespace)["spec"].get("endpoints") or []
            if not e["dnsName"].startswith("kuadrant-")}


def zone_data(store: Path) -> dict[tuple[str, str, str], tuple[str, ...]]:
    return {(r.name, r.type, r.set_id): r.values for r in LocalProvider(store).read(ZONE).records
            if not r.name.startswith("kuadrant-")}


def zone_owners(store: Path) -> set[str]:
    from gitdns.core.plan.planner import decode_zone

    obs = decode_zone(LocalProvider(store).read(ZONE))
    return {o for entries in obs.owners.values() for o in entries}


def remote_status(fake: FakeKube, name: str, primary_id: str, namespace: str = NS) -> dict[str, Any]:
    status = fake.get(*DNSR, name, namespace=namespace).get("status") or {}
    entry: dict[str, Any] = (status.get("remoteRecordStatuses") or {}).get(primary_id) or {}
    return entry


def condition(entry: dict[str, Any], ctype: str = "Ready") -> dict[str, Any]:
    return next((c for c in entry.get("conditions") or [] if c["type"] == ctype), {})
