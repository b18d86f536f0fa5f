"""The soak's independent view of the zone: each backend read without gitdns, and the
invariants checked on every read.

Readers (each returns the zone as rows ``(name, type, set id) -> (ttl, weight, geo, values)``
and the problems met parsing it):

- `LocalZone` reads the `local` store file in its documented format (docs/architecture.md,
  "The `local` record store": one JSON document, rows ``[name, type, set_id, ttl, weight, geo,
  [values]]``) with ``json`` alone, and parses every rendered view (``<zone>.views/*.zone``) with
  dnspython;
- `BindZone` transfers the zone from BIND by AXFR (TSIG-signed) and parses it with dnspython
  (``dns.zone.from_xfr``, then the text written back and parsed again);
- `MotoZone` lists the hosted zone from moto with boto3 and parses every value as rdata of its
  type.

`Checker.observe` judges one read against the desired state (`soak_model.Expected`):

- **foreign records unchanged**: what the soak wrote before the agents started (and BIND's own
  apex NS and ``ns1`` A) is there with its exact content, and no ownership TXT claims it;
- **no data record without its ownership TXT**: every other data record has at least one (a
  record's TXT is written before it and deleted after it, so never even for one read);
- **no orphan ownership TXT**: a TXT whose record is absent is allowed only while a write may
  still be under way (TXT first, or a partial batch): not for longer than `Limits.window`;
- **no live owner's value missing**: a value an owner in git still publishes, once seen in the
  zone, is never absent for longer than `Limits.window` (unless it became wanted less than
  `Limits.settle` before it went: an agent still on the previous revision may drop a value the
  next commit asks back, and puts it back on its next pass);
- **the zone parses** (the reader's problems).

`Checker.converged` says whether the read equals the desired union exactly: every data record
(TTL, weight, geo and values), the owners of each (by the TXT names' owner hash), no other
ownership TXT, and the two active-groups TXT.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.zone

from bench.soak_model import FOREIGN, Content, Expected, Key, short_hash

Rows = dict[Key, Content]
OWNERSHIP = re.compile(r"^kuadrant-([0-9a-z]{8})-([a-z0-9]+)-(.+)$")
APEX_OWNERSHIP = re.compile(r"^kuadrant-([0-9a-z]{8})-([a-z0-9]+)$")
HOUSEKEEPING = ("gitdns-heartbeat-", "gitdns-lock-")


def txt_text(rdata: Any) -> str:
    return b"".join(rdata.strings).decode("utf-8", "replace")


def foreign_rows(zone: str) -> Rows:
    return {(f"{f.label}.{zone}", f.type, ""): (f.ttl, None, None, frozenset(f.values)) for f in FOREIGN}


# --- readers ---------------------------------------------------------------------------------
class LocalZone:
    """The `local` store file and its rendered views."""

    name = "local"

    def __init__(self, store: Path, zone: str) -> None:
        self.store, self.zone = store, zone
        self.path = store / f"{zone}.json"
        self._views: dict[Path, tuple[int, int]] = {}

    def plant(self) -> Rows:
        """The foreign records, written as the store's first version (before any agent)."""
        rows = foreign_rows(self.zone)
        lines = ",\n".join(json.dumps([k[0], k[1], k[2], c[0], c[1], c[2], sorted(c[3])])
                            for k, c in sorted(rows.items()))
        self.store.mkdir(parents=True, exist_ok=True)
        header = json.dumps({"format": "gitdns-store", "formatVersion": 1, "zone": self.zone, "version": 1},
                            separators=(",", ":"))
        self.path.write_text(f'{header[:-1]},"records":[\n{lines}\n]}}\n')
        return rows

    def read(self) -> tuple[Rows, list[str]]:
        problems: list[str] = []
        try:
            doc = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}, [f"{self.path.name}: missing"]
        except ValueError as exc:
            return {}, [f"{self.path.name}: not JSON ({exc})"]
        if (doc.get("format"), doc.get("formatVersion"), doc.get("zone")) != ("gitdns-store", 1, self.zone):
            problems.append(f"{self.path.name}: header {doc.get('format')!r} {doc.get('formatVersion')!r} "
                            f"{doc.get('zone')!r}")
        rows: Rows = {}
        for row in doc.get("records") or []:
            name, rtype, set_id, ttl, weight, geo, values = row
            key = (name, rtype, set_id)
            if key in rows:
                problems.append(f"{self.path.name}: {key} twice")
            rows[key] = (ttl, weight, geo, frozenset(values))
        problems += self._parse_views()
        return rows, problems

    def _parse_views(self) -> list[str]:
        views = self.store / f"{self.zone}.views"
        problems = []
        for path in sorted(views.glob("*.zone")) if views.is_dir() else []:
            try:
                stat = path.stat()
                stamp = (stat.st_mtime_ns, stat.st_size)
                if self._views.get(path) == stamp:
                    continue
                dns.zone.from_text(path.read_text(), origin=self.zone + ".", relativize=False)
                self._views[path] = stamp
            except FileNotFoundError:
                continue
            except (dns.exception.DNSException, ValueError, UnicodeDecodeError) as exc:
                problems.append(f"view {path.name} does not parse: {type(exc).__name__}: {exc}")
        return problems


