"""The `gitdns` command line's parser: every verb, flag and help text (`build_parser`), and the
flag groups several verbs share (the git transport, the provider fences, --from-worktree).
`gitdns.cli` runs what it parses.

No command module is imported here, so that `gitdns --help` starts fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gitdns.adapters.gitauth import GitAuth
    from gitdns.providers.fences import Fences


EPILOG = """\
exit codes:
  0  success (plan --exit-code: nothing to change)
  1  the desired state does not validate, or the command failed
  2  bad command line
  3  plan --exit-code: changes are pending
  4  plan, apply: a zone stalled (mass change refused); nothing was (would be) written to it
  5  plan, apply: conflicts were found; those names were (would be) left as they are, the rest applied

examples:
  gitdns validate example-repo
  gitdns plan --repo example-repo --cluster eu-west-1
  gitdns plan --repo example-repo --all-clusters --format markdown
  gitdns apply --repo example-repo --cluster eu-west-1
  gitdns zone show example.com --repo example-repo
"""



# The git transport: one definition for the agent and every verb that talks to a git remote
# (status, history, groups add|remove|set|reconcile); gitdns/commands/gitremote.py builds the GitAuth.
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
    "store_dir": "the directory the Zones' local stores lie in: the agents' --store-dir (else their --state-dir), "
                 "to read (apply: write) the store they publish to (default: the repository, --repo)",
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
FENCES_TITLE = "what a Zone may name (docs/providers.md; none given: nothing beyond the SDKs' defaults)"


def _settings_parent(title: str, names: tuple[str, ...], helps: dict[str, str]) -> argparse.ArgumentParser:
    """A parent parser of operator settings shared by several verbs, one flag per name (None when
    not given: GITDNS_<NAME> then applies)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group(title)
    for name in names:
        group.add_argument("--" + name.replace("_", "-"), default=None, metavar=name.split("_")[-1].upper(),
                           help=f"{helps[name]} (GITDNS_{name.upper()})")
    return parent


def _provider_fences(verb: str = "") -> argparse.ArgumentParser:
    """The fence flags (docs/providers.md, "What a Zone may name"), --store-dir's help as ``verb`` uses it."""
    from gitdns.providers.fences import SETTINGS

    helps = {**FENCES_HELP, "store_dir": STORE_HELP[verb]} if verb in STORE_HELP else FENCES_HELP
    return _settings_parent(FENCES_TITLE, SETTINGS, helps)


def fences_of(args: argparse.Namespace) -> Fences:
    """The fences of a verb's flags (and GITDNS_<NAME> for those not given)."""
    from gitdns.providers.fences import SETTINGS, fences_from

    return fences_from({name: getattr(args, name, None) for name in SETTINGS})


FROM_WORKTREE_HELP = ("act on the work tree as it is: uncommitted files, or a commit not on the desired branch "
                      "(default: refuse them and act on the committed, merged state; docs/cli.md, "
                      "\"Committed state only\")")


def _count(text: str) -> int:
    """A whole number, 0 or more (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: give 0 (all) or more")
    return value


def _committed_only() -> argparse.ArgumentParser:
    """--from-worktree, shared by the verbs that write to a zone (apply, prune-owner, adopt,
    groups --direct): by default they act on committed, merged state only."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--from-worktree", action="store_true", help=FROM_WORKTREE_HELP)
    return parent


def _git_transport() -> argparse.ArgumentParser:
    """The transport flags (docs/cli.md, "Git remotes")."""
    from gitdns.commands.gitremote import TRANSPORT

    return _settings_parent(TRANSPORT_TITLE, TRANSPORT, TRANSPORT_HELP)


def transport_of(args: argparse.Namespace) -> GitAuth:
    """The GitAuth of a verb's transport flags (and GITDNS_<NAME> for those not given)."""
    from gitdns.commands.gitremote import TRANSPORT, git_auth

    return git_auth({name: getattr(args, name, None) for name in TRANSPORT})


def _add_repo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", type=Path, default=Path("."), metavar="PATH",
                   help="the desired-state repository (a directory; default: .)")


