"""The parsers of the zone-ownership verbs (`owners`, `prune-owner`, `adopt`), the audit verbs
(`status`, `history`), the failover verbs (`groups`, `failover simulate`) and
`add-cluster-secret`.  `gitdns.cli.parser.build_parser` adds them.

No command module is imported at import time, so that `gitdns --help` starts fast.
"""

from __future__ import annotations

import argparse

from gitdns.cli.common import add_base, add_format, add_repo, committed_only, provider_fences


def _count(text: str) -> int:
    """A whole number, 0 or more (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: give 0 (all) or more")
    return value


def add_owner_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                        fences: argparse.ArgumentParser) -> None:
    p = sub.add_parser("owners",
                       help="list a zone's owners: kind (gitdns, dns-operator, legacy, unknown), records, "
                            "heartbeat, whether git knows them",
                       parents=[fences], epilog="example: gitdns owners example.com --repo example-repo")
    p.add_argument("zone", help="zone domain or Zone metadata.name")
    add_repo(p)
    add_format(p, ["text", "json"])

    p = sub.add_parser("prune-owner", help="remove a dead cluster's records and ownership TXT from a zone",
                       parents=[provider_fences("prune-owner"), committed_only()],
                       epilog="shows the plan and asks for confirmation (or --yes). Only this owner's values\n"
                              "go; shared records keep every other owner's values.\n"
                              "example: gitdns prune-owner 5e1f...-uid --zone example.com --repo example-repo",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("owner", help="the owner id (a cluster id) to remove")
    p.add_argument("--zone", required=True, help="zone domain or Zone metadata.name")
    add_repo(p)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--force", action="store_true", help="prune even though a Cluster in git names this owner")

    p = sub.add_parser("adopt", help="take over foreign records (records without an ownership TXT)",
                       parents=[provider_fences("adopt"), committed_only()],
                       epilog="the cluster's next apply then manages them like its own.\n"
                              "example: gitdns adopt www.example.com --zone example.com --cluster eu-west-1 "
                              "--repo example-repo\n"
                              "         gitdns adopt --all --zone example.com --cluster eu-west-1 --repo .   "
                              "# after gitdns import\n",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="record names to adopt (or --all)")
    p.add_argument("--all", dest="every", action="store_true",
                   help="every foreign record the cluster's desired state holds (e.g. after `gitdns import`)")
    p.add_argument("--zone", required=True, help="zone domain or Zone metadata.name")
    p.add_argument("--cluster", required=True, metavar="ID", help="the cluster that takes them over")
    p.add_argument("--type", dest="rtype", default=None, help="only this record type")
    add_repo(p)
    p.add_argument("--force", action="store_true",
                   help="adopt records the cluster's desired state does not contain (its next apply deletes them)")


def add_audit_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
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
    add_format(p, ["text", "json"])
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
    add_format(p, ["text", "json"])
    p.add_argument("--state-dir", metavar="DIR", help="keep the git cache here (default: a temporary directory)")


def add_groups_log(gsub: argparse._SubParsersAction[argparse.ArgumentParser],
                   transport: argparse.ArgumentParser) -> None:
    g = gsub.add_parser("log", help="every switch of a zone's active groups: who, when, where it applied",
                        parents=[transport],
                        epilog="walks the desired branch and every gitdns-status/* branch, as history does\n"
                               "(docs/cli.md). example: gitdns groups log example.com --repo "
                               "https://git.example.com/dns.git",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("zone", help="zone domain or Zone metadata.name")
    g.add_argument("--repo", default=".", metavar="URL|PATH", help="the desired repository (default: .)")
    g.add_argument("--branch", default="main", help="desired branch (default: main)")
    g.add_argument("--path", default="", metavar="SUBDIR", help="subdirectory holding the desired YAML")
    add_format(g, ["text", "json"])
    g.add_argument("--state-dir", metavar="DIR", help="keep the git cache here (default: a temporary directory)")


def add_failover_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
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
        store = provider_fences("groups get" if name == "get" else "groups")
        g = gsub.add_parser(name, help=text, parents=[transport, store] + (
            [committed_only()] if name in ("add", "remove", "set") else []))
        g.add_argument("zone", help="zone domain or Zone metadata.name")
        if name in ("add", "remove", "set"):
            g.add_argument("groups", nargs="*" if name == "set" else "+", metavar="GROUP",
                           help="group names (set with none: every group active)")
        add_repo(g)
        if name == "get":
            add_format(g, ["text", "json"])
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
    add_groups_log(gsub, transport)

    p = sub.add_parser("failover", help="preview an active-groups switch for every cluster (docs/failover.md)")
    fsub = p.add_subparsers(dest="failover_command", metavar="SUBCOMMAND", required=True)
    f = fsub.add_parser("simulate", help="the zone after switching to GROUP(s): endpoints added and removed",
                        parents=[provider_fences("failover simulate")],
                        epilog="example: gitdns failover simulate example.com --to site-b --repo example-repo")
    f.add_argument("zone", help="zone domain or Zone metadata.name")
    f.add_argument("--to", nargs="+", required=True, metavar="GROUP", help="the groups active after the switch")
    add_repo(f)
    add_format(f, ["text", "markdown", "json"])
    add_base(f)


CLUSTER_SECRET_HELP = "create, on a primary, the kubeconfig Secret through which it reads a remote cluster's DNSRecords"
CLUSTER_SECRET_EPILOG = """\
On the remote: a ServiceAccount bound to the ClusterRole gitdns-remote-cluster (DNSRecords
list, their status patch: exactly what a primary calls) and a long-lived token Secret for it.
On the primary: the Secret NAME labelled kuadrant.io/multicluster-kubeconfig=true holding a
kubeconfig with that token.  Running it again changes nothing (or updates what differs).

examples:
  gitdns add-cluster-secret remote-eu --remote-context kind-eu --primary-context kind-primary
  gitdns add-cluster-secret remote-eu --remote-context kind-eu --primary-context kind-primary \\
      --remote-server https://172.18.0.3:6443     # the address the primary reaches the remote at
  gitdns add-cluster-secret remote-eu --remote-context kind-eu --primary-context kind-primary --dry-run
"""


def add_cluster_secret(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
