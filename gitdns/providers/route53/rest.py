"""A Route53 client for the calls a sync makes, with the standard library only.

``ListHostedZones``, ``ListResourceRecordSets``, ``ChangeResourceRecordSets`` and
``GetChange`` are sent here: Signature Version 4 with ``hmac``/``hashlib``, one HTTPS
connection kept open (`Wire`: HTTP/1.1 on ``socket``/``ssl``), the request XML written and the answers parsed
directly (`route53_listing.split_rows` for the rows), into the dicts botocore returns for the
fields the provider reads.  botocore costs a sync ~20 MiB and ~0.3 s of CPU (its import, its
service model, its per-call event machinery) for nothing it needs there.  The health-check
calls go to a botocore client made on their first use (`RestRoute53.sdk`).

`light_client` decides: this client only for explicit access keys (a Zone's credentials),
no HTTP proxy variable and no AWS config file setting that would change where or how botocore
sends (``endpoint_url``, ``ca_bundle``, FIPS or dual-stack endpoints, proxies); anything
else, and the default credential chain (environment, profile, web identity), goes to
botocore as before.  Errors are raised as botocore raises them for `route53_api.map_error`:
`ClientError` with botocore's ``response`` shape, connection failures as ``OSError``
(``TimeoutError`` when no answer came in time).  Secrets go only into the signature.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import os
import select
import socket
import ssl
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from gitdns.providers.route53 import listing as route53_listing

NS = "https://route53.amazonaws.com/doc/2013-04-01/"
VERSION = "/2013-04-01"
# ResourceRecordSet members in the order of Route53's schema (its XML is a sequence)
RRSET_ORDER = ("Name", "Type", "SetIdentifier", "Weight", "Region", "GeoLocation", "Failover", "MultiValueAnswer",
               "TTL", "ResourceRecords", "AliasTarget", "HealthCheckId", "TrafficPolicyInstanceId",
               "CidrRoutingConfig", "GeoProximityLocation")
STRUCT_ORDER = {
    "AliasTarget": ("HostedZoneId", "DNSName", "EvaluateTargetHealth"),
    "GeoLocation": ("ContinentCode", "CountryCode", "SubdivisionCode"),
    "CidrRoutingConfig": ("CollectionId", "LocationName"),
    "GeoProximityLocation": ("AWSRegion", "LocalZoneGroup", "Coordinates", "Bias"),
    "Coordinates": ("Latitude", "Longitude"),
}
QUERY = {"StartRecordName": "name", "StartRecordType": "type", "StartRecordIdentifier": "identifier",
         "MaxItems": "maxitems", "Marker": "marker", "DelegationSetId": "delegationsetid",
         "HostedZoneType": "hostedzonetype"}
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_ROUTE_53", "AWS_USE_FIPS_ENDPOINT",
                 "AWS_USE_DUALSTACK_ENDPOINT", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
CONFIG_WORDS = ("endpoint_url", "ca_bundle", "use_fips_endpoint", "use_dualstack_endpoint", "proxy", "services")
PARTITIONS = (("cn-", "https://route53.amazonaws.com.cn", "cn-northwest-1"),
              ("us-gov-", "https://route53.us-gov.amazonaws.com", "us-gov-west-1"))


class ClientError(Exception):
    """An error answer, shaped as botocore's ``ClientError`` (``response``)."""

    def __init__(self, response: dict[str, Any], operation: str) -> None:
        err = response.get("Error") or {}
        super().__init__(f"An error occurred ({err.get('Code')}) when calling the {operation} operation: "
                         f"{err.get('Message')}")
        self.response = response
        self.operation_name = operation


