"""The agent's timing: merge to applied (webhook and polling), the idle poll tick, idle RSS.

    python bench/bench_agent.py [--pushes 10] [--ticks 50] [--only webhook,poll,tick]
    python bench/bench_agent.py --quick     # 2 pushes, 5 ticks, --poll-interval 1 (seconds, for CI)

Everything runs against a local bare repository holding example-repo/ (the `local` store
redirected to a temp directory), as cluster eu-west-1, on 127.0.0.1.

webhook  one `gitdns agent` process with --poll-interval 600 and a GitHub webhook secret;
         N times: commit and push a new value of ``bench.example.com A`` (a RecordSet), POST a
         signed GitHub push delivery to /webhook, and time from the push returning to the
         value being in the store (LocalProvider.read every 20 ms); a random 0-1 s pause
         between pushes.  Target: <= 2 s.
poll     the same with --poll-interval 5 and no webhook, and a random 0-5 s pause between
         pushes so they land at random points of the interval.  Target: within the poll
         interval + 2 s.  Then the idle agent's VmRSS / VmHWM from /proc/<pid>/status (target < 80 MiB).
tick     in-process: a real `Agent` (GitSource on the bare repo, status branch, TXT lease)
         whose provider counts every read/apply; one first run, then --ticks idle runs with
         --validate-delay 600 --quiet-period 3600: provider calls beyond the active-groups watch
         (target 0; an idle poll reads each grouped zone's two active-groups names, so that a
         break-glass switch written to the zone is followed: counted apart, at most one read per
         grouped zone per tick) and p50/p99 of the tick (target < 50 ms).  Then which heavy
         modules a `--once` agent run with the local provider has in sys.modules (boto3,
         botocore, kubernetes, google, azure: none).

Prints figures and PASS/MISS; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gitdns.core.records import RecordKey  # noqa: E402
from gitdns.core.webhook import sign_github  # noqa: E402
from gitdns.providers.local import LocalProvider  # noqa: E402
from tests.e2e.agent_kit import AgentProcess, DesiredRepo  # noqa: E402

CLUSTER = "eu-west-1"
ZONE = "example.com"
KEY = RecordKey("bench.example.com", "A")
SECRET = b"bench-webhook-secret"
HEAVY = ("boto3", "botocore", "kubernetes", "google", "azure")

RECORDSET = """apiVersion: gitdns.io/v1alpha1
kind: RecordSet
metadata:
  name: bench
spec:
  zone: example-com
  records:
    - name: bench
      type: A
      values: [{value}]
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def value_of(store: LocalProvider) -> tuple[str, ...] | None:
    try:
        snap = store.read(ZONE, [KEY.name])
    except Exception:  # a read racing the first write: try again
        return None
    for rs in snap.records:
        if rs.key == KEY:
            return tuple(rs.values)
    return None


