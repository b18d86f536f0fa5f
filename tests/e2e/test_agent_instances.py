"""Two installs of the agent in one cluster, two teams with their own repositories, on one zone:
each is its own owner (`--instance`: ``<kube-system UID>.<instance>``), keeps its own records and
never takes the other's.  The agents are `gitdns agent --once` processes "in a pod": the
kube-system UID, the Leases and the mode ConfigMap come from the fake Kubernetes API
(tests/fakes/kube_apiserver.py), reached through a kubeconfig; the zone is one `local` store both
write."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.core.names import short_hash
from gitdns.core.registry import decode_entries
from gitdns.providers.local import LocalProvider
from tests.e2e.agent_kit import ROOT, WorkTree, git
from tests.fakes.kube_apiserver import FakeKube

UID = "7d2f9c41-0b6e-4a58-9e13-c4a0f5d82b67"  # the fake cluster's kube-system Namespace UID
NAMESPACE = "gitdns-system"  # both installs' Leases in one namespace: their names must differ
ZONE = "example.com"
TEAMS = {"team-a": "192.0.2.1", "team-b": "192.0.2.2"}


def owner(team: str) -> str:
    return f"{UID}.{team}"


def team_files(team: str, address: str, store: Path, own_host: bool = True, ident: str = "") -> dict[str, str]:
    """One team's desired repository: the shared zone, its Cluster (id ``ident``, by default
    <UID>.<team>) with one Gateway serving app.example.com (shared with the other team) and
    <team>.example.com (its own), and a simple DNSPolicy on that Gateway."""
    listeners = "        - hostname: app.example.com\n"
    if own_host:
        listeners += f"        - hostname: {team}.example.com\n"
    return {
        "zones/example-com.yaml": (
            "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata:\n  name: example-com\nspec:\n"
            f"  domain: {ZONE}\n  provider:\n    type: local\n    settings:\n      path: {store / 'zones'}\n"
            "  registry: txt\n  publisher: gitdns\n"),
        "clusters/cluster.yaml": (
            f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: {team}\nspec:\n"
            f"  id: {ident or owner(team)}\n  gateways:\n    - name: gw\n      namespace: {team}\n"
            f"      addresses: [{address}]\n      listeners:\n{listeners}"),
        "policies/app.yaml": (
            "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata:\n  name: app\nspec:\n"
            f"  targetRef:\n    gateway: gw\n    namespace: {team}\n  strategy: simple\n"),
    }


class Team:
    """One install: its desired repository (a bare remote and a work tree), its state directory."""

    def __init__(self, root: Path, team: str, store: Path, ident: str = "") -> None:
        self.name, self.store, self.ident = team, store, ident
        self.repo = WorkTree(root / team / "desired", root / team / "desired.git")
        self.state = root / team / "state"
        self.write(TEAMS[team])

    def write(self, address: str, own_host: bool = True) -> str:
        for rel, text in team_files(self.name, address, self.store, own_host, self.ident).items():
            self.repo.write(rel, text)
        return self.repo.commit(f"{self.name}: {address}")

    def once(self, env: dict[str, str], *extra: str, instance: bool = True) -> subprocess.CompletedProcess[str]:
        """``gitdns agent --once`` as this install's pod runs it: no --cluster (the kube-system UID),
        its --instance (unless ``instance`` is False), the Kubernetes Lease."""
        self.state.mkdir(parents=True, exist_ok=True)
        named = ["--instance", self.name] if instance else []
        return subprocess.run(
            [sys.executable, "-m", "gitdns.cli", "agent", "--repo", str(self.repo.bare), *named,
             "--state-dir", str(self.state), "--store-dir", str(self.store), "--lease", "kubernetes",
             "--pod-namespace", NAMESPACE, "--pod-name", f"gitdns-{self.name}-0", "--log-format", "text",
             "--git-timeout", "20", "--once", "--listen", "", "--admin-listen", "", *extra],
            env=env, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube(kube_system_uid=UID)
    fake.start()
    fake.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    yield fake
    fake.stop()


@pytest.fixture
def pod_env(kube: FakeKube, tmp_path: Path) -> dict[str, str]:
    """As in a pod (KUBERNETES_SERVICE_HOST set), the client reaching the fake API through a
    kubeconfig (no service account token here: the in-cluster loader falls back to it)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{kube.base_url}'}}}}]\n"
        "users: [{name: fake, user: {token: fake}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITDNS_", "KUBERNETES_"))}
    return {**env, "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBECONFIG": str(kubeconfig),
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Dev",
            "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
            "GIT_COMMITTER_EMAIL": "dev@example.com", "PYTHONPATH": str(ROOT)}


def zone_data(store: Path) -> dict[str, tuple[str, ...]]:
    """Name -> the A record's values (sorted), of the names the teams publish."""
    return {r.name: tuple(sorted(r.values)) for r in LocalProvider(store / "zones").read(ZONE).records
            if r.type == "A"}


