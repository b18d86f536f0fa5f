"""The orchestrator's configuration (``gitdns orchestrator``; docs/health.md, "Settings").

Every setting has a flag and an environment variable, as the agent's: ``--poll-interval`` /
``GITDNS_POLL_INTERVAL``; the flag wins (`gitdns.commands.orchestrate` merges them).  The git
transport (``--ssh-key``, ``--token-file``, ...) is the agent's too, given here as a `GitAuth`.

    SETTINGS                         name -> type (str, float for durations, bool)
    config_from_flags(values, env)   the merged values -> OrchestratorConfig
    log_format_of(values, env)       the log format: the setting, else the agent's default
    lease_name(pool)                 the node pool's Kubernetes Lease
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.logs import check_format, default_format
from gitdns.core.durations import EXAMPLES, parse_duration
from gitdns.core.names import short_hash
from gitdns.core.reach import ProbeReach
from gitdns.errors import ConfigError
from gitdns.providers.fences import agent_namespace

LEASE_PREFIX = "gitdns-orchestrator-"
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")  # a DNS-1123 label (length checked apart)

# every setting, with its type: flag --<name with dashes>, environment GITDNS_<NAME>
SETTINGS: dict[str, type] = {
    "repo": str, "node_pool": str, "out": str, "configmap": str, "listen": str, "admin_listen": str,
    "state_dir": str, "poll_interval": float, "lease": str, "lease_duration": float, "discover_nodes": bool,
    "branch": str, "path": str, "git_timeout": float, "signal_pid_file": str, "coredns_dir": str,
    "pod_name": str, "pod_namespace": str, "log_format": str, "log_level": str, "once": bool,
    # what a NodePool may make the orchestrator reach (docs/health.md, "Probe targets"; gitdns/core/reach.py)
    "probe_allow_ranges": str, "headers_secrets": str,
}


def setting(name: str) -> str:
    """How an operator gives ``name``: ``--flag (GITDNS_NAME)``."""
    return f"--{name.replace('_', '-')} (GITDNS_{name.upper()})"


@dataclass(frozen=True, slots=True)
class OrchestratorConfig:
    repo: str
    node_pool: str
    out: Path | None = None
    configmap: tuple[str, str] | None = None  # (namespace, name)
    listen: str = "0.0.0.0:8080"  # /healthz /readyz ("" none)
    admin_listen: str = "127.0.0.1:9090"  # /status /metrics /healthz /readyz ("" none)
    state_dir: Path = Path("/var/lib/gitdns")
    poll_interval: float = 30.0
    lease: str = "auto"  # auto | kubernetes | file | none
    lease_duration: float = 30.0
    discover_nodes: bool = False
    branch: str = "main"
    path: str = ""
    git_timeout: float = 30.0
    signal_pid_file: Path | None = None
    coredns_dir: str = "/etc/coredns/custom"
    pod_name: str = ""  # the Lease holder ("": <hostname>-<pid>)
    pod_namespace: str = "gitdns-system"  # the orchestrator's own namespace: its Lease, headersSecret
    auth: GitAuth = field(default_factory=GitAuth)
    probe_reach: ProbeReach = ProbeReach()  # noqa: RUF009 - frozen; --probe-allow-ranges (none: ordinary only)
    headers_secrets: tuple[str, ...] = ()  # the Secrets a NodePool's healthCheck.headersSecret may name
    log_format: str = "text"  # json | text (unset in a pod: json, as the agent's)

    def __post_init__(self) -> None:
        if (self.out is None) == (self.configmap is None):
            raise ConfigError(f"orchestrator: give exactly one of {setting('out')} and {setting('configmap')} "
                              "(docs/health.md, \"Delivery\")")
        if self.lease not in ("auto", "kubernetes", "file", "none"):
            raise ConfigError(f"{setting('lease')} {self.lease[:40]!r}: expected auto, kubernetes, file or none")
        for name in ("poll_interval", "lease_duration", "git_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{setting(name)} must be positive")
        check_format(self.log_format, setting("log_format"))

    @property
    def identity(self) -> str:
        """Who holds the Lease: the pod's name, else ``<hostname>-<pid>``."""
        return self.pod_name or f"{socket.gethostname()}-{os.getpid()}"


