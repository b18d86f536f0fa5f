"""The agent's status branch: `StatusPublisher`, which writes each report to
gitdns-status/<cluster-id> and reads back the applied revision after a restart, and `git_auth`,
the one git transport it shares with the desired branch's fetch and the reads of the other
clusters' status branches (`gitdns.agent.hooks`).  `gitdns.agent.main` wires them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitdns.agent.config import AgentConfig
from gitdns.core.status.report import ClusterReport, summary_line


def git_auth(config: AgentConfig) -> Any:
    """The one git transport of the agent — the desired branch's fetch, the status branch's
    push, the primaries' and the fleet's reads of the status branches: SSH key + pinned
    known_hosts, HTTPS token (file or environment) + CA bundle, or the ambient git config."""
    from gitdns.adapters.git.auth import GitAuth

    def path(value: str) -> Path | None:
        return Path(value) if value else None
    return GitAuth(token_env=config.token_env or None, token_file=path(config.token_file),
                   ssh_key=path(config.ssh_key), known_hosts=path(config.known_hosts), ca_file=path(config.ca_file),
                   username=config.git_username or "git")


class StatusPublisher:
    """Serialises a report deterministically and pushes it to the cluster's status branch."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.branch: Any = None
        self.last: Mapping[str, str] | None = None

    def _branch(self, cluster_id: str) -> Any:
        from gitdns.adapters.status.branch import StatusBranch

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
        from gitdns.core.status.doc import load as load_yaml

        tree = self._branch(cluster).read_one()
        if tree is None:
            tree = self._named(cluster)
        if tree is None or "summary.yaml" not in tree.files:
            return None
        summary = load_yaml(str(tree.files["summary.yaml"]))
        value: object = summary.get("appliedRevision")
        return value if isinstance(value, str) and value else None

    def _named(self, name: str) -> Any:
        from gitdns.adapters.status.branch import read_all
        from gitdns.core.status.doc import load as load_yaml

        trees = read_all(self.config.status_repo or self.config.repo, workdir=Path(self.config.state_dir) / "status",
                         auth=git_auth(self.config), timeout=self.config.git_timeout)
        ours = [tree for tree in trees.values()
                if "summary.yaml" in tree.files and load_yaml(str(tree.files["summary.yaml"])).get("cluster") == name]
        return ours[0] if len(ours) == 1 else None

    def publish(self, report: ClusterReport) -> str | None:
        from gitdns import __version__
        from gitdns.agent.cycle import files_of
        from gitdns.core.status.doc import commit_message, dump

        files = files_of(report, dump)
        if files == self.last:
            return None
        trailers = {"Desired-Revision": report.desired_revision or "none", "Agent": f"gitdns/{__version__}"}
        message = commit_message(report.cluster, report.ready, (report.attempted_revision or "none")[:7],
                                 summary_line(report), trailers)
        sha: str | None = self._branch(report.cluster_id).publish(files, message)
        self.last = files
        return sha