def light_client(region: str | None, endpoint: str | None, credentials: Mapping[str, str],
                 env: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(origin, signing region) when this client can stand in for botocore's, else None."""
    if not (credentials.get("AWS_ACCESS_KEY_ID") and credentials.get("AWS_SECRET_ACCESS_KEY")):
        return None  # the default chain: botocore's
    if any(env.get(v) for v in PROXY_VARS) or _config_says(env):
        return None
    if endpoint:
        return endpoint.rstrip("/"), region or "us-east-1"
    if any(env.get(v) for v in ENDPOINT_VARS) or (region or "").startswith(("us-iso", "eu-isoe")):
        return None
    for prefix, origin, signing in PARTITIONS:
        if (region or "").startswith(prefix):
            return origin, signing
    return "https://route53.amazonaws.com", "us-east-1"


def _config_says(env: Mapping[str, str]) -> bool:
    """Whether the AWS config file holds a setting that changes where or how botocore sends."""
    path = env.get("AWS_CONFIG_FILE") or os.path.join(os.path.expanduser("~"), ".aws", "config")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read().lower()
    except OSError:
        return False
    return any(word in text for word in CONFIG_WORDS)


def _ca_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """botocore's trust: ``AWS_CA_BUNDLE``, else certifi's bundle when installed, else
    botocore's own (found without importing either), else the system's."""
    return ssl.create_default_context(cafile=env.get("AWS_CA_BUNDLE") or _default_ca_file())


def _default_ca_file() -> str | None:
    for package in ("certifi", "botocore"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            path = os.path.join(os.path.dirname(spec.origin), "cacert.pem")
            if os.path.isfile(path):
                return path
    return None


class RestRoute53:
    """The `route53_api.Route53Client` calls over one HTTPS connection."""

    def __init__(self, origin: str, signing_region: str, credentials: Mapping[str, str],
                 sdk: Callable[[], Any], *, connect_timeout: float, read_timeout: float,
                 env: Mapping[str, str] = os.environ, clock: Callable[[], float] = time.time) -> None:
        parts = urlsplit(origin)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        default = 443 if self._https else 80
        self._host_header = self._host if self._port == default else f"{self._host}:{self._port}"
        self._prefix = parts.path.rstrip("/")
        self._region = signing_region
        self._key = credentials.get("AWS_ACCESS_KEY_ID") or ""
        self._secret = credentials.get("AWS_SECRET_ACCESS_KEY") or ""
        self._token = credentials.get("AWS_SESSION_TOKEN") or ""
        self._make_sdk, self._sdk_client = sdk, None
        self._timeouts = (connect_timeout, read_timeout)
        self._context = _ca_context(env) if self._https else None
        self._conn: Wire | None = None
        self._clock = clock

    def __repr__(self) -> str:
        return f"RestRoute53({self._host_header})"

    # -- the calls
    def list_hosted_zones(self, **kwargs: Any) -> dict[str, Any]:
        root = self._xml(self._send("ListHostedZones", "GET", "/hostedzone", kwargs))
        zones = []
        for zone in _children(root, "HostedZones"):
            item = _flat(zone)
            config = _find(zone, "Config")
            if config is not None:
                flat = _flat(config)
                item["Config"] = {**flat, "PrivateZone": flat.get("PrivateZone") == "true"}
            if "ResourceRecordSetCount" in item:
                item["ResourceRecordSetCount"] = int(item["ResourceRecordSetCount"])
            zones.append(item)
        out = _flat(root)
        out["HostedZones"], out["IsTruncated"] = zones, out.get("IsTruncated") == "true"
        return out

    def list_resource_record_sets(self, **kwargs: Any) -> dict[str, Any]:
        zone = _id(kwargs.pop("HostedZoneId"))
        body = self._send("ListResourceRecordSets", "GET", f"/hostedzone/{quote(zone)}/rrset", kwargs)
        split = route53_listing.split_rows(body)
        if split is not None:
            rows, body = split
            root = self._xml(body)
        else:
            root = self._xml(body)
            rows = [route53_listing._struct(rrs) for rrs in _children(root, "ResourceRecordSets")]
        out = _flat(root)
        out["ResourceRecordSets"], out["IsTruncated"] = rows, out.get("IsTruncated") == "true"
        return out

    def change_resource_record_sets(self, **kwargs: Any) -> dict[str, Any]:
        zone = _id(kwargs["HostedZoneId"])
        body = change_batch_xml(kwargs["ChangeBatch"])
        root = self._xml(self._send("ChangeResourceRecordSets", "POST", f"/hostedzone/{quote(zone)}/rrset/", {},
                                    body))
        return {"ChangeInfo": _flat(_find(root, "ChangeInfo"))}

    def get_change(self, **kwargs: Any) -> dict[str, Any]:
        root = self._xml(self._send("GetChange", "GET", f"/change/{quote(_id(kwargs['Id']))}", {}))
        return {"ChangeInfo": _flat(_find(root, "ChangeInfo"))}

    # health checks (an optional setting): botocore's client, made on first use
    def sdk(self) -> Any:
        if self._sdk_client is None:
            self._sdk_client = self._make_sdk()
        return self._sdk_client

    def create_health_check(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self.sdk().create_health_check(**kwargs))

    def list_health_checks(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self.sdk().list_health_checks(**kwargs))

    def change_tags_for_resource(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self.sdk().change_tags_for_resource(**kwargs))

    def list_tags_for_resource(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self.sdk().list_tags_for_resource(**kwargs))

    def delete_health_check(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self.sdk().delete_health_check(**kwargs))

    def get_health_check(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self.sdk().get_health_check(**kwargs))

    # -- the wire
    def _send(self, operation: str, method: str, path: str, params: Mapping[str, Any], body: bytes = b"") -> bytes:
        uri = quote(self._prefix + VERSION + path, safe="/~")
        query = "&".join(f"{quote(QUERY[k], safe='-_.~')}={quote(str(v), safe='-_.~')}"
                         for k, v in sorted(params.items(), key=lambda kv: QUERY[kv[0]]) if v is not None)
        headers = self._sign(method, uri, query, body)
        conn = self._connection()
        try:
            status, answer_headers, data, keep = conn.exchange(method, uri + ("?" + query if query else ""),
                                                               headers, body)
        except BaseException:
            self.close()
            raise
        if not keep:
            self.close()
        if status >= 300:
            raise ClientError(_error(data, status, answer_headers), operation)
        return data

    def _connection(self) -> Wire:
        conn = self._conn
        if conn is not None and _dropped(conn.sock):
            self.close()  # the server closed the idle connection: a fresh one (nothing was sent on it)
            conn = None
        if conn is None:
            connect, read = self._timeouts
            conn = self._conn = Wire(self._host, self._port, self._host_header, self._context, connect, read)
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _sign(self, method: str, uri: str, query: str, body: bytes) -> dict[str, str]:
        """Signature Version 4 (service ``route53``)."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
        day = stamp[:8]
        headers = {"host": self._host_header, "x-amz-date": stamp}
        if body:
            headers["content-type"] = "text/xml"
        if self._token:
            headers["x-amz-security-token"] = self._token
        names = sorted(headers)
        canonical = "\n".join([method, uri, query, *(f"{n}:{headers[n]}" for n in names), "", ";".join(names),
                               hashlib.sha256(body).hexdigest()])
        scope = f"{day}/{self._region}/route53/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        key = ("AWS4" + self._secret).encode()
        for part in (day, self._region, "route53", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self._key}/{scope}, "
                                    f"SignedHeaders={';'.join(names)}, Signature={signature}")
        del headers["host"]  # `Wire` sends it
        return headers

    @staticmethod
    def _xml(body: bytes) -> ET.Element:
        return ET.fromstring(body)


MAX_LINE = 65_536
MAX_HEADERS = 100


class Wire:
    """One HTTP/1.1 connection (TLS when ``context``): a request, then its whole answer
    (``Content-Length``, chunked, or to the end of the connection).  ``http.client`` would
    bring the ``email`` package (~1.4 MiB) for its header parsing."""

    def __init__(self, host: str, port: int, host_header: str, context: ssl.SSLContext | None,
                 connect_timeout: float, read_timeout: float) -> None:
        sock = socket.create_connection((host, port), timeout=connect_timeout)
        try:
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
            sock.settimeout(read_timeout)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.host_header = host_header
        self.reader = sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def exchange(self, method: str, target: str, headers: Mapping[str, str],
                 body: bytes) -> tuple[int, dict[str, str], bytes, bool]:
        """(status, headers with lower-case names, body, whether the connection stays open)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}", "Accept-Encoding: identity",
                 *(f"{k}: {v}" for k, v in headers.items())]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        status, answer = self._head()
        while 100 <= status < 200:  # an interim answer: the real one follows
            status, answer = self._head()
        keep = answer.get("connection", "").lower() != "close"
        if "chunked" in answer.get("transfer-encoding", "").lower():
            data = self._chunked()
        elif "content-length" in answer:
            data = self._exactly(int(answer["content-length"]))
        elif status in (204, 304):
            data = b""
        else:
            data, keep = self.reader.read(), False
        return status, answer, data, keep

    def _line(self) -> bytes:
        line = self.reader.readline(MAX_LINE + 1)
        if not line:
            raise ConnectionResetError("route53: the connection closed before the answer")
        if len(line) > MAX_LINE:
            raise ConnectionError("route53: an answer line over 64 KiB")
        return line

    def _head(self) -> tuple[int, dict[str, str]]:
        parts = self._line().split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise ConnectionError("route53: not an HTTP answer")
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self._line()
            if line in (b"\r\n", b"\n"):
                return int(parts[1]), headers
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        raise ConnectionError(f"route53: an answer with over {MAX_HEADERS} headers")

    def _exactly(self, size: int) -> bytes:
        data = self.reader.read(size)
        if len(data) != size:
            raise ConnectionResetError("route53: the connection closed inside the answer")
        return data

    def _chunked(self) -> bytes:
        out = bytearray()
        while True:
            size = int(self._line().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self._line() not in (b"\r\n", b"\n"):  # trailers
                    pass
                return bytes(out)
            out += self._exactly(size)
            self._line()  # the CRLF after the chunk


def _dropped(sock: Any) -> bool:
    """Whether an idle keep-alive socket was closed by the server (readable with nothing asked)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _id(value: object) -> str:
    """A hosted zone or change id with its ``/hostedzone/`` or ``/change/`` prefix dropped."""
    return str(value).rsplit("/", 1)[-1]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _find(root: ET.Element, name: str) -> ET.Element:
    for child in root:
        if _local(child.tag) == name:
            return child
    raise ValueError(f"route53: no <{name}> in the answer")


def _children(root: ET.Element, name: str) -> list[ET.Element]:
    for child in root:
        if _local(child.tag) == name:
            return list(child)
    return []


def _flat(elem: ET.Element) -> dict[str, Any]:
    """An element's leaf children as text."""
    return {_local(c.tag): c.text or "" for c in elem if not len(c)}


def _error(body: bytes, status: int, headers: Mapping[str, str]) -> dict[str, Any]:
    """botocore's error response: ``Error`` (Code, Message, Type) and ``ResponseMetadata``.
    Route53's ``InvalidChangeBatch`` answer lists its messages: joined as boto3 shows them."""
    err: dict[str, Any] = {"Code": "", "Message": ""}
    try:
        root = ET.fromstring(body) if body.strip() else None
    except ET.ParseError:
        root = None
    if root is not None and _local(root.tag) == "InvalidChangeBatch":
        messages = [m.text or "" for m in root.iter() if _local(m.tag) == "Message"]
        err = {"Code": "InvalidChangeBatch", "Message": "[" + ", ".join(messages) + "]"}
    elif root is not None:
        node = root if _local(root.tag) == "Error" else next(
            (c for c in root.iter() if _local(c.tag) == "Error"), None)
        if node is not None:
            err.update(_flat(node))
    lowered = {k.lower(): v for k, v in headers.items()}
    return {"Error": err, "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": lowered}}


