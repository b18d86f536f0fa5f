"""The soak's desired state: a model it changes at random, writes as YAML, and the zone it must
become, computed here from the documented layouts (docs/records.md) without gitdns's builder.

One zone, one simple DNSPolicy (``web``: gateway ``web-gw``, hosts ``w0``..``w5``) and one
loadbalanced DNSPolicy (``api``: gateway ``api-gw``, hosts ``a0``..``a2``; ``flattened: true``
on a provider without routing), static records (``s0`` always, ``s1`` TXT and ``s2`` CNAME that
come and go), an ActiveGroups document, and clusters ``c0``..``c3`` (``c0`` and ``c1`` are never
removed, so some cluster always publishes the zone and the default geo keeps one; ``c2`` and ``c3``
come and go; ``c0`` always keeps one ``api`` host, since a defaultGeo no serving cluster is in
does not validate).  `Model.mutate` makes one random change: a listener host added or removed, a
gateway renumbered, the weights, the simple TTL, a static record, a cluster removed or added,
the active groups switched (the serial goes up).

`expected(model)` is what the zone must hold once every agent applied the model: data records
by key (name, type, set identifier) with TTL, weight, geo and values, the owners of each key
(every active cluster that wants it: present in git and in an active group), and the two
active-groups TXT values.  ``w5`` has a foreign A record in the way (`FOREIGN`): no cluster may
touch it, so nothing is expected there.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

API = "gitdns.io/v1alpha1"
WEB_HOSTS = ("w0", "w1", "w2", "w3", "w4", "w5")
API_HOSTS = ("a0", "a1", "a2")
DEFAULT_GEO = "GEO-EU"
GROUPS = ("site-a", "site-b")
GROUP_CHOICES = (("site-a", "site-b"), ("site-a",), ("site-b",))
WEB_TTLS = (None, 30, 120)
DEFAULT_WEIGHTS = (120, 60, 200)
GCP_WEIGHTS = (200, 10, 120)
STATIC_CHOICES: dict[str, tuple[tuple[str, tuple[str, ...], int] | None, ...]] = {
    "s0": (("A", ("192.0.2.200",), 300), ("A", ("192.0.2.201",), 300), ("A", ("192.0.2.200", "192.0.2.202"), 120)),
    "s1": (None, ("TXT", ("hello=1",), 300), ("TXT", ("hello=2",), 120)),
    "s2": (None, ("CNAME", ("target.example.net",), 300), ("CNAME", ("other.example.net",), 300)),
}
SIMPLE_TTL, INNER_TTL, OUTER_TTL = 60, 60, 300


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    id: str
    geo: str
    cloud: str
    group: str
    removable: bool
    web_pool: tuple[str, ...]
    api_pool: tuple[str, ...]


CLUSTERS = (
    ClusterSpec("c0", "7d3f1a52-0c4e-4b8a-9f61-2a5b8c0d1e01", "GEO-EU", "GCP", "site-a", False,
                ("192.0.2.11", "192.0.2.12", "192.0.2.13"), ("198.51.100.11", "198.51.100.12", "198.51.100.13")),
    ClusterSpec("c1", "1b9e6c07-5d2a-4e3f-8a70-3c6d9e1f2a02", "US", "AWS", "site-b", False,
                ("192.0.2.21", "192.0.2.22", "192.0.2.23"), ("198.51.100.21", "198.51.100.22", "198.51.100.23")),
    ClusterSpec("c2", "e4a2b8d1-7f3c-4d5e-b691-4f7a0b2c3d03", "JP", "GCP", "site-a", True,
                ("192.0.2.31", "192.0.2.32", "192.0.2.33"), ("198.51.100.31", "198.51.100.32", "198.51.100.33")),
    ClusterSpec("c3", "9c5d3e7f-1a2b-4c6d-8e90-5a8b1c2d3e04", "GEO-EU", "AWS", "site-b", True,
                ("192.0.2.41", "192.0.2.42", "192.0.2.43"), ("198.51.100.41", "198.51.100.42", "198.51.100.43")),
)


@dataclass(frozen=True)
class Foreign:
    """A record the soak writes into the zone before any agent runs, without ownership TXT."""

    label: str
    type: str
    ttl: int
    values: tuple[str, ...]


FOREIGN = (
    Foreign("legacy", "A", 300, ("203.0.113.50",)),
    Foreign("w5", "A", 300, ("203.0.113.55",)),  # in the way of the web host w5
    Foreign("w0", "TXT", 300, ("v=spf1 -all",)),  # beside a web host, another type
    Foreign("notes", "TXT", 300, ("foreign=yes",)),
)
BLOCKED = {("w5", "A")}


def short_hash(text: str, n: int) -> str:
    """SHA-224 of ``text`` read as a big-endian integer, in base 36, first ``n`` characters
    (ARCHITECTURE §4; written here again so the soak does not lean on gitdns for it)."""
    value = int.from_bytes(hashlib.sha224(text.encode()).digest(), "big")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
    return (out or "0")[:n]


@dataclass
class ClusterState:
    present: bool = True
    web_ips: tuple[str, ...] = ()
    api_ips: tuple[str, ...] = ()
    web_hosts: frozenset[str] = frozenset()
    api_hosts: frozenset[str] = frozenset()


@dataclass
class Model:
    zone: str
    routing: bool  # the provider holds set identifiers, weights and geo (local, route53)
    clusters: dict[str, ClusterState] = field(default_factory=dict)
    specs: tuple[ClusterSpec, ...] = CLUSTERS
    web_ttl: int | None = None
    default_weight: int = 120
    gcp_weight: int = 200
    statics: dict[str, tuple[str, tuple[str, ...], int] | None] = field(default_factory=dict)
    groups: tuple[str, ...] = GROUPS
    serial: int = 1

    @classmethod
    def initial(cls, zone: str, routing: bool, agents: int, rng: random.Random) -> Model:
        model = cls(zone, routing, specs=CLUSTERS[:agents])
        for spec in model.specs:
            model.clusters[spec.name] = ClusterState(
                True, spec.web_pool[:1], spec.api_pool[:1],
                frozenset(rng.sample(WEB_HOSTS, 2)), frozenset(rng.sample(API_HOSTS, 1)))
        model.statics = {label: choices[0] if label == "s0" else choices[-1]
                         for label, choices in STATIC_CHOICES.items()}
        return model

    def spec(self, name: str) -> ClusterSpec:
        return next(s for s in self.specs if s.name == name)

    def active(self) -> list[ClusterSpec]:
        return [s for s in self.specs if self.clusters[s.name].present and s.group in self.groups]

    # --- changes ---------------------------------------------------------------------------
    def mutate(self, rng: random.Random) -> str:
        """One random change; what it was, for the commit message."""
        ops = [(self._host, 5), (self._addresses, 2), (self._weights, 1), (self._ttl, 1), (self._static, 2),
               (self._cluster, 1), (self._groups, 1)]
        op = rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        return op(rng)

    def _host(self, rng: random.Random) -> str:
        name = rng.choice([s.name for s in self.specs if self.clusters[s.name].present])
        state = self.clusters[name]
        web = rng.random() < 0.6
        pool, held = (WEB_HOSTS, state.web_hosts) if web else (API_HOSTS, state.api_hosts)
        keep = not web and name == "c0" and len(held) == 1  # the default geo keeps a serving cluster
        if held and not keep and (len(held) == len(pool) or rng.random() < 0.45):
            host = rng.choice(sorted(held))
            held = held - {host}
            verb = "removes"
        else:
            host = rng.choice(sorted(set(pool) - held))
            held = held | {host}
            verb = "adds"
        self.clusters[name] = replace(state, web_hosts=held) if web else replace(state, api_hosts=held)
        return f"{name} {verb} listener {host}"

    def _addresses(self, rng: random.Random) -> str:
        name = rng.choice([s.name for s in self.specs if self.clusters[s.name].present])
        spec, state = self.spec(name), self.clusters[name]
        web = rng.random() < 0.5
        pool = spec.web_pool if web else spec.api_pool
        size = rng.choice((1, 1, 2))
        new = tuple(sorted(rng.sample(pool, size)))
        self.clusters[name] = replace(state, web_ips=new) if web else replace(state, api_ips=new)
        return f"{name} {'web-gw' if web else 'api-gw'} addresses {','.join(new)}"

    def _weights(self, rng: random.Random) -> str:
        if rng.random() < 0.5:
            self.default_weight = rng.choice([w for w in DEFAULT_WEIGHTS if w != self.default_weight])
            return f"api defaultWeight {self.default_weight}"
        self.gcp_weight = rng.choice([w for w in GCP_WEIGHTS if w != self.gcp_weight])
        return f"api weight for cloud=GCP {self.gcp_weight}"

    def _ttl(self, rng: random.Random) -> str:
        self.web_ttl = rng.choice([t for t in WEB_TTLS if t != self.web_ttl])
        return f"web ttl.simple {self.web_ttl or 'zone default'}"

    def _static(self, rng: random.Random) -> str:
        label = rng.choice(sorted(STATIC_CHOICES))
        self.statics[label] = rng.choice([c for c in STATIC_CHOICES[label] if c != self.statics.get(label)])
        held = self.statics[label]
        return f"static {label} {'removed' if held is None else held[0] + ' ' + ','.join(held[1])}"

    def _cluster(self, rng: random.Random) -> str:
        removable = [s for s in self.specs if s.removable]
        if not removable:
            return self._host(rng)
        spec = rng.choice(removable)
        state = self.clusters[spec.name]
        self.clusters[spec.name] = replace(state, present=not state.present)
        return f"cluster {spec.name} {'added' if not state.present else 'removed'}"

    def _groups(self, rng: random.Random) -> str:
        self.groups = rng.choice([g for g in GROUP_CHOICES if g != self.groups])
        self.serial += 1
        return f"active groups {'+'.join(self.groups)} serial {self.serial}"

    # --- the files -------------------------------------------------------------------------
    def files(self, provider: dict[str, Any]) -> dict[str, str]:
        """The repository's files (JSON is YAML): relative path -> text."""
        zone_doc = {"apiVersion": API, "kind": "Zone", "metadata": {"name": "soak"},
                    "spec": {"domain": self.zone, "provider": provider, "safety": {"maxChangeFraction": 1}}}
        files = {"zones/soak.yaml": _doc(zone_doc), "policies/web.yaml": _doc(self._web_policy()),
                 "policies/api.yaml": _doc(self._api_policy()),
                 "groups/soak.yaml": _doc({"apiVersion": API, "kind": "ActiveGroups",
                                           "metadata": {"name": "soak-groups"},
                                           "spec": {"zone": "soak", "serial": self.serial,
                                                    "groups": list(self.groups)}})}
        records = [{"name": label, "type": held[0], "ttl": held[2], "values": list(held[1])}
                   for label, held in sorted(self.statics.items()) if held is not None]
        files["records/static.yaml"] = _doc({"apiVersion": API, "kind": "RecordSet", "metadata": {"name": "static"},
                                             "spec": {"zone": "soak", "records": records}})
        for spec in self.specs:
            state = self.clusters[spec.name]
            if state.present:
                files[f"clusters/{spec.name}.yaml"] = _doc(self._cluster_doc(spec, state))
        return files

    def _web_policy(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"targetRef": {"gateway": "web-gw", "namespace": "web"}, "strategy": "simple"}
        if self.web_ttl is not None:
            spec["ttl"] = {"simple": self.web_ttl}
        return {"apiVersion": API, "kind": "DNSPolicy", "metadata": {"name": "web"}, "spec": spec}

    def _api_policy(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "targetRef": {"gateway": "api-gw", "namespace": "ingress"}, "strategy": "loadbalanced",
            "loadBalancing": {"weighted": {"defaultWeight": self.default_weight,
                                           "custom": [{"attribute": "cloud", "value": "GCP",
                                                       "weight": self.gcp_weight}]},
                              "geo": {"defaultGeo": DEFAULT_GEO}}}
        if not self.routing:
            spec["flattened"] = True
        return {"apiVersion": API, "kind": "DNSPolicy", "metadata": {"name": "api"}, "spec": spec}

    def _cluster_doc(self, spec: ClusterSpec, state: ClusterState) -> dict[str, Any]:
        gateways = []
        for gw, ns, ips, hosts in (("web-gw", "web", state.web_ips, state.web_hosts),
                                   ("api-gw", "ingress", state.api_ips, state.api_hosts)):
            if hosts:
                gateways.append({"name": gw, "namespace": ns, "addresses": list(ips),
                                 "listeners": [{"hostname": f"{h}.{self.zone}"} for h in sorted(hosts)]})
        return {"apiVersion": API, "kind": "Cluster", "metadata": {"name": spec.name},
                "spec": {"id": spec.id, "geo": spec.geo, "group": spec.group, "attributes": {"cloud": spec.cloud},
                         "gateways": gateways}}