class BindZone:
    """BIND by AXFR (``server``: tests/e2e/dns_servers.DnsServer)."""

    name = "bind"

    def __init__(self, server: Any, zone: str) -> None:
        self.server, self.zone = server, zone

    def plant(self) -> Rows:
        message = self.server.new_update()
        for f in FOREIGN:
            for value in f.values:
                rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(f.type),
                                            f'"{value}"' if f.type == "TXT" else value)
                message.add(dns.name.from_text(f"{f.label}.{self.zone}."), f.ttl, rdata)
        rcode = self.server.update(message)
        if rcode != "NOERROR":
            raise RuntimeError(f"writing the foreign records to BIND: {rcode}")
        rows, _ = self.read()
        return {k: c for k, c in rows.items() if k[1] != "SOA"}  # apex NS and ns1 A are BIND's own

    def read(self) -> tuple[Rows, list[str]]:
        try:
            zone = self.server.transfer()
        except (dns.exception.DNSException, OSError, EOFError) as exc:
            return {}, [f"AXFR: {type(exc).__name__}: {exc}"]
        problems = []
        try:
            dns.zone.from_text(zone.to_text(relativize=False), origin=self.zone + ".", relativize=False)
        except dns.exception.DNSException as exc:
            problems.append(f"the transferred zone does not parse again: {exc}")
        rows: Rows = {}
        for name, rdataset in zone.iterate_rdatasets():
            rtype = dns.rdatatype.to_text(rdataset.rdtype)
            if rtype == "TXT":
                values = frozenset(txt_text(rd) for rd in rdataset)
            else:
                values = frozenset(rd.to_text().rstrip(".").lower() if rtype in ("CNAME", "NS") else rd.to_text()
                                   for rd in rdataset)
            rows[(str(name).rstrip(".").lower(), rtype, "")] = (rdataset.ttl, None, None, values)
        return rows, problems


class MotoZone:
    """The hosted zone on moto, listed with boto3 (``client``; ``zone_id``)."""

    name = "route53"

    def __init__(self, client: Any, zone_id: str, zone: str) -> None:
        self.client, self.zone_id, self.zone = client, zone_id, zone

    def plant(self) -> Rows:
        changes = [{"Action": "CREATE", "ResourceRecordSet": {
            "Name": f"{f.label}.{self.zone}.", "Type": f.type, "TTL": f.ttl,
            "ResourceRecords": [{"Value": f'"{v}"' if f.type == "TXT" else v} for v in f.values]}} for f in FOREIGN]
        self.client.change_resource_record_sets(HostedZoneId=self.zone_id, ChangeBatch={"Changes": changes})
        rows, _ = self.read()
        return {k: c for k, c in rows.items() if k[1] != "SOA"}  # with the apex NS moto made

    def read(self) -> tuple[Rows, list[str]]:
        from bench.soak_peers import geo_code

        rows: Rows = {}
        problems: list[str] = []
        try:
            pages = list(self.client.get_paginator("list_resource_record_sets").paginate(HostedZoneId=self.zone_id))
        except Exception as exc:  # a failed read is reported, not judged
            return {}, [f"ListResourceRecordSets: {type(exc).__name__}: {exc}"]
        for page in pages:
            for rrset in page["ResourceRecordSets"]:
                name = str(rrset["Name"]).rstrip(".").lower().replace("\\052", "*")
                rtype = str(rrset["Type"])
                if rtype == "SOA":
                    continue  # moto's own (it lists its value as a Python dict's text); never gitdns's
                values = []
                for raw in (r["Value"] for r in rrset.get("ResourceRecords", [])):
                    try:
                        rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(rtype), raw)
                    except dns.exception.DNSException as exc:
                        problems.append(f"{name} {rtype} value {raw!r} does not parse: {exc}")
                        continue
                    values.append(txt_text(rdata) if rtype == "TXT" else raw.rstrip(".").lower()
                                  if rtype in ("CNAME", "NS") else raw)
                geo = rrset.get("GeoLocation")
                key = (name, rtype, str(rrset.get("SetIdentifier", "")))
                if key in rows:
                    problems.append(f"two rrsets {key}")
                rows[key] = (int(rrset.get("TTL", 0)), rrset.get("Weight"), geo_code(geo) if geo else None,
                             frozenset(values))
        return rows, problems


