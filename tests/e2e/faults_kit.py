"""Helpers for the agent fault and webhook end-to-end tests (on top of agent_kit)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from gitdns.core.records import RecordKey
from gitdns.core.webhook import sign_gitea, sign_github
from gitdns.providers.local import LocalProvider
from tests.e2e.agent_kit import AgentProcess, DesiredRepo, git

CLUSTER_IDS = {
    "eu-west-1": "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63",
    "eu-central-1": "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34",
    "us-east-1": "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275",
}
ZERO = "0" * 40


def data(repo: DesiredRepo, zone: str = "example.com") -> dict[RecordKey, tuple[str, ...]]:
    """The zone's data records (no ownership, lease or heartbeat TXT)."""
    return {r.key: r.values for r in LocalProvider(repo.zones).read(zone).records
            if not r.name.startswith(("kuadrant-", "gitdns-"))}


def record_set(name: str, rtype: str, values: Iterable[str], zone: str = "example-com") -> str:
    """A RecordSet document holding one record."""
    vals = ", ".join(values)
    return ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n"
            f"  name: {name.replace('.', '-')}\nspec:\n  zone: {zone}\n  records:\n"
            f"    - {{name: {name}, type: {rtype}, values: [{vals}]}}\n")


def add_record(repo: DesiredRepo, name: str, value: str) -> str:
    """Commit and push a RecordSet with ``name A value``; the new head's sha."""
    repo.write(f"records/{name}.yaml", record_set(name, "A", [value]))
    return repo.commit(f"add {name}")


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """``type -> (status, reason)`` from an agent's /status document."""
    summary = status.get("summary.yaml")
    if not isinstance(summary, dict):
        return {}
    return {c["type"]: (str(c["status"]), str(c["reason"])) for c in summary.get("conditions", [])}


def cycles(agent: AgentProcess) -> int:
    value = agent.status().get("cycles")
    return int(value) if isinstance(value, int) else -1


def metric(agent: AgentProcess, prefix: str) -> float:
    """The sum of every sample whose line starts with ``prefix`` (name plus optional labels)."""
    _, body = agent.get("/metrics")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(prefix):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(predicate: Callable[[], bool], timeout: float = 90.0, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


# --- webhooks -----------------------------------------------------------------------------


def github_push(ref: str, after: str, *, secret: bytes,
                delivery: str | None = None) -> tuple[bytes, dict[str, str]]:
    """A GitHub push delivery: body and headers, signed with ``secret``."""
    body = json.dumps({"ref": ref, "after": after, "repository": {"full_name": "acme/desired"}}).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "push",
               "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
               "X-Hub-Signature-256": sign_github(secret, body)}
    return body, headers


def gitea_push(ref: str, after: str, *, secret: bytes,
               delivery: str | None = None) -> tuple[bytes, dict[str, str]]:
    """A Gitea push delivery as Gitea sends it: its own headers, the Gogs and GitHub ones, and
    the body signed with ``secret`` under both ``X-Gitea-Signature`` and ``X-Hub-Signature-256``."""
    body = json.dumps({"ref": ref, "after": after, "repository": {
        "full_name": "acme/desired", "clone_url": "https://git.example.com/acme/desired.git"}}).encode()
    ident, sig = delivery or str(uuid.uuid4()), sign_gitea(secret, body)
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": "sha256=" + sig,
               "X-GitHub-Event": "push", "X-GitHub-Delivery": ident}
    for family in ("Gitea", "Gogs"):
        headers |= {f"X-{family}-Event": "push", f"X-{family}-Delivery": ident, f"X-{family}-Signature": sig}
    return body, headers


def gitlab_push(ref: str, after: str, *, token: str, delivery: str | None = None) -> tuple[bytes, dict[str, str]]:
    """A GitLab project push hook delivery with ``X-Gitlab-Token``."""
    body = json.dumps({"object_kind": "push", "ref": ref, "after": after,
                       "project": {"path_with_namespace": "acme/desired"}}).encode()
    headers = {"Content-Type": "application/json", "X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": token,
               "Idempotency-Key": delivery or str(uuid.uuid4())}
    return body, headers