def is_url(repo: str) -> bool:
    return "://" in repo or (":" in repo and "@" in repo.split(":", 1)[0])


def lease_name(pool: str) -> str:
    """The node pool's Kubernetes Lease: ``gitdns-orchestrator-<pool>`` when the pool's name is
    a DNS-1123 label and the whole name fits 63 characters, else
    ``gitdns-orchestrator-<hash8(pool)>`` (`gitdns lease-name --node-pool POOL` prints it)."""
    name = LEASE_PREFIX + pool
    if _LABEL.match(pool) and len(name) <= 63:
        return name
    return LEASE_PREFIX + short_hash(pool, 8)


def log_format_of(values: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """``--log-format`` (``GITDNS_LOG_FORMAT``) when given, else the agent's default: json in a
    pod, text elsewhere (`gitdns.adapters.logs.default_format`)."""
    return check_format(str(values.get("log_format") or default_format(env)), setting("log_format"))


def _destination(values: Mapping[str, Any]) -> tuple[Path | None, tuple[str, str] | None]:
    out, configmap = values.get("out") or None, values.get("configmap") or None
    if configmap is None:
        return (Path(str(out)) if out else None), None
    namespace, sep, name = str(configmap).partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ConfigError(f"{setting('configmap')} {str(configmap)[:80]!r}: expected NAMESPACE/NAME")
    return (Path(str(out)) if out else None), (namespace, name)


def config_from_flags(values: Mapping[str, Any], env: Mapping[str, str] | None = None, *,
                      auth: GitAuth | None = None) -> OrchestratorConfig:
    """The settings (flags merged with ``GITDNS_*``; durations as numbers or ``30s``) -> an
    OrchestratorConfig.  The own namespace: the setting, ``POD_NAMESPACE``, the service
    account's namespace file, else gitdns-system; the Lease holder: the setting or ``POD_NAME``."""
    env = os.environ if env is None else env
    for name, flag in (("repo", "--repo URL|PATH"), ("node_pool", "--node-pool NAME")):
        if not values.get(name):
            raise ConfigError(f"orchestrator: no {name.replace('_', ' ')}: give {flag} or GITDNS_{name.upper()}")
    out, configmap = _destination(values)
    chosen: dict[str, Any] = {
        "repo": str(values["repo"]), "node_pool": str(values["node_pool"]), "out": out, "configmap": configmap,
        "signal_pid_file": Path(str(values["signal_pid_file"])) if values.get("signal_pid_file") else None,
        "discover_nodes": bool(values.get("discover_nodes")),
        "pod_name": str(values.get("pod_name") or env.get("POD_NAME", "")),
        "pod_namespace": agent_namespace(str(values.get("pod_namespace") or env.get("POD_NAMESPACE") or "")
                                         or None),
        "auth": auth if auth is not None else GitAuth(),
        "headers_secrets": tuple(str(values.get("headers_secrets") or "").replace(",", " ").split()),
        "log_format": log_format_of(values, env),
    }
    try:
        chosen["probe_reach"] = ProbeReach.parse(str(values.get("probe_allow_ranges") or ""),
                                                 setting("probe_allow_ranges"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for key in ("listen", "admin_listen", "lease", "branch", "path", "coredns_dir"):
        if values.get(key) is not None:
            chosen[key] = str(values[key])
    if values.get("state_dir"):
        chosen["state_dir"] = Path(str(values["state_dir"]))
    for key in ("poll_interval", "lease_duration", "git_timeout"):
        if values.get(key) is not None:
            try:
                chosen[key] = parse_duration(values[key])
            except ValueError:
                raise ConfigError(f"{setting(key)} {str(values[key])[:40]!r} is not a duration "
                                  f"(e.g. {EXAMPLES})") from None
    return OrchestratorConfig(**chosen)
