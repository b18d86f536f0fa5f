"""Real peers for the orchestrator's end-to-end tests and bench/bench_failover.py (no pytest).

* `NodeServer`: an HTTP server on its own loopback address (127.0.0.x) answering
  ``/healthz/ready`` like an Istio gateway; ``stop()`` makes the node stop answering
  (connection refused), ``start()`` brings it back on the same address and port.
* `Dnsmasq`: dnsmasq on a free 127.0.0.1 port serving every
  hosts file in a directory (``addn-hosts=DIR``; hidden files, like the delivery's temporary
  files and manifest, are skipped), re-read on SIGHUP via its pid file.
* `write_desired`: a desired-state directory with one NodePool and its Tenants.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

DNSMASQ = "/usr/sbin/dnsmasq"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        code = self.server.status if self.path == "/healthz/ready" else 404
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    status = 200

    def server_bind(self) -> None:
        # not HTTPServer's, which names the server by a reverse lookup of its address
        # (socket.getfqdn): for 127.0.0.x outside /etc/hosts, a query to the machine's resolver
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class NodeServer:
    def __init__(self, name: str, ip: str, port: int) -> None:
        self.name, self.ip, self.port = name, ip, port
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.port}/healthz/ready"

    def start(self) -> NodeServer:
        self._httpd = _Server((self.ip, self.port), _Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def running(self) -> bool:
        return self._httpd is not None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_udp_tcp_port() -> int:
    for _ in range(50):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            try:
                u.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port")


def start_nodes(count: int, first: int = 11) -> list[NodeServer]:
    """``count`` nodes on 127.0.0.<first>..; one port shared by all (each has its own address)."""
    port = free_port()
    return [NodeServer(f"node-{i + 1}", f"127.0.0.{first + i}", port).start() for i in range(count)]


def dnsmasq_path() -> str | None:
    found = shutil.which("dnsmasq") or (DNSMASQ if os.path.exists(DNSMASQ) else None)
    return found


class Dnsmasq:
    def __init__(self, hosts_dir: Path, workdir: Path, binary: str = DNSMASQ) -> None:
        self.hosts_dir = hosts_dir
        self.workdir = workdir
        self.binary = binary
        self.port = free_udp_tcp_port()
        self.pid_file = workdir / "dnsmasq.pid"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Dnsmasq:
        self.hosts_dir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "dnsmasq.conf"
        user = pwd.getpwuid(os.getuid()).pw_name  # stay this user: pytest's tmp dirs are 0700
        conf.write_text("\n".join([
            f"port={self.port}", "listen-address=127.0.0.1", "bind-interfaces", "no-resolv", "no-hosts",
            "no-negcache", f"user={user}", f"addn-hosts={self.hosts_dir}", "log-facility=-", "",
        ]))
        log = (self.workdir / "dnsmasq.log").open("wb")
        self.proc = subprocess.Popen([self.binary, "-k", "-C", str(conf)], stdout=log, stderr=subprocess.STDOUT)
        self.pid_file.write_text(f"{self.proc.pid}\n")  # with -k the child is the server
        wait_for(lambda: self.answers("ready.invalid") is not None, timeout=10, what="dnsmasq to answer")
        return self

    def answers(self, name: str) -> set[str] | None:
        """The A addresses for ``name`` (empty for NXDOMAIN/REFUSED); None when no answer."""
        query = dns.message.make_query(name, "A")
        try:
            reply = dns.query.udp(query, "127.0.0.1", port=self.port, timeout=0.5)
        except (dns.exception.Timeout, OSError):
            return None
        if reply.rcode() != dns.rcode.NOERROR:
            return set()
        return {item.address for rrset in reply.answer if rrset.rdtype == dns.rdatatype.A for item in rrset}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def wait_for(predicate: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.02, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def nodepool_yaml(name: str, nodes: Iterable[NodeServer], *, interval: float, timeout: float,
                  failure_threshold: int = 2, success_threshold: int = 1) -> str:
    lines = ["apiVersion: gitdns.io/v1alpha1", "kind: NodePool", f"metadata: {{name: {name}}}", "spec:", "  nodes:"]
    lines += [f"    - {{name: {n.name}, ip: {n.ip}, healthEndpoint: \"{n.endpoint}\"}}" for n in nodes]
    lines.append(f"  healthCheck: {{interval: {interval}, timeout: {timeout}, failureThreshold: {failure_threshold}, "
                 f"successThreshold: {success_threshold}}}")
    return "\n".join(lines) + "\n"


def tenant_yaml(name: str, pool: str, domains: Iterable[str], zone: str | None = None) -> str:
    lines = ["apiVersion: gitdns.io/v1alpha1", "kind: Tenant", f"metadata: {{name: {name}}}", "spec:",
             f"  nodePool: {pool}", f"  domains: [{', '.join(domains)}]"]
    if zone:
        lines.append(f"  zone: {zone}")
    return "\n".join(lines) + "\n"


def write_desired(root: Path, pool: str, nodes: Iterable[NodeServer], tenants: dict[str, list[str]], *,
                  interval: float, timeout: float, failure_threshold: int = 2, success_threshold: int = 1) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "nodepool.yaml").write_text(nodepool_yaml(pool, nodes, interval=interval, timeout=timeout,
                                                      failure_threshold=failure_threshold,
                                                      success_threshold=success_threshold))
    for name, domains in tenants.items():
        (root / f"tenant-{name}.yaml").write_text(tenant_yaml(name, pool, domains))
