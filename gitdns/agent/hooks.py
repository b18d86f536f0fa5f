"""The agent's Kubernetes and health wiring, as `gitdns.agent.main.build_agent` plugs it into
`AgentPorts`: the fleet size the provider budgets are shared by (`FleetSize`), the Kubernetes
delegation hook, the mode ConfigMap reader, a primary's view of its remotes through the status
branches, the DNSPolicy health probes, the fleet's health shares, and the Gateway
PolicyAffected hook.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitdns.agent.config import AgentConfig
from gitdns.agent.metrics import Metrics
from gitdns.agent.ports import AgentView, Wake
from gitdns.agent.publisher import git_auth
from gitdns.core.desired import Desired
from gitdns.core.model import Mode
from gitdns.core.status.report import ClusterReport, summary_document


class FleetSize:
    """The clusters that write (remotes never call a provider), from the revision in force:
    an account's request budget is shared among them."""

    def __init__(self) -> None:
        self.size = 1

    def get(self) -> int:
        return self.size

    def update(self, view: AgentView) -> None:
        if view.current is not None:
            self.size = max(1, sum(1 for c in view.current.state.clusters if c.mode is not Mode.REMOTE))


def kube_delegation_hook(config: AgentConfig, metrics: Metrics) -> Callable[[AgentView], None]:
    """The Kubernetes delegation path: while this agent is a primary, merge the Kuadrant
    DNSRecords of the remote clusters behind the kubeconfig Secrets."""
    built: dict[str, Any] = {}

    def run(view: AgentView) -> None:
        cluster = view.cluster
        if view.mode is not Mode.PRIMARY or cluster is None:
            return
        if cluster.id not in built:
            from gitdns.kubedelegation.delegation import build_kube_delegation

            built.clear()
            built[cluster.id] = build_kube_delegation(config, cluster.id, metrics)
        built[cluster.id].run_once(view.current.state if view.current is not None else None)  # git's ActiveGroups too

    return run


def configmap_reader(config: AgentConfig) -> Callable[[], str | None]:
    """The mode ConfigMap (keys GITDNS_MODE / DNS_MODE) in the pod's namespace."""
    from gitdns.agent.modes import configmap_mode

    namespace = config.pod_namespace or os.environ.get("POD_NAMESPACE", "")
    return lambda: configmap_mode(namespace, config.mode_configmap)


def delegation_source(config: AgentConfig) -> Any:
    """A primary's view of its remotes: every status branch, read with one fetch."""
    from gitdns.agent.delegate import DelegationSource, status_reader

    if not config.status:
        return None
    read = status_reader(config.status_repo or config.repo, Path(config.state_dir) / "delegation", config.git_timeout,
                         git_auth(config))
    return DelegationSource(read, stale_after=config.stale_after, default_poll=config.poll_interval, clock=time.time)


def make_health(config: AgentConfig, wake: Wake) -> Any:
    """DNSPolicy probes; a state change marks them changed and wakes the scheduler."""
    from gitdns.agent.config import listed, probe_reach
    from gitdns.agent.health import MonitorHealth
    from gitdns.providers.fences import agent_namespace, setting_name
    from gitdns.providers.probeheaders import ProbeHeaders

    headers = ProbeHeaders(listed(config.headers_secrets), agent_namespace(config.pod_namespace or None),
                           config.state_dir, in_cluster=bool(os.environ.get("KUBERNETES_SERVICE_HOST")),
                           setting=setting_name("headers_secrets"))
    return MonitorHealth(lambda: wake.fire("health"), headers.read, probe_reach(config))


def fleet_health_reader(config: AgentConfig) -> Callable[[str], dict[str, tuple[int, int]]]:
    """The fleet's (unhealthy, total) targets per host, from every other cluster's
    ``health.yaml`` on the status branches; read at most once a minute, only when needed."""
    cache: dict[str, Any] = {"at": 0.0, "value": {}}

    def read(own: str) -> dict[str, tuple[int, int]]:
        if time.monotonic() - cache["at"] < 60:
            return dict(cache["value"])
        from gitdns.adapters.status.branch import read_all
        from gitdns.core.status.doc import load as load_yaml

        trees = read_all(config.status_repo or config.repo, workdir=Path(config.state_dir) / "fleet",
                         auth=git_auth(config),
                         timeout=config.git_timeout)
        shares: dict[str, tuple[int, int]] = {}
        for cluster_id, tree in trees.items():
            if cluster_id == own or "health.yaml" not in tree.files:
                continue
            targets = load_yaml(tree.files["health.yaml"]).get("targets") or {}
            for target_id, doc in targets.items():
                host = str(target_id).split("|", 1)[0]
                bad, total = shares.get(host, (0, 0))
                shares[host] = (bad + (1 if doc.get("state") == "unhealthy" else 0), total + 1)
        cache.update(at=time.monotonic(), value=shares)
        return shares

    return read


def gateway_hook() -> Any:
    """The Gateway condition ``gateway.networking.k8s.io/PolicyAffected`` (Kuadrant's DNSPolicy RFC)
    on this cluster's Gateways, True once the policy covering each is published."""
    from gitdns.adapters.gateway.conditions import GatewayReporter
    from gitdns.core import builder

    reporter = GatewayReporter(None)

    def hook(report: ClusterReport, desired: Desired | None) -> None:
        if desired is None:
            return
        cluster = desired.state.cluster(report.cluster_id)
        if cluster is None:
            return
        owners: dict[tuple[str, str], str] = {}
        for zone in desired.state.zones:
            for host in builder.build_hosts(desired.state, cluster, zone):
                owners[(host.namespace, host.gateway)] = host.policy
        ready = {name: bool(doc["ready"]) for name, doc in summary_document(report)["policies"].items()}
        reporter.report(cluster, ready, owners)

    return hook
