"""The agent's Healthy condition never claims health that nothing measured."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from gitdns.agent.reporting import healthy_condition
from gitdns.core.health.filter import HealthResult


class Probes:
    def __init__(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        self._states = states

    def states(self) -> Mapping[str, Mapping[str, Any]]:
        return self._states


def agent(states: Mapping[str, Mapping[str, Any]], unhealthy: dict[str, list[str]] | None = None) -> Any:
    results = {"example.com": HealthResult(records=[], unhealthy=unhealthy or {})}
    return SimpleNamespace(ports=SimpleNamespace(probes=Probes(states)),
                           state=SimpleNamespace(health_results=results))


def test_no_target_probed_is_not_called_healthy() -> None:
    cond = healthy_condition(agent({}))
    assert cond is not None
    assert (cond.type, cond.status, cond.reason) == ("Healthy", True, "NoTargetsProbed")
    assert "not measured" in cond.message and "every probed target is healthy" not in cond.message


def test_targets_not_probed_yet_are_not_called_healthy() -> None:
    cond = healthy_condition(agent({"api.example.com/192.0.2.1": {"state": "unknown"}}))
    assert cond is not None and cond.reason == "NoTargetsProbed"
    assert cond.message.startswith("1 target(s) of this cluster not probed yet")


def test_a_measured_target_is_healthy() -> None:
    cond = healthy_condition(agent({"a": {"state": "healthy"}, "b": {"state": "unknown"}}))
    assert cond is not None and (cond.status, cond.reason) == (True, "TargetsHealthy")


def test_unhealthy_is_unchanged() -> None:
    cond = healthy_condition(agent({"a": {"state": "unhealthy"}}, {"api.example.com": ["192.0.2.1"]}))
    assert cond is not None and (cond.status, cond.reason) == (False, "TargetsWithdrawn")


def test_no_probes_no_condition() -> None:
    assert healthy_condition(SimpleNamespace(ports=SimpleNamespace(probes=None), state=None)) is None
