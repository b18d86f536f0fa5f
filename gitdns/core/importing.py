"""What `gitdns import` takes from a zone, and what it leaves with a reason (pure).

`sort_zone` splits a snapshot of an existing zone into:

- ``records``: the data records a RecordSet can hold, to be written as YAML (`documents`);
- ``managed``: records an owner's ownership TXT claims (a Kuadrant dns-operator or gitdns
  owner), by owner: that owner keeps them, and their TXT is never data;
- ``provider``: the zone apex's NS (and the SOA, which no snapshot holds): the provider's;
- ``refused``: everything else, each by name with why: a type the target provider cannot
  hold (from the snapshot's ``skipped`` and from the provider's capabilities), routing a
  RecordSet cannot express (weighted, geo, an alias), a value, TTL or name a RecordSet
  refuses, a malformed ownership TXT, gitdns's own bookkeeping records.

Nothing is dropped silently: every record set of the snapshot lands in exactly one of them
(`Sorted.total`).  `documents` lays the records out as RecordSet documents, one per zone or
one per name prefix, in a stable order (name, then type; values sorted), TTLs kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gitdns.core.names import reserved_prefix
from gitdns.core.owner.zone import parse_heartbeat
from gitdns.core.plan.planner import decode_zone
from gitdns.core.rdata import value_error
from gitdns.core.records import RECORD_TYPES, RecordKey, RecordSet, ZoneSnapshot, normalize_name

API_VERSION = "gitdns.io/v1alpha1"
MAX_TTL = 604800
_LABEL = re.compile(r"[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?")
_NAME_CHARS = re.compile(r"[^a-z0-9-]+")
APEX = "@"


@dataclass(frozen=True, slots=True)
class Refused:
    key: RecordKey
    why: str

    def line(self) -> str:
        return f"{self.key}: {self.why}"


@dataclass(slots=True)
class Sorted:
    zone: str
    records: list[RecordSet] = field(default_factory=list)
    managed: dict[str, list[RecordKey]] = field(default_factory=dict)
    provider: list[RecordKey] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    present: list[RecordKey] = field(default_factory=list)  # a RecordSet of the repository holds it already
    ownership_txt: int = 0  # ownership TXT record sets seen (the managed records' bookkeeping)

    @property
    def total(self) -> int:
        """Data record sets accounted for (ownership TXT aside)."""
        return (len(self.records) + sum(len(k) for k in self.managed.values()) + len(self.provider)
                + len(self.refused) + len(self.present))

    def drop_present(self, keys: Iterable[RecordKey]) -> None:
        """Records the repository's RecordSets hold already (whatever their values: a second
        RecordSet would add values to a multi-value record) are not imported again."""
        have = set(keys)
        self.present.extend(r.key for r in self.records if r.key in have)
        self.records = [r for r in self.records if r.key not in have]


def _name_error(name: str, zone: str) -> str | None:
    relative = name[: -len(zone) - 1] if name != zone else ""
    labels = relative.split(".") if relative else []
    if labels and labels[0] == "*":
        labels = labels[1:]
    if "*" in labels:
        return "a wildcard label '*' is only allowed first"
    for label in labels:
        if not _LABEL.fullmatch(label):
            return f"label {label!r} is not a host label a RecordSet takes (letters, digits, '-', '_')"
    if len(name) > 253:
        return "the name is longer than 253 characters"
    return None


def _refusal(rec: RecordSet, zone: str, types: frozenset[str], target: str) -> str | None:
    if rec.type not in types:
        return f"record type {rec.type} is not supported by {target}"
    if rec.set_id or rec.weight is not None or rec.geo is not None:
        kind = "geo" if rec.geo is not None else "weighted" if rec.weight is not None else "routing policy"
        return (f"a {kind} row (set identifier {rec.set_id!r}) cannot be a RecordSet record: a DNSPolicy "
                "publishes weighted and geo rows")
    if any(v.startswith("ALIAS ") for v in rec.values):
        return "an alias record cannot be a RecordSet record"
    if not 1 <= rec.ttl <= MAX_TTL:
        return f"TTL {rec.ttl} is outside 1..{MAX_TTL}"
    wrong = _name_error(rec.name, zone)
    if wrong is not None:
        return wrong
    for value in rec.values:
        wrong = value_error(rec.type, value)
        if wrong is not None:
            return wrong
    if rec.type == "TXT" and any(v.startswith("heritage=") for v in rec.values):
        return "an ownership TXT gitdns cannot read (malformed): neither data nor anyone's claim"
    return None


def sort_zone(snapshot: ZoneSnapshot, *, types: frozenset[str] = RECORD_TYPES, target: str = "local",
              names: Mapping[str, str] | None = None) -> Sorted:
    """Sort ``snapshot``'s record sets (see the module).  ``types`` are the record types the
    target provider ``target`` holds; ``names`` maps owner ids to the Cluster names git knows."""
    zone = normalize_name(snapshot.zone)
    out = Sorted(zone)
    obs = decode_zone(snapshot)
    out.ownership_txt = len(snapshot.records) - len(obs.data)
    for key in snapshot.skipped:
        out.refused.append(Refused(key, f"record type {key.type} is not supported by gitdns (nor by {target})"))
    names = names or {}
    claimed: dict[RecordKey, list[str]] = {}
    for key, entries in obs.owners.items():
        for owner in entries:
            claimed.setdefault(key, []).append(owner)
    for key, rec in sorted(obs.data.items()):
        owners = claimed.get(key)
        if owners:  # listed once, under every owner that claims it
            out.managed.setdefault(",".join(names.get(o, o) for o in sorted(owners)), []).append(key)
            continue
        if key.name == zone and key.type == "NS":
            out.provider.append(key)
            continue
        if parse_heartbeat(rec) is not None or reserved_prefix(key.name.split(".", 1)[0]) is not None:
            out.refused.append(Refused(key, "gitdns's own bookkeeping record (a heartbeat, group or lock record)"))
            continue
        why = _refusal(rec, zone, types, target)
        if why is not None:
            out.refused.append(Refused(key, why))
        else:
            out.records.append(rec)
    out.refused.sort(key=lambda r: (r.key.name, r.key.type, r.key.set_id))
    return out


# --- documents ------------------------------------------------------------------------------------


def order(rec: RecordSet) -> tuple[list[str], str]:
    """The documents' order: by name from the apex down (a subtree together), then type."""
    return rec.name.split(".")[::-1], rec.type


