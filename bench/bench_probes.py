"""Health prober throughput and CPU: N loopback targets probed every interval.

    python bench/bench_probes.py --protocol http  --targets 10000
    python bench/bench_probes.py --protocol tcp   --targets 10000
    python bench/bench_probes.py --protocol https --targets 2000 [--verify]
    options: --interval 5 --windows 6 --addresses 50 --ports 4 --profile out.prof
    python bench/bench_probes.py --quick    # 200 targets, interval 1 s, 2 windows, 4 x 2 listeners (for CI)

The servers run in a SEPARATE process (this file with ``--serve``): one asyncio server
answering ``HTTP/1.1 200 OK`` and closing, listening on 127.0.0.1-127.0.0.<addresses> x
<ports> ports (TLS with a self-signed P-256 certificate for https).  Targets are distinct
(address, port, path) tuples.  The prober (`HealthMonitor`) runs in this process.

After one warm-up interval (every target's random phase has come round) it measures
``--windows`` intervals and prints: probes completed per interval, scheduled rounds skipped
(a round that could not start inside its own interval), the worst start lag, probes per
second, probes per CPU-second, the prober process's CPU (user+sys, share of one core) and
the server process's CPU apart.  Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import datetime
import json
import resource
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gitdns.adapters.probes import HealthMonitor
from gitdns.core.health import HealthSettings, ProbeSpec
from gitdns.core.reach import ProbeReach

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"


# -- the server process --------------------------------------------------------------------


class Answer(asyncio.Protocol):
    """Answer the first request with 200 and close; a TCP probe just connects and leaves."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\r\n\r\n" in self.buf:
            self.transport.write(RESPONSE)
            self.transport.close()

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
        try:
            measure(args, ports, cert)
        finally:
            server.stdin.close()
            server.wait(30)
    user, system = cpu_split(resource.RUSAGE_CHILDREN)
    print(f"server process CPU (whole run incl. warm-up, apart): user {user:.2f} s + sys {system:.2f} s")


def measure(args: argparse.Namespace, ports: list[int], cert: Path | None) -> None:
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
    monitor.set_targets(specs)
    monitor.start()
    time.sleep(args.interval * 1.2)  # warm-up: every phase has come round once
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
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cert", default="", help=argparse.SUPPRESS)
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true",
                        help="200 targets, interval 1 s, 2 windows, 4 addresses x 2 ports: a run of seconds")
    args = parser.parse_args()
    if args.quick and not args.serve:
        args.targets, args.interval, args.windows, args.addresses, args.ports = 200, 1.0, 2, 4, 2
    if args.serve:
        server_main(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
