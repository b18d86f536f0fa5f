"""The orchestrator's failover time, its false withdrawals under latency jitter, and its memory
(docs/health.md, "Failover time budget").

    python bench/bench_failover.py [--only failover,soak,rss] [--nodes 1000] [--interval 0.25]
                                   [--timeout 0.2] [--failures 2] [--successes 1] [--reps 9]
                                   [--fault hang|refuse] [--soak-seconds 600] [--jitter-ms 50]
                                   [--targets 10000]
    python bench/bench_failover.py --quick   # 50 nodes, 2 reps, 8 s of soak, 200 RSS targets (CI)

Every part runs the real thing in its own processes: the nodes' health endpoints are served by
one server process (asyncio; node i answers HTTP/1.1 on its own loopback address
127.2.<i / 250>.<i % 250 + 1>, one port for all; keep-alive honoured when a probe asks for it),
so its CPU does not count against the orchestrator; the orchestrator is `gitdns orchestrator
--out DIR --signal-pid-file PID --lease none` (a process of its own); the files go to a
directory a real dnsmasq serves (addn-hosts, SIGHUP after each write, no cache,
edns-packet-max 65000 so that one UDP answer holds 1,000 addresses), queried every 20 ms.
No packet leaves 127.0.0.0/8.

failover  N nodes (default 1,000) probed every I = 250 ms, timeout T = 200 ms, failure threshold
          F = 2, success threshold S = 1 (``healthCheck`` of the NodePool).  Each repetition
          picks another node at a random phase of the probe schedule and makes it stop
          answering (``--fault hang``, the default: connections are accepted, requests never
          answered, so each probe fails at its timeout; ``--fault refuse``: the node's socket is
          closed, probes fail at once), then measures from the moment the server applied it until
          dnsmasq's answer no longer holds the node's address.  The probe schedule's own bound is
          I x F + T (the node fails just after a probe: F more probes, the last one failing at its
          timeout; I x F with ``--fault refuse``): printed as ``failover/bound RATIO (target <=
          1.2x)`` for the median.  Where
          the time goes, per repetition: the orchestrator's log line of the state change
          (detection), the hosts file's mtime (render + write), dnsmasq's answer (SIGHUP, re-read,
          query).  Then the node answers again: ``recovery/bound`` against I x S + T.
soak      the same N nodes, none stopped, each answer delayed by a random 0-50 ms (uniform;
          ``--jitter-ms``) for ``--soak-seconds`` (600 s by default): dnsmasq queried every 100 ms
          and every write of the hosts file read back; a false withdrawal is a healthy node's
          address missing from either, or a node's state changing to unhealthy in the
          orchestrator's log.  Printed as ``failover/false-withdrawals N (target 0)``.
rss       the `gitdns orchestrator` command in a process of its own (``gitdns.cli.main``, as the
          image runs it: --out, --lease none, --listen 127.0.0.1:0, the probe ranges from
          GITDNS_PROBE_ALLOW_RANGES) with a NodePool of N nodes whose health endpoints refuse
          connections (each node's own loopback address, 127.1.x.y, a closed port: a node is
          probed at its own address only), interval 5 s; after three intervals, read from inside
          that process: VmRSS / VmHWM (``orchestrator/rss`` prints VmHWM against issue 33's
          50 MiB), probes completed, and whether the kubernetes client was loaded (it must not be
          for --out); then SIGTERM, the command's own way out.

The OpenOva failover spec claimed 10 s best case (5 s x 2); with its 2 s timeout and sequential
checks it is really 7-12 s, plus its ConfigMap path (about a minute of kubelet projection).

Prints figures and PASS/MISS; asserts nothing.  Exits 1 when a part could not run (no dnsmasq,
a child failed, an address never withdrawn or back within 30 s); a missed target is printed only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import dns.message
import dns.rcode
import dns.rdatatype

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.dns_servers import stop_process  # noqa: E402

NAME = "api.tenant-a.test"
POOL = "edge"
RATIO_TARGET = 1.2


def node_ip(i: int) -> str:
    return f"127.2.{i // 250}.{i % 250 + 1}"


# --- the nodes' health endpoints (a process of their own: ``--serve``) -----------------------

OK_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
OK_KEEP = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


class Nodes:
    """Node i answers on node_ip(i):port: ``ok`` (200 after a random 0..jitter delay), ``hang``
    (connections accepted, requests never answered) or ``refuse`` (its socket closed)."""

    def __init__(self, count: int, port: int, jitter: float) -> None:
        self.count, self.port, self.jitter = count, port, jitter
        self.state = ["ok"] * count
        self.servers: dict[int, asyncio.AbstractServer] = {}
        self.requests = 0
        self.rng = random.Random(7)

    async def listen(self, i: int) -> None:
        loop = asyncio.get_running_loop()
        self.servers[i] = await loop.create_server(lambda: Answer(self, i), node_ip(i), self.port,
                                                   reuse_address=True, backlog=128)

    async def command(self, line: str) -> str:
        what, _, arg = line.strip().partition(" ")
        if what == "jitter":
            self.jitter = float(arg) / 1000
        elif what == "stats":
            return f"stats {self.requests}"
        elif what in ("ok", "hang", "refuse"):
            i = int(arg)
            if what == "refuse" and i in self.servers:
                self.servers.pop(i).close()
            elif what != "refuse" and i not in self.servers:
                await self.listen(i)
            self.state[i] = what
        return f"done {time.monotonic():.6f} {time.time():.6f}"


class Answer(asyncio.Protocol):
    def __init__(self, nodes: Nodes, i: int) -> None:
        self.nodes, self.i = nodes, i
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            request, _, self.buf = self.buf.partition(b"\r\n\r\n")
            self.nodes.requests += 1
            if self.nodes.state[self.i] != "ok":
                continue  # hang: never answered
            close = b"connection: close" in request.lower()
            delay = self.nodes.rng.uniform(0.0, self.nodes.jitter) if self.nodes.jitter else 0.0
            if delay:
                asyncio.get_running_loop().call_later(delay, self.answer, close)
            else:
                self.answer(close)

    def answer(self, close: bool) -> None:
        t = self.transport
        if t is None or t.is_closing() or self.nodes.state[self.i] != "ok":
            return
        t.write(OK_CLOSE if close else OK_KEEP)
        if close:
            t.close()


async def serve_main(count: int, port: int, jitter_ms: float) -> None:
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    nodes = Nodes(count, port, jitter_ms / 1000)
    for i in range(count):
        await nodes.listen(i)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    while line := (await reader.readline()).decode():
        print(await nodes.command(line), flush=True)


class NodeProcess:
    """The server process, driven line by line over its stdin/stdout."""

    def __init__(self, count: int, port: int, jitter_ms: float, log: IO[bytes]) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(count), str(port), str(jitter_ms)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if ready.strip() != "ready":
            raise RuntimeError(f"node server did not start: {ready!r}")

    def send(self, line: str) -> list[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().split()

    def set(self, what: str, i: int) -> tuple[float, float]:
        """(monotonic, wall) time the server applied it."""
        reply = self.send(f"{what} {i}")
        return float(reply[1]), float(reply[2])

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- dnsmasq, asked over raw UDP (parsing 1,000 answers with dnspython costs ~40 ms a query) ----


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def dnsmasq_path() -> str | None:
    for path in ("/usr/sbin/dnsmasq", "/usr/bin/dnsmasq", "/sbin/dnsmasq"):
        if os.path.exists(path):
            return path
    return None


class Dnsmasq:
    def __init__(self, hosts_dir: Path, workdir: Path, binary: str) -> None:
        self.hosts_dir, self.workdir, self.binary = hosts_dir, workdir, binary
        self.pid_file = workdir / "dnsmasq.pid"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.5)

    def start(self) -> Dnsmasq:
        self.hosts_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(50):
            self.port = free_port(kind=socket.SOCK_DGRAM)
            try:
                with socket.socket() as tcp:
                    tcp.bind(("127.0.0.1", self.port))
                break
            except OSError:
                continue
        conf = self.workdir / "dnsmasq.conf"
        conf.write_text("\n".join([
            f"port={self.port}", "listen-address=127.0.0.1", "bind-interfaces", "no-resolv", "no-hosts",
            "no-negcache", f"user={pwd.getpwuid(os.getuid()).pw_name}", f"addn-hosts={self.hosts_dir}",
            "edns-packet-max=65000", "log-facility=-", ""]))
        log = (self.workdir / "dnsmasq.log").open("wb")
        self.proc = subprocess.Popen([self.binary, "-k", "-C", str(conf)], stdout=log, stderr=subprocess.STDOUT)
        self.pid_file.write_text(f"{self.proc.pid}\n")  # with -k the child is the server
        if until(lambda: self.answers("ready.invalid") is not None, 10) == float("inf"):
            raise RuntimeError("dnsmasq does not answer")
        return self

    def answers(self, name: str) -> set[str] | None:
        """The A addresses for ``name`` (empty for NXDOMAIN); None when no answer came."""
        query = dns.message.make_query(name, "A", use_edns=0, payload=65000)  # a 65,000-byte answer fits
        try:
            self.sock.sendto(query.to_wire(), ("127.0.0.1", self.port))
            while True:
                wire = self.sock.recv(65535)
                if wire[:2] == query.id.to_bytes(2, "big"):
                    break
        except OSError:
            return None
        reply = dns.message.from_wire(wire)
        if reply.rcode() != dns.rcode.NOERROR:
            return set()
        return {item.address for rrset in reply.answer if rrset.rdtype == dns.rdatatype.A for item in rrset}

    def stop(self) -> None:
        self.sock.close()
        if self.proc is not None:
            stop_process(self.proc)


def until(predicate: Callable[[], Any], limit: float = 30.0, every: float = 0.02) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if predicate():
            return time.monotonic() - start
        time.sleep(every)
    return float("inf")


# --- one setup: the node server, dnsmasq, the orchestrator ------------------------------------


class Setup:
    def __init__(self, work: Path, binary: str, args: argparse.Namespace, jitter_ms: float) -> None:
        self.work, self.args = work, args
        self.count = args.nodes
        self.everyone = {node_ip(i) for i in range(self.count)}
        port = free_port()
        desired = work / "desired"
        desired.mkdir(parents=True)
        lines = ["apiVersion: gitdns.io/v1alpha1", "kind: NodePool", f"metadata: {{name: {POOL}}}", "spec:", "  nodes:"]
        lines += [f"    - {{name: node-{i}, ip: {node_ip(i)}, healthEndpoint: \"http://{node_ip(i)}:{port}/healthz/ready\"}}"
                  for i in range(self.count)]
        lines.append(f"  healthCheck: {{interval: {args.interval}, timeout: {args.timeout}, "
                     f"failureThreshold: {args.failures}, successThreshold: {args.successes}}}")
        (desired / "nodepool.yaml").write_text("\n".join(lines) + "\n")
        (desired / "tenant-a.yaml").write_text(
            "apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata: {name: tenant-a}\n"
            f"spec: {{nodePool: {POOL}, domains: [{NAME}]}}\n")
        self.out = work / "out"
        self.server_log = (work / "nodes.log").open("wb")
        self.nodes = NodeProcess(self.count, port, jitter_ms, self.server_log)
        self.dnsmasq = Dnsmasq(self.out, work, binary).start()
        self.orch_log = work / "orchestrator.log"
        argv = [sys.executable, "-m", "gitdns", "orchestrator", "--repo", str(desired), "--node-pool", POOL,
                "--out", str(self.out), "--signal-pid-file", str(self.dnsmasq.pid_file), "--lease", "none",
                "--listen", f"127.0.0.1:{free_port()}", "--admin-listen", f"127.0.0.1:{free_port()}",
                "--state-dir", str(work / "state"), "--probe-allow-ranges", "127.0.0.0/8",
                "--log-format", "text", "--log-level", "info", "--poll-interval", "30"]
        with self.orch_log.open("wb") as log:
            self.orch = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def hosts_file(self) -> Path | None:
        found = [p for p in self.out.glob("*.hosts") if not p.name.startswith(".")]
        return found[0] if found else None

    def cpu(self, pid: int) -> float:
        """CPU seconds of ``pid`` so far."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log_lines(self) -> list[str]:
        return self.orch_log.read_text(errors="replace").splitlines()

    def settle(self, limit: float = 90.0, quiet: float = 3.0) -> bool:
        """Until dnsmasq answers every node and no node changed state for ``quiet`` seconds (the
        first rounds of 1,000 probes may time out while the processes start)."""
        start = time.monotonic()
        while time.monotonic() - start < limit:
            changes = sum(1 for line in self.log_lines() if "health: target=" in line)
            time.sleep(quiet)
            if changes == sum(1 for line in self.log_lines() if "health: target=" in line) \
                    and self.dnsmasq.answers(NAME) == self.everyone:
                return True
        return False

    def stop(self) -> None:
        if self.args.keep_log:
            shutil.copy(self.orch_log, self.args.keep_log)
        stop_process(self.orch)
        self.dnsmasq.stop()
        self.nodes.stop()
        self.server_log.close()


