"""A stateful fake of the Route53 client calls the `route53` provider makes (`Route53Client`).

It enforces Route53's write rules as AWS documents them (moto 5.2.5 does not: it takes
stale deletes and duplicate creates, and its batches are not atomic):

- a ``ChangeResourceRecordSets`` request is atomic: every change is checked against the
  state the earlier changes of the request leave, and nothing lands when one fails;
- ``DELETE`` must match the current rrset exactly: TTL, values, set identifier, weight,
  geo location, health check id, alias target;
- ``CREATE`` fails when name + type + set identifier exists; ``UPSERT`` replaces;
- ≤ 1,000 ``ResourceRecord`` values and ≤ 32,000 value characters per request, UPSERT
  counted twice;
- after the request, per name and type: one row without a set identifier, or only rows
  with one and all of one routing type (weighted or geo), geo locations unique; a CNAME
  alone at its name; weights 0..255; a set identifier only with a routing policy;
- values: A/AAAA addresses, TXT quoted strings of ≤ 255 characters, one CNAME value,
  names inside the zone;
- errors are botocore ``ClientError``s whose codes and ``InvalidChangeBatch`` messages are
  shaped like AWS's (``Tried to delete resource record set [name='x.', type='A'] but it was
  not found``); messages of the consistency rules are our wording.

Listing sorts like Route53 (labels reversed, then type, then set identifier), pages with
``NextRecordName/Type/Identifier``, and returns ``*`` as ``\\052``.  ``throttle(n)`` makes
the next n calls fail with ``Throttling``; ``calls`` counts calls per operation.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections import Counter
from collections.abc import Mapping
from copy import deepcopy
from typing import Any

from botocore.exceptions import ClientError

Key = tuple[str, str, str]


def _name(native: str) -> str:
    text = re.sub(r"\\(\d{3})", lambda m: chr(int(m[1], 8)), native).lower()
    return text if text.endswith(".") else text + "."


def _sort_key(key: Key) -> tuple[tuple[str, ...], str, str]:
    return (tuple(reversed(key[0].rstrip(".").split("."))), key[1], key[2])


def _error(code: str, message: str, op: str, status: int = 400, headers: Mapping[str, str] | None = None,
           request_id: str = "0b9f7d3e-1a2b-4c5d-8e9f-aabbccddeeff") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message, "Type": "Sender"},
                        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": request_id,
                                             "HTTPHeaders": dict(headers or {})}}, op)


def _desc(rrs: Mapping[str, Any]) -> str:
    sid = f", set-identifier='{rrs['SetIdentifier']}'" if rrs.get("SetIdentifier") else ""
    return f"[name='{rrs['Name']}', type='{rrs['Type']}'{sid}]"


def _comparable(rrs: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in rrs.items() if k not in ("Name", "ResourceRecords")}
    out["Name"] = _name(rrs["Name"])
    out["Values"] = sorted(r["Value"] for r in rrs.get("ResourceRecords", ()))
    return out


_TXT_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _check_value(rtype: str, value: str) -> str:
    try:
        if rtype == "A":
            ipaddress.IPv4Address(value)
        elif rtype == "AAAA":
            ipaddress.IPv6Address(value)
    except ValueError:
        return (f"Invalid Resource Record: FATAL problem: {rtype}RRDATAIllegalIPv{4 if rtype == 'A' else 6}Address "
                f"(Value is not a valid IPv{4 if rtype == 'A' else 6} address) encountered with '{value}'")
    if rtype in ("TXT", "SPF"):
        rest = _TXT_STRING.sub("", value).strip()
        strings = _TXT_STRING.findall(value)
        if rest or not strings:
            return ("Invalid Resource Record: FATAL problem: InvalidCharacterString (Value should be enclosed in "
                    f"quotation marks) encountered with '{value}'")
        if any(len(re.sub(r"\\(\d{3}|.)", "x", s)) > 255 for s in strings):
            return ("Invalid Resource Record: FATAL problem: TXTRDATATooLong (Value is too long) encountered "
                    f"with '{value}'")
    return ""


class FakeRoute53:
    def __init__(self, *, insync_after: int = 0) -> None:
        self.zones: dict[str, dict[str, Any]] = {}  # id -> {"Name", "Private", "records": {Key: rrs}}
        self.health_checks: dict[str, dict[str, Any]] = {}
        self.tags: dict[str, dict[str, str]] = {}
        self.calls: Counter[str] = Counter()
        self.requests: list[list[dict[str, Any]]] = []  # every ChangeBatch.Changes received
        self._ids = itertools.count(1)
        self._throttle: list[tuple[str, dict[str, str]]] = []
        self._failures: list[ClientError] = []
        self.insync_after = insync_after
        self._changes: dict[str, int] = {}

    # --- test controls
    def add_zone(self, name: str, *, private: bool = False, zone_id: str | None = None, apex: bool = True) -> str:
        """A hosted zone; with ``apex`` the NS and SOA rows Route53 creates with every zone
        (the conformance suite wants a zone without foreign rows: ``apex=False``)."""
        zid = zone_id or f"Z{next(self._ids):012d}"
        origin = _name(name)
        self.zones[zid] = {"Name": origin, "Private": private, "records": {}}
        if apex:
            self.zones[zid]["records"] = self._apex(origin)
        return zid

    @staticmethod
    def _apex(apex: str) -> dict[Key, Any]:
        return {
            (apex, "NS", ""): {"Name": apex, "Type": "NS", "TTL": 172800,
                               "ResourceRecords": [{"Value": f"ns-{i}.awsdns.example."} for i in range(2)]},
            (apex, "SOA", ""): {"Name": apex, "Type": "SOA", "TTL": 900, "ResourceRecords": [
                {"Value": "ns-0.awsdns.example. awsdns-hostmaster.amazon.com. 1 7200 900 1209600 86400"}]},
        }

    def throttle(self, times: int = 1, code: str = "Throttling", retry_after: str | None = None) -> None:
        headers = {"Retry-After": retry_after} if retry_after else {}
        self._throttle.extend([(code, headers)] * times)

    def fail_next(self, error: ClientError) -> None:
        self._failures.append(error)

    def records(self, zone_id: str) -> list[dict[str, Any]]:
        recs = self.zones[zone_id]["records"]
        return [deepcopy(recs[k]) for k in sorted(recs, key=_sort_key)]

    def _enter(self, op: str) -> None:
        self.calls[op] += 1
        if self._failures:
            raise self._failures.pop(0)
        if self._throttle:
            code, headers = self._throttle.pop(0)
            raise _error(code, "Rate exceeded", op, 400, headers)

    def _zone(self, zone_id: str, op: str) -> dict[str, Any]:
        zid = zone_id.rsplit("/", 1)[-1]
        if zid not in self.zones:
            raise _error("NoSuchHostedZone", f"No hosted zone found with ID: {zid}", op, 404)
        return self.zones[zid]

    # --- zones
    def list_hosted_zones(self, **kw: Any) -> dict[str, Any]:
        self._enter("list_hosted_zones")
        ids = sorted(self.zones)
        start = ids.index(kw["Marker"]) if kw.get("Marker") in ids else 0
        size = int(kw.get("MaxItems", "100"))
        page = ids[start:start + size]
        out: dict[str, Any] = {"HostedZones": [
            {"Id": f"/hostedzone/{z}", "Name": self.zones[z]["Name"], "CallerReference": z,
             "Config": {"PrivateZone": self.zones[z]["Private"]},
             "ResourceRecordSetCount": len(self.zones[z]["records"])}
            for z in page], "IsTruncated": start + size < len(ids), "MaxItems": str(size)}
        if out["IsTruncated"]:
            out["NextMarker"] = ids[start + size]
        return out

    # --- records
    def list_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
        self._enter("list_resource_record_sets")
        zone = self._zone(kw["HostedZoneId"], "ListResourceRecordSets")
        size = min(int(kw.get("MaxItems", "300")), 300)
        keys = sorted(zone["records"], key=_sort_key)
        if kw.get("StartRecordName"):
            start = (_name(kw["StartRecordName"]), kw.get("StartRecordType", ""), kw.get("StartRecordIdentifier", ""))
            keys = [k for k in keys if _sort_key(k) >= _sort_key(start)]
        page, rest = keys[:size], keys[size:]
        out: dict[str, Any] = {"ResourceRecordSets": [self._listed(zone["records"][k]) for k in page],
                               "IsTruncated": bool(rest), "MaxItems": str(size)}
        if rest:
            nxt = zone["records"][rest[0]]
            out["NextRecordName"] = self._listed(nxt)["Name"]
            out["NextRecordType"] = nxt["Type"]
            if nxt.get("SetIdentifier"):
                out["NextRecordIdentifier"] = nxt["SetIdentifier"]
        return out

    @staticmethod
    def _listed(rrs: Mapping[str, Any]) -> dict[str, Any]:
        out = deepcopy(dict(rrs))
        out["Name"] = _name(rrs["Name"]).replace("*", "\\052")
        return out

    def change_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
        op = "ChangeResourceRecordSets"
        self._enter("change_resource_record_sets")
        zone = self._zone(kw["HostedZoneId"], op)
        changes: list[dict[str, Any]] = kw["ChangeBatch"]["Changes"]
        self.requests.append(deepcopy(changes))
        self._limits(changes, op)
        scratch = dict(zone["records"])
        errors: list[str] = []
        for change in changes:
            errors.extend(self._one(zone, scratch, change["Action"], change["ResourceRecordSet"], op))
        if not errors:
            touched = {_name(c["ResourceRecordSet"]["Name"]) for c in changes}
            errors.extend(self._consistency(scratch, touched))
        if errors:
            raise _error("InvalidChangeBatch", "[" + ", ".join(errors) + "]", op)
        zone["records"] = scratch
        cid = f"C{next(self._ids):012d}"
        self._changes[cid] = 0
        return {"ChangeInfo": {"Id": f"/change/{cid}", "Status": "PENDING" if self.insync_after else "INSYNC",
                               "SubmittedAt": "2026-01-01T00:00:00Z"}}

    def get_change(self, **kw: Any) -> dict[str, Any]:
        self._enter("get_change")
        cid = kw["Id"].rsplit("/", 1)[-1]
        self._changes[cid] += 1
        status = "INSYNC" if self._changes[cid] >= self.insync_after else "PENDING"
        return {"ChangeInfo": {"Id": f"/change/{cid}", "Status": status}}

    @staticmethod
    def _limits(changes: list[dict[str, Any]], op: str) -> None:
        values = chars = 0
        for change in changes:
            vals = [r["Value"] for r in change["ResourceRecordSet"].get("ResourceRecords", ())]
            times = 2 if change["Action"] == "UPSERT" else 1
            values += len(vals) * times
            chars += sum(len(v) for v in vals) * times
        if values > 1000:
            raise _error("InvalidChangeBatch", "Number of records limit of 1000 exceeded.", op)
        if chars > 32000:
            raise _error("InvalidChangeBatch", "Number of characters limit of 32000 exceeded.", op)

    def _valid(self, zone: Mapping[str, Any], rrs: Mapping[str, Any], op: str) -> str:
        name = _name(rrs["Name"])
        if not (name == zone["Name"] or name.endswith("." + zone["Name"])):
            return f"RRSet with DNS name {rrs['Name']} is not permitted in zone {zone['Name']}"
        routing = [k for k in ("Weight", "GeoLocation", "Failover", "Region", "MultiValueAnswer") if k in rrs]
        if bool(routing) != bool(rrs.get("SetIdentifier")) or len(routing) > 1:
            raise _error("InvalidInput", "Invalid request: a SetIdentifier needs exactly one routing policy "
                         f"and a routing policy needs a SetIdentifier in {_desc(rrs)}", op)
        if "Weight" in rrs and not 0 <= int(rrs["Weight"]) <= 255:
            raise _error("InvalidInput", f"1 validation error detected: Value '{rrs['Weight']}' at "
                         "'changeBatch.changes.member.resourceRecordSet.weight' failed to satisfy constraint: "
                         "Member must have value less than or equal to 255", op)
        if rrs.get("HealthCheckId") and rrs["HealthCheckId"] not in self.health_checks:
            return f"The health check {rrs['HealthCheckId']} does not exist for {_desc(rrs)}"
        values = [r["Value"] for r in rrs.get("ResourceRecords", ())]
        if "AliasTarget" not in rrs and (not values or "TTL" not in rrs):
            raise _error("InvalidInput", "Invalid request: Expected exactly one of [AliasTarget, all of [TTL, "
                         "and ResourceRecords], or TrafficPolicyInstanceId]", op)
        if rrs["Type"] == "CNAME" and len(values) > 1:
            return f"RRSet of type CNAME with DNS name {rrs['Name']} has more than one value"
        return next((w for w in (_check_value(rrs["Type"], v) for v in values) if w), "")

    def _one(self, zone: Mapping[str, Any], scratch: dict[Key, Any], action: str, rrs: dict[str, Any],
             op: str) -> list[str]:
        key: Key = (_name(rrs["Name"]), rrs["Type"], rrs.get("SetIdentifier", ""))
        current = scratch.get(key)
        if action == "DELETE":
            if current is None:
                return [f"Tried to delete resource record set {_desc(rrs)} but it was not found"]
            if _comparable(current) != _comparable(rrs):
                return [f"Tried to delete resource record set {_desc(rrs)} but the values provided do not match "
                        "the current values"]
            del scratch[key]
            return []
        why = self._valid(zone, rrs, op)
        if why:
            return [why]
        if action == "CREATE" and current is not None:
            return [f"Tried to create resource record set {_desc(rrs)} but it already exists"]
        stored = deepcopy(rrs)
        stored["Name"] = key[0]
        scratch[key] = stored
        return []

    @staticmethod
    def _consistency(records: Mapping[Key, Any], names: set[str]) -> list[str]:
        errors: list[str] = []
        for name in sorted(names):
            rows = [rrs for key, rrs in records.items() if key[0] == name]
            types = {r["Type"] for r in rows}
            if "CNAME" in types and len(types) > 1:
                errors.append(f"RRSet of type CNAME with DNS name {name} is not permitted as it conflicts with other "
                              "records with the same DNS name in zone")
            for rtype in sorted(types):
                same = [r for r in rows if r["Type"] == rtype]
                kinds = {next((k for k in ("Weight", "GeoLocation", "Failover", "Region", "MultiValueAnswer")
                               if k in r), "Simple") for r in same}
                if len(kinds) > 1 or ("Simple" in kinds and len(same) > 1):
                    errors.append(f"RRSet with DNS name {name} and type {rtype} cannot mix routing policies "
                                  f"({', '.join(sorted(kinds))})")
                geos = [tuple(sorted(r["GeoLocation"].items())) for r in same if "GeoLocation" in r]
                if len(geos) != len(set(geos)):
                    errors.append(f"RRSet with DNS name {name} and type {rtype} repeats a geo location")
        return errors

    # --- health checks
    def create_health_check(self, **kw: Any) -> dict[str, Any]:
        self._enter("create_health_check")
        ref, config = kw["CallerReference"], kw["HealthCheckConfig"]
        for check in self.health_checks.values():
            if check["CallerReference"] == ref:
                if check["HealthCheckConfig"] != config:
                    raise _error("HealthCheckAlreadyExists", "A health check with this CallerReference exists "
                                 "with other settings", "CreateHealthCheck", 409)
                return {"HealthCheck": deepcopy(check)}
        hid = f"hc-{next(self._ids):08d}"
        self.health_checks[hid] = {"Id": hid, "CallerReference": ref, "HealthCheckConfig": deepcopy(config)}
        return {"HealthCheck": deepcopy(self.health_checks[hid])}

    def get_health_check(self, **kw: Any) -> dict[str, Any]:
        self._enter("get_health_check")
        if kw["HealthCheckId"] not in self.health_checks:
            raise _error("NoSuchHealthCheck", "No health check exists", "GetHealthCheck", 404)
        return {"HealthCheck": deepcopy(self.health_checks[kw["HealthCheckId"]])}

    def list_health_checks(self, **kw: Any) -> dict[str, Any]:
        self._enter("list_health_checks")
        return {"HealthChecks": [deepcopy(c) for c in self.health_checks.values()], "IsTruncated": False}

    def change_tags_for_resource(self, **kw: Any) -> dict[str, Any]:
        self._enter("change_tags_for_resource")
        self.tags.setdefault(kw["ResourceId"], {}).update({t["Key"]: t["Value"] for t in kw.get("AddTags", ())})
        return {}

    def list_tags_for_resource(self, **kw: Any) -> dict[str, Any]:
        self._enter("list_tags_for_resource")
        tags = self.tags.get(kw["ResourceId"], {})
        return {"ResourceTagSet": {"ResourceType": kw["ResourceType"], "ResourceId": kw["ResourceId"],
                                   "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]}}

    def delete_health_check(self, **kw: Any) -> dict[str, Any]:
        self._enter("delete_health_check")
        hid = kw["HealthCheckId"]
        if hid not in self.health_checks:
            raise _error("NoSuchHealthCheck", "No health check exists", "DeleteHealthCheck", 404)
        in_use = any(r.get("HealthCheckId") == hid for z in self.zones.values() for r in z["records"].values())
        parent = any(hid in (c["HealthCheckConfig"].get("ChildHealthChecks") or ())
                     for c in self.health_checks.values())
        if in_use or parent:
            raise _error("HealthCheckInUse", "The health check is still referenced", "DeleteHealthCheck", 400)
        del self.health_checks[hid]
        self.tags.pop(hid, None)
        return {}
