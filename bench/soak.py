"""Soak: several `gitdns agent` processes share one zone through random desired-state commits
and random provider faults; every read of the zone is checked against the invariants.

    python bench/soak.py                                   # 1,000 cycles on local, bind and route53
    python bench/soak.py --backends local --cycles 1000 --seed 7
    python bench/soak.py --backends local=1000,bind=300,route53=200
    python bench/soak.py --quick                           # CI: 20 cycles on local, 10 on bind, 5 on route53

Per backend — ``local`` (the record store in a temp directory), ``bind`` (a real BIND 9 on a
free loopback port, RFC 2136 with TSIG: tests/e2e/dns_servers.py) and ``route53`` (moto_server
on loopback over TLS, with Route53's batch semantics: bench/soak_peers.py) — the soak:

1. builds a desired repository (a bare remote and a work tree, bench/soak_model.py: one zone, a
   simple and a loadbalanced DNSPolicy, static records, ActiveGroups, clusters c0..c3) and writes
   foreign records into the zone (records no agent may touch, one of them in the way of a host);
2. starts one agent per cluster, each a separate ``gitdns agent`` process (TXT lease, status
   branch, webhook), through ``python -m tests.faults.launch PLAN agent ...``, which wraps every
   provider the agent builds in the fault-injecting `tests.faults.provider.FaultyProvider`
   (``--fault-rate`` per provider call; the flavour: the provider's own errors, clouds' on
   ``local``);
3. runs N cycles: one commit of one to three random changes (a listener host, gateway addresses,
   weights, the TTL, a static record, a cluster removed or added, an active-groups switch)
   pushed, a GitHub push delivery to every agent's webhook, then the zone read independently
   (bench/soak_zone.py: the store file and its views, AXFR, moto's API) every 0.1 s and
   checked, until it equals the desired union (its convergence time) or ``--cycle-timeout``
   passes;
4. every ``--quiet-every`` cycles and at the last, stops the faults 0.1..1 s after the push, while
   the agents are still at work on it (a pass failed by a fault waiting for its retry), and
   requires the zone to equal the desired union within 3 agent cycles of the stop
   (3 x (poll interval + validation window)); faults resume with the next cycle;
5. stops the agents (SIGTERM), each one's peak resident set (``VmHWM`` in /proc/<pid>/status)
   read just before.

It prints per backend: cycles, faults injected by kind, invariant violations (must be 0),
crashes (an agent that exited, or a traceback in its log: must be 0), convergence times (worst,
p50, p90, and after faults stopped), each agent's peak memory, and the seed to replay.  The
seed fixes the desired changes and each agent's fault decisions call by call; the interleaving
of the processes is the machine's.  Exit code 1 when a violation or a crash was seen.  Times are figures, never
asserted (tests/e2e/test_soak_quick.py runs ``--quick`` and checks only the counts).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.soak_model import Model, expected, write_files  # noqa: E402
from bench.soak_zone import BindZone, Checker, Limits, LocalZone, MotoZone, Violation  # noqa: E402
from gitdns.core.webhook import sign_github  # noqa: E402
from tests.e2e import dns_servers  # noqa: E402
from tests.e2e.agent_kit import GIT_ENV, WorkTree, free_ports  # noqa: E402
from tests.faults.provider import KINDS, FaultPlan, read_log  # noqa: E402

POLL = 2.0  # --poll-interval
VALIDATE = 0.5  # --validate-delay: a zone is validated 0.5..1 s after a write or a failure
QUIET_PERIOD = 10.0  # --quiet-period
AGENT_CYCLE = POLL + 2 * VALIDATE  # one agent cycle: a poll, or a validation after a failure
LIMITS = Limits(window=AGENT_CYCLE + 3.0, settle=AGENT_CYCLE + 3.0)  # + a pass on a loaded 2-core machine
QUIET_BOUND = 3 * AGENT_CYCLE  # after faults stop, the zone is level within 3 agent cycles
SECRET = b"soak-webhook-secret"
BACKENDS = ("local", "bind", "route53")
AGENTS = {"local": 4, "bind": 3, "route53": 3}
QUICK = {"local": 20, "bind": 10, "route53": 5}
FLAVOUR = {"local": "mixed", "bind": "auto", "route53": "auto"}


# --- the backends ----------------------------------------------------------------------------
@dataclass
class Backend:
    name: str
    zone: str
    routing: bool
    provider: dict[str, Any]
    reader: Any
    flags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    stop: Any = None


def start_backend(name: str, work: Path) -> Backend:
    if name == "local":
        store = work / "store" / "zones"
        return Backend(name, "example.com", True, {"type": "local", "settings": {"path": str(store)}},
                       LocalZone(store, "example.com"), ["--store-dir", str(work / "store")])
    if name == "bind":
        server = dns_servers.start_bind(work / "bind")
        creds = work / "credentials"
        creds.mkdir()
        (creds / "tsig.env").write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        provider = {"type": "rfc2136", "settings": {"server": "127.0.0.1", "port": str(server.port), "timeout": "5",
                                                    "tsigKeyName": dns_servers.KEY_NAME},
                    "credentials": {"file": "tsig.env"}}
        return Backend(name, dns_servers.ZONE, False, provider, BindZone(server, dns_servers.ZONE),
                       ["--rfc2136-servers", f"127.0.0.1:{server.port}", "--credentials-dir", str(creds)],
                       stop=server.stop)
    from bench.soak_peers import Moto

    moto = Moto(work / "moto", dns_servers.ZONE)
    provider = {"type": "route53", "settings": {"endpoint": moto.endpoint, "hostedZoneId": moto.zone_id}}
    return Backend(name, dns_servers.ZONE, True, provider, MotoZone(moto.client(), moto.zone_id, dns_servers.ZONE),
                   ["--provider-endpoints", moto.endpoint], moto.agent_env(), stop=moto.stop)


# --- the agents ------------------------------------------------------------------------------
class Agent:
    """One ``gitdns agent`` process, started through tests.faults.launch."""

    def __init__(self, name: str, work: Path, bare: Path, backend: Backend, plan: FaultPlan) -> None:
        self.name = name
        self.state = work / "agents" / name
        self.state.mkdir(parents=True, exist_ok=True)
        self.log = work / "agents" / f"{name}.log"
        self.plan_file = plan.dump(work / "faults" / f"{name}.json")
        self.fault_log = Path(plan.log)
        secret = work / "webhook.secret"
        if not secret.exists():
            secret.write_bytes(SECRET)
        self.port, admin = free_ports(2)
        self.argv = [sys.executable, "-m", "tests.faults.launch", str(self.plan_file), "agent",
                     "--repo", str(bare), "--cluster", name, "--state-dir", str(self.state), "--lease", "txt",
                     "--git-timeout", "20", "--poll-interval", f"{POLL:g}", "--validate-delay", f"{VALIDATE:g}",
                     "--quiet-period", f"{QUIET_PERIOD:g}", "--listen", f"127.0.0.1:{self.port}",
                     "--admin-listen", f"127.0.0.1:{admin}", "--webhook-github-secret-file", str(secret),
                     *backend.flags]
        self.env = {**os.environ, **GIT_ENV, "PYTHONPATH": str(ROOT), **backend.env}
        self.restarts = 0
        self.peaks: list[int] = []  # VmHWM (KiB) of each process this agent ran, read before it stopped
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            return subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=self.env)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def restart(self) -> None:
        self.restarts += 1  # the exited process's peak is gone with it
        self.proc = self._start()

    def poke(self, sha: str) -> None:
        body = json.dumps({"ref": "refs/heads/main", "after": sha,
                           "repository": {"full_name": "soak/desired"}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/webhook", data=body, method="POST",
            headers={"Content-Type": "application/json", "X-GitHub-Event": "push",
                     "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": sign_github(SECRET, body)})
        try:
            with urllib.request.urlopen(request, timeout=5):
                pass
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or busy: its poll picks the commit up

    def peak_kib(self) -> int | None:
        """The process's peak resident set (VmHWM in /proc/<pid>/status), in KiB; None once it exited."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        line = next((ln for ln in status.splitlines() if ln.startswith("VmHWM:")), "")
        return int(line.split()[1]) if line else None

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            peak = self.peak_kib()
            if peak is not None:
                self.peaks.append(peak)
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def tracebacks(self) -> int:
        return self.log.read_text(errors="replace").count("Traceback (most recent call last)")

    def last_words(self, lines: int = 12) -> str:
        """The end of its log (the last traceback, or what it said before exiting), for the report:
        the work directory is removed after the run."""
        text = self.log.read_text(errors="replace")
        start = text.rfind("Traceback (most recent call last)")
        tail = (text[start:] if start >= 0 else text).splitlines()
        return "\n      ".join([*tail[:3], "...", *tail[-lines:]] if len(tail) > lines + 3 else tail)


