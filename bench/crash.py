"""Crash safety: kill -9 at random moments in the writes gitdns makes (docs/benchmarks.md,
"Crash safety").

    python bench/crash.py [--trials 100] [--seed 30] [--targets local,bind,status,delivery]
    python bench/crash.py --quick            # 10 kills in all (what CI runs)

Targets, each a real process killed with SIGKILL together with every process it started:

local     `gitdns agent --once` (and, in a quarter of the trials, `gitdns apply`) writing two
          `local` zones: the store file, the views rendered from it (served by a real BIND, one
          view per geo) and the agent's state files.
bind      the same commands writing an `rfc2136` zone on a real BIND (one UPDATE per group).
status    `gitdns agent --once` pushing its status-branch commit to a bare remote.
delivery  `gitdns orchestrator --once --out DIR` delivering hosts files and its Corefile snippet,
          served by a real dnsmasq.

The moment: a write step of the target (opening a temporary file, fsync, rename, unlink, an
UPDATE, a git command, a signal; each before or after it runs) chosen uniformly among the
steps a full run of the target makes, where the process stops and is killed; or, for a push,
the receiving side's pre-receive or post-receive hook, the server killed too or left to finish;
or a delay from the process start, uniform over a full run's length, with every write step
slowed so that more kills land inside a write.  After the kill, what a reader sees is checked;
the same command is then run again to completion and what it left is checked.

--quick: 10 kills spread over the targets (QUICK), the first of each target at a counted step,
so that every target is killed inside one of its writes at least once.

Prints per target: kills, kills inside a write of the target, torn files, lost values,
duplicate status commits, stray temporary files, other violations (must all be 0), with the
seed to replay.  Exit status 1 when any violation was seen.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.crash_agent import CLUSTERS, AgentRig  # noqa: E402
from tests.e2e.crash_delivery import DeliveryRig, answered_at_kill, whole_at_kill  # noqa: E402
from tests.e2e.crash_kit import Kill, Moment, parse_events, run_clean, run_killed  # noqa: E402

TARGETS = ("local", "bind", "status", "delivery")
QUICK = {"local": 3, "bind": 2, "status": 3, "delivery": 2}  # --quick: 10 kills in all
SPANS = {"local": "store|views|state", "bind": "rfc2136", "status": "status", "delivery": "delivery"}
KINDS = ("torn", "lost", "dup", "stray", "other")
HEADINGS = {"torn": "torn files", "lost": "lost values", "dup": "duplicate status commits",
            "stray": "stray temp files", "other": "other violations"}


@dataclass
class Tally:
    target: str
    kills: int = 0
    inside: int = 0  # kills that landed inside a write of the target
    finished: int = 0  # runs that ended before their moment came (tried again)
    retries: int = 0  # restarts that had to be run again
    modes: Counter[str] = field(default_factory=Counter)
    steps: Counter[str] = field(default_factory=Counter)
    problems: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    strays: set[str] = field(default_factory=set)
    full_run: str = ""  # how long a full run is (where the moments are drawn from)

    def add(self, kind: str, trial: str, found: list[str]) -> None:
        if kind == "stray":  # a stray file stays until removed: count each once
            found = [p for p in found if p not in self.strays]
            self.strays.update(found)
        self.problems[kind] += [f"{trial}: {p}" for p in found]

    def count(self, kind: str) -> int:
        return len(self.problems[kind])


@dataclass
class Catalogue:
    """How long a full run of a command is: its counted steps and seconds (the largest seen)."""

    steps: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def note(self, key: str, steps: int, seconds: float) -> None:
        self.steps[key] = max(self.steps.get(key, 0), steps)
        self.seconds.setdefault(key, []).append(seconds)

    def describe(self, target: str) -> str:
        return "; ".join(f"{key.split('/', 1)[1] if '/' in key else key} {steps} steps, "
                         f"{statistics.median(self.seconds[key]):.2f}s"
                         for key, steps in sorted(self.steps.items()) if key.split("/")[0] == target and steps)

    def moment(self, rng: random.Random, key: str, remote: bool, step: bool = False) -> Moment:
        """A counted step (60 %), or for a push its remote side (25 %, then 40 % steps), or a
        delay over a full run's length with the target's steps slowed so that they take about a
        third of the slowed run.  ``step``: a counted step (a kill inside a write)."""
        roll = 0.5 if step else rng.random()
        if remote and roll < 0.25:
            return Moment("remote", remote=rng.choice(("pre-receive", "post-receive")), spare_remote=rng.random() < 0.5)
        steps = self.steps.get(key, 0)
        if steps and (step or roll < (0.65 if remote else 0.6)):
            return Moment("step", at=rng.randint(1, steps))
        seconds = statistics.median(self.seconds.get(key) or [1.0])
        slow = min(0.2, max(0.002, 0.5 * seconds / max(steps, 1)))
        return Moment("timer", delay=rng.uniform(0.0, seconds + steps * slow), slow=slow)


def restart(argv: list[str], log: Path, spans: str, tally: Tally, trial: str, catalogue: Catalogue,
            key: str) -> bool:
    """Run the command again to completion: the process after its crash, whose first cycle must
    succeed (a refusal is a violation; it is run again a few times to go on)."""
    for attempt in range(1, 6):
        done, seconds = run_clean(argv, log, spans)
        if done.returncode == 0:
            catalogue.note(key, parse_events(log, None, spans).steps, seconds)
            return True
        tally.retries += 1
        reason = (done.stderr.strip().splitlines() or ["?"])[-1][-300:]
        tally.add("other", trial, [f"restart {attempt} exited {done.returncode}: {reason}"])
        time.sleep(3)
    return False


def record_kill(tally: Tally, kill: Kill, moment: Moment) -> None:
    tally.kills += 1
    tally.modes[moment.mode] += 1
    if kill.inside(SPANS[tally.target]):
        tally.inside += 1
        tally.steps[f"remote {moment.remote}" if moment.mode == "remote" else kill.last_step or "start"] += 1


# --- the agent targets --------------------------------------------------------------------------


def agent_trial(rig: AgentRig, tally: Tally, n: int, rng: random.Random, catalogue: Catalogue, work: Path,
                step: bool = False) -> None:
    target = tally.target
    spans = SPANS[target]
    log = work / f"{target}-{n}.log"
    for _attempt in range(6):
        cluster = rng.choice(CLUSTERS)
        kind = "apply" if target != "status" and rng.random() < 0.25 else "agent"
        trial = f"{target} #{n} {cluster} {kind}"
        head = rig.change(cluster, n)
        new = rig.want_now(cluster)
        if kind == "agent" and rng.random() < 0.1:
            rig.fresh_state(cluster)  # a new pod, an empty state volume
            trial += " (fresh state)"
        key = f"{target}/{kind}"
        moment = catalogue.moment(rng, key, remote=target == "status", step=step)
        argv = rig.argv(cluster, kind)
        kill = run_killed(argv, log, spans, moment)
        trial += f" at {moment.describe()}"
        if kill.killed:
            record_kill(tally, kill, moment)
            tally.add("torn", trial, rig.files_whole(cluster))
            tally.add("lost", trial, rig.kept_at_kill(cluster, new))
        else:
            tally.finished += 1
        if not restart(argv, log, spans, tally, trial, catalogue, key):
            return
        rig.wants[cluster] = new
        tally.add("lost", trial, rig.converged())
        tally.add("torn", trial, rig.files_whole(cluster))
        tally.add("stray", trial, rig.stray_temps())
        tally.add("other", trial, rig.served())
        if kind == "agent":
            dups, other = rig.status_problems(cluster, head)
            tally.add("dup", trial, dups)
            tally.add("other", trial, other)
        if kill.killed:
            return


def rng_of(seed: int, target: str) -> random.Random:
    """One random sequence per target: a target replays alone with the same seed."""
    return random.Random(f"{seed}:{target}")


def run_agent_targets(targets: list[str], trials: dict[str, int], seed: int, work: Path,
                      quick: bool = False) -> list[Tally]:
    rig = AgentRig(work / "agent")
    catalogue = Catalogue()
    tallies = []
    try:
        for cluster in CLUSTERS:  # every cluster's first cycle: the zones, views and status branches exist
            done, _ = run_clean(rig.argv(cluster, "agent"), work / "setup.log")
            if done.returncode != 0:
                raise RuntimeError(f"setup {cluster}: {done.stdout}\n{done.stderr[-3000:]}")
            rig.wants[cluster] = rig.want_now(cluster)
        for kind in ("agent", "apply"):  # a full run's length: each cluster's next change, as a trial makes it
            for cluster in CLUSTERS:
                rig.change(cluster, 0)
                done, seconds = run_clean(rig.argv(cluster, kind), work / "setup.log")
                if done.returncode != 0:
                    raise RuntimeError(f"setup {cluster} {kind}: {done.stdout}\n{done.stderr[-3000:]}")
                for target in targets:
                    catalogue.note(f"{target}/{kind}", parse_events(work / "setup.log", None, SPANS[target]).steps,
                                   seconds)
                rig.wants[cluster] = rig.want_now(cluster)
        rig.start_views()
        for target in targets:
            tally = Tally(target)
            tallies.append(tally)
            tally.full_run = catalogue.describe(target)
            rng = rng_of(seed, target)
            started = time.monotonic()
            for n in range(1, trials[target] + 1):
                agent_trial(rig, tally, n, rng, catalogue, work, step=quick and n == 1)
            print(f"  {target}: {tally.kills} kills in {time.monotonic() - started:.0f}s", flush=True)
    finally:
        rig.stop()
    return tallies


# --- the orchestrator target --------------------------------------------------------------------


def delivery_trial(rig: DeliveryRig, tally: Tally, n: int, rng: random.Random, catalogue: Catalogue,
                   work: Path, step: bool = False) -> None:
    log = work / f"delivery-{n}.log"
    for _attempt in range(6):
        before_files, before = rig.files(), rig.published().answers()
        move = rig.change(rng)
        want = rig.published()
        moment = catalogue.moment(rng, "delivery", remote=False, step=step)
        trial = f"delivery #{n} {move} at {moment.describe()}"
        kill = run_killed(rig.argv(), log, SPANS["delivery"], moment)
        at_kill = rig.files()
        torn = rig.torn()
        answered = rig.answers(set(before) | set(want.answers()))
        if not restart(rig.argv(), log, SPANS["delivery"], tally, trial, catalogue, "delivery"):
            return
        after_files = rig.files()
        if kill.killed:
            record_kill(tally, kill, moment)
            tally.add("torn", trial, torn + whole_at_kill(at_kill, before_files, after_files))
            tally.add("other", trial, answered_at_kill(answered, before, want.answers()))
        else:
            tally.finished += 1
        tally.add("lost", trial, rig.exact(want))
        tally.add("torn", trial, rig.torn())
        tally.add("stray", trial, rig.stray_temps())
        served = rig.answers(set(before) | set(want.answers()))
        expected = {name: want.answers().get(name, set()) for name in set(before) | set(want.answers())}
        if served != expected:
            tally.add("lost", trial, [f"dnsmasq answers {served}, the pool publishes {expected}"])
        if kill.killed:
            return


def run_delivery(trials: int, seed: int, work: Path, quick: bool = False) -> Tally:
    rig = DeliveryRig(work / "delivery")
    catalogue = Catalogue()
    tally = Tally("delivery")
    rng = rng_of(seed, "delivery")
    try:
        for _ in range(3):
            rig.change(rng)
            done, seconds = run_clean(rig.argv(), work / "setup.log", SPANS["delivery"])
            if done.returncode != 0:
                raise RuntimeError(f"setup delivery: {done.stdout}\n{done.stderr[-3000:]}")
            catalogue.note("delivery", parse_events(work / "setup.log", None, SPANS["delivery"]).steps, seconds)
        tally.full_run = catalogue.describe("delivery")
        started = time.monotonic()
        for n in range(1, trials + 1):
            delivery_trial(rig, tally, n, rng, catalogue, work, step=quick and n == 1)
        print(f"  delivery: {tally.kills} kills in {time.monotonic() - started:.0f}s", flush=True)
    finally:
        rig.stop()
    return tally


# --- report -------------------------------------------------------------------------------------


def report(tallies: list[Tally], seed: int, trials: dict[str, int]) -> int:
    print(f"\nseed {seed}, trials " + ", ".join(f"{t.target} {trials[t.target]}" for t in tallies) + "\n")
    print("| target | kills | inside a write | torn files | lost values | duplicate status commits "
          "| stray temp files | other violations | runs done before the kill | restarts refused |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in tallies:
        print(f"| {t.target} | {t.kills} | {t.inside} | " + " | ".join(str(t.count(k)) for k in KINDS)
              + f" | {t.finished} | {t.retries} |")
    print()
    for t in tallies:
        print(f"[{t.target}] a full run (moments drawn over it): {t.full_run}")
        print(f"[{t.target}] moments: " + ", ".join(f"{m} {c}" for m, c in sorted(t.modes.items())))
        print(f"[{t.target}] inside a write, by step: "
              + ", ".join(f"{s} {c}" for s, c in t.steps.most_common()))
    bad = 0
    for t in tallies:
        for kind in KINDS:
            for problem in t.problems[kind][:20]:
                print(f"VIOLATION [{t.target}] {HEADINGS[kind]}: {problem}")
            bad += t.count(kind)
    print(f"\nviolations: {bad}")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100, help="kills per target (default 100)")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated: " + ",".join(TARGETS))
    parser.add_argument("--quick", action="store_true",
                        help="10 kills in all, spread over the targets, each killed inside a write (CI)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    trials = dict(QUICK) if args.quick else dict.fromkeys(TARGETS, args.trials)
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets: {sorted(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="gitdns-crash-"))
    print(f"crash trials: seed {args.seed}, " + ", ".join(f"{t} {trials.get(t)}" for t in targets), flush=True)
    tallies: list[Tally] = []
    agent = [t for t in targets if t != "delivery"]
    if agent:
        tallies += run_agent_targets(agent, trials, args.seed, work, quick=args.quick)
    if "delivery" in targets:
        tallies.append(run_delivery(trials["delivery"], args.seed, work, quick=args.quick))
    code = report(tallies, args.seed, trials)
    if args.keep:
        print(f"work directory kept: {work}")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
