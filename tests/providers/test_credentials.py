"""Provider credentials: environment, files, Secret manifests; values never shown."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from gitdns.core.model import CredentialsRef
from gitdns.errors import ConfigError
from gitdns.providers.credentials import load_credentials

SECRET = "s3cr3t-value-do-not-print"


def test_none_means_the_sdk_default_chain() -> None:
    assert load_credentials(None, provider="route53") == {}


def test_env_prefix_gives_kuadrant_keys() -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": SECRET, "HOME": "/root"}
    creds = load_credentials(CredentialsRef(env="AWS"), provider="route53", env=env)
    assert creds == {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": SECRET}
    assert SECRET not in repr(creds) and SECRET not in str(creds)


def test_env_variable_holding_json() -> None:
    env = {"DNS_CREDS": '{"PROJECT_ID": "p1", "GOOGLE": {"type": "service_account"}}'}
    creds = load_credentials(CredentialsRef(env="DNS_CREDS"), provider="google", env=env)
    assert creds["PROJECT_ID"] == "p1" and '"service_account"' in creds["GOOGLE"]


def test_missing_env_is_a_clear_error_without_values() -> None:
    with pytest.raises(ConfigError, match="no variable NOPE"):
        load_credentials(CredentialsRef(env="NOPE"), provider="route53", env={})


_B64 = base64.b64encode(SECRET.encode()).decode()


@pytest.mark.parametrize(("text", "key"), [
    (f'{{"AWS_SECRET_ACCESS_KEY": "{SECRET}"}}', "AWS_SECRET_ACCESS_KEY"),
    (f"# comment\nexport AWS_SECRET_ACCESS_KEY={SECRET}\n", "AWS_SECRET_ACCESS_KEY"),
    (f"AWS_SECRET_ACCESS_KEY: {SECRET}\n", "AWS_SECRET_ACCESS_KEY"),
    (f"apiVersion: v1\nkind: Secret\ntype: kuadrant.io/aws\ndata:\n  AWS_SECRET_ACCESS_KEY: {_B64}\n",
     "AWS_SECRET_ACCESS_KEY"),
])
def test_file_formats(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "creds"
    path.write_text(text)
    assert load_credentials(CredentialsRef(file=str(path)), provider="route53")[key] == SECRET


def test_unreadable_file_names_the_field_not_the_content(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"credentials\.file") as info:
        load_credentials(CredentialsRef(file=str(tmp_path / "absent")), provider="route53")
    assert SECRET not in str(info.value)