def wait_value(store: LocalProvider, value: str, timeout: float, every: float = 0.02) -> float | None:
    """Seconds until the store holds ``value`` for KEY (None on timeout)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if value_of(store) == (value,):
            return time.perf_counter() - start
        time.sleep(every)
    return None


def new_repo(root: Path) -> DesiredRepo:
    repo = DesiredRepo(root)
    repo.write("records/bench.yaml", RECORDSET.format(value="192.0.2.200"))
    repo.commit("bench record")
    return repo


def start_agent(repo: DesiredRepo, state: Path, *extra: str) -> tuple[AgentProcess, float]:
    started = time.perf_counter()
    agent = AgentProcess(repo, CLUSTER, state, *extra)
    if not agent.wait(lambda: agent.get("/readyz")[0] == 200, timeout=120):
        raise SystemExit(f"agent not ready: {agent.log.read_text()[-3000:]}")
    return agent, time.perf_counter() - started


def delivery(agent: AgentProcess, sha: str) -> int:
    body = json.dumps({"ref": "refs/heads/main", "before": "0" * 40, "after": sha,
                       "repository": {"full_name": "platform/dns"}}).encode()
    return agent.post("/webhook", body, {
        "Content-Type": "application/json", "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": sign_github(SECRET, body)})


def merge_to_applied(repo: DesiredRepo, agent: AgentProcess, pushes: int, webhook: bool, timeout: float,
                     gap: float) -> list[float]:
    """Push, then wait for the value; between pushes sleep a random 0..gap (fixed seed) so that
    pushes land at random points of the poll interval rather than just after a poll."""
    store = LocalProvider(repo.zones)
    rng = random.Random(7)
    delays: list[float] = []
    for i in range(pushes):
        time.sleep(rng.uniform(0, gap))
        value = f"192.0.2.{100 + i}"
        repo.write("records/bench.yaml", RECORDSET.format(value=value))
        sha = repo.commit(f"bench: {value}")
        pushed = time.perf_counter()
        if webhook:
            code = delivery(agent, sha)
            if code != 202:
                print(f"  push {i}: webhook answered {code}")
        waited = wait_value(store, value, timeout)
        if waited is None:
            print(f"  push {i}: {value} not applied within {timeout:.0f} s")
            continue
        delays.append(time.perf_counter() - pushed)  # from the push returning to the value seen
    return delays


def report_delays(label: str, delays: list[float], pushes: int, limit: float) -> None:
    if not delays:
        print(f"{label}: nothing applied  MISS")
        return
    within = sum(d <= limit for d in delays)
    print(f"{label}: applied {len(delays)}/{pushes}  p50 {ms(pct(delays, 0.5))}  p90 {ms(pct(delays, 0.9))}  "
          f"max {ms(max(delays))}  min {ms(min(delays))}")
    print(f"  target <= {limit:.1f} s: {within}/{pushes} within  {verdict(within == pushes)}")


def proc_status(pid: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def kib_to_mib(text: str) -> float:
    return int(text.split()[0]) / 1024


def bench_webhook(root: Path, pushes: int) -> None:
    repo = new_repo(root / "webhook")
    secret = root / "webhook-secret"
    secret.write_bytes(SECRET + b"\n")
    agent, ready = start_agent(repo, root / "webhook" / "state", "--poll-interval", "600",
                               "--webhook-github-secret-file", str(secret))
    try:
        print(f"[webhook] agent ready in {ready:.2f} s (start, first fetch, apply, status push)")
        delays = merge_to_applied(repo, agent, pushes, webhook=True, timeout=30.0, gap=1.0)
        report_delays("[webhook] merge to applied (push returned -> value in the store)", delays, pushes, 2.0)
    finally:
        agent.stop()


def bench_poll(root: Path, pushes: int, poll: float) -> None:
    repo = new_repo(root / "poll")
    agent, ready = start_agent(repo, root / "poll" / "state", "--poll-interval", f"{poll:g}")
    try:
        print(f"[poll] agent ready in {ready:.2f} s; --poll-interval {poll:g} (+-5 % jitter), no webhook")
        delays = merge_to_applied(repo, agent, pushes, webhook=False, timeout=poll * 3 + 10, gap=poll)
        report_delays("[poll] merge to applied (push returned -> value in the store)", delays, pushes, poll + 2.0)
        if delays:
            print(f"  mean {ms(sum(delays) / len(delays))} (a push lands uniformly in the interval: "
                  f"expect about {ms(poll / 2)} + the cycle)")
        time.sleep(3.0)  # idle: the status push of the last cycle is done, nothing is due
        st = proc_status(agent.proc.pid)
        rss, hwm = kib_to_mib(st["VmRSS"]), kib_to_mib(st["VmHWM"])
        print(f"[rss] idle agent pid {agent.proc.pid} after {agent.status().get('cycles')} cycles: "
              f"VmRSS {rss:.1f} MiB  VmHWM {hwm:.1f} MiB  threads {st.get('Threads')}")
        print(f"  target < 80 MiB: VmRSS {verdict(rss < 80)}, VmHWM {verdict(hwm < 80)}")
    finally:
        agent.stop()


class Counting:
    """A provider wrapper counting every read and apply (``groups``: the reads of the zone's
    active-groups names alone, the idle poll's break-glass watch)."""

    def __init__(self, inner: LocalProvider) -> None:
        self.inner = inner
        self.calls = 0
        self.groups = 0

    def read(self, zone, names=None):  # type: ignore[no-untyped-def]
        self.calls += 1
        if names and all(name.split(".", 1)[0].endswith("active-groups") for name in names):
            self.groups += 1
        return self.inner.read(zone, names)

    def apply(self, zone, changes, guards=()):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self.inner.apply(zone, changes, guards)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def bench_tick(root: Path, ticks: int) -> None:
    from gitdns.agent.config import AgentConfig
    from gitdns.agent.cycle import Agent
    from gitdns.agent.main import make_lease, make_source
    from gitdns.agent.ports import AgentPorts
    from gitdns.agent.publisher import StatusPublisher

    repo = new_repo(root / "tick")
    state = root / "tick" / "state"
    config = AgentConfig(repo=str(repo.bare), cluster=CLUSTER, state_dir=str(state), lease="txt",
                         validate_delay=600.0, quiet_period=3600.0, listen="")
    wrappers: dict[str, Counting] = {}

    def factory(zone):  # type: ignore[no-untyped-def]
        return wrappers.setdefault(zone.name, Counting(LocalProvider(repo.zones)))

    status = StatusPublisher(config)
    agent = Agent(config, AgentPorts(source=make_source(config), factory=factory, status=status, clock=time.time,
                                     lease_builder=make_lease(config, factory), restore=status.applied_revision))
    started = time.perf_counter()
    first = agent.run("start", force=True)
    first_s = time.perf_counter() - started
    calls_first = sum(w.calls for w in wrappers.values())
    ready = agent.last_report is not None and agent.last_report.ready
    print(f"[tick] first run: {first_s:.2f} s, {calls_first} provider calls, {len(first.outcomes)} zone(s), "
          f"ready {ready}")
    times: list[float] = []
    before = sum(w.calls for w in wrappers.values())
    before_groups = sum(w.groups for w in wrappers.values())
    went_on = 0
    for _ in range(ticks):
        t = time.perf_counter()
        cycle = agent.run("poll")
        times.append(time.perf_counter() - t)
        went_on += cycle.desired is not None
    calls = sum(w.calls for w in wrappers.values()) - before
    groups = sum(w.groups for w in wrappers.values()) - before_groups
    other = calls - groups
    print(f"[tick] {ticks} idle ticks: provider calls {calls}: active-groups watch {groups} (at most "
          f"{len(wrappers)} zone(s) x {ticks} ticks) {verdict(groups <= len(wrappers) * ticks)}, "
          f"others {other} (target 0) {verdict(other == 0)}; ticks that went past the ref check {went_on}")
    print(f"  tick time p50 {ms(pct(times, 0.5))}  p99 {ms(pct(times, 0.99))}  max {ms(max(times))}  "
          f"min {ms(min(times))}  target < 50 ms: {verdict(pct(times, 0.99) < 0.05)}")
    agent.lease.release()  # so the `--once` agent below (another instance) can take it
    here = sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in HEAVY})
    print(f"[modules] this bench process after the in-process agent: heavy modules loaded: {here or 'none'}")
    heavy_in_agent(repo, root / "tick" / "once-state")


