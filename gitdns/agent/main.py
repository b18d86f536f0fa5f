"""Wiring for `gitdns agent`: the only place that picks the concrete adapters (with the hooks it
plugs in, `gitdns.agent.hooks`, and the status branch, `gitdns.agent.publisher`).

Start-up: resolve the configuration, check the cluster identity, build the git source,
the status branch, the providers, the lease and the HTTP endpoint, then either run one
cycle (``--once``) or hand over to the scheduler until SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitdns.adapters import logs
from gitdns.adapters.leases import KubeLease, Lease, NoLease
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent, Cycle
from gitdns.agent.hooks import (
    FleetSize,
    configmap_reader,
    delegation_source,
    fleet_health_reader,
    gateway_hook,
    kube_delegation_hook,
    make_health,
)
from gitdns.agent.identity import instance_identity
from gitdns.agent.lease import TxtLease
from gitdns.agent.metrics import Metrics
from gitdns.agent.ports import AgentPorts, AgentView, LeaseBuilder, Wake
from gitdns.agent.publisher import StatusPublisher, git_auth
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, Mode, Zone
from gitdns.core.status.report import ClusterReport
from gitdns.errors import ConfigError, GitdnsError
from gitdns.reconcile.engine import ProviderFactory, default_factory

log = logging.getLogger(__name__)


JsonFormatter = logs.JsonFormatter  # where it was; the formatters live in gitdns.adapters.logs


def setup_logging(config: AgentConfig) -> None:
    logs.install(logs.handler(config.log_format), config.log_level)
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


_PATH_SETTINGS = ("state_dir", "store_dir", "rndc_config", "credentials_dir", "ssh_key", "known_hosts", "token_file",
                  "ca_file", "verify_ssh_signers",
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
    from gitdns.adapters.git.auth import check_url

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


def make_source(config: AgentConfig) -> Any:
    from gitdns.adapters.git.source import GitSource, VerifyPolicy

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
    """In a cluster, refuse to run as a Cluster whose id is not this install's owner id: the
    kube-system UID, or ``<UID>.<instance>`` with ``--instance`` (`gitdns.core.owner.install`)."""
    if not in_cluster() or cluster is None:
        return
    from gitdns.adapters.kube.access import kube_system_uid
    from gitdns.core.owner.install import owner_id

    uid = kube_system_uid()
    try:
        wanted = owner_id(uid, config.instance)
    except ValueError as exc:
        raise ConfigError(f"--instance (GITDNS_INSTANCE) {exc}") from None
    if wanted != cluster.id:
        mine = (f"this install's id is {wanted} (the kube-system UID and --instance {config.instance})"
                if config.instance else f"this cluster's kube-system UID is {uid}")
        raise ConfigError(f"--cluster {config.cluster}: Cluster {cluster.name} has id {cluster.id} but {mine} "
                          "(reason: ClusterIdMismatch); refusing to start")


def build_agent(config: AgentConfig, metrics: Metrics) -> Agent:
    from gitdns.agent.budget import Budgets
    from gitdns.agent.observed import observed_factory
    from gitdns.providers.fences import SETTINGS, fences_from

    fences = fences_from({name: getattr(config, name) for name in SETTINGS}, {},
                         namespace=config.pod_namespace or None)  # the operator's, never the repository's
    plain = default_factory(Path(config.state_dir), namespace=config.pod_namespace or None, fences=fences)
    fleet = FleetSize()
    budgets = Budgets(fleet.get)
    # every provider call is counted (and its faults classified), then paid from the account's budget
    factory = observed_factory(plain, metrics, budgets.wrap)

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
        poll_hooks=tuple(hooks), load_hooks=(fleet.update,), wake=wake)  # the fleet size before any call
    return Agent(config, ports)


def http_endpoints(config: AgentConfig, make: Callable[[str, int, frozenset[str], str], Any]) -> list[Any]:
    """The agent's HTTP servers (`gitdns.adapters.listen.endpoints` of its two addresses)."""
    from gitdns.adapters.listen import endpoints

    return endpoints(config.listen, config.admin_listen, make)


def serve(agent: Agent, config: AgentConfig, metrics: Metrics) -> int:
    import contextlib

    from gitdns.adapters.http.server import HttpServer
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
