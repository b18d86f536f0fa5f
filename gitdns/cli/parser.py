"""The `gitdns` command line's parser: every verb, flag and help text (`build_parser`), and what
the shared flag groups give (`fences_of`, `transport_of`).  The flag groups themselves are in
`gitdns.cli.common`, the long-running verbs' parsers in `gitdns.cli.daemons`, the ownership,
audit, failover and cluster-secret verbs' in `gitdns.cli.verbs`.  `gitdns.cli` runs what it parses.

No command module is imported here, so that `gitdns --help` starts fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gitdns.cli.common import add_base, add_format, add_repo, committed_only, git_transport, provider_fences
from gitdns.cli.daemons import add_agent, add_orchestrator
from gitdns.cli.verbs import add_audit_commands, add_cluster_secret, add_failover_commands, add_owner_commands

if TYPE_CHECKING:
    from gitdns.adapters.git.auth import GitAuth
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


def fences_of(args: argparse.Namespace) -> Fences:
    """The fences of a verb's flags (and GITDNS_<NAME> for those not given)."""
    from gitdns.providers.fences import SETTINGS, fences_from

    return fences_from({name: getattr(args, name, None) for name in SETTINGS})


def transport_of(args: argparse.Namespace) -> GitAuth:
    """The GitAuth of a verb's transport flags (and GITDNS_<NAME> for those not given)."""
    from gitdns.commands.git.remote import TRANSPORT, git_auth

    return git_auth({name: getattr(args, name, None) for name in TRANSPORT})