# --- one backend's run -----------------------------------------------------------------------
@dataclass
class Report:
    backend: str
    cycles: int = 0
    converged: list[float] = field(default_factory=list)  # seconds from push to the desired union
    unconverged: int = 0  # cycles whose zone was not level within --cycle-timeout
    quiet: list[float] = field(default_factory=list)  # seconds from faults stopping to level
    quiet_mid: int = 0  # stops that came while the zone was not yet level with the commit
    violations: list[Violation] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    flavours: Counter[str] = field(default_factory=Counter)
    reads: int = 0
    orphans_seen: int = 0
    missing_seen: int = 0
    seconds: float = 0.0
    peaks: dict[str, int] = field(default_factory=dict)  # agent -> peak resident set (VmHWM), KiB


class Run:
    def __init__(self, backend: Backend, work: Path, args: argparse.Namespace, cycles: int) -> None:
        self.backend, self.work, self.args, self.cycles = backend, work, args, cycles
        self.rng = random.Random(f"{args.seed}/{backend.name}")
        self.model = Model.initial(backend.zone, backend.routing, args.agents or AGENTS[backend.name], self.rng)
        self.repo = WorkTree(work / "desired", work / "desired.git")
        self.switch = work / "faults" / "on"
        self.report = Report(backend.name)
        self.agents: list[Agent] = []
        self.checker: Checker | None = None

    def commit(self, message: str) -> str:
        write_files(self.repo.work, self.model.files(self.backend.provider))
        return self.repo.commit(message)

    def start(self) -> None:
        (self.work / "faults").mkdir(parents=True, exist_ok=True)
        self.commit("initial desired state")
        foreign = self.backend.reader.plant()
        self.checker = Checker(self.backend.zone, LIMITS, foreign)
        self.switch.touch()
        for spec in self.model.specs:
            plan = FaultPlan(seed=self.args.seed, rate=self.args.fault_rate, flavour=FLAVOUR[self.backend.name],
                             retry_after=1.0, switch=str(self.switch), label=spec.name,
                             log=str(self.work / "faults" / f"{spec.name}.jsonl"))
            self.agents.append(Agent(spec.name, self.work, self.repo.bare or self.work, self.backend, plan))

    def settle(self, since: float, timeout: float) -> float | None:
        """Read and check until the zone is the desired union; seconds from ``since``, or None."""
        assert self.checker is not None
        deadline = since + timeout
        while True:
            rows, problems = self.backend.reader.read()
            now = time.time()
            if self.checker.observe(now, rows, problems):
                return now - since
            self.watch_agents()
            if now >= deadline:
                return None
            time.sleep(0.1)

    def watch_agents(self) -> None:
        for agent in self.agents:
            if not agent.alive():
                self.report.crashes.append(f"{agent.name} exited with {agent.proc.returncode} (restarted):\n      "
                                           + agent.last_words())
                agent.restart()

    def cycle(self, index: int, stop_faults: bool = False) -> None:
        """One commit, pushed and delivered, and the zone read until level.  With ``stop_faults``
        the faults stop a random moment (0.1..1 s) after the push, while the agents are still at
        work on it, and the zone must be level within `QUIET_BOUND` of that moment."""
        assert self.checker is not None
        what = "; ".join(self.model.mutate(self.rng) for _ in range(self.rng.choice((1, 1, 2, 3))))
        sha = self.commit(f"soak {index}: {what}")
        pushed = time.time()
        self.checker.desire(expected(self.model), pushed)
        for agent in self.agents:
            agent.poke(sha)
        seen, passing = len(self.checker.violations), len(self.checker.transients)
        if stop_faults:
            level = self.settle(pushed, self.rng.uniform(0.1, 1.0))
            took = self.quiet(pushed, mid_change=level is None)
        else:
            took = self.settle(pushed, self.args.cycle_timeout)
        if self.args.verbose:
            for violation in self.checker.violations[seen:]:
                print(f"  [{self.backend.name}] cycle {index} ({what}): violation: {violation.what}", flush=True)
            for transient in self.checker.transients[passing:]:
                print(f"  [{self.backend.name}] cycle {index} ({what}): transient: {transient}", flush=True)
        if took is None:
            self.report.unconverged += 1
            if self.args.verbose:
                print(f"  [{self.backend.name}] cycle {index} ({what}): not level within "
                      f"{self.args.cycle_timeout:g} s: " + "; ".join(self.checker.last_diff[:4]), flush=True)
        else:
            self.report.converged.append(took)
        self.report.cycles += 1

    def quiet(self, pushed: float, mid_change: bool) -> float | None:
        """Faults off now: the zone must be level within `QUIET_BOUND`; seconds from ``pushed``
        to level, or None."""
        assert self.checker is not None
        self.switch.unlink()
        stopped = time.time()
        took = self.settle(stopped, max(QUIET_BOUND * 4, 60.0))
        if took is None or took > QUIET_BOUND:
            when = "never (within 60 s)" if took is None else f"{took:.1f} s"
            self.checker.violations.append(Violation(time.time(), (
                f"faults stopped, the zone was level with the desired union after {when}, beyond 3 agent cycles "
                f"({QUIET_BOUND:g} s): " + "; ".join(self.checker.last_diff[:6]))))
        if took is None:
            return None
        self.report.quiet.append(took)
        self.report.quiet_mid += mid_change
        return stopped + took - pushed

    def run(self) -> Report:
        started = time.time()
        try:
            self.start()
            assert self.checker is not None
            self.checker.desire(expected(self.model), started)
            if self.settle(started, 120.0) is None:
                self.checker.violations.append(Violation(time.time(), "the initial desired state never converged: "
                                                         + "; ".join(self.checker.last_diff[:6])))
            for index in range(1, self.cycles + 1):
                stop = index == self.cycles or bool(self.args.quiet_every and index % self.args.quiet_every == 0)
                self.cycle(index, stop_faults=stop)
                if stop and index < self.cycles:
                    self.switch.touch()
                if self.args.verbose and index % 25 == 0:
                    print(f"  [{self.backend.name}] cycle {index}: violations {len(self.checker.violations)}",
                          flush=True)
        finally:
            self.finish()
        self.report.seconds = time.time() - started
        return self.report

    def finish(self) -> None:
        for agent in self.agents:
            code = agent.stop()
            if agent.peaks:
                self.report.peaks[agent.name] = max(agent.peaks)
            if code != 0:
                self.report.crashes.append(f"{agent.name} stopped with {code} on SIGTERM")
            if agent.tracebacks():
                self.report.crashes.append(f"{agent.name}: {agent.tracebacks()} traceback(s) in its log, the "
                                           "last:\n      " + agent.last_words())
            for fault in read_log(agent.fault_log):
                self.report.faults[fault.kind] += 1
                self.report.flavours[fault.flavour] += 1
        if self.checker is not None:
            self.report.violations = list(self.checker.violations)
            self.report.reads = self.checker.reads
            self.report.orphans_seen = self.checker.orphans_seen
            self.report.missing_seen = self.checker.missing_seen


