"""The git transport of the one-shot verbs that talk to a git remote: `status` (the status
branches and the desired head), `history` (the desired branch's history) and `groups
add|remove|set|reconcile` (the status branches for the health check, and ``--push``).

    TRANSPORT                          the settings, named as the agent's (agent/config.py)
    git_auth(values, env=None) -> GitAuth

The settings and their meaning are the agent's: ``ssh_key`` + ``known_hosts`` for ssh://
and scp-like remotes, ``token_file`` or ``token_env`` (the name of a variable holding the
token) for https:// remotes, ``ca_file`` for a private CA.  A flag's value wins over the
``GITDNS_<NAME>`` environment variable (``GITDNS_SSH_KEY``, ...); an empty value is "not set".
With nothing set, git runs with the ambient configuration (the operator's git config,
credential helper, ``GIT_SSH_COMMAND``), prompts off.  Only paths and variable names are held
here, never a secret: `gitdns.adapters.git.auth` reads the token when git runs, into that git's
environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gitdns.adapters.git.auth import GitAuth
from gitdns.agent.config import env_name

__all__ = ["TRANSPORT", "env_name", "git_auth"]

TRANSPORT = ("ssh_key", "known_hosts", "token_file", "token_env", "ca_file", "git_username")


def git_auth(values: Mapping[str, object], env: Mapping[str, str] | None = None) -> GitAuth:
    """The transport from flag values (None or absent: not given) and the environment."""
    env = os.environ if env is None else env
    chosen: dict[str, str] = {}
    for name in TRANSPORT:
        value = values.get(name)
        chosen[name] = str(value) if value is not None else env.get(env_name(name), "")

    def path(name: str) -> Path | None:
        return Path(chosen[name]) if chosen[name] else None

    return GitAuth(token_env=chosen["token_env"] or None, token_file=path("token_file"),
                   ssh_key=path("ssh_key"), known_hosts=path("known_hosts"), ca_file=path("ca_file"),
                   username=chosen["git_username"] or "git")