# --- desired repository edits -------------------------------------------------------------


def _yaml() -> YAML:
    y = YAML()
    y.preserve_quotes = True
    return y


def edit_cluster(repo: DesiredRepo, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Load clusters/<name>.yaml, let ``change`` edit its document, write it back."""
    path = repo.work / "clusters" / f"{name}.yaml"
    y = _yaml()
    doc = y.load(path.read_text())
    change(doc)
    with path.open("w") as fh:
        y.dump(doc, fh)


def set_gateway_addresses(repo: DesiredRepo, cluster: str, gateway: str, addresses: list[str]) -> None:
    def change(doc: dict[str, Any]) -> None:
        for gw in doc["spec"]["gateways"]:
            if gw["name"] == gateway:
                gw["addresses"] = list(addresses)
                return
        raise AssertionError(f"{cluster} has no gateway {gateway}")
    edit_cluster(repo, cluster, change)


def cluster_doc(name: str, ident: str, geo: str, gateways: list[dict[str, Any]]) -> str:
    doc = {"apiVersion": "gitdns.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
           "spec": {"id": ident, "geo": geo, "group": "site-a", "gateways": gateways}}
    return json.dumps(doc, indent=2) + "\n"  # JSON is YAML


# --- status branches ----------------------------------------------------------------------


def enable_reflog(repo: DesiredRepo) -> None:
    """Record every ref update of the bare remote (bare repositories keep no reflog by default)."""
    git("config", "core.logAllRefUpdates", "always", cwd=repo.bare)


def ref_updates(repo: DesiredRepo, branch: str) -> list[tuple[str, str]]:
    """``(old, new)`` for every update of ``refs/heads/<branch>`` on the remote, oldest first."""
    log = repo.bare / "logs" / "refs" / "heads" / branch
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        old, new = line.split()[:2]
        out.append((old, new))
    return out


def parents(repo: DesiredRepo, sha: str) -> list[str]:
    return git("rev-list", "--parents", "-n", "1", sha, cwd=repo.bare).split()[1:]


def assert_fast_forward_chain(repo: DesiredRepo, branch: str) -> int:
    """Every update of the branch moved it from its old tip to a child of that tip (no force
    push, no rewrite), and the history is a single chain. Returns the number of updates."""
    updates = ref_updates(repo, branch)
    assert updates, f"no updates of {branch} recorded"
    for old, new in updates:
        assert new != ZERO, f"{branch} was deleted: {updates}"
        if old == ZERO:
            assert parents(repo, new) == [], f"{branch} created at {new}, which has parents"
        else:
            assert parents(repo, new) == [old], f"{branch}: {old[:7]} -> {new[:7]} is not a fast forward by one commit"
    tip = git("rev-parse", f"refs/heads/{branch}", cwd=repo.bare)
    assert tip == updates[-1][1]
    chain = git("rev-list", "--parents", tip, cwd=repo.bare).splitlines()
    assert all(len(line.split()) <= 2 for line in chain), f"{branch} has a merge commit"
    assert len(chain) == len(updates), f"{branch}: {len(chain)} commits but {len(updates)} ref updates"
    return len(updates)


def store_files(zones: Path) -> list[Path]:
    return sorted(p for p in zones.glob("*.json") if not p.name.startswith("."))


class GroupAgent(AgentProcess):
    """An agent process in its own process group, so `kill9` takes its git children with it
    (as when a container dies) and no orphaned push lands after the "crash"."""

    def __init__(self, repo: DesiredRepo, cluster: str, state: Path, *extra: str, log: Path | None = None) -> None:
        import subprocess

        from tests.e2e.agent_kit import agent_cmd

        self.log = log or state.parent / f"{state.name}.log"
        state.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            agent_cmd(repo, cluster, state, *self.listen_flags(), *extra),
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)

    def kill9(self) -> None:
        import contextlib
        import os
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group this agent leads
        self.proc.wait(timeout=30)