# --- output ----------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def print_report(r: Report, args: argparse.Namespace) -> None:
    tag = f"[{r.backend}]"
    total = sum(r.faults.values())
    kinds = ", ".join(f"{k} {r.faults.get(k, 0)}" for k in KINDS)
    flav = ", ".join(f"{k} {v}" for k, v in sorted(r.flavours.items()))
    print(f"{tag} cycles: {r.cycles} ({r.seconds:.0f} s, {r.reads} zone reads checked)")
    print(f"{tag} faults injected: {total} ({kinds}; as {flav or 'none'})")
    print(f"{tag} invariant violations: {len(r.violations)}")
    for v in r.violations[:20]:
        print(f"{tag}   violation: {v.what}")
    print(f"{tag} crashes: {len(r.crashes)}")
    for c in r.crashes[:20]:
        print(f"{tag}   crash: {c}")
    if r.converged:
        print(f"{tag} convergence (push -> zone = desired union): worst {max(r.converged):.2f} s, "
              f"p50 {statistics.median(r.converged):.2f} s, p90 {pct(r.converged, 0.9):.2f} s; "
              f"not level within {args.cycle_timeout:g} s: {r.unconverged} cycle(s)")
    if r.quiet:
        print(f"{tag} after faults stopped: level in worst {max(r.quiet):.2f} s over {len(r.quiet)} stop(s), "
              f"{r.quiet_mid} of them mid-change (bound: 3 agent cycles = {QUIET_BOUND:g} s)")
    print(f"{tag} transient states seen: {r.orphans_seen} ownership TXT briefly without its record, "
          f"{r.missing_seen} live value(s) briefly missing (allowed for {LIMITS.window:g} s)")
    if r.peaks:
        each = ", ".join(f"{name} {kib / 1024:.1f}" for name, kib in sorted(r.peaks.items()))
        print(f"{tag} agent peak memory (VmHWM before SIGTERM): max {max(r.peaks.values()) / 1024:.1f} MiB "
              f"({each} MiB)")
    print(f"{tag} seed: {args.seed} (replay: python bench/soak.py --backends {r.backend}={r.cycles} --seed {args.seed}"
          f" --fault-rate {args.fault_rate:g} --quiet-every {args.quiet_every})")


