"""Kuadrant DNSRecord rendering: golden files plus structural checks on the parsed YAML.

Each golden case renders one listener host and compares the text byte for byte with
``tests/golden/kuadrant/<name>.yaml``.  To rewrite the golden files after an intended change
to the template or the renderer, run::

    GITDNS_UPDATE_GOLDEN=1 python -m pytest -q tests/core/test_render.py

and review the diff before committing.  Every golden case is also parsed and checked field by
field below, so a wrong golden file cannot pass silently.
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gitdns.adapters.templates import load_template_sources
from gitdns.core.model import Cluster, HealthCheck
from gitdns.core.names import cluster_target_name
from gitdns.core.records import RecordSet
from gitdns.core.render import (
    DNSRECORD_TEMPLATE,
    dnsrecord_name,
    go_duration,
    make_environment,
    render_dnsrecords,
    yaml_scalar,
)
from gitdns.errors import ConfigError, UnsupportedError

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "kuadrant"
UPDATE_GOLDEN = os.environ.get("GITDNS_UPDATE_GOLDEN") == "1"

CLUSTER_A = Cluster(name="cluster-a", id="cluster-a-uid", geo="GEO-EU")
CLUSTER_B = Cluster(name="cluster-b", id="cluster-b-uid", geo="US")
A_TARGET = "1hrxie-30ics1.klb.api.example.com"
B_WILDCARD_TARGET = "17ol5y-30ics1.klb.apps.example.com"

# The worked example of docs/records.md, the records cluster A publishes for api.example.com.
LOADBALANCED = (
    RecordSet("api.example.com", "CNAME", 300, ("klb.api.example.com",)),
    RecordSet(
        "klb.api.example.com", "CNAME", 300, ("geo-eu.klb.api.example.com",), set_id="GEO-EU", geo="GEO-EU"
    ),
    RecordSet(
        "klb.api.example.com", "CNAME", 300, ("geo-eu.klb.api.example.com",), set_id="default", geo="*"
    ),
    RecordSet("geo-eu.klb.api.example.com", "CNAME", 60, (A_TARGET,), set_id=A_TARGET, weight=120),
    RecordSet(A_TARGET, "A", 60, ("1.1.1.1",)),
)
SIMPLE = (RecordSet("app.example.com", "A", 60, ("1.1.1.2", "1.1.1.1")),)
# Cluster B (geo US, not the default geo) for a wildcard listener: klb names drop the `*.`.
WILDCARD = (
    RecordSet("*.apps.example.com", "CNAME", 300, ("klb.apps.example.com",)),
    RecordSet("klb.apps.example.com", "CNAME", 300, ("us.klb.apps.example.com",), set_id="US", geo="US"),
    RecordSet(
        "us.klb.apps.example.com", "CNAME", 60, (B_WILDCARD_TARGET,), set_id=B_WILDCARD_TARGET, weight=120
    ),
    RecordSet(B_WILDCARD_TARGET, "A", 60, ("2.2.2.2",)),
)
HTTPS_CHECK = HealthCheck(protocol="HTTPS", port=443, path="/healthz", headers_secret="probe-headers")
HTTP_CHECK = HealthCheck(protocol="http", port=8080, path="/ready", interval=30, failure_threshold=3)

CASES: dict[str, dict[str, Any]] = {
    "loadbalanced-api-example-com": dict(
        cluster=CLUSTER_A,
        root_host="api.example.com",
        records=LOADBALANCED,
        health=HTTPS_CHECK,
        provider_ref="aws-credentials",
    ),
    "simple-app-example-com": dict(
        cluster=CLUSTER_A, root_host="app.example.com", records=SIMPLE, health=None, provider_ref=None
    ),
    "wildcard-apps-example-com": dict(
        cluster=CLUSTER_B,
        root_host="*.apps.example.com",
        records=WILDCARD,
        health=HTTP_CHECK,
        provider_ref=None,
    ),
}


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return make_environment(load_template_sources())


def render(env: jinja2.Environment, case: str) -> tuple[str, str]:
    args = CASES[case]
    return render_dnsrecords(env, zone_domain="example.com", namespace="gitdns-system", **args)


def parse(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(io.StringIO(text))


def endpoints_by_key(doc: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["dnsName"], e["recordType"], e.get("setIdentifier", "")): e for e in doc["spec"]["endpoints"]}


# -- golden files -------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(env: jinja2.Environment, case: str) -> None:
    _, text = render(env, case)
    path = GOLDEN / f"{case}.yaml"
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with GITDNS_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{case} differs from {path}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_files_parse_as_the_rendered_document(env: jinja2.Environment, case: str) -> None:
    _, text = render(env, case)
    assert parse((GOLDEN / f"{case}.yaml").read_text(encoding="utf-8")) == parse(text)


def test_worked_example_names_follow_the_hash_contract() -> None:
    assert cluster_target_name("api.example.com", "cluster-a-uid", "api-gw", "ingress") == A_TARGET
    assert (
        cluster_target_name("*.apps.example.com", "cluster-b-uid", "api-gw", "ingress") == B_WILDCARD_TARGET
    )


# -- structure ---------------------------------------------------------------------------


def test_loadbalanced_manifest_structure(env: jinja2.Environment) -> None:
    file_name, text = render(env, "loadbalanced-api-example-com")
    doc = parse(text)
    assert file_name == "api-example-com.yaml"
    assert doc["apiVersion"] == "kuadrant.io/v1alpha1"
    assert doc["kind"] == "DNSRecord"
    assert doc["metadata"]["name"] == "api-example-com"
    assert doc["metadata"]["namespace"] == "gitdns-system"
    assert doc["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gitdns",
        "gitdns.io/cluster": "cluster-a",
    }
    spec = doc["spec"]
    assert spec["rootHost"] == "api.example.com"
    assert spec["providerRef"] == {"name": "aws-credentials"}
    eps = endpoints_by_key(doc)
    assert len(spec["endpoints"]) == 5 == len(eps)
    assert eps[("api.example.com", "CNAME", "")] == {
        "dnsName": "api.example.com",
        "recordType": "CNAME",
        "recordTTL": 300,
        "targets": ["klb.api.example.com"],
    }
    assert eps[("klb.api.example.com", "CNAME", "GEO-EU")]["providerSpecific"] == [
        {"name": "geo-code", "value": "GEO-EU"}
    ]
    default = eps[("klb.api.example.com", "CNAME", "default")]
    assert default["providerSpecific"] == [{"name": "geo-code", "value": "*"}]
    assert default["targets"] == ["geo-eu.klb.api.example.com"]
    assert default["recordTTL"] == 300
    weighted = eps[("geo-eu.klb.api.example.com", "CNAME", A_TARGET)]
    assert weighted["providerSpecific"] == [{"name": "weight", "value": "120"}]
    assert isinstance(weighted["providerSpecific"][0]["value"], str)
    assert weighted["recordTTL"] == 60
    assert weighted["targets"] == [A_TARGET]
    assert eps[(A_TARGET, "A", "")] == {
        "dnsName": A_TARGET,
        "recordType": "A",
        "recordTTL": 60,
        "targets": ["1.1.1.1"],
    }
    assert spec["healthCheck"] == {
        "path": "/healthz",
        "port": 443,
        "protocol": "HTTPS",
        "failureThreshold": 2,
        "interval": "5s",
        "additionalHeadersRef": {"name": "probe-headers"},
    }
    # Kuadrant's CRD rule: every endpoint ends with the root host, one equals it.
    assert all(e["dnsName"].endswith("api.example.com") for e in spec["endpoints"])
    assert any(e["dnsName"] == spec["rootHost"] for e in spec["endpoints"])


def test_simple_manifest_structure(env: jinja2.Environment) -> None:
    file_name, text = render(env, "simple-app-example-com")
    doc = parse(text)
    assert file_name == "app-example-com.yaml"
    assert doc["metadata"]["name"] == "app-example-com"
    assert "providerRef" not in doc["spec"]
    assert "healthCheck" not in doc["spec"]
    assert doc["spec"]["endpoints"] == [
        {
            "dnsName": "app.example.com",
            "recordType": "A",
            "recordTTL": 60,
            "targets": ["1.1.1.1", "1.1.1.2"],
        }
    ]


def test_wildcard_manifest_structure(env: jinja2.Environment) -> None:
    file_name, text = render(env, "wildcard-apps-example-com")
    doc = parse(text)
    assert file_name == "wildcard-apps-example-com.yaml"
    assert doc["metadata"]["name"] == "wildcard-apps-example-com"
    assert doc["metadata"]["labels"]["gitdns.io/cluster"] == "cluster-b"
    assert doc["spec"]["rootHost"] == "*.apps.example.com"
    eps = endpoints_by_key(doc)
    assert set(eps) == {
        ("*.apps.example.com", "CNAME", ""),
        ("klb.apps.example.com", "CNAME", "US"),
        ("us.klb.apps.example.com", "CNAME", B_WILDCARD_TARGET),
        (B_WILDCARD_TARGET, "A", ""),
    }
    assert eps[("*.apps.example.com", "CNAME", "")]["targets"] == ["klb.apps.example.com"]
    assert doc["spec"]["healthCheck"] == {
        "path": "/ready",
        "port": 8080,
        "protocol": "HTTP",
        "failureThreshold": 3,
        "interval": "30s",
    }


def test_endpoint_order_does_not_depend_on_input_order(env: jinja2.Environment) -> None:
    records = list(LOADBALANCED)
    _, expected = render(env, "loadbalanced-api-example-com")
    for seed in range(5):
        random.Random(seed).shuffle(records)
        _, text = render_dnsrecords(
            env,
            cluster=CLUSTER_A,
            root_host="api.example.com",
            zone_domain="example.com",
            namespace="gitdns-system",
            records=records,
            health=HTTPS_CHECK,
            provider_ref="aws-credentials",
        )
        assert text == expected


def test_no_records_renders_an_empty_endpoint_list(env: jinja2.Environment) -> None:
    _, text = render_dnsrecords(
        env,
        cluster=CLUSTER_A,
        root_host="app.example.com",
        zone_domain="example.com",
        namespace="ns",
        records=[],
        health=None,
        provider_ref=None,
    )
    assert parse(text)["spec"]["endpoints"] == []


def test_values_that_need_quotes_survive(env: jinja2.Environment) -> None:
    tricky = ("yes", "1e3", "a: b", "#x", "", "v=spf1 include:_spf.example.com ~all", 'say "hi"')
    records = [RecordSet("app.example.com", "TXT", 60, tricky)]
    _, text = render_dnsrecords(
        env,
        cluster=Cluster(name="on", id="x"),
        root_host="app.example.com",
        zone_domain="example.com",
        namespace="true",
        records=records,
        health=None,
        provider_ref="null",
    )
    doc = parse(text)
    assert doc["spec"]["endpoints"][0]["targets"] == sorted(tricky)
    assert doc["metadata"]["namespace"] == "true"
    assert doc["metadata"]["labels"]["gitdns.io/cluster"] == "on"
    assert doc["spec"]["providerRef"] == {"name": "null"}


# -- refusals ------------------------------------------------------------------------------


def _render_one(env: jinja2.Environment, **overrides: Any) -> tuple[str, str]:
    args: dict[str, Any] = dict(
        cluster=CLUSTER_A,
        root_host="app.example.com",
        zone_domain="example.com",
        namespace="ns",
        records=SIMPLE,
        health=None,
        provider_ref=None,
    )
    args.update(overrides)
    return render_dnsrecords(env, **args)


@pytest.mark.parametrize(
    ("root_host", "records", "zone"),
    [
        ("app.example.com", [RecordSet("other.example.com", "A", 60, ("1.1.1.1",))], "example.com"),
        ("app.example.com", [RecordSet("xapp.example.com", "A", 60, ("1.1.1.1",))], "example.com"),
        ("app.example.org", [], "example.com"),
    ],
)
def test_records_outside_the_host_or_zone_are_refused(
    env: jinja2.Environment, root_host: str, records: list[RecordSet], zone: str
) -> None:
    with pytest.raises(ValueError, match="render:"):
        _render_one(env, root_host=root_host, records=records, zone_domain=zone)


@pytest.mark.parametrize(
    "check",
    [HealthCheck(protocol="TCP", port=443), HealthCheck(port=22), HealthCheck(port=50000)],
)
def test_health_checks_kuadrant_cannot_express_are_refused(
    env: jinja2.Environment, check: HealthCheck
) -> None:
    with pytest.raises(UnsupportedError):
        _render_one(env, health=check)


def test_strict_undefined() -> None:
    env = make_environment({DNSRECORD_TEMPLATE: "{{ missing }}"})
    with pytest.raises(jinja2.UndefinedError):
        _render_one(env)


# -- helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("api.example.com", "api-example-com"),
        ("*.example.com", "wildcard-example-com"),
        ("API.Example.COM.", "api-example-com"),
        ("a_b.example.com", "a-b-example-com"),
    ],
)
def test_dnsrecord_name(host: str, name: str) -> None:
    assert dnsrecord_name(host) == name


def test_long_dnsrecord_names_are_cut_and_stay_distinct() -> None:
    first = "a" * 60 + ".one.example.com"
    second = "a" * 60 + ".two.example.com"
    names = {dnsrecord_name(first), dnsrecord_name(second)}
    assert len(names) == 2
    for name in names:
        assert len(name) <= 63
        assert name[0].isalnum() and name[-1].isalnum()


@pytest.mark.parametrize(
    ("seconds", "text"), [(5, "5s"), (5.0, "5s"), (0.5, "500ms"), (300, "300s"), (1.25, "1250ms")]
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ("api.example.com", True),
        ("1.1.1.1", True),
        ("/healthz", True),
        ("*", False),
        ("120", False),
        ("1.5", False),
        ("0x1f", False),
        ("No", False),
        ("off", False),
        ("~", False),
        ("2001:db8::1", False),
        ("-x", False),
        ("", False),
    ],
)
def test_yaml_scalar_quotes_only_when_needed(value: str, plain: bool) -> None:
    assert (yaml_scalar(value) == value) is plain


def _load_scalar(scalar: str, version: str) -> Any:
    return YAML(typ="safe", pure=True).load(f"%YAML {version}\n---\nv: {scalar}\n")["v"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
@pytest.mark.parametrize(
    "value", ["1.1.1.1", "120", "yes", "y", "1_000", "1:20", ".inf", "null", "é", "tab\there", "nel\x85"]
)
def test_yaml_scalar_reads_back_as_the_same_string(value: str, version: str) -> None:
    assert _load_scalar(yaml_scalar(value), version) == value


@given(st.text())
def test_yaml_scalar_round_trips_any_text(value: str) -> None:
    assert _load_scalar(yaml_scalar(value), "1.2") == value


# -- the template loader adapter -------------------------------------------------------


def test_packaged_templates_are_found() -> None:
    sources = load_template_sources()
    assert DNSRECORD_TEMPLATE in sources
    assert "kind: DNSRecord" in sources[DNSRECORD_TEMPLATE]
    assert all("\\" not in name and not name.startswith("/") for name in sources)


def test_override_directory_replaces_and_adds(tmp_path: Path) -> None:
    (tmp_path / "kuadrant").mkdir()
    (tmp_path / "kuadrant" / "dnsrecord.yaml.j2").write_text("custom {{ name }}\n", encoding="utf-8")
    (tmp_path / "extra.j2").write_text("extra\n", encoding="utf-8")
    (tmp_path / ".hidden").write_text("no\n", encoding="utf-8")
    sources = load_template_sources(tmp_path)
    assert sources[DNSRECORD_TEMPLATE] == "custom {{ name }}\n"
    assert sources["extra.j2"] == "extra\n"
    assert ".hidden" not in sources
    file_name, text = _render_one(make_environment(sources))
    assert (file_name, text) == ("app-example-com.yaml", "custom app-example-com\n")


def test_override_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_template_sources(tmp_path / "absent")
