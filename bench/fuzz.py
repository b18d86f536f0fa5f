"""Bad input fuzzing (issue 30, item 4): the full run, with Hypothesis, from a seed.

    python3 bench/fuzz.py [--examples N] [--txt-examples M] [--seed S] [--jobs J] [--store memory|local]
    python3 bench/fuzz.py --quick            # 30 + 20 examples: the smoke run tests/fuzz runs

**Desired-state documents** (tests/fuzz/mutations.py, tests/fuzz/harness.py): ``N`` cases, each
an example repository (example-repo/ and every docs/examples/*/), one of its documents mutated
(structurally, as text, as bytes, or the whole file), then `gitdns validate` (the function, the
CLI in process, the command's JSON) and an agent cycle after the example was applied.  Counts:
examples, refusals (validate exits 1), crashes, problems without a line, zone changes on
rejection (a zone held, or touched by a document with a problem, that changed), zones not held
whose pass failed, and the CLI disagreeing with the function.

**Malformed ownership TXT** (tests/fuzz/txt.py): ``M`` cases, each up to six drawn TXT records
per zone put into the zones example-repo's ``eu-west-1`` publishes, then the registry reader,
the planner (own authority and an active group's) and two agent cycles.  Counts: examples, TXT
records put in, crashes, TXT not the agent's own that were changed, zone passes that failed.

Every crash, every zone changed on rejection and every foreign TXT changed is a bug: the first
few are printed with the case to replay.  Prints figures and asserts nothing; the exit status is
1 when a must-be-zero count is not.  ``--jobs`` splits the examples between processes, each with
its own seed (``S``, ``S+1``, ...).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MUST_BE_ZERO = ("crashes", "lineless", "changed", "unreconciled", "disagreements", "txt_crashes", "txt_changed",
                "txt_zone_errors")
LABELS = {
    "examples": "documents: examples run",
    "refused": "documents: refused by validate (exit 1)",
    "crashes": "documents: crashes (must be 0)",
    "lineless": "documents: problems without a line (must be 0)",
    "changed": "documents: zone changes on rejection (must be 0)",
    "unreconciled": "documents: zones not held whose pass failed (must be 0)",
    "disagreements": "documents: CLI and function disagree (must be 0)",
    "txt_examples": "ownership TXT: examples run",
    "txt_seeds": "ownership TXT: malformed TXT records put into zones",
    "txt_crashes": "ownership TXT: crashes (must be 0)",
    "txt_changed": "ownership TXT: records not the agent's own changed (must be 0)",
    "txt_zone_errors": "ownership TXT: zone passes that failed (must be 0)",
}


def run(examples: int, txt_examples: int, seed: int, store: str) -> tuple[Counter[str], list[str]]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded
    from hypothesis import strategies as st

    from tests.fuzz.harness import judge
    from tests.fuzz.mutations import cases
    from tests.fuzz.repos import REPOS
    from tests.fuzz.txt import ZONES, judge_txt, malformed

    counts: Counter[str] = Counter()
    shown: list[str] = []
    quiet = settings(database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))

    def keep(case: object, failures: list[str]) -> None:
        if len(shown) < 5:
            shown.append(f"{case!r:.3000}\n  " + "\n  ".join(f[:2000] for f in failures[:3]))

    @seeded(seed)
    @settings(quiet, max_examples=examples)
    @given(cases(sorted(REPOS)))
    def documents(case: object) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            verdict, _ = judge(case, Path(tmp), store)  # type: ignore[arg-type]
        counts["examples"] += 1
        counts["refused"] += verdict.refused
        for name in ("crashes", "lineless", "changed", "unreconciled", "disagreements"):
            counts[name] += bool(getattr(verdict, name))
        if verdict.failures:
            keep(case, verdict.failures)

    @seeded(seed)
    @settings(quiet, max_examples=txt_examples)
    @given(st.fixed_dictionaries({domain: st.lists(malformed(domain), max_size=6) for domain in ZONES}))
    def ownership(seeds: dict[str, list[object]]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            failures, count = judge_txt(seeds, Path(tmp), store)  # type: ignore[arg-type]
        counts["txt_examples"] += 1
        counts["txt_seeds"] += count
        counts["txt_crashes"] += any("crash" in f or "Traceback" in f or "InternalError" in f for f in failures)
        counts["txt_changed"] += any("was changed" in f for f in failures)
        counts["txt_zone_errors"] += any(f.startswith("zone ") for f in failures)
        if failures:
            keep(seeds, failures)

    if examples:
        documents()
    if txt_examples:
        ownership()
    return counts, shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2_000, help="desired-state cases (default 2000)")
    parser.add_argument("--txt-examples", type=int, default=500, help="ownership TXT cases (default 500)")
    parser.add_argument("--seed", type=int, default=30, help="Hypothesis seed (default 30)")
    parser.add_argument("--jobs", type=int, default=1, help="processes, each with its share and seed+i")
    parser.add_argument("--store", choices=("memory", "local"), default="memory", help="the agent's zones")
    parser.add_argument("--quick", action="store_true", help="30 + 20 examples (the smoke run)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.examples, args.txt_examples = 30, 20
    if args.worker:
        counts, shown = run(args.examples, args.txt_examples, args.seed, args.store)
        print(json.dumps({"counts": counts, "shown": shown}))
        return 0
    start = time.perf_counter()
    jobs = max(1, args.jobs)
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--worker", "--examples", str(_share(args.examples, jobs, i)),
         "--txt-examples", str(_share(args.txt_examples, jobs, i)), "--seed", str(args.seed + i),
         "--store", args.store], stdout=subprocess.PIPE, text=True, cwd=ROOT) for i in range(jobs)]
    total: Counter[str] = Counter()
    shown: list[str] = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            print(f"a worker exited {proc.returncode}")
            return 1
        done = json.loads(out.strip().splitlines()[-1])
        total.update(done["counts"])
        shown.extend(done["shown"])
    seeds = ", ".join(str(args.seed + i) for i in range(jobs))
    print(f"[fuzz] seed {seeds}, store {args.store}, {time.perf_counter() - start:.0f} s")
    for name, label in LABELS.items():
        print(f"[fuzz] {label}: {total.get(name, 0)}")
    bad = [name for name in MUST_BE_ZERO if total.get(name, 0)]
    for text in shown[:5]:
        print(f"[fuzz] failing case: {text}")
    print(f"[fuzz] {'PASS' if not bad else 'MISS: ' + ', '.join(bad)}")
    return 1 if bad else 0


def _share(total: int, jobs: int, index: int) -> int:
    return total // jobs + (1 if index < total % jobs else 0)


if __name__ == "__main__":
    raise SystemExit(main())
