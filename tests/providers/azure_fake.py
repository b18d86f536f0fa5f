"""A fake of the Azure DNS management REST API for tests (stdlib only): no emulator exists.

Usable in-process::

    fake = FakeAzureDns(subscription="sub", resource_group="rg")
    fake.add_zone("example.com")
    base_url = fake.start(tls=ctx)     # https://127.0.0.1:<ephemeral port> (ctx: tests.providers.tls)
    DnsManagementClient(credential, "sub", base_url=base_url, retry_total=0)
    ...
    fake.stop()

or as a process: ``python -m tests.providers.azure_fake PORT ZONE...`` (prints ``ready URL``).

What it serves (the ARM paths ``azure-mgmt-dns`` 9.x calls, api-version 2018-05-01, any
api-version accepted but one is required):

* ``GET /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/dnsZones`` and
  ``GET .../dnsZones/{zone}``;
* ``GET .../dnsZones/{zone}/recordsets`` and ``.../all`` — paged: ``$top`` or ``page_size``
  record sets per page, a ``nextLink`` carrying ``$skiptoken``; ``.../dnsZones/{zone}/{type}``
  lists one type;
* ``GET``/``PUT``/``DELETE .../dnsZones/{zone}/{type}/{relativeName}`` (``@`` is the apex;
  names are case-insensitive, as Azure's).

What it enforces (from Azure's REST documentation, not verified against the service):

* every record set carries an ``etag`` (a new GUID on every write);
* ``PUT`` with ``If-Match: <etag>`` → 412 ``PreconditionFailed`` unless it is the current
  etag (also when the record set does not exist); ``If-None-Match: *`` → 412 when the
  record set exists; ``DELETE`` with ``If-Match`` likewise.  Without those headers PUT and
  DELETE are unconditional (DELETE of a missing record set: 204);
* PUT answers 201 on create and 200 on update; the body needs ``properties.TTL`` and the one
  record array of the path's type (others → 400 ``BadRequest``); a CNAME beside other data at
  a name, or data beside a CNAME → 409 ``Conflict`` (the service's exact code is not known);
* a missing zone → 404 ``ParentResourceNotFound`` / ``ResourceNotFound``; no ``Bearer`` token
  → 401 ``AuthenticationFailed``; error bodies are ``{"error": {"code", "message"}}`` with a
  request id inside the message and an ``x-ms-request-id`` header (so clients can be checked
  for stripping it).

Test controls: ``fail_next(status, ...)`` queues canned error answers (429 with
``Retry-After``, 5xx, 401...); ``hooks`` run before each request is handled (a concurrent
writer); ``set_record`` writes around the API; ``requests`` logs every request with its
conditional headers.  It does NOT model: PATCH, SOA/PTR semantics, alias record sets
(``targetResource``), private zones, record-count limits, rate limits (only canned 429s),
long-running operations, or the exact error codes of the real service.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

JSON = dict[str, Any]
ARRAY_KEYS = {"A": "ARecords", "AAAA": "AAAARecords", "TXT": "TXTRecords", "MX": "MXRecords",
              "SRV": "SRVRecords", "CAA": "caaRecords", "NS": "NSRecords", "PTR": "PTRRecords"}
ALL_KEYS = {*ARRAY_KEYS.values(), "CNAMERecord", "SOARecord"}
TYPE_ORDER = ["SOA", "NS", "A", "AAAA", "CNAME", "MX", "SRV", "TXT", "CAA", "PTR"]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any = None


@dataclass
class Canned:
    status: int
    code: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    method: str | None = None


class Reply(Exception):
    def __init__(self, status: int, body: JSON | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or {}


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    rid = str(uuid.uuid4())
    hdrs = {"x-ms-request-id": rid, "x-ms-correlation-request-id": rid, **(headers or {})}
    return Reply(status, {"error": {"code": code, "message": f"{message} (request id: {rid})"}}, hdrs)


class FakeAzureDns:
    def __init__(self, subscription: str = "00000000-0000-0000-0000-000000000000",
                 resource_group: str = "rg-dns", page_size: int = 100) -> None:
        self.subscription, self.resource_group, self.page_size = subscription, resource_group, page_size
        self.lock = threading.RLock()
        self.zones: dict[str, dict[tuple[str, str], JSON]] = {}
        self.requests: list[Request] = []
        self.hooks: list[Callable[[Request], None]] = []
        self._canned: list[Canned] = []
        self._server: ThreadingHTTPServer | None = None
        self.base_url = ""

    # --- test controls ---------------------------------------------------------------------------
    def add_zone(self, zone: str) -> None:
        with self.lock:
            self.zones.setdefault(zone.lower(), {})
            self.set_record(zone, "@", "NS", {"TTL": 172800, "NSRecords": [
                {"nsdname": "ns1-01.azure-dns.com."}, {"nsdname": "ns2-01.azure-dns.net."}]})
            self.set_record(zone, "@", "SOA", {"TTL": 3600, "SOARecord": {
                "host": "ns1-01.azure-dns.com.", "email": "azuredns-hostmaster.microsoft.com",
                "serialNumber": 1, "refreshTime": 3600, "retryTime": 300, "expireTime": 2419200,
                "minimumTTL": 300}})

    def fail_next(self, status: int, code: str = "", message: str = "", *, headers: dict[str, str] | None = None,
                  method: str | None = None, times: int = 1) -> None:
        """The next ``times`` requests (of ``method``, if given) get this error answer."""
        with self.lock:
            for _ in range(times):
                self._canned.append(Canned(status, code or f"Http{status}", message or f"canned {status}",
                                           dict(headers or {}), method))

    def set_record(self, zone: str, relative: str, rtype: str, properties: JSON) -> JSON:
        """Write a record set around the API (a concurrent writer): a new etag."""
        with self.lock:
            return self._store(zone.lower(), relative, rtype.upper(), properties)

    def get_record(self, zone: str, relative: str, rtype: str) -> JSON | None:
        with self.lock:
            return self.zones.get(zone.lower(), {}).get((relative.lower(), rtype.upper()))

    def delete_record(self, zone: str, relative: str, rtype: str) -> None:
        with self.lock:
            self.zones.get(zone.lower(), {}).pop((relative.lower(), rtype.upper()), None)

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in ("PUT", "DELETE", "PATCH")]

    # --- the model -------------------------------------------------------------------------------
    def _prefix(self) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/Microsoft.Network"

    def _store(self, zone: str, relative: str, rtype: str, properties: JSON) -> JSON:
        rel = relative.lower()
        props = {k: v for k, v in properties.items() if k in ALL_KEYS or k in ("TTL", "metadata")}
        fqdn = zone + "." if rel == "@" else f"{rel}.{zone}."
        record = {
            "id": f"{self._prefix()}/dnszones/{zone}/{rtype}/{rel}",
            "name": rel,
            "type": f"Microsoft.Network/dnszones/{rtype}",
            "etag": str(uuid.uuid4()),
            "properties": {**props, "fqdn": fqdn, "provisioningState": "Succeeded"},
        }
        self.zones[zone][(rel, rtype)] = record
        return record

    def _zone_json(self, zone: str) -> JSON:
        return {"id": f"{self._prefix()}/dnszones/{zone}", "name": zone, "type": "Microsoft.Network/dnszones",
                "location": "global", "etag": "00000000-0000-0000-0000-000000000001",
                "properties": {"numberOfRecordSets": len(self.zones[zone]), "maxNumberOfRecordSets": 10000,
                               "nameServers": ["ns1-01.azure-dns.com.", "ns2-01.azure-dns.net."],
                               "zoneType": "Public"}}

    def _page(self, req: Request, items: list[JSON]) -> JSON:
        top = int(req.query.get("$top") or self.page_size)
        skip = int(req.query.get("$skiptoken") or 0)
        page: JSON = {"value": items[skip:skip + top]}
        if skip + top < len(items):
            query = f"api-version={quote(req.query['api-version'])}&$skiptoken={skip + top}"
            if "$top" in req.query:
                query += f"&$top={top}"
            page["nextLink"] = f"{self.base_url}{req.path}?{query}"
        return page

    def _zone(self, name: str, code: str = "ParentResourceNotFound") -> dict[tuple[str, str], JSON]:
        zone = self.zones.get(name.lower())
        if zone is None:
            raise _error(404, code, f"Can not perform requested operation on nested resource. Parent resource "
                                    f"'{name}' not found.")
        return zone

    @staticmethod
    def _sorted(records: dict[tuple[str, str], JSON]) -> list[JSON]:
        def order(item: tuple[tuple[str, str], JSON]) -> tuple[str, int]:
            (rel, rtype), _ = item
            return (rel if rel != "@" else "", TYPE_ORDER.index(rtype) if rtype in TYPE_ORDER else 99)
        return [rec for _, rec in sorted(records.items(), key=order)]

    def _validate(self, rtype: str, body: Any) -> JSON:
        if not isinstance(body, dict) or not isinstance(body.get("properties"), dict):
            raise _error(400, "BadRequest", "The request body must hold 'properties'.")
        props: JSON = body["properties"]
        if not isinstance(props.get("TTL"), int) or props["TTL"] < 0:
            raise _error(400, "BadRequest", "The TTL property is required and must be a non-negative integer.")
        wanted = "CNAMERecord" if rtype == "CNAME" else ARRAY_KEYS.get(rtype)
        if wanted is None:
            raise _error(400, "BadRequest", f"Record type {rtype} cannot be created.")
        present = [k for k in ALL_KEYS if props.get(k)]
        if present != [wanted]:
            raise _error(400, "BadRequest", f"A record set of type {rtype} must hold {wanted} only "
                                            f"(got {sorted(present) or 'none'}).")
        return props

    def _check_cname(self, zone: dict[tuple[str, str], JSON], rel: str, rtype: str) -> None:
        others = {t for (r, t) in zone if r == rel and t != rtype}
        if (rtype == "CNAME" and others - {"SOA", "NS"}) or (rtype != "CNAME" and "CNAME" in others):
            raise _error(409, "Conflict", f"The record set {rel} of type {rtype} conflicts with an existing "
                                          "CNAME record set or other records at that name.")

    def _record_op(self, req: Request, zone_name: str, rtype: str, rel: str) -> tuple[int, JSON | None]:
        zone = self._zone(zone_name)
        rtype, rel = rtype.upper(), rel.lower()
        current = zone.get((rel, rtype))
        if_match, if_none = req.headers.get("if-match"), req.headers.get("if-none-match")
        if req.method == "GET":
            if current is None:
                raise _error(404, "NotFound", f"The resource record '{rel}' does not exist in resource group "
                                              f"'{self.resource_group}' of subscription '{self.subscription}'.")
            return 200, current
        if req.method == "DELETE":
            if if_match is not None and (current is None or current["etag"] != if_match):
                raise _error(412, "PreconditionFailed", "The condition in the If-Match header was not met.")
            if current is None:
                return 204, None
            del zone[(rel, rtype)]
            return 200, None
        if req.method != "PUT":
            raise _error(405, "MethodNotAllowed", f"{req.method} is not supported by this fake.")
        props = self._validate(rtype, req.body)
        if if_match is not None and (current is None or current["etag"] != if_match):
            raise _error(412, "PreconditionFailed", "The condition in the If-Match header was not met.")
        if if_none == "*" and current is not None:
            raise _error(412, "PreconditionFailed", "The record set already exists (If-None-Match: *).")
        self._check_cname(zone, rel, rtype)
        return (201 if current is None else 200), self._store(zone_name.lower(), rel, rtype, props)

    def handle(self, req: Request) -> tuple[int, JSON | None, dict[str, str]]:
        with self.lock:
            self.requests.append(req)
            canned = next((c for c in self._canned if c.method in (None, req.method)), None)
            if canned is not None:
                self._canned.remove(canned)
        for hook in list(self.hooks):
            hook(req)
        try:
            if canned is not None:
                raise _error(canned.status, canned.code, canned.message, canned.headers)
            if not req.headers.get("authorization", "").startswith("Bearer "):
                raise _error(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is "
                                                          "missing.")
            if "api-version" not in req.query:
                raise _error(400, "MissingApiVersionParameter", "The api-version query parameter is required.")
            with self.lock:
                status, body = self._route(req)
            return status, body, {}
        except Reply as reply:
            return reply.status, reply.body, reply.headers

    def _route(self, req: Request) -> tuple[int, JSON | None]:
        prefix = self._prefix().lower() + "/dnszones"
        path = req.path.rstrip("/")
        if not path.lower().startswith(prefix):
            raise _error(404, "InvalidResourceType", f"No route for {path}.")
        parts = [p for p in path[len(prefix):].split("/") if p]
        if not parts:
            if req.method != "GET":
                raise _error(405, "MethodNotAllowed", "Only GET lists zones.")
            return 200, self._page(req, [self._zone_json(z) for z in sorted(self.zones)])
        zone_name = parts[0]
        if len(parts) == 1:
            self._zone(zone_name, "ResourceNotFound")
            return 200, self._zone_json(zone_name.lower())
        if len(parts) == 2:
            zone = self._zone(zone_name, "ResourceNotFound")
            what = parts[1].upper()
            records = self._sorted(zone)
            if what not in ("RECORDSETS", "ALL"):
                records = [r for r in records if r["type"].rsplit("/", 1)[-1] == what]
            suffix = req.query.get("$recordsetnamesuffix")
            if suffix:
                low = suffix.lower()
                records = [r for r in records if r["name"] == low or r["name"].endswith("." + low)]
            return 200, self._page(req, records)
        if len(parts) == 3:
            return self._record_op(req, zone_name, parts[1], parts[2])
        raise _error(404, "InvalidResourceType", f"No route for {path}.")

    # --- the server ------------------------------------------------------------------------------
    def start(self, port: int = 0, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> str:
        """Serve on ``host:port`` (0: a free port) in a daemon thread; with ``tls`` (a
        server-side ``ssl.SSLContext``) over HTTPS, as a provider endpoint must be."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                split = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                req = Request(self.command, split.path, query, headers, body)
                status, out, extra = fake.handle(req)
                data = json.dumps(out).encode() if out is not None else b""
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                if data:
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_DELETE = do_PATCH = do_POST = _serve

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.base_url = f"{'https' if tls is not None else 'http'}://{host}:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class FakeCredential:
    """A TokenCredential that hands out a dummy bearer token (no network)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        import time

        from azure.core.credentials import AccessToken

        return AccessToken("fake-token", int(time.time()) + 3600)


def main(argv: list[str]) -> None:
    fake = FakeAzureDns()
    for zone in argv[1:]:
        fake.add_zone(zone)
    url = fake.start(int(argv[0]) if argv else 0)
    print(f"ready {url} subscription={fake.subscription} resourceGroup={fake.resource_group}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])
