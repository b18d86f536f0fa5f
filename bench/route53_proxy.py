"""A counting HTTP proxy in front of a loopback moto_server, for the Route53 benchmarks.

    python bench/route53_proxy.py --listen 127.0.0.1:PORT --upstream http://127.0.0.1:MOTOPORT \
        [--tls-cert CERT.pem --tls-key KEY.pem]

* With ``--tls-cert``/``--tls-key`` it serves HTTPS (a provider endpoint must be an https
  origin the operator allows: gitdns refuses ``http://``); the upstream stays plain HTTP on
  loopback.

* Forwards every request to moto unchanged and COUNTS it by Route53 operation
  (ListHostedZones, ListResourceRecordSets, ChangeResourceRecordSets, GetChange,
  ListHealthChecks, ...), recognised from the REST method and path.
* Measures every `ChangeResourceRecordSets` body as Route53 counts it against its limits:
  `ResourceRecord` values and the characters of all `Value` elements, UPSERT counted twice
  (the same count for every tool; moto checks neither limit).
* Adds the `IsTruncated`, `Marker` and `MaxItems` elements that moto's `ListHealthChecks`
  reply lacks (octodns-route53 reads `resp['IsTruncated']` and crashes without them).
* Control endpoints, never counted and never forwarded:
  `GET /__proxy/counts` (JSON {operation: count}), `GET /__proxy/log` (JSON list of the
  last 2,000 counted requests: [operation, path with query]), `GET /__proxy/sizes` (JSON list of
  [values, characters] per ChangeResourceRecordSets request), `POST /__proxy/reset` (zero all).

Standard library only; one thread per connection; a new upstream connection per request.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import socket
import ssl
import sys
import threading
import xml.etree.ElementTree as ET
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

API = "/2013-04-01"
# (method, path regex below /2013-04-01) -> operation; first match wins
ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (m, re.compile(p), op) for m, p, op in (
        ("GET", r"^/hostedzone/?$", "ListHostedZones"),
        ("POST", r"^/hostedzone/?$", "CreateHostedZone"),
        ("GET", r"^/hostedzonesbyname/?$", "ListHostedZonesByName"),
        ("GET", r"^/hostedzonecount/?$", "GetHostedZoneCount"),
        ("GET", r"^/hostedzone/[^/]+/rrset/?$", "ListResourceRecordSets"),
        ("POST", r"^/hostedzone/[^/]+/rrset/?$", "ChangeResourceRecordSets"),
        ("GET", r"^/hostedzone/[^/]+/?$", "GetHostedZone"),
        ("DELETE", r"^/hostedzone/[^/]+/?$", "DeleteHostedZone"),
        ("GET", r"^/change/[^/]+/?$", "GetChange"),
        ("GET", r"^/healthcheck/?$", "ListHealthChecks"),
        ("POST", r"^/healthcheck/?$", "CreateHealthCheck"),
        ("GET", r"^/healthcheck/[^/]+/?$", "GetHealthCheck"),
        ("DELETE", r"^/healthcheck/[^/]+/?$", "DeleteHealthCheck"),
        ("GET", r"^/tags/[^/]+/[^/]+/?$", "ListTagsForResource"),
        ("POST", r"^/tags/[^/]+/[^/]+/?$", "ChangeTagsForResource"),
        ("POST", r"^/tags/[^/]+/?$", "ListTagsForResources"),
    )
)
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
              "transfer-encoding", "upgrade", "content-length"}


def operation(method: str, raw_path: str) -> str:
    path = urlsplit(raw_path).path
    if path.startswith(API):
        rest = path[len(API):] or "/"
        for m, pattern, op in ROUTES:
            if m == method and pattern.match(rest):
                return op
    return f"{method} {path}"


def fix_health_checks(body: bytes) -> bytes:
    """Add IsTruncated/Marker/MaxItems to a ListHealthChecksResponse that lacks them."""
    text = body.decode("utf-8", "replace")
    close = "</ListHealthChecksResponse>"
    if close not in text:
        return body
    extra = ""
    if "<IsTruncated>" not in text:
        extra += "<IsTruncated>false</IsTruncated>"
    if "<Marker>" not in text and "<Marker/>" not in text:
        extra += "<Marker></Marker>"
    if "<MaxItems>" not in text:
        extra += "<MaxItems>100</MaxItems>"
    return text.replace(close, extra + close).encode("utf-8") if extra else body


def change_size(body: bytes) -> tuple[int, int]:
    """(values, characters) of a ChangeResourceRecordSets body as Route53 counts them: every
    `ResourceRecord` value and every character of its `Value`, UPSERT changes twice."""
    values = chars = 0
    for change in ET.fromstring(body).iter():
        if not change.tag.endswith("}Change") and change.tag != "Change":
            continue
        action = next((e.text or "" for e in change if e.tag.endswith("Action")), "")
        times = 2 if action == "UPSERT" else 1
        for elem in change.iter():
            if elem.tag.endswith("}Value") or elem.tag == "Value":
                values += times
                chars += times * len(elem.text or "")
    return values, chars


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_op: Counter[str] = Counter()
        self.log: deque[tuple[str, str]] = deque(maxlen=2000)
        self.sizes: list[tuple[int, int]] = []

    def add(self, op: str, path: str) -> None:
        with self.lock:
            self.by_op[op] += 1
            self.log.append((op, path))

    def add_size(self, size: tuple[int, int]) -> None:
        with self.lock:
            self.sizes.append(size)

    def change_sizes(self) -> list[tuple[int, int]]:
        with self.lock:
            return list(self.sizes)

    def requests(self) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.log)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.by_op)

    def reset(self) -> None:
        with self.lock:
            self.by_op.clear()
            self.log.clear()
            self.sizes.clear()


def make_handler(upstream: str, counts: Counts) -> type[BaseHTTPRequestHandler]:
    up = urlsplit(upstream)
    host, port = up.hostname or "127.0.0.1", up.port or 80

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive towards the client (botocore pools connections)

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _control(self) -> bool:
            if self.path == "/__proxy/counts":
                self._reply(200, json.dumps(counts.snapshot(), sort_keys=True).encode())
                return True
            if self.path == "/__proxy/log":
                self._reply(200, json.dumps(counts.requests()).encode())
                return True
            if self.path == "/__proxy/sizes":
                self._reply(200, json.dumps(counts.change_sizes()).encode())
                return True
            if self.path == "/__proxy/reset":
                counts.reset()
                self._reply(200, b"{}")
                return True
            return False

        def _forward(self) -> None:
            if self.path.startswith("/__proxy/"):
                if not self._control():
                    self._reply(404, b"{}")
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            op = operation(self.command, self.path)
            if not self.path.startswith("/moto-api"):
                counts.add(op, self.path)
            if op == "ChangeResourceRecordSets" and body:
                try:
                    counts.add_size(change_size(body))
                except ET.ParseError:
                    counts.add_size((-1, -1))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn = http.client.HTTPConnection(host, port, timeout=300)
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                resp_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
                status = resp.status
            except OSError as exc:
                self._reply(502, json.dumps({"proxy_error": str(exc)}).encode())
                return
            finally:
                conn.close()
            if op == "ListHealthChecks" and status == 200:
                data = fix_health_checks(data)
            self.send_response(status)
            for k, v in resp_headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

    return Handler


class TLSServer(ThreadingHTTPServer):
    """HTTPS: each accepted connection is wrapped (the handshake in the connection's thread)."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 context: ssl.SSLContext) -> None:
        super().__init__(address, handler)
        self.context = context

    def finish_request(self, request: socket.socket, client_address: Any) -> None:  # type: ignore[override]
        try:
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        super().finish_request(wrapped, client_address)


def serve(listen: str, upstream: str, cert: str | None = None, key: str | None = None) -> ThreadingHTTPServer:
    host, _, port = listen.rpartition(":")
    address = (host or "127.0.0.1", int(port))
    handler = make_handler(upstream, Counts())
    if cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server: ThreadingHTTPServer = TLSServer(address, handler, context)
    else:
        server = ThreadingHTTPServer(address, handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", required=True, help="HOST:PORT to listen on (PORT 0: any free port)")
    ap.add_argument("--upstream", required=True, help="moto_server URL, e.g. http://127.0.0.1:5000")
    ap.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    ap.add_argument("--tls-key", help="and this private key (PEM)")
    args = ap.parse_args(argv)
    server = serve(args.listen, args.upstream, args.tls_cert, args.tls_key)
    host, port = server.server_address[:2]
    print(f"listening {host!r}:{port}".replace("'", ""), flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
