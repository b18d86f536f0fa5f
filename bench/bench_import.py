"""`gitdns import` beside `octodns-dump`: one zone read from BIND (AXFR) and from Route53 (moto).

    python bench/bench_import.py                          # N = 10,000, 3 runs of each tool (~5 min)
    python bench/bench_import.py --records 1000 --runs 5 --backends bind
    python bench/bench_import.py --profile                # also one gitdns import per backend under cProfile
    python bench/bench_import.py --quick --json out.json  # 300 records, one run, gitdns only (CI runs it)

One BIND (tests/e2e/dns_servers.py: zone ``example.test``, AXFR and UPDATE allowed with the TSIG
key) and one moto Route53 (moto with Route53's batch semantics, ``python -m
tests.e2e.dnsoperator_zone moto``, behind `bench/route53_proxy.py`, which serves HTTPS with the
test CA, counts every request by operation and adds what moto's ListHealthChecks reply lacks)
are filled with the same zone: `zone_records(N)` of tests/e2e/test_import_roundtrip.py (every
type a RecordSet holds: A, AAAA, CNAME, TXT, MX, SRV, CAA, NS below the apex, a wildcard), plus
what an import reports and does not take (a record another owner manages and its ownership TXT,
a TTL of 0, a PTR and an SSHFP).  No routing rows: both backends hold the same zone.

Then, per backend and run, each tool reads the whole zone and writes it out, as a process of its
own, the tools taking turns (the order alternates run by run):

  gitdns    `python -m gitdns.cli import example-test --from provider --repo REPO --out FILE`
            with the fences an operator gives (``--rfc2136-servers``, ``--provider-endpoints``,
            ``--credentials-dir``, ``--store-dir``); the repository holds one Zone (rfc2136 with
            the TSIG key from a credentials file; route53 with the proxy as its endpoint and the
            keys from a credentials file) and one Cluster
  octoDNS   `octodns-dump --config-file CFG --output-dir DIR example.test. SOURCE` with
            octodns-bind's ``AxfrSource`` (host, port, key_name, key_secret, key_algorithm) or
            octodns-route53's ``Route53Provider`` (pointed at the proxy with
            ``AWS_ENDPOINT_URL_ROUTE_53``; it has no endpoint option); it writes YamlProvider YAML

Both reach moto over the same TLS proxy (``AWS_CA_BUNDLE`` is the test CA for both).  Client CPU
is user + sys of the tool's process and the children it waited for, and peak RSS its
``ru_maxrss``, both from ``os.wait4``; wall time is from the start of the process to its end.
The server's CPU (named; moto) during the run is shown apart: it is inside the wall time, not
the client CPU.  ``records`` counts the record sets each tool wrote out (gitdns: the entries of
its RecordSet documents; octoDNS: the records of its zone file).  gitdns leaves SOA and the apex
NS to the provider and reports the other owner's records, the TTL 0 and the types it does not
hold, so it writes a few fewer than octoDNS, which dumps everything it supports.

octoDNS is installed into bench/.venv-octodns (git-ignored) when missing:
`python3 -m venv bench/.venv-octodns && pip install octodns octodns-route53 octodns-bind`
(an existing venv without octodns-bind gets it added).  ``--quick`` never runs octoDNS or pip.

Nothing here asserts a time; it prints the figures, the ratios gitdns / octoDNS and the target
(gitdns client CPU <= 0.5 x octoDNS's) with PASS or MISS.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e import dns_servers  # noqa: E402
from tests.e2e.test_import_roundtrip import fill_bind, fill_route53, zone_records  # noqa: E402

VENV = BENCH / ".venv-octodns"
OCTODNS_PACKAGES = ("octodns", "octodns-route53", "octodns-bind")
PROXY = BENCH / "route53_proxy.py"
ZONE = dns_servers.ZONE  # example.test
ZONE_NAME = "example-test"  # the Zone's metadata.name
CPU_TARGET = 0.5  # gitdns client CPU <= 0.5 x octoDNS's (the issue)
ENDPOINT_VAR = "AWS_ENDPOINT_URL_ROUTE_53"  # botocore's per-service variable; ..._ROUTE53 is ignored
AWS_KEY, AWS_SECRET = "testing", "testing"
TOOLS = ("gitdns", "octodns")
BACKENDS = ("bind", "route53")


# --------------------------------------------------------------------------- servers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_of(pid: int) -> float:
    """utime + stime of a live process, seconds (/proc/<pid>/stat fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(proc: subprocess.Popen[bytes]) -> None:
    dns_servers.stop_process(proc)


class Route53:
    """moto (Route53's batch semantics) on plain HTTP, behind the counting proxy on HTTPS."""

    def __init__(self, workdir: Path) -> None:
        from tests.providers.moto_server import moto_missing
        from tests.providers.tls import loopback_tls

        missing = moto_missing()
        if missing:
            raise dns_servers.ToolMissing(missing)
        self.tls = loopback_tls()
        port = free_port()
        self.log = (workdir / "moto.log").open("w")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.moto = subprocess.Popen([sys.executable, "-m", "tests.e2e.dnsoperator_zone", "moto",
                                      "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        self.moto_url = f"http://127.0.0.1:{port}"
        self.proxy: subprocess.Popen[bytes] | None = None
        try:
            self._wait(self.moto_url + "/moto-api/", self.moto)
            self.proxy = subprocess.Popen(
                [sys.executable, str(PROXY), "--listen", "127.0.0.1:0", "--upstream", self.moto_url,
                 "--tls-cert", str(self.tls.cert_file), "--tls-key", str(self.tls.key_file)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert self.proxy.stdout is not None
            line = self.proxy.stdout.readline().decode()
            m = re.match(r"listening [\d.]+:(\d+)", line)
            if not m:
                raise SystemExit(f"proxy did not start: {line!r}")
            self.endpoint = f"https://127.0.0.1:{m.group(1)}"
            made = self.client().create_hosted_zone(Name=ZONE + ".", CallerReference=f"bench-import-{port}")
            self.zone_id = str(made["HostedZone"]["Id"]).rsplit("/", 1)[-1]
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _wait(url: str, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1):
                    return
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"moto did not start (exit {proc.poll()})") from None
                time.sleep(0.05)

    def client(self) -> Any:
        """boto3 straight to moto (the fill is not counted)."""
        import boto3

        return boto3.client("route53", endpoint_url=self.moto_url, region_name="us-east-1",
                            aws_access_key_id=AWS_KEY, aws_secret_access_key=AWS_SECRET)

    def _control(self, method: str, path: str) -> bytes:
        context = ssl.create_default_context(cafile=str(self.tls.ca_file))
        req = urllib.request.Request(self.endpoint + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            data: bytes = resp.read()
            return data

    def reset_counts(self) -> None:
        self._control("POST", "/__proxy/reset")

    def counts(self) -> dict[str, int]:
        return dict(json.loads(self._control("GET", "/__proxy/counts")))

    def server_pids(self) -> list[int]:
        return [self.moto.pid]

    def stop(self) -> None:
        for proc in (self.proxy, self.moto):
            if proc is not None:
                stop(proc)
        self.log.close()


# --------------------------------------------------------------------------- the zone
def fill(backend: str, server: Any, n: int) -> int:
    """The same zone into either backend; returns the record sets written."""
    records, refused, unsupported = zone_records(n)
    if backend == "bind":
        server.reset_zone()
        fill_bind(server, records + refused, unsupported)
    else:
        fill_route53(server, records + refused, unsupported)
    return len(records) + len(refused) + len(unsupported)


# --------------------------------------------------------------------------- the tools' inputs
def gitdns_repo(base: Path, backend: str, server: Any) -> tuple[Path, list[str], dict[str, str]]:
    """A desired-state repository with one Zone on ``server`` and one Cluster; returns the
    repository, the fences the import is given and the environment it adds."""
    repo, secrets, store = base / "repo", base / "secrets", base / "store"
    for d in (repo / "zones", repo / "clusters", secrets, store):
        d.mkdir(parents=True, exist_ok=True)
    if backend == "bind":
        secret = secrets / "tsig.env"
        secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        provider = (f"type: rfc2136\n    settings: {{server: 127.0.0.1, port: \"{server.port}\", "
                    f"tsigKeyName: {dns_servers.KEY_NAME}, timeout: \"60\"}}\n    credentials: {{file: {secret}}}")
        fences = ["--rfc2136-servers", f"127.0.0.1:{server.port}"]
        env: dict[str, str] = {}
    else:
        secret = secrets / "aws.env"
        secret.write_text(f"AWS_ACCESS_KEY_ID={AWS_KEY}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n")
        provider = (f"type: route53\n    settings: {{endpoint: \"{server.endpoint}\", waitInsync: \"false\"}}\n"
                    f"    credentials: {{file: {secret}}}")
        fences = ["--provider-endpoints", server.endpoint]
        env = {"AWS_CA_BUNDLE": str(server.tls.ca_file)}
    (repo / "zones" / f"{ZONE_NAME}.yaml").write_text(
        "apiVersion: gitdns.io/v1alpha1\nkind: Zone\n"
        f"metadata: {{name: {ZONE_NAME}}}\nspec:\n  domain: {ZONE}\n  provider:\n    {provider}\n")
    (repo / "clusters" / "c1.yaml").write_text(
        "apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\n"
        "spec:\n  id: c1-cluster-uid\n  gateways: []\n")
    return repo, [*fences, "--credentials-dir", str(secrets), "--store-dir", str(store)], env


def octodns_config(path: Path, backend: str, server: Any) -> str:
    """The configuration octodns-dump reads; returns the source's name."""
    if backend == "bind":
        source = ("  bind:\n    class: octodns_bind.AxfrSource\n    host: 127.0.0.1\n"
                  f"    port: {server.port}\n    timeout: 60\n    key_name: {dns_servers.KEY_NAME}\n"
                  f"    key_secret: {dns_servers.SECRET}\n    key_algorithm: {dns_servers.ALGORITHM}\n")
    else:
        source = ("  route53:\n    class: octodns_route53.Route53Provider\n"
                  "    access_key_id: env/AWS_ACCESS_KEY_ID\n    secret_access_key: env/AWS_SECRET_ACCESS_KEY\n")
    path.write_text(f"---\nproviders:\n{source}zones:\n  {ZONE}.:\n    sources: [{backend}]\n    targets: []\n")
    return backend


def child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "PYTHONPROFILEIMPORTTIME"}
    env.update({"AWS_ACCESS_KEY_ID": AWS_KEY, "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                "AWS_EC2_METADATA_DISABLED": "true"})
    env.update(extra)
    # gitdns from this checkout, installed or not (octoDNS's venv has no `gitdns` to shadow)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def ensure_venv() -> Path:
    """bench/.venv-octodns with octodns, octodns-route53 and octodns-bind; its octodns-dump."""
    exe, python = VENV / "bin" / "octodns-dump", VENV / "bin" / "python"
    check = [str(python), "-c", "import octodns, octodns_route53, octodns_bind"]
    if exe.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return exe
    if not python.exists():
        print(f"creating {VENV.relative_to(ROOT)} ...", flush=True)
        subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
    print(f"installing {', '.join(OCTODNS_PACKAGES)} into {VENV.relative_to(ROOT)} ...", flush=True)
    subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", *OCTODNS_PACKAGES], check=True)
    return exe


# --------------------------------------------------------------------------- counting what was written
def gitdns_count(path: Path) -> int:
    from ruamel.yaml import YAML

    return sum(len(doc["spec"]["records"]) for doc in YAML(typ="safe").load_all(path.read_text()) if doc)


def octodns_count(path: Path) -> int:
    from ruamel.yaml import YAML

    data = YAML(typ="safe").load(path.read_text()) or {}
    return sum(len(v) if isinstance(v, list) else 1 for v in data.values())


# --------------------------------------------------------------------------- one run
@dataclass
class Row:
    backend: str
    tool: str
    run: int
    wall: float
    cpu: float  # user + sys of the tool's process (and the children it waited for)
    rss_mib: float
    records: int
    exit: int
    server_cpu: float  # named or moto during the run (inside the wall time)
    calls: dict[str, int] = field(default_factory=dict)  # Route53 requests by operation
    note: str = ""


# The measured process is started by a small launcher (Python without site, a few MiB), not
# by this one: a child's ru_maxrss starts from the RSS of the process it was forked from (Linux
# carries the high-water mark across fork and exec), and this process holds boto3 and dnspython.
LAUNCHER = """
import json, os, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(out, "w") as f:
    json.dump({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_kib": usage.ru_maxrss,
               "exit": os.waitstatus_to_exitcode(status)}, f)
"""


def measure(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, float, float, int]:
    """(wall s, user + sys s, peak RSS MiB, exit code) of one process, from os.wait4 in the launcher."""
    result = log.with_suffix(".rusage.json")
    with log.open("wb") as out:
        subprocess.run([sys.executable, "-I", "-S", "-c", LAUNCHER, str(result), *cmd], stdout=out,
                       stderr=subprocess.STDOUT, env=env, cwd=cwd, check=True)
    got = json.loads(result.read_text())
    return float(got["wall"]), float(got["cpu"]), got["maxrss_kib"] / 1024, int(got["exit"])


class Backend:
    def __init__(self, name: str, server: Any, workdir: Path, tools: list[str]) -> None:
        self.name, self.server = name, server
        self.base = workdir / name
        self.base.mkdir()
        self.repo, self.fences, self.env = gitdns_repo(self.base / "gitdns", name, server)
        self.octodns: Path | None = None
        if "octodns" in tools:
            self.octodns = ensure_venv()
            self.config = self.base / "octodns.yaml"
            self.source = octodns_config(self.config, name, server)
        if name == "route53":  # octoDNS's only route to moto; a safety net for gitdns (its Zone names it)
            self.env[ENDPOINT_VAR] = server.endpoint
        assert "AWS_ENDPOINT_URL_ROUTE53" not in self.env

    def server_pids(self) -> list[int]:
        return self.server.server_pids() if isinstance(self.server, Route53) else [self.server.proc.pid]

    def command(self, tool: str, run: int, profile: Path | None = None) -> tuple[list[str], Path]:
        if tool == "gitdns":
            out = self.base / f"gitdns-{run}.yaml"
            head = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]
            return [*head, "-m", "gitdns.cli", "import", ZONE_NAME, "--from", "provider", "--repo", str(self.repo),
                    "--out", str(out), *self.fences], out
        assert self.octodns is not None
        outdir = self.base / f"octodns-{run}"
        return [str(self.octodns), "--config-file", str(self.config), "--output-dir", str(outdir),
                f"{ZONE}.", self.source], outdir / f"{ZONE}.yaml"

    def run(self, tool: str, run: int) -> Row:
        cmd, out = self.command(tool, run)
        log = self.base / f"{tool}-{run}.log"
        if isinstance(self.server, Route53):
            self.server.reset_counts()
        before = sum(cpu_of(pid) for pid in self.server_pids())
        wall, cpu, rss, code = measure(cmd, child_env(self.env), self.base, log)
        server_cpu = sum(cpu_of(pid) for pid in self.server_pids()) - before
        calls = self.server.counts() if isinstance(self.server, Route53) else {}
        note = ""
        records = 0
        if code != 0 or not out.exists():
            note = " | ".join(log.read_text(errors="replace").strip().splitlines()[-4:])[:600]
        else:
            records = gitdns_count(out) if tool == "gitdns" else octodns_count(out)
        if isinstance(self.server, Route53) and code == 0 and not calls:
            raise SystemExit(f"{tool} on route53: the proxy counted no request: it did not talk to moto "
                             f"({ENDPOINT_VAR}?); see {log}")
        if tool == "gitdns" and code == 0:
            report = log.read_text(errors="replace")
            m = re.search(r"imported (\d+) record set", report)
            if not m or int(m.group(1)) != records:
                note = f"the report says {m.group(0) if m else 'nothing'}; the file holds {records}"
        return Row(self.name, tool, run, wall, cpu, rss, records, code, server_cpu, calls, note)

    def profile(self) -> Path:
        prof = self.base / "gitdns-import.prof"
        cmd, _ = self.command("gitdns", 999, prof)
        _, _, _, code = measure(cmd, child_env(self.env), self.base, self.base / "gitdns-profile.log")
        if code != 0:
            raise SystemExit(f"gitdns import under cProfile failed: see {self.base / 'gitdns-profile.log'}")
        return prof


def start(backend: str, workdir: Path) -> Any:
    if backend == "bind":
        return dns_servers.start_bind(workdir / "named")
    return Route53(workdir)


# --------------------------------------------------------------------------- report
@dataclass
class Summary:
    backend: str
    tool: str
    runs: int
    wall: float
    wall_min: float
    wall_max: float
    cpu: float
    cpu_min: float
    cpu_max: float
    rss_mib: float
    records: int
    server_cpu: float
    calls: int


def summarize(rows: list[Row]) -> list[Summary]:
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.exit == 0:
            groups.setdefault((r.backend, r.tool), []).append(r)
    out = []
    for (backend, tool), rs in groups.items():
        walls, cpus = [r.wall for r in rs], [r.cpu for r in rs]
        out.append(Summary(backend, tool, len(rs), statistics.median(walls), min(walls), max(walls),
                           statistics.median(cpus), min(cpus), max(cpus), statistics.median(r.rss_mib for r in rs),
                           max(r.records for r in rs), statistics.median(r.server_cpu for r in rs),
                           max(sum(r.calls.values()) for r in rs)))
    return out


def ratios(summaries: list[Summary]) -> list[dict[str, Any]]:
    by = {(s.backend, s.tool): s for s in summaries}
    out = []
    for backend in BACKENDS:
        g, o = by.get((backend, "gitdns")), by.get((backend, "octodns"))
        if g is None or o is None:
            continue
        cpu = g.cpu / o.cpu
        out.append({"backend": backend, "cpu": cpu, "wall": g.wall / o.wall, "rss": g.rss_mib / o.rss_mib,
                    "target": CPU_TARGET, "verdict": "PASS" if cpu <= CPU_TARGET else "MISS"})
    return out


def table(summaries: list[Summary]) -> str:
    lines = ["| backend | tool | runs | wall s median (min-max) | client CPU s median (min-max) | peak RSS MiB "
             "| records | server CPU s | API calls |", "|" + "---|" * 9]
    for s in summaries:
        lines.append(f"| {s.backend} | {s.tool} | {s.runs} | {s.wall:.2f} ({s.wall_min:.2f}-{s.wall_max:.2f}) "
                     f"| {s.cpu:.2f} ({s.cpu_min:.2f}-{s.cpu_max:.2f}) | {s.rss_mib:.1f} | {s.records} "
                     f"| {s.server_cpu:.2f} | {s.calls if s.backend == 'route53' else '-'} |")
    return "\n".join(lines)


def ratio_table(rs: list[dict[str, Any]]) -> str:
    lines = ["| backend | client CPU gitdns/octoDNS | target | verdict | wall gitdns/octoDNS "
             "| peak RSS gitdns/octoDNS |", "|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['backend']} | {r['cpu']:.3f} | <= {r['target']} | {r['verdict']} | {r['wall']:.2f} "
                     f"| {r['rss']:.2f} |")
    return "\n".join(lines)


def print_profile(prof: Path, backend: str, top: int = 25) -> None:
    import pstats

    stats = pstats.Stats(str(prof))
    total = stats.total_tt  # type: ignore[attr-defined]
    entries = stats.stats  # type: ignore[attr-defined]
    rows = [(ct, tt, f"{short(file)}:{line}:{fn}") for (file, line, fn), (_c, _n, tt, ct, _) in entries.items()]
    print(f"\n== gitdns import from {backend} under cProfile: {total:.2f} s; top by cumulative, then by own time")
    for ct, _tt, name in sorted(rows, reverse=True)[:top]:
        print(f"  cum {ct:6.2f} s {100 * ct / total:5.1f} %  {name}")
    print("  --")
    for tt, _ct, name in sorted(((tt, ct, n) for ct, tt, n in rows), reverse=True)[:15]:
        print(f"  own {tt:6.2f} s {100 * tt / total:5.1f} %  {name}")


def short(file: str) -> str:
    for marker in ("site-packages/", "/gitdns/", "/lib/python3"):
        if marker in file:
            rest = file.split(marker, 1)[1]
            return "gitdns/" + rest if marker == "/gitdns/" else rest.split("/", 1)[-1]
    return file


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, help="N: zone_records(N) (default 10000; --quick 300)")
    ap.add_argument("--runs", type=int, help="runs of each tool on each backend (default 3; --quick 1)")
    ap.add_argument("--tools", help="comma list of gitdns, octodns (default both; --quick gitdns)")
    ap.add_argument("--backends", default="bind,route53", help="comma list of bind, route53 (default both)")
    ap.add_argument("--quick", action="store_true", help="300 records, one run, gitdns only: no octoDNS, no pip")
    ap.add_argument("--profile", action="store_true",
                    help="after the runs, one gitdns import per backend under cProfile (not in the figures)")
    ap.add_argument("--json", metavar="FILE", help="write the rows, the medians and the ratios as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (the outputs and logs)")
    args = ap.parse_args(argv)
    n = args.records or (300 if args.quick else 10_000)
    runs = args.runs or (1 if args.quick else 3)
    tools = [t.strip() for t in (args.tools or ("gitdns" if args.quick else "gitdns,octodns")).split(",") if t.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not set(tools) <= set(TOOLS) or not set(backends) <= set(BACKENDS) or not tools or not backends:
        ap.error(f"--tools from {', '.join(TOOLS)}, --backends from {', '.join(BACKENDS)}")
    if args.quick and "octodns" in tools:
        ap.error("--quick runs gitdns only (no octoDNS, no pip)")

    out_dir = BENCH / "out"  # the benches' git-ignored scratch directory, when there is one
    workdir = Path(tempfile.mkdtemp(prefix="bench-import-", dir=out_dir if out_dir.is_dir() else None))
    servers: dict[str, Any] = {}
    rows: list[Row] = []
    profiles: list[tuple[str, Path]] = []
    try:
        for name in backends:
            t0 = time.perf_counter()
            try:
                servers[name] = start(name, workdir)
            except dns_servers.ToolMissing as exc:
                raise SystemExit(f"{name}: {exc}") from None
            written = fill(name, servers[name], n)
            print(f"{name}: filled with {written} record sets in {time.perf_counter() - t0:.1f} s", flush=True)
        runners = [Backend(name, servers[name], workdir, tools) for name in backends]
        for run in range(runs):
            order = tools if run % 2 == 0 else tools[::-1]  # the tools take turns
            for runner in runners:
                for tool in order:
                    row = runner.run(tool, run)
                    rows.append(row)
                    print(f"run {run + 1}/{runs} {row.backend} {row.tool}: wall {row.wall:.2f} s, CPU {row.cpu:.2f} s, "
                          f"RSS {row.rss_mib:.1f} MiB, {row.records} records, exit {row.exit}"
                          + (f" ({row.note})" if row.note else ""), flush=True)
        if args.profile:
            profiles = [(r.name, r.profile()) for r in runners]
        summaries = summarize(rows)
        rs = ratios(summaries)
        print()
        print(f"N = {n} (zone_records({n}) of tests/e2e/test_import_roundtrip.py, plus what an import leaves out), "
              f"zone {ZONE}; {runs} run(s) of each tool per backend, the order alternating; medians; "
              "client CPU = user + sys (os.wait4)")
        print(table(summaries))
        if rs:
            print()
            print(ratio_table(rs))
        for r in rows:
            if r.note:
                print(f"  note {r.backend}/{r.tool} run {r.run + 1}: exit {r.exit}: {r.note}")
        for backend, prof in profiles:
            print_profile(prof, backend)
        if args.json:
            Path(args.json).write_text(json.dumps({
                "records": n, "runs": runs, "zone": ZONE, "rows": [asdict(r) for r in rows],
                "summary": [asdict(s) for s in summaries], "ratios": rs}, indent=1))
        failed = [r for r in rows if r.exit != 0]
        return 1 if failed else 0
    finally:
        for server in servers.values():
            server.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
