"""Health prober throughput and CPU: N loopback targets probed every interval, against a bare
asyncio prober probing the same targets in the same run.

    python bench/bench_probes.py --protocol http  --targets 10000
    python bench/bench_probes.py --protocol tcp   --targets 10000
    python bench/bench_probes.py --protocol https --targets 2000 [--verify]
    options: --interval 5 --windows 6 --addresses 50 --ports 4 --profile out.prof --no-bare
    python bench/bench_probes.py --quick    # 200 targets, interval 1 s, 2 windows, 4 x 2 listeners (for CI)

The servers run in a SEPARATE process (this file with ``--serve``): one asyncio server on
127.0.0.1-127.0.0.<addresses> x <ports> ports answering ``HTTP/1.1 200 OK`` with a 3-byte
body and keeping the connection for the next request (HTTP/1.1 keep-alive), or closing it
after the answer when the request says ``Connection: close`` (TLS with a self-signed P-256
certificate for https).  Targets are distinct (address, port, path) tuples.  The prober
(`HealthMonitor`) runs in this process.

The peer, for http and tcp: a bare asyncio prober in a process of its own (this file with
``--bare``, so that its CPU is measured apart), run right after the monitor against the same
server (run together, three busy processes on a 2-core machine starved each other into
timeouts): the minimum code
that probes the same targets on the same schedule (each its own fixed-rate loop from a random
phase, missed slots skipped) with the same timeout — http: one ``GET`` per connection with
``Connection: close``, the status line read, the socket closed (the loop's ``sock_*`` calls,
``asyncio.timeout``); tcp: connect and close.  Both warm up one interval and measure
``--windows`` intervals; the ratio is of CPU per completed probe.

After one warm-up interval (every target's random phase has come round) it measures
``--windows`` intervals and prints: probes completed per interval, scheduled rounds skipped
(a round that could not start inside its own interval), the worst start lag, probes per
second, probes per CPU-second, the prober process's CPU (user+sys, share of one core), the
bare prober's, their ratio against the target (``probes/bare-prober 0.41x (target <= 1.2x)
PASS``) and the server process's CPU apart.  Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import datetime
import json
import math
import random
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gitdns.adapters.probes import HealthMonitor
from gitdns.core.health import HealthSettings, ProbeSpec
from gitdns.core.reach import ProbeReach

KEEP = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
CLOSE = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
TARGET_RATIO = 1.2  # the prober's CPU at most 1.2x the bare prober's


# -- the server process --------------------------------------------------------------------


class Answer(asyncio.Protocol):
    """Answer each request with 200, keeping the connection unless the request says
    ``Connection: close``; a TCP probe just connects and leaves."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf = self.buf + data if self.buf else data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buf = self.buf[:end], self.buf[end + 4 :]
            if b"\r\nconnection: close" in head.lower():
                self.transport.write(CLOSE)
                self.transport.close()
                return
            self.transport.write(KEEP)

    def eof_received(self) -> bool:
        self.transport.close()
        return False


