"""The default provider secret against the HTTP fake Kubernetes API: which Secret is chosen,
which provider its type names, its credentials, and the errors (none, several, refused)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.records import Action, Change, RecordSet
from gitdns.errors import AuthError, ConfigError, UnreachableError
from gitdns.providers import credentials as creds_mod
from gitdns.providers.credentials import Credentials, load_credentials, preloaded
from gitdns.providers.defaultprovider import (
    MULTIPLE,
    NOT_FOUND,
    PendingDefaultProvider,
    agent_namespace,
    find_default_provider,
    make_default_provider,
    provider_for_default_zone,
)
from gitdns.providers.fences import Fences
from gitdns.providers.registry import known_types, make_provider
from tests.fakes.kube_apiserver import ApiError, FakeKube, Request
from tests.providers.default_secret_helpers import AWS_DATA, NS, add_secret

pytest_plugins = ("tests.providers.default_secret_fixtures",)  # fake, api, in_cluster


def distractors(fake: FakeKube) -> None:
    """Secrets that must never be chosen: no label, the label set to false, another namespace."""
    add_secret(fake, "plain-aws", "kuadrant.io/aws", AWS_DATA, labels={})
    add_secret(fake, "not-default", "kuadrant.io/gcp", {"PROJECT_ID": "p"},
               labels={"kuadrant.io/default-provider": "false"})
    add_secret(fake, "elsewhere", "kuadrant.io/azure", {"azure.json": "{}"}, namespace="other")


# --- find_default_provider ------------------------------------------------------------------------


def test_the_one_labelled_secret_gives_provider_type_settings_and_credentials(fake: FakeKube, api: Any) -> None:
    distractors(fake)
    add_secret(fake, "aws-default", "kuadrant.io/aws", AWS_DATA,
               annotations={"settings.gitdns.io/hostedZoneId": "Z0123", "unrelated/annotation": "x"})
    found = find_default_provider(NS, api=api)
    assert (found.secret_name, found.secret_type, found.provider_type, found.namespace) == (
        "aws-default", "kuadrant.io/aws", "route53", NS)
    assert found.settings == (("hostedZoneId", "Z0123"),)
    assert dict(found.credentials) == AWS_DATA
    assert found.provider_ref() == ProviderRef("route53", (("hostedZoneId", "Z0123"),),
                                               CredentialsRef(secret="aws-default", namespace=NS))
    for text in (repr(found), str(found), repr(found.credentials)):
        assert "sup3r-s3cret-value" not in text and "AKIDEFAULTPROVIDER01" not in text
    # one LIST with the label selector; no GET of any Secret by name
    lists = [r for r in fake.requests if r.method == "GET" and r.path == f"/api/v1/namespaces/{NS}/secrets"]
    assert [r.query.get("labelSelector") for r in lists] == ["kuadrant.io/default-provider=true"]
    assert fake.count("GET", "/secrets/aws-default") == 0


@pytest.mark.parametrize(("secret_type", "provider"), [
    ("kuadrant.io/gcp", "google"),
    ("kuadrant.io/azure", "azure"),
    ("kuadrant.io/endpoint", "endpoint"),
    ("gitdns.io/rfc2136", "rfc2136"),
    ("gitdns.io/memory", "memory"),
])
def test_the_secret_type_chooses_the_provider(fake: FakeKube, api: Any, secret_type: str, provider: str) -> None:
    add_secret(fake, "the-default", secret_type, {"KEY": "value"})
    assert find_default_provider(NS, api=api).provider_type == provider


def test_no_default_secret_is_an_error_naming_the_namespace_and_the_label(fake: FakeKube, api: Any) -> None:
    distractors(fake)
    with pytest.raises(ConfigError) as err:
        find_default_provider(NS, api=api)
    assert err.value.reason == NOT_FOUND == "DefaultProviderNotFound"
    assert f"namespace {NS}" in str(err.value) and "kuadrant.io/default-provider=true" in str(err.value)


def test_an_empty_or_missing_namespace_finds_nothing(api: Any) -> None:
    with pytest.raises(ConfigError, match="namespace nowhere") as err:
        find_default_provider("nowhere", api=api)
    assert err.value.reason == NOT_FOUND


def test_two_default_secrets_are_an_error_naming_both_and_no_value(fake: FakeKube, api: Any) -> None:
    add_secret(fake, "aws-default", "kuadrant.io/aws", AWS_DATA)
    add_secret(fake, "gcp-default", "kuadrant.io/gcp", {"GOOGLE": "{}", "PROJECT_ID": "proj-secret-id"})
    with pytest.raises(ConfigError) as err:
        find_default_provider(NS, api=api)
    message = str(err.value)
    assert err.value.reason == MULTIPLE == "MultipleDefaultProviders"
    assert f"{NS}/aws-default" in message and f"{NS}/gcp-default" in message and message.startswith("2 Secrets")
    assert "sup3r-s3cret-value" not in message and "proj-secret-id" not in message


def test_an_opaque_default_secret_names_the_types_it_could_have(fake: FakeKube, api: Any) -> None:
    add_secret(fake, "opaque", "Opaque", {"KEY": "value"})
    with pytest.raises(ConfigError, match=r"dns/opaque has type Opaque.*kuadrant\.io/aws.*gitdns\.io/<type>"):
        find_default_provider(NS, api=api)


def test_a_coredns_default_secret_is_refused_saying_coredns_serves_the_local_store(fake: FakeKube,
                                                                                   api: Any) -> None:
    assert "coredns" not in known_types()
    add_secret(fake, "coredns", "kuadrant.io/coredns", {"NAMESERVERS": "10.0.0.1:53", "ZONES": "example.org"})
    with pytest.raises(ConfigError, match=r"no coredns provider.*local store.*set spec\.provider"):
        find_default_provider(NS, api=api)


def test_not_allowed_to_list_secrets_is_an_auth_error(fake: FakeKube, api: Any) -> None:
    def forbid(request: Request) -> None:
        if request.path.endswith("/secrets"):
            raise ApiError(403, "Forbidden", 'secrets is forbidden: cannot list resource "secrets"')

    fake.add_hook(forbid)
    with pytest.raises(AuthError, match=f"not allowed to list Secrets in namespace {NS}"):
        find_default_provider(NS, api=api)


def test_an_unreachable_api_is_retryable() -> None:
    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:9"  # discard: nothing listens
    cfg.retries = False
    with pytest.raises(UnreachableError, match=f"namespace {NS}"):
        find_default_provider(NS, api=client.CoreV1Api(client.ApiClient(cfg)))


# --- building the zone's provider -----------------------------------------------------------------


def test_a_local_default_secret_builds_the_store_its_annotation_names(fake: FakeKube, api: Any,
                                                                      tmp_path: Path) -> None:
    add_secret(fake, "store", "gitdns.io/local", annotations={"settings.gitdns.io/path": "zones"})
    provider = make_default_provider("example.org", find_default_provider(NS, api=api), tmp_path)
    assert provider.name == "local"
    record = RecordSet("www.example.org", "A", 60, ("192.0.2.1",))
    assert provider.apply("example.org", [Change(Action.CREATE, None, record, record.key)]).ok
    assert any((tmp_path / "zones").iterdir())


def test_an_aws_default_secret_drives_route53_with_its_credentials(fake: FakeKube, api: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    import moto

    from gitdns.providers.route53 import rest as route53_rest
    from gitdns.providers.route53.provider import Route53Provider, account_of

    add_secret(fake, "aws-default", "kuadrant.io/aws", AWS_DATA)
    # moto's in-process mock intercepts botocore's client only: the provider is made to use it
    # (access keys otherwise take the provider's own client, route53/rest.py)
    monkeypatch.setattr(route53_rest, "light_client", lambda *a, **k: None)
    with moto.mock_aws():
        r53 = boto3.client("route53", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
        zone_id = r53.create_hosted_zone(Name="example.org.", CallerReference="default-provider")["HostedZone"]["Id"]
        provider = make_default_provider("example.org", find_default_provider(NS, api=api), tmp_path)
        assert isinstance(provider, Route53Provider)
        assert provider.account == account_of(AWS_DATA["AWS_ACCESS_KEY_ID"], "eu-west-1")
        record = RecordSet("www.example.org", "A", 60, ("192.0.2.7",))
        assert provider.apply("example.org", [Change(Action.CREATE, None, record, record.key)]).ok
        rows = r53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
        assert {"Value": "192.0.2.7"} in next(r for r in rows if r["Name"] == "www.example.org.")["ResourceRecords"]
    assert fake.count("GET", "/secrets/aws-default") == 0  # the listed data served, not a second read


def test_preloaded_credentials_are_served_only_inside_the_block() -> None:
    ref = CredentialsRef(secret="aws-default", namespace=NS)
    with preloaded(ref, Credentials(AWS_DATA)):
        assert dict(load_credentials(ref, provider="route53")) == AWS_DATA
        assert load_credentials(CredentialsRef(env="NOPE_NOT_SET_ANYWHERE"), provider="route53",
                                env={"NOPE_NOT_SET_ANYWHERE": "1"}) == {"NOPE_NOT_SET_ANYWHERE": "1"}
    assert creds_mod._PRELOADED.get() is None


# --- the factory's path: a zone without spec.provider -----------------------------------------------


def test_outside_a_cluster_the_zone_is_told_to_set_spec_provider(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    provider = make_provider("example.org", ProviderRef("default"), tmp_path)
    assert isinstance(provider, PendingDefaultProvider)
    with pytest.raises(ConfigError, match=r"zone example\.org has no spec\.provider.*set spec\.provider") as err:
        provider.read("example.org")
    assert err.value.reason == NOT_FOUND


def test_a_pending_zone_recovers_once_a_secret_is_labelled(in_cluster: FakeKube, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    fake = in_cluster
    provider = make_provider("example.org", ProviderRef("default"), tmp_path)
    assert isinstance(provider, PendingDefaultProvider) and provider.name == "default"
    with pytest.raises(ConfigError, match=f"zone example.org: no default provider secret in namespace {NS}"):
        provider.read("example.org")
    assert fake.count("GET", f"/namespaces/{NS}/secrets") == 1  # the factory's failure, reported once
    with pytest.raises(ConfigError):
        provider.read("example.org")  # each later call looks again
    assert fake.count("GET", f"/namespaces/{NS}/secrets") == 2
    add_secret(fake, "mem", "gitdns.io/memory", {"TOKEN": "never-logged-token"})
    with caplog.at_level(logging.INFO, logger="gitdns.providers.defaultprovider"):
        assert provider.read("example.org").records == ()
    assert provider.name == "memory" and provider.capabilities.record_types
    provider.read("example.org")
    assert fake.count("GET", f"/namespaces/{NS}/secrets") == 3  # chosen once, then kept
    assert f"secret={NS}/mem" in caplog.text and "never-logged-token" not in caplog.text


def test_the_zones_namespace_wins_over_the_agents_when_the_operator_allows_it(in_cluster: FakeKube,
                                                                             tmp_path: Path) -> None:
    add_secret(in_cluster, "theirs", "gitdns.io/memory", namespace="other")
    elsewhere = ProviderRef("default", default_namespace="other")
    refused = make_provider("example.org", elsewhere, tmp_path)
    with pytest.raises(ConfigError, match=r"spec\.defaultProviderNamespace: namespace 'other' is not one the "
                                          r"operator allows.*--credentials-namespaces"):
        refused.read("example.org")
    assert in_cluster.count("GET", "/namespaces/other/secrets") == 0  # nothing was listed there
    provider = make_provider("example.org", elsewhere, tmp_path, fences=Fences.parse(credentials_namespaces="other"))
    assert provider.name == "memory"
    with pytest.raises(ConfigError, match=f"namespace {NS}"):
        make_provider("example.org", ProviderRef("default"), tmp_path).zones()


def test_an_injected_api_needs_no_cluster(fake: FakeKube, api: Any, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    add_secret(fake, "mem", "gitdns.io/memory")
    provider = provider_for_default_zone("example.org", ProviderRef("default"), tmp_path, namespace=NS, api=api)
    assert provider.name == "memory" and not isinstance(provider, PendingDefaultProvider)


def test_the_agents_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITDNS_POD_NAMESPACE", "from-gitdns-env")
    monkeypatch.setenv("POD_NAMESPACE", "from-pod-env")
    assert agent_namespace("configured") == "configured"
    assert agent_namespace() == "from-gitdns-env"
    monkeypatch.delenv("GITDNS_POD_NAMESPACE")
    assert agent_namespace() == "from-pod-env"
