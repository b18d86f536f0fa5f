"""Agent configuration: flags, then ``GITDNS_*`` environment variables, then a config file.

Every setting has one name in each place: flag ``--poll-interval``, environment
``GITDNS_POLL_INTERVAL``, file key ``pollInterval``.  Secrets are never values here: only
paths to files or names of environment variables holding them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from gitdns.adapters.logs import check_format, default_format
from gitdns.core.durations import EXAMPLES, parse_duration
from gitdns.core.owner.install import check_instance
from gitdns.core.reach import ProbeReach
from gitdns.errors import ConfigError


@dataclass(frozen=True, slots=True)
class AgentConfig:
    repo: str = ""  # URL or path of the desired repository
    cluster: str = ""  # Cluster id or metadata.name ("" in a cluster: read kube-system's UID)
    # a second install in one cluster: its owner id is <kube-system UID>.<instance> ("": the UID)
    instance: str = ""
    branch: str = "main"
    path: str = ""  # subdirectory of the repository holding the desired YAML
    poll_interval: float = 60.0  # seconds; ±5% jitter
    listen: str = "0.0.0.0:8080"  # "" disables the HTTP endpoint
    admin_listen: str = "127.0.0.1:9090"  # /status /metrics and probes; "": nowhere; = listen: all there
    state_dir: str = "/var/lib/gitdns"
    git_timeout: float = 30.0
    token_env: str = ""  # name of an env var holding the HTTPS token
    token_file: str = ""
    ssh_key: str = ""
    known_hosts: str = ""
    ca_file: str = ""  # CA bundle for https:// remotes (a private CA)
    git_username: str = ""  # the HTTPS user name sent with the token ("" = git)
    verify_ssh_signers: str = ""  # allowed_signers file: require SSH-signed heads
    verify_gpg_keys: str = ""  # exported public keys: require GPG-signed heads
    allow_rollback: bool = False  # accept a head that is not a descendant of the applied one
    webhook_github_secret_file: str = ""
    webhook_gitlab_token_file: str = ""
    webhook_gitlab_signing_file: str = ""
    webhook_gitea_secret_file: str = ""
    status: bool = True  # push the status branch
    status_repo: str = ""  # where status branches go (default: the desired repository)
    lease: str = "auto"  # auto | kubernetes | txt | none
    lease_duration: float = 60.0
    pod_name: str = ""
    pod_namespace: str = ""
    validate_delay: float = 5.0  # seconds after a write; plus up to the same again in jitter
    quiet_period: float = 900.0  # validation interval once the zone is stable
    heartbeat_interval: float = 300.0
    prune_stale_owners_after: float = 0.0  # seconds; 0 disables automatic removal
    log_format: str = "text"  # text | json (unset in a pod: json, `gitdns.adapters.logs.default_format`)
    log_level: str = "info"
    once: bool = False
    # delegation mode: default | primary | remote; "" follows the Cluster document in git
    mode: str = ""
    mode_configmap: str = "gitdns-config"  # optional ConfigMap in pod_namespace with DNS_MODE / GITDNS_MODE
    stale_after: float = 6.0  # primary: a remote whose status is older than this many of its polls is withdrawn
    kube_delegation: bool = False  # primary: also merge Kuadrant DNSRecords of remote clusters
    cluster_secret_namespace: str = "kuadrant-system"
    cluster_secret_label: str = "kuadrant.io/multicluster-kubeconfig"
    # what a Zone may name, set by the operator only (gitdns/providers/fences.py, docs/providers.md);
    # comma-separated lists (a YAML list in the config file); empty: nothing beyond the SDKs' defaults
    provider_endpoints: str = ""  # https origins a Zone's settings.endpoint may name
    rfc2136_servers: str = ""  # host, host:port or host:* a Zone's rfc2136 settings.server may name
    credentials_env_prefixes: str = ""  # variable prefixes credentials.env may name
    credentials_dir: str = ""  # the directory credentials.file may read from
    credentials_namespaces: str = ""  # namespaces besides the agent's own credentials.secret may read from
    credentials_secrets: str = ""  # Secrets credentials.secret may name: NAME or NAMESPACE/NAME
    store_dir: str = ""  # the base directory of every local store ("": state_dir)
    local_reload: str = ""  # none | rndc: how the server serving a local store's views picks up a write ("": none)
    rndc_config: str = ""  # rndc -c FILE for local_reload rndc ("": rndc's own)
    max_file_bytes: str = ""  # a desired-state file larger than this is not read ("": 4 MiB)
    max_commit_bytes: str = ""  # nor YAML files past this total per commit ("": 5 MiB)
    # what a DNSPolicy may make the agent reach (gitdns/core/reach.py; docs/health.md, "Probe targets")
    probe_allow_ranges: str = ""  # CIDR ranges a probe may reach besides ordinary addresses ("": none)
    headers_secrets: str = ""  # Secrets a healthCheck.headersSecret may name ("": none)


_BOOL_TRUE = {"1", "true", "yes", "on"}
_BOOL_FALSE = {"0", "false", "no", "off", ""}


def env_name(field: str) -> str:
    return "GITDNS_" + field.upper()


def file_key(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(part.capitalize() for part in rest)


def coerce(field: str, kind: Any, raw: Any, where: str) -> Any:
    if kind in (bool, "bool"):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _BOOL_TRUE:
            return True
        if text in _BOOL_FALSE:
            return False
        raise ConfigError(f"{where}: {raw!r} is not a boolean (use true or false)")
    if kind in (float, "float"):
        try:
            return parse_duration(raw)
        except ValueError:
            raise ConfigError(f"{where}: {str(raw)[:40]!r} is not a duration (e.g. {EXAMPLES})") from None
    if isinstance(raw, list):  # a list setting written as a YAML list
        return ",".join(str(item) for item in raw)
    return str(raw)


def _types() -> dict[str, Any]:
    return {f.name: f.type for f in fields(AgentConfig)}


def from_file(path: Path) -> dict[str, Any]:
    from ruamel.yaml import YAML

    try:
        data = YAML(typ="safe").load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except Exception as exc:  # ruamel's parser errors
        raise ConfigError(f"--config {path}: not valid YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping of settings")
    keys = {file_key(n): n for n in _types()}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in keys:
            raise ConfigError(f"{path}: unknown setting {key!r} (known: {', '.join(sorted(keys))})")
        out[keys[key]] = coerce(keys[key], _types()[keys[key]], value, f"{path}: {key}")
    return out


def from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in _types().items():
        var = env_name(name)
        if var in env:
            out[name] = coerce(name, kind, env[var], var)
    return out


def resolve(flags: Mapping[str, Any], env: Mapping[str, str] | None = None) -> AgentConfig:
    """Flags (non-None values) win over the environment, which wins over the file."""
    env = os.environ if env is None else env
    config_path = flags.get("config") or env.get("GITDNS_CONFIG")
    merged: dict[str, Any] = {}
    if config_path:
        merged.update(from_file(Path(config_path)))
    merged.update(from_env(env))
    types = _types()
    for name, value in flags.items():
        if name in types and value is not None:
            merged[name] = coerce(name, types[name], value, f"--{name.replace('_', '-')}")
    if "log_format" not in merged:  # the orchestrator's default too: JSON in a pod, else text
        merged["log_format"] = default_format(env)
    config = replace(AgentConfig(), **merged)
    if not config.repo:
        raise ConfigError("no repository: give --repo URL, GITDNS_REPO or repo in the config file")
    if config.poll_interval <= 0:
        raise ConfigError("--poll-interval must be positive")
    if config.lease not in ("auto", "kubernetes", "txt", "none"):
        raise ConfigError(f"--lease {config.lease!r}: use auto, kubernetes, txt or none")
    if config.mode not in ("", "default", "primary", "remote"):
        raise ConfigError(f"--mode {config.mode!r}: use default, primary or remote")
    if config.stale_after < 4:
        raise ConfigError("--stale-after must be at least 4 (poll intervals): a remote's heartbeat moves "
                          "every 2 of them")
    check_format(config.log_format, "--log-format (GITDNS_LOG_FORMAT)")
    if config.instance:
        try:
            check_instance(config.instance)
        except ValueError as exc:
            raise ConfigError(f"--instance (GITDNS_INSTANCE) {exc}") from None
    probe_reach(config)  # a bad range stops the agent at start, naming the setting
    return config


def probe_reach(config: AgentConfig) -> ProbeReach:
    """The operator's probe ranges (``--probe-allow-ranges``); a `ConfigError` naming the setting."""
    from gitdns.providers.fences import setting_name  # not at import: `gitdns --help` stays light

    try:
        return ProbeReach.parse(config.probe_allow_ranges, setting_name("probe_allow_ranges"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def listed(value: str) -> tuple[str, ...]:
    """A comma- (or space-) separated list setting as its entries."""
    return tuple(value.replace(",", " ").split())


def flag_names() -> list[str]:
    return [f.name for f in fields(AgentConfig)]
