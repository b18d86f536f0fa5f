"""An owner id per install (`--instance NAME`, GITDNS_INSTANCE, `instance:`): in a pod the agent is
the Cluster whose id is the kube-system UID, or ``<UID>.<NAME>`` for a named install; the name is
checked strictly, the id fits a Cluster id, an ownership TXT label and a status branch name, and
everything named after it (Lease, heartbeat, lock TXT, status branch) differs per instance."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig, resolve
from gitdns.agent.identity import derive_cluster
from gitdns.commands.clusters import cluster_id
from gitdns.core.names import short_hash
from gitdns.core.owner.install import MAX_INSTANCE, check_instance, owner_id
from gitdns.core.registry import OwnerLabels, decode, encode, label_error
from gitdns.errors import ConfigError
from tests.agent.test_cluster_id import serve
from tests.fakes.kube_apiserver import FakeKube

UID = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"
CLUSTER_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")  # schemas/cluster.schema.json


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    yield from serve(monkeypatch, UID)


def test_the_default_instance_keeps_the_uid() -> None:
    assert owner_id(UID) == owner_id(UID, "") == UID


@pytest.mark.parametrize("name", ["team-b", "b", "a1", "x" * MAX_INSTANCE, "0-team"])
def test_a_named_instance_is_the_uid_dot_name(name: str) -> None:
    ident = owner_id(UID, name)
    assert ident == f"{UID}.{name}" and len(ident) <= 63 and CLUSTER_ID.match(ident)
    assert label_error(ident) is None  # an owner label of the ownership TXT
    read = decode(encode(OwnerLabels(owner=ident, group="site-a"))[0])
    assert read is not None and read.owner == ident
    ref = subprocess.run(["git", "check-ref-format", f"refs/heads/gitdns-status/{ident}"], check=False)
    assert ref.returncode == 0  # the status branch's name


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), ("Team-B", "lower-case"), ("team_b", "lower-case"), ("team.b", "lower-case"),
    ("-team", "lower-case"), ("team-", "lower-case"), ("team b", "lower-case"), ("tëam", "lower-case"),
    ("team,b", "lower-case"), ("x" * (MAX_INSTANCE + 1), "at most 26"), ("default", "without a name"),
    ("team\n", "lower-case"),
])
def test_instance_names_are_checked_strictly(name: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_instance(name)


def test_distinct_per_instance_everything_named_after_the_id() -> None:
    """Owner hash (ownership TXT, heartbeat, lock TXT), Lease name and status branch: none shared."""
    ids = [owner_id(UID), owner_id(UID, "team-a"), owner_id(UID, "team-b")]
    assert len(set(ids)) == 3
    assert len({short_hash(i, 8) for i in ids}) == 3  # kuadrant-<hash8>, gitdns-heartbeat-<hash8>, gitdns-<hash8>
    assert len({f"gitdns-status/{i}" for i in ids}) == 3


def test_the_setting_has_its_three_spellings(tmp_path: Path) -> None:
    config_file = tmp_path / "gitdns.yaml"
    config_file.write_text("repo: r\ninstance: from-file\n")
    assert resolve({"config": str(config_file)}, {}).instance == "from-file"
    assert resolve({"config": str(config_file)}, {"GITDNS_INSTANCE": "from-env"}).instance == "from-env"
    assert resolve({"config": str(config_file), "instance": "from-flag"},
                   {"GITDNS_INSTANCE": "from-env"}).instance == "from-flag"
    assert resolve({"repo": "r"}, {}).instance == ""


@pytest.mark.parametrize("name", ["Team", "default", "x" * 27])
def test_a_bad_name_stops_the_agent_naming_the_setting(name: str) -> None:
    with pytest.raises(ConfigError, match=r"--instance \(GITDNS_INSTANCE\)"):
        resolve({"repo": "r"}, {"GITDNS_INSTANCE": name})


def test_in_a_pod_the_agent_is_the_uid_dot_instance(fake: FakeKube, tmp_path: Path) -> None:
    config = derive_cluster(AgentConfig(repo="r", cluster="", instance="team-b", state_dir=str(tmp_path)))
    assert config.cluster == f"{fake.kube_system_uid}.team-b"
    config = derive_cluster(AgentConfig(repo="r", cluster="", state_dir=str(tmp_path)))
    assert config.cluster == fake.kube_system_uid


def test_outside_kubernetes_an_instance_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match=r"--instance \(GITDNS_INSTANCE\) names an install in a pod"):
        derive_cluster(AgentConfig(repo="r", cluster="eu-west-1", instance="team-b", state_dir=str(tmp_path)))


def test_the_identity_check_wants_the_instances_id(fake: FakeKube) -> None:
    from gitdns.agent.main import check_cluster_identity
    from gitdns.core.model import Cluster

    mine = Cluster(name="eu-west-1-team-b", id=f"{UID}.team-b")
    check_cluster_identity(AgentConfig(repo="r", cluster="eu-west-1-team-b", instance="team-b"), mine)
    with pytest.raises(ConfigError, match="ClusterIdMismatch") as caught:  # the default install is not team-b
        check_cluster_identity(AgentConfig(repo="r", cluster="eu-west-1-team-b"), mine)
    assert f"kube-system UID is {UID}" in str(caught.value)
    with pytest.raises(ConfigError, match="ClusterIdMismatch") as caught:  # nor is team-a
        check_cluster_identity(AgentConfig(repo="r", cluster="eu-west-1-team-b", instance="team-a"), mine)
    assert f"this install's id is {UID}.team-a" in str(caught.value)


def test_cluster_id_prints_the_instances_id(fake: FakeKube) -> None:
    assert cluster_id().out == [f"{UID}\n"]
    assert cluster_id("team-b").out == [f"{UID}.team-b\n"]
    with pytest.raises(ConfigError, match="--instance 'Team-B'"):
        cluster_id("Team-B")


def test_cluster_id_command_line(fake: FakeKube, capsys: pytest.CaptureFixture[str]) -> None:
    from gitdns.cli import main

    assert main(["cluster-id", "--instance", "team-b"]) == 0
    assert capsys.readouterr().out == f"{UID}.team-b\n"
    assert main(["cluster-id"]) == 0
    assert capsys.readouterr().out == f"{UID}\n"
