"""``gitdns orchestrator`` and ``gitdns lease-name``: the settings of the node pool's
orchestrator (flags, then ``GITDNS_*`` variables, as the agent's), running it, and the
Kubernetes Lease names RBAC has to list.

    settings(flags, env) -> dict                   each setting's flag, else GITDNS_<NAME>
    run_orchestrator(flags, env=, auth=) -> Result --once: exit 0 when delivered
    lease_name(node_pool=, cluster=) -> Result     the orchestrator's or the agent's Lease
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.errors import ConfigError

if TYPE_CHECKING:
    from gitdns.adapters.git.auth import GitAuth
    from gitdns.orchestrator.config import OrchestratorConfig

DESTINATION = ("out", "configmap")  # one setting given as a flag: the other's variable is not read
# the transport files that must exist (the agent's rule: ssh and curl would blame the host key
# or the certificate instead)
MUST_EXIST = {"known_hosts": "--known-hosts", "ca_file": "--ca-file", "token_file": "--token-file",
              "ssh_key": "--ssh-key"}


def settings(flags: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The orchestrator's settings: a flag's value when given (not None), else the variable
    ``GITDNS_<NAME>`` when set; durations and booleans read as the agent reads them, errors
    naming the flag or the variable."""
    from gitdns.agent.config import coerce, env_name
    from gitdns.orchestrator.config import SETTINGS

    flagged = any(flags.get(name) is not None for name in DESTINATION)
    values: dict[str, Any] = {}
    for name, kind in SETTINGS.items():
        raw, where = flags.get(name), "--" + name.replace("_", "-")
        if raw is None and not (flagged and name in DESTINATION) and env_name(name) in env:
            raw, where = env[env_name(name)], env_name(name)
        if raw is not None:
            values[name] = coerce(name, kind, raw, where)
    return values


def check_transport(auth: GitAuth) -> None:
    for name, flag in MUST_EXIST.items():
        path = getattr(auth, name)
        if path is not None and not os.path.exists(path):
            raise ConfigError(f"{flag} (GITDNS_{name.upper()}) {path}: no such file")


def resolve(flags: Mapping[str, Any], env: Mapping[str, str] | None = None,
            auth: GitAuth | None = None) -> OrchestratorConfig:
    from gitdns.orchestrator.config import config_from_flags

    env = os.environ if env is None else env
    if auth is not None:
        check_transport(auth)
    return config_from_flags(settings(flags, env), env, auth=auth)


def run_orchestrator(flags: Mapping[str, Any], env: Mapping[str, str] | None = None,
                     auth: GitAuth | None = None) -> Result:
    """The node pool's orchestrator (docs/health.md), its git transport ``auth`` (the agent's
    flags and variables; None: the ambient git configuration)."""
    from gitdns.adapters.listen import endpoints
    from gitdns.orchestrator import wiring
    from gitdns.orchestrator.config import config_from_flags, log_format_of

    env = os.environ if env is None else env
    values = settings(flags, env)
    wiring.setup_logging(str(values.get("log_level") or "info"), log_format_of(values, env))
    if auth is not None:
        check_transport(auth)
    config = config_from_flags(values, env, auth=auth)
    # the agent's rule for its two addresses: --listen the probes, --admin-listen /status and
    # /metrics too; one address given to both serves everything there
    endpoints(config.listen, config.admin_listen, lambda *_: None)  # a bad address refuses to start first
    orch = wiring.build(config)
    if not values.get("once"):
        return Result(wiring.serve(orch, lambda make: endpoints(config.listen, config.admin_listen, make)))
    delivered = orch.run_once()
    result = Result(EXIT_OK if delivered else EXIT_ERROR)
    result.line(f"node pool {config.node_pool}: " + ("delivered" if delivered else "not delivered") +
                f" to {orch.delivery.target}; published {' '.join(orch.published.ips) or 'nothing'}")
    result.lines([f"note: {note}" for note in orch.status()["notes"]])
    result.lines([f"error: {step}: {error}" for step, error in orch.errors.items()])
    return result


def lease_name(*, node_pool: str | None = None, cluster: str | None = None) -> Result:
    """The Lease name to list in RBAC: the orchestrator's for ``node_pool``
    (`gitdns.orchestrator.config.lease_name`), or the agent's for the Cluster id ``cluster``
    (``gitdns-<hash8(id)>``, `gitdns.adapters.leases.KubeLease`)."""
    from gitdns.core.names import short_hash
    from gitdns.orchestrator.config import lease_name as pool_lease

    result = Result()
    if node_pool is not None:
        if not node_pool:
            raise ConfigError("--node-pool: empty")
        result.line(pool_lease(node_pool))
    elif cluster:
        result.line(f"gitdns-{short_hash(cluster, 8)}")
    else:
        raise ConfigError("give --node-pool POOL or --cluster ID")
    return result