# --- the invariants --------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    window: float  # the validation window: a missing value or an orphan TXT may last this long
    settle: float  # how long after a value became wanted an agent may still drop it (older revision)


@dataclass(frozen=True)
class Ownership:
    owner_hash: str
    owner: str
    data: Key


def ownership(key: Key, values: Iterable[str], zone: str) -> Ownership | None:
    """The record an ownership TXT claims, and its owner (None: not an ownership TXT)."""
    name, rtype, set_id = key
    if rtype != "TXT":
        return None
    value = next((v for v in values if v.startswith("heritage=external-dns")), None)
    if value is None:
        return None
    labels = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    owner = labels.get("external-dns/owner", "")
    if name.endswith("." + zone) and (m := APEX_OWNERSHIP.match(name[: -len(zone) - 1])):
        return Ownership(m.group(1), owner, (zone, m.group(2).upper(), set_id))
    m = OWNERSHIP.match(name)
    if m is None:
        return None
    target = m.group(3)
    if target.startswith("wildcard."):
        target = "*" + target[len("wildcard"):]
    return Ownership(m.group(1), owner, (target, m.group(2).upper(), set_id))


@dataclass
class Violation:
    at: float
    what: str


@dataclass
class Checker:
    zone: str
    limits: Limits
    foreign: Rows
    violations: list[Violation] = field(default_factory=list)
    orphans_seen: int = 0  # orphan TXT seen (transient: written first, or a partial batch)
    missing_seen: int = 0  # live values seen missing, however briefly
    reads: int = 0
    transients: list[str] = field(default_factory=list)  # each transient state, when it ended
    expected: Expected = field(default_factory=Expected)
    _wanted_since: dict[tuple[str, Key, str], float] = field(default_factory=dict)
    _present: set[tuple[str, Key, str]] = field(default_factory=set)
    _missing: dict[tuple[str, Key, str], float] = field(default_factory=dict)
    _orphans: dict[Key, float] = field(default_factory=dict)
    _reported: set[tuple[Any, ...]] = field(default_factory=set)
    last_diff: list[str] = field(default_factory=list)

    def desire(self, expected: Expected, at: float) -> None:
        """A new desired state from ``at`` on."""
        claims = expected.claims()
        self._wanted_since = {c: self._wanted_since.get(c, at) for c in claims}
        self._present &= claims
        self._missing = {c: t for c, t in self._missing.items() if c in claims}
        self.expected = expected

    def _violate(self, at: float, tag: tuple[Any, ...], what: str) -> None:
        if tag not in self._reported:
            self._reported.add(tag)
            self.violations.append(Violation(at, what))

    def observe(self, at: float, rows: Rows, problems: list[str]) -> bool:
        """Judge one read; whether the zone equals the desired union."""
        self.reads += 1
        for problem in problems:
            self._violate(at, ("parse", problem), f"the zone does not parse: {problem}")
        if problems and not rows:
            return False
        owned: dict[Key, set[str]] = {}
        txt_keys: dict[Key, Ownership] = {}
        for key, content in rows.items():
            claim = ownership(key, content[3], self.zone)
            if claim is not None:
                txt_keys[key] = claim
                owned.setdefault(claim.data, set()).add(claim.owner_hash)
                if claim.owner and short_hash(claim.owner, 8) != claim.owner_hash:
                    self._violate(at, ("hash", key), f"ownership TXT {key} names owner {claim.owner} whose hash "
                                                     f"is not {claim.owner_hash}")
        self._foreign(at, rows, owned)
        data = {k: c for k, c in rows.items() if k not in txt_keys and not _housekeeping(k, self.zone)
                and k not in self.foreign and k[1] != "SOA"}
        for key in data:
            if key not in owned:
                self._violate(at, ("untxt", key), f"data record {key} {sorted(data[key][3])} has no ownership TXT")
        self._orphans_at(at, txt_keys, rows)
        self._values_at(at, rows)
        return self._converged(rows, data, owned, txt_keys)

    def _foreign(self, at: float, rows: Rows, owned: dict[Key, set[str]]) -> None:
        for key, content in self.foreign.items():
            if rows.get(key) != content:
                self._violate(at, ("foreign", key, rows.get(key)),
                              f"foreign record {key} changed: {content} -> {rows.get(key)}")
            if key in owned:
                self._violate(at, ("adopted", key), f"foreign record {key} got an ownership TXT ({owned[key]})")

    def _orphans_at(self, at: float, txt_keys: dict[Key, Ownership], rows: Rows) -> None:
        orphans = {k for k, claim in txt_keys.items() if claim.data not in rows}
        for key in orphans - set(self._orphans):
            self._orphans[key] = at
            self.orphans_seen += 1
        for key, since in self._orphans.items():
            if key not in orphans:
                self.transients.append(f"ownership TXT {key} without its record for {at - since:.1f} s")
        self._orphans = {k: t for k, t in self._orphans.items() if k in orphans}
        for key, since in self._orphans.items():
            if at - since > self.limits.window:
                self._violate(at, ("orphan", key, since), f"ownership TXT {key} without its record for "
                                                          f"{at - since:.1f} s (window {self.limits.window:g} s)")

    def _values_at(self, at: float, rows: Rows) -> None:
        for claim, since in self._wanted_since.items():
            owner, key, value = claim
            row = rows.get(key)
            if row is not None and value in row[3]:
                self._present.add(claim)
                gone = self._missing.pop(claim, None)
                if gone is not None:
                    self.transients.append(f"{key} value {value} of {owner} missing for {at - gone:.1f} s, "
                                           f"{gone - since:.1f} s after it became wanted")
                continue
            if claim not in self._present:
                continue  # not published yet since it became wanted: convergence, not loss
            if claim not in self._missing:
                self._missing[claim] = at
                self.missing_seen += 1
            gone = self._missing[claim]
            if gone - since >= self.limits.settle and at - gone > self.limits.window:
                self._violate(at, ("missing", claim, gone),
                              f"{key} lost value {value} of live owner {owner} for {at - gone:.1f} s "
                              f"(window {self.limits.window:g} s)")

    def _converged(self, rows: Rows, data: Rows, owned: dict[Key, set[str]], txt_keys: dict[Key, Ownership]) -> bool:
        exp = self.expected
        diff = [f"{k}: {data.get(k)} != {exp.data.get(k)}" for k in sorted(set(data) | set(exp.data))
                if data.get(k) != exp.data.get(k)]
        want_owners = {k: {short_hash(o, 8) for o in owners} for k, owners in exp.owners.items()}
        have_owners = {k: v for k, v in owned.items() if k not in self.foreign}
        diff += [f"owners of {k}: {sorted(have_owners.get(k, ()))} != {sorted(want_owners.get(k, ()))}"
                 for k in sorted(set(have_owners) | set(want_owners)) if have_owners.get(k, set()) != want_owners.get(k)
                 and (have_owners.get(k) or want_owners.get(k))]
        for name, value in exp.groups.items():
            held = rows.get((name, "TXT", ""))
            if held is None or not _same_groups(held[3], value):
                diff.append(f"{name}: {sorted(held[3]) if held else None} != {value}")
        self.last_diff = diff
        return not diff


def _same_groups(held: frozenset[str], value: str) -> bool:
    """An active-groups TXT holds ``value`` (the group list compared as a set)."""
    if len(held) != 1:
        return False

    def parse(text: str) -> tuple[Any, ...]:
        fields = dict(p.split("=", 1) for p in text.split(";") if "=" in p)
        return (fields.get("version"), fields.get("serial"), frozenset((fields.get("groups") or "").split("&&")))

    return parse(next(iter(held))) == parse(value)


def _housekeeping(key: Key, zone: str) -> bool:
    name = key[0]
    return key[1] == "TXT" and (name.startswith(HOUSEKEEPING) or name in (f"kuadrant-active-groups.{zone}",
                                                                       f"gitdns-active-groups.{zone}"))
