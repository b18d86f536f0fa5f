"""What the orchestrator does for its memory: one C heap for its threads (unless the operator
set ``MALLOC_ARENA_MAX``), and the per-node metric samples kept as columns with the same
/metrics page as the mapping they were given."""

from __future__ import annotations

import re
import sys

import pytest

from gitdns.orchestrator.metrics import NodeSample, OrchestratorMetrics
from gitdns.orchestrator.wiring import one_malloc_arena


def test_the_operators_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert one_malloc_arena() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_one_heap_on_linux_when_the_environment_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert isinstance(one_malloc_arena(), bool)  # True on glibc; musl ignores it (no error either way)


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
