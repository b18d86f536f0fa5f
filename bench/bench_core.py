"""Core benchmarks of issue 2: prints figures and PASS/MISS against the targets; asserts nothing.

    python bench/bench_core.py [--sizes 1000,10000,100000] [--runs 3] [--help-runs 10] [--json FILE]
    python bench/bench_core.py --quick                          # N=1,000, one run of each (seconds)
    python bench/bench_core.py --sizes 10000 --profile plan     # cProfile one phase

For each size N: a desired repo of N hosts (bench/generate.py, two zones, ten clusters) and a
``local`` store of about N records in one zone with ten owners.  Every phase runs ``--runs``
times, each in a fresh child process (so its peak RSS, ``ru_maxrss``, is its own); the
median time is printed:

    validate  gitdns.adapters.repo.load_repo: read + parse + schema + semantic checks
    read      the store file's bytes from disk (Path.read_bytes; page cache warm)
    decode    gitdns.providers.local.decode_store: JSON + RecordSet rows
    plan      gitdns.core.plan.planner.plan: the first owner's intent against the decoded zone
              (steady state: the zone already holds what the owner wants)
    plan-drift  the same, with every 10th of the owner's A records moved to a new address
    apply     LocalProvider.apply of the whole zone as creates into an empty store
              (the initial sync: lock, compare-and-swap, encode, fsync, rename)
    RSS       the largest peak RSS of the read, decode, plan and apply children (the plan
              child also reads and decodes; the apply child also decodes)

Against a floor, each in the same child process and run, after the phase timed above:

    validate/parse-floor      validate over the YAML parse alone of the same files
                              (`gitdns.core.yamlparse.parse` of each file's text, read before);
                              printed for N=10,000 (target <= 3x)
    validate-one-file/cold    `gitdns.core.validate.check` of the same files in memory after a
                              commit that changes one value in one file (records/static-000.yaml),
                              with the validation cache (`gitdns.core.blobcache.ValidationCache`:
                              files by git blob id, the checks' results by what they read) warm
                              from the commit before, over the same check with the cache empty
                              (the cold validate of the commit before); the two must find the same
                              problems; printed for N=10,000 (target <= 0.1x)
    plan/decode-floor         plan over `gitdns.providers.local.decode_store` of the same store
                              bytes alone; printed for the zone of N=100,000 (target <= 2x)

Each ratio is the median over ``--runs`` of each run's own ratio.  Without those sizes
(``--quick``, or other ``--sizes``), each is printed for the measured size nearest to its own.

Also `gitdns --help`: median wall time of ``--help-runs`` runs of the console script, and which
heavy modules it imports.  ``--json FILE`` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
HEAVY = ("boto3", "botocore", "jinja2", "jsonschema", "ruamel", "kubernetes", "dns", "git", "google", "azure")
PHASES = ("validate", "read", "decode", "plan", "plan-drift", "apply")
STORE_PHASES = ("read", "decode", "plan", "plan-drift", "apply")


# --- child side: one phase, timed, in its own process ------------------------------------


def _store_path(fixture: Path) -> Path:
    meta = json.loads((fixture / "zone" / "meta.json").read_text())
    return fixture / "zone" / "store" / f"{meta['zone']}.json"


def _decoded(fixture: Path) -> tuple[dict[str, Any], Any]:
    from gitdns.providers.local import decode_store

    meta = json.loads((fixture / "zone" / "meta.json").read_text())
    path = _store_path(fixture)
    _, records = decode_store(path, path.read_bytes(), meta["zone"])
    return meta, records


def prepare_validate(fixture: Path) -> Callable[[], Any]:
    from gitdns.adapters.repo import load_repo

    def run() -> Any:
        return {"problems": len(load_repo(fixture / "repo").problems)}

    return run


def prepare_read(fixture: Path) -> Callable[[], Any]:
    path = _store_path(fixture)
    return lambda: {"bytes": len(path.read_bytes())}


def prepare_decode(fixture: Path) -> Callable[[], Any]:
    from gitdns.providers.local import decode_store

    path = _store_path(fixture)
    data = path.read_bytes()
    zone = json.loads((fixture / "zone" / "meta.json").read_text())["zone"]
    return lambda: {"records": len(decode_store(path, data, zone)[1])}


def drifted(wanted: Sequence[Any], every: int = 10) -> tuple[Any, ...]:
    """The intent with every ``every``-th A record moved to a new address (an IP change)."""
    out = []
    a_records = 0
    for rec in wanted:
        if rec.type == "A":
            a_records += 1
            if a_records % every == 0:
                rec = rec.with_values(["198.51.100.77"])
        out.append(rec)
    return tuple(out)


def prepare_plan(fixture: Path, drift: bool = False) -> Callable[[], Any]:
    from gitdns.core.model import Revision
    from gitdns.core.plan.planner import plan
    from gitdns.core.plan.values import Intent, PlanPolicy
    from gitdns.core.records import ZoneSnapshot
    from gitdns.providers.local import decode_store

    meta, records = _decoded(fixture)
    intent_path = fixture / "zone" / "intent.json"
    _, wanted = decode_store(intent_path, intent_path.read_bytes(), meta["zone"])
    sec, _, sha = meta["revision"].partition(".")
    records_wanted = drifted(list(wanted.values())) if drift else tuple(wanted.values())
    intent = Intent(meta["owner"], records_wanted, Revision(int(sec), sha))
    snapshot = ZoneSnapshot(meta["zone"], tuple(records.values()))
    policy = PlanPolicy(zone=meta["zone"], known_owners=tuple(meta["owners"]))

    def run() -> Any:
        result = plan(intent, snapshot, policy)
        return {"changes": len(result.changes), "conflicts": len(result.conflicts), "stalled": result.stalled}

    return run


def creates_for(records: dict[Any, Any]) -> list[Any]:
    """Every record as a CREATE, grouped by data key: ownership TXT first, then the data."""
    from gitdns.core.records import Action, Change
    from gitdns.core.registry import decode_entry

    groups: dict[Any, list[Any]] = {}
    for key, rec in records.items():
        entry = decode_entry(rec) if rec.type == "TXT" else None
        group = entry.key if entry is not None else key
        groups.setdefault(group, []).append(Change(Action.CREATE, None, rec, group))
    for members in groups.values():
        members.sort(key=lambda c: c.new.type != "TXT" or c.group == c.key)
    return [c for members in groups.values() for c in members]


def prepare_apply(fixture: Path) -> Callable[[], Any]:
    from gitdns.providers.local import LocalProvider

    meta, records = _decoded(fixture)
    changes = creates_for(records)
    target = Path(tempfile.mkdtemp(prefix="apply-", dir=fixture))
    provider = LocalProvider(target)

    def run() -> Any:
        result = provider.apply(meta["zone"], changes)
        return {"applied": len(result.applied), "refused": len(result.refused), "failed": len(result.failed)}

    return run


def validate_floors(fixture: Path) -> dict[str, Any]:
    """After the cold validate, in the same process: the YAML parse alone of the same files, and
    the check with the validation cache warm after a commit that changes one file."""
    from gitdns.adapters.repo import check_files as check  # as the agent checks a commit
    from gitdns.adapters.repo import load_schemas, read_tree
    from gitdns.core.blobcache import ValidationCache
    from gitdns.core.limits import Unread
    from gitdns.core.yamlparse import parse

    files = read_tree(fixture / "repo")
    texts = [text for text in files.values() if not isinstance(text, Unread)]
    start = time.perf_counter()
    documents = sum(len(parse(text, finite=True)) for text in texts)
    parse_floor = time.perf_counter() - start

    schemas = load_schemas()
    cache = ValidationCache()
    start = time.perf_counter()
    cold = check(files, schemas, cache)  # the commit before, cold: the cache filled
    check_cold = time.perf_counter() - start
    touched, edited = touch_one_file(files)
    after = {**files, touched: edited}
    start = time.perf_counter()
    warm = check(after, schemas, cache)
    check_warm = time.perf_counter() - start
    same = warm.problems == check(after, schemas).problems  # a cold check of the commit after, untimed
    return {"parse_floor": parse_floor, "check_cold": check_cold, "check_warm": check_warm,
            "files": len(files), "documents": documents, "bytes": sum(len(t) for t in texts),
            "unread": len(files) - len(texts), "touched": touched, "touched_bytes": len(edited),
            "problems_cold": len(cold.problems), "problems_warm": len(warm.problems), "warm_same": same}


def touch_one_file(files: dict[str, str]) -> tuple[str, str]:
    """A commit that changes one value in one small file: the first static RecordSet file's
    first address (or, in another repository, a comment added to its smallest file)."""
    statics = sorted(name for name in files if name.startswith("records/"))
    name = statics[0] if statics else min(files, key=lambda n: len(files[n]))
    text = files[name]
    edited = text.replace('"192.0.2.1"]', '"192.0.2.254"]', 1)
    return name, edited if edited != text else text + "\n# touched\n"


def plan_floor(fixture: Path) -> dict[str, Any]:
    """After the plan, in the same process: decoding the same store's bytes alone."""
    from gitdns.providers.local import decode_store

    path = _store_path(fixture)
    data = path.read_bytes()
    zone = json.loads((fixture / "zone" / "meta.json").read_text())["zone"]
    start = time.perf_counter()
    records = decode_store(path, data, zone)[1]
    return {"decode_floor": time.perf_counter() - start, "records": len(records)}


