"""Crash safety (issue 30, item 3): kill -9 of real gitdns processes at chosen and random moments.

* The agent's state files, killed at every step of their writes in turn: each file is whole
  (or absent), and the instance identity a restart reads is the one it keeps.
* bench/crash.py --quick, the agent targets and the delivery side by side: 10 kills in all,
  spread over the `local` store and its BIND-served views, an RFC 2136 zone on a real BIND,
  the status push, and the orchestrator's hosts files served by a real dnsmasq, each target
  killed inside one of its writes at least once; the run must report those kills and no torn
  file, lost value, duplicate status commit, stray temporary file or other violation.  It
  never checks a time (bench/crash.py --trials 100 is the full run, docs/benchmarks.md).

Without named or dnsmasq the bench test skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gitdns.agent.applied import save_applied
from gitdns.agent.identity import instance_identity, save_identity
from gitdns.core.model import Cluster
from tests.e2e.crash_kit import Moment, parse_events, run_clean, run_killed, state_problems
from tests.e2e.dns_servers import ToolMissing, find_tool
from tests.e2e.orchestrator_kit import dnsmasq_path

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "bench" / "crash.py"
SHA = "0123456789abcdef0123456789abcdef01234567"

pytestmark = pytest.mark.slow

# the agent's three state writes, in the order a first start makes them
STATE_WRITES = """
import sys
from pathlib import Path
from gitdns.agent.applied import save_applied
from gitdns.agent.identity import instance_identity, save_identity
from gitdns.core.model import Cluster
root = Path(sys.argv[1])
print(instance_identity(root))
save_identity(root, Cluster(name=sys.argv[3], id="3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"))
save_applied(root, sys.argv[2])
"""


def writes(root: Path, sha: str, name: str) -> str:
    """The same three writes in this process (a restart's); the identity."""
    ident = instance_identity(root)
    save_identity(root, Cluster(name=name, id="3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"))
    save_applied(root, sha)
    return ident


@pytest.mark.parametrize("start", ["first", "later"])
def test_state_files_are_whole_after_a_kill_at_every_step(tmp_path: Path, start: str) -> None:
    """An agent's first start (empty state directory) or a later one (the files there from
    the last), killed at every step of its three state writes in turn: each file is whole or
    absent, a later start keeps its identity, and the writes made again leave every file whole
    and no temporary file behind."""
    argv = ["-c", STATE_WRITES, "", SHA[::-1], "west"]
    count = tmp_path / "count"
    if start == "later":
        writes(count, SHA, "eu-west-1")
    done, _ = run_clean([*argv[:2], str(count), *argv[3:]], tmp_path / "count.log")
    assert done.returncode == 0, done.stderr
    steps = parse_events(tmp_path / "count.log", None, "state").steps
    assert steps >= 10, f"only {steps} steps in the three writes"
    for at in range(1, steps + 1):
        root = tmp_path / f"at-{at}"
        before = writes(root, SHA, "eu-west-1") if start == "later" else None
        kill = run_killed([*argv[:2], str(root), *argv[3:]], tmp_path / "kill.log", "state", Moment("step", at=at))
        assert kill.killed, f"step {at}: not killed ({kill.output})"
        assert state_problems(root) == [], f"killed at step {at} ({kill.last_step})"
        if before is not None:
            assert (root / "instance-id").read_text() == f"{before}\n", f"step {at}: the identity changed"
            assert json.loads((root / "cluster.json").read_text())["name"] in ("eu-west-1", "west")
        ident = writes(root, SHA[::-1], "west")  # the restart
        assert ident == instance_identity(root) and (before is None or ident == before)
        assert json.loads((root / "applied.json").read_text()) == {"sha": SHA[::-1]}
        assert json.loads((root / "cluster.json").read_text())["name"] == "west"
        assert not [p.name for p in root.iterdir() if ".tmp" in p.name], f"step {at}: temporary files left"


def require_servers() -> None:
    try:
        find_tool("named")
        if dnsmasq_path() is None:
            raise ToolMissing("dnsmasq not found: apt-get install -y --no-install-recommends dnsmasq-base")
    except ToolMissing as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


QUICK = {"local": 3, "bind": 2, "status": 3, "delivery": 2}  # bench/crash.py's --quick: 10 kills in all
ROW = re.compile(r"^\| (local|bind|status|delivery) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|",
                 re.M)


def test_crash_bench_quick_kills_every_target_and_finds_nothing() -> None:
    require_servers()
    runs = [subprocess.Popen([sys.executable, str(BENCH), "--quick", "--targets", targets], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for targets in ("local,bind,status", "delivery")]
    outputs = [run.communicate(timeout=280)[0] for run in runs]
    output = "\n".join(outputs)
    assert [run.returncode for run in runs] == [0, 0], output[-6000:]
    rows = {m.group(1): [int(x) for x in m.groups()[1:]] for m in ROW.finditer(output)}
    assert set(rows) == {"local", "bind", "status", "delivery"}, output[-6000:]
    for target, (kills, inside, *violations) in rows.items():
        assert kills == QUICK[target], f"{target}: {kills} kills\n{output[-6000:]}"
        assert inside >= 1, f"{target}: no kill landed inside a write\n{output[-6000:]}"
        assert violations == [0, 0, 0, 0, 0], f"{target}: {violations}\n{output[-6000:]}"
    assert all("violations: 0" in out for out in outputs), output[-6000:]
