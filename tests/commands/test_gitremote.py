"""The git transport of the verbs that talk to a remote: one set of flags (the agent's), their
GITDNS_* variables as defaults, one GitAuth per verb."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gitdns.adapters.git.auth import GitAuth
from gitdns.cli import build_parser
from gitdns.commands.git.remote import TRANSPORT, git_auth

FLAGS = ("--ssh-key", "--known-hosts", "--token-file", "--token-env", "--ca-file", "--git-username")
REMOTE_VERBS = (["status"], ["history", "api.example.com"], ["groups", "add", "example.com", "a"],
                ["groups", "remove", "example.com", "a"], ["groups", "set", "example.com"],
                ["groups", "reconcile", "example.com"], ["groups", "get", "example.com"], ["agent"])


def test_the_transport_is_the_agent_s_settings() -> None:
    from gitdns.agent.config import AgentConfig

    assert tuple(f.replace("_", "-") for f in TRANSPORT) == tuple(f[2:] for f in FLAGS)
    assert set(TRANSPORT) <= set(AgentConfig.__dataclass_fields__)


def test_nothing_given_is_the_ambient_configuration() -> None:
    auth = git_auth({}, env={})
    assert auth == GitAuth() and not auth.configured


def test_flags_build_the_auth() -> None:
    auth = git_auth({"ssh_key": "/k", "known_hosts": "/kh", "token_file": "/t", "token_env": "TOK",
                     "ca_file": "/ca.pem"}, env={})
    assert auth == GitAuth(token_env="TOK", token_file=Path("/t"), ssh_key=Path("/k"), known_hosts=Path("/kh"),
                           ca_file=Path("/ca.pem"))


def test_environment_is_the_default_and_a_flag_wins() -> None:
    env = {"GITDNS_SSH_KEY": "/env-key", "GITDNS_KNOWN_HOSTS": "/env-kh", "GITDNS_TOKEN_FILE": "/env-token",
           "GITDNS_TOKEN_ENV": "ENV_TOK", "GITDNS_CA_FILE": "/env-ca"}
    assert git_auth({}, env=env) == GitAuth(token_env="ENV_TOK", token_file=Path("/env-token"),
                                            ssh_key=Path("/env-key"), known_hosts=Path("/env-kh"),
                                            ca_file=Path("/env-ca"))
    auth = git_auth({"ssh_key": "/flag-key", "ca_file": None}, env=env)
    assert auth.ssh_key == Path("/flag-key") and auth.ca_file == Path("/env-ca")


def test_an_empty_flag_unsets_the_environment_s_value() -> None:
    auth = git_auth({"token_env": "", "token_file": ""}, env={"GITDNS_TOKEN_ENV": "X", "GITDNS_TOKEN_FILE": "/t"})
    assert not auth.uses_token


@pytest.mark.parametrize("argv", REMOTE_VERBS, ids=lambda a: " ".join(a[:2]))
def test_every_verb_that_talks_to_a_remote_takes_the_transport_flags(argv: list[str]) -> None:
    values = ["/key", "/known", "/token", "TOKEN_VAR", "/ca.pem", "deploy-bot"]
    args = build_parser().parse_args([*argv, *(x for pair in zip(FLAGS, values, strict=True) for x in pair)])
    assert [getattr(args, name) for name in TRANSPORT] == values


@pytest.mark.parametrize("argv", REMOTE_VERBS, ids=lambda a: " ".join(a[:2]))
def test_the_flags_default_to_none(argv: list[str]) -> None:
    """None, not "": an absent flag leaves the GITDNS_* variable (and the agent's config file) in force."""
    args = build_parser().parse_args(argv)
    assert all(getattr(args, name) is None for name in TRANSPORT)


def test_the_flags_are_defined_once() -> None:
    """The agent and the verbs share one parent parser: one help text per flag everywhere."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = set()
    for verb in ("agent", "status", "history"):
        for action in sub.choices[verb]._actions:
            if "--ssh-key" in action.option_strings:
                helps.add(action.help)
    assert len(helps) == 1 and "GITDNS_SSH_KEY" in next(iter(helps))


@pytest.mark.parametrize("verb", [["status"], ["history", "api.example.com"]], ids=lambda a: a[0])
def test_a_repo_url_carrying_a_password_is_refused(verb: list[str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from gitdns.cli import main

    code = main([*verb, "--repo", "https://git:s3cr3t-in-url@127.0.0.1:9/dns.git", "--state-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "carries a password" in err, err
    assert "s3cr3t-in-url" not in err


def test_the_https_user_name_defaults_to_git_and_is_set_by_flag_or_environment() -> None:
    assert git_auth({}, env={}).username == "git"
    assert git_auth({"git_username": "deploy-bot"}, env={}).username == "deploy-bot"
    assert git_auth({}, env={"GITDNS_GIT_USERNAME": "gitlab+deploy-token-42"}).username == "gitlab+deploy-token-42"
