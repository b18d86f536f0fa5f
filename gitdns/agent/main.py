"""Wiring for `gitdns agent`: the only place that picks the concrete adapters.

Start-up: resolve the configuration, check the cluster identity, build the git source,
the status branch, the providers, the lease and the HTTP endpoint, then either run one
cycle (``--once``) or hand over to the scheduler until SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gitdns.adapters.leases import KubeLease, Lease, NoLease
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent, Cycle
from gitdns.agent.lease import TxtLease
from gitdns.agent.metrics import Metrics
from gitdns.agent.ports import AgentPorts, AgentView, LeaseBuilder, Wake
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, Mode, Zone
from gitdns.core.status import ClusterReport, summary_document, summary_line
from gitdns.errors import ConfigError, GitdnsError
from gitdns.reconcile.engine import ProviderFactory, default_factory

log = logging.getLogger(__name__)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
               "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, sort_keys=True)


def setup_logging(config: AgentConfig) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if config.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level.upper())
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _read_secret(path: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read secret file {path}: {exc.strerror}") from None


_PATH_SETTINGS = ("state_dir", "store_dir", "credentials_dir", "ssh_key", "known_hosts", "token_file", "ca_file",
                  "verify_ssh_signers",
                  "verify_gpg_keys", "webhook_github_secret_file", "webhook_gitlab_token_file",
                  "webhook_gitlab_signing_file", "webhook_gitea_secret_file")
_MUST_EXIST = {"known_hosts": "--known-hosts", "ca_file": "--ca-file", "token_file": "--token-file"}


def absolute_paths(config: AgentConfig) -> AgentConfig:
    """Every path setting made absolute once, at start: git runs in its cache directories, so a
    relative --state-dir, --repo or key path given from the operator's directory would otherwise
    be looked for there.  A transport file that does not exist is a configuration error naming
    the setting (ssh and curl would blame the host key or the certificate instead)."""
    import dataclasses

    changes: dict[str, Any] = {}
    for name in _PATH_SETTINGS:
        value = str(getattr(config, name, "") or "")
        if value:
            changes[name] = os.path.abspath(value)
    for name in ("repo", "status_repo"):
        value = getattr(config, name)
        if value and _local_path(value):
            changes[name] = os.path.abspath(value)
    from gitdns.adapters.gitauth import check_url

    for url in (config.repo, config.status_repo):  # a token or user name in a URL would reach `ps`
        if url:
            check_url(url)
    for name, flag in _MUST_EXIST.items():
        path = changes.get(name)
        if path and not os.path.exists(path):
            raise ConfigError(f"{flag} {path}: no such file")
    return dataclasses.replace(config, **changes)


def _local_path(url: str) -> bool:
    """A repository given as a path (not a URL, not scp-like ``user@host:path``)."""
    if "://" in url:
        return False
    head = url.split("/", 1)[0]
    return ":" not in head


def git_auth(config: AgentConfig) -> Any:
    """The one git transport of the agent — the desired branch's fetch, the status branch's
    push, the primaries' and the fleet's reads of the status branches: SSH key + pinned
    known_hosts, HTTPS token (file or environment) + CA bundle, or the ambient git config."""
    from gitdns.adapters.gitauth import GitAuth

    def path(value: str) -> Path | None:
        return Path(value) if value else None
    return GitAuth(token_env=config.token_env or None, token_file=path(config.token_file),
                   ssh_key=path(config.ssh_key), known_hosts=path(config.known_hosts), ca_file=path(config.ca_file),
                   username=config.git_username or "git")


def make_source(config: AgentConfig) -> Any:
    from gitdns.adapters.gitsource import GitSource, VerifyPolicy

    auth = git_auth(config)
    verify = None
    if config.verify_ssh_signers or config.verify_gpg_keys:
        verify = VerifyPolicy(
            gpg_keyring=Path(config.verify_gpg_keys) if config.verify_gpg_keys else None,
            ssh_allowed_signers=Path(config.verify_ssh_signers) if config.verify_ssh_signers else None,
        )
    return GitSource(config.repo, branch=config.branch, path=config.path,
                     workdir=Path(config.state_dir) / "git", auth=auth, timeout=config.git_timeout,
                     verify=verify, limits=read_limits(config))


def read_limits(config: AgentConfig) -> Any:
    """The operator's caps on reading desired state (``maxFileBytes``, ``maxCommitBytes``)."""
    from gitdns.core.limits import DEFAULT_LIMITS, ReadLimits, parse_size

    try:
        return ReadLimits(parse_size(config.max_file_bytes) if config.max_file_bytes else DEFAULT_LIMITS.file_bytes,
                          parse_size(config.max_commit_bytes) if config.max_commit_bytes
                          else DEFAULT_LIMITS.commit_bytes)
    except ValueError as exc:
        raise ConfigError(f"--max-file-bytes / --max-commit-bytes: {exc}") from None