FLOORS: dict[str, Callable[[Path], dict[str, Any]]] = {"validate": validate_floors, "plan": plan_floor}

PREPARE: dict[str, Callable[[Path], Callable[[], Any]]] = {
    "validate": prepare_validate, "read": prepare_read, "decode": prepare_decode,
    "plan": prepare_plan, "plan-drift": lambda fixture: prepare_plan(fixture, drift=True),
    "apply": prepare_apply,
}


def child(phase: str, fixture: Path, profile: bool) -> None:
    """Time one phase once, then its floor (`FLOORS`), and print ``{"seconds", "maxrss_kib",
    "hwm_kib", "info", "floor"}`` as JSON (the peaks are the phase's, read before the floor)."""
    run = PREPARE[phase](fixture)
    if profile:
        print_profile(run)
        return
    start = time.perf_counter()
    info = run()
    seconds = time.perf_counter() - start
    maxrss, hwm = peak_rss_kib(), vm_hwm_kib()
    floor = FLOORS[phase](fixture) if phase in FLOORS else {}
    print(json.dumps({"seconds": seconds, "maxrss_kib": maxrss, "hwm_kib": hwm, "info": info, "floor": floor}))


def peak_rss_kib() -> int:
    """``ru_maxrss`` of this process.  Linux carries it across ``execve`` from the process
    that forked us, so the parent must stay smaller than any child (it never imports gitdns
    or builds fixtures itself)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def vm_hwm_kib() -> int | None:
    """The peak RSS of this process image alone (``VmHWM``, reset by ``execve``); a cross-check."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def print_profile(run: Callable[[], Any], top: int = 25) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = stats.stats  # type: ignore[attr-defined]
    total = max(values[3] for values in rows.values())  # the phase's own cumulative time
    print(f"total {total:.3f} s under cProfile (which slows Python calls); shares are of that total")
    for title, index in (("by own time (tottime)", 2), ("by cumulative time", 3)):
        print(f"\ntop {top} {title}:")
        print(f"{'share':>6} {'seconds':>8} {'calls':>9}  function")
        ranked = sorted(rows.items(), key=lambda kv: kv[1][index], reverse=True)[:top]
        for (file, line, func), values in ranked:
            where = f"{_short(file)}:{line}:{func}"
            print(f"{values[index] / total:6.1%} {values[index]:8.3f} {values[1]:9d}  {where}")