def log_time(line: str) -> float:
    """The wall time of a text log line (``2026-01-01 10:00:00,123 INFO ...``)."""
    stamp = " ".join(line.split()[:2])
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def state_change(lines: list[str], node: str, to: str, after: float) -> float | None:
    for line in lines:
        if f"target={node} state=" in line and f"->{to}" in line:
            try:
                at = log_time(line)
            except ValueError:
                continue
            if at >= after - 0.002:
                return at
    return None


def bench_failover(binary: str, args: argparse.Namespace) -> bool:
    """False when it could not run or an address never moved within 30 s."""
    interval, timeout, failures, successes = args.interval, args.timeout, args.failures, args.successes
    rng = random.Random(11)
    rows: list[tuple[float, float | None, float | None, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        setup = Setup(Path(tmp), binary, args, 0.0)
        try:
            if not setup.settle():
                print(f"failover: dnsmasq never answered all {setup.count} nodes steadily; log:\n"
                      + "\n".join(setup.log_lines()[-20:]))
                return False
            cpu0, t0 = setup.cpu(setup.orch.pid), time.monotonic()
            server0 = setup.cpu(setup.nodes.proc.pid)
            for rep, victim in enumerate(rng.sample(range(setup.count), args.reps)):
                time.sleep(rng.uniform(0, interval) + 3 * interval)  # land at another phase of the schedule
                ip, node = node_ip(victim), f"node-{victim}"
                hosts = setup.hosts_file()
                before = hosts.stat().st_mtime_ns if hosts else 0
                at, wall = setup.nodes.set(args.fault, victim)
                gone = until(lambda ip=ip: ip not in (setup.dnsmasq.answers(NAME) or {ip}), 30, 0.02)
                down = time.monotonic() - at if gone < float("inf") else float("inf")
                hosts = setup.hosts_file()
                written = (hosts.stat().st_mtime_ns / 1e9 - wall) if hosts and hosts.stat().st_mtime_ns != before \
                    else None
                detected = state_change(setup.log_lines(), node, "unhealthy", wall)
                at_up, _ = setup.nodes.set("ok", victim)
                back = until(lambda: setup.dnsmasq.answers(NAME) == setup.everyone, 30, 0.02)
                up = time.monotonic() - at_up if back < float("inf") else float("inf")
                rows.append((down, None if detected is None else detected - wall, written, up))
                print(f"  rep {rep + 1}: withdrawn after {down:.2f} s, back after {up:.2f} s "
                      f"({node}; state change logged at {fmt(rows[-1][1])}, hosts file written at "
                      f"{fmt(written)}, dnsmasq answered without it at {down:.3f} s)")
            busy = (setup.cpu(setup.orch.pid) - cpu0) / (time.monotonic() - t0)
            server = (setup.cpu(setup.nodes.proc.pid) - server0) / (time.monotonic() - t0)
        finally:
            setup.stop()
    down_all = [r[0] for r in rows]
    up_all = [r[3] for r in rows]
    # a refused probe fails at once: the schedule's bound has no timeout in it then
    bound = interval * failures + (timeout if args.fault == "hang" else 0.0)
    up_bound = interval * successes + timeout
    med, up_med = statistics.median(down_all), statistics.median(up_all)
    print(f"failover ({args.nodes} nodes, interval {interval:g} s, timeout {timeout:g} s, "
          f"thresholds {failures}/{successes}, fault {args.fault}, "
          f"dnsmasq queried every 20 ms, {args.reps} reps; CPU of one core: orchestrator {busy * 100:.0f}%, node "
          f"server {server * 100:.0f}%):")
    print(f"  node down -> IP gone : median {med:.3f} s, max {max(down_all):.3f} s "
          f"(bound I x F{' + T' if args.fault == 'hang' else ''} = {bound:g} s)")
    print(f"  node back -> IP back : median {up_med:.3f} s, max {max(up_all):.3f} s (bound I x S + T = {up_bound:g} s)")
    detect = [r[1] for r in rows if r[1] is not None]
    write = [r[2] for r in rows if r[2] is not None]
    if detect and write:
        print(f"  where the time goes (medians): state change logged {statistics.median(detect):.3f} s, hosts file "
              f"written {statistics.median(write):.3f} s, dnsmasq answers without it {med:.3f} s")
    ratio, up_ratio = med / bound, up_med / up_bound
    print(f"failover/bound {ratio:.2f}x (target <= {RATIO_TARGET}x) {'PASS' if ratio <= RATIO_TARGET else 'MISS'}: "
          f"median {med:.3f} s, bound {bound:g} s, reps " + " ".join(f"{d:.3f}" for d in down_all))
    print(f"recovery/bound {up_ratio:.2f}x (target <= {RATIO_TARGET}x) "
          f"{'PASS' if up_ratio <= RATIO_TARGET else 'MISS'}: median {up_med:.3f} s, bound {up_bound:g} s, reps "
          + " ".join(f"{u:.3f}" for u in up_all))
    print("  the OpenOva failover spec claimed: 10 s best case (5 s interval x 2 failures); really 7-12 s "
          "with its 2 s timeout and nodes checked one after another, plus ~60 s of ConfigMap projection "
          "on its delivery path")
    return max(down_all + up_all) < float("inf")


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def bench_soak(binary: str, args: argparse.Namespace) -> bool:
    jitter = args.jitter_ms
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        setup = Setup(Path(tmp), binary, args, jitter)
        missing_dns = missing_file = queries = writes = 0
        try:
            if not setup.settle():
                print("soak: dnsmasq never answered every node steadily; log:\n"
                      + "\n".join(setup.log_lines()[-20:]))
                return False
            start_lines = len(setup.log_lines())
            requests0 = int(setup.nodes.send("stats")[1])
            cpu0, t0 = setup.cpu(setup.orch.pid), time.monotonic()
            seen_mtime = 0
            while time.monotonic() - t0 < args.soak_seconds:
                answer = setup.dnsmasq.answers(NAME)
                queries += 1
                if answer is not None and answer != setup.everyone:
                    missing_dns += 1
                hosts = setup.hosts_file()
                if hosts is not None:
                    mtime = hosts.stat().st_mtime_ns
                    if mtime != seen_mtime:
                        seen_mtime = mtime
                        writes += 1
                        ips = {line.split()[0] for line in hosts.read_text().splitlines()
                               if line and not line.startswith("#")}
                        if ips != setup.everyone:
                            missing_file += 1
                time.sleep(0.1)
            elapsed = time.monotonic() - t0
            busy = (setup.cpu(setup.orch.pid) - cpu0) / elapsed
            probes = (int(setup.nodes.send("stats")[1]) - requests0) / elapsed
            changes = [line for line in setup.log_lines()[start_lines:] if "health: target=" in line]
            down = [line for line in changes if "->unhealthy" in line]
        finally:
            setup.stop()
    false = len(down) + missing_dns + missing_file
    print(f"soak ({args.nodes} nodes, interval {args.interval:g} s, timeout {args.timeout:g} s, thresholds "
          f"{args.failures}/{args.successes}, each answer delayed by a uniform 0-{jitter:g} ms, "
          f"{elapsed:.0f} s):")
    print(f"  probes answered {probes:.0f}/s (expected {args.nodes / args.interval:.0f}), orchestrator CPU "
          f"{busy * 100:.0f}% of one core, hosts file writes {max(0, writes - 1)}")
    print(f"  state changes to unhealthy {len(down)}, dnsmasq answers missing a node {missing_dns} of {queries}, "
          f"hosts files missing a node {missing_file}")
    for line in changes[:5]:
        print("    " + line[:160])
    print(f"failover/false-withdrawals {false} (target 0) {'PASS' if false == 0 else 'MISS'}")
    return True


RSS_CHILD = r"""
import json, os, signal, sys, threading, time
from pathlib import Path
from gitdns.orchestrator import wiring
root, targets, wait = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
built, result = [], {}
build = wiring.build
def keep(config, *args, **kwargs):  # the Orchestrator the command builds, for its counters
    built.append(build(config, *args, **kwargs))
    return built[-1]
wiring.build = keep
def sample():
    while not built:
        time.sleep(0.05)
    orch = built[0]
    time.sleep(max(0.0, wait - 5))
    t0, c0, done0 = time.monotonic(), time.process_time(), orch.monitor.stats().completed
    time.sleep(5)
    cpu = (time.process_time() - c0) / (time.monotonic() - t0)
    rate = (orch.monitor.stats().completed - done0) / (time.monotonic() - t0)
    status = {k: v for k, v in (l.split(":", 1) for l in Path("/proc/self/status").read_text().splitlines())}
    stats = orch.monitor.stats()
    result.update({"rss_kib": int(status["VmRSS"].split()[0]), "hwm_kib": int(status["VmHWM"].split()[0]),
                   "completed": stats.completed, "skipped": stats.skipped_slots, "lag": stats.max_start_lag,
                   "kubernetes": "kubernetes" in sys.modules, "published": len(orch.published.ips),
                   "delivered": orch.publisher.landed, "targets": len(orch.nodes), "cpu": cpu, "rate": rate})
    os.kill(os.getpid(), signal.SIGTERM)  # the command's own way out
threading.Thread(target=sample, daemon=True).start()
from gitdns.cli import main
code = main(["orchestrator", "--repo", str(root / "desired"), "--node-pool", "big", "--out", str(root / "out"),
             "--state-dir", str(root / "state"), "--lease", "none", "--poll-interval", "30",
             "--listen", "127.0.0.1:0", "--log-level", "warning"])
print(json.dumps({**result, "exit": code}))
"""
RSS_RATIO_MIB = 50


def bench_rss(targets: int, wait: float) -> bool:
    closed = free_port()  # nothing listens there: every probe is refused at once
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as tmp:
        root = Path(tmp)
        (root / "desired").mkdir()
        lines = ["apiVersion: gitdns.io/v1alpha1", "kind: NodePool", "metadata: {name: big}", "spec:", "  nodes:"]
        for i in range(targets):  # a node is probed at its own address only: each its own on loopback
            ip = f"127.{1 + i // 62_500 % 250}.{i // 250 % 250}.{i % 250 + 1}"
            lines.append(f"    - {{name: n{i}, ip: {ip}, healthEndpoint: \"http://{ip}:{closed}/healthz/ready\"}}")
        lines.append("  healthCheck: {interval: 5, timeout: 2, failureThreshold: 2, successThreshold: 1}")
        (root / "desired" / "pool.yaml").write_text("\n".join(lines) + "\n")
        (root / "desired" / "tenant.yaml").write_text(
            "apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata: {name: big-tenant}\n"
            "spec: {nodePool: big, domains: [api.big.test, app.big.test]}\n")
        env = {**os.environ, "GITDNS_PROBE_ALLOW_RANGES": "127.0.0.0/8"}
        out = subprocess.run([sys.executable, "-c", RSS_CHILD, str(root), str(targets), str(wait)],
                             capture_output=True, text=True, cwd=ROOT, timeout=wait + 300, env=env)
    if out.returncode != 0:
        print(f"rss: child failed: {out.stderr[-2000:]}")
        return False
    result = json.loads(out.stdout.strip().splitlines()[-1])
    mib = result["hwm_kib"] / 1024
    print(f"rss ({targets} targets, interval 5 s, {wait:g} s of probing, --out delivery):")
    print(f"  VmRSS {result['rss_kib'] / 1024:.1f} MiB, VmHWM {mib:.1f} MiB")
    print(f"  probes completed {result['completed']}, skipped slots {result['skipped']}, "
          f"max start lag {result['lag']:.2f} s, nodes {result['targets']}, published {result['published']}, "
          f"delivered {result['delivered']}")
    print(f"  steady state (last 5 s): {result['rate']:.0f} probes/s (expected {targets / 5:.0f}), "
          f"CPU {result['cpu'] * 100:.0f}% of one core")
    print(f"  kubernetes client loaded: {result['kubernetes']} ({'PASS' if not result['kubernetes'] else 'MISS'})")
    ratio = mib / RSS_RATIO_MIB
    print(f"orchestrator/rss {ratio:.2f}x (target <= {RSS_RATIO_MIB} MiB) {'PASS' if ratio <= 1 else 'MISS'}: "
          f"VmHWM {mib:.1f} MiB, {targets} targets")
    if not result["completed"]:
        print("rss: no probe completed: the figures above are of an idle orchestrator, not of one probing")
    return bool(result["completed"])


def main() -> int:
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(serve_main(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="failover,soak,rss")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=0.2)
    parser.add_argument("--failures", type=int, default=2)
    parser.add_argument("--successes", type=int, default=1)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--fault", choices=("hang", "refuse"), default="hang")
    parser.add_argument("--soak-seconds", type=float, default=600.0)
    parser.add_argument("--jitter-ms", type=float, default=50.0)
    parser.add_argument("--targets", type=int, default=10000, help="nodes of the rss part")
    parser.add_argument("--wait", type=float, default=15.0, help="seconds of probing before RSS is read")
    parser.add_argument("--keep-log", default="", help="copy the orchestrator's log there at the end of a part")
    parser.add_argument("--quick", action="store_true", help="50 nodes, 2 reps, 8 s of soak, 200 RSS targets")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.reps, args.soak_seconds, args.targets, args.wait = 50, 2, 8.0, 200, 6.0
    parts = set(args.only.split(","))
    ran = True
    if parts & {"failover", "soak"}:
        binary = dnsmasq_path()
        if binary is None:
            print("failover: dnsmasq not installed; skipped")
            ran = False
        else:
            if "failover" in parts:
                ran &= bench_failover(binary, args)
            if "soak" in parts:
                ran &= bench_soak(binary, args)
    if "rss" in parts:
        ran &= bench_rss(args.targets, args.wait)
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
