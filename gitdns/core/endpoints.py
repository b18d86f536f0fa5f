"""External-dns ``Endpoint`` entries <-> record sets, and Kuadrant's delegation names (pure).

A Kuadrant DNSRecord (and any resource with the external-dns Endpoint contract) lists its
records in ``spec.endpoints``: ``dnsName``, ``recordType``, ``targets``, ``recordTTL``,
``setIdentifier`` and ``providerSpecific[{name, value}]``.  `gitdns.core.render` writes
that shape for ``publisher: kuadrant`` zones with the provider-agnostic names ``weight``
and ``geo-code``; this module reads it back (the `endpoint` provider's zone resource, the
DNSRecords of remote clusters) and writes it again, with the same names, so the two never
drift (tests/core/test_endpoints.py renders through the template and parses the result).

Also here: the names and labels for delegation, Kuadrant's and those of its "Cluster Aware
DNSRecord Delegation" RFC — the authoritative record's name
``authoritative-record-<hash8(rootHost)>``, its labels, and the settings of an endpoint provider
(``ENDPOINT_GVR`` / ``ENDPOINT_GVK``, ``ENDPOINT_ZONE_RECORD_LABEL`` / ``CRD_ZONE_RECORD_LABEL``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitdns.core.names import TXT_PREFIX, lb_host, short_hash
from gitdns.core.records import RECORD_TYPES, RecordSet, in_zone, normalize_name
from gitdns.core.registry import decode_entry
from gitdns.core.render import GEO_CODE, WEIGHT

DEFAULT_TTL = 300  # external-dns: a missing recordTTL means "the provider's default"

# --- Kuadrant's names and labels (dns-operator) and the delegation RFC's --------------------
AUTHORITATIVE_LABEL = "kuadrant.io/authoritative-record"  # = "true" (Kuadrant)
AUTHORITATIVE_HASH_LABEL = "kuadrant.io/authoritative-record-hash"  # = hash8(rootHost) (Kuadrant)
PRIMARY_ZONE_LABEL = "kuadrant.io/primary-authoritative-zone-record"  # = rootHost (the delegation RFC)
AUTHORITATIVE_PREFIX = "authoritative-record-"

DNSRECORD_GROUP = "kuadrant.io"
DNSRECORD_VERSION = "v1alpha1"
DNSRECORD_PLURAL = "dnsrecords"

# endpoint provider settings: Kuadrant ships the GVR and ENDPOINT_ZONE_RECORD_LABEL keys,
# the delegation RFC names ENDPOINT_GVK and CRD_ZONE_RECORD_LABEL.  Both are accepted.
GVR_KEY = "ENDPOINT_GVR"
GVK_KEY = "ENDPOINT_GVK"
ZONE_LABEL_KEY = "ENDPOINT_ZONE_RECORD_LABEL"
CRD_ZONE_LABEL_KEY = "CRD_ZONE_RECORD_LABEL"
DEFAULT_GVR = "kuadrant.io/v1alpha1.dnsrecords"
DEFAULT_ZONE_LABEL = "kuadrant.io/zone-record=true"  # Kuadrant's default selector

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def kuadrant_hash(value: str, length: int = 8) -> str:
    """Kuadrant's ``ToBase36HashLen`` (`gitdns.core.names.short_hash`)."""
    return short_hash(value, length)


def root_host(spec_root_host: str) -> str:
    """Kuadrant's ``GetRootHost``: normalised, a leading ``*.`` dropped."""
    host = normalize_name(spec_root_host)
    return host[2:] if host.startswith("*.") else host


def authoritative_record_name(host: str) -> str:
    """``authoritative-record-<hash8(rootHost)>`` as Kuadrant names it."""
    return AUTHORITATIVE_PREFIX + kuadrant_hash(root_host(host), 8)


def authoritative_labels(host: str) -> dict[str, str]:
    """Both label sets: Kuadrant's (``authoritative-record``, ``-hash``) and the delegation RFC's
    ``primary-authoritative-zone-record=<rootHost>`` (dropped when the host is no valid
    label value, e.g. longer than 63 characters)."""
    host = root_host(host)
    labels = {AUTHORITATIVE_LABEL: "true", AUTHORITATIVE_HASH_LABEL: kuadrant_hash(host, 8)}
    if len(host) <= 63 and _LABEL_VALUE.fullmatch(host):
        labels[PRIMARY_ZONE_LABEL] = host
    return labels