def parse_backends(text: str, cycles: int) -> list[tuple[str, int]]:
    out = []
    for part in text.split(","):
        name, _, count = part.strip().partition("=")
        if name not in BACKENDS:
            raise SystemExit(f"--backends: unknown backend {name!r} (one of {', '.join(BACKENDS)})")
        out.append((name, int(count) if count else cycles))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--backends", default=",".join(BACKENDS), help="name[=cycles],... of local, bind, route53")
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None, help="default: a random seed, printed")
    parser.add_argument("--fault-rate", type=float, default=0.1, help="chance of a fault per provider call")
    parser.add_argument("--agents", type=int, default=0, help="agents per backend (default 4 local, 3 others)")
    parser.add_argument("--quiet-every", type=int, default=25, help="stop faults every N cycles (0: only at the end)")
    parser.add_argument("--cycle-timeout", type=float, default=30.0)
    parser.add_argument("--quick", action="store_true", help="CI: 20 cycles on local, 10 on bind, 5 on route53")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the agents and servers on the way out
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1_000_000)
    if args.quick:
        plan = [(name, QUICK[name]) for name, _ in parse_backends(args.backends, 0)]
        args.quiet_every = args.quiet_every if args.quiet_every != 25 else 10
    else:
        plan = parse_backends(args.backends, args.cycles)
    print(f"soak: seed {args.seed}, fault rate {args.fault_rate:g} per provider call, backends "
          f"{', '.join(f'{n} ({c} cycles)' for n, c in plan)}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="gitdns-soak-", dir=ROOT / "bench" / "out" if (ROOT / "bench" / "out").is_dir()
                                 else None))
    reports = []
    try:
        for name, cycles in plan:
            work = root / name
            work.mkdir()
            try:
                backend = start_backend(name, work)
            except dns_servers.ToolMissing as exc:
                print(f"[{name}] not run: {exc}", flush=True)
                reports.append(Report(name, crashes=[f"backend missing: {exc}"]))
                continue
            try:
                report = Run(backend, work, args, cycles).run()
            finally:
                if backend.stop is not None:
                    backend.stop()
            print_report(report, args)
            reports.append(report)
    finally:
        if args.keep:
            print(f"work directory kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    violations = sum(len(r.violations) for r in reports)
    crashes = sum(len(r.crashes) for r in reports)
    faults = sum(sum(r.faults.values()) for r in reports)
    print(f"soak total: cycles {sum(r.cycles for r in reports)}, faults {faults}, invariant violations {violations}, "
          f"crashes {crashes}, seed {args.seed}")
    return 1 if violations or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
