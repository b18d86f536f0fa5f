"""Agent configuration: flags over environment over file, durations, clear errors."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig, resolve
from gitdns.agent.main import JsonFormatter
from gitdns.core.durations import parse_duration
from gitdns.errors import ConfigError


def test_precedence_flags_over_env_over_file(tmp_path: Path) -> None:
    config_file = tmp_path / "gitdns.yaml"
    config_file.write_text("repo: /from/file\ncluster: file-cluster\npollInterval: 5m\nlogFormat: json\n")
    env = {"GITDNS_CONFIG": str(config_file), "GITDNS_CLUSTER": "env-cluster", "GITDNS_POLL_INTERVAL": "30s"}
    config = resolve({"poll_interval": "10", "repo": None}, env)
    assert (config.repo, config.cluster, config.poll_interval, config.log_format) == (
        "/from/file", "env-cluster", 10.0, "json")


def test_defaults() -> None:
    config = resolve({"repo": "r"}, {})
    assert config == AgentConfig(repo="r")
    assert config.poll_interval == 60.0 and config.validate_delay == 5.0 and config.quiet_period == 900.0


@pytest.mark.parametrize(("raw", "seconds"), [("60", 60.0), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0),
                                                ("250ms", 0.25), (7, 7.0)])
def test_durations(raw: object, seconds: float) -> None:
    assert parse_duration(raw) == seconds


@pytest.mark.parametrize(("flags", "env", "message"), [
    ({}, {}, "no repository"),
    ({"repo": "r", "poll_interval": "soon"}, {}, "--poll-interval"),
    ({"repo": "r"}, {"GITDNS_STATUS": "maybe"}, "GITDNS_STATUS"),
    ({"repo": "r", "lease": "zookeeper"}, {}, "--lease"),
])
def test_clear_errors(flags: dict[str, object], env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(flags, env)


def test_unknown_key_in_file_names_it(tmp_path: Path) -> None:
    config_file = tmp_path / "c.yaml"
    config_file.write_text("repo: r\npolInterval: 5\n")
    with pytest.raises(ConfigError, match="polInterval"):
        resolve({"config": str(config_file)}, {})


def test_json_logs_are_one_object_per_line() -> None:
    record = logging.LogRecord("gitdns.x", logging.INFO, __file__, 1, "applied: zone=%s", ("example.com",), None)
    doc = json.loads(JsonFormatter().format(record))
    assert doc["message"] == "applied: zone=example.com" and doc["level"] == "info" and doc["logger"] == "gitdns.x"
