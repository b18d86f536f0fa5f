"""The orchestrator's configuration, from the command line's flags (``gitdns orchestrator``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitdns.core.durations import parse_duration
from gitdns.errors import ConfigError


@dataclass(frozen=True, slots=True)
class OrchestratorConfig:
    repo: str
    node_pool: str
    out: Path | None = None
    configmap: tuple[str, str] | None = None  # (namespace, name)
    listen: str = "0.0.0.0:8080"
    state_dir: Path = Path("/var/lib/gitdns")
    poll_interval: float = 30.0
    lease: str = "auto"  # auto | kubernetes | file | none
    lease_duration: float = 30.0
    discover_nodes: bool = False
    branch: str = "main"
    path: str = ""
    signal_pid_file: Path | None = None
    coredns_dir: str = "/etc/coredns/custom"
    pod_name: str = ""
    pod_namespace: str = "dns-failover"

    def __post_init__(self) -> None:
        if (self.out is None) == (self.configmap is None):
            raise ConfigError("orchestrator: give exactly one of --out DIR and --configmap NS/NAME")
        if self.lease not in ("auto", "kubernetes", "file", "none"):
            raise ConfigError(f"--lease {self.lease}: expected auto, kubernetes, file or none")
        if self.poll_interval <= 0:
            raise ConfigError("--poll-interval must be positive")


def is_url(repo: str) -> bool:
    return "://" in repo or (":" in repo and "@" in repo.split(":", 1)[0])


def config_from_flags(flags: Mapping[str, Any]) -> OrchestratorConfig:
    """Flags (argparse names) -> OrchestratorConfig; POD_NAME / POD_NAMESPACE from the environment."""
    configmap = None
    if flags.get("configmap"):
        namespace, sep, name = str(flags["configmap"]).partition("/")
        if not sep or not namespace or not name:
            raise ConfigError(f"--configmap {flags['configmap']}: expected NAMESPACE/NAME")
        configmap = (namespace, name)
    values: dict[str, Any] = {
        "repo": flags["repo"], "node_pool": flags["node_pool"], "configmap": configmap,
        "out": Path(flags["out"]) if flags.get("out") else None,
        "signal_pid_file": Path(flags["signal_pid_file"]) if flags.get("signal_pid_file") else None,
        "discover_nodes": bool(flags.get("discover_nodes")),
        "pod_name": os.environ.get("POD_NAME", ""),
        "pod_namespace": os.environ.get("POD_NAMESPACE", "dns-failover"),
    }
    for key in ("listen", "lease", "branch", "path", "coredns_dir"):
        if flags.get(key) is not None:
            values[key] = flags[key]
    if flags.get("state_dir"):
        values["state_dir"] = Path(flags["state_dir"])
    for key in ("poll_interval", "lease_duration"):
        if flags.get(key) is not None:
            values[key] = parse_duration(flags[key])
    return OrchestratorConfig(**values)
