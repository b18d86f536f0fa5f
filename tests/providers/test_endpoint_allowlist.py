"""Provider endpoints and rfc2136 servers are the operator's choice, never the repository's.

The attack (issue "Hostile input"): a Zone with ``endpoint: http://127.0.0.1:PORT`` and
``credentials: {env: AWS}`` validated and the agent signed its requests to that server (the
access key id and ``X-Amz-Security-Token`` in clear); Google and Azure sent their bearer
tokens.  Here each provider is built the way the agent builds it (`default_factory`, the real
SDK client) and pointed at a loopback server recording every request: with an endpoint the
operator did not allow, building the provider is a `ConfigError` naming the Zone's file, the
field and the setting, and the server sees no connection at all.  An allowed https endpoint
still gets the request (so the refusal is the fence, not a broken client).
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.core.model import CredentialsRef, Origin, ProviderRef, Zone
from gitdns.errors import ConfigError
from gitdns.providers.fences import Fences
from gitdns.reconcile.engine import default_factory
from tests.providers.capture_server import ACCESS_TOKEN, CaptureServer
from tests.providers.tls import server_context

DOMAIN = "example.com"
KEY_ID = "ASIAY34FZKBOKMUTVV7A"
SESSION_TOKEN = "session-token-SECRET-value"
AZURE_TOKEN = "azure-bearer-SECRET-value"
FILE, LINE = "zones/evil.yaml", 3


def zone(ref: ProviderRef) -> Zone:
    return Zone("evil", DOMAIN, ref, origin=Origin(FILE, 0, LINE))


@pytest.fixture
def attacker() -> Iterator[CaptureServer]:
    with CaptureServer() as srv:
        yield srv


@pytest.fixture
def tls_attacker() -> Iterator[CaptureServer]:
    with CaptureServer(tls=server_context()) as srv:
        yield srv


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-access-key-SECRET")
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)


def refused(factory: Any, ref: ProviderRef) -> str:
    """Build the zone's provider and call it: a ConfigError before anything is sent."""
    with pytest.raises(ConfigError) as info:
        factory(zone(ref)).zones()
    return str(info.value)


def assert_names_field_and_setting(message: str) -> None:
    assert f"{FILE}:{LINE}" in message
    assert "spec.provider.settings.endpoint" in message
    assert "--provider-endpoints (GITDNS_PROVIDER_ENDPOINTS, providerEndpoints" in message


def require(module: str) -> None:
    try:
        __import__(module)
    except ImportError as exc:
        import os

        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc.name} is needed here")
        pytest.skip(f"{exc.name} is not installed")


# --- route53: the real botocore client -------------------------------------------------------------------


def test_route53_signs_nothing_for_an_endpoint_the_operator_did_not_allow(
        attacker: CaptureServer, aws_env: None, tmp_path: Path) -> None:
    require("botocore")
    for endpoint in (attacker.url, attacker.url.replace("http://", "https://")):
        ref = ProviderRef("route53", (("endpoint", endpoint), ("hostedZoneId", "Z1")), CredentialsRef(env="AWS"))
        message = refused(default_factory(tmp_path), ref)  # the agent's defaults: nothing allowed
        assert_names_field_and_setting(message)
        # the operator allowed the credentials, not the endpoint
        message = refused(default_factory(tmp_path, fences=Fences.parse(credentials_env_prefixes="AWS")), ref)
        assert_names_field_and_setting(message)
    assert "is not an https:// URL" in refused(default_factory(tmp_path), ProviderRef(
        "route53", (("endpoint", attacker.url),)))
    # allowing the plain-http address is not possible at all
    with pytest.raises(ConfigError, match=r"--provider-endpoints .*'http://127\.0\.0\.1:\d+' is not an https://"):
        Fences.parse(provider_endpoints=attacker.url)
    assert attacker.connections == 0 and attacker.requests == []


def test_route53_an_allowed_https_endpoint_gets_the_signed_request(
        tls_attacker: CaptureServer, aws_env: None, tmp_path: Path) -> None:
    require("botocore")
    fences = Fences.parse(provider_endpoints=tls_attacker.url, credentials_env_prefixes="AWS")
    ref = ProviderRef("route53", (("endpoint", tls_attacker.url + "/"), ("hostedZoneId", "Z1")),
                      CredentialsRef(env="AWS"))
    provider = default_factory(tmp_path, fences=fences)(zone(ref))
    with contextlib.suppress(Exception):  # the recorder answers {} where Route53 answers XML
        provider.zones()
    assert KEY_ID in tls_attacker.seen() and SESSION_TOKEN in tls_attacker.seen()