def relative_name(name: str, zone: str) -> str:
    return APEX if name == zone else name[: -len(zone) - 1]


def prefix_of(name: str, zone: str) -> str:
    """The label just below the apex (``a.b.example.com`` -> ``b``; the apex -> ``@``)."""
    rel = relative_name(name, zone)
    return APEX if rel == APEX else rel.rsplit(".", 1)[-1]


def resource_name(*parts: str) -> str:
    """A metadata.name from ``parts``: lower-case letters, digits and '-', at most 63."""
    text = "-".join(p for p in parts if p)
    text = _NAME_CHARS.sub("-", text.lower()).strip("-")
    return (text[:63].rstrip("-")) or "imported"


def _file_stem(prefix: str, taken: set[str]) -> str:
    base = "apex" if prefix == APEX else resource_name(prefix.replace("*", "wildcard").replace("_", "u-"))
    stem, n = base, 2
    while stem in taken:
        stem, n = f"{base}-{n}", n + 1
    taken.add(stem)
    return stem


@dataclass(frozen=True, slots=True)
class Document:
    """One RecordSet document: its file stem (with --split), its metadata.name and body."""

    stem: str
    name: str
    body: dict[str, object]


def _record(rec: RecordSet, zone: str) -> dict[str, object]:
    return {"name": relative_name(rec.name, zone), "type": rec.type, "ttl": rec.ttl, "values": list(rec.values)}


