"""An HTTP-level fake of the Google Cloud DNS REST API v1 (stdlib only).

It answers the paths the google-cloud-dns client library calls, with the JSON shapes of the
API reference (https://cloud.google.com/dns/docs/reference/rest/v1):

- ``GET  /dns/v1/projects/{p}/managedZones``                      (``dnsName``, paging)
- ``GET  /dns/v1/projects/{p}/managedZones/{z}/rrsets``           (``name``, ``type``, paging)
- ``POST /dns/v1/projects/{p}/managedZones/{z}/changes``          (atomic create)
- ``GET  /dns/v1/projects/{p}/managedZones/{z}/changes/{id}``

What it enforces (as Cloud DNS documents it): a change is atomic; every ``deletions`` entry
must equal the current rrset exactly (name, type, ttl, rrdatas, routingPolicy) or the whole
change fails with HTTP 412 ``conditionNotMet`` (404 ``notFound`` when there is no such
rrset); an ``additions`` entry for an existing name+type that the change does not delete is
HTTP 409 ``alreadyExists``; one rrset per name+type; an rrset holds ``rrdatas`` or a
``routingPolicy`` (``geo`` or ``wrr``), never both; weights ≥ 0; geo locations are GCP region
names, each once; CNAME holds one rrdata and no other type at its name.

What it does NOT do: authentication (any or no token is accepted), IAM, quotas other than
the injected ones, DNSSEC, health-checked targets, primary/backup policies, fencing, serving
DNS, change status ``pending`` (every change is ``done`` at once), rrdata syntax checks.
Faults are injected with `CloudDnsFake.fail_next` and `CloudDnsFake.before_next_change`.
"""

from __future__ import annotations

import copy
import itertools
import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from gitdns.core.geo import GOOGLE_REGIONS

TYPES = frozenset({"A", "AAAA", "CAA", "CNAME", "MX", "NS", "PTR", "SOA", "SPF", "SRV", "TXT"})


class ApiFault(Exception):
    def __init__(self, status: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.reason, self.message, self.headers = status, reason, message, headers or {}


@dataclass
class Zone:
    name: str
    dns_name: str
    id: str
    rrsets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)


def comparable(rrset: dict[str, Any]) -> Any:
    """What an exact match compares: kind dropped, rrdatas and items as sets, weights as floats."""

    def clean(obj: Any) -> Any:
        if isinstance(obj, dict):
            out = {k: clean(v) for k, v in obj.items() if k != "kind"}
            if "weight" in out:
                out["weight"] = float(out["weight"])
            for key in ("rrdatas", "items"):
                if isinstance(out.get(key), list):
                    out[key] = sorted(out[key], key=lambda v: json.dumps(v, sort_keys=True))
            return out
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    return clean(rrset)


def _bad(where: str, what: str) -> ApiFault:
    return ApiFault(400, "invalid", f"Invalid value for '{where}': {what}")


def _check_items(where: str, rtype: str, policy: dict[str, Any]) -> None:
    kinds = [k for k in ("geo", "wrr", "primaryBackup") if k in policy]
    if len(kinds) != 1:
        raise _bad(where + ".routingPolicy", "exactly one of geo, wrr or primaryBackup is required")
    if kinds[0] == "primaryBackup":
        raise ApiFault(400, "invalid", "primaryBackup is not supported by this fake")
    items = (policy[kinds[0]] or {}).get("items") or []
    if not items:
        raise _bad(where + ".routingPolicy", "a routing policy needs items")
    seen: set[str] = set()
    for i, item in enumerate(items):
        at = f"{where}.routingPolicy.{kinds[0]}.items[{i}]"
        data = item.get("rrdatas") or []
        if not data or (rtype == "CNAME" and len(data) != 1):
            raise _bad(at + ".rrdatas", "one or more rrdatas required (exactly one for CNAME)")
        if kinds[0] == "wrr":
            weight = item.get("weight")
            if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight < 0:
                raise _bad(at + ".weight", "weight must be a number >= 0")
        else:
            location = item.get("location")
            if location not in GOOGLE_REGIONS:
                raise _bad(at + ".location", f"{location!r} is not a Google Cloud region")
            if location in seen:
                raise _bad(at + ".location", f"location {location} is used by more than one item")
            seen.add(location)


