"""The flag groups several `gitdns` verbs share: the git transport, the provider fences (with
--store-dir as each verb uses it), --from-worktree, --repo and --format.  `gitdns.cli.parser`,
`gitdns.cli.daemons` and `gitdns.cli.verbs` build their verbs with them.

No command module is imported at import time, so that `gitdns --help` starts fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

# The git transport: one definition for the agent and every verb that talks to a git remote
# (status, history, groups add|remove|set|reconcile); gitdns/commands/git/remote.py builds the GitAuth.
TRANSPORT_HELP = {
    "ssh_key": "SSH private key for ssh:// and scp-like remotes",
    "known_hosts": "pinned known_hosts file for ssh:// remotes (the host key is checked strictly)",
    "token_file": "file holding the HTTPS token (read on every git operation)",
    "token_env": "name of an environment variable holding the HTTPS token",
    "ca_file": "CA bundle trusted for https:// remotes, e.g. a private CA",
    "git_username": "user name sent with the HTTPS token (default: git; a GitLab deploy token's, a Gitea account's)",
}
TRANSPORT_TITLE = "git remote (docs/cli.md, \"Git remotes\"; none given: the ambient git configuration)"


# What a Zone may name, set by the operator (never the repository): one definition for the agent
# and every verb that builds providers (plan, apply, zone show, owners, prune-owner, adopt, groups,
# failover simulate).  gitdns/providers/fences.py; docs/providers.md, "What a Zone may name".
FENCES_HELP = {
    "provider_endpoints": "https origins a Zone's settings.endpoint may name, comma-separated "
                          "(default: none, only the SDKs' own endpoints)",
    "rfc2136_servers": "servers an rfc2136 Zone may name: host (port 53), host:port or host:*, comma-separated "
                       "(default: none)",
    "credentials_env_prefixes": "environment variable prefixes a Zone's credentials.env may name, e.g. AWS "
                                "(default: none)",
    "credentials_dir": "the directory a Zone's credentials.file is read from (default: none)",
    "credentials_namespaces": "namespaces besides the agent's own a Zone's credentials.secret may read from "
                              "(default: only its own)",
    "credentials_secrets": "Secrets a Zone's credentials.secret may name: NAME (the agent's own namespace) or "
                           "NAMESPACE/NAME, comma-separated; any other is not read (default: none)",
    "store_dir": "the directory the Zones' local stores lie in: the agents' --store-dir (else their --state-dir), "
                 "to read (apply: write) the store they publish to (default: the repository, --repo)",
    "local_reload": "after a write that changed a local store's view files, tell the server serving them: none "
                    "(default: nothing is run) or rndc (rndc reload ZONE IN VIEW per changed view; BIND's view "
                    "names are the files' names; docs/getting-started.md)",
    "rndc_config": "rndc's configuration file for --local-reload rndc (rndc -c FILE: the control channel's "
                   "server, port and key; default: rndc's own)",
}
_STORE = "the directory the Zones' local stores lie in: the agents' --store-dir (else their --state-dir), "
STORE_HELP = {  # --store-dir, as each one-shot verb uses it
    "adopt": _STORE + "so the records adopted are those they publish (default: the repository, --repo)",
    "prune-owner": _STORE + "so the records pruned are those they publish (default: the repository, --repo)",
    "groups get": _STORE + "to read the active-groups TXT and the zone they publish (default: the repository, "
                           "--repo; a store there that holds no such zone is said so)",
    "groups": _STORE + "to number the change above the zone's serial and preview it from the zone they publish "
                       "(default: the repository, --repo; --direct writes the TXT there)",
    "failover simulate": _STORE + "to preview the switch from the zone they publish (default: the repository, "
                                  "--repo; a store there that holds no such zone is said so)",
}
FENCES_TITLE = ("what a Zone may name, and what a local store's write runs (docs/providers.md; none given: "
                "nothing beyond the SDKs' defaults, nothing run)")


def setting_metavar(name: str) -> str:
    """How a setting's value is shown in the help: its last word, upper-case, unless said here."""
    return {"local_reload": "none|rndc", "rndc_config": "FILE", "instance": "NAME"}.get(
        name, name.split("_")[-1].upper())


def _settings_parent(title: str, names: tuple[str, ...], helps: dict[str, str]) -> argparse.ArgumentParser:
    """A parent parser of operator settings shared by several verbs, one flag per name (None when
    not given: GITDNS_<NAME> then applies)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group(title)
    for name in names:
        group.add_argument("--" + name.replace("_", "-"), default=None, metavar=setting_metavar(name),
                           help=f"{helps[name]} (GITDNS_{name.upper()})")
    return parent


def provider_fences(verb: str = "") -> argparse.ArgumentParser:
    """The fence flags (docs/providers.md, "What a Zone may name"), --store-dir's help as ``verb`` uses it."""
    from gitdns.providers.fences import SETTINGS

    helps = {**FENCES_HELP, "store_dir": STORE_HELP[verb]} if verb in STORE_HELP else FENCES_HELP
    return _settings_parent(FENCES_TITLE, SETTINGS, helps)


FROM_WORKTREE_HELP = ("act on the work tree as it is: uncommitted files, or a commit not on the desired branch "
                      "(default: refuse them and act on the committed, merged state; docs/cli.md, "
                      "\"Committed state only\")")


def committed_only() -> argparse.ArgumentParser:
    """--from-worktree, shared by the verbs that write to a zone (apply, prune-owner, adopt,
    groups --direct): by default they act on committed, merged state only."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--from-worktree", action="store_true", help=FROM_WORKTREE_HELP)
    return parent


def git_transport() -> argparse.ArgumentParser:
    """The transport flags (docs/cli.md, "Git remotes")."""
    from gitdns.commands.git.remote import TRANSPORT

    return _settings_parent(TRANSPORT_TITLE, TRANSPORT, TRANSPORT_HELP)


def add_repo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", type=Path, default=Path("."), metavar="PATH",
                   help="the desired-state repository (a directory; default: .)")


def add_format(p: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    p.add_argument("--format", choices=choices, default=choices[0], help="output format")


def add_base(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", metavar="REV",
                   help="compare with the zones as the fleet publishes them at REV (the branch the pull request "
                        "merges into: origin/main, HEAD^1 on a merge commit), both built from git alone: no "
                        "record store, no provider, no credentials; health and observed gateways from the status "
                        "branches the repository has (fetch gitdns-status/* first)")