def documents(records: Iterable[RecordSet], zone: str, zone_name: str | None, base: str,
              split: bool = False) -> list[Document]:
    """RecordSet documents for ``records`` (sorted by name then type): one, or one per name
    prefix with ``split``.  ``zone_name`` is the Zone's metadata.name (``spec.zone``); without
    one, record names are written absolute with a trailing dot so that they place themselves."""
    groups: dict[str, list[RecordSet]] = {}
    for rec in sorted(records, key=order):
        groups.setdefault(prefix_of(rec.name, zone) if split else "", []).append(rec)
    out: list[Document] = []
    taken: set[str] = set()
    for prefix, recs in groups.items():
        stem = _file_stem(prefix, taken) if split else resource_name(base)
        name = resource_name(base, stem) if split else resource_name(base)
        spec: dict[str, object] = {}
        if zone_name:
            spec["zone"] = zone_name
            spec["records"] = [_record(r, zone) for r in recs]
        else:
            spec["records"] = [{**_record(r, zone), "name": r.name + "."} for r in recs]
        out.append(Document(stem, name, {"apiVersion": API_VERSION, "kind": "RecordSet",
                                         "metadata": {"name": name}, "spec": spec}))
    return out


# --- YAML text --------------------------------------------------------------------------------------

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_NOT_STRINGS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null"})


def _is_string_when_plain(text: str, resolver: list[object]) -> bool:
    """Whether YAML 1.2 (the loader's resolution, `gitdns.core.yamlparse`) reads the plain
    scalar ``text`` as a string; ``resolver`` holds the one resolver a document set uses."""
    from ruamel.yaml.nodes import ScalarNode
    from ruamel.yaml.resolver import VersionedResolver

    if not resolver:
        resolver.append(VersionedResolver(version=(1, 2)))
    tag = resolver[0].resolve(ScalarNode, text, (True, False))  # type: ignore[attr-defined]
    return bool(tag == "tag:yaml.org,2002:str")


def scalar(text: str, plain_ok: dict[str, bool], resolver: list[object]) -> str:
    """``text`` as a YAML scalar that reads back as this string: plain when it is a run of
    letters, digits and ``_ . / -`` that YAML 1.2 resolves to a string (not ``10``, ``1.5``,
    ``true``, ``null``), else double-quoted with JSON's escapes, which YAML's double-quoted
    style reads alike (``ensure_ascii``: every character outside ASCII as ``\\uXXXX``)."""
    ok = plain_ok.get(text)
    if ok is None:
        if not _PLAIN.fullmatch(text):
            ok = False
        elif _WORD.fullmatch(text) and text.lower() not in _NOT_STRINGS:
            ok = True  # starts with a letter, not a YAML 1.1/1.2 boolean or null: a string
        else:
            ok = _is_string_when_plain(text, resolver)  # a number, perhaps: YAML's own resolver says
        plain_ok[text] = ok
    return text if ok else json.dumps(text, ensure_ascii=True)


def yaml_text(docs: Iterable[Document], header: str) -> str:
    """The documents as YAML: a comment ``header`` line before each, ``values`` as flow lists.
    Written by hand for speed (the representer took 4 s for 10,000 records); every scalar goes
    through `scalar`, and the tests load the text back through the loader the agents use."""
    out: list[str] = []
    cache: dict[str, bool] = {}
    resolver: list[object] = []
    for i, doc in enumerate(docs):
        if i:
            out.append("---")
        out.append(f"# {header}")
        body = doc.body
        spec = body["spec"]
        assert isinstance(spec, dict)
        out.append(f"apiVersion: {body['apiVersion']}")
        out.append(f"kind: {body['kind']}")
        out.append(f"metadata: {{name: {scalar(doc.name, cache, resolver)}}}")
        out.append("spec:")
        if "zone" in spec:
            out.append(f"  zone: {scalar(str(spec['zone']), cache, resolver)}")
        out.append("  records:")
        for rec in spec["records"]:
            out.append(f"  - name: {scalar(rec['name'], cache, resolver)}")
            out.append(f"    type: {scalar(rec['type'], cache, resolver)}")
            out.append(f"    ttl: {int(rec['ttl'])}")
            out.append(f"    values: [{', '.join(scalar(v, cache, resolver) for v in rec['values'])}]")
    return "\n".join(out) + "\n"