# --- google: google-cloud-dns with a service-account key ------------------------------------------------------


def service_account(token_uri: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return json.dumps({"type": "service_account", "project_id": "proj", "private_key_id": "key-1",
                       "private_key": pem, "client_email": "dns@proj.iam.gserviceaccount.com", "client_id": "1",
                       "token_uri": token_uri})


def test_google_sends_no_bearer_token_to_an_endpoint_the_operator_did_not_allow(
        attacker: CaptureServer, tmp_path: Path) -> None:
    require("google.cloud.dns")
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "gcp.json").write_text(json.dumps({"GOOGLE": service_account(attacker.url + "/token"),
                                                "PROJECT_ID": "proj"}))
    ref = ProviderRef("google", (("endpoint", attacker.url),), CredentialsRef(file=str(creds / "gcp.json")))
    assert_names_field_and_setting(refused(default_factory(tmp_path), ref))
    fences = Fences.parse(credentials_dir=str(creds))  # the key is the operator's; the endpoint is not
    assert_names_field_and_setting(refused(default_factory(tmp_path, fences=fences), ref))
    assert attacker.connections == 0 and attacker.requests == []


def test_google_an_allowed_https_endpoint_gets_the_bearer_token(
        attacker: CaptureServer, tls_attacker: CaptureServer, tmp_path: Path) -> None:
    require("google.cloud.dns")
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "gcp.json").write_text(json.dumps({"GOOGLE": service_account(attacker.url + "/token"),
                                                "PROJECT_ID": "proj"}))
    ref = ProviderRef("google", (("endpoint", tls_attacker.url),), CredentialsRef(file=str(creds / "gcp.json")))
    fences = Fences.parse(credentials_dir=str(creds), provider_endpoints=tls_attacker.url)
    provider = default_factory(tmp_path, fences=fences)(zone(ref))
    provider.zones()
    assert f"Bearer {ACCESS_TOKEN}" in tls_attacker.seen()


# --- azure: azure-mgmt-dns's DnsManagementClient -------------------------------------------------------------