def is_authoritative(labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return AUTHORITATIVE_LABEL in labels or PRIMARY_ZONE_LABEL in labels


# --- endpoint provider settings -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gvr:
    group: str
    version: str
    plural: str

    def __str__(self) -> str:
        return f"{self.group}/{self.version}.{self.plural}"


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"


def parse_gvr(text: str, *, kind: bool = False) -> Gvr:
    """``group/version.plural`` (``ENDPOINT_GVR``) or, with ``kind``, ``group/version.Kind``
    (``ENDPOINT_GVK``: the plural is the lower-case kind plus ``s``, as for DNSRecord)."""
    head, dot, last = text.strip().rpartition(".")
    group, slash, version = head.rpartition("/")
    if not (dot and slash and group and version and last) or not re.fullmatch(r"v\d+\w*", version):
        form = "group/version.Kind" if kind else "group/version.plural"
        raise ValueError(f"{text!r} is not {form} (e.g. {'kuadrant.io/v1alpha1.DNSRecord' if kind else DEFAULT_GVR})")
    return Gvr(group, version, _plural(last) if kind else last.lower())


def endpoint_gvr(settings: Mapping[str, str]) -> Gvr:
    """The zone resource type from ``ENDPOINT_GVR`` or ``ENDPOINT_GVK`` (not both, unless equal)."""
    gvr = settings.get(GVR_KEY, "").strip()
    gvk = settings.get(GVK_KEY, "").strip()
    by_gvr = parse_gvr(gvr) if gvr else None
    by_gvk = parse_gvr(gvk, kind=True) if gvk else None
    if by_gvr and by_gvk and by_gvr != by_gvk:
        raise ValueError(f"{GVR_KEY} ({by_gvr}) and {GVK_KEY} ({by_gvk}) name different resources")
    return by_gvr or by_gvk or parse_gvr(DEFAULT_GVR)


def parse_label_selector(text: str) -> tuple[tuple[str, str | None], ...]:
    """An equality selector ``a=b, c==d`` or keys alone (``a``: the label must exist).
    Returns ``(key, value or None)`` pairs; raises ValueError on anything else."""
    terms: list[tuple[str, str | None]] = []
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        if "!=" in raw or "(" in raw or raw.startswith("!"):
            raise ValueError(f"label selector term {raw!r}: only key=value and key are supported")
        key, sep, value = (s.strip() for s in re.split(r"(==?)", raw, maxsplit=1)) if "=" in raw else (raw, "", "")
        value = value.strip('"').strip("'")
        if not _LABEL_KEY.fullmatch(key) or (sep and not _LABEL_VALUE.fullmatch(value)):
            raise ValueError(f"label selector term {raw!r} is not a valid label key[=value]")
        terms.append((key, value if sep else None))
    if not terms:
        raise ValueError("the label selector is empty")
    return tuple(terms)


def zone_selector(settings: Mapping[str, str]) -> tuple[tuple[str, str | None], ...]:
    """The zone resources' selector: ``ENDPOINT_ZONE_RECORD_LABEL`` (Kuadrant) and/or
    ``CRD_ZONE_RECORD_LABEL`` (the delegation RFC; a key alone means "present, any value" and the
    zone is then the resource whose label value or rootHost is the zone's domain)."""
    terms: list[tuple[str, str | None]] = []
    for key in (ZONE_LABEL_KEY, CRD_ZONE_LABEL_KEY):
        text = settings.get(key, "").strip()
        if text:
            terms.extend(t for t in parse_label_selector(text) if t not in terms)
    return tuple(terms) or parse_label_selector(DEFAULT_ZONE_LABEL)


def selector_text(terms: Iterable[tuple[str, str | None]]) -> str:
    return ",".join(key if value is None else f"{key}={value}" for key, value in terms)


# --- endpoints <-> record sets --------------------------------------------------------------


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    raise ValueError(f"{what} must be an integer, not {value!r}")


def _routing(specific: Any, where: str) -> tuple[int | None, str | None]:
    weight: int | None = None
    geo: str | None = None
    if specific is None:
        return None, None
    if not isinstance(specific, list):
        raise ValueError(f"{where}: providerSpecific must be a list of {{name, value}}")
    for prop in specific:
        if not isinstance(prop, Mapping):
            raise ValueError(f"{where}: providerSpecific entries are {{name, value}} objects")
        name, value = prop.get("name"), prop.get("value")
        if name == WEIGHT:
            weight = _int(value, f"{where}: providerSpecific weight")
            if weight < 0:
                raise ValueError(f"{where}: negative weight {weight}")
        elif name == GEO_CODE:
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}: providerSpecific geo-code must be a non-empty string")
            geo = value.strip()
    return weight, geo