def owners_by_name(store: Path) -> dict[str, set[str]]:
    """Data record name -> the owners whose ownership TXT claim it."""
    claims: dict[str, set[str]] = {}
    for record in LocalProvider(store / "zones").read(ZONE).records:
        if record.type == "TXT" and record.name.startswith("kuadrant-"):
            for entry in decode_entries(record):
                claims.setdefault(entry.key.name, set()).add(entry.owner)
    return claims


def test_two_installs_keep_their_own_records_in_one_zone(kube: FakeKube, pod_env: dict[str, str],
                                                          tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    teams = {name: Team(tmp_path, name, store) for name in TEAMS}

    for team in teams.values():  # a, then b: b's pass must leave a's records alone
        done = team.once(pod_env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Ready" in done.stdout
    assert zone_data(store) == {"app.example.com": ("192.0.2.1", "192.0.2.2"),
                                "team-a.example.com": ("192.0.2.1",), "team-b.example.com": ("192.0.2.2",)}
    assert owners_by_name(store) == {"app.example.com": {owner("team-a"), owner("team-b")},
                                     "team-a.example.com": {owner("team-a")},
                                     "team-b.example.com": {owner("team-b")}}

    # everything named after the owner id is each install's own
    names = {r.name for r in LocalProvider(store / "zones").read(ZONE).records}
    for team in TEAMS:
        assert f"gitdns-heartbeat-{short_hash(owner(team), 8)}.{ZONE}" in names
        branch = git("branch", "--list", "gitdns-status/*", cwd=teams[team].repo.bare).split()
        assert branch == [f"gitdns-status/{owner(team)}"]
        lease = kube.get("coordination.k8s.io", "v1", "leases", f"gitdns-{short_hash(owner(team), 8)}", NAMESPACE)
        assert lease["spec"].get("holderIdentity") in (None, "", f"gitdns-{team}-0")  # released after --once
    assert len({short_hash(owner(team), 8) for team in TEAMS}) == 2  # two Leases, two heartbeats

    # team b moves its gateway and stops serving its own host: its change takes only its values
    teams["team-b"].write("192.0.2.3", own_host=False)
    done = teams["team-b"].once(pod_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert zone_data(store) == {"app.example.com": ("192.0.2.1", "192.0.2.3"), "team-a.example.com": ("192.0.2.1",)}
    assert owners_by_name(store) == {"app.example.com": {owner("team-a"), owner("team-b")},
                                     "team-a.example.com": {owner("team-a")}}

    # and team a's next pass neither restores nor removes anything of team b's
    done = teams["team-a"].once(pod_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert zone_data(store) == {"app.example.com": ("192.0.2.1", "192.0.2.3"), "team-a.example.com": ("192.0.2.1",)}


def test_a_named_install_refuses_the_default_installs_cluster(kube: FakeKube, pod_env: dict[str, str],
                                                             tmp_path: Path) -> None:
    """An install given an instance is not the Cluster of the default install (the UID alone):
    git names no Cluster <UID>.<instance> here, and the agent says which id it wants."""
    store = tmp_path / "store"
    store.mkdir()
    team = Team(tmp_path, "team-a", store, ident=UID)  # the Cluster of the install without a name
    done = team.once(pod_env)
    assert done.returncode == 1
    assert f"no Cluster {owner('team-a')} in git" in done.stdout
    assert "gitdns cluster-id --instance team-a" in done.stdout
    assert zone_data(store) == {}


def test_without_instances_the_second_install_takes_the_firsts_records(kube: FakeKube, pod_env: dict[str, str],
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: both installs the kube-system UID, one owner id.  The second's first start is
    refused (the records it takes for its own carry a revision its repository does not hold:
    RollbackRefused); pushed past that, it removes the first install's records as its own."""
    store = tmp_path / "store"
    store.mkdir()
    teams = {}
    for minute, name in enumerate(TEAMS):  # b's revision the newer: it does not yield to a's
        monkeypatch.setenv("GIT_COMMITTER_DATE", f"2025-01-01T00:0{minute}:00Z")
        teams[name] = Team(tmp_path, name, store, ident=UID)
    assert teams["team-a"].once(pod_env, instance=False).returncode == 0
    refused = teams["team-b"].once(pod_env, instance=False)
    assert refused.returncode == 1 and "RollbackRefused" in refused.stdout
    assert zone_data(store) == {"app.example.com": ("192.0.2.1",), "team-a.example.com": ("192.0.2.1",)}
    taken = teams["team-b"].once(pod_env, "--allow-rollback", instance=False)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert zone_data(store) == {"app.example.com": ("192.0.2.2",), "team-b.example.com": ("192.0.2.2",)}