def _short(file: str) -> str:
    for marker in ("/gitdns/", "/bench/"):
        if marker in file:
            return file[file.rindex(marker) + 1 :]
    return file.rsplit("/", 2)[-1] if "/" in file else file


# --- parent side: fixtures, runs, tables --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figure:
    seconds: float  # median over runs
    maxrss_mib: float  # largest ru_maxrss over runs
    info: dict[str, Any]
    hwm_mib: float  # largest VmHWM over runs (Linux; 0 elsewhere)
    floor: dict[str, Any]  # the floor's figures: each time the median over runs, the rest the last run's
    per_run: tuple[tuple[float, dict[str, Any]], ...]  # (seconds, floor) of each run


def run_ratios(figure: Figure, numerator: str, denominator: str) -> tuple[float, ...]:
    """Each run's own ``numerator / denominator`` (``seconds``: the phase's time; else a key of
    its floor): the two are timed seconds apart in one process, so a busy moment of a shared
    machine weighs on both."""
    def value(run: tuple[float, dict[str, Any]], key: str) -> float:
        return run[0] if key == "seconds" else float(run[1][key])

    return tuple(value(run, numerator) / value(run, denominator) for run in figure.per_run)


def make_fixture(size: int, root: Path) -> tuple[Path, dict[str, float]]:
    """A repo of ``size`` hosts and a zone of about ``size`` records below ``root``, made by
    bench/generate.py in child processes (so this process stays small: see `peak_rss_kib`)."""
    fixture = root / f"n{size}"
    took: dict[str, float] = {}
    for what, flag in (("repo", "--hosts"), ("zone", "--records")):
        cmd = [sys.executable, str(BENCH_DIR / "generate.py"), what, flag, str(size), "--out", str(fixture / what)]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        took[what] = time.perf_counter() - start
    return fixture, took