class StaticCredential:
    """A TokenCredential holding a fixed bearer token (the credential source is not what is
    tested here: where the SDK client sends the token is)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        import time

        from azure.core.credentials import AccessToken

        return AccessToken(AZURE_TOKEN, int(time.time()) + 3600)


@pytest.fixture
def azure_token(monkeypatch: pytest.MonkeyPatch) -> None:
    require("azure.mgmt.dns")
    from gitdns.providers.azure import provider as azure

    monkeypatch.setattr(azure, "make_credential", lambda cfg: StaticCredential())


def test_azure_sends_no_bearer_token_to_an_endpoint_the_operator_did_not_allow(
        attacker: CaptureServer, azure_token: None, tmp_path: Path) -> None:
    for endpoint in (attacker.url, attacker.url.replace("http://", "https://")):
        ref = ProviderRef("azure", (("endpoint", endpoint), ("resourceGroup", "rg"), ("subscriptionId", "sub")))
        assert_names_field_and_setting(refused(default_factory(tmp_path), ref))
    assert attacker.connections == 0 and attacker.requests == []


def test_azure_an_allowed_https_endpoint_gets_the_bearer_token(
        tls_attacker: CaptureServer, azure_token: None, tmp_path: Path) -> None:
    ref = ProviderRef("azure", (("endpoint", tls_attacker.url), ("resourceGroup", "rg"), ("subscriptionId", "sub")))
    provider = default_factory(tmp_path, fences=Fences.parse(provider_endpoints=tls_attacker.url))(zone(ref))
    with contextlib.suppress(Exception):  # the recorder answers {} where ARM answers a zone list
        provider.zones()
    assert f"Bearer {AZURE_TOKEN}" in tls_attacker.seen()


# --- rfc2136: the TSIG key goes only to a server the operator allows ------------------------------------------


def test_rfc2136_sends_nothing_to_a_server_the_operator_did_not_allow(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TSIG_SECRET", "c2VjcmV0LXRzaWcta2V5LXZhbHVl")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        ref = ProviderRef("rfc2136", (("port", str(port)), ("server", "127.0.0.1"), ("timeout", "1"),
                                      ("tsigKeyName", "ddns-key")), CredentialsRef(env="TSIG_SECRET"))
        with pytest.raises(ConfigError) as info:
            default_factory(tmp_path)(zone(ref)).read(DOMAIN)
        message = str(info.value)
        assert f"{FILE}:{LINE}" in message and "spec.provider.settings.server" in message
        assert "--rfc2136-servers (GITDNS_RFC2136_SERVERS, rfc2136Servers" in message
        other_port = Fences.parse(rfc2136_servers="127.0.0.1", credentials_env_prefixes="TSIG_SECRET")
        with pytest.raises(ConfigError, match="is not an rfc2136 server the operator allows"):
            default_factory(tmp_path, fences=other_port)(zone(ref))  # port 53 only
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
        allowed = Fences.parse(rfc2136_servers=f"127.0.0.1:{port}", credentials_env_prefixes="TSIG_SECRET")
        assert default_factory(tmp_path, fences=allowed)(zone(ref)).name == "rfc2136"
        assert default_factory(tmp_path, fences=Fences.parse(
            rfc2136_servers="127.0.0.1:*", credentials_env_prefixes="TSIG"))(zone(ref)).name == "rfc2136"


# --- the allow-lists themselves -------------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "why"), [
    ("http://dns.example.test", "is not an https:// origin"),
    ("dns.example.test", "is not an https:// origin"),
    ("https://dns.example.test/api", "give the origin only"),
    ("https://user@dns.example.test", "give the origin only"),
    ("https://dns.example.test:99999", "is not an https:// origin"),
])
def test_endpoint_entries_are_https_origins(entry: str, why: str) -> None:
    with pytest.raises(ConfigError, match=f"--provider-endpoints .*{why}"):
        Fences.parse(provider_endpoints=entry)


def test_endpoints_match_by_origin() -> None:
    fences = Fences.parse(provider_endpoints=["https://DNS.example.test", "https://[2001:DB8::1]:8443"])
    assert fences.check_endpoint("https://dns.example.test:443/v1/x", zone=DOMAIN)
    assert fences.check_endpoint("https://[2001:db8:0::1]:8443", zone=DOMAIN)
    for url in ("https://dns.example.test:8443", "https://other.example.test", "https://dns.example.test.evil.test",
                "http://dns.example.test", "https://u:p@dns.example.test", "ftp://dns.example.test"):
        with pytest.raises(ConfigError):
            fences.check_endpoint(url, zone=DOMAIN)


def test_a_long_endpoint_is_truncated_in_the_message(tmp_path: Path) -> None:
    url = "https://" + "a" * 10_000 + ".example.test"
    message = refused(default_factory(tmp_path), ProviderRef("route53", (("endpoint", url),)))
    assert len(message) < 1_000


@pytest.mark.parametrize("entry", ["bad/host", "user@h", "h:0", "h:x", "[::1]x"])
def test_server_entries(entry: str) -> None:
    with pytest.raises(ConfigError, match="--rfc2136-servers"):
        Fences.parse(rfc2136_servers=entry)


def test_server_entries_match_host_and_port() -> None:
    fences = Fences.parse(rfc2136_servers="ns1.example.test, 192.0.2.53:5353, [2001:db8::53]:*")
    fences.check_server("NS1.example.test.", 53, zone=DOMAIN)
    fences.check_server("192.0.2.53", 5353, zone=DOMAIN)
    fences.check_server("2001:db8:0:0::53", 1053, zone=DOMAIN)
    for server, port in (("ns1.example.test", 5353), ("192.0.2.53", 53), ("192.0.2.54", 5353)):
        with pytest.raises(ConfigError):
            fences.check_server(server, port, zone=DOMAIN)


# --- the agent, end to end ------------------------------------------------------------------------------------


def test_the_agent_holds_the_zone_and_signs_nothing(attacker: CaptureServer, aws_env: None, tmp_path: Path) -> None:
    """The issue's reproduction: a route53 Zone pointing at the attacker with the agent's AWS
    credentials.  The agent (its defaults: nothing allowed) holds that zone with the reason."""
    require("botocore")
    from tests.e2e.agent_kit import DesiredRepo, run_once

    repo = DesiredRepo(tmp_path / "git")
    path = repo.work / "zones" / "example-com.yaml"
    text = path.read_text()
    start, end = text.index("  provider:\n"), text.index("  ttl:\n")
    path.write_text(text[:start] + "  provider:\n    type: route53\n    settings:\n"
                    f"      endpoint: {attacker.url}\n      hostedZoneId: Z1\n"
                    "    credentials: {env: AWS}\n" + text[end:])
    repo.commit("route53 on the attacker's endpoint")
    done = run_once(repo, "eu-west-1", tmp_path / "state")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "zones/example-com.yaml:2: spec.provider.settings.endpoint (zone example.com)" in out
    assert KEY_ID not in out and SESSION_TOKEN not in out
    assert attacker.connections == 0 and attacker.requests == []


# --- where the operator sets them -----------------------------------------------------------------------------


def test_the_agents_settings_give_the_fences(tmp_path: Path) -> None:
    """Flags, GITDNS_<NAME> and the config file (a YAML list or a comma-separated string)."""
    from gitdns.agent.config import resolve
    from gitdns.providers.fences import SETTINGS, Origin, Server, fences_from

    config_file = tmp_path / "config.yaml"
    config_file.write_text("providerEndpoints: ['https://route53.vpce.example.test', 'https://dns.example.test:8443']\n"
                           "rfc2136Servers: 192.0.2.53, ns2.example.test:*\ncredentialsNamespaces: [dns-providers]\n")
    config = resolve({"repo": "r", "config": str(config_file), "credentials_env_prefixes": "AWS"},
                     env={"GITDNS_CREDENTIALS_DIR": str(tmp_path), "GITDNS_STORE_DIR": str(tmp_path / "stores")})
    fences = fences_from({name: getattr(config, name) for name in SETTINGS}, env={})
    assert fences.endpoints == (Origin("route53.vpce.example.test", 443), Origin("dns.example.test", 8443))
    assert fences.servers == (Server("192.0.2.53", 53), Server("ns2.example.test", None))
    assert fences.env_prefixes == ("AWS",) and fences.namespaces == ("dns-providers",)
    assert fences.credentials_dir == tmp_path and fences.store_dir == tmp_path / "stores"


def test_every_verb_that_builds_providers_takes_the_flags() -> None:
    from gitdns.cli import build_parser
    from gitdns.providers.fences import SETTINGS

    flags = ["--provider-endpoints", "https://dns.example.test", "--rfc2136-servers", "h", "--credentials-env-prefixes",
             "AWS", "--credentials-dir", "/c", "--credentials-namespaces", "ns", "--credentials-secrets", "aws",
             "--store-dir", "/s", "--local-reload", "rndc", "--rndc-config", "/r"]
    parser = build_parser()
    for verb in (["plan", "--cluster", "c"], ["apply", "--cluster", "c"], ["zone", "show", "z"], ["owners", "z"],
                 ["prune-owner", "o", "--zone", "z"], ["adopt", "n", "--zone", "z", "--cluster", "c"],
                 ["groups", "get", "z"], ["groups", "set", "z", "g"], ["failover", "simulate", "z", "--to", "g"],
                 ["agent"]):
        args = parser.parse_args([*verb, *flags])
        assert [getattr(args, name) for name in SETTINGS] == ["https://dns.example.test", "h", "AWS", "/c", "ns", "aws",
                                                              "/s", "rndc", "/r"]


def test_the_one_shot_verbs_read_the_environment_too(monkeypatch: pytest.MonkeyPatch, attacker: CaptureServer,
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gitdns plan` with GITDNS_PROVIDER_ENDPOINTS naming another origin: still refused."""
    from gitdns.cli import main

    require("botocore")
    repo = tmp_path / "repo"
    import shutil

    shutil.copytree(Path(__file__).resolve().parents[2] / "example-repo", repo,
                    ignore=shutil.ignore_patterns(".gitdns"))
    path = repo / "zones" / "example-com.yaml"
    text = path.read_text()
    start, end = text.index("  provider:\n"), text.index("  ttl:\n")
    path.write_text(text[:start] + "  provider:\n    type: route53\n    settings:\n"
                    f"      endpoint: {attacker.url.replace('http://', 'https://')}\n" + text[end:])
    monkeypatch.setenv("GITDNS_PROVIDER_ENDPOINTS", "https://management.example.test")
    assert main(["plan", "--repo", str(repo), "--cluster", "eu-west-1", "--zone", "example.com"]) == 1
    err = capsys.readouterr().err
    assert "spec.provider.settings.endpoint" in err and "allowed now: https://management.example.test" in err
    assert attacker.connections == 0
