"""Memory requests and limits in deploy/ against the peaks bench/bench_memory.py measured (issue 30).

Each gitdns container that deploy/ ships carries, above its ``resources:``, comments
``# measured peak N MiB (SCENARIO; docs/benchmarks.md, Memory)`` (what its limit covers) and
``# measured idle N MiB (SCENARIO; docs/benchmarks.md, Memory)`` (what its request covers).
SCENARIO is a row of the table in docs/benchmarks.md's Memory section; a peak is that row's
larger of VmHWM and the sampled process tree, an idle its larger of the resident memory once
ready and at the end, each rounded up to a whole MiB.  The tests fail when a limit is below a
peak it cites or leaves less than the stated headroom, when a request is below the idle memory
it cites, and when a cited figure is not the table's.

The last test runs ``bench/bench_memory.py --quick`` (an agent on Route53 with the Kubernetes
Lease, an orchestrator of 1,000 nodes) and checks that what it measures fits the shipped
limits.  Memory, unlike time, does not depend on how busy the machine is.  Without moto it
skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
BENCH = ROOT / "bench" / "bench_memory.py"
AGENT = "deploy/base/deployment.yaml"
ORCHESTRATOR = "deploy/orchestrator/base/deployment.yaml"
SIDECAR = "deploy/orchestrator/components/sidecar/coredns-sidecar-patch.yaml"
# manifest -> (the gitdns container in it, the kind bench_memory.py reports for it)
SIZED = {AGENT: ("gitdns", "agent"), ORCHESTRATOR: ("orchestrator", "orchestrator"),
         SIDECAR: ("gitdns-orchestrator", "orchestrator")}
HEADROOM = 1.5  # a limit is at least this much above the peak it cites (docs/benchmarks.md, Memory)
CITATION = re.compile(r"#\s*measured (peak|idle) (\d+) MiB \(([a-z0-9-]+); docs/benchmarks\.md, Memory\)")


def mib(quantity: str) -> float:
    match = re.fullmatch(r"(\d+)(Mi|Gi)", quantity)
    assert match, f"memory quantity {quantity!r}: write it in Mi or Gi"
    return float(match.group(1)) * (1024 if match.group(2) == "Gi" else 1)


def memory_table(text: str) -> dict[str, dict[str, float]]:
    """The scenario rows of the Memory section's table: name -> peak, tree, ready, idle (MiB)."""
    section = re.search(r"^## Memory\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, "docs/benchmarks.md has no '## Memory' section"
    body = section.group(1)
    rows: dict[str, dict[str, float]] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and re.fullmatch(r"(agent|orch)-[a-z0-9-]+", cells[0]):
            peak, tree, ready, idle = (float(c) for c in cells[2:6])
            rows[cells[0]] = {"peak": peak, "tree": tree, "ready": ready, "idle": idle}
    return rows


def figure(row: dict[str, float], what: str) -> int:
    """The figure a manifest cites from a table row: its ``peak`` or its ``idle``."""
    pair = ("peak", "tree") if what == "peak" else ("ready", "idle")
    return math.ceil(max(row[pair[0]], row[pair[1]]))


def container(path: str) -> dict[str, Any]:
    name = SIZED[path][0]
    docs = [d for d in YAML(typ="safe").load_all((ROOT / path).read_text()) if d]
    found = [c for d in docs for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    assert len(found) == 1, f"{path}: one container {name!r}"
    return found[0]


def citations(text: str) -> list[tuple[str, int, str]]:
    """(peak|idle, MiB, scenario) of every sizing comment in ``text``."""
    return [(what, int(n), scenario) for what, n, scenario in CITATION.findall(text)]


def sizing_problems(text: str, resources: dict[str, Any], rows: dict[str, dict[str, float]]) -> list[str]:
    cited = citations(text)
    kinds = {what for what, _, _ in cited}
    problems = [f"no '# measured {what} N MiB (SCENARIO; docs/benchmarks.md, Memory)' comment"
                for what in ("peak", "idle") if what not in kinds]
    limit, request = mib(resources["limits"]["memory"]), mib(resources["requests"]["memory"])
    for what, mebibytes, scenario in cited:
        if scenario not in rows:
            problems.append(f"cites {scenario}, which docs/benchmarks.md's Memory table lacks")
            continue
        table = figure(rows[scenario], what)
        if mebibytes != table:
            problems.append(f"cites {what} {mebibytes} MiB for {scenario}; the table says {table}")
        if what == "peak" and limit < HEADROOM * mebibytes:
            problems.append(f"limit {limit:g} MiB is below {HEADROOM}x the measured peak {mebibytes} MiB ({scenario})")
        if what == "idle" and request < mebibytes:
            problems.append(f"request {request:g} MiB is below the measured idle {mebibytes} MiB ({scenario})")
    if request >= limit:
        problems.append(f"request {request:g} MiB is not below the limit {limit:g} MiB")
    return problems


def test_the_docs_table_is_parsed() -> None:
    rows = memory_table(DOCS.read_text())
    assert {"agent-cloud", "agent-10k", "agent-cap", "agent-soak", "orch-1k", "orch-10k", "orch-10k-out"} <= set(rows)
    text = "## Memory\n\n| agent-x | w | 1.0 | 2.5 | 1 | 1.2 | 3 |\n\n## Next\n| orch-y | w | 9 | 9 | 9 | 9 | 1 |\n"
    assert memory_table(text) == {"agent-x": {"peak": 1.0, "tree": 2.5, "ready": 1.0, "idle": 1.2}}
    assert figure(memory_table(text)["agent-x"], "peak") == 3 and figure(memory_table(text)["agent-x"], "idle") == 2


@pytest.mark.parametrize("path", sorted(SIZED))
def test_each_limit_covers_the_measured_peak_it_cites(path: str) -> None:
    problems = sizing_problems((ROOT / path).read_text(), container(path)["resources"], memory_table(DOCS.read_text()))
    assert not problems, f"{path}: " + "; ".join(problems)


def test_a_limit_below_its_cited_peak_is_caught() -> None:
    """The check above, on manifests that get it wrong."""
    rows = {"agent-x": {"peak": 200.2, "tree": 201.0, "ready": 150.0, "idle": 150.5}}
    peak = "# measured peak 201 MiB (agent-x; docs/benchmarks.md, Memory)\n"
    idle = "# measured idle 151 MiB (agent-x; docs/benchmarks.md, Memory)\n"
    right = {"requests": {"memory": "160Mi"}, "limits": {"memory": "320Mi"}}
    assert sizing_problems(peak + idle, right, rows) == []
    low = {"requests": {"memory": "160Mi"}, "limits": {"memory": "192Mi"}}
    assert sizing_problems(peak + idle, low, rows) == [
        "limit 192 MiB is below 1.5x the measured peak 201 MiB (agent-x)"]
    assert sizing_problems(peak.replace("201", "180") + idle, right, rows) == [
        "cites peak 180 MiB for agent-x; the table says 201"]
    assert sizing_problems(idle, right, rows) == [
        "no '# measured peak N MiB (SCENARIO; docs/benchmarks.md, Memory)' comment"]
    assert "request 128 MiB is below the measured idle 151 MiB (agent-x)" in sizing_problems(
        peak + idle, {"requests": {"memory": "128Mi"}, "limits": {"memory": "320Mi"}}, rows)
    assert sizing_problems(peak.replace("agent-x", "agent-y") + idle, right, rows) == [
        "cites agent-y, which docs/benchmarks.md's Memory table lacks"]


def _moto_or_skip() -> None:
    if all(importlib.util.find_spec(m) for m in ("moto", "flask", "flask_cors", "boto3", "certifi")):
        return
    message = "moto is not installed: pip install moto flask flask-cors boto3"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.mark.slow
def test_the_quick_memory_bench_fits_the_shipped_limits(tmp_path: Path) -> None:
    _moto_or_skip()
    out = tmp_path / "memory.json"
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    results = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"agent-cloud", "orch-1k"}, output[-3000:]
    for name, r in results.items():
        assert r["ok"] and not r["error"], (name, output[-3000:])
        assert 20 < r["peak"] < 4096 and r["tree"] >= r["idle"] > 0, r
        assert re.search(rf"^\[{name}\] .*: peak \(VmHWM\) {r['peak']:.1f} MiB", done.stdout, re.M), output[-3000:]
        assert re.search(rf"^\| {name} \| .* \| {r['peak']:.1f} \|", done.stdout, re.M), output[-3000:]
    agent, orch = results["agent-cloud"], results["orch-1k"]
    assert agent["writes"] == 2 and agent["pushes"] == 3  # the initial sync and two writes, each pushed
    assert orch["cycles"] == 3  # delivered at start, after every node hung, after a tenant commit
    for path, (_, kind) in SIZED.items():
        limit = mib(container(path)["resources"]["limits"]["memory"])
        r = agent if kind == "agent" else orch
        assert max(r["peak"], r["tree"]) < limit, f"{r['name']} peaked at {r['peak']:.1f} MiB, over {path}'s limit"
