"""What the orchestrator does for its memory: the C allocator tuned (`tune_malloc`: one heap for
its threads, big blocks mapped on their own; each unless the operator's environment says
otherwise), and the per-node metric samples kept as columns with the same
/metrics page as the mapping they were given."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys

import pytest

from gitdns.orchestrator.metrics import NodeSample, OrchestratorMetrics

# Run in a process of its own (the settings are the whole process's): after tuning, a block of
# 16 MiB is freed (glibc's own rule then keeps blocks up to that size in its heap), and one of
# 12 MiB is asked for: a mapping of its own when the threshold was set, in the heap otherwise.
# (Sizes no free chunk of the heap could serve: glibc looks there before it maps anything.)
_PROBE = r"""
import ctypes, json, os, sys
from gitdns.orchestrator.wiring import tune_malloc
taken = tune_malloc()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def in_heap(address):
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            if start <= address < end:
                return True
    return False
libc.free(libc.malloc(16 << 20))
block = libc.malloc(12 << 20)
mapped = not in_heap(block)
libc.free(block)
print(json.dumps({"taken": taken, "mapped": mapped}))
"""


def _probe(env: dict[str, str]) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**clean, **env}, capture_output=True, text=True,
                         check=True, timeout=60)
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_the_allocator_is_tuned_unless_the_operator_said_otherwise() -> None:
    tuned = _probe({})
    assert tuned == {"taken": ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"],
                     "mapped": True}
    # the operator's own threshold wins: glibc's rule (raised by the free) keeps the block in the heap
    own = _probe({"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_ARENA_MAX": "4"})
    assert own == {"taken": ["MALLOC_TRIM_THRESHOLD_"], "mapped": False}


def test_node_samples_come_back_as_given_and_render_in_name_order() -> None:
    samples: dict[str, NodeSample] = {
        "n10": ("10.0.0.10", False, 3, None),
        "n2": ("10.0.0.2", True, 0, 0.015),
        "n1": ("10.0.0.1", False, 70000, 0.0),
    }
    metrics = OrchestratorMetrics()
    metrics.set_nodes(samples)
    assert metrics.node_samples() == samples
    assert list(metrics.node_samples()) == ["n1", "n10", "n2"]
    assert metrics.value("health_orchestrator_node_status", {"node_name": "n2", "node_ip": "10.0.0.2"}) == 1
    assert metrics.value("health_orchestrator_probe_consecutive_failures", {"node_name": "n1"}) == 70000
    assert metrics.value("health_orchestrator_probe_last_duration_seconds", {"node_name": "n10"}) is None
    assert metrics.value("health_orchestrator_probe_last_duration_seconds", {"node_name": "n1"}) == 0.0
    page = metrics.render().decode()
    lines = [line for line in page.splitlines() if line.startswith("health_orchestrator_node_status{")]
    assert [re.search(r'node_name="([^"]*)"', line)[1] for line in lines] == ["n1", "n10", "n2"]  # type: ignore[index]
    metrics.set_nodes({})
    assert metrics.node_samples() == {}
    assert "health_orchestrator_node_status{" not in metrics.render().decode()