class StatusPublisher:
    """Serialises a report deterministically and pushes it to the cluster's status branch."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.branch: Any = None
        self.last: Mapping[str, str] | None = None

    def _branch(self, cluster_id: str) -> Any:
        from gitdns.adapters.statusbranch import StatusBranch

        if self.branch is None or self.branch.cluster_id != cluster_id:
            self.branch = StatusBranch(self.config.status_repo or self.config.repo, cluster_id,
                                       auth=git_auth(self.config),
                                       workdir=Path(self.config.state_dir) / "status",
                                       timeout=self.config.git_timeout)
        return self.branch

    def applied_revision(self, cluster: str) -> str | None:
        """The applied revision our status branch recorded (survives a restart).  ``cluster`` is
        our id, or our name when nothing else is known (a new state directory, a refused head to
        learn nothing from): then the one status branch whose summary names us is used."""
        from gitdns.core.statusdoc import load as load_yaml

        tree = self._branch(cluster).read_one()
        if tree is None:
            tree = self._named(cluster)
        if tree is None or "summary.yaml" not in tree.files:
            return None
        summary = load_yaml(str(tree.files["summary.yaml"]))
        value: object = summary.get("appliedRevision")
        return value if isinstance(value, str) and value else None

    def _named(self, name: str) -> Any:
        from gitdns.adapters.statusbranch import read_all
        from gitdns.core.statusdoc import load as load_yaml

        trees = read_all(self.config.status_repo or self.config.repo, workdir=Path(self.config.state_dir) / "status",
                         auth=git_auth(self.config), timeout=self.config.git_timeout)
        ours = [tree for tree in trees.values()
                if "summary.yaml" in tree.files and load_yaml(str(tree.files["summary.yaml"])).get("cluster") == name]
        return ours[0] if len(ours) == 1 else None

    def publish(self, report: ClusterReport) -> str | None:
        from gitdns import __version__
        from gitdns.agent.cycle import files_of
        from gitdns.core.statusdoc import commit_message, dump

        files = files_of(report, dump)
        if files == self.last:
            return None
        trailers = {"Desired-Revision": report.desired_revision or "none", "Agent": f"gitdns/{__version__}"}
        message = commit_message(report.cluster, report.ready, (report.attempted_revision or "none")[:7],
                                 summary_line(report), trailers)
        sha: str | None = self._branch(report.cluster_id).publish(files, message)
        self.last = files
        return sha


def instance_identity(state_dir: Path) -> str:
    """This agent instance's lease identity, kept in its state directory so a restart after a
    crash takes its own lease back at once, while a second agent (another state directory)
    with the same cluster id waits."""
    import secrets

    path = state_dir / "instance-id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        state_dir.mkdir(parents=True, exist_ok=True)
        ident = f"{os.uname().nodename}-{secrets.token_hex(6)}"
        path.write_text(ident + "\n")
        return ident


def make_lease(config: AgentConfig, factory: ProviderFactory) -> LeaseBuilder:
    """Chooses the lease once the cluster's zones are known (a remote writes no zone: no lock
    TXT for it, only a Kubernetes Lease when in a cluster; a primary's zones include its
    remotes', even with no gateway of its own)."""
    def build(desired: Desired, cluster: Cluster, zones: list[Zone], mode: Mode) -> Lease:
        kind = config.lease
        if kind == "auto":
            kind = "kubernetes" if in_cluster() else "txt"
        if kind == "none" or (kind == "txt" and mode is Mode.REMOTE):
            return NoLease()
        identity = config.pod_name or instance_identity(Path(config.state_dir))
        if kind == "kubernetes":
            return KubeLease(config.pod_namespace or "gitdns-system", cluster.id,
                             duration=config.lease_duration, clock=time.time, identity=identity)
        for zone in zones:  # the first zone whose provider can be built holds the lock TXT
            try:
                provider = factory(zone)
            except GitdnsError as exc:  # that zone is held and reported by its own pass
                log.warning("lease: zone %s cannot hold the lock: %s", zone.domain, exc)
                continue
            return TxtLease(provider, zone.domain, cluster.id, duration=config.lease_duration,
                            clock=time.time, identity=identity)
        return NoLease()
    return build


def check_cluster_identity(config: AgentConfig, cluster: Cluster | None) -> None:
    """In a cluster, refuse to run as a Cluster whose id is not this cluster's kube-system UID."""
    if not in_cluster() or cluster is None:
        return
    from gitdns.adapters.kube import kube_system_uid

    uid = kube_system_uid()
    if uid != cluster.id:
        raise ConfigError(f"--cluster {config.cluster}: Cluster {cluster.name} has id {cluster.id} but this "
                          f"cluster's kube-system UID is {uid} (reason: ClusterIdMismatch); refusing to start")