async def serve(addresses: int, ports: int, tls: ssl.SSLContext | None) -> None:
    loop = asyncio.get_running_loop()
    servers = []
    chosen: list[int] = []
    for _ in range(ports):
        first = await loop.create_server(Answer, "127.0.0.1", 0, ssl=tls, backlog=4096)
        servers.append(first)
        port = first.sockets[0].getsockname()[1]
        chosen.append(port)
        for a in range(2, addresses + 1):
            servers.append(await loop.create_server(Answer, f"127.0.0.{a}", port, ssl=tls, backlog=4096))
    print(json.dumps(chosen), flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    for s in servers:
        s.close()


def make_cert(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench.example.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("bench.example.test")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def server_main(args: argparse.Namespace) -> None:
    tls = None
    if args.cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.cert, args.key)
    asyncio.run(serve(args.addresses, args.ports, tls))


# -- the bare prober (its own process) --------------------------------------------------------


async def bare_prober(probes: list[tuple[str, int, bytes]], interval: float, timeout: float,
                      warm: float, measured: float) -> dict[str, object]:
    """The peer: each target its own task, a fixed-rate loop from a random phase (missed slots
    skipped); http one GET per connection (``Connection: close``), the status line read; tcp
    (empty request) connect and close.  Returns its CPU and counts over ``measured`` seconds
    after ``warm``."""
    loop = asyncio.get_running_loop()
    counts = [0, 0]  # healthy, failed
    kinds: collections.Counter[str] = collections.Counter()  # why probes failed

    async def one(address: str, port: int, request: bytes) -> None:
        due = loop.time() + random.uniform(0.0, interval)
        while True:
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            line = b""
            try:
                async with asyncio.timeout(timeout):
                    await loop.sock_connect(sock, (address, port))
                    if request:
                        await loop.sock_sendall(sock, request)
                        while b"\n" not in line:
                            chunk = await loop.sock_recv(sock, 1024)
                            if not chunk:
                                break
                            line += chunk
                ok = not request or line.startswith(b"HTTP/1.1 200 ")
            except (OSError, TimeoutError) as exc:
                ok = False
                kinds[type(exc).__name__] += 1
            finally:
                sock.close()
            counts[0 if ok else 1] += 1
            due += interval
            behind = loop.time() - due
            if behind > 0:
                due += math.ceil(behind / interval) * interval

    tasks = [loop.create_task(one(*probe)) for probe in probes]
    await asyncio.sleep(warm)
    wall0, cpu0, split0, done0 = time.monotonic(), cpu(resource.RUSAGE_SELF), cpu_split(resource.RUSAGE_SELF), \
        sum(counts)
    await asyncio.sleep(measured)
    wall, used, split = time.monotonic() - wall0, cpu(resource.RUSAGE_SELF) - cpu0, cpu_split(resource.RUSAGE_SELF)
    result = {"wall": wall, "cpu": used, "user": split[0] - split0[0], "sys": split[1] - split0[1],
              "done": sum(counts) - done0, "healthy": counts[0], "failed": counts[1],
              "why": dict(kinds.most_common(3))}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return result


def bare_main() -> None:
    """``--bare``: read the job (JSON) from stdin, print the result (JSON)."""
    job = json.loads(sys.stdin.readline())
    probes = [(a, p, r.encode("latin-1")) for a, p, r in job["probes"]]
    print(json.dumps(asyncio.run(bare_prober(probes, job["interval"], job["timeout"], job["warm"],
                                             job["measured"]))), flush=True)


def bare_request(spec: ProbeSpec) -> bytes:
    """The bare prober's request: the monitor's, asking to close."""
    return (f"GET {spec.path} HTTP/1.1\r\nHost: {spec.request_host}\r\nUser-Agent: bare\r\nAccept: */*\r\n"
            "Connection: close\r\n\r\n").encode("latin-1")


def start_bare(args: argparse.Namespace, specs: dict[str, tuple[ProbeSpec, HealthSettings]],
               warm: float) -> subprocess.Popen[str] | None:
    if args.no_bare or args.protocol == "https":
        return None
    probes = [(spec.address, spec.port, bare_request(spec).decode("latin-1") if args.protocol == "http" else "")
              for spec, _ in specs.values()]
    bare = subprocess.Popen([sys.executable, __file__, "--bare"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert bare.stdin is not None
    bare.stdin.write(json.dumps({"probes": probes, "interval": args.interval, "timeout": 2.0, "warm": warm,
                                 "measured": args.interval * args.windows}) + "\n")
    bare.stdin.flush()
    return bare


# -- the prober ------------------------------------------------------------------------------


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def cpu_split(who: int) -> tuple[float, float]:
    r = resource.getrusage(who)
    return r.ru_utime, r.ru_stime


def targets(args: argparse.Namespace, ports: list[int]) -> dict[str, tuple[ProbeSpec, HealthSettings]]:
    settings = HealthSettings(interval=args.interval, timeout=2.0, failure_threshold=2, success_threshold=1)
    protocol = args.protocol.upper()
    out = {}
    for i in range(args.targets):
        address = f"127.0.0.{i % args.addresses + 1}"
        port = ports[i // args.addresses % len(ports)]
        tid = f"t{i}"
        spec = ProbeSpec(
            tid,
            protocol,
            address,
            port,
            path=f"/healthz/{i}",
            host="bench.example.test" if protocol == "HTTPS" else None,
            timeout=2.0,
            insecure=not args.verify,
        )
        out[tid] = (spec, settings)
    return out


def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--serve", "--addresses", str(args.addresses), "--ports", str(args.ports)]
        cert: Path | None = None
        if args.protocol == "https":
            cert, key = make_cert(Path(tmp))
            cmd += ["--cert", str(cert), "--key", str(key)]
        server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None and server.stdin is not None
        ports = json.loads(server.stdout.readline())
        before = (0.0, 0.0)
        try:
            before = measure(args, ports, cert)
        finally:
            server.stdin.close()
            server.wait(30)
    user, system = (b - a for a, b in zip(before, cpu_split(resource.RUSAGE_CHILDREN), strict=True))
    print(f"server process CPU (whole run incl. warm-up, apart): user {user:.2f} s + sys {system:.2f} s")


def measure(args: argparse.Namespace, ports: list[int], cert: Path | None) -> tuple[float, float]:
    """Runs the monitor (and the bare prober) and prints; returns the CPU of the children waited
    for so far (the bare prober's), to tell the server's apart."""
    trust = ssl.create_default_context(cafile=str(cert)) if args.verify and cert is not None else None
    monitor = HealthMonitor(verify_context=trust, reach=ProbeReach.parse("127.0.0.0/8"))  # the servers: loopback
    if args.profile:
        inner = monitor._thread_main  # profile the monitor's own thread

        def profiled() -> None:
            prof = cProfile.Profile(time.thread_time)
            prof.enable()
            try:
                inner()
            finally:
                prof.disable()
                prof.dump_stats(args.profile)

        monitor._thread_main = profiled  # type: ignore[method-assign]
    specs = targets(args, ports)
    warm = args.interval * 1.2  # warm-up: every phase has come round once
    monitor.set_targets(specs)
    monitor.start()
    time.sleep(warm)
    base = monitor.stats()
    checks = {tid: h.checks for tid, h in monitor.snapshot().items()}
    wall0, cpu0, split0 = time.monotonic(), cpu(resource.RUSAGE_SELF), cpu_split(resource.RUSAGE_SELF)
    per_window: list[int] = []
    zero: list[int] = []
    for _ in range(args.windows):
        time.sleep(args.interval)
        snap = monitor.snapshot()
        deltas = [snap[tid].checks - checks.get(tid, 0) for tid in specs]
        checks = {tid: h.checks for tid, h in snap.items()}
        per_window.append(sum(deltas))
        zero.append(sum(1 for d in deltas if d == 0))
    wall, used = time.monotonic() - wall0, cpu(resource.RUSAGE_SELF) - cpu0
    stats = monitor.stats()
    snap = monitor.snapshot()
    monitor.stop()
    done = stats.completed - base.completed
    errors = collections.Counter(h.last_error for h in snap.values() if h.last_error)
    states = collections.Counter(str(h.state) for h in snap.values())
    split = [b - a for a, b in zip(split0, cpu_split(resource.RUSAGE_SELF), strict=True)]
    tls = (" verified" if args.verify else " insecure") if args.protocol == "https" else ""
    print(f"protocol {args.protocol}{tls}  targets {args.targets}  interval {args.interval:g} s  "
          f"listeners {args.addresses} addresses x {len(ports)} ports  windows {args.windows}")  # fmt: skip
    print(f"probes completed per interval: {per_window}  (N = {args.targets})")
    print(f"targets with no completion in a window (boundary jitter, see skipped): {zero}")
    print(f"scheduled rounds skipped: {stats.skipped_slots - base.skipped_slots}  "
          f"worst start lag: {stats.max_start_lag * 1000:.1f} ms  in flight now: {stats.in_flight}")  # fmt: skip
    print(f"probes/s: {done / wall:.0f}  prober CPU: {used:.2f} s over {wall:.1f} s = {used / wall:.3f} core  "
          f"(user {split[0]:.2f} s, sys {split[1]:.2f} s)  probes per CPU-second: {done / used:.0f}")  # fmt: skip
    print(f"states: {dict(states)}  errors: {dict(errors.most_common(3))}")
    bare = start_bare(args, specs, warm)  # now that the monitor is stopped: each has the machine alike
    if bare is None:
        print("bare prober: not run (http and tcp only, or --no-bare)")
        return 0.0, 0.0
    out, _ = bare.communicate(timeout=args.interval * (args.windows + 2) + 120)
    peer = json.loads(out.strip().splitlines()[-1])
    kind = "one GET per connection, Connection: close" if args.protocol == "http" else "connect and close"
    print(f"bare prober ({kind}; own process): probes/s: {peer['done'] / peer['wall']:.0f}  "
          f"CPU: {peer['cpu']:.2f} s over {peer['wall']:.1f} s = {peer['cpu'] / peer['wall']:.3f} core  "
          f"(user {peer['user']:.2f} s, sys {peer['sys']:.2f} s)  "
          f"probes per CPU-second: {peer['done'] / max(peer['cpu'], 1e-9):.0f}  "
          f"healthy {peer['healthy']} failed {peer['failed']} {peer['why'] or ''}")
    # CPU per probe, so that a window boundary falling differently in the two processes does not count
    ours, theirs = used / max(done, 1), peer["cpu"] / max(peer["done"], 1)
    ratio = ours / theirs if theirs > 0 else float("inf")
    print(f"probes/bare-prober {ratio:.2f}x (target <= {TARGET_RATIO:g}x) {'PASS' if ratio <= TARGET_RATIO else 'MISS'}"
          f"  gitdns {used / wall:.3f} core ({ours * 1e6:.0f} us CPU per probe), bare prober "
          f"{peer['cpu'] / peer['wall']:.3f} core ({theirs * 1e6:.0f} us CPU per probe)")
    return cpu_split(resource.RUSAGE_CHILDREN)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", choices=("http", "tcp", "https"), default="http")
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--addresses", type=int, default=50)
    parser.add_argument("--ports", type=int, default=4)
    parser.add_argument("--profile", default="")
    parser.add_argument("--verify", action="store_true", help="https: verify (trusting the bench CA) not insecure")
    parser.add_argument("--no-bare", action="store_true", help="do not run the bare prober after the monitor")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cert", default="", help=argparse.SUPPRESS)
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true",
                        help="200 targets, interval 1 s, 2 windows, 4 addresses x 2 ports: a run of seconds")
    args = parser.parse_args()
    if args.quick and not (args.serve or args.bare):
        args.targets, args.interval, args.windows, args.addresses, args.ports = 200, 1.0, 2, 4, 2
    if args.bare:
        bare_main()
    elif args.serve:
        server_main(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