def escape(text: str) -> str:
    """XML character data: ``&``, ``<`` and ``>`` escaped (as ElementTree writes text; the
    ``xml.sax.saxutils`` import would bring ``urllib.request``)."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


def change_batch_xml(batch: Mapping[str, Any]) -> bytes:
    """A ``ChangeResourceRecordSetsRequest`` body (members in the schema's order)."""
    out = ["<ChangeResourceRecordSetsRequest xmlns=\"", NS, "\"><ChangeBatch>"]
    if batch.get("Comment") is not None:
        out += ["<Comment>", escape(str(batch["Comment"])), "</Comment>"]
    out.append("<Changes>")
    for change in batch.get("Changes") or ():
        out += ["<Change><Action>", escape(str(change["Action"])), "</Action><ResourceRecordSet>"]
        _members(out, change["ResourceRecordSet"], RRSET_ORDER)
        out.append("</ResourceRecordSet></Change>")
    out.append("</Changes></ChangeBatch></ChangeResourceRecordSetsRequest>")
    return "".join(out).encode()


def _members(out: list[str], value: Mapping[str, Any], order: Sequence[str]) -> None:
    unknown = set(value) - set(order)
    if unknown:
        raise ValueError(f"route53: unknown ResourceRecordSet member(s) {sorted(unknown)}")
    for name in order:
        if name not in value or value[name] is None:
            continue
        item = value[name]
        if name == "ResourceRecords":
            out.append("<ResourceRecords>")
            for rr in item:
                out += ["<ResourceRecord><Value>", escape(str(rr["Value"])), "</Value></ResourceRecord>"]
            out.append("</ResourceRecords>")
        elif name in STRUCT_ORDER:
            out.append(f"<{name}>")
            _members(out, item, STRUCT_ORDER[name])
            out.append(f"</{name}>")
        else:
            text = ("true" if item else "false") if isinstance(item, bool) else str(item)
            out += [f"<{name}>", escape(text), f"</{name}>"]