def heavy_in_agent(repo: DesiredRepo, state: Path) -> None:
    """`gitdns agent --once` in a fresh interpreter, then the heavy top-level packages in sys.modules."""
    code = (
        "import sys\n"
        "from gitdns.cli import main\n"
        f"rc = main(['agent', '--repo', {str(repo.bare)!r}, '--cluster', {CLUSTER!r}, '--state-dir', "
        f"{str(state)!r}, '--store-dir', {str(repo.zones.parent)!r}, '--lease', 'txt', '--once', '--listen', ''])\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))\n"
        "print('RESULT', rc, ','.join(heavy) or 'none', len(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT")), None)
    if line is None:
        print(f"[modules] agent --once failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")
        return
    _, rc, heavy, count = line.split()
    if rc != "0":
        print(f"  agent --once output: {done.stdout[-1500:]}")
    print(f"[modules] `gitdns agent --once` (local provider), exit {rc}: {count} modules; "
          f"loaded of {', '.join(HEAVY)}: {heavy}  {verdict(heavy == 'none')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pushes", type=int, default=10)
    ap.add_argument("--ticks", type=int, default=50)
    ap.add_argument("--poll-interval", type=float, default=5.0)
    ap.add_argument("--only", default="webhook,poll,tick", help="comma-separated: webhook, poll, tick")
    ap.add_argument("--quick", action="store_true", help="2 pushes, 5 ticks, --poll-interval 1: a run of seconds")
    args = ap.parse_args()
    if args.quick:
        args.pushes, args.ticks, args.poll_interval = 2, 5, 1.0
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="gitdns-bench-agent-") as tmp:
        root = Path(tmp)
        if "webhook" in only:
            bench_webhook(root, args.pushes)
        if "poll" in only:
            bench_poll(root, args.pushes, args.poll_interval)
        if "tick" in only:
            bench_tick(root, args.ticks)


if __name__ == "__main__":
    main()
