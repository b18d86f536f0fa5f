"""Git hosts: merge latency over a real SSH remote, idle cost per poll over HTTPS, and a fleet's
status pushes through one sshd.

    python bench/bench_git_hosts.py [--rounds 10] [--polls 15] [--only latency|idle|fleet ...] [--keep]
    python bench/bench_git_hosts.py --quick      # smoke run: 2 rounds, 3 idle polls, one fleet round

Everything runs on 127.0.0.1 in a temp directory, against the real servers of
tests/e2e/git_servers.py: OpenSSH ``sshd`` (``start_sshd``) and nginx + fcgiwrap +
``git http-backend`` over TLS from a private CA (``start_https``).  Each server is a child
process on a free loopback port, stopped by its pid.  Agents are ``python3 -m gitdns.cli agent``
processes, each with its own ``--state-dir`` and ``--listen 127.0.0.1:PORT`` (and
``--admin-listen 127.0.0.1:PORT2`` when the agent has that flag; /status and /metrics are read
from whichever of the two serves them), given only documented flags.  The desired state is
generated (not committed): one Zone ``example.com`` on the embedded ``local`` store (the relative
path ``zones``: below the agent's ``--state-dir``), one Cluster ``bench-1`` with a gateway at
192.0.2.10 and ``app.example.com``, one simple DNSPolicy (no health check, so nothing is
probed), and one RecordSet ``bench.example.com A``; every address is RFC 5737.

latency  sshd with its defaults; the desired repository is a bare repository it serves; one agent
         with ``--ssh-key`` and ``--known-hosts`` (the pinned host key).  Each round pushes a
         commit that changes the value of ``bench.example.com A`` straight into the bare
         repository (a merge on the git host), then measures from ``git push`` returning:
           zone    until the local store holds the new value (read every 20 ms);
           status  until the tip of ``gitdns-status/<cluster id>`` in the bare repository is a
                   commit whose summary.yaml has ``appliedRevision`` = the pushed commit (the
                   ref file is read every 20 ms, summary.yaml only when the tip moves).
         webhook: ``--poll-interval 600`` and ``--webhook-github-secret-file``; right after the
         push a GitHub push delivery (``X-Hub-Signature-256`` over the body with the secret, the
         repository named by the path of the SSH URL) is POSTed to the agent's /webhook; a random
         0-1 s pause between rounds.  poll: ``--poll-interval 5`` and no webhook; a random 0-5 s
         pause between rounds, so a push lands at a random point of the interval.
         Targets (webhook): zone p50 <= 1 s, status commit p50 <= 3 s.  Also printed, to show
         where the time goes: the wall time and CPU (client; server: what sshd's master reaped)
         of one plain ``git ls-remote`` over the same sshd, the SSH connections sshd logged per
         round, and the agent's ``gitdns_cycle_last_duration_seconds`` after each round.
idle     the HTTPS server; one agent with ``--token-file`` and ``--ca-file``, ``--poll-interval 1``,
         nothing changing.  After it is ready, its status commit has landed and 3 s have passed,
         the nginx access log is counted over ``--polls`` polls (15; the agent's /status
         ``cycles`` counts polls as they end; both ends of the window are 0.4 s after a poll ended):
         requests per poll, bytes per poll received by the server ($request_length: request
         line, headers, body) and sent by it ($bytes_sent), and the requests by kind.
fleet    a fresh sshd with its default MaxStartups (10:30:100); 20 processes (fork), each with its
         own cluster id and cache directory, call
         ``StatusBranch(url, cluster_id, workdir=..., auth=GitAuth(ssh_key=..., known_hosts=...))
         .publish(files, message)`` right after a barrier, twice: the first (orphan) commit, then a
         change of every file.  Landing time is from the barrier to ``publish`` returning.
         Prints landed/total, p50/max, sshd's connections and drops past MaxStartups (its log),
         the CPU of sshd and of the processes, and whether every branch tip on the remote is the
         commit its process returned.
         Target: 20/20 land in each round.

Prints figures and PASS/MISS; asserts nothing.  The exit status is 1 when a run is broken (a
server or agent does not start, a round times out, a fleet process reports nothing, the
remote disagrees with what a process reported), whatever the targets; 0 otherwise.  Logs are
kept (the temp directory, path printed) when a run is broken or with ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing as mp
import os
import queue
import random
import re
import resource
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
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gitdns.adapters.git.auth import GitAuth  # noqa: E402
from gitdns.adapters.status.branch import DEFAULT_PREFIX, StatusBranch  # noqa: E402
from gitdns.core.records import RecordKey  # noqa: E402
from gitdns.core.webhook import sign_github  # noqa: E402
from gitdns.providers.local import LocalProvider  # noqa: E402
from tests.e2e.agent_kit import git  # noqa: E402
from tests.e2e.git_servers import HttpsServer, SshServer, ToolMissing, free_port, start_https, start_sshd  # noqa: E402

CLUSTER = "bench-1"
CLUSTER_ID = "6d0c1f0e-2b7a-4c1e-9a51-7f3e2c9b4a10"
STATUS_BRANCH = f"{DEFAULT_PREFIX}{CLUSTER_ID}"
ZONE = "example.com"
KEY = RecordKey(f"bench.{ZONE}", "A")
SECRET = b"bench-git-hosts-webhook-secret"
EVERY = 0.02  # how often the store and the status ref are read
WEBHOOK_ZONE_TARGET = 1.0
WEBHOOK_STATUS_TARGET = 3.0
POLL_INTERVAL = 5.0
IDLE_INTERVAL = 1.0
FLEET = 20
FLEET_ROUNDS = 2
HEAD = "apiVersion: gitdns.io/v1alpha1\n"
_APPLIED = re.compile(r"^appliedRevision:\s*['\"]?([0-9a-f]{40})", re.MULTILINE)
_DROPPED = re.compile(r"drop connection #\d+ .*past MaxStartups")
_CONNECTION = re.compile(r"Connection from \S+ port \d+ on")
# urllib must never send the agent's loopback requests to a proxy from the environment
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Broken(Exception):
    """The run cannot produce its figures (not a missed target)."""


# -- the desired repository ----------------------------------------------------------------------


STORE = "zones"  # the Zone's local store path: relative, so under the agent's --state-dir


def desired_files(value: str) -> dict[str, str]:
    return {
        "zones/example-com.yaml": HEAD + "kind: Zone\nmetadata: {name: example-com}\nspec:\n"
                                         f"  domain: {ZONE}\n"
                                         f"  provider: {{type: local, settings: {{path: {STORE}}}}}\n",
        "clusters/bench-1.yaml": HEAD + f"kind: Cluster\nmetadata: {{name: {CLUSTER}}}\nspec:\n"
                                        f"  id: {CLUSTER_ID}\n  gateways:\n"
                                        "    - name: app-gw\n      namespace: ingress\n"
                                        "      addresses: [192.0.2.10]\n"
                                        f"      listeners: [{{hostname: app.{ZONE}}}]\n",
        "policies/app.yaml": HEAD + "kind: DNSPolicy\nmetadata: {name: app}\nspec:\n  targetRef: {gateway: app-gw}\n",
        "records/bench.yaml": record_set(value),
    }


def record_set(value: str) -> str:
    return (HEAD + "kind: RecordSet\nmetadata: {name: bench}\nspec:\n  zone: example-com\n  records:\n"
            f"    - {{name: bench, type: A, values: [{value}]}}\n")


class Desired:
    """A bare repository (what the server serves) holding the generated desired state, and a work
    tree that commits and pushes to it directly: a merge on the git host."""

    def __init__(self, root: Path, state: Path, value: str) -> None:
        self.bare = root / "desired.git"
        self.work = root / "desired"
        self.state = state  # the agent's --state-dir
        self.zones = state / STORE  # where its local store is
        git("init", "-q", "--bare", "-b", "main", str(self.bare))
        git("init", "-q", "-b", "main", str(self.work))
        git("remote", "add", "origin", str(self.bare), cwd=self.work)
        for rel, text in desired_files(value).items():
            (self.work / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.work / rel).write_text(text)
        self.head = self.commit(f"desired state: bench {value}")

    def commit(self, message: str) -> str:
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", message, cwd=self.work)
        git("push", "-q", "origin", "main", cwd=self.work)
        self.head = git("rev-parse", "HEAD", cwd=self.work)
        return self.head

    def set_value(self, value: str) -> str:
        (self.work / "records" / "bench.yaml").write_text(record_set(value))
        return self.commit(f"bench: {value}")


def validate(work: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gitdns.cli", "validate", str(work)], capture_output=True,
                          text=True, timeout=60, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise Broken(f"the generated desired state does not validate:\n{done.stdout}{done.stderr}")


# -- an agent process ------------------------------------------------------------------------------


def agent_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@functools.cache
def has_admin_listen() -> bool:
    """Whether this gitdns's agent has ``--admin-listen`` (then /status and /metrics are served
    there and not beside the webhook)."""
    done = subprocess.run([sys.executable, "-m", "gitdns.cli", "agent", "--help"], capture_output=True, text=True,
                          timeout=60, check=False, env=agent_env())
    return "--admin-listen" in done.stdout


class Agent:
    """``gitdns agent`` as a child process in its own process group (its git and ssh children with
    it), stopped by its pid."""

    def __init__(self, url: str, state: Path, *flags: str) -> None:
        self.port = self.admin_port = free_port()
        self.status_port: int | None = None
        state.mkdir(parents=True, exist_ok=True)
        self.log = state.parent / f"{state.name}.log"
        listen = ["--listen", f"127.0.0.1:{self.port}"]
        if has_admin_listen():  # /status and /metrics may be served on an address of their own
            while self.admin_port == self.port:
                self.admin_port = free_port()
            listen += ["--admin-listen", f"127.0.0.1:{self.admin_port}"]
        argv = [sys.executable, "-m", "gitdns.cli", "agent", "--repo", url, "--cluster", CLUSTER,
                "--state-dir", str(state), *listen, *flags]
        env = agent_env()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=state, env=env, start_new_session=True)
        self.signalled = False

    def request(self, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        if path in ("/status", "/metrics") and self.admin_port != self.port:
            if self.status_port is None:  # which address serves them: the admin one, else --listen's
                for port in (self.admin_port, self.port):
                    code, answer = self._request(port, path, body, headers)
                    if code not in (0, 404):
                        self.status_port = port
                        return code, answer
                return code, answer
            return self._request(self.status_port, path, body, headers)
        return self._request(self.port, path, body, headers)

    def _request(self, port: int, path: str, body: bytes | None,
                 headers: dict[str, str] | None) -> tuple[int, bytes]:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers or {},
                                     method="POST" if body is not None else "GET")
        try:
            with _HTTP.open(req, timeout=5) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()
        except OSError:
            return 0, b""

    def ready(self) -> bool:
        return self.request("/readyz")[0] == 200

    def status(self) -> dict[str, object]:
        code, body = self.request("/status")
        try:
            return json.loads(body) if code == 200 else {}
        except ValueError:
            return {}

    def cycles(self) -> int:
        value = self.status().get("cycles")
        return value if isinstance(value, int) else -1

    def metric(self, name: str) -> float | None:
        code, body = self.request("/metrics")
        for line in body.decode(errors="replace").splitlines() if code == 200 else []:
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        start = time.perf_counter()
        while time.perf_counter() - start < timeout:
            if predicate():
                return time.perf_counter() - start
            if self.proc.poll() is not None:
                raise Broken(f"agent exited {self.proc.returncode} waiting for {what}: {self.tail()}")
            time.sleep(0.05)
        raise Broken(f"agent: no {what} within {timeout:.0f} s: {self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> int | None:
        rc: int | None = None
        if self.proc.poll() is None:
            self.signalled = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print(f"  agent pid {self.proc.pid} ignored SIGTERM for 30 s; killed")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the agent if still there, and any git/ssh child left
        if rc is None:
            rc = self.proc.wait(timeout=10)
        return rc


def stop_agent(agent: Agent | None) -> None:
    if agent is None:
        return
    try:
        rc = agent.stop()
        if rc not in (0, None) and agent.signalled:
            print(f"  agent exited {rc} on SIGTERM (log {agent.log})")
    except Exception as exc:  # keep stopping the rest
        print(f"  stopping agent pid {agent.proc.pid}: {exc}")


# -- reading the zone and the status branch ----------------------------------------------------------


def zone_value(store: LocalProvider) -> tuple[str, ...] | None:
    try:
        snap = store.read(ZONE, [KEY.name])
    except Exception:  # the store not written yet, or a read racing a write: try again
        return None
    return next((tuple(rs.values) for rs in snap.records if rs.key == KEY), None)


class StatusWatch:
    """The remote's status branch, read from the bare repository: the loose ref file each time
    (``git rev-parse`` if it is packed), summary.yaml only when the tip moved."""

    def __init__(self, bare: Path) -> None:
        self.bare = bare
        self.ref = bare / "refs" / "heads" / STATUS_BRANCH
        self.tip: str | None = None
        self.applied: str | None = None

    def read_tip(self) -> str | None:
        try:
            return self.ref.read_text().strip() or None
        except OSError:
            done = subprocess.run(["git", "--git-dir", str(self.bare), "rev-parse", "--verify", "-q",
                                   f"refs/heads/{STATUS_BRANCH}"], capture_output=True, text=True, timeout=30,
                                  check=False)
            return done.stdout.strip() or None

    def names(self, sha: str) -> bool:
        """Whether the tip's summary.yaml has ``appliedRevision`` = ``sha``."""
        return self.applied_revision() == sha

    def applied_revision(self) -> str | None:
        tip = self.read_tip()
        if tip and tip != self.tip:
            done = subprocess.run(["git", "--git-dir", str(self.bare), "show", f"{tip}:summary.yaml"],
                                  capture_output=True, text=True, timeout=30, check=False)
            match = _APPLIED.search(done.stdout)
            if done.returncode == 0:
                self.tip, self.applied = tip, match[1] if match else None
        return self.applied