def check_rrset(where: str, zone: Zone, rrset: dict[str, Any]) -> tuple[str, str]:
    name, rtype, ttl = rrset.get("name"), rrset.get("type"), rrset.get("ttl")
    if not isinstance(name, str) or not name.endswith("."):
        raise _bad(where + ".name", "an absolute name with a trailing dot is required")
    if not (name == zone.dns_name or name.endswith("." + zone.dns_name)):
        raise ApiFault(400, "invalid", f"'{where}.name' {name} is not within zone {zone.dns_name}")
    if rtype not in TYPES:
        raise _bad(where + ".type", f"unsupported record type {rtype!r}")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        raise _bad(where + ".ttl", "ttl must be an integer >= 0")
    has_data, policy = bool(rrset.get("rrdatas")), rrset.get("routingPolicy")
    if has_data == bool(policy):
        raise _bad(where, "a ResourceRecordSet holds either rrdatas or a routingPolicy")
    if policy:
        _check_items(where, rtype, policy)
    elif rtype == "CNAME" and len(rrset["rrdatas"]) != 1:
        raise _bad(where + ".rrdatas", "a CNAME holds exactly one rrdata")
    return name.lower(), rtype


class CloudDnsFake:
    """The state and rules; `serve` puts it behind HTTP."""

    def __init__(self, project: str = "test-project", page_size: int = 3) -> None:
        self.project = project
        self.page_size = page_size
        self.zones: dict[str, Zone] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path with query)
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._faults: list[tuple[str | None, ApiFault]] = []
        self._before_change: list[Callable[[CloudDnsFake], None]] = []

    # --- test controls ----------------------------------------------------------------------
    def add_zone(self, name: str, dns_name: str) -> Zone:
        dns_name = dns_name.rstrip(".").lower() + "."
        zone = Zone(name, dns_name, str(next(self._ids)))
        zone.rrsets[(dns_name, "SOA")] = {"kind": "dns#resourceRecordSet", "name": dns_name, "type": "SOA",
                                          "ttl": 21600, "rrdatas": ["ns-cloud-a1.googledomains.com. "
                                                                    "cloud-dns-hostmaster.google.com. 1 21600 "
                                                                    "3600 259200 300"]}
        zone.rrsets[(dns_name, "NS")] = {"kind": "dns#resourceRecordSet", "name": dns_name, "type": "NS",
                                         "ttl": 21600, "rrdatas": ["ns-cloud-a1.googledomains.com."]}
        with self._lock:
            self.zones[name] = zone
        return zone

    def put(self, zone: str, rrset: dict[str, Any]) -> None:
        """Set an rrset directly (another writer), bypassing every check."""
        with self._lock:
            self.zones[zone].rrsets[(rrset["name"].lower(), rrset["type"])] = copy.deepcopy(rrset)

    def fail_next(self, status: int, reason: str, message: str = "injected", times: int = 1,
                  retry_after: float | None = None, method: str | None = None) -> None:
        """The next ``times`` requests (of ``method``, when given) answer this error."""
        headers = {"Retry-After": str(int(retry_after))} if retry_after is not None else {}
        with self._lock:
            self._faults.extend((method, ApiFault(status, reason, message, headers)) for _ in range(times))

    def before_next_change(self, hook: Callable[[CloudDnsFake], None]) -> None:
        """Run ``hook`` just before the next change is checked (a concurrent writer)."""
        with self._lock:
            self._before_change.append(hook)

    # --- the API ------------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append((method, path + ("?" + "&".join(f"{k}={v}" for k, v in query.items())
                                                  if query else "")))
            for i, (only, fault) in enumerate(self._faults):
                if only in (None, method):
                    del self._faults[i]
                    raise fault
            parts = path.strip("/").split("/")
            if parts[:3] != ["dns", "v1", "projects"] or len(parts) < 5 or parts[4] != "managedZones":
                raise ApiFault(404, "notFound", f"no such path {path}")
            if parts[3] != self.project:
                raise ApiFault(403, "forbidden", f"project {parts[3]} not found or no permission")
            rest = parts[5:]
            if not rest and method == "GET":
                return 200, self._list_zones(query)
            zone = self.zones.get(rest[0]) if rest else None
            if zone is None:
                raise ApiFault(404, "notFound", f"The 'parameters.managedZone' resource named '{rest[:1]}' "
                                                "does not exist.")
            if rest[1:] == ["rrsets"] and method == "GET":
                return 200, self._list_rrsets(zone, query)
            if rest[1:] == ["changes"] and method == "POST":
                return 200, self._create_change(zone, body)
            if len(rest) == 3 and rest[1] == "changes" and method == "GET":
                found = [c for c in zone.changes if c["id"] == rest[2]]
                if not found:
                    raise ApiFault(404, "notFound", f"change {rest[2]} does not exist")
                return 200, found[0]
            raise ApiFault(404, "notFound", f"no such method {method} {path}")

    def _page(self, items: list[Any], query: dict[str, str], key: str, kind: str) -> dict[str, Any]:
        start = int(query.get("pageToken") or 0)
        size = min(int(query.get("maxResults") or self.page_size), self.page_size)
        out: dict[str, Any] = {"kind": kind, key: items[start:start + size]}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    def _list_zones(self, query: dict[str, str]) -> dict[str, Any]:
        wanted = query.get("dnsName", "").lower()
        zones = [{"kind": "dns#managedZone", "name": z.name, "dnsName": z.dns_name, "id": z.id,
                  "visibility": "public", "nameServers": ["ns-cloud-a1.googledomains.com."]}
                 for z in sorted(self.zones.values(), key=lambda z: z.name)
                 if not wanted or z.dns_name == wanted.rstrip(".") + "."]
        return self._page(zones, query, "managedZones", "dns#managedZonesListResponse")

    def _list_rrsets(self, zone: Zone, query: dict[str, str]) -> dict[str, Any]:
        name, rtype = query.get("name", "").lower(), query.get("type")
        if rtype and not name:
            raise ApiFault(400, "invalid", "'type' may only be given with 'name'")
        items = [copy.deepcopy(r) for (n, t), r in sorted(zone.rrsets.items())
                 if (not name or n == name) and (not rtype or t == rtype)]
        return self._page(items, query, "rrsets", "dns#resourceRecordSetsListResponse")

    def _create_change(self, zone: Zone, body: Any) -> dict[str, Any]:
        hooks, self._before_change = self._before_change, []
        for hook in hooks:
            hook(self)
        if not isinstance(body, dict):
            raise ApiFault(400, "parseError", "the request body is not a JSON object")
        additions, deletions = body.get("additions") or [], body.get("deletions") or []
        if not additions and not deletions:
            raise ApiFault(400, "required", "The 'entity.change' parameter is required but was missing.")
        after = dict(zone.rrsets)
        for i, rrset in enumerate(deletions):
            key = check_rrset(f"entity.change.deletions[{i}]", zone, rrset)
            current = after.get(key)
            if current is None:
                raise ApiFault(404, "notFound", f"The 'entity.change.deletions[{i}]' resource named "
                                                f"'{key[0]} ({key[1]})' does not exist.")
            if comparable(current) != comparable(rrset):
                raise ApiFault(412, "conditionNotMet",
                               f"Precondition not met for 'entity.change.deletions[{i}]'")
            del after[key]
        for i, rrset in enumerate(additions):
            key = check_rrset(f"entity.change.additions[{i}]", zone, rrset)
            if key in after:
                raise ApiFault(409, "alreadyExists", f"The resource 'entity.change.additions[{i}]' named "
                                                     f"'{key[0]} ({key[1]})' already exists")
            others = {t for (n, t) in after if n == key[0]}
            if (key[1] == "CNAME" and others) or "CNAME" in others:
                raise ApiFault(409, "cnameResourceRecordSetConflict",
                               f"The resource 'entity.change.additions[{i}]' named '{key[0]} ({key[1]})' "
                               "cannot coexist with a CNAME at the same name")
            after[key] = {"kind": "dns#resourceRecordSet", **copy.deepcopy(rrset)}
        zone.rrsets = after
        change = {"kind": "dns#change", "id": str(len(zone.changes) + 1), "status": "done",
                  "startTime": "2026-01-01T00:00:00.000Z", "additions": additions, "deletions": deletions}
        zone.changes.append(change)
        return change


def _handler(fake: CloudDnsFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _answer(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
                status, answer = fake.handle(method, url.path, query, body)
                headers: dict[str, str] = {}
            except json.JSONDecodeError:
                status, answer, headers = 400, _error(400, "parseError", "invalid JSON"), {}
            except ApiFault as fault:
                status, answer, headers = fault.status, _error(fault.status, fault.reason, fault.message), \
                    fault.headers
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            for key, val in headers.items():
                self.send_header(key, val)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    return Handler


def _error(status: int, reason: str, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message + " (request id 7f3a9c2e-req)",
                      "errors": [{"domain": "global", "reason": reason, "message": message}]}}


class Server:
    """The fake on 127.0.0.1, a free port, in a daemon thread (``with Server() as s``); with
    ``tls`` (a server-side ``ssl.SSLContext``) it serves HTTPS, as a provider endpoint must."""

    def __init__(self, fake: CloudDnsFake | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.fake = fake or CloudDnsFake()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.fake))
        self._scheme = "http"
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
            self._scheme = "https"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{self._scheme}://{host!s}:{port}"

    def __enter__(self) -> Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)