def build_agent(config: AgentConfig, metrics: Metrics) -> Agent:
    from gitdns.agent.budget import Budgets
    from gitdns.providers.fences import SETTINGS, fences_from

    fences = fences_from({name: getattr(config, name) for name in SETTINGS}, {},
                         namespace=config.pod_namespace or None)  # the operator's, never the repository's
    plain = default_factory(Path(config.state_dir), namespace=config.pod_namespace or None, fences=fences)
    fleet = FleetSize()
    budgets = Budgets(fleet.get)
    wrapped: dict[str, Any] = {}

    def factory(zone: Any) -> Any:  # every provider call is paid from the account's budget
        if zone.name not in wrapped:
            wrapped[zone.name] = budgets.wrap(plain(zone))
        return wrapped[zone.name]

    wake = Wake()
    status = StatusPublisher(config) if config.status else None
    hooks: list[Callable[[AgentView], None]] = [fleet.update]
    if config.kube_delegation:
        hooks.append(kube_delegation_hook(config, metrics))
    ports = AgentPorts(
        source=make_source(config), factory=factory, clock=time.time, status=status,
        lease_builder=make_lease(config, factory),
        probes=make_health(config, wake),
        fleet_health=fleet_health_reader(config) if status is not None else None,
        restore=status.applied_revision if status is not None else None,
        identity_check=lambda cluster: check_cluster_identity(config, cluster),
        delegation=delegation_source(config), configmap_mode=configmap_reader(config),
        report_hooks=(gateway_hook(),) if in_cluster() else (),
        poll_hooks=tuple(hooks), wake=wake)
    return Agent(config, ports)


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
    from gitdns.agent.health import MonitorHealth, secret_headers

    return MonitorHealth(lambda: wake.fire("health"), secret_headers(config.state_dir))


def fleet_health_reader(config: AgentConfig) -> Callable[[str], dict[str, tuple[int, int]]]:
    """The fleet's (unhealthy, total) targets per host, from every other cluster's
    ``health.yaml`` on the status branches; read at most once a minute, only when needed."""
    cache: dict[str, Any] = {"at": 0.0, "value": {}}

    def read(own: str) -> dict[str, tuple[int, int]]:
        if time.monotonic() - cache["at"] < 60:
            return dict(cache["value"])
        from gitdns.adapters.statusbranch import read_all
        from gitdns.core.statusdoc import load as load_yaml

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
    from gitdns.adapters.gateways import GatewayReporter
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


def http_endpoints(config: AgentConfig, make: Callable[[str, int, frozenset[str], str], Any]) -> list[Any]:
    """The agent's HTTP servers (`gitdns.adapters.listen.endpoints` of its two addresses)."""
    from gitdns.adapters.listen import endpoints

    return endpoints(config.listen, config.admin_listen, make)


def serve(agent: Agent, config: AgentConfig, metrics: Metrics) -> int:
    import contextlib

    from gitdns.adapters.httpserver import HttpServer
    from gitdns.adapters.webhooks import WebhookConfig, repository_of
    from gitdns.agent.runner import Runner

    http_endpoints(config, lambda *_: None)  # a bad address refuses to start before any work
    runner = Runner(agent, config, metrics)
    runner.first()  # before the scheduler: a refused identity or configuration exits here
    webhook = None
    if config.listen:
        token = _read_secret(config.webhook_gitlab_token_file)
        webhook = WebhookConfig(
            github_secret=_read_secret(config.webhook_github_secret_file),
            gitlab_token=token.decode() if token else None,
            gitlab_signing_secret=_read_secret(config.webhook_gitlab_signing_file),
            gitea_secret=_read_secret(config.webhook_gitea_secret_file),
            cluster_id=agent.state.known_cluster.id if agent.state.known_cluster else None,
            branch=config.branch, repository=repository_of(config.repo),
            status_repository=repository_of(config.status_repo) if config.status_repo else None,
        )

    def make(host: str, port: int, routes: frozenset[str], name: str) -> HttpServer:
        return HttpServer(host, port, metrics=metrics, status=runner.status,
                          ready=lambda: agent.serving,
                          live=lambda: runner.alive, webhook=webhook if "webhook" in routes else None,
                          on_push=lambda event: runner.poke(f"push {event.ref}"), routes=routes, name=name)

    from gitdns.adapters.listen import start_all
    from gitdns.errors import GitdnsError

    try:
        servers: list[HttpServer] = start_all(http_endpoints(config, make))
    except ConfigError:  # an address that cannot be bound: refuse to start, the lease released
        with contextlib.suppress(GitdnsError):
            agent.lease.release()
        raise
    stop = {"signal": 0}

    def on_signal(signum: int, _frame: object) -> None:
        stop["signal"] = signum
        runner.stopped.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    runner.start()
    while not runner.stopped.wait(0.5):
        pass
    runner.stop()
    for server in servers:
        server.stop()
    log.info("agent stopped: signal=%s", stop["signal"])
    return 0


def run_once(agent: Agent) -> tuple[Cycle, ClusterReport | None]:
    """One forced cycle (``--once``), the lease released afterwards: the cycle and the report
    (`gitdns.commands.daemons` formats them)."""
    try:
        cycle = agent.run("once", force=True)
    finally:
        agent.lease.release()
    return cycle, agent.last_report
