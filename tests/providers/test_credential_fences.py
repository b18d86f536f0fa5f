"""A Zone's credentials reference resolves only among the sources the operator mounted.

``credentials: {env: NAME}`` reads only variables under a prefix the operator allows
(``--credentials-env-prefixes``); ``{file: PATH}`` only a regular file inside the operator's
``--credentials-dir`` (no ``..``, no symbolic link out of it; links inside it, as in a
Kubernetes Secret volume, are fine); ``{secret: NAME, namespace: NS}`` only in the agent's own
namespace or one of ``--credentials-namespaces``.  Refusals name the field and the setting and
never quote a value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gitdns.core.model import CredentialsRef
from gitdns.errors import ConfigError
from gitdns.providers.credentials import load_credentials
from gitdns.providers.fences import MAX_CREDENTIALS_FILE, Fences
from tests.fakes.kube_apiserver import FakeKube
from tests.providers.default_secret_helpers import NS, add_secret

pytest_plugins = ("tests.providers.default_secret_fixtures",)  # fake, api, in_cluster

SECRET = "credential-value-SECRET"


def load(ref: CredentialsRef, fences: Fences, env: dict[str, str] | None = None) -> dict[str, str]:
    return dict(load_credentials(ref, provider="route53", fences=fences, env=env))


# --- env --------------------------------------------------------------------------------------------------


def test_env_reads_only_an_allowed_prefix() -> None:
    env = {"AWS_ACCESS_KEY_ID": SECRET, "AWSX_KEY": SECRET, "AWS_PROD_KEY": SECRET, "GIT_TOKEN": SECRET}
    with pytest.raises(ConfigError) as info:
        load(CredentialsRef(env="GIT_TOKEN"), Fences(), env)
    message = str(info.value)
    assert "spec.provider.credentials.env" in message and "--credentials-env-prefixes" in message
    assert SECRET not in message
    fences = Fences.parse(credentials_env_prefixes="AWS")
    assert load(CredentialsRef(env="AWS"), fences, env) == {"AWS_ACCESS_KEY_ID": SECRET, "AWS_PROD_KEY": SECRET}
    assert load(CredentialsRef(env="AWS_PROD"), fences, env) == {"AWS_PROD_KEY": SECRET}
    for name in ("AWSX", "AW", "GIT_TOKEN"):
        with pytest.raises(ConfigError, match="not a prefix the operator allows"):
            load(CredentialsRef(env=name), fences, env)


def test_prefix_entries_are_variable_names() -> None:
    with pytest.raises(ConfigError, match=r"--credentials-env-prefixes .*is not an environment variable name"):
        Fences.parse(credentials_env_prefixes="AWS,$(id)")


# --- file -------------------------------------------------------------------------------------------------


@pytest.fixture
def mounted(tmp_path: Path) -> tuple[Path, Path]:
    """(the credentials directory, an outside file holding a secret)."""
    creds, outside = tmp_path / "creds", tmp_path / "elsewhere"
    creds.mkdir()
    outside.mkdir()
    (creds / "aws.env").write_text(f"AWS_ACCESS_KEY_ID={SECRET}\n")
    (outside / "other.env").write_text(f"OTHER={SECRET}\n")
    return creds, outside / "other.env"


def test_without_a_credentials_directory_no_file_is_read(mounted: tuple[Path, Path]) -> None:
    creds, _ = mounted
    with pytest.raises(ConfigError, match=r"credentials\.file: .*no credentials directory is set.*--credentials-dir"):
        load(CredentialsRef(file=str(creds / "aws.env")), Fences())


def test_files_inside_the_directory_are_read(mounted: tuple[Path, Path]) -> None:
    creds, _ = mounted
    fences = Fences.parse(credentials_dir=str(creds))
    assert load(CredentialsRef(file="aws.env"), fences) == {"AWS_ACCESS_KEY_ID": SECRET}
    assert load(CredentialsRef(file=str(creds / "aws.env")), fences) == {"AWS_ACCESS_KEY_ID": SECRET}


def test_a_kubernetes_secret_volume_with_its_links_inside_is_read(mounted: tuple[Path, Path]) -> None:
    creds, _ = mounted
    data = creds / "..2024_01_01_00_00_00.000000000"  # how the kubelet mounts a Secret
    data.mkdir()
    (data / "tsig.env").write_text(f"TSIG_SECRET={SECRET}\n")
    (creds / "..data").symlink_to(data.name)
    (creds / "tsig.env").symlink_to("..data/tsig.env")
    assert load(CredentialsRef(file="tsig.env"), Fences.parse(credentials_dir=str(creds))) == {"TSIG_SECRET": SECRET}


@pytest.mark.parametrize("name", ["../elsewhere/other.env", "sub/../../elsewhere/other.env", "link.env",
                                  "dirlink/other.env", "ABSOLUTE", "/etc/hostname", "."])
def test_nothing_outside_the_directory_is_read(mounted: tuple[Path, Path], name: str) -> None:
    creds, outside = mounted
    (creds / "link.env").symlink_to(outside)
    (creds / "dirlink").symlink_to(outside.parent, target_is_directory=True)
    ref = CredentialsRef(file=str(outside) if name == "ABSOLUTE" else name)
    with pytest.raises(ConfigError) as info:
        load(ref, Fences.parse(credentials_dir=str(creds)))
    assert "spec.provider.credentials.file" in str(info.value) and SECRET not in str(info.value)


def test_only_a_regular_file_of_bounded_size_is_read(mounted: tuple[Path, Path]) -> None:
    creds, _ = mounted
    fences = Fences.parse(credentials_dir=str(creds))
    os.mkfifo(creds / "fifo")
    with pytest.raises(ConfigError, match="not a regular file"):
        load(CredentialsRef(file="fifo"), fences)  # returns at once: a FIFO is never waited on
    (creds / "big.env").write_bytes(b"A=" + b"x" * MAX_CREDENTIALS_FILE)
    with pytest.raises(ConfigError, match="larger than"):
        load(CredentialsRef(file="big.env"), fences)


def test_a_relative_credentials_directory_is_taken_from_the_current_one(mounted: tuple[Path, Path],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    creds, _ = mounted
    monkeypatch.chdir(creds.parent)
    fences = Fences.parse(credentials_dir="creds")
    monkeypatch.chdir("/")
    assert load(CredentialsRef(file="aws.env"), fences) == {"AWS_ACCESS_KEY_ID": SECRET}


def test_a_file_the_operator_named_on_the_command_line_is_read(mounted: tuple[Path, Path]) -> None:
    _, outside = mounted
    fences = Fences().allowing_credentials(file=str(outside))
    assert load(CredentialsRef(file=str(outside)), fences) == {"OTHER": SECRET}


# --- Kubernetes Secrets -----------------------------------------------------------------------------------


def test_a_secret_is_read_only_in_an_allowed_namespace(in_cluster: FakeKube, api: Any) -> None:
    add_secret(in_cluster, "aws", "kuadrant.io/aws", {"AWS_ACCESS_KEY_ID": SECRET})
    add_secret(in_cluster, "aws", "kuadrant.io/aws", {"AWS_ACCESS_KEY_ID": SECRET}, namespace="other")
    listed = Fences.parse(credentials_secrets="aws")  # the operator lists it (tests/agent/test_secret_gate.py)
    assert load(CredentialsRef(secret="aws"), listed) == {"AWS_ACCESS_KEY_ID": SECRET}  # the agent's own
    assert load(CredentialsRef(secret="aws", namespace=NS), listed) == {"AWS_ACCESS_KEY_ID": SECRET}
    with pytest.raises(ConfigError) as info:
        load(CredentialsRef(secret="aws", namespace="other"), listed)
    assert "spec.provider.credentials.namespace" in str(info.value) and "--credentials-namespaces" in str(info.value)
    assert in_cluster.count("GET", "/namespaces/other/secrets") == 0
    allowed = Fences.parse(credentials_namespaces="other", credentials_secrets="other/aws")
    assert load(CredentialsRef(secret="aws", namespace="other"), allowed) == {"AWS_ACCESS_KEY_ID": SECRET}
