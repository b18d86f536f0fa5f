"""The agent reads a Secret the repository names only when the operator lists it, and probes only
what the operator's ranges allow (docs/security.md, "Secrets the repository names are read only
when listed", "Probes reach only the node's or gateway's own address").

As in a pod, against the fake Kubernetes API (tests/fakes), its namespace holding the git
credential's Secret: a Zone naming that Secret as its provider credentials, or a DNSPolicy naming
it as ``headersSecret``, makes the agent ask the API for nothing, and says which setting would list
a Secret; a gateway address on loopback is not probed unless the operator's ranges allow it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig, resolve
from gitdns.agent.hooks import make_health
from gitdns.agent.ports import Wake
from gitdns.cli import build_parser
from gitdns.core.health.filter import HealthTarget
from gitdns.core.model import CredentialsRef, HealthCheck, ProviderRef
from gitdns.errors import ConfigError
from gitdns.providers.credentials import SecretNotListed, load_credentials
from gitdns.providers.factory import build_provider
from gitdns.providers.fences import SETTINGS, Fences, fences_from
from gitdns.providers.probeheaders import HeadersNotListed
from tests.fakes.kube_apiserver import FakeKube
from tests.probe_kit import RecordingServer, wait_until
from tests.providers.default_secret_helpers import NS, add_secret

pytest_plugins = ("tests.providers.default_secret_fixtures",)  # fake, api, in_cluster

GIT_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- agent-git-credential-0c1d"


@pytest.fixture
def secrets(in_cluster: FakeKube) -> FakeKube:
    add_secret(in_cluster, "gitdns-git-ssh", "Opaque", {"ssh-privatekey": GIT_KEY}, labels={})
    add_secret(in_cluster, "gitdns-provider", "kuadrant.io/aws", {"AWS_ACCESS_KEY_ID": "AKIDLISTED",
                                                                  "AWS_SECRET_ACCESS_KEY": "listed-secret"}, labels={})
    add_secret(in_cluster, "probe-headers", "Opaque", {"X-Probe": "for-gateways"}, labels={})
    add_secret(in_cluster, "aws", "kuadrant.io/aws", {"AWS_ACCESS_KEY_ID": "AKIDOTHER"}, labels={}, namespace="other")
    return in_cluster


def asked(fake: FakeKube, name: str) -> list[str]:
    """Every request (authorised or not) for the Secret ``name``."""
    return [r.path for r in fake.requests if r.path.rstrip("/").endswith(f"/secrets/{name}")]


def agent(**settings: str) -> AgentConfig:
    return resolve({"repo": "https://git.example.com/dns.git", **settings}, {})


def agent_fences(config: AgentConfig) -> Fences:
    """The fences as the agent builds them (gitdns/agent/main.py build_agent)."""
    return fences_from({name: getattr(config, name) for name in SETTINGS}, {}, namespace=config.pod_namespace or None)


# --- a Zone's credentials.secret -------------------------------------------------------------------------


def test_a_zone_naming_the_git_credential_reads_nothing(secrets: FakeKube, tmp_path: Path) -> None:
    fences = agent_fences(agent(credentials_secrets="gitdns-provider"))
    ref = ProviderRef("route53", (("hostedZoneId", "Z0000000000000"), ("region", "eu-west-1")),
                      CredentialsRef(secret="gitdns-git-ssh"))
    with pytest.raises(SecretNotListed) as refused:
        build_provider("example.com", ref, tmp_path, fences)
    message = str(refused.value)
    for words in ("spec.provider.credentials.secret", "gitdns-git-ssh", "--credentials-secrets",
                  "GITDNS_CREDENTIALS_SECRETS", "credentialsSecrets", "nothing was read", "gitdns-provider"):
        assert words in message, words
    assert GIT_KEY not in message and refused.value.reason == "SecretNotListed"
    assert asked(secrets, "gitdns-git-ssh") == []  # not even asked
    # the listed one is read
    creds = load_credentials(CredentialsRef(secret="gitdns-provider"), provider="route53", fences=fences)
    assert creds["AWS_ACCESS_KEY_ID"] == "AKIDLISTED" and asked(secrets, "gitdns-provider")


def test_with_no_list_no_secret_is_read(secrets: FakeKube) -> None:
    for name in ("gitdns-provider", "gitdns-git-ssh"):
        with pytest.raises(SecretNotListed, match=r"listed now: none"):
            load_credentials(CredentialsRef(secret=name), provider="route53", fences=agent_fences(agent()))
    assert secrets.requests == [] or not any("/secrets/" in r.path for r in secrets.requests)


def test_another_namespace_needs_its_namespace_and_the_secret_listed(secrets: FakeKube) -> None:
    ref = CredentialsRef(secret="aws", namespace="other")
    for settings in ({"credentials_secrets": "aws"},  # a bare name is the agent's own namespace
                     {"credentials_secrets": "other/aws"},  # the namespace itself is not allowed
                     {"credentials_namespaces": "other", "credentials_secrets": "aws"}):
        with pytest.raises(ConfigError):
            load_credentials(ref, provider="route53", fences=agent_fences(agent(**settings)))
    assert asked(secrets, "aws") == []
    fences = agent_fences(agent(credentials_namespaces="other", credentials_secrets="other/aws"))
    assert load_credentials(ref, provider="route53", fences=fences)["AWS_ACCESS_KEY_ID"] == "AKIDOTHER"


def test_a_listed_entry_must_be_a_secret_name() -> None:
    for entry in ("../x", "a/b/c", "Name", "x/", "*"):
        with pytest.raises(ConfigError, match="--credentials-secrets"):
            Fences.parse(credentials_secrets=f"ok,{entry}")


# --- a DNSPolicy's headersSecret, and the gateway addresses it is sent to ---------------------------------


@pytest.fixture
def gateway() -> Iterator[RecordingServer]:
    with RecordingServer("127.0.0.1") as server:
        yield server


def target(address: str, port: int, secret: str) -> HealthTarget:
    check = HealthCheck(protocol="HTTP", port=port, path="/", interval=0.05, timeout=1.0, failure_threshold=1,
                        headers_secret=secret)
    return HealthTarget("api.example.com", address, check, True)


def probe(config: AgentConfig, targets: list[HealthTarget], rounds: int = 3) -> dict[str, str]:
    health = make_health(config, Wake())
    health.set_targets(targets)
    try:
        wait_until(lambda: all((h := health.monitor.snapshot().get(t.target_id)) is not None and h.checks >= rounds
                               for t in targets))
        return {k: h.last_error for k, h in health.monitor.snapshot().items()}
    finally:
        health.stop()


def test_the_git_credential_as_headers_secret_is_never_read_nor_sent(
        secrets: FakeKube, gateway: RecordingServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    config = agent(headers_secrets="probe-headers", probe_allow_ranges="127.0.0.1/32")
    errors = probe(config, [target("127.0.0.1", gateway.port, "gitdns-git-ssh")])
    assert asked(secrets, "gitdns-git-ssh") == []
    assert list(errors.values()) == [""] and gateway.requests  # probed, without the headers it may not have
    assert not any(GIT_KEY in json.dumps(h) or "ssh-privatekey" in json.dumps(h) for h in gateway.requests)
    warnings = [r.getMessage() for r in caplog.records if "probe headers unavailable" in r.getMessage()]
    assert len(warnings) == 1 and "HeadersSecretNotListed" in warnings[0] and "--headers-secrets" in warnings[0]
    assert GIT_KEY not in caplog.text
    # the listed Secret: read, and sent to the gateway's own address
    gateway.requests.clear()
    probe(config, [target("127.0.0.1", gateway.port, "probe-headers")])
    assert asked(secrets, "probe-headers") and all(h.get("X-Probe") == "for-gateways" for h in gateway.requests)


def test_a_gateway_address_on_loopback_is_not_probed_without_the_operators_range(
        secrets: FakeKube, gateway: RecordingServer) -> None:
    errors = probe(agent(headers_secrets="probe-headers"),
                   [target("127.0.0.1", gateway.port, "probe-headers"),
                    target("::ffff:127.0.0.1", gateway.port, "probe-headers"),
                    target("169.254.169.254", gateway.port, "probe-headers")])
    assert gateway.connections == []
    assert "127.0.0.1 is a loopback address" in errors["api.example.com|127.0.0.1"]
    assert "loopback address" in errors["api.example.com|::ffff:127.0.0.1"]
    assert "cloud metadata address" in errors["api.example.com|169.254.169.254"]
    assert all("--probe-allow-ranges" in e for e in errors.values())


def test_the_headers_reader_refuses_before_reading(secrets: FakeKube, tmp_path: Path) -> None:
    from gitdns.providers.probeheaders import ProbeHeaders

    reader = ProbeHeaders(["probe-headers"], NS, tmp_path, in_cluster=True)
    with pytest.raises(HeadersNotListed) as refused:
        reader.read("gitdns-git-ssh")
    assert refused.value.kept is None and GIT_KEY not in str(refused.value)
    assert asked(secrets, "gitdns-git-ssh") == []
    # outside a cluster, the file <state dir>/secrets/<name>: the same list decides
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "gitdns-git-ssh").write_text(json.dumps({"ssh-privatekey": GIT_KEY}))
    outside = ProbeHeaders(["probe-headers"], NS, tmp_path, in_cluster=False)
    with pytest.raises(HeadersNotListed):
        outside.read("gitdns-git-ssh")


# --- the settings -------------------------------------------------------------------------------------------


def test_the_settings_come_from_flags_variables_and_the_config_file(tmp_path: Path) -> None:
    args = vars(build_parser().parse_args(["agent", "--probe-allow-ranges", "127.0.0.0/8", "--headers-secrets",
                                           "probe-a", "--credentials-secrets", "aws,other/aws"]))
    config = resolve({**args, "repo": "x"}, {})
    assert (config.probe_allow_ranges, config.headers_secrets, config.credentials_secrets) == (
        "127.0.0.0/8", "probe-a", "aws,other/aws")
    env = {"GITDNS_PROBE_ALLOW_RANGES": "10.0.0.0/8", "GITDNS_HEADERS_SECRETS": "probe-b",
           "GITDNS_CREDENTIALS_SECRETS": "gitdns-provider"}
    config = resolve({"repo": "x"}, env)
    assert (config.probe_allow_ranges, config.headers_secrets, config.credentials_secrets) == (
        "10.0.0.0/8", "probe-b", "gitdns-provider")
    file = tmp_path / "agent.yaml"
    file.write_text("repo: x\nprobeAllowRanges: [127.0.0.1/32, '::1']\nheadersSecrets: [probe-c]\n"
                    "credentialsSecrets: [gitdns-provider]\n")
    config = resolve({"config": str(file)}, {})
    assert (config.probe_allow_ranges, config.headers_secrets) == ("127.0.0.1/32,::1", "probe-c")


@pytest.mark.parametrize("bad", ["10.1.2.3/8", "localhost", "127.0.0.0/40"])
def test_a_bad_range_stops_the_agent_naming_the_setting(bad: str) -> None:
    with pytest.raises(ConfigError) as refused:
        agent(probe_allow_ranges=bad)
    for words in ("--probe-allow-ranges", "GITDNS_PROBE_ALLOW_RANGES", "probeAllowRanges"):
        assert words in str(refused.value), words
