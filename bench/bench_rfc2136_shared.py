"""Ten agents write one shared host at the same moment on a real BIND, through the rfc2136 provider.

    python bench/bench_rfc2136_shared.py [--agents 10] [--rounds 5] [--seed 1]
    python bench/bench_rfc2136_shared.py --quick     # 3 agents, 1 join/leave round (for CI)

A BIND 9 is started on a free loopback port (tests/e2e/dns_servers.py: zone example.test,
TSIG key ddns-key).  Round 1: N threads, each an owner ``agent-NN`` with its own provider
(from ``from_ref``, its own TCP connections) wanting ``shared.example.test A 192.0.2.NN``,
wait on a barrier and then each runs the agent's loop with the real planner: read, plan
(every owner known from "git", so leaves are guarded), apply; a refused group (a failed
RFC 2136 prerequisite) is re-read and re-planned after a full-jitter exponential backoff
(20 ms doubling, capped at 1 s), until the second plan is empty.

Then R join/leave rounds: in each, one present owner leaves (wants nothing) while a new
owner joins, both released by one barrier; both retry the same way.

Prints, per round: values present vs expected, refusals re-planned, writes applied, lost
writes (an expected value missing at the end, or a leaver's value left behind), and times.
Asserts nothing (tests never assert wall-clock time; this prints figures).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gitdns.core.model import CredentialsRef, ProviderRef, Revision
from gitdns.core.plan.planner import plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import RecordSet
from gitdns.core.registry import txt_name
from gitdns.providers.base import Provider
from gitdns.providers.fences import Fences
from gitdns.providers.rfc2136.provider import from_ref
from tests.e2e import dns_servers

ZONE = dns_servers.ZONE
HOST = f"shared.{ZONE}"
REV = Revision(1_700_000_000, "c0ffee0123456789")


@dataclass
class Agent:
    owner: str
    ip: str | None  # None: the agent leaves (wants nothing)
    provider: Provider
    refusals: int = 0
    applies: int = 0
    errors: list[str] = field(default_factory=list)
    done_at: float = 0.0
    host: str = HOST

    def desired(self) -> list[RecordSet]:
        return [] if self.ip is None else [RecordSet(self.host, "A", 60, (self.ip,))]


def make_provider(port: int, secret_file: Path, base: Path) -> Provider:
    ref = ProviderRef("rfc2136", (("port", str(port)), ("server", "127.0.0.1"), ("timeout", "5"),
                                  ("tsigKeyName", dns_servers.KEY_NAME)), CredentialsRef(file=str(secret_file)))
    # the operator's allow-lists: this server, credentials files from the temp directory
    fences = Fences.parse(rfc2136_servers=f"127.0.0.1:{port}", credentials_dir=str(secret_file.parent))
    return from_ref(ZONE, ref, base, fences=fences)


def run_agent(agent: Agent, owners: tuple[str, ...], barrier: threading.Barrier, rng: random.Random,
              budget: float = 60.0) -> None:
    try:
        _loop(agent, owners, barrier, rng, budget)
    except Exception as exc:  # printed in the report
        agent.errors.append(f"{type(exc).__name__}: {exc}")


def _loop(agent: Agent, owners: tuple[str, ...], barrier: threading.Barrier, rng: random.Random,
          budget: float) -> None:
    policy = PlanPolicy(zone=ZONE, known_owners=owners)
    barrier.wait()
    deadline = time.monotonic() + budget
    attempt = 0
    while time.monotonic() < deadline:
        observed = agent.provider.read(ZONE, [agent.host, *_txt(owners, agent.host)])
        p = plan(Intent(agent.owner, tuple(agent.desired()), REV), observed, policy)
        if p.empty:
            agent.done_at = time.monotonic()
            return
        result = agent.provider.apply(ZONE, p.applicable, p.guards)
        agent.applies += len(result.applied)
        if result.failed:
            agent.errors.append(str(result.failed))
            return
        if result.refused:
            agent.refusals += len(result.refused)
            attempt += 1
            time.sleep(rng.uniform(0, min(1.0, 0.02 * 2 ** attempt)))  # full jitter
    agent.errors.append("budget exhausted")


def _txt(owners: tuple[str, ...], host: str) -> list[str]:
    return [txt_name(o, "A", host, ZONE) for o in owners]


def values(provider: Provider, host: str = HOST) -> set[str]:
    return {v for r in provider.read(ZONE, [host]).records if r.type == "A" for v in r.values}


def race(agents: list[Agent], owners: tuple[str, ...], seed: int) -> float:
    barrier = threading.Barrier(len(agents) + 1)
    threads = [threading.Thread(target=run_agent, args=(a, owners, barrier, random.Random(seed * 1000 + i)))
               for i, a in enumerate(agents)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.monotonic()
    for t in threads:
        t.join()
    return started


def report(title: str, agents: list[Agent], present: set[str], expected: set[str], gone: set[str],
           started: float) -> None:
    lost = sorted(expected - present)
    leftover = sorted(gone & present)
    done = [a.done_at - started for a in agents if a.done_at]
    print(f"{title}: values present {len(present & expected)}/{len(expected)}; refusals re-planned "
          f"{sum(a.refusals for a in agents)}; changes applied {sum(a.applies for a in agents)}; "
          f"lost writes {len(lost)}{' ' + str(lost) if lost else ''}; leavers' values left {len(leftover)}; "
          f"errors {sum(len(a.errors) for a in agents)}; last agent done after {max(done or [0]):.3f}s")
    for a in agents:
        for err in a.errors:
            print(f"  {a.owner}: {err}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5, help="join/leave rounds after the first")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="3 agents, 1 join/leave round")
    args = ap.parse_args()
    if args.quick:
        args.agents, args.rounds = 3, 1
    n = args.agents
    with tempfile.TemporaryDirectory(prefix="gitdns-bench-rfc2136-") as tmp_dir:
        tmp = Path(tmp_dir)
        secret = tmp / "tsig.env"
        secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        with dns_servers.running("bind", tmp / "bind") as server:
            print(f"BIND on 127.0.0.1:{server.port}, zone {ZONE}, host {HOST}")
            owners = tuple(f"agent-{i:02d}" for i in range(1, n + args.rounds + 1))  # every owner known from git
            agents = [Agent(f"agent-{i:02d}", f"192.0.2.{i}", make_provider(server.port, secret, tmp))
                      for i in range(1, n + 1)]
            started = race(agents, owners, args.seed)
            watcher = make_provider(server.port, secret, tmp)
            expected = {a.ip for a in agents if a.ip}
            report(f"{n} agents at once", agents, values(watcher), expected, set(), started)
            present_owners = [a.owner for a in agents]
            for r in range(1, args.rounds + 1):
                leaver_owner = present_owners.pop(0)
                leaver_ip = f"192.0.2.{int(leaver_owner.split('-')[1])}"
                joiner_no = n + r
                joiner_owner = f"agent-{joiner_no:02d}"
                leaver = Agent(leaver_owner, None, make_provider(server.port, secret, tmp))
                joiner = Agent(joiner_owner, f"192.0.2.{joiner_no}", make_provider(server.port, secret, tmp))
                started = race([leaver, joiner], owners, args.seed + r)
                present_owners.append(joiner_owner)
                expected = {f"192.0.2.{int(o.split('-')[1])}" for o in present_owners}
                report(f"join/leave round {r} ({leaver_owner} leaves, {joiner_owner} joins)", [leaver, joiner],
                       values(watcher), expected, {leaver_ip}, started)
            sole_owner_races(server.port, secret, tmp, owners, args.rounds, args.seed)


def sole_owner_races(port: int, secret: Path, tmp: Path, owners: tuple[str, ...], rounds: int, seed: int) -> None:
    """The race the join/leave guards exist for: the only owner of ``race-R`` leaves while another
    owner joins wanting the same value; without the guard the leaver's exact-match delete
    would remove the value the joiner announced only by its TXT."""
    for r in range(1, rounds + 1):
        host = f"race-{r}.{ZONE}"
        first, second = owners[0], owners[1]
        setup = Agent(first, "192.0.2.200", make_provider(port, secret, tmp), host=host)
        race([setup], owners, seed)
        leaver = Agent(first, None, make_provider(port, secret, tmp), host=host)
        joiner = Agent(second, "192.0.2.200", make_provider(port, secret, tmp), host=host)
        started = race([leaver, joiner], owners, seed + 100 + r)
        watcher = make_provider(port, secret, tmp)
        report(f"sole-owner race {r} on {host} ({first} leaves, {second} joins with the same value)",
               [leaver, joiner], values(watcher, host), {"192.0.2.200"}, set(), started)


if __name__ == "__main__":
    main()