def _doc(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def write_files(root: Path, files: dict[str, str]) -> None:
    """Make ``root`` hold exactly ``files`` below its YAML directories."""
    for old in root.glob("*/*.yaml"):
        if old.relative_to(root).as_posix() not in files:
            old.unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


# --- the zone the model asks for -------------------------------------------------------------
Key = tuple[str, str, str]  # (name, type, set identifier)
Content = tuple[int, int | None, str | None, frozenset[str]]  # (ttl, weight, geo, values)


@dataclass
class Expected:
    data: dict[Key, Content] = field(default_factory=dict)
    owners: dict[Key, frozenset[str]] = field(default_factory=dict)  # owner ids
    groups: dict[str, str] = field(default_factory=dict)  # TXT name -> value

    def claims(self) -> set[tuple[str, Key, str]]:
        """(owner, key, value): every value a live owner publishes."""
        return {(owner, key, value) for key, owners in self.owners.items() for owner in owners
                for value in self.values_of(key, owner)}

    _by_owner: dict[tuple[Key, str], frozenset[str]] = field(default_factory=dict)

    def values_of(self, key: Key, owner: str) -> frozenset[str]:
        return self._by_owner.get((key, owner), self.data[key][3])

    def add(self, key: Key, ttl: int, values: tuple[str, ...], owner: str, weight: int | None = None,
            geo: str | None = None) -> None:
        held = self.data.get(key)
        merged = (held[3] if held else frozenset()) | frozenset(values)
        self.data[key] = (ttl, weight, geo, merged)
        self.owners[key] = self.owners.get(key, frozenset()) | {owner}
        self._by_owner[(key, owner)] = self._by_owner.get((key, owner), frozenset()) | frozenset(values)


def expected(model: Model) -> Expected:
    out = Expected()
    zone = model.zone
    statics = [(label, held) for label, held in sorted(model.statics.items()) if held is not None]
    for spec in model.active():
        state = model.clusters[spec.name]
        for label, (rtype, values, ttl) in statics:
            out.add((f"{label}.{zone}", rtype, ""), ttl, tuple(v.lower() if rtype == "CNAME" else v for v in values),
                    spec.id)
        for host in sorted(state.web_hosts):
            if (host, "A") not in BLOCKED:
                out.add((f"{host}.{zone}", "A", ""), model.web_ttl or SIMPLE_TTL, state.web_ips, spec.id)
        for host in sorted(state.api_hosts):
            _loadbalanced(out, model, spec, state, f"{host}.{zone}")
    kuadrant = "version=1;groups=" + "&&".join(model.groups)
    gitdns = f"version=1;serial={model.serial};groups={'&&'.join(sorted(model.groups))}"
    out.groups = {f"kuadrant-active-groups.{zone}": kuadrant, f"gitdns-active-groups.{zone}": gitdns}
    return out


def _loadbalanced(out: Expected, model: Model, spec: ClusterSpec, state: ClusterState, host: str) -> None:
    if not model.routing:  # flattened: the simple layout with the zone's simple TTL
        out.add((host, "A", ""), SIMPLE_TTL, state.api_ips, spec.id)
        return
    target = f"{short_hash(spec.id, 6)}-{short_hash('api-gw-ingress', 6)}.klb.{host}"
    geo = spec.geo.lower()
    weight = model.gcp_weight if spec.cloud == "GCP" else model.default_weight
    out.add((target, "A", ""), INNER_TTL, state.api_ips, spec.id)
    out.add((f"{geo}.klb.{host}", "CNAME", target), INNER_TTL, (target,), spec.id, weight=weight)
    out.add((f"klb.{host}", "CNAME", spec.geo), OUTER_TTL, (f"{geo}.klb.{host}",), spec.id, geo=spec.geo)
    if spec.geo == DEFAULT_GEO:
        out.add((f"klb.{host}", "CNAME", "default"), OUTER_TTL, (f"{DEFAULT_GEO.lower()}.klb.{host}",), spec.id,
                geo="*")
    out.add((host, "CNAME", ""), OUTER_TTL, (f"klb.{host}",), spec.id)
