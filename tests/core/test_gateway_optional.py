"""A Cluster's gateway may leave out ``addresses`` (and ``listeners``): the agent discovers them
from the Gateway in its own cluster (gitdns.agent.discovery).  The schema and validation accept
the entry; the model marks it discovered and gives it nothing until then."""

from __future__ import annotations

import re

from gitdns.adapters.repo import load_schemas
from gitdns.core import builder
from gitdns.core.validate import check
from tests.agent.fakes import example_files

WRITTEN = "      addresses: [192.0.2.10, 192.0.2.11]\n      listeners:\n        - hostname: api.example.com\n" \
          "          name: https\n"


def _discovering(keep_listeners: bool = False, clusters: tuple[str, ...] = ("eu-west-1",)) -> dict[str, str]:
    files = example_files()
    for name in clusters:
        path = f"clusters/{name}.yaml"
        text = files[path]
        block = re.search(r"(    - name: api-gw\n      namespace: ingress\n)((?: {6}.*\n)+?)(?=    - |\Z)", text)
        assert block is not None, path
        kept = "      listeners:\n        - hostname: api.example.com\n" if keep_listeners else ""
        files[path] = text[:block.start(2)] + kept + text[block.end(2):]
    return files


def test_written_addresses_stay_as_they_are() -> None:
    result = check(example_files(), load_schemas())
    cluster = result.state.cluster("eu-west-1")
    assert cluster is not None
    api = next(g for g in cluster.gateways if g.name == "api-gw")
    assert not api.discovered and not api.discovered_listeners
    assert api.addresses == ("192.0.2.10", "192.0.2.11")


def test_a_gateway_without_addresses_and_listeners_is_discovered() -> None:
    files = _discovering()
    assert WRITTEN not in files["clusters/eu-west-1.yaml"]
    result = check(files, load_schemas())
    assert [p.format() for p in result.problems] == []
    cluster = result.state.cluster("eu-west-1")
    assert cluster is not None
    api = next(g for g in cluster.gateways if g.name == "api-gw")
    assert api.discovered and api.discovered_listeners
    assert api.addresses == () and api.listeners == ()
    web = next(g for g in cluster.gateways if g.name == "web-gw")
    assert not web.discovered and web.addresses == ("192.0.2.20",)
    zone = result.state.zone("example-com")
    assert zone is not None
    # never observed: nothing of it is built (never guessed)
    assert builder.build_hosts(result.state, cluster, zone) == []


def test_written_listeners_are_kept_on_a_discovered_gateway() -> None:
    result = check(_discovering(keep_listeners=True), load_schemas())
    assert [p.format() for p in result.problems] == []
    cluster = result.state.cluster("eu-west-1")
    assert cluster is not None
    api = next(g for g in cluster.gateways if g.name == "api-gw")
    assert api.discovered and not api.discovered_listeners
    assert [ls.hostname for ls in api.listeners] == ["api.example.com"]
    zone = result.state.zone("example-com")
    assert zone is not None
    hosts = builder.build_hosts(result.state, cluster, zone)
    assert [h.host for h in hosts] == ["api.example.com"]
    assert any("has no address (NoAddresses)" in n for h in hosts for n in h.notes)


def test_an_empty_address_list_is_still_refused() -> None:
    files = example_files()
    files["clusters/eu-west-1.yaml"] = files["clusters/eu-west-1.yaml"].replace(
        "addresses: [192.0.2.10, 192.0.2.11]", "addresses: []")
    result = check(files, load_schemas())
    assert any(p.file == "clusters/eu-west-1.yaml" and "addresses" in p.yaml_path for p in result.problems)


def test_a_policy_targeting_only_discovered_gateways_validates() -> None:
    result = check(_discovering(clusters=("eu-west-1", "eu-central-1", "us-east-1")), load_schemas())
    assert [p.format() for p in result.problems] == []
