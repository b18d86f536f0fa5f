"""`gitdns orchestrator`'s settings: every flag's default from GITDNS_<NAME> (the agent's rule),
the required ones named by flag and variable, the agent's git transport, its own namespace,
and the URL check (a token in --repo is refused without showing it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.git.auth import GitAuth
from gitdns.cli import build_parser, transport_of
from gitdns.commands.orchestrate import resolve, settings
from gitdns.core.reach import ProbeReach
from gitdns.errors import ConfigError
from gitdns.orchestrator.config import SETTINGS, OrchestratorConfig
from gitdns.orchestrator.wiring import build


def flags(*argv: str) -> dict[str, Any]:
    args = build_parser().parse_args(["orchestrator", *argv])
    return {k: v for k, v in vars(args).items() if k not in ("command", "version")}


def test_every_flag_defaults_to_its_gitdns_variable(tmp_path: Path) -> None:
    env = {"GITDNS_REPO": "https://git.example.com/dns.git", "GITDNS_NODE_POOL": "edge-eu",
           "GITDNS_CONFIGMAP": "kube-system/coredns-custom", "GITDNS_LISTEN": "0.0.0.0:8081",
           "GITDNS_ADMIN_LISTEN": "127.0.0.1:9091", "GITDNS_STATE_DIR": str(tmp_path), "GITDNS_POLL_INTERVAL": "1m",
           "GITDNS_LEASE": "kubernetes", "GITDNS_LEASE_DURATION": "45s", "GITDNS_DISCOVER_NODES": "true",
           "GITDNS_BRANCH": "live", "GITDNS_PATH": "dns", "GITDNS_GIT_TIMEOUT": "10s",
           "GITDNS_SIGNAL_PID_FILE": "/run/dnsmasq.pid", "GITDNS_COREDNS_DIR": "/custom",
           "GITDNS_POD_NAME": "orch-1", "GITDNS_POD_NAMESPACE": "failover", "GITDNS_LOG_LEVEL": "debug",
           "GITDNS_LOG_FORMAT": "json", "GITDNS_ONCE": "false", "GITDNS_PROBE_ALLOW_RANGES": "127.0.0.0/8, fd00::/8",
           "GITDNS_HEADERS_SECRETS": "probe-a,probe-b"}
    assert {k.removeprefix("GITDNS_").lower() for k in env} | {"out"} == set(SETTINGS)
    config = resolve(flags(), env)
    assert config == OrchestratorConfig(
        repo="https://git.example.com/dns.git", node_pool="edge-eu", configmap=("kube-system", "coredns-custom"),
        listen="0.0.0.0:8081", admin_listen="127.0.0.1:9091", state_dir=tmp_path, poll_interval=60.0,
        lease="kubernetes", lease_duration=45.0, discover_nodes=True, branch="live", path="dns", git_timeout=10.0,
        signal_pid_file=Path("/run/dnsmasq.pid"), coredns_dir="/custom", pod_name="orch-1",
        pod_namespace="failover", probe_reach=ProbeReach.parse("127.0.0.0/8,fd00::/8"),
        headers_secrets=("probe-a", "probe-b"), log_format="json")
    assert settings(flags(), env)["log_level"] == "debug" and settings(flags(), env)["once"] is False


def test_a_flag_wins_over_its_variable(tmp_path: Path) -> None:
    env = {"GITDNS_REPO": "/srv/a", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/a", "GITDNS_POLL_INTERVAL": "1m",
           "GITDNS_DISCOVER_NODES": "false"}
    config = resolve(flags("--repo", "/srv/b", "--poll-interval", "5s", "--discover-nodes"), env)
    assert (config.repo, config.poll_interval, config.out, config.discover_nodes) == ("/srv/b", 5.0, Path("/a"), True)
    # the destination is one setting: --configmap given, GITDNS_OUT is not read
    config = resolve(flags("--configmap", "kube-system/coredns-custom"), env)
    assert config.out is None and config.configmap == ("kube-system", "coredns-custom")


def test_defaults_without_flags_or_variables(tmp_path: Path) -> None:
    config = resolve(flags("--repo", "/srv/dns", "--node-pool", "edge", "--out", str(tmp_path)), {})
    assert (config.listen, config.admin_listen, config.lease, config.poll_interval) == (
        "0.0.0.0:8080", "127.0.0.1:9090", "auto", 30.0)


@pytest.mark.parametrize(("env", "words"), [
    ({"GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/o"}, ("--repo", "GITDNS_REPO")),
    ({"GITDNS_REPO": "/r", "GITDNS_OUT": "/o"}, ("--node-pool", "GITDNS_NODE_POOL")),
    ({"GITDNS_REPO": "/r", "GITDNS_NODE_POOL": "edge"}, ("--out", "GITDNS_OUT", "--configmap", "GITDNS_CONFIGMAP")),
    ({"GITDNS_REPO": "/r", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/o", "GITDNS_CONFIGMAP": "a/b"},
     ("exactly one", "GITDNS_OUT", "GITDNS_CONFIGMAP")),
    ({"GITDNS_REPO": "/r", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/o", "GITDNS_POLL_INTERVAL": "soon"},
     ("GITDNS_POLL_INTERVAL", "'soon'")),
    ({"GITDNS_REPO": "/r", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/o", "GITDNS_DISCOVER_NODES": "maybe"},
     ("GITDNS_DISCOVER_NODES", "true or false")),
    ({"GITDNS_REPO": "/r", "GITDNS_NODE_POOL": "edge", "GITDNS_CONFIGMAP": "coredns-custom"},
     ("--configmap", "GITDNS_CONFIGMAP", "NAMESPACE/NAME")),
    ({"GITDNS_REPO": "/r", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/o", "GITDNS_LEASE": "etcd"},
     ("--lease", "GITDNS_LEASE")),
])
def test_errors_name_the_flag_and_the_variable(env: dict[str, str], words: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve(flags(), env)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


def test_the_transport_is_the_agents(tmp_path: Path) -> None:
    key, known = tmp_path / "key", tmp_path / "known_hosts"
    key.write_text("k")
    known.write_text("h")
    args = build_parser().parse_args(["orchestrator", "--ssh-key", str(key)])
    auth = transport_of(args)
    assert auth.ssh_key == key and auth.known_hosts is None
    env = {"GITDNS_REPO": "ssh://git@127.0.0.1/dns.git", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": str(tmp_path)}
    config = resolve(flags(), env, auth=auth)
    assert config.auth == auth
    with pytest.raises(ConfigError, match=r"--known-hosts \(GITDNS_KNOWN_HOSTS\) .*missing: no such file"):
        resolve(flags(), env, auth=GitAuth(known_hosts=tmp_path / "missing"))


def test_no_transport_keeps_the_ambient_git_configuration(tmp_path: Path) -> None:
    config = resolve(flags("--repo", "https://git.example.com/dns.git", "--node-pool", "edge", "--out",
                           str(tmp_path), "--state-dir", str(tmp_path / "state")), {})
    orch = build(config)
    git = orch.source.source  # type: ignore[attr-defined]
    assert not git.auth.configured  # no GIT_CONFIG_GLOBAL=/dev/null: the operator's git config applies


def test_a_token_in_the_repository_url_is_refused_without_showing_it(tmp_path: Path) -> None:
    secret = "ghp_never_shown_1234567890"
    config = resolve(flags("--repo", f"https://{secret}@git.example.com/dns.git", "--node-pool", "edge", "--out",
                           str(tmp_path), "--state-dir", str(tmp_path / "state")), {})
    with pytest.raises(ConfigError) as caught:
        build(config)
    assert secret not in str(caught.value) and "--token-file" in str(caught.value)


def test_the_own_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitdns.providers import fences

    base = {"GITDNS_REPO": "/r", "GITDNS_NODE_POOL": "edge", "GITDNS_OUT": "/o"}
    monkeypatch.delenv("GITDNS_POD_NAMESPACE", raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    sa = tmp_path / "namespace"
    sa.write_text("from-the-token\n")
    monkeypatch.setattr(fences, "SERVICE_ACCOUNT_NAMESPACE", str(sa))
    assert resolve(flags(), base).pod_namespace == "from-the-token"
    assert resolve(flags(), {**base, "POD_NAMESPACE": "downward"}).pod_namespace == "downward"
    assert resolve(flags(), {**base, "POD_NAMESPACE": "downward",
                             "GITDNS_POD_NAMESPACE": "set"}).pod_namespace == "set"
    assert resolve(flags("--pod-namespace", "flag"), {**base, "GITDNS_POD_NAMESPACE": "set"}).pod_namespace == "flag"
    sa.unlink()
    assert resolve(flags(), base).pod_namespace == "gitdns-system"


def test_the_docs_list_every_setting_and_its_variable() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "health.md").read_text()
    for name in SETTINGS:
        flag, var = "--" + name.replace("_", "-"), "GITDNS_" + name.upper()
        assert f"| `{flag}` | `{var}` |" in docs, (flag, var)