def run_child(phase: str, fixture: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", phase, "--fixture", str(fixture)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def measure(phase: str, fixture: Path, runs: int) -> Figure:
    results = [run_child(phase, fixture) for _ in range(runs)]
    return Figure(
        seconds=statistics.median(r["seconds"] for r in results),
        maxrss_mib=max(r["maxrss_kib"] for r in results) / 1024,
        info=results[-1]["info"],
        hwm_mib=max(r["hwm_kib"] or 0 for r in results) / 1024,
        floor={key: statistics.median(r["floor"][key] for r in results) if isinstance(value, float) else value
               for key, value in results[-1]["floor"].items()},
        per_run=tuple((r["seconds"], r["floor"]) for r in results),
    )


def help_times(runs: int) -> dict[str, float]:
    """Median wall time of ``gitdns --help`` (console script) and ``python -m gitdns.cli --help``."""
    commands = {"python -m gitdns.cli --help": [sys.executable, "-m", "gitdns.cli", "--help"]}
    script = shutil.which("gitdns")
    if script:
        commands = {"gitdns --help": [script, "--help"], **commands}
    out: dict[str, float] = {}
    for label, cmd in commands.items():
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        out[label] = statistics.median(times)
    return out


def imported(code: str) -> list[tuple[float, str]]:
    """``(cumulative seconds, module)`` for every module ``python -c code`` imports."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          check=True, capture_output=True, text=True)
    modules: list[tuple[float, str]] = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            modules.append((int(parts[1]) / 1e6, parts[2].strip()))
    return modules


def help_imports() -> tuple[list[str], list[tuple[float, str]], list[str]]:
    """Heavy top-level packages `gitdns --help` imports, its slowest imports, and the modules
    it adds to a bare interpreter's start-up (site .pth files import some on their own)."""
    modules = imported("import sys; sys.argv = ['gitdns', '--help']; from gitdns.cli import main; main()")
    bare = {m for _, m in imported("pass")}
    heavy = sorted({m.split(".")[0] for _, m in modules if m.split(".")[0] in HEAVY})
    added = sorted(m for _, m in modules if m not in bare)
    return heavy, sorted(modules, reverse=True)[:5], added


@dataclass(frozen=True, slots=True)
class Target:
    label: str
    limit: float
    unit: str
    value: float | None

    def row(self) -> str:
        if self.value is None:
            return f"| {self.label} | not measured | < {self.limit:g} {self.unit} | - |"
        verdict = "PASS" if self.value < self.limit else "MISS"
        return f"| {self.label} | {self.value:.3f} {self.unit} | < {self.limit:g} {self.unit} | {verdict} |"


def _get(figures: dict[int, dict[str, Figure]], size: int, phase: str) -> Figure | None:
    return figures.get(size, {}).get(phase)


def targets(figures: dict[int, dict[str, Figure]], help_wall: float) -> list[Target]:
    def secs(size: int, *phases: str) -> float | None:
        found = [_get(figures, size, p) for p in phases]
        return None if any(f is None for f in found) else sum(f.seconds for f in found if f)

    rss = [f.maxrss_mib for p in STORE_PHASES if (f := _get(figures, 10_000, p))]
    return [
        Target("plan, 10,000-record zone, 10 owners", 1.0, "s", secs(10_000, "plan")),
        Target("plan, 100,000-record zone, 10 owners", 10.0, "s", secs(100_000, "plan")),
        Target("read + decode local store, 10,000 records", 0.3, "s", secs(10_000, "read", "decode")),
        Target("peak RSS, 10,000 records", 80.0, "MiB", max(rss) if rss else None),
        Target("validate repo of 10,000 hosts", 3.0, "s", secs(10_000, "validate")),
        Target("gitdns --help", 0.3, "s", help_wall),
    ]


@dataclass(frozen=True, slots=True)
class Ratio:
    label: str  # validate/parse-floor, ...
    size: int
    runs: tuple[float, ...]  # each run's own ratio
    limit: float
    detail: str

    @property
    def value(self) -> float:
        return statistics.median(self.runs)

    @property
    def verdict(self) -> str:
        return "PASS" if self.value <= self.limit else "MISS"

    def line(self) -> str:
        each = ", ".join(f"{r:.2f}x" for r in self.runs)
        return (f"{self.label} {self.value:.3f}x (target <= {self.limit:g}x) {self.verdict}: {self.detail}; "
                f"median of the runs' own ratios ({each})")


RATIO_SIZES = {"validate": 10_000, "plan": 100_000}  # the size each ratio is printed for


def nearest(sizes: Sequence[int], want: int) -> int:
    return min(sizes, key=lambda size: (abs(size - want), -size))


def ratios(figures: dict[int, dict[str, Figure]], records: dict[int, int]) -> list[Ratio]:
    out: list[Ratio] = []
    if not figures:
        return out
    size = nearest(list(figures), RATIO_SIZES["validate"])
    validate = figures[size]["validate"]
    floor = validate.floor
    out.append(Ratio("validate/parse-floor", size, run_ratios(validate, "seconds", "parse_floor"), 3.0,
                     f"{size:,} hosts, {floor['files']} files ({floor['bytes']:,} characters, "
                     f"{floor['documents']:,} documents): validate {validate.seconds:.3f} s, "
                     f"yamlparse.parse alone {floor['parse_floor']:.3f} s (medians)"))
    out.append(Ratio("validate-one-file/cold", size, run_ratios(validate, "check_warm", "check_cold"), 0.1,
                     f"{size:,} hosts, {floor['touched']} ({floor['touched_bytes']:,} characters) changed: "
                     f"check with the cache warm {floor['check_warm']:.3f} s, cold {floor['check_cold']:.3f} s "
                     f"(medians; problems {floor['problems_cold']} / {floor['problems_warm']}, warm "
                     f"{'the same as' if floor.get('warm_same') else 'NOT the same as'} a cold check after)"))
    size = nearest(list(figures), RATIO_SIZES["plan"])
    planned = figures[size]["plan"]
    out.append(Ratio("plan/decode-floor", size, run_ratios(planned, "seconds", "decode_floor"), 2.0,
                     f"{records[size]:,}-record zone: plan {planned.seconds:.3f} s, "
                     f"decode_store alone {planned.floor['decode_floor']:.3f} s (medians)"))
    return out


def print_tables(figures: dict[int, dict[str, Figure]], records: dict[int, int], runs: int) -> None:
    print(f"\nmedian of {runs} runs, each in a fresh process; times in seconds")
    print("| N | zone records | validate | read | decode | plan | plan-drift | apply | peak RSS (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, row in figures.items():
        rss = max(row[p].maxrss_mib for p in STORE_PHASES)
        cells = " | ".join(f"{row[p].seconds:.3f}" for p in PHASES)
        print(f"| {size:,} | {records[size]:,} | {cells} | {rss:.1f} |")
    print("\npeak RSS per phase child (MiB)")
    print("| N | " + " | ".join(PHASES) + " |")
    print("|---:|" + "---:|" * len(PHASES))
    for size, row in figures.items():
        print(f"| {size:,} | " + " | ".join(f"{row[p].maxrss_mib:.1f}" for p in PHASES) + " |")


def bench(sizes: Sequence[int], runs: int, root: Path) -> tuple[dict[int, dict[str, Figure]], dict[int, int]]:
    figures: dict[int, dict[str, Figure]] = {}
    records: dict[int, int] = {}
    for size in sizes:
        fixture, took = make_fixture(size, root)
        meta = json.loads((fixture / "zone" / "meta.json").read_text())
        records[size] = meta["records"]
        print(f"N={size:,}: generated repo in {took['repo']:.1f} s, zone of {meta['records']:,} records "
              f"(intent {meta['intent']:,}) in {took['zone']:.1f} s", flush=True)
        figures[size] = {phase: measure(phase, fixture, runs) for phase in PHASES}
        for phase, fig in figures[size].items():
            print(f"  {phase:10} {fig.seconds:8.3f} s  ru_maxrss {fig.maxrss_mib:6.1f} MiB  "
                  f"VmHWM {fig.hwm_mib:6.1f} MiB  {fig.info}", flush=True)
        unread = figures[size]["validate"].floor["unread"]
        if figures[size]["validate"].info["problems"]:
            print(f"  note: the {size:,}-host repository does not validate clean ({unread} file(s) over the read "
                  "limits, gitdns.core.limits, are not read): its validate figure is not a whole one", flush=True)
    return figures, records


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated N (default: 1000,10000,100000; --quick: 1000)")
    parser.add_argument("--runs", type=int, help="runs per phase, median printed (default 3; --quick: 1)")
    parser.add_argument("--help-runs", type=int, help="runs of gitdns --help (default 10; --quick: 2)")
    parser.add_argument("--quick", action="store_true", help="N=1,000 and one run of each phase (seconds)")
    parser.add_argument("--json", type=Path, help="write every figure, ratio and target there as JSON")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out", help="where fixtures go (gitignored)")
    parser.add_argument("--keep", action="store_true", help="keep the generated fixtures")
    parser.add_argument("--profile", choices=PHASES, help="cProfile this phase at each size, then exit")
    parser.add_argument("--child", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--fixture", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = ("1000", 1, 2) if args.quick else ("1000,10000,100000", 3, 10)
    args.sizes = args.sizes or defaults[0]
    args.runs = args.runs or defaults[1]
    args.help_runs = args.help_runs or defaults[2]
    return args


def profile(phase: str, sizes: Sequence[int], root: Path) -> None:
    for size in sizes:
        fixture, _ = make_fixture(size, root)
        print(f"\n== cProfile: {phase}, N={size:,}", flush=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", phase, "--fixture", str(fixture),
               "--cprofile"]
        subprocess.run(cmd, check=True)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        child(args.child, args.fixture, args.cprofile)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="core-", dir=args.out))
    try:
        if args.profile:
            profile(args.profile, sizes, root)
            return
        print(f"python {sys.version.split()[0]}, {_cpus()} CPU(s); fixtures in {root}", flush=True)
        figures, records = bench(sizes, args.runs, root)
        print_tables(figures, records, args.runs)
        walls = help_times(args.help_runs)
        heavy, slowest, added = help_imports()
        print(f"\n--help wall time, median of {args.help_runs}:")
        for label, wall in walls.items():
            print(f"  {label:30} {wall:.3f} s")
        print(f"  heavy modules imported ({', '.join(HEAVY)}): {', '.join(heavy) or 'none'}")
        print(f"  modules beyond a bare interpreter ({len(added)}): {', '.join(added)}")
        print("  slowest imports (cumulative): " + ", ".join(f"{m} {s * 1000:.0f} ms" for s, m in slowest))
        print("\n| target | measured | limit | verdict |\n|---|---:|---:|---|")
        rows = targets(figures, next(iter(walls.values())))
        for target in rows:
            print(target.row())
        against = ratios(figures, records)
        print("\nagainst the floors (same child process and run):")
        for ratio in against:
            print(ratio.line())
        if args.json:
            write_json(args.json, figures, records, walls, heavy, rows, against)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def write_json(path: Path, figures: dict[int, dict[str, Figure]], records: dict[int, int], walls: dict[str, float],
               heavy: list[str], rows: list[Target], against: list[Ratio]) -> None:
    doc = {
        "sizes": {str(size): {"zone_records": records[size],
                              "phases": {phase: {"seconds": fig.seconds, "maxrss_mib": fig.maxrss_mib,
                                                 "hwm_mib": fig.hwm_mib, "info": fig.info, "floor": fig.floor}
                                         for phase, fig in row.items()}}
                  for size, row in figures.items()},
        "help": {"wall_seconds": walls, "heavy_modules": heavy},
        "targets": [{"label": t.label, "value": t.value, "limit": t.limit, "unit": t.unit,
                     "verdict": None if t.value is None else "PASS" if t.value < t.limit else "MISS"} for t in rows],
        "ratios": [{"label": r.label, "size": r.size, "value": r.value, "runs": list(r.runs), "limit": r.limit,
                    "verdict": r.verdict} for r in against],
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)


if __name__ == "__main__":
    main()
