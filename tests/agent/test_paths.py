"""Path settings are made absolute once, at start (git runs in its cache directories), and a
transport file that does not exist is a configuration error naming the setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.agent.main import absolute_paths
from gitdns.errors import ConfigError


def test_relative_paths_and_local_repositories_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "token").write_text("t\n")
    config = absolute_paths(AgentConfig(repo="./desired.git", status_repo="status.git", state_dir="st",
                                        token_file="token", ssh_key="keys/id"))
    assert config.repo == str(tmp_path / "desired.git") and config.status_repo == str(tmp_path / "status.git")
    assert config.state_dir == str(tmp_path / "st") and config.token_file == str(tmp_path / "token")
    assert config.ssh_key == str(tmp_path / "keys" / "id")  # a missing key is ssh's KeyMissing, with its words


@pytest.mark.parametrize("url", ["https://git.example.test/dns.git", "ssh://git@git.example.test/dns.git",
                                 "git@git.example.test:platform/dns.git", "file:///srv/dns.git"])
def test_urls_are_left_alone(url: str) -> None:
    assert absolute_paths(AgentConfig(repo=url, state_dir=os.sep + "st")).repo == url


@pytest.mark.parametrize(("setting", "flag"), [("known_hosts", "--known-hosts"), ("ca_file", "--ca-file"),
                                               ("token_file", "--token-file")])
def test_a_missing_transport_file_names_the_setting(tmp_path: Path, setting: str, flag: str) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=f"{flag} {missing}: no such file"):
        absolute_paths(AgentConfig(repo="r", state_dir=str(tmp_path), **{setting: str(missing)}))  # type: ignore[arg-type]


def test_the_read_caps_are_the_operator_s() -> None:
    from gitdns.agent.main import read_limits
    from gitdns.core.limits import DEFAULT_LIMITS

    assert read_limits(AgentConfig(repo="r")) == DEFAULT_LIMITS
    caps = read_limits(AgentConfig(repo="r", max_file_bytes="8MiB", max_commit_bytes="64MiB"))
    assert (caps.file_bytes, caps.commit_bytes) == (8 << 20, 64 << 20)
    with pytest.raises(ConfigError, match="max-file-bytes"):
        read_limits(AgentConfig(repo="r", max_file_bytes="lots"))