def record_from_endpoint(ep: Any, index: int = 0) -> RecordSet:
    """One Endpoint as a record set; ValueError (naming the entry) when it is not valid."""
    where = f"endpoints[{index}]"
    if not isinstance(ep, Mapping):
        raise ValueError(f"{where} is not an object")
    raw_name = ep.get("dnsName")
    if not isinstance(raw_name, str) or not raw_name.strip():
        raise ValueError(f"{where}: dnsName is missing")
    name = normalize_name(raw_name)
    where = f"{where} ({name})"
    rtype = str(ep.get("recordType") or "").upper()
    if rtype not in RECORD_TYPES:
        known = ", ".join(sorted(RECORD_TYPES))
        raise ValueError(f"{where}: recordType {ep.get('recordType')!r} is not one of {known}")
    targets = ep.get("targets")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t for t in targets):
        raise ValueError(f"{where}: targets must be a non-empty list of strings")
    values = [normalize_name(t) if rtype == "CNAME" else t for t in targets]
    if rtype == "CNAME" and len(set(values)) != 1:
        raise ValueError(f"{where}: a CNAME has exactly one target")
    ttl = _int(ep["recordTTL"], f"{where}: recordTTL") if ep.get("recordTTL") is not None else DEFAULT_TTL
    if ttl < 0:
        raise ValueError(f"{where}: negative recordTTL {ttl}")
    set_id = ep.get("setIdentifier") or ""
    if not isinstance(set_id, str):
        raise ValueError(f"{where}: setIdentifier must be a string")
    weight, geo = _routing(ep.get("providerSpecific"), where)
    return RecordSet(name, rtype, ttl, tuple(values), set_id, weight, geo)


def endpoint_from_record(rec: RecordSet) -> dict[str, Any]:
    """The Endpoint for a record set, in the order and with the names render.py writes."""
    ep: dict[str, Any] = {"dnsName": rec.name, "recordType": rec.type, "recordTTL": rec.ttl}
    if rec.set_id:
        ep["setIdentifier"] = rec.set_id
    ep["targets"] = list(rec.values)
    specific: list[dict[str, str]] = []
    if rec.geo is not None:
        specific.append({"name": GEO_CODE, "value": rec.geo})
    if rec.weight is not None:
        specific.append({"name": WEIGHT, "value": str(rec.weight)})
    if specific:
        ep["providerSpecific"] = specific
    return ep


def endpoints_from_records(records: Iterable[RecordSet]) -> list[dict[str, Any]]:
    return [endpoint_from_record(r) for r in sorted(records, key=lambda r: (r.name, r.type, r.set_id))]


def records_from_endpoints(endpoints: Any) -> tuple[RecordSet, ...]:
    """Every entry of a zone resource's ``spec.endpoints`` (ownership TXT included); raises
    ValueError on the first invalid entry or a key listed twice."""
    if endpoints is None:
        return ()
    if not isinstance(endpoints, list):
        raise ValueError("spec.endpoints is not a list")
    out: dict[tuple[str, str, str], RecordSet] = {}
    for index, ep in enumerate(endpoints):
        rec = record_from_endpoint(ep, index)
        key = (rec.name, rec.type, rec.set_id)
        if key in out:
            raise ValueError(f"endpoints[{index}]: {rec.key} is listed twice")
        out[key] = rec
    return tuple(out.values())


@dataclass(frozen=True, slots=True)
class SourceEndpoints:
    """A delegating DNSRecord's endpoints, or why they are refused."""

    records: tuple[RecordSet, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def source_endpoints(spec_root_host: str, endpoints: Any, zone: str | None = None) -> SourceEndpoints:
    """A remote DNSRecord's endpoints checked as Kuadrant checks them: each name equal to
    or under the root host (``*.`` dropped), no ownership TXT (a reserved name), no key
    twice; with ``zone``, inside it.  Any problem refuses the whole record."""
    host = root_host(spec_root_host)
    problems: list[str] = []
    if not host or "." not in host:
        return SourceEndpoints((), (f"spec.rootHost {spec_root_host!r} is not a host name",))
    try:
        records = records_from_endpoints(endpoints)
    except ValueError as exc:
        return SourceEndpoints((), (str(exc),))
    for rec in records:
        if not in_zone(rec.name, lb_host(host)):
            problems.append(f"{rec.key}: not equal to or under the rootHost {host}")
        elif zone is not None and not in_zone(rec.name, zone):
            problems.append(f"{rec.key}: outside zone {zone}")
        if rec.name.startswith(TXT_PREFIX) and decode_entry(rec) is not None:
            problems.append(f"{rec.key}: an ownership record; a delegating record lists data only")
        elif rec.name.split(".", 1)[0].startswith(TXT_PREFIX):
            problems.append(f"{rec.key}: names starting with {TXT_PREFIX} are reserved for ownership records")
    return SourceEndpoints(records if not problems else (), tuple(problems))


def data_names(records: Sequence[RecordSet]) -> frozenset[str]:
    """The names of the data records (ownership TXT decoded to the name they belong to)."""
    names: set[str] = set()
    for rec in records:
        entry = decode_entry(rec) if rec.type == "TXT" else None
        names.add(entry.key.name if entry is not None else rec.name)
    return frozenset(names)
