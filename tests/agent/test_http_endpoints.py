"""Which HTTP servers the agent runs (gitdns.agent.main.http_endpoints): the webhook address
serves the webhook and the probes only; /status and /metrics live on the admin address; one
address given to both serves everything there."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gitdns.adapters.http.server import ADMIN_ROUTES, ALL_ROUTES, WEBHOOK_ROUTES
from gitdns.agent.config import AgentConfig
from gitdns.agent.main import http_endpoints
from gitdns.errors import ConfigError


def endpoints(**settings: str) -> list[tuple[str, int, frozenset[str], str]]:
    config = replace(AgentConfig(repo="mem://"), **settings)  # type: ignore[arg-type]

    def make(host: str, port: int, routes: frozenset[str], name: str) -> Any:
        return host, port, routes, name
    return http_endpoints(config, make)


def test_the_default_webhook_address_serves_neither_status_nor_metrics() -> None:
    servers = endpoints()
    on_listen = [routes for host, port, routes, _ in servers if (host, port) == ("0.0.0.0", 8080)]
    assert on_listen == [WEBHOOK_ROUTES]
    assert "status" not in WEBHOOK_ROUTES and "metrics" not in WEBHOOK_ROUTES
    assert all(host == "127.0.0.1" for host, _, routes, _ in servers if "status" in routes)
    assert servers == [("0.0.0.0", 8080, WEBHOOK_ROUTES, "webhook"), ("127.0.0.1", 9090, ADMIN_ROUTES, "admin")]


def test_separate_addresses_split_the_routes() -> None:
    assert endpoints(listen="0.0.0.0:8080", admin_listen="0.0.0.0:9090") == [
        ("0.0.0.0", 8080, WEBHOOK_ROUTES, "webhook"), ("0.0.0.0", 9090, ADMIN_ROUTES, "admin")]
    assert "health" in ADMIN_ROUTES  # kubelet may probe either address


def test_one_address_for_both_serves_everything_there() -> None:
    assert endpoints(listen="127.0.0.1:8080", admin_listen="127.0.0.1:8080") == [
        ("127.0.0.1", 8080, ALL_ROUTES, "http")]
    assert endpoints(listen=":8080", admin_listen="0.0.0.0:8080") == [("0.0.0.0", 8080, ALL_ROUTES, "http")]


def test_an_empty_address_serves_nothing_there() -> None:
    assert endpoints(listen="", admin_listen="127.0.0.1:9090") == [("127.0.0.1", 9090, ADMIN_ROUTES, "admin")]
    assert endpoints(listen="0.0.0.0:8080", admin_listen="") == [("0.0.0.0", 8080, WEBHOOK_ROUTES, "webhook")]
    assert endpoints(listen="", admin_listen="") == []


def test_one_port_for_two_hosts_is_refused() -> None:
    with pytest.raises(ConfigError, match="share port 8080"):
        endpoints(listen="0.0.0.0:8080", admin_listen="127.0.0.1:8080")


@pytest.mark.parametrize(("setting", "flag"), [("listen", "--listen"), ("admin_listen", "--admin-listen")])
@pytest.mark.parametrize("value", ["8080", "host:http", "127.0.0.1:70000", "x" * 200])
def test_a_malformed_address_names_its_setting(setting: str, flag: str, value: str) -> None:
    with pytest.raises(ConfigError, match=flag) as caught:
        endpoints(**{setting: value})
    assert len(str(caught.value)) < 200  # the value is truncated
