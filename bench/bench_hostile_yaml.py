"""Time and peak RSS of `gitdns validate` on hostile desired state, against a normal repository.

    python bench/bench_hostile_yaml.py [--runs R]
    python bench/bench_hostile_yaml.py --quick    # one run of each case, the worst shape at 1 MiB (for CI)

Cases, each a desired repository in a temporary directory, validated by ``python3 -m
gitdns.cli validate`` as a child process (R runs; the median wall time, the largest peak RSS):

- ``example-repo``: the repository's example, as it is (the baseline);
- ``alias bomb, 380 bytes`` and ``alias bomb, 480 bytes`` (tests/core/hostile_kit.py): 8^8 and
  8^10 leaves if expanded; refused at the first alias;
- ``40 MB file``: one file of 40,000,000 bytes next to the example; never read (over the
  per-file cap);
- ``4 MiB, worst shape``: a file of exactly the per-file cap made of the shape that costs the
  most memory per byte (a flow list of empty mappings), next to the example: what any file the
  caps let through can cost.

The peak RSS is ``ru_maxrss`` of ``wait4`` on the child, started by a small launcher (so the
size of this process never counts).  Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitdns.core.limits import MAX_FILE_BYTES
from tests.core.hostile_kit import alias_bomb, big_file

ROOT = Path(__file__).resolve().parent.parent
_LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "gitdns.cli", "validate", sys.argv[1]], os.environ)
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, time.perf_counter() - start)
"""


def example(root: Path) -> Path:
    tree = root / "repo"
    shutil.copytree(ROOT / "example-repo", tree, ignore=shutil.ignore_patterns(".gitdns"))
    return tree


def worst_shape(path: Path, size: int) -> None:
    body = "[" + ",".join(["{}"] * ((size - 3) // 3)) + "]\n"
    path.write_text(body + " " * (size - len(body)))


def cases(worst: int = MAX_FILE_BYTES) -> dict[str, Callable[[Path], None]]:
    """The cases; ``worst``: the size of the worst-shape file (the per-file cap in a full run)."""
    return {
        "example-repo": lambda tree: None,
        "alias bomb, 380 bytes": lambda tree: (tree / "zones" / "bomb.yaml").write_text(alias_bomb(380)),
        "alias bomb, 480 bytes": lambda tree: (tree / "zones" / "bomb.yaml").write_text(alias_bomb(480)),
        "40 MB file": lambda tree: big_file(tree / "records" / "big.yaml", 40_000_000),
        f"{worst / (1 << 20):g} MiB, worst shape": lambda tree: worst_shape(tree / "records" / "cap.yaml", worst),
    }


def validate(tree: Path) -> tuple[int, float, float]:
    """(exit code, peak RSS in MiB, wall seconds) of one ``gitdns validate``."""
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(tree)], capture_output=True, text=True,
                          timeout=900, check=True, cwd=ROOT)
    code, maxrss, wall = done.stdout.split()[-3:]
    return int(code), int(maxrss) / 1024, float(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run of each case, the worst shape at 1 MiB")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    print(f"{'case':28} {'exit':>4} {'wall s (median)':>16} {'peak RSS MiB (max)':>19}")
    for name, make in cases(min(MAX_FILE_BYTES, 1 << 20) if args.quick else MAX_FILE_BYTES).items():
        with tempfile.TemporaryDirectory(prefix="gitdns-hostile-") as tmp:
            tree = example(Path(tmp))
            make(tree)
            runs = [validate(tree) for _ in range(args.runs)]
        codes = sorted({code for code, _, _ in runs})
        wall = statistics.median(w for _, _, w in runs)
        peak = max(p for _, p, _ in runs)
        print(f"{name:28} {','.join(map(str, codes)):>4} {wall:16.2f} {peak:19.1f}")


if __name__ == "__main__":
    main()