def _add_mode(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=["sync", "upsert-only", "create-only"], default="sync",
                   help="sync: create, update and delete (default); upsert-only: never delete or "
                        "shrink; create-only: only create what is missing")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gitdns",
        description="GitOps DNS reconciler: desired DNS in git, zones reconciled per cluster.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    transport = git_transport()
    fences = provider_fences()

    p = sub.add_parser("validate", help="check the desired state: every problem at once, with file:line",
                       epilog="example: gitdns validate example-repo --format json")
    p.add_argument("path", nargs="?", type=Path, default=Path("."), help="repository path (default: .)")
    add_format(p, ["text", "json"])
    p.add_argument("--probe-allow-ranges", metavar="RANGES",
                   help="CIDR ranges the daemons' probes may reach besides ordinary addresses, as given to them "
                        "(comma-separated; default: GITDNS_PROBE_ALLOW_RANGES, else none): health endpoints and "
                        "probed gateway addresses in them are not refused")

    p = sub.add_parser("plan", help="show what apply would change (nothing is written)", parents=[fences],
                       epilog="examples:\n  gitdns plan --repo example-repo --cluster eu-west-1\n"
                              "  gitdns plan --repo example-repo --all-clusters --format markdown\n"
                              "  gitdns plan --all-clusters --base origin/main --format markdown --exit-code"
                              "   # a pull request's preview in CI: no store, no credentials",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_repo(p)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--cluster", metavar="ID", help="plan as this cluster (id or metadata.name)")
    who.add_argument("--all-clusters", action="store_true",
                     help="simulate every cluster in the repo and show the merged zone")
    add_format(p, ["text", "markdown", "json"])
    p.add_argument("--zone", action="append", default=[], help="only this zone (repeatable)")
    p.add_argument("--exit-code", action="store_true", help="exit 3 when changes are pending")
    p.add_argument("--force", action="store_true", help="plan as if --force were given to apply")
    p.add_argument("--verbose", action="store_true",
                   help="with --all-clusters: every ownership TXT change, each cluster's plan and the merged zone "
                        "(the preview counts ownership TXT per cluster; JSON always carries them)")
    add_base(p)
    _add_mode(p)

    p = sub.add_parser("apply", help="reconcile the cluster's zones now", parents=[fences, committed_only()],
                       epilog="example: gitdns apply --repo example-repo --cluster eu-west-1")
    add_repo(p)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--cluster", metavar="ID", help="apply as this cluster (id or metadata.name)")
    who.add_argument("--all-clusters", action="store_true",
                     help="apply as every cluster in turn (local development and demos)")
    p.add_argument("--zone", action="append", default=[], help="only this zone (repeatable)")
    p.add_argument("--force", action="store_true", help="allow a mass change the safety guard refuses")
    p.add_argument("--dry-run", action="store_true", help="plan only; write nothing")
    add_base(p)
    p.add_argument("--verify", action="store_true",
                   help="re-read and re-plan after a clean apply too (always done after refusals)")
    _add_mode(p)
    add_format(p, ["text", "json"])

    p = sub.add_parser("render", help="render Kuadrant DNSRecord manifests for publisher: kuadrant zones",
                       epilog="example: gitdns render --repo example-repo --cluster eu-west-1 --out out/")
    add_repo(p)
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
    add_repo(zs)
    add_format(zs, ["text", "json"])

    p = sub.add_parser(
        "import", help="write RecordSet YAML from a zone you have (a provider or an RFC 1035 master file)",
        parents=[fences],
        description="Read a zone and write its records as RecordSet YAML, for a repository to take over. "
                    "Records another owner manages (a Kuadrant or gitdns ownership TXT) are listed as managed "
                    "by that owner, not imported; SOA and the apex NS stay the provider's; a type or routing "
                    "the target provider cannot hold is reported by name, never dropped silently. Nothing is "
                    "written to the zone.",
        epilog="examples:\n"
               "  gitdns import example.com --from db.example.com > records/example-com.yaml\n"
               "  gitdns import example-com --from provider --repo . --out records/example-com.yaml\n"
               "  gitdns import example.com --from db.example.com --split --out records/example-com/\n"
               "then: gitdns validate . && gitdns plan --repo . --cluster ID   # no changes to the records",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("zone", help="zone domain, or the Zone's metadata.name in --repo")
    p.add_argument("--from", dest="source", required=True, metavar="SOURCE",
                   help="'provider': the zone's provider as its Zone in --repo configures it (rfc2136 by AXFR, "
                        "route53, google, azure, local); otherwise the path of an RFC 1035 master file "
                        "('-': standard input)")
    p.add_argument("--repo", type=Path, default=None, metavar="PATH",
                   help="the desired-state repository whose Zone names the provider (with --from provider; "
                        "default: .) and the target provider's record types, spec.zone and owner names "
                        "(with a master file: only when given)")
    p.add_argument("--out", type=Path, metavar="PATH",
                   help="write here instead of standard output: a file, or with --split a directory "
                        "(an existing file is never overwritten without --force)")
    p.add_argument("--split", action="store_true",
                   help="one file per name prefix (the label just below the zone apex) instead of one per zone")
    p.add_argument("--name", metavar="NAME",
                   help="metadata.name of the RecordSet (default: from the Zone's name or the domain)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    add_format(p, ["yaml", "json"])

    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                       description="Print a completion script generated from this command line's parser.",
                       epilog="examples:\n"
                              "  source <(gitdns completion bash)                   # this bash session\n"
                              "  gitdns completion bash > ~/.local/share/bash-completion/completions/gitdns\n"
                              "  gitdns completion zsh > \"${fpath[1]}/_gitdns\"\n"
                              "  gitdns completion fish > ~/.config/fish/completions/gitdns.fish",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell to complete for")

    add_agent(sub, transport)
    add_orchestrator(sub, transport)
    add_owner_commands(sub, fences)
    add_audit_commands(sub, transport)
    add_failover_commands(sub, transport, fences)

    p = sub.add_parser("cluster-id", help="print the running cluster's kube-system namespace UID: the owner id, "
                                          "the spec.id of the agent's Cluster in git",
                       epilog="uses in-cluster credentials, else the current kubeconfig context\n\n"
                              "examples:\n"
                              "  gitdns cluster-id                    # the default install's id: the UID\n"
                              "  gitdns cluster-id --instance team-b  # a second install's: <UID>.team-b",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--instance", metavar="NAME", default=None,
                   help="the id of the install with this instance name (the agent's --instance, GITDNS_INSTANCE): "
                        "<UID>.NAME")
    add_cluster_secret(sub)
    return parser
