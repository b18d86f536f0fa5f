"""The agent and the orchestrator behave alike where an operator sees both: the shipped
Deployments probe them with the same timing and write their durations in the same spelling, and
the two daemons read the same durations and default to the same log format."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters import logs
from gitdns.agent import config as agent_config
from gitdns.commands.orchestrate import resolve as orchestrator_resolve
from gitdns.commands.orchestrate import run_orchestrator
from gitdns.core.durations import parse_duration
from gitdns.errors import ConfigError
from gitdns.orchestrator.config import SETTINGS
from tests.test_deploy import BASE, NAMESPACE, ORCHESTRATOR_BASE, agent_container, kustomize, only, settings_of

PROBES = ("livenessProbe", "readinessProbe")
TIMING = ("initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold", "successThreshold")
# what Kubernetes fills in for a field left out
KUBERNETES_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3,
                       "successThreshold": 1}
SPELLED = re.compile(r"[0-9]+(ms|s|m|h)\Z")  # a duration as the manifests write it: with its unit
# the agent's float settings that are durations (stale_after counts poll intervals)
AGENT_DURATIONS = frozenset(f.name for f in fields(agent_config.AgentConfig)
                            if f.type in (float, "float") and f.name != "stale_after")
ORCHESTRATOR_DURATIONS = frozenset(name for name, kind in SETTINGS.items() if kind is float)


def agent_deployed() -> tuple[dict[str, Any], dict[str, str]]:
    docs = kustomize(BASE)
    container = agent_container(docs)
    return container, settings_of(docs, container, NAMESPACE)


def orchestrator_deployed() -> tuple[dict[str, Any], dict[str, str]]:
    docs = kustomize(ORCHESTRATOR_BASE)
    deployment = only(docs, "Deployment", "gitdns-orchestrator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container, settings_of(docs, container, deployment["metadata"]["namespace"])


@pytest.fixture(scope="module")
def deployed() -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    return {"agent": agent_deployed(), "orchestrator": orchestrator_deployed()}


def timing(container: dict[str, Any], probe: str) -> dict[str, int]:
    """A probe's timing as the kubelet runs it (the fields left out at Kubernetes' defaults)."""
    return {name: int(container[probe].get(name, KUBERNETES_DEFAULTS[name])) for name in TIMING}


@pytest.mark.parametrize("probe", PROBES)
def test_both_deployments_probe_with_the_same_timing(deployed: dict[str, Any], probe: str) -> None:
    agent, orchestrator = timing(deployed["agent"][0], probe), timing(deployed["orchestrator"][0], probe)
    assert agent == orchestrator, f"{probe}: agent {agent}, orchestrator {orchestrator}"
    # stated, not left to Kubernetes' 1 s default
    for name, (container, _) in deployed.items():
        assert container[probe].get("timeoutSeconds", 0) >= 5, f"{name} {probe}: timeoutSeconds"
    liveness = timing(deployed["agent"][0], "livenessProbe")
    assert liveness["failureThreshold"] * liveness["periodSeconds"] >= 60  # the first clone of a large repo


def test_durations_in_the_settings_are_spelled_alike(deployed: dict[str, Any]) -> None:
    """Every duration either Deployment sets is written with its unit (``60s``, never ``60`` in
    one and ``30s`` in the other), and each reads as the daemon reads it."""
    seen: dict[str, dict[str, str]] = {}
    for daemon, names in (("agent", AGENT_DURATIONS), ("orchestrator", ORCHESTRATOR_DURATIONS)):
        env = deployed[daemon][1]
        for name in sorted(names):
            var = agent_config.env_name(name)
            if var in env:
                value = env[var]
                assert SPELLED.match(value), f"{daemon}: {var}={value!r} is not spelled with its unit (60s, 5m)"
                assert parse_duration(value) > 0
                seen.setdefault(var, {})[daemon] = value
    assert "GITDNS_POLL_INTERVAL" in seen and set(seen["GITDNS_POLL_INTERVAL"]) == {"agent", "orchestrator"}


def test_both_deployments_set_the_same_log_format(deployed: dict[str, Any]) -> None:
    agent, orchestrator = deployed["agent"][1], deployed["orchestrator"][1]
    assert agent["GITDNS_LOG_FORMAT"] == orchestrator["GITDNS_LOG_FORMAT"] == "json"
    # and it is the default the daemons pick in a pod anyway
    assert logs.default_format({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "json"


def test_the_shared_settings_are_spelled_alike(deployed: dict[str, Any]) -> None:
    """A setting both Deployments give (the repository, branch, lease, addresses) is written the same
    way in both: the same value where it means the same, and durations as above."""
    agent, orchestrator = deployed["agent"][1], deployed["orchestrator"][1]
    for var in ("GITDNS_STATE_DIR", "GITDNS_ADMIN_LISTEN", "GITDNS_BRANCH", "GITDNS_LEASE", "GITDNS_LOG_FORMAT"):
        assert agent[var] == orchestrator[var], var


# --- the daemons themselves ---------------------------------------------------------------------

DURATIONS = [("60", 60.0), ("60s", 60.0), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0), ("1.5m", 90.0),
             ("500ms", 0.5), (" 45s ", 45.0)]
NOT_DURATIONS = ["soon", "", "-5s", "5 minutes", "1e3", "nan", "inf", "5d", "s", "1.2.3m"]
ORCHESTRATOR_ENV = {"GITDNS_REPO": "/srv/dns", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/tmp/out"}


def agent_poll(raw: str, where: str) -> float:
    if where == "flag":
        return agent_config.resolve({"repo": "r", "poll_interval": raw}, {}).poll_interval
    return agent_config.resolve({"repo": "r"}, {"GITDNS_POLL_INTERVAL": raw}).poll_interval


def orchestrator_poll(raw: str, where: str) -> float:
    if where == "flag":
        return orchestrator_resolve({"poll_interval": raw}, ORCHESTRATOR_ENV).poll_interval
    return orchestrator_resolve({}, {**ORCHESTRATOR_ENV, "GITDNS_POLL_INTERVAL": raw}).poll_interval


@pytest.mark.parametrize("where", ["flag", "env"])
@pytest.mark.parametrize(("raw", "seconds"), DURATIONS)
def test_both_daemons_read_the_same_durations(raw: str, seconds: float, where: str) -> None:
    assert parse_duration(raw) == seconds
    assert agent_poll(raw, where) == orchestrator_poll(raw, where) == seconds


@pytest.mark.parametrize("where", ["flag", "env"])
@pytest.mark.parametrize("raw", NOT_DURATIONS)
def test_both_daemons_refuse_the_same_non_durations(raw: str, where: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(raw)
    for read in (agent_poll, orchestrator_poll):
        with pytest.raises(ConfigError) as caught:
            read(raw, where)
        assert "GITDNS_POLL_INTERVAL" in str(caught.value) or "--poll-interval" in str(caught.value)


@pytest.mark.parametrize(("env", "expected"), [({}, "text"), ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "json")])
def test_both_daemons_default_to_the_same_log_format(env: dict[str, str], expected: str) -> None:
    assert agent_config.resolve({"repo": "r"}, env).log_format == expected
    assert orchestrator_resolve({}, {**ORCHESTRATOR_ENV, **env}).log_format == expected


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_both_daemons_take_the_same_log_format_setting(fmt: str) -> None:
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}  # the setting wins over the pod's default
    assert agent_config.resolve({"repo": "r", "log_format": fmt}, pod).log_format == fmt
    assert agent_config.resolve({"repo": "r"}, {**pod, "GITDNS_LOG_FORMAT": fmt}).log_format == fmt
    assert orchestrator_resolve({"log_format": fmt}, {**ORCHESTRATOR_ENV, **pod}).log_format == fmt
    assert orchestrator_resolve({}, {**ORCHESTRATOR_ENV, **pod, "GITDNS_LOG_FORMAT": fmt}).log_format == fmt


def test_both_daemons_refuse_the_same_log_formats() -> None:
    for read in (lambda: agent_config.resolve({"repo": "r"}, {"GITDNS_LOG_FORMAT": "xml"}),
                 lambda: orchestrator_resolve({}, {**ORCHESTRATOR_ENV, "GITDNS_LOG_FORMAT": "xml"})):
        with pytest.raises(ConfigError, match=r"--log-format \(GITDNS_LOG_FORMAT\) 'xml': use json or text"):
            read()


def test_the_orchestrator_logs_json_lines_in_a_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitdns orchestrator` in a pod logs one JSON object per line, as the agent does."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # no harness handler: the daemon installs its own
    env = {**ORCHESTRATOR_ENV, "GITDNS_OUT": str(tmp_path / "out"), "GITDNS_STATE_DIR": str(tmp_path / "state"),
           "GITDNS_REPO": str(tmp_path / "missing"), "KUBERNETES_SERVICE_HOST": "10.0.0.1", "GITDNS_LEASE": "none",
           "GITDNS_LISTEN": "", "GITDNS_ADMIN_LISTEN": ""}
    result = run_orchestrator({"once": True}, env)  # no repository there: nothing delivered, and logged
    assert result.code == 1
    (handler,) = root.handlers
    assert isinstance(handler.formatter, logs.JsonFormatter)
    lines = [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]
    assert any(doc["level"] == "warning" and "desired state not read" in doc["message"] for doc in lines), lines
