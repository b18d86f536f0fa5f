"""The `gitdns` command line.  The only module that prints.

Imports are kept inside the command handlers so that `gitdns --help` starts fast and never
loads a provider SDK, jinja2, jsonschema or ruamel.yaml.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gitdns.core.desired import Desired
    from gitdns.core.plan import Plan
    from gitdns.reconcile.zonepass import ZoneOutcome

EXIT_OK = 0
EXIT_ERROR = 1  # the desired state does not validate, or a command failed
EXIT_USAGE = 2  # bad command line (argparse)
EXIT_CHANGES = 3  # plan --exit-code: changes are pending
EXIT_STALLED = 4  # apply: a zone stalled (mass change refused); nothing written there
EXIT_CONFLICTS = 5  # apply: the rest applied, conflicting names left as they were

EPILOG = """\
exit codes:
  0  success (plan --exit-code: nothing to change)
  1  the desired state does not validate, or the command failed
  2  bad command line
  3  plan --exit-code: changes are pending
  4  apply: a zone stalled (mass change refused); nothing was written to it
  5  apply: conflicts were found; those names were left as they are, the rest applied

examples:
  gitdns validate example-repo
  gitdns plan --repo example-repo --cluster eu-west-1
  gitdns plan --repo example-repo --all-clusters --format markdown
  gitdns apply --repo example-repo --cluster eu-west-1
  gitdns zone show example.com --repo example-repo
