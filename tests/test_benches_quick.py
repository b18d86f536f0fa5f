"""Quick runs of the benches no other test runs, so that a change that breaks a bench fails CI.

Each case runs ``bench/<name>.py --quick`` in a subprocess (small sizes, one run, loopback only;
temporary files under the test's own directory through TMPDIR) and checks that it exits 0 and
prints the rows it should, with numbers in them.  No check compares a time with a target: the
figures and their PASS/MISS are the bench's to print (docs/benchmarks.md), and a quick run on a
shared machine says nothing about them.  Counts that must be exact whatever the machine (values
present, lost writes, exit codes of `gitdns validate`) are checked.

The benches run elsewhere: bench_git_hosts, bench_history, bench_import and
bench_route53_octodns (tests/e2e/test_bench_*.py), bench_memory (tests/test_deploy_sizing.py),
crash (tests/e2e/test_crash.py), fuzz (tests/fuzz/test_bench_fuzz_quick.py), soak
(tests/e2e/test_soak_quick.py), fleet (tests/agent/test_fleet_sim.py, in process).

A case that needs a server (named, dnsmasq) skips without it, except under ``CI=true`` where it
fails (tests/e2e/dns_servers.py, `require`).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e import dns_servers

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
NUMBER = r"(\d+(?:\.\d+)?)"

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Run:
    stdout: str
    tmp: Path

    def line(self, pattern: str) -> re.Match[str]:
        """The first line matching ``pattern`` (a regular expression, searched in each line)."""
        for line in self.stdout.splitlines():
            found = re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"no line matches {pattern!r} in:\n{self.stdout[-4000:]}")

    def lines(self, pattern: str) -> list[re.Match[str]]:
        return [m for line in self.stdout.splitlines() if (m := re.search(pattern, line))]


@dataclass(frozen=True)
class Case:
    check: Callable[[Run], None]
    tools: tuple[str, ...] = ()  # server binaries it starts
    extra: tuple[str, ...] = ()  # arguments after --quick; {tmp} is the test's directory


def finite(*values: str | float) -> None:
    for value in values:
        assert math.isfinite(float(value)) and float(value) >= 0, values


def check_core(run: Run) -> None:
    doc = json.loads((run.tmp / "core.json").read_text())
    assert list(doc["sizes"]) == ["1000"], doc["sizes"].keys()
    phases = doc["sizes"]["1000"]["phases"]
    assert phases["validate"]["info"] == {"problems": 0}
    assert phases["plan"]["info"]["changes"] == 0 and phases["plan-drift"]["info"]["changes"] > 0
    assert phases["apply"]["info"]["applied"] == doc["sizes"]["1000"]["zone_records"]
    floor = phases["validate"]["floor"]
    assert floor["problems_cold"] == floor["problems_warm"] == 0 and floor["touched"] == "records/static-000.yaml"
    assert [r["label"] for r in doc["ratios"]] == ["validate/parse-floor", "validate-one-file/cold",
                                                   "plan/decode-floor"]
    for ratio in doc["ratios"]:
        assert ratio["size"] == 1000 and ratio["value"] > 0 and math.isfinite(ratio["value"]), ratio
        assert ratio["verdict"] in ("PASS", "MISS"), ratio
    for label, limit in (("validate/parse-floor", "3"), ("validate-one-file/cold", "0.1"),
                         ("plan/decode-floor", "2")):
        found = run.line(rf"^{re.escape(label)} {NUMBER}x \(target <= {re.escape(limit)}x\) (PASS|MISS): ")
        finite(found.group(1))
    run.line(r"^\| 1,000 \| 1,\d{3} \| ")


def check_agent(run: Run) -> None:
    for mode in ("webhook", "poll"):
        run.line(rf"^\[{mode}\] merge to applied .*: applied 2/2  p50 \d+ ms")
    rss = run.line(rf"^\[rss\] idle agent .*: VmRSS {NUMBER} MiB  VmHWM {NUMBER} MiB")
    finite(rss.group(1), rss.group(2))
    run.line(r"^\[tick\] first run: .* ready True")
    run.line(r"^\[tick\] 5 idle ticks: provider calls \d+: active-groups watch \d+ .*, others \d+ ")
    run.line(r"^  tick time p50 \d+ ms  p99 \d+ ms")
    run.line(r"^\[modules\] `gitdns agent --once` \(local provider\), exit 0: \d+ modules")


def check_delegation(run: Run) -> None:
    finite(run.line(rf"^  \[wake\] round 1: {NUMBER} s \(bound {NUMBER} s").group(1))
    run.line(r"^\[wake\] 1/1 rounds: median ")
    assert json.loads(run.stdout.strip().splitlines()[-1])["converged"] is True


def check_failover(run: Run) -> None:
    rep = run.line(rf"^  rep 1: withdrawn after {NUMBER} s, back after {NUMBER} s")
    finite(rep.group(1), rep.group(2))
    run.line(r"^  node down -> IP gone : median ")
    run.line(r"^  node back -> IP back : median ")
    finite(run.line(rf"^  VmRSS {NUMBER} MiB, VmHWM {NUMBER} MiB").group(2))
    probes = run.line(r"^  probes completed (\d+), skipped slots \d+, .* nodes 200, published \d+")
    assert int(probes.group(1)) > 0, run.stdout
    run.line(r"^  kubernetes client loaded: False")


def check_failover_switch(run: Run) -> None:
    switch = run.line(rf"^  switch 1: site-a -> site-b \(serial 2\): exact {NUMBER} s")
    finite(switch.group(1))
    run.line(r"^\[webhook\] push returned -> BIND answers exactly the new site: switched 1/1 ")


def check_hostile_yaml(run: Run) -> None:
    rows = {m.group(1).strip(): (int(m.group(2)), m.group(3), m.group(4))
            for m in run.lines(rf"^(\S.{{0,27}}?)\s+(\d+)\s+{NUMBER}\s+{NUMBER}$")}
    assert list(rows) == ["example-repo", "alias bomb, 380 bytes", "alias bomb, 480 bytes", "40 MB file",
                          "1 MiB, worst shape"], run.stdout
    assert rows["example-repo"][0] == 0, rows  # validates clean; every hostile case is refused
    assert all(code != 0 for name, (code, _, _) in rows.items() if name != "example-repo"), rows
    for _, wall, peak in rows.values():
        finite(wall, peak)


def check_kube_delegation(run: Run) -> None:
    run.line(r"^remotes=2 hosts per remote=10 records=20$")
    for label in ("first pass", "steady pass", "one record changed"):
        finite(run.line(rf"^{label}\s+{NUMBER}(\s+\d+){{6}}$").group(1))


def check_local_read(run: Run) -> None:
    run.line(r"^records:\s+1000$")
    finite(run.line(rf"^read \(read\+decode\+RecordSet\), median of 3: {NUMBER} ms").group(1))
    finite(run.line(rf"^bare json.loads,\s+median of 3: {NUMBER} ms").group(1))


def check_probes(run: Run) -> None:
    run.line(r"^protocol http  targets 200  interval 1 s  listeners 4 addresses x 2 ports  windows 2$")
    windows = json.loads(run.line(r"^probes completed per interval: (\[[\d, ]+\])").group(1))
    assert len(windows) == 2 and sum(windows) > 0, windows
    finite(run.line(rf"probes per CPU-second: {NUMBER}").group(1))
    run.line(r"^states: \{.*'healthy': \d+")
    finite(run.line(rf"^probes/bare-prober {NUMBER}x \(target <= 1\.2x\) (PASS|MISS)").group(1))


def check_rfc2136_shared(run: Run) -> None:
    run.line(r"^3 agents at once: values present 3/3;")
    run.line(r"^join/leave round 1 .*: values present 3/3;")
    run.line(r"^sole-owner race 1 .*: values present 1/1;")
    reports = run.lines(r"values present \d+/\d+; .* lost writes (\d+); leavers' values left (\d+); errors (\d+)")
    assert len(reports) == 3 and all(m.groups() == ("0", "0", "0") for m in reports), run.stdout


def check_shared_host(run: Run) -> None:
    run.line(r"^values present in the store: 3/3 ")
    finite(run.line(rf"^convergence \(all 3 values seen\) {NUMBER} s after release").group(1))


def check_status_push(run: Run) -> None:
    run.line(r"^round 0 first push \(orphan\): landed 4/4$")
    run.line(r"^round 1 changed content \(fast-forward\): landed 4/4$")
    run.line(r"^round 2 unchanged \(no commit\): returned None 4/4$")
    assert len(run.lines(r"^  landing time: p50 \d+ ms  p99 \d+ ms")) == 3, run.stdout
    run.line(r"^remote branches: 4; tips match what each process reported: True$")


CASES = {
    "bench_core": Case(check_core, extra=("--out", "{tmp}", "--json", "{tmp}/core.json")),
    "bench_agent": Case(check_agent),
    "bench_delegation": Case(check_delegation, tools=("named",)),
    "bench_failover": Case(check_failover, tools=("dnsmasq",)),
    "bench_failover_switch": Case(check_failover_switch, tools=("named",)),
    "bench_hostile_yaml": Case(check_hostile_yaml),
    "bench_kube_delegation": Case(check_kube_delegation),
    "bench_local_read": Case(check_local_read),
    "bench_probes": Case(check_probes),
    "bench_rfc2136_shared": Case(check_rfc2136_shared, tools=("named",)),
    "bench_shared_host": Case(check_shared_host),
    "bench_status_push": Case(check_status_push),
}


def need(tool: str) -> None:
    if shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin"):
        return
    hint = dns_servers.INSTALL_HINTS.get(tool, "apt-get install -y --no-install-recommends dnsmasq-base")
    dns_servers.require(dns_servers.ToolMissing(f"{tool} not found: {hint}"))


LIBRARIES = {"generate", "memory_kit", "memory_orch", "route53_proxy", "soak_model", "soak_peers", "soak_zone"}
ELSEWHERE = {  # bench -> the test that runs it
    "bench_git_hosts": "tests/e2e/test_bench_git_hosts.py",
    "bench_history": "tests/e2e/test_bench_history.py",
    "bench_import": "tests/e2e/test_bench_import_quick.py",
    "bench_route53_octodns": "tests/e2e/test_bench_route53_quick.py",
    "moto_profiled": "tests/e2e/test_bench_route53_quick.py",
    "bench_memory": "tests/test_deploy_sizing.py",
    "crash": "tests/e2e/test_crash.py",
    "fuzz": "tests/fuzz/test_bench_fuzz_quick.py",
    "soak": "tests/e2e/test_soak_quick.py",
    "fleet": "tests/agent/test_fleet_sim.py",
}


def test_every_bench_is_run_quick_somewhere() -> None:
    """A bench added to bench/ gets a case here or a test of its own (libraries aside)."""
    scripts = {path.stem for path in BENCH.glob("*.py")}
    benches = scripts - LIBRARIES - set(ELSEWHERE)
    assert benches == set(CASES), sorted(benches ^ set(CASES))
    for name, test in ELSEWHERE.items():
        text = (ROOT / test).read_text()
        assert f'"{name}.py"' in text or f"import {name}" in text, (name, test)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bench_quick_runs_whole_and_prints_its_rows(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    for tool in case.tools:
        need(tool)
    argv = [sys.executable, str(BENCH / f"{name}.py"), "--quick", *(a.format(tmp=tmp_path) for a in case.extra)]
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    case.check(Run(done.stdout, tmp_path))