# -- 1. latency over SSH ---------------------------------------------------------------------------


@dataclass
class Round:
    zone: float | None
    status: float | None
    cycle: float | None  # the agent's gitdns_cycle_last_duration_seconds after the round
    connections: int  # SSH connections sshd logged from the push to the end of the round


@dataclass
class Figures:
    """What main() prints in the targets table."""
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # target, measured, limit, verdict
    broken: list[str] = field(default_factory=list)


def delivery(agent: Agent, url: str, sha: str) -> tuple[int, str]:
    """A GitHub push delivery for main at ``sha``; the repository is named as GitHub names it:
    ``full_name`` (the URL's path here) and ``ssh_url``."""
    name = url.split("://", 1)[1].split("/", 1)[1].removesuffix(".git")
    body = json.dumps({"ref": "refs/heads/main", "before": "0" * 40, "after": sha,
                       "repository": {"full_name": name, "ssh_url": url}}).encode()
    code, answer = agent.request("/webhook", body, {
        "Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign_github(SECRET, body)})
    return code, answer.decode(errors="replace").strip()


def latency_rounds(desired: Desired, agent: Agent, sshd: SshServer, rounds: int, *, webhook: bool, gap: float,
                   timeout: float, base: str, label: str) -> list[Round]:
    url = sshd.url(desired.bare)
    store = LocalProvider(desired.zones)
    watch = StatusWatch(desired.bare)
    rng = random.Random(17 if webhook else 19)
    out: list[Round] = []
    for i in range(rounds):
        time.sleep(rng.uniform(0, gap))
        value = f"{base}.{100 + i}"
        before = ssh_connections(sshd)
        sha = desired.set_value(value)
        pushed = time.perf_counter()
        hook = ""
        if webhook:
            code, answer = delivery(agent, url, sha)
            hook = f"  webhook {code} in {(time.perf_counter() - pushed) * 1000:.0f} ms"
            if code != 202 or "ignored" in answer:
                raise Broken(f"{label}: the webhook delivery was answered {code} {answer[:300]}")
        zone = status = None
        while time.perf_counter() - pushed < timeout and (zone is None or status is None):
            now = time.perf_counter() - pushed
            if zone is None and zone_value(store) == (value,):
                zone = now
            if status is None and watch.applied_revision() == sha:
                status = now
            if agent.proc.poll() is not None:
                raise Broken(f"{label}: agent exited {agent.proc.returncode}: {agent.tail()}")
            time.sleep(EVERY)
        cycle = agent.metric("gitdns_cycle_last_duration_seconds")
        connections = ssh_connections(sshd) - before
        out.append(Round(zone, status, cycle, connections))
        print(f"  round {i + 1}: {value} ({sha[:7]}): zone {ms(zone)}  status commit {ms(status)}  "
              f"agent cycle {ms(cycle)}  ssh connections {connections}{hook}")
        if zone is None or status is None:
            raise Broken(f"{label}: round {i + 1} not done within {timeout:.0f} s (zone {ms(zone)}, status "
                         f"{ms(status)}); status tip {watch.tip}, appliedRevision {watch.applied}: {agent.tail()}")
    return out


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def summarize(label: str, what: str, values: list[float], total: int) -> str:
    return (f"{label} {what}: p50 {ms(statistics.median(values))}  max {ms(max(values))}  "
            f"min {ms(min(values))}  ({len(values)}/{total} rounds)")


def ssh_floor(sshd: SshServer, runs: int = 5) -> tuple[float, float, float]:
    """A plain ``git ls-remote`` over ``sshd`` (one SSH connection), ``runs`` times: the median
    wall time, and the CPU seconds per run of the client (git and ssh) and of the server
    (sshd's children, as its master process reaped them)."""
    bare = sshd.create_repo("floor")
    env = {**os.environ, **sshd.env()}
    times = []
    client0, server0 = children_cpu(), reaped_cpu(sshd.pid)
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["git", "ls-remote", sshd.url(bare)], env=env, capture_output=True, timeout=60, check=True)
        times.append(time.perf_counter() - start)
    time.sleep(0.2)  # sshd reaps its last child
    return (statistics.median(times), (children_cpu() - client0) / runs, (reaped_cpu(sshd.pid) - server0) / runs)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reaped_cpu(pid: int) -> float:
    """CPU seconds of the children ``pid`` has reaped (cutime + cstime, /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def ssh_connections(sshd: SshServer) -> int:
    """Connections sshd has logged so far."""
    return len(_CONNECTION.findall(sshd.log.read_text(errors="replace")))


def bench_latency(root: Path, rounds: int, figures: Figures) -> None:
    sshd: SshServer | None = None
    agent: Agent | None = None
    try:
        sshd = start_sshd(root / "sshd")
        print(f"[latency] sshd pid {sshd.pid} on 127.0.0.1:{sshd.port} (default settings); agent over ssh:// with "
              f"--ssh-key, --known-hosts")
        floor, client, server = ssh_floor(sshd)
        print(f"[latency] one plain `git ls-remote` over this sshd (deploy key, pinned known_hosts): p50 {ms(floor)} "
              f"of 5, CPU per run {ms(client)} client + {ms(server)} server: the cost of one SSH connection here")
        modes = (("webhook", True, 1.0, 30.0, "192.0.2"),
                 ("poll", False, POLL_INTERVAL, POLL_INTERVAL * 3 + 15, "198.51.100"))
        for mode, webhook, gap, timeout, base in modes:
            label = f"[latency/{mode}]"
            desired = Desired(sshd.repos / f"latency-{mode}", root / f"latency-{mode}" / "state", f"{base}.99")
            validate(desired.work)
            url = sshd.url(desired.bare)
            flags = ["--ssh-key", str(sshd.deploy_key), "--known-hosts", str(sshd.known_hosts)]
            if webhook:
                secret = root / "webhook-secret"
                secret.write_bytes(SECRET + b"\n")
                flags += ["--poll-interval", "600", "--webhook-github-secret-file", str(secret)]
            else:
                flags += ["--poll-interval", f"{POLL_INTERVAL:g}"]
            started = time.perf_counter()
            agent = Agent(url, desired.state, *flags)
            agent.wait(agent.ready, 120, "readiness")
            agent.wait(functools.partial(StatusWatch(desired.bare).names, desired.head), 60,
                       "first status commit on the remote")
            print(f"{label} agent pid {agent.proc.pid} {' '.join(flags[4:])}: ready and first status commit on the "
                  f"remote {time.perf_counter() - started:.2f} s after start")
            done = latency_rounds(desired, agent, sshd, rounds, webhook=webhook, gap=gap, timeout=timeout, base=base,
                                  label=label)
            zones = [r.zone for r in done if r.zone is not None]
            statuses = [r.status for r in done if r.status is not None]
            print(summarize(label, "push returned -> value in the zone", zones, rounds))
            print(summarize(label, "push returned -> status commit naming it on the remote", statuses, rounds))
            cycles = [r.cycle for r in done if r.cycle is not None]
            if cycles:
                print(f"{label} agent's own cycle (gitdns_cycle_last_duration_seconds): p50 "
                      f"{ms(statistics.median(cycles))}  max {ms(max(cycles))}")
            print(f"{label} SSH connections per round (sshd's log, push to status commit): "
                  f"{', '.join(str(r.connections) for r in done)}")
            if webhook:
                zone_p50, status_p50 = statistics.median(zones), statistics.median(statuses)
                figures.rows.append(("webhook: push -> zone, p50", ms(zone_p50), f"<= {WEBHOOK_ZONE_TARGET:g} s",
                                     verdict(zone_p50 <= WEBHOOK_ZONE_TARGET)))
                figures.rows.append(("webhook: push -> status commit on the remote, p50", ms(status_p50),
                                     f"<= {WEBHOOK_STATUS_TARGET:g} s", verdict(status_p50 <= WEBHOOK_STATUS_TARGET)))
            else:
                print(f"{label} no target; a push lands at a random point of the {POLL_INTERVAL:g} s interval "
                      f"(+-5 % jitter): expect about {POLL_INTERVAL / 2:g} s + the cycle on average")
            stop_agent(agent)
            agent = None
    finally:
        stop_agent(agent)
        if sshd is not None:
            sshd.stop()


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


# -- 2. idle cost per poll over HTTPS ----------------------------------------------------------------


def after_poll(agent: Agent, timeout: float) -> int:
    """Wait for the next poll to end (``cycles`` moves), then 0.4 s more (between polls); the count."""
    before = agent.cycles()
    agent.wait(lambda: agent.cycles() != before, timeout, "next poll")
    time.sleep(0.4)
    return agent.cycles()


def bench_idle(root: Path, polls: int) -> None:
    https: HttpsServer | None = None
    agent: Agent | None = None
    try:
        https = start_https(root / "https")
        desired = Desired(https.repos / "idle", root / "idle" / "state", "203.0.113.10")
        validate(desired.work)
        url = https.url(desired.bare)
        token = root / "idle-token"
        token.write_text(https.token + "\n")
        token.chmod(0o600)
        flags = ["--token-file", str(token), "--ca-file", str(https.ca_file), "--poll-interval", f"{IDLE_INTERVAL:g}"]
        print(f"[idle] nginx pid {https.pid} on 127.0.0.1:{https.port} (TLS, private CA, basic auth); agent over "
              f"https:// with --token-file, --ca-file, --poll-interval {IDLE_INTERVAL:g}; nothing changes")
        agent = Agent(url, desired.state, *flags)
        agent.wait(agent.ready, 120, "readiness")
        watch = StatusWatch(desired.bare)
        agent.wait(functools.partial(watch.names, desired.head), 60, "first status commit on the remote")
        time.sleep(3.0)  # settle: the first cycle's fetch and status push are long done
        first = after_poll(agent, 30)
        start_entries, start_at = len(https.access_entries()), time.perf_counter()
        count = first
        while count - first < polls:
            count = after_poll(agent, 30)
        entries = https.access_entries()[start_entries:]
        took = time.perf_counter() - start_at
        n = count - first
        tip_moved = watch.read_tip() != watch.tip
        received = sum(e.request_bytes for e in entries)
        sent = sum(e.response_bytes for e in entries)
        print(f"[idle] {n} polls in {took:.1f} s (poll interval {IDLE_INTERVAL:g} s +-5 %): {len(entries)} requests")
        print(f"[idle] per poll: {len(entries) / n:.2f} requests, {received / n:.0f} bytes received by the server "
              f"($request_length), {sent / n:.0f} bytes sent by it ($bytes_sent); HTTP level, TLS not counted")
        kinds = Counter((e.method, e.path.split("?", 1)[0].rsplit("/", 1)[-1] + (
            "?" + e.path.split("?", 1)[1] if "?" in e.path else ""), e.status) for e in entries)
        for (method, what, status), k in sorted(kinds.items(), key=lambda kv: -kv[1]):
            print(f"  {k / n:5.2f}/poll  {method} .../{what} -> {status}")
        print(f"  status branch moved during the window: {tip_moved}; status commits pushed: "
              f"{sum(e.method == 'POST' and e.path.endswith('git-receive-pack') for e in entries)}")
    finally:
        stop_agent(agent)
        if https is not None:
            https.stop()


# -- 3. a fleet's status pushes through one sshd ------------------------------------------------------


def fleet_id(i: int) -> str:
    return f"bench-fleet-{i:02d}"


def fleet_worker(i: int, url: str, workdir: str, key: str, known_hosts: str, rounds: int, barrier: Barrier,
                 results: mp.Queue) -> None:  # type: ignore[type-arg]
    branch = StatusBranch(url, fleet_id(i), workdir=Path(workdir),
                          auth=GitAuth(ssh_key=Path(key), known_hosts=Path(known_hosts)))
    for rnd in range(rounds):
        files = {"summary.yaml": f"cluster: f{i}\nclusterId: {fleet_id(i)}\nready: true\nround: {rnd}\n",
                 f"zones/z{i}.{ZONE}.yaml": f"zone: z{i}.{ZONE}\nround: {rnd}\nowned: []\n"}
        try:
            barrier.wait(timeout=180)
        except Exception as exc:
            results.put((rnd, i, None, f"barrier: {type(exc).__name__}", 0.0, 0.0, 0.0))
            return
        start = time.monotonic()
        try:
            sha = branch.publish(files, f"status(f{i}): round {rnd}")
            results.put((rnd, i, sha, None, start, time.monotonic(), time.monotonic() - start))
        except Exception as exc:  # a measured outcome: reported, shown, counted as not landed
            reason = getattr(exc, "reason", "")
            results.put((rnd, i, None, f"{type(exc).__name__}({reason}): {str(exc)[:300]}", start,
                         time.monotonic(), time.monotonic() - start))


def bench_fleet(root: Path, rounds: int, figures: Figures) -> None:
    sshd: SshServer | None = None
    procs: list[mp.process.BaseProcess] = []
    try:
        sshd = start_sshd(root / "fleet-sshd")
        bare = sshd.create_repo("fleet")
        url = sshd.url(bare)
        log0 = sshd.log.read_text(errors="replace")
        cpu0, clients0 = reaped_cpu(sshd.pid), children_cpu()
        print(f"[fleet] {FLEET} processes, each its own cluster id, pushing status through one sshd (pid {sshd.pid}, "
              f"MaxStartups default 10:30:100) at a barrier, {rounds} round(s)")
        ctx = mp.get_context("fork")
        barrier = ctx.Barrier(FLEET)
        results: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
        procs = [ctx.Process(target=fleet_worker, args=(i, url, str(root / "fleet" / f"w{i:02d}"),
                                                         str(sshd.deploy_key), str(sshd.known_hosts), rounds, barrier,
                                                         results), daemon=True) for i in range(FLEET)]
        for proc in procs:
            proc.start()
        outcomes: dict[tuple[int, int], tuple[str | None, str | None, float, float, float]] = {}
        deadline = time.monotonic() + 240
        while len(outcomes) < FLEET * rounds:
            try:
                rnd, i, sha, error, began, ended, took = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            outcomes[(rnd, i)] = (sha, error, began, ended, took)
        for proc in procs:
            proc.join(timeout=30)
        time.sleep(0.2)  # sshd reaps its last child
        server_cpu, clients_cpu = reaped_cpu(sshd.pid) - cpu0, children_cpu() - clients0
        log_text = sshd.log.read_text(errors="replace")[len(log0):]
        connections, dropped = len(_CONNECTION.findall(log_text)), len(_DROPPED.findall(log_text))
        for rnd in range(rounds):
            rows = {i: outcomes[(r, i)] for (r, i) in outcomes if r == rnd}
            landed = {i: o for i, o in rows.items() if o[0] and not o[1]}
            label = ("first push (orphan)", "every file changed (fast-forward)")[rnd]
            line = f"[fleet] round {rnd + 1} {label}: landed {len(landed)}/{FLEET}"
            if landed:
                times = [o[4] for o in landed.values()]
                span = max(o[3] for o in landed.values()) - min(o[2] for o in rows.values())
                line += (f"  landing time p50 {ms(statistics.median(times))}  max {ms(max(times))}  "
                         f"min {ms(min(times))}; all landed {ms(span)} after the first left the barrier")
            print(line)
            for i, o in sorted(rows.items()):
                if o[1] or not o[0]:
                    print(f"  not landed: {fleet_id(i)} after {ms(o[4])}: {o[1] or 'publish returned None'}")
            figures.rows.append((f"fleet round {rnd + 1}: {FLEET} status pushes land", f"{len(landed)}/{FLEET}",
                                 f"{FLEET}/{FLEET}", verdict(len(landed) == FLEET)))
            if len(rows) < FLEET:
                figures.broken.append(f"fleet round {rnd + 1}: {FLEET - len(rows)} processes reported nothing")
        print(f"[fleet] sshd log: {connections} connections accepted, {dropped} dropped past MaxStartups (each "
              f"dropped one is tried again by the status branch); CPU: sshd {server_cpu:.1f} s, the 20 processes "
              f"with their git and ssh {clients_cpu:.1f} s ({os.cpu_count()} cores here)")
        mismatched = []
        for i in range(FLEET):
            last = next((outcomes[(r, i)][0] for r in reversed(range(rounds))
                         if (r, i) in outcomes and outcomes[(r, i)][0]), None)
            if last is None:
                continue
            tip = subprocess.run(["git", "--git-dir", str(bare), "rev-parse", "--verify", "-q",
                                  f"refs/heads/{DEFAULT_PREFIX}{fleet_id(i)}"], capture_output=True, text=True,
                                 timeout=30, check=False).stdout.strip()
            if tip != last:
                mismatched.append(f"{fleet_id(i)}: remote {tip[:7] or 'absent'}, reported {last[:7]}")
        print(f"[fleet] remote tips are the commits the processes returned last: "
              f"{'yes' if not mismatched else 'NO: ' + '; '.join(mismatched)}")
        if mismatched:
            figures.broken.append("fleet: the remote disagrees with what the processes reported")
    finally:
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.join(timeout=10)
        if sshd is not None:
            sshd.stop()


# -- main ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=None, help="latency rounds per mode (default 10; --quick: 2)")
    ap.add_argument("--polls", type=int, default=None, help="idle polls counted (default 15; --quick: 3)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds, 3 idle polls, one fleet round")
    ap.add_argument("--only", action="append", choices=("latency", "idle", "fleet"),
                    help="run only this part (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory (agent and server logs)")
    args = ap.parse_args()
    rounds = args.rounds or (2 if args.quick else 10)
    polls = args.polls or (3 if args.quick else 15)
    only = set(args.only or ("latency", "idle", "fleet"))
    root = Path(tempfile.mkdtemp(prefix="gitdns-bench-git-hosts-"))
    figures = Figures()
    began = time.perf_counter()
    print(f"bench_git_hosts: {', '.join(p for p in ('latency', 'idle', 'fleet') if p in only)}; "
          f"{rounds} rounds, {polls} idle polls; temp dir {root}")
    parts: list[tuple[str, Callable[[], None]]] = [
        ("latency", lambda: bench_latency(root, rounds, figures)),
        ("idle", lambda: bench_idle(root, polls)),
        ("fleet", lambda: bench_fleet(root, 1 if args.quick else FLEET_ROUNDS, figures)),
    ]
    try:
        for name, run in parts:
            if name not in only:
                continue
            part = time.perf_counter()
            try:
                run()
            except (Broken, ToolMissing, RuntimeError, AssertionError, subprocess.SubprocessError, OSError) as exc:
                figures.broken.append(f"{name}: {type(exc).__name__}: {exc}")
                print(f"[{name}] BROKEN: {type(exc).__name__}: {str(exc)[-3000:]}")
            print(f"[{name}] wall {time.perf_counter() - part:.0f} s")
        if figures.rows:
            print("\n| target | measured | limit | verdict |\n|---|---|---|---|")
            for row in figures.rows:
                print("| " + " | ".join(row) + " |")
        print(f"\nwall {time.perf_counter() - began:.0f} s")
    finally:
        if figures.broken:
            print("BROKEN: " + "; ".join(b.splitlines()[0][:300] for b in figures.broken))
        if args.keep or figures.broken:
            print(f"logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if figures.broken else 0


if __name__ == "__main__":
    sys.exit(main())
