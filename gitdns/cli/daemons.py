"""The long-running verbs' parsers: `gitdns agent` (`AGENT_HELP`) and `gitdns orchestrator`
(`ORCHESTRATOR_HELP`), and `gitdns lease-name`, which names either one's Kubernetes Lease.
`gitdns.cli.parser.build_parser` adds them.
"""

from __future__ import annotations

import argparse

from gitdns.cli.common import FENCES_HELP, setting_metavar

AGENT_HELP = {
    "repo": "desired repository: a path, file://, https:// or ssh URL (GITDNS_REPO)",
    "cluster": "this cluster: Cluster id or metadata.name (GITDNS_CLUSTER)",
    "instance": "a second install in one cluster, whose zones may overlap the first's: its owner id (the Cluster "
                "spec.id in git) is <kube-system UID>.NAME, a DNS-1123 label of at most 26 characters "
                "(GITDNS_INSTANCE; `gitdns cluster-id --instance NAME` prints it); unset: the UID",
    "branch": "desired branch (default: main)",
    "path": "subdirectory holding the desired YAML (default: the repository root)",
    "poll_interval": "between remote checks, ±5%% jitter; a duration: 60, 30s, 5m (default: 60s)",
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
    "log_format": "json | text (default: json in a pod, else text)",
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
    "probe_allow_ranges": "CIDR ranges a DNSPolicy probe may reach besides ordinary addresses: loopback, link-local, "
                          "cloud metadata, unspecified, multicast and broadcast addresses are refused unless a range "
                          "covers them, comma-separated (default: none)",
    "headers_secrets": "Secrets a DNSPolicy's healthCheck.headersSecret may name, comma-separated; any other is not "
                       "read (default: none)",
    **FENCES_HELP,
    "store_dir": "the directory every local store's settings.path lies in (default: --state-dir)",
}


def add_agent(sub: argparse._SubParsersAction[argparse.ArgumentParser], transport: argparse.ArgumentParser) -> None:
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
            p.add_argument(flag, default=None, metavar=setting_metavar(name), help=text)


ORCHESTRATOR_HELP = {
    "repo": "desired repository: a directory or a git URL (required)",
    "node_pool": "the NodePool to serve, one orchestrator each (required)",
    "out": "write the files into DIR, a volume shared with CoreDNS (this or --configmap)",
    "configmap": "write the files into this existing ConfigMap's keys (this or --out)",
    "listen": "HTTP address of /healthz /readyz (default: 0.0.0.0:8080; '' disables)",
    "admin_listen": "HTTP address of /status /metrics /healthz /readyz (default: 127.0.0.1:9090; '' disables; "
                    "the same as --listen serves everything there)",
    "state_dir": "git cache, lock file and (outside a cluster) secrets/ (default: /var/lib/gitdns)",
    "poll_interval": "desired-state poll interval, ±5% jitter; a duration: 60, 30s, 5m (default: 30s)",
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
    "log_format": "json | text (default: json in a pod, else text)",
    "log_level": "debug | info | warning | error (default: info)",
    "once": "probe once, deliver, exit (0 when delivered)",
    "probe_allow_ranges": "CIDR ranges a node's probe may reach besides ordinary addresses: loopback, link-local, "
                          "cloud metadata, unspecified, multicast and broadcast addresses are refused unless a "
                          "range covers them, comma-separated (default: none)",
    "headers_secrets": "Secrets a NodePool's healthCheck.headersSecret may name, comma-separated; any other is "
                       "not read (default: none)",
}


def add_orchestrator(sub: argparse._SubParsersAction[argparse.ArgumentParser],
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
                                                      "kube-system namespace UID `gitdns cluster-id` prints, "
                                                      "<UID>.NAME for an install with --instance NAME)")


def _metavar(name: str) -> str:
    return {"repo": "URL|PATH", "node_pool": "NAME", "out": "DIR", "configmap": "NS/NAME",
            "listen": "ADDR", "admin_listen": "ADDR", "state_dir": "DIR", "signal_pid_file": "FILE",
            "coredns_dir": "DIR", "lease": "KIND"}.get(name, name.split("_")[-1].upper())
