"""Generate large, deterministic benchmark inputs (fixed seed; prints what it wrote).

    python bench/generate.py repo --hosts 10000 --out bench/out/repo-10k
    python bench/generate.py zone --records 10000 --out bench/out/zone-10k

``repo``: a desired-state repository in the docs/spec.md format — N listener hosts spread
over one or two zones on the ``local`` provider, ten clusters whose ``web-gw`` / ``api-gw``
gateways carry those hosts (each host on ``--replicas`` clusters), a simple and a
loadbalanced DNSPolicy, and static RecordSets.  Written as a handful of multi-document
files (at most ``--per-file`` documents per file).

``zone``: a decoded zone as the planner sees it — the records every cluster of such a repo
publishes in one zone (built by `gitdns.core.builder.desired_for_zone`, so names, hashes,
geo rows and weights are the real ones), merged across the owners (multi-owner A records
are unions), plus one ownership TXT per owner per key (`gitdns.core.registry.ownership_record`).
Written as a ``local`` store file ``store/<zone>.json``, the first owner's intent as
``intent.json`` (same row format) and ``meta.json`` (owner, revision, known owners).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

API_VERSION = "gitdns.io/v1alpha1"
DOMAINS = ("example.com", "example.net")
GEOS = ("GEO-EU", "US", "GEO-EU", "JP", "GEO-NA", "DE", "GEO-EU", "US", "GEO-AS", "BR")
CLOUDS = ("GCP", "AWS", "AZURE")
REVISION_TIME = 1_700_000_000
REVISION_SHA = "0123456789abcdef0123456789abcdef01234567"
RECORDS_PER_RECORDSET = 50

Doc = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Layout:
    """What to generate: ``hosts`` listener hosts over ``zones`` zones and ``clusters`` clusters."""

    hosts: int
    zones: int = 2
    clusters: int = 10
    replicas: int = 2  # clusters serving each host
    statics: int = -1  # static records; -1: hosts // 20
    seed: int = 42

    @property
    def static_count(self) -> int:
        return self.hosts // 20 if self.statics < 0 else self.statics


# --- documents -----------------------------------------------------------------------


def _doc(kind: str, name: str, spec: Doc) -> Doc:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _zone_name(domain: str) -> str:
    return domain.replace(".", "-")


def zone_docs(layout: Layout) -> list[Doc]:
    return [
        _doc("Zone", _zone_name(d), {"domain": d, "provider": {"type": "local", "settings": {"path": ".gitdns/zones"}}})
        for d in DOMAINS[: layout.zones]
    ]


def policy_docs() -> list[Doc]:
    simple = _doc("DNSPolicy", "web",
                  {"targetRef": {"gateway": "web-gw", "namespace": "ingress"}, "strategy": "simple"})
    balanced = _doc("DNSPolicy", "api", {
        "targetRef": {"gateway": "api-gw", "namespace": "ingress"},
        "strategy": "loadbalanced",
        "loadBalancing": {
            "weighted": {"defaultWeight": 120, "custom": [{"attribute": "cloud", "value": "GCP", "weight": 200}]},
            "geo": {"defaultGeo": "GEO-EU"},
        },
    })
    return [simple, balanced]


def host_name(index: int, domain: str) -> str:
    kind = "api" if index % 2 == 0 else "web"
    return f"{kind}-{index:06d}.{domain}"


def host_assignment(layout: Layout) -> list[list[str]]:
    """For each cluster, the hosts its gateways carry (even hosts on api-gw, odd on web-gw)."""
    rng = random.Random(layout.seed)
    per_cluster: list[list[str]] = [[] for _ in range(layout.clusters)]
    domains = DOMAINS[: layout.zones]
    for index in range(layout.hosts):
        host = host_name(index, domains[index % len(domains)])
        for cluster in rng.sample(range(layout.clusters), layout.replicas):
            per_cluster[cluster].append(host)
    return per_cluster


def cluster_ids(layout: Layout) -> list[str]:
    rng = random.Random(layout.seed + 1)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(layout.clusters)]


def _gateway(name: str, addresses: list[str], hosts: list[str]) -> Doc:
    return {"name": name, "namespace": "ingress", "addresses": addresses,
            "listeners": [{"hostname": h} for h in hosts]}


def cluster_docs(layout: Layout) -> list[Doc]:
    docs = []
    for index, (ident, hosts) in enumerate(zip(cluster_ids(layout), host_assignment(layout), strict=True)):
        api_addresses = [f"10.{index}.1.1"] + ([f"2001:db8::{index + 1}"] if index % 2 == 0 else [])
        spec = {
            "id": ident,
            "geo": GEOS[index % len(GEOS)],
            "attributes": {"cloud": CLOUDS[index % len(CLOUDS)]},
            "gateways": [
                _gateway("api-gw", api_addresses, [h for h in hosts if h.startswith("api-")]),
                _gateway("web-gw", [f"10.{index}.0.1"], [h for h in hosts if h.startswith("web-")]),
            ],
        }
        docs.append(_doc("Cluster", f"cluster-{index:02d}", spec))
    return docs


def _static_record(index: int) -> Doc:
    name = f"static-{index:06d}"
    kind = index % 5
    if kind == 0:
        return {"name": name, "type": "A", "values": [f"192.0.2.{index % 250 + 1}"]}
    if kind == 1:
        return {"name": name, "type": "TXT", "ttl": 3600, "values": [f"v=spf1 ip4:192.0.2.{index % 250 + 1} -all"]}
    if kind == 2:
        return {"name": name, "type": "CNAME", "values": [f"static-{index - 2:06d}"]}
    if kind == 3:
        return {"name": name, "type": "MX", "ttl": 3600, "values": [f"10 mx{index % 3}.mail.example.org."]}
    return {"name": name, "type": "CAA", "values": ['0 issue "letsencrypt.org"']}


def recordset_docs(layout: Layout) -> list[Doc]:
    domains = DOMAINS[: layout.zones]
    docs = []
    for start in range(0, layout.static_count, RECORDS_PER_RECORDSET):
        stop = min(start + RECORDS_PER_RECORDSET, layout.static_count)
        domain = domains[(start // RECORDS_PER_RECORDSET) % len(domains)]
        spec = {"zone": _zone_name(domain), "records": [_static_record(i) for i in range(start, stop)]}
        docs.append(_doc("RecordSet", f"static-{start // RECORDS_PER_RECORDSET:05d}", spec))
    return docs


def repo_files(layout: Layout, per_file: int = 1000) -> dict[str, list[Doc]]:
    """``{relative path: documents}``: zones, policies, clusters and static records."""
    files: dict[str, list[Doc]] = {"zones.yaml": zone_docs(layout), "policies.yaml": policy_docs(),
                                   "clusters.yaml": cluster_docs(layout)}
    statics = recordset_docs(layout)
    for part, start in enumerate(range(0, len(statics), per_file)):
        files[f"records/static-{part:03d}.yaml"] = statics[start : start + per_file]
    return files


# --- a small YAML emitter (block style, flow for small leaf mappings) ----------------

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
_RESERVED = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"})


def scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED and not text.endswith(":"):
        return text
    return json.dumps(text)


def _is_leaf(value: Any) -> bool:
    return not isinstance(value, dict | list)


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return scalar(value)


def _flowable(value: Any) -> bool:
    """Small mappings of scalars and lists of scalars go on one line."""
    if isinstance(value, list):
        return all(_is_leaf(v) for v in value)
    if isinstance(value, dict):
        return len(value) <= 4 and all(_is_leaf(v) or (isinstance(v, list) and all(map(_is_leaf, v)))
                                       for v in value.values())
    return True


def emit(value: Any, indent: int = 0) -> Iterator[str]:
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            if _flowable(item):
                yield f"{pad}{key}: {_flow(item)}"
            else:
                yield f"{pad}{key}:"
                yield from emit(item, indent + 2)
    elif isinstance(value, list):
        for item in value:
            if _flowable(item):
                yield f"{pad}- {_flow(item)}"
            else:
                lines = list(emit(item, indent + 2))
                yield f"{pad}- {lines[0].lstrip()}"
                yield from lines[1:]
    else:
        yield f"{pad}{scalar(value)}"


def dump_documents(docs: Sequence[Doc]) -> str:
    return "".join("---\n" * (i > 0) + "\n".join(emit(doc)) + "\n" for i, doc in enumerate(docs))


def write_repo(layout: Layout, out: Path, per_file: int = 1000) -> dict[str, int]:
    """Write the repository below ``out``; ``{path: documents}``."""
    written = {}
    for rel, docs in repo_files(layout, per_file).items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_documents(docs), encoding="utf-8")
        written[rel] = len(docs)
    return written


# --- zones for the planner ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZoneFixture:
    domain: str
    records: dict[Any, Any]  # RecordKey -> RecordSet: data and ownership TXT
    intent: tuple[Any, ...]  # the first owner's desired records
    owner: str
    owners: tuple[str, ...]
    revision_label: str


def _state_for(layout: Layout) -> Any:
    """The repo's `DesiredState`, through the project's own loader (no disk)."""
    from gitdns.adapters.repo import load_schemas
    from gitdns.core.model import Revision
    from gitdns.core.validate import check

    texts = {rel: dump_documents(docs) for rel, docs in repo_files(layout).items()}
    result = check(texts, load_schemas())
    if result.problems:
        raise SystemExit(f"generated repo does not validate: {result.problems[0].format()}")
    return replace(result.state, revision=Revision(REVISION_TIME, REVISION_SHA))


def merge_owner(records: dict[Any, Any], owned: Sequence[Any], owner: str, group: str | None,
                rev: str, domain: str) -> None:
    """Add one owner's records, as the planner would have written them: multi-value
    records without a set identifier are united, one ownership TXT per key."""
    from gitdns.core.records import MULTI_VALUE_TYPES
    from gitdns.core.registry import OwnerLabels, ownership_record

    for rec in owned:
        have = records.get(rec.key)
        if have is None:
            records[rec.key] = rec
        elif rec.type in MULTI_VALUE_TYPES and not rec.set_id:
            records[rec.key] = have.with_values(set(have.values) | set(rec.values))
        labels = OwnerLabels(owner=owner, group=group, rev=rev, targets=rec.values)
        txt, _ = ownership_record(rec, labels, domain)
        records[txt.key] = txt


def hosts_for_records(records: int, layout: Layout) -> int:
    """Hosts whose zone holds about ``records`` record sets (from a 400-host pilot)."""
    pilot = build_zone(replace(layout, hosts=400, zones=1, statics=10))
    return max(1, math.ceil(records * 400 / len(pilot.records)))


def build_zone(layout: Layout) -> ZoneFixture:
    from gitdns.core import builder

    state = _state_for(replace(layout, zones=1))
    zone = state.zones[0]
    rev = state.revision.label
    records: dict[Any, Any] = {}
    intents = []
    for cluster in state.clusters:
        owned = builder.desired_for_zone(state, cluster, zone)
        intents.append(owned)
        merge_owner(records, owned, cluster.id, cluster.group, rev, zone.domain)
    owners = tuple(c.id for c in state.clusters)
    return ZoneFixture(zone.domain, records, intents[0], owners[0], owners, rev)


def zone_for_records(records: int, seed: int = 42) -> ZoneFixture:
    """A one-zone fixture of at least (about) ``records`` record sets owned by ten owners."""
    base = Layout(hosts=0, zones=1, statics=-1, seed=seed)
    hosts = hosts_for_records(records, base)
    fixture = build_zone(replace(base, hosts=hosts, statics=max(10, hosts // 100)))
    if len(fixture.records) < records:  # the pilot's estimate fell short: scale up once
        hosts = math.ceil(hosts * records / len(fixture.records))
        fixture = build_zone(replace(base, hosts=hosts, statics=max(10, hosts // 100)))
    return fixture


def write_zone(fixture: ZoneFixture, out: Path) -> dict[str, int]:
    from gitdns.providers.local import encode_store

    (out / "store").mkdir(parents=True, exist_ok=True)
    (out / "store" / f"{fixture.domain}.json").write_bytes(encode_store(fixture.domain, 1, fixture.records))
    intent = {r.key: r for r in fixture.intent}
    (out / "intent.json").write_bytes(encode_store(fixture.domain, 1, intent))
    meta = {"zone": fixture.domain, "owner": fixture.owner, "owners": list(fixture.owners),
            "revision": fixture.revision_label, "records": len(fixture.records), "intent": len(intent)}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return {"records": len(fixture.records), "intent": len(intent), "owners": len(fixture.owners)}


# --- CLI --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate benchmark repos and zones (fixed seed).")
    sub = parser.add_subparsers(dest="what", required=True)
    rp = sub.add_parser("repo", help="a desired-state repository of N hosts")
    rp.add_argument("--hosts", type=int, default=10_000)
    rp.add_argument("--zones", type=int, choices=(1, 2), default=2)
    rp.add_argument("--clusters", type=int, default=10)
    rp.add_argument("--replicas", type=int, default=2, help="clusters serving each host")
    rp.add_argument("--statics", type=int, default=-1, help="static records (default: hosts // 20)")
    rp.add_argument("--per-file", type=int, default=1000, help="documents per file at most")
    zp = sub.add_parser("zone", help="a zone of about N records with ten owners, for the planner")
    zp.add_argument("--records", type=int, default=10_000)
    for p in (rp, zp):
        p.add_argument("--seed", type=int, default=42)
        p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.what == "repo":
        layout = Layout(args.hosts, args.zones, args.clusters, args.replicas, args.statics, args.seed)
        written = write_repo(layout, args.out, args.per_file)
        print(f"wrote {sum(written.values())} documents in {len(written)} files to {args.out}")
    else:
        counts = write_zone(zone_for_records(args.records, args.seed), args.out)
        print(f"wrote zone of {counts['records']} records ({counts['owners']} owners, "
              f"intent {counts['intent']}) to {args.out}")


if __name__ == "__main__":
    main()
