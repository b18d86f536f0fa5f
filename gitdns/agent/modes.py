"""Which mode this agent runs in: ``default``, ``primary`` or ``remote`` (the modes of Kuadrant's
"Cluster Aware DNSRecord Delegation" RFC).

Precedence, first set wins::

    --mode flag  >  GITDNS_MODE  >  mode in the --config file  >  DNS_MODE (the RFC's
    variable)  >  the ConfigMap (--mode-configmap in the pod namespace, key GITDNS_MODE or
    DNS_MODE)  >  the Cluster's spec.mode in git  >  default

`gitdns.agent.config.resolve` folds the first three into ``AgentConfig.mode``.  A mode set
outside git that disagrees with git is reported
(condition ``ModeMatchesGit`` False, reason ``ModeOverridden``): git stays the record of
intent, the override is visible in the status branch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gitdns.core.conditions import Condition
from gitdns.core.model import Mode
from gitdns.errors import ConfigError, GitdnsError

log = logging.getLogger(__name__)

VALID = tuple(m.value for m in Mode)


@dataclass(frozen=True, slots=True)
class ModeChoice:
    mode: Mode
    source: str  # "flag or GITDNS_MODE", "DNS_MODE", "ConfigMap ns/name", "git", "default"

    def condition(self, git_mode: Mode | None) -> Condition:
        if git_mode is None or self.source == "git" or git_mode is self.mode:
            return Condition("ModeMatchesGit", True, "ModeAsGit", f"running as {self.mode.value} ({self.source})")
        return Condition("ModeMatchesGit", False, "ModeOverridden",
                         f"git says {git_mode.value}, {self.source} says {self.mode.value}: running as "
                         f"{self.mode.value}; change spec.mode in git or drop the override")


def _parse(raw: str, where: str) -> Mode:
    value = raw.strip().lower()
    if value not in VALID:
        raise ConfigError(f"{where}: {raw!r} is not a mode (use {', '.join(VALID)})")
    return Mode(value)


def configmap_mode(namespace: str, name: str) -> str | None:
    """DNS_MODE / GITDNS_MODE from the optional ConfigMap (None when absent, unreadable or not
    in a cluster: an unreadable ConfigMap is logged and does not stop the agent)."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST") or not namespace or not name:
        return None
    from gitdns.adapters.kube.access import configmap_data

    try:
        data = configmap_data(namespace, name)
    except GitdnsError as exc:
        log.warning("mode configmap unreadable: namespace=%s name=%s error=%s", namespace, name, exc)
        return None
    if not data:
        return None
    return data.get("GITDNS_MODE") or data.get("DNS_MODE") or None


def choose(*, configured: str, env: Mapping[str, str] | None = None,
           configmap: Callable[[], str | None] = lambda: None, git_mode: Mode | None) -> ModeChoice:
    """The mode and where it came from (see the module docstring for the precedence)."""
    env = os.environ if env is None else env
    if configured:
        return ModeChoice(_parse(configured, "--mode / GITDNS_MODE / mode"), "--mode, GITDNS_MODE or the config file")
    if env.get("DNS_MODE"):
        return ModeChoice(_parse(env["DNS_MODE"], "DNS_MODE"), "DNS_MODE")
    cm = configmap()
    if cm:
        return ModeChoice(_parse(cm, "the mode ConfigMap"), "the mode ConfigMap")
    if git_mode is not None:
        return ModeChoice(git_mode, "git")
    return ModeChoice(Mode.DEFAULT, "default")