def _add_mode(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=["sync", "upsert-only", "create-only"], default="sync",
                   help="sync: create, update and delete (default); upsert-only: never delete or "
                        "shrink; create-only: only create what is missing")


def _add_format(p: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    p.add_argument("--format", choices=choices, default=choices[0], help="output format")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gitdns",
        description="GitOps DNS reconciler: desired DNS in git, zones reconciled per cluster.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    transport = _git_transport()
    fences = _provider_fences()

    p = sub.add_parser("validate", help="check the desired state: every problem at once, with file:line",
                       epilog="example: gitdns validate example-repo --format json")
    p.add_argument("path", nargs="?", type=Path, default=Path("."), help="repository path (default: .)")
    _add_format(p, ["text", "json"])

    p = sub.add_parser("plan", help="show what apply would change (nothing is written)", parents=[fences],
                       epilog="examples:\n  gitdns plan --repo example-repo --cluster eu-west-1\n"
                              "  gitdns plan --repo example-repo --all-clusters --format markdown",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_repo(p)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--cluster", metavar="ID", help="plan as this cluster (id or metadata.name)")
    who.add_argument("--all-clusters", action="store_true",
                     help="simulate every cluster in the repo and show the merged zone")
    _add_format(p, ["text", "markdown", "json"])
    p.add_argument("--zone", action="append", default=[], help="only this zone (repeatable)")
    p.add_argument("--exit-code", action="store_true", help="exit 3 when changes are pending")
    p.add_argument("--force", action="store_true", help="plan as if --force were given to apply")
    _add_mode(p)

    p = sub.add_parser("apply", help="reconcile the cluster's zones now", parents=[fences, _committed_only()],
                       epilog="example: gitdns apply --repo example-repo --cluster eu-west-1")
    _add_repo(p)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--cluster", metavar="ID", help="apply as this cluster (id or metadata.name)")
    who.add_argument("--all-clusters", action="store_true",
                     help="apply as every cluster in turn (local development and demos)")
    p.add_argument("--zone", action="append", default=[], help="only this zone (repeatable)")
    p.add_argument("--force", action="store_true", help="allow a mass change the safety guard refuses")
    p.add_argument("--dry-run", action="store_true", help="plan only; write nothing")
    p.add_argument("--verify", action="store_true",
                   help="re-read and re-plan after a clean apply too (always done after refusals)")
    _add_mode(p)
    _add_format(p, ["text", "json"])

    p = sub.add_parser("render", help="render Kuadrant DNSRecord manifests for publisher: kuadrant zones",
                       epilog="example: gitdns render --repo example-repo --cluster eu-west-1 --out out/")
    _add_repo(p)
    p.add_argument("--cluster", metavar="ID", required=True)
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument("--namespace", default="default", help="namespace of the DNSRecords (default: default)")
    p.add_argument("--templates", type=Path, default=None, metavar="DIR", help="override templates")
    p.add_argument("--all-zones", action="store_true",
                   help="render every zone, not only those whose publisher is kuadrant")

    p = sub.add_parser("zone", help="inspect a zone")
    zsub = p.add_subparsers(dest="zone_command", metavar="SUBCOMMAND", required=True)
    zs = zsub.add_parser("show", help="what the zone publishes and who owns each value", parents=[fences],
                         epilog="example: gitdns zone show example.com --repo example-repo")
    zs.add_argument("zone", help="zone domain or Zone metadata.name")
    _add_repo(zs)
    _add_format(zs, ["text", "json"])

    _add_agent(sub, transport)
    _add_orchestrator(sub, transport)
    _add_owner_commands(sub, fences)
    _add_audit_commands(sub, transport)
    _add_failover_commands(sub, transport, fences)

    sub.add_parser("cluster-id", help="print the running cluster's kube-system namespace UID",
                   epilog="uses in-cluster credentials, else the current kubeconfig context")
    _add_cluster_secret(sub)
    return parser


AGENT_HELP = {
    "repo": "desired repository: a path, file://, https:// or ssh URL (GITDNS_REPO)",
    "cluster": "this cluster: Cluster id or metadata.name (GITDNS_CLUSTER)",
    "branch": "desired branch (default: main)",
    "path": "subdirectory holding the desired YAML (default: the repository root)",
    "poll_interval": "seconds (or 30s, 5m) between remote checks, ±5%% jitter (default: 60)",
    "listen": "HTTP address of the webhook and /healthz /readyz (default: 0.0.0.0:8080; '' disables)",
    "admin_listen": "HTTP address of /status /metrics /healthz /readyz (default: 127.0.0.1:9090; '' disables; "
                    "the same as --listen serves everything there)",
    "state_dir": "git caches and the local record store (default: /var/lib/gitdns)",
    "git_timeout": "timeout of every git operation (default: 30s)",
    "verify_ssh_signers": "allowed_signers file: refuse heads without a trusted SSH signature",
    "verify_gpg_keys": "exported public keys: refuse heads without a trusted GPG signature",
    "allow_rollback": "accept a head that is not a descendant of the applied revision",
    "webhook_github_secret_file": "file holding the GitHub webhook secret",
    "webhook_gitlab_token_file": "file holding the GitLab webhook secret token",
    "webhook_gitlab_signing_file": "file holding the GitLab webhook signing token",
    "max_file_bytes": "a desired-state file larger than this is not read (default 4MiB; e.g. 8MiB)",
    "max_commit_bytes": "YAML read per commit at most (default 5MiB; raise the memory limit with it)",
    "webhook_gitea_secret_file": "file holding the Gitea webhook secret",
    "status": "push the status branch gitdns-status/<cluster-id> (true|false, default: true)",
    "status_repo": "where status branches go (default: the desired repository)",
    "lease": "one writer per owner: auto (Kubernetes Lease in a cluster, else a lock TXT) | kubernetes | txt | none",
    "lease_duration": "lease duration (default: 60s)",
    "pod_name": "this pod's name (downward API), the lease holder identity",
    "pod_namespace": "this pod's namespace (downward API), where the Lease lives",
    "validate_delay": "first validation after a write, plus up to as much jitter (default: 5s)",
    "quiet_period": "validation interval once stable (default: 15m)",
    "heartbeat_interval": "how often the heartbeat TXT is refreshed (default: 5m)",
    "prune_stale_owners_after": "opt-in: prune owners no Cluster in git names after this long without heartbeat",
    "log_format": "text | json (default: text)",
    "log_level": "debug | info | warning | error (default: info)",
    "once": "run one cycle, print the result and exit (0 when Ready)",
    "mode": "default | primary | remote (delegation: docs/delegation.md); overrides the Cluster's spec.mode in git "
            "(GITDNS_MODE, DNS_MODE, or the --mode-configmap); default: as git says",
    "mode_configmap": "ConfigMap in the pod namespace whose DNS_MODE / GITDNS_MODE key sets the mode "
                      "(default: gitdns-config; absent is fine)",
    "stale_after": "primary: withdraw a remote whose status is older than this many of its poll intervals "
                   "(default: 6)",
    "kube_delegation": "primary: also merge Kuadrant DNSRecords of remote clusters reached through "
                       "kubeconfig Secrets labelled --cluster-secret-label",
    "cluster_secret_namespace": "where kubeconfig Secrets of remote clusters live (default: kuadrant-system)",
    "cluster_secret_label": "label marking a kubeconfig Secret (default: kuadrant.io/multicluster-kubeconfig)",
    **FENCES_HELP,
    "store_dir": "the directory every local store's settings.path lies in (default: --state-dir)",
}



def _add_agent(sub: argparse._SubParsersAction[argparse.ArgumentParser], transport: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "agent", help="run the per-cluster agent: follow git, reconcile zones, commit status back",
        parents=[transport],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="settings come from flags, then GITDNS_<NAME> environment variables, then --config FILE\n"
               "(keys in camelCase: pollInterval, stateDir, ...), in that precedence.\n\n"
               "examples:\n"
               "  gitdns agent --repo https://git.example.com/platform/dns.git --cluster eu-west-1 \\\n"
               "      --token-file /var/run/gitdns/token --state-dir /var/lib/gitdns\n"
               "  gitdns agent --repo ./example-repo --cluster eu-west-1 --state-dir /tmp/gitdns --once")
    p.add_argument("--config", metavar="FILE", help="YAML config file (GITDNS_CONFIG)")
    for name, text in AGENT_HELP.items():
        flag = "--" + name.replace("_", "-")
        if name in ("once", "allow_rollback", "kube_delegation"):
            p.add_argument(flag, action="store_const", const=True, default=None, help=text)
        else:
            p.add_argument(flag, default=None, metavar=name.split("_")[-1].upper(), help=text)


ORCHESTRATOR_HELP = {
    "repo": "desired repository: a directory or a git URL (required)",
    "node_pool": "the NodePool to serve, one orchestrator each (required)",
    "out": "write the files into DIR, a volume shared with CoreDNS (this or --configmap)",
    "configmap": "write the files into this existing ConfigMap's keys (this or --out)",
    "listen": "HTTP address of /healthz /readyz (default: 0.0.0.0:8080; '' disables)",
    "admin_listen": "HTTP address of /status /metrics /healthz /readyz (default: 127.0.0.1:9090; '' disables; "
                    "the same as --listen serves everything there)",
    "state_dir": "git cache, lock file and (outside a cluster) secrets/ (default: /var/lib/gitdns)",
    "poll_interval": "desired-state poll interval (default: 30s)",
    "lease": "one orchestrator per pool: auto (a Kubernetes Lease for --configmap in a cluster, else an flock in "
             "--state-dir) | kubernetes | file | none",
    "lease_duration": "Kubernetes Lease duration (default: 30s)",
    "discover_nodes": "add Kubernetes Nodes matching the pool's discovery.labelSelector (InternalIP; true|false)",
    "branch": "desired branch of a git URL (default: main)",
    "path": "subdirectory holding the desired YAML",
    "git_timeout": "timeout of every git operation (default: 30s)",
    "signal_pid_file": "SIGHUP the process named in FILE after a change (dnsmasq)",
    "coredns_dir": "where CoreDNS sees the files, for the hosts paths in the snippet (default: /etc/coredns/custom)",
    "pod_name": "the Lease holder's identity (default: POD_NAME, else <hostname>-<pid>)",
    "pod_namespace": "the orchestrator's own namespace: its Lease and headersSecret (default: POD_NAMESPACE, "
                     "else the service account's namespace, else gitdns-system)",
    "log_level": "debug | info | warning | error (default: info)",
    "once": "probe once, deliver, exit (0 when delivered)",
}


def _add_orchestrator(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                      transport: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "orchestrator", help="health-check a node pool and publish its tenants' CoreDNS hosts files (docs/health.md)",
        parents=[transport],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="every setting comes from its flag, else the GITDNS_<NAME> environment variable\n"
               "(--node-pool: GITDNS_NODE_POOL); the git transport is the agent's (docs/cli.md, \"Git remotes\").\n"
               "docs/health.md describes the delivery paths, the lease, readiness and the failover time budget.\n\n"
               "examples:\n"
               "  gitdns orchestrator --repo https://git.example.com/platform/dns.git --node-pool edge \\\n"
               "      --token-file /var/run/gitdns/token --out /etc/coredns/custom   # CoreDNS sidecar\n"
               "  gitdns orchestrator --repo ./example-repo --node-pool edge --configmap kube-system/coredns-custom")
    where = p.add_mutually_exclusive_group()  # --out | --configmap: the settings check the result too
    for name, text in ORCHESTRATOR_HELP.items():
        flag, text = "--" + name.replace("_", "-"), f"{text} (GITDNS_{name.upper()})".replace("%", "%%")
        if name in ("once", "discover_nodes"):
            p.add_argument(flag, action="store_const", const=True, default=None, help=text)
        else:
            (where if name in ("out", "configmap") else p).add_argument(flag, default=None, metavar=_metavar(name),
                                                                         help=text)

    p = sub.add_parser("lease-name", help="print the Kubernetes Lease name to allow in RBAC (docs/health.md)",
                       epilog="examples:\n"
                              "  gitdns lease-name --node-pool edge    # the orchestrator's: gitdns-orchestrator-edge\n"
                              "  gitdns lease-name --cluster $(gitdns cluster-id)   # the agent's",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--node-pool", metavar="POOL", help="the orchestrator's Lease for this node pool")
    who.add_argument("--cluster", metavar="ID", help="the agent's Lease for this Cluster id (spec.id, the "
                                                      "kube-system namespace UID `gitdns cluster-id` prints)")


def _metavar(name: str) -> str:
    return {"repo": "URL|PATH", "node_pool": "NAME", "out": "DIR", "configmap": "NS/NAME",
            "listen": "ADDR", "admin_listen": "ADDR", "state_dir": "DIR", "signal_pid_file": "FILE",
            "coredns_dir": "DIR", "lease": "KIND"}.get(name, name.split("_")[-1].upper())


def _add_owner_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                        fences: argparse.ArgumentParser) -> None:
    p = sub.add_parser("owners",
                       help="list a zone's owners: kind (gitdns, dns-operator, legacy, unknown), records, "
                            "heartbeat, whether git knows them",
                       parents=[fences], epilog="example: gitdns owners example.com --repo example-repo")
    p.add_argument("zone", help="zone domain or Zone metadata.name")
    _add_repo(p)
    _add_format(p, ["text", "json"])

    p = sub.add_parser("prune-owner", help="remove a dead cluster's records and ownership TXT from a zone",
                       parents=[_provider_fences("prune-owner"), _committed_only()],
                       epilog="shows the plan and asks for confirmation (or --yes). Only this owner's values\n"
                              "go; shared records keep every other owner's values.\n"
                              "example: gitdns prune-owner 5e1f...-uid --zone example.com --repo example-repo",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("owner", help="the owner id (a cluster id) to remove")
    p.add_argument("--zone", required=True, help="zone domain or Zone metadata.name")
    _add_repo(p)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true", help="prune even though a Cluster in git names this owner")

    p = sub.add_parser("adopt", help="take over foreign records (records without an ownership TXT)",
                       parents=[_provider_fences("adopt"), _committed_only()],
                       epilog="the cluster's next apply then manages them like its own.\n"
                              "example: gitdns adopt www.example.com --zone example.com --cluster eu-west-1 "
                              "--repo example-repo",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="+", help="record names to adopt")
    p.add_argument("--zone", required=True, help="zone domain or Zone metadata.name")
    p.add_argument("--cluster", required=True, metavar="ID", help="the cluster that takes them over")
    p.add_argument("--type", dest="rtype", default=None, help="only this record type")
    _add_repo(p)
    p.add_argument("--force", action="store_true",
                   help="adopt records the cluster's desired state does not contain (its next apply deletes them)")


def _add_audit_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                        transport: argparse.ArgumentParser) -> None:
    p = sub.add_parser("status", help="aggregate every cluster's status branch (exit 0 when the fleet is ready)",
                       parents=[transport],
                       epilog="reads every gitdns-status/* branch and the desired branch of the repository: per\n"
                              "cluster the applied revision and when, the lag behind the head, the last error;\n"
                              "clusters git no longer names are Retired (with when they were removed).\n"
                              "exit codes: 0 every cluster and policy is Ready (with --revision: every cluster\n"
                              "applied it; a retired cluster is not a failure), 1 otherwise (or on error).\n"
                              "example: gitdns status --repo https://git.example.com/platform/dns.git\n"
                              "         gitdns status --revision 3f2a9c1 --repo ...",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", default=".", metavar="URL|PATH",
                   help="repository holding the status branches (default: .). In a local repository: "
                        "refs/heads/gitdns-status/*, else its remote's refs/remotes/<remote>/gitdns-status/*, "
                        "as of the last fetch")
    p.add_argument("--cluster", metavar="ID", help="only this cluster (id or metadata.name)")
    p.add_argument("--branch", default="main",
                   help="desired branch (default: main; in a local repository <remote>/<branch>, else the local "
                        "branch)")
    p.add_argument("--revision", metavar="REV",
                   help="where this desired commit stands in each cluster (a sha or an abbreviation, a tag, HEAD "
                        "or the branch): applied / pending / held / failed / retired")
    _add_format(p, ["text", "json"])
    p.add_argument("--state-dir", metavar="DIR", help="keep the git cache here (default: a temporary directory)")

    p = sub.add_parser("history", help="who changed a name (or every name holding a value), when, and where it applied",
                       parents=[transport],
                       epilog="walks the desired branch and every gitdns-status/* branch (docs/cli.md).\n"
                              "example: gitdns history api.example.com --repo https://git.example.com/dns.git",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", metavar="NAME|VALUE",
                   help="a DNS name or listener host (its klb names included), or an address or target")
    p.add_argument("--repo", default=".", metavar="URL|PATH", help="the desired repository (default: .)")
    p.add_argument("--branch", default="main", help="desired branch (default: main)")
    p.add_argument("--path", default="", metavar="SUBDIR", help="subdirectory holding the desired YAML")
    p.add_argument("--since", metavar="DATE", help="only changes that reached the branch after DATE (a merged "
                   "commit: when its merge did); git's date formats, a bare day is 00:00 UTC")
    p.add_argument("--until", metavar="DATE", help="only changes that reached the branch before DATE "
                   "(a bare day: until 23:59:59 UTC)")
    p.add_argument("--max-commits", type=_count, default=0, metavar="N",
                   help="newest N YAML commits (default: all)")
    _add_format(p, ["text", "json"])
    p.add_argument("--state-dir", metavar="DIR", help="keep the git cache here (default: a temporary directory)")


def _add_failover_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                           transport: argparse.ArgumentParser, fences: argparse.ArgumentParser) -> None:
    p = sub.add_parser("groups", help="active failover groups of a zone (docs/failover.md): get, change through a PR",
                       epilog="add/remove/set edit the ActiveGroups file, bump its serial and commit on a new\n"
                              "branch (gitdns/groups-<zone>-<serial>) with the merged-zone plan for the pull\n"
                              "request; --direct writes the zone's TXT instead (break-glass, git untouched);\n"
                              "reconcile brings git level with the zone afterwards. docs/failover.md.\n"
                              "example: gitdns groups set example.com site-b --repo example-repo --push",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = p.add_subparsers(dest="groups_command", metavar="SUBCOMMAND", required=True)
    for name, text in (("get", "git's active groups, the zone's TXT, and whether they diverge"),
                       ("add", "make groups active (the others stay as they are)"),
                       ("remove", "make groups inactive"), ("set", "make exactly these groups active"),
                       ("reconcile", "after --direct: write git level with the zone (a new branch)")):
        # every verb talks to origin: get and the changes fetch first; the status branches (health), --push
        store = _provider_fences("groups get" if name == "get" else "groups")
        g = gsub.add_parser(name, help=text, parents=[transport, store] + (
            [_committed_only()] if name in ("add", "remove", "set") else []))
        g.add_argument("zone", help="zone domain or Zone metadata.name")
        if name in ("add", "remove", "set"):
            g.add_argument("groups", nargs="*" if name == "set" else "+", metavar="GROUP",
                           help="group names (set with none: every group active)")
        _add_repo(g)
        if name == "get":
            continue
        g.add_argument("--push", action="store_true", help="push the branch to the origin remote")
        g.add_argument("--branch", metavar="NAME", help="branch name (default: gitdns/groups-<zone>-<serial>)")
        g.add_argument("--message", metavar="TEXT", help="commit message")
        if name == "reconcile":
            continue
        g.add_argument("--force", action="store_true", help="activate a group without a healthy endpoint")
        g.add_argument("--direct", action="store_true",
                       help="break-glass: write the zone's TXT directly (git unchanged)")
        g.add_argument("--provider-type", metavar="TYPE", help="--direct: override the Zone's provider type")
        g.add_argument("--provider-setting", action="append", default=[], metavar="KEY=VALUE",
                       help="--direct: override a provider setting (repeatable)")
        g.add_argument("--credentials-env", metavar="NAME", help="--direct: credentials from this variable")
        g.add_argument("--credentials-file", metavar="PATH", help="--direct: credentials from this file")

    p = sub.add_parser("failover", help="preview an active-groups switch for every cluster (docs/failover.md)")
    fsub = p.add_subparsers(dest="failover_command", metavar="SUBCOMMAND", required=True)
    f = fsub.add_parser("simulate", help="the zone after switching to GROUP(s): endpoints added and removed",
                        parents=[_provider_fences("failover simulate")],
                        epilog="example: gitdns failover simulate example.com --to site-b --repo example-repo")
    f.add_argument("zone", help="zone domain or Zone metadata.name")
    f.add_argument("--to", nargs="+", required=True, metavar="GROUP", help="the groups active after the switch")
    _add_repo(f)
    _add_format(f, ["text", "markdown"])


CLUSTER_SECRET_HELP = "create, on a primary, the kubeconfig Secret through which it reads a remote cluster's DNSRecords"
CLUSTER_SECRET_EPILOG = """\
On the remote: a ServiceAccount bound to the ClusterRole gitdns-remote-cluster (DNSRecords
get/list/watch, their status get/patch/update) and a long-lived token Secret for it.
On the primary: the Secret NAME labelled kuadrant.io/multicluster-kubeconfig=true holding a
kubeconfig with that token.  Running it again changes nothing (or updates what differs).

examples:
  gitdns add-cluster-secret remote-eu --remote-context kind-eu --primary-context kind-primary
  gitdns add-cluster-secret remote-eu --remote-context kind-eu --primary-context kind-primary \\
      --remote-server https://172.18.0.3:6443     # the address the primary reaches the remote at
  gitdns add-cluster-secret remote-eu --remote-context kind-eu --primary-context kind-primary --dry-run
"""


def _add_cluster_secret(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from gitdns.commands.clusters import (
        DEFAULT_LABEL,
        DEFAULT_REMOTE_NAMESPACE,
        DEFAULT_SECRET_NAMESPACE,
        DEFAULT_SERVICE_ACCOUNT,
    )

    p = sub.add_parser("add-cluster-secret", help=CLUSTER_SECRET_HELP, epilog=CLUSTER_SECRET_EPILOG,
                       description=CLUSTER_SECRET_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="the cluster Secret's name on the primary: how the primary names this remote")
    p.add_argument("--remote-context", required=True, metavar="CONTEXT",
                   help="kubeconfig context of the remote cluster (where the ServiceAccount is made)")
    p.add_argument("--primary-context", metavar="CONTEXT",
                   help="kubeconfig context of the primary cluster (where the Secret goes; default: current)")
    p.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--remote-server", metavar="URL",
                   help="API server URL the primary uses to reach the remote (default: the remote context's)")
    p.add_argument("--remote-namespace", default=DEFAULT_REMOTE_NAMESPACE, metavar="NS",
                   help=f"namespace of the ServiceAccount on the remote (default: {DEFAULT_REMOTE_NAMESPACE})")
    p.add_argument("--service-account", default=DEFAULT_SERVICE_ACCOUNT, metavar="NAME",
                   help=f"ServiceAccount on the remote (default: {DEFAULT_SERVICE_ACCOUNT})")
    p.add_argument("--cluster-secret-namespace", default=DEFAULT_SECRET_NAMESPACE, metavar="NS",
                   help=f"namespace of the cluster Secret on the primary (default: {DEFAULT_SECRET_NAMESPACE}; "
                        "the agent's --cluster-secret-namespace)")
    p.add_argument("--cluster-secret-label", default=DEFAULT_LABEL, metavar="KEY",
                   help=f"label set to \"true\" on the Secret (default: {DEFAULT_LABEL}; the agent's "
                        "--cluster-secret-label)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for the token controller to fill the token (default: 60)")
    p.add_argument("--dry-run", action="store_true", help="print the manifests (token redacted); change nothing")