"""


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

    p = sub.add_parser("validate", help="check the desired state: every problem at once, with file:line",
                       epilog="example: gitdns validate example-repo --format json")
    p.add_argument("path", nargs="?", type=Path, default=Path("."), help="repository path (default: .)")
    _add_format(p, ["text", "json"])

    p = sub.add_parser("plan", help="show what apply would change (nothing is written)",
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

    p = sub.add_parser("apply", help="reconcile the cluster's zones now",
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
    zs = zsub.add_parser("show", help="what the zone publishes and who owns each value",
                         epilog="example: gitdns zone show example.com --repo example-repo")
    zs.add_argument("zone", help="zone domain or Zone metadata.name")
    _add_repo(zs)
    _add_format(zs, ["text", "json"])

    _add_agent(sub)
    _add_orchestrator(sub)
    _add_owner_commands(sub)
    _add_audit_commands(sub)
    _add_failover_commands(sub)

    sub.add_parser("cluster-id", help="print the running cluster's kube-system namespace UID",
                   epilog="uses in-cluster credentials, else the current kubeconfig context")
    return parser


AGENT_HELP = {
    "repo": "desired repository: a path, file://, https:// or ssh URL (GITDNS_REPO)",
    "cluster": "this cluster: Cluster id or metadata.name (GITDNS_CLUSTER)",
    "branch": "desired branch (default: main)",
    "path": "subdirectory holding the desired YAML (default: the repository root)",
    "poll_interval": "seconds (or 30s, 5m) between remote checks, ±5%% jitter (default: 60)",
    "listen": "HTTP address for /healthz /readyz /status /metrics /webhook (default: 0.0.0.0:8080; '' disables)",
    "state_dir": "git caches and the local record store (default: /var/lib/gitdns)",
    "git_timeout": "timeout of every git operation (default: 30s)",
    "token_env": "name of an environment variable holding the HTTPS token",
    "token_file": "file holding the HTTPS token",
    "ssh_key": "SSH private key for ssh:// remotes",
    "known_hosts": "pinned known_hosts file for ssh:// remotes",
    "verify_ssh_signers": "allowed_signers file: refuse heads without a trusted SSH signature",
    "verify_gpg_keys": "exported public keys: refuse heads without a trusted GPG signature",
    "allow_rollback": "accept a head that is not a descendant of the applied revision",
    "webhook_github_secret_file": "file holding the GitHub webhook secret",
    "webhook_gitlab_token_file": "file holding the GitLab webhook secret token",
    "webhook_gitlab_signing_file": "file holding the GitLab webhook signing token",
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
    "mode": "default | primary | remote (seed 001); overrides the Cluster's spec.mode in git "
            "(GITDNS_MODE, DNS_MODE, or the --mode-configmap); default: as git says",
    "mode_configmap": "ConfigMap in the pod namespace whose DNS_MODE / GITDNS_MODE key sets the mode "
                      "(default: gitdns-config; absent is fine)",
    "stale_after": "primary: withdraw a remote whose status is older than this many of its poll intervals "
                   "(default: 6)",
    "kube_delegation": "primary: also merge Kuadrant DNSRecords of remote clusters reached through "
                       "kubeconfig Secrets labelled --cluster-secret-label",
    "cluster_secret_namespace": "where kubeconfig Secrets of remote clusters live (default: kuadrant-system)",
    "cluster_secret_label": "label marking a kubeconfig Secret (default: kuadrant.io/multicluster-kubeconfig)",
}


def _add_agent(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "agent", help="run the per-cluster agent: follow git, reconcile zones, commit status back",
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


def _add_orchestrator(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "orchestrator", help="health-check a node pool and publish its tenants' CoreDNS hosts files (seed 004)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="docs/health.md describes the delivery paths, the lease and the failover time budget.\n\n"
               "examples:\n"
               "  gitdns orchestrator --repo https://git.example.com/platform/dns.git --node-pool edge \\\n"
               "      --out /etc/coredns/custom          # sidecar of the CoreDNS pod (recommended)\n"
               "  gitdns orchestrator --repo ./example-repo --node-pool edge --configmap kube-system/coredns-custom")
    p.add_argument("--repo", required=True, metavar="URL|PATH", help="desired repository: a directory or a git URL")
    p.add_argument("--node-pool", required=True, metavar="NAME", help="the NodePool to serve (one orchestrator each)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="DIR", help="write the files into DIR (a volume shared with CoreDNS)")
    where.add_argument("--configmap", metavar="NS/NAME", help="write the files into this ConfigMap's keys")
    p.add_argument("--listen", default="0.0.0.0:8080", metavar="ADDR",
                   help="HTTP /healthz /readyz /status /metrics (default: 0.0.0.0:8080; '' disables)")
    p.add_argument("--state-dir", default="/var/lib/gitdns", metavar="DIR", help="git cache and the lock file")
    p.add_argument("--poll-interval", default="30s", metavar="S", help="desired-state poll interval (default: 30s)")
    p.add_argument("--lease", default="auto", choices=["auto", "kubernetes", "file", "none"],
                   help="one orchestrator per pool: auto = Kubernetes Lease for --configmap in a cluster, "
                        "else an flock in --state-dir")
    p.add_argument("--lease-duration", default="30s", metavar="S", help="Kubernetes Lease duration (default: 30s)")
    p.add_argument("--discover-nodes", action="store_true",
                   help="add Kubernetes Nodes matching the pool's discovery.labelSelector (InternalIP)")
    p.add_argument("--branch", default="main", help="desired branch of a git URL (default: main)")
    p.add_argument("--path", default="", help="subdirectory holding the desired YAML")
    p.add_argument("--signal-pid-file", metavar="FILE", help="SIGHUP this process after a change (dnsmasq)")
    p.add_argument("--coredns-dir", default="/etc/coredns/custom", metavar="DIR",
                   help="where CoreDNS sees the files, for the hosts paths in the snippet")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--once", action="store_true", help="probe once, deliver, exit (0 when delivered)")


def _add_owner_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("owners", help="list a zone's owners, their heartbeats and whether git knows them",
                       epilog="example: gitdns owners example.com --repo example-repo")
    p.add_argument("zone", help="zone domain or Zone metadata.name")
    _add_repo(p)
    _add_format(p, ["text", "json"])

    p = sub.add_parser("prune-owner", help="remove a dead cluster's records and ownership TXT from a zone",
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


def _zone_and_provider(desired: Desired, ident: str, repo: Path) -> tuple[object, object]:
    from gitdns.errors import ConfigError
    from gitdns.reconcile.engine import default_factory

    zone = next((z for z in desired.state.zones if ident in (z.name, z.domain)), None)
    if zone is None:
        known = ", ".join(sorted(z.domain for z in desired.state.zones)) or "none"
        raise ConfigError(f"zone {ident}: not in {repo} (known: {known})")
    return zone, default_factory(repo)(zone)


def cmd_owners(args: argparse.Namespace) -> int:
    import json
    from datetime import UTC, datetime

    from gitdns.core.model import Zone
    from gitdns.core.owners import owners
    from gitdns.providers.base import Provider
    from gitdns.reconcile.engine import load

    desired = load(args.repo)
    zone, provider = _zone_and_provider(desired, args.zone, args.repo)
    assert isinstance(zone, Zone) and isinstance(provider, Provider)
    names = {c.id: c.name for c in desired.state.clusters}
    rows = owners(provider.read(zone.domain), set(names))
    if args.format == "json":
        print(json.dumps([{"owner": r.owner, "cluster": names.get(r.owner), "records": r.records,
                           "groups": list(r.groups), "revisions": list(r.revisions),
                           "heartbeat": r.heartbeat, "knownToGit": r.known} for r in rows],
                         indent=2, sort_keys=True))
        return EXIT_OK
    print(f"zone {zone.domain}: {len(rows)} owner(s)")
    for r in rows:
        beat = datetime.fromtimestamp(r.heartbeat, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if r.heartbeat else "never"
        who = names.get(r.owner, "NOT IN GIT")
        print(f"{r.owner}  {who}  records={r.records}  groups={','.join(r.groups) or '-'}  heartbeat={beat}")
    return EXIT_OK


def cmd_prune_owner(args: argparse.Namespace) -> int:
    from gitdns.core import planfmt
    from gitdns.core.model import Zone
    from gitdns.core.plan import Intent
    from gitdns.core.planner import plan as make_plan
    from gitdns.providers.base import Provider
    from gitdns.reconcile.engine import load, policy_for_zone

    desired = load(args.repo)
    zone, provider = _zone_and_provider(desired, args.zone, args.repo)
    assert isinstance(zone, Zone) and isinstance(provider, Provider)
    named = desired.state.cluster(args.owner)
    if named is not None and not args.force:
        _err(f"owner {args.owner} is Cluster {named.name} in git: remove it from git instead "
             "(its agent cleans up), or pass --force")
        return EXIT_ERROR
    policy = policy_for_zone(desired, zone, force=True)
    plan = make_plan(Intent(args.owner, (), None), provider.read(zone.domain), policy)
    print(planfmt.to_text([plan]), end="")
    if not plan.changes:
        print(f"owner {args.owner} owns nothing in {zone.domain}")
        return EXIT_OK
    if not args.yes:
        answer = input(f"remove {len(plan.changes)} change(s) of owner {args.owner} from {zone.domain}? [yes/no] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing changed")
            return EXIT_OK
    result = provider.apply(zone.domain, plan.changes, plan.guards)
    print(f"applied {len(result.applied)} change(s); {len(result.refused)} refused as stale (run again)")
    return EXIT_OK if result.ok else EXIT_ERROR


def cmd_adopt(args: argparse.Namespace) -> int:
    from gitdns.core import planfmt
    from gitdns.core.model import Zone
    from gitdns.core.owners import adopt_changes, foreign_records
    from gitdns.providers.base import Provider
    from gitdns.reconcile.engine import find_cluster, intent_for, load

    desired = load(args.repo)
    zone, provider = _zone_and_provider(desired, args.zone, args.repo)
    assert isinstance(zone, Zone) and isinstance(provider, Provider)
    cluster = find_cluster(desired, args.cluster)
    names = [n.lower().rstrip(".") for n in args.names]
    found = foreign_records(provider.read(zone.domain), names, args.rtype)
    if not found:
        _err(f"no foreign record at {', '.join(names)} in {zone.domain}")
        return EXIT_ERROR
    wanted = {r.key for r in intent_for(desired, cluster, zone).records}
    outside = [r for r in found if r.key not in wanted]
    if outside and not args.force:
        for rec in outside:
            _err(f"{rec.key}: not in {cluster.name}'s desired state; its next apply would delete it "
                 "(add it to git first, or pass --force)")
        return EXIT_ERROR
    rev = desired.state.revision.label if desired.state.revision else None
    changes = adopt_changes(found, cluster.id, zone.domain, rev=rev, group=cluster.group)
    result = provider.apply(zone.domain, changes)
    for change in result.applied:
        print(f"adopted {change.group} ({planfmt.change_line(change)})")
    return EXIT_OK if result.ok else EXIT_ERROR


def cmd_agent(args: argparse.Namespace) -> int:
    import os

    from gitdns.agent.config import resolve
    from gitdns.agent.main import build_agent, run_once, serve, setup_logging
    from gitdns.agent.metrics import Metrics

    flags = {k: v for k, v in vars(args).items() if k not in ("command", "version")}
    config = resolve(flags, os.environ)
    setup_logging(config)
    metrics = Metrics()
    agent = build_agent(config, metrics)
    if config.once:
        return run_once(agent)
    return serve(agent, config, metrics)


def cmd_orchestrator(args: argparse.Namespace) -> int:
    from gitdns.agent.health import secret_headers
    from gitdns.orchestrator import wiring as orchestrator
    from gitdns.orchestrator.config import config_from_flags

    orchestrator.setup_logging(args.log_level)
    config = config_from_flags(vars(args))
    orch = orchestrator.build(config, headers=secret_headers(str(config.state_dir)))
    if args.once:
        delivered = orch.run_once()
        print(f"node pool {config.node_pool}: " + ("delivered" if delivered else "not delivered") +
              f" to {orch.delivery.target}; published {' '.join(orch.published.ips) or 'nothing'}")
        for note in orch.status()["notes"]:
            print(f"note: {note}")
        for step, error in orch.errors.items():
            print(f"error: {step}: {error}")
        return EXIT_OK if delivered else EXIT_ERROR
    return orchestrator.serve(orch, config.listen)


def _err(message: str) -> None:
    print(f"gitdns: {message}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    import json

    from gitdns.reconcile.engine import load

    desired = load(args.path)
    problems = sorted(desired.problems, key=lambda p: (p.file, p.line, p.yaml_path))
    if args.format == "json":
        doc = {"valid": not problems, "problems": [p.as_dict() for p in problems],
               "blockedZones": sorted(desired.blocked)}
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        for problem in problems:
            print(problem.format())
        state = desired.state
        summary = (f"{len(state.zones)} zone(s), {len(state.clusters)} cluster(s), "
                   f"{len(state.policies)} policy(ies), {len(state.record_sets)} record set(s), "
                   f"{len(state.tenants)} tenant(s)")
        from gitdns.providers.defaultprovider import default_provider_notes

        for note in default_provider_notes(state):
            print(f"note: {note}")
        if problems:
            held = ", ".join(sorted(desired.blocked)) or "none"
            print(f"{len(problems)} problem(s); zones held: {held}; {summary}")
        else:
            print(f"valid: {summary}")
    return EXIT_ERROR if problems else EXIT_OK


def _print_problems(desired: Desired) -> None:
    for problem in desired.problems:
        _err(problem.format())
    if desired.problems:
        _err(f"{len(desired.problems)} problem(s); zones held: {', '.join(sorted(desired.blocked)) or 'none'}")


def cmd_plan(args: argparse.Namespace) -> int:
    import time
    from dataclasses import replace

    from gitdns.core.plan import PlanMode
    from gitdns.reconcile.engine import default_factory, find_cluster, load, previous_state
    from gitdns.reconcile.run import published_health, reconcile

    loaded = load(args.repo)
    desired = replace(loaded, previous=lambda: previous_state(loaded))
    _print_problems(desired)
    factory = default_factory(args.repo)
    if args.all_clusters:
        return _plan_all(args, desired, factory)
    cluster = find_cluster(desired, args.cluster)
    outcomes = reconcile(desired, cluster, factory, dry_run=True, force=args.force, zones=args.zone,
                         mode=PlanMode(args.mode), health=published_health(desired), now=time.time())
    plans: list[Plan] = []
    for outcome in outcomes:
        if outcome.skipped:
            _err(f"zone {outcome.zone.domain}: {outcome.skipped}")
        if outcome.plan is not None:
            plans.append(outcome.plan)
    names = {c.id: c.name for c in desired.state.clusters}
    print(_format_plans(args.format, plans, names), end="")
    return _plan_exit(desired, outcomes, plans, args.exit_code)


def _plan_exit(desired: Desired, outcomes: Sequence[ZoneOutcome], plans: Sequence[Plan], exit_code: bool) -> int:
    """As `apply --dry-run` would exit (held 1, stalled 4, conflicts 5); with --exit-code,
    pending changes exit 3."""
    if any(o.errors for o in outcomes) or any(o.zone.name in desired.blocked for o in outcomes):
        return EXIT_ERROR
    if any(p.stalled for p in plans):
        return EXIT_STALLED
    if any(p.real_conflicts for p in plans):
        return EXIT_CONFLICTS
    return EXIT_CHANGES if exit_code and any(p.changes for p in plans) else EXIT_OK


def _format_plans(fmt: str, typed: list[Plan], names: dict[str, str] | None = None) -> str:
    from gitdns.core import planfmt

    if fmt == "json":
        return planfmt.to_json(typed, names=names)
    if fmt == "markdown":
        return planfmt.to_markdown(typed, names=names)
    return planfmt.to_text(typed, names=names)


def _plan_all(args: argparse.Namespace, desired: Desired, factory: object) -> int:
    import json
    import time

    from gitdns.core import inventory, planfmt
    from gitdns.reconcile.engine import ProviderFactory
    from gitdns.reconcile.preview import preview_zone
    from gitdns.reconcile.run import published_health, revisions
    from gitdns.reconcile.zonepass import ZoneOutcome as Outcome

    assert callable(factory)
    fac: ProviderFactory = factory
    health = published_health(desired)
    state_at = revisions(desired)
    out_json: list[dict[str, object]] = []
    all_plans: list[Plan] = []
    outcomes: list[ZoneOutcome] = []
    for zone in desired.state.zones:
        if args.zone and zone.name not in args.zone and zone.domain not in args.zone:
            continue
        if zone.name in desired.blocked:
            _err(f"zone {zone.domain}: held, its desired state does not validate")
            outcomes.append(Outcome(zone, skipped="held"))
            continue
        if zone.publisher.value == "kuadrant":
            _err(f"zone {zone.domain}: publisher is kuadrant: DNSRecords are rendered (gitdns render), not published")
            continue
        sim = preview_zone(desired, zone, fac(zone), health=health, force=args.force, state_at=state_at,
                           now=time.time())
        plans = [p for _, p in sim.plans]
        names = {c.id: c.name for c, _ in sim.plans}
        all_plans.extend(plans)
        outcomes.extend(sim.outcomes)
        rows = inventory.inventory(sim.after, names)
        if args.format == "json":
            out_json.append({"zone": zone.domain, "plans": [planfmt.plan_dict(p, names) for p in plans],
                             "merged": json.loads(inventory.to_json(zone.domain, rows))["records"]})
        elif args.format == "markdown":
            print(planfmt.to_markdown(plans, title=f"gitdns plan: {zone.domain}, every cluster", names=names))
            print("<details><summary>Merged zone after every cluster applied</summary>\n\n```")
            print(inventory.to_text(zone.domain, rows), end="")
            print("```\n</details>\n")
        else:
            print(planfmt.to_text(plans, names=names), end="")
            print("merged zone after every cluster applied:")
            print(inventory.to_text(zone.domain, rows))
    if args.format == "json":
        print(json.dumps({"zones": out_json}, indent=2, sort_keys=True))
    return _plan_exit(desired, outcomes, all_plans, args.exit_code)


def cmd_apply(args: argparse.Namespace) -> int:
    import json

    from gitdns.core.plan import PlanMode
    from gitdns.reconcile.engine import default_factory, find_cluster, load
    from gitdns.reconcile.run import reconcile

    desired = load(args.repo)
    _print_problems(desired)
    factory = default_factory(args.repo)
    # every cluster as its agent would: remotes first (the primaries merge what they publish)
    clusters = (sorted(desired.state.clusters, key=lambda c: c.mode.value != "remote") if args.all_clusters
                else [find_cluster(desired, args.cluster)])
    names = {c.id: c.name for c in desired.state.clusters}
    results: list[tuple[str, ZoneOutcome]] = []
    for cluster in clusters:
        for outcome in reconcile(desired, cluster, factory, dry_run=args.dry_run, force=args.force,
                                 zones=args.zone, mode=PlanMode(args.mode), always_verify=args.verify):
            results.append((cluster.name, outcome))
    if args.format == "json":
        print(json.dumps([_outcome_dict(c, o) for c, o in results], indent=2, sort_keys=True))
    else:
        for cluster_name, outcome in results:
            print(_outcome_text(cluster_name, outcome, args.dry_run, names))
    return _apply_exit(desired, [o for _, o in results])


def _apply_exit(desired: Desired, outcomes: list[ZoneOutcome]) -> int:
    if any(o.errors for o in outcomes) or any(o.zone.name in desired.blocked for o in outcomes):
        return EXIT_ERROR
    if any(o.plan is not None and o.plan.stalled for o in outcomes):
        return EXIT_STALLED
    if any(o.plan is not None and o.plan.real_conflicts for o in outcomes):
        return EXIT_CONFLICTS
    return EXIT_OK


def _outcome_text(cluster: str, outcome: ZoneOutcome, dry_run: bool, names: dict[str, str]) -> str:
    from gitdns.core import planfmt

    head = f"[{cluster}] zone {outcome.zone.domain}"
    if outcome.skipped:
        return f"{head}: skipped: {outcome.skipped}"
    lines: list[str] = []
    if outcome.plan is not None:
        lines.append(planfmt.to_text([outcome.plan], show_txt=False, names=names).rstrip("\n"))
        verb = "would write" if dry_run else "applied"
        count = len(outcome.plan.changes) if dry_run else outcome.applied
        extra = f", {outcome.refused_retries} stale write(s) re-planned" if outcome.refused_retries else ""
        lines.append(f"{head}: {verb} {count} change(s){extra}")
    lines.extend(f"{head}: error: {e}" for e in outcome.errors)
    if outcome.pending_after_apply:
        lines.append(f"{head}: RecordsMissing: a fresh read still wants {outcome.pending_after_apply} "
                     "change(s); the next apply retries")
    if outcome.views:
        lines.append(f"{head}: rendered {len(outcome.views)} geo view(s)")
    return "\n".join(lines)


def _outcome_dict(cluster: str, outcome: ZoneOutcome) -> dict[str, object]:
    from gitdns.core import planfmt

    return {
        "cluster": cluster,
        "zone": outcome.zone.domain,
        "skipped": outcome.skipped or None,
        "applied": outcome.applied,
        "staleRetries": outcome.refused_retries,
        "pendingAfterApply": outcome.pending_after_apply,
        "errors": outcome.errors,
        "plan": planfmt.plan_dict(outcome.plan) if outcome.plan else None,
    }


def cmd_render(args: argparse.Namespace) -> int:
    from gitdns.agent.rendering import render_cluster
    from gitdns.reconcile.engine import find_cluster, load

    desired = load(args.repo)
    _print_problems(desired)
    cluster = find_cluster(desired, args.cluster)
    written = render_cluster(desired, cluster, args.out, namespace=args.namespace,
                             templates=args.templates, all_zones=args.all_zones)
    for path in written:
        print(path)
    print(f"rendered {len(written)} DNSRecord manifest(s) into {args.out}", file=sys.stderr)
    return EXIT_ERROR if desired.problems else EXIT_OK


def cmd_zone_show(args: argparse.Namespace) -> int:
    from gitdns.core import inventory
    from gitdns.errors import ConfigError
    from gitdns.reconcile.engine import default_factory, load

    desired = load(args.repo)
    zone = next((z for z in desired.state.zones if args.zone in (z.name, z.domain)), None)
    if zone is None:
        known = ", ".join(sorted(z.domain for z in desired.state.zones)) or "none"
        raise ConfigError(f"zone {args.zone}: not in {args.repo} (known: {known})")
    snapshot = default_factory(args.repo)(zone).read(zone.domain)
    rows = inventory.inventory(snapshot, {c.id: c.name for c in desired.state.clusters})
    render = inventory.to_json if args.format == "json" else inventory.to_text
    print(render(zone.domain, rows), end="")
    return EXIT_OK


def cmd_cluster_id(args: argparse.Namespace) -> int:
    from gitdns.adapters.kube import kube_system_uid

    print(kube_system_uid())
    return EXIT_OK


def _add_audit_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="aggregate every cluster's status branch (exit 0 when the fleet is ready)",
                       epilog="reads every gitdns-status/* branch of the repository; also shows which clusters\n"
                              "have not applied the desired branch's head (when the head can be listed).\n"
                              "exit codes: 0 every cluster and policy is Ready, 1 otherwise (or on error).\n"
                              "example: gitdns status --repo https://git.example.com/platform/dns.git",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", default=".", metavar="URL|PATH", help="repository holding the status branches")
    p.add_argument("--cluster", metavar="ID", help="only this cluster (id or metadata.name)")
    p.add_argument("--branch", default="main", help="desired branch, for the lag (default: main)")
    _add_format(p, ["text", "json"])
    p.add_argument("--state-dir", metavar="DIR", help="keep the git cache here (default: a temporary directory)")

    p = sub.add_parser("history", help="trace a name's desired records through git: commits, authors, diffs",
                       epilog="desired state from git, not what providers published (see gitdns status).\n"
                              "example: gitdns history api.example.com --repo https://git.example.com/dns.git",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="a DNS name or listener host; its klb names are included")
    p.add_argument("--repo", default=".", metavar="URL|PATH", help="the desired repository (default: .)")
    p.add_argument("--branch", default="main", help="desired branch (default: main)")
    p.add_argument("--path", default="", metavar="SUBDIR", help="subdirectory holding the desired YAML")
    p.add_argument("--max-commits", type=int, default=200, metavar="N", help="newest N commits (default: 200)")
    _add_format(p, ["text", "json"])
    p.add_argument("--state-dir", metavar="DIR", help="keep the git cache here (default: a temporary directory)")


def cmd_status(args: argparse.Namespace) -> int:
    from gitdns.agent import statusview
    from gitdns.agent.statuscmd import fleet_status, lag_text

    agg = fleet_status(args.repo, cluster=args.cluster, branch=args.branch, state_dir=args.state_dir)
    if args.cluster and not agg["clusters"]:
        _err(f"no status branch for cluster {args.cluster}")
    print(statusview.to_json(agg) if args.format == "json" else statusview.to_text(agg) + lag_text(agg), end="")
    return EXIT_OK if agg["ready"] else EXIT_ERROR


def cmd_history(args: argparse.Namespace) -> int:
    from gitdns.agent import history

    result = history.history(args.name, args.repo, branch=args.branch, path=args.path,
                             max_commits=args.max_commits, state_dir=args.state_dir)
    print(history.to_json(result) if args.format == "json" else history.to_text(result), end="")
    return EXIT_OK


def _add_failover_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("groups", help="active failover groups of a zone (seed 002): get, change through a PR",
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
        g = gsub.add_parser(name, help=text)
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

    p = sub.add_parser("failover", help="preview an active-groups switch for every cluster (seed 002)")
    fsub = p.add_subparsers(dest="failover_command", metavar="SUBCOMMAND", required=True)
    f = fsub.add_parser("simulate", help="the zone after switching to GROUP(s): endpoints added and removed",
                        epilog="example: gitdns failover simulate example.com --to site-b --repo example-repo")
    f.add_argument("zone", help="zone domain or Zone metadata.name")
    f.add_argument("--to", nargs="+", required=True, metavar="GROUP", help="the groups active after the switch")
    _add_repo(f)
    _add_format(f, ["text", "markdown"])


def cmd_groups(args: argparse.Namespace) -> int:
    from gitdns.agent import groupscmd

    opts = {k: v for k, v in vars(args).items() if k in groupscmd.Request.__dataclass_fields__}
    req = groupscmd.Request(action=args.groups_command, zone=args.zone,
                            groups=tuple(getattr(args, "groups", ())),
                            provider_settings=tuple(getattr(args, "provider_setting", ())),
                            **{k: v for k, v in opts.items() if k not in ("zone", "groups")})
    result = groupscmd.run(req)
    for line in result.err:
        _err(line)
    for line in result.out:
        print(line)
    return result.code


def cmd_failover(args: argparse.Namespace) -> int:
    from gitdns.agent import failover

    print(failover.simulate_command(args.repo, args.zone, tuple(args.to), args.format), end="")
    return EXIT_OK


HANDLERS = {
    "validate": cmd_validate,
    "plan": cmd_plan,
    "apply": cmd_apply,
    "render": cmd_render,
    "cluster-id": cmd_cluster_id,
    "agent": cmd_agent,
    "orchestrator": cmd_orchestrator,
    "owners": cmd_owners,
    "prune-owner": cmd_prune_owner,
    "adopt": cmd_adopt,
    "status": cmd_status,
    "history": cmd_history,
    "groups": cmd_groups,
    "failover": cmd_failover,
}


# --- gitdns add-cluster-secret (seed 001): parser and handler live in gitdns/agent/clustersecret.py ---
def cmd_add_cluster_secret(args: argparse.Namespace) -> int:
    from gitdns.agent.clustersecret import run_command

    return run_command(args)


def _build_parser_with_add_cluster_secret() -> argparse.ArgumentParser:
    from gitdns.agent.clustersecret import add_parser

    parser = _build_parser_without_add_cluster_secret()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            add_parser(action)
    return parser


_build_parser_without_add_cluster_secret = build_parser
build_parser = _build_parser_with_add_cluster_secret
HANDLERS["add-cluster-secret"] = cmd_add_cluster_secret
# --- end of gitdns add-cluster-secret ---


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from gitdns import __version__

        print(f"gitdns {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    handler = cmd_zone_show if args.command == "zone" else HANDLERS[args.command]
    from gitdns.errors import GitdnsError

    try:
        return handler(args)
    except GitdnsError as exc:
        _err(f"{exc} (reason: {exc.reason})")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
