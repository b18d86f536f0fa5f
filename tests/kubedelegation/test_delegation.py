"""Delegation through Kubernetes (Kuadrant's delegation RFC) against three and more fake API servers: a primary
merges its own and two remotes' DNSRecords into authoritative records, publishes them to a
`local` zone chosen by the default provider secret, and writes status back on every record."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.agent.metrics import Metrics
from gitdns.core.endpoints import authoritative_record_name, kuadrant_hash
from gitdns.core.kubesources import OWNERS_ANNOTATION, decode_owners
from tests.fakes.kube_apiserver import FakeKube, Request
from tests.kubedelegation.kube_fleet import (
    CLUSTER_LABEL,
    DNSR,
    NS,
    SECRETS_NS,
    Fleet,
    a_endpoint,
    auth,
    auth_data,
    auth_exists,
    condition,
    kubeconfig,
    record,
    remote_status,
    zone_data,
    zone_owners,
)

pytest.importorskip("kubernetes.client")

API = "api.example.com"
WWW = "www.example.com"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(store=tmp_path / "store")
    f.add_remote("remote-1")
    f.add_remote("remote-2")
    f.add_primary("primary-a")
    yield f
    f.stop()


def two_remote_records(fleet: Fleet) -> None:
    record(fleet.remotes["remote-1"], "api", API, [a_endpoint(API, "192.0.2.1")], owner="owner-r1")
    record(fleet.remotes["remote-2"], "api", API, [a_endpoint(API, "192.0.2.2")], owner="owner-r2")
    record(fleet.remotes["remote-2"], "www", WWW, [a_endpoint(WWW, "192.0.2.20")], owner="owner-r2w")


def test_merge_publish_and_status_back(fleet: Fleet) -> None:
    two_remote_records(fleet)
    primary = fleet.primaries["primary-a"]
    record(primary, "api-local", API, [a_endpoint(API, "192.0.2.9")])  # the primary's own record, no ownerID
    result = fleet.delegation("primary-a").run_once()

    assert result.ok, result
    assert [(c.name, c.reachable, c.records) for c in result.clusters] == [
        ("local", True, 1), ("remote-1", True, 1), ("remote-2", True, 2)]
    host = result.host(NS, API)
    assert host is not None and host.published and host.zone == "example.com"
    assert set(host.merged) == {"local/dnstest/api-local", "remote-1/dnstest/api", "remote-2/dnstest/api"}
    obj = auth(primary, API)
    assert obj["metadata"]["name"] == "authoritative-record-" + kuadrant_hash(API)
    assert obj["metadata"]["labels"] == {"kuadrant.io/authoritative-record": "true",
                                         "kuadrant.io/authoritative-record-hash": kuadrant_hash(API),
                                         "kuadrant.io/primary-authoritative-zone-record": API}
    assert obj["spec"]["rootHost"] == API
    assert auth_data(primary, API) == {(API, "A"): ("192.0.2.1", "192.0.2.2", "192.0.2.9")}
    owners = decode_owners(obj["metadata"]["annotations"])
    assert owners["owner-r1"] == "remote-1" and owners["owner-r2"] == "remote-2"
    assert sorted(owners.values()) == ["local", "remote-1", "remote-2"]
    assert zone_data(fleet.store) == {(API, "A", ""): ("192.0.2.1", "192.0.2.2", "192.0.2.9"),
                                      (WWW, "A", ""): ("192.0.2.20",)}
    assert zone_owners(fleet.store) == {"primary-a"}  # the primary's owner id, not the sources'
    for fake, name in ((fleet.remotes["remote-1"], "api"), (fleet.remotes["remote-2"], "www")):
        entry = remote_status(fake, name, "primary-a")
        ready = condition(entry)
        assert ready["status"] == "True" and ready["reason"] == "ProviderSuccess"
        assert "primary-a" in ready["message"] and "example.com" in ready["message"]
        merged = condition(entry, "gitdns.io/Merged")
        assert merged["status"] == "True" and merged["lastTransitionTime"]
        assert entry["zoneDomainName"] == "example.com" and entry["providerRef"] == {"name": "dns-store"}
    assert remote_status(fleet.remotes["remote-1"], "api", "primary-a")["ownerID"] == "owner-r1"


def test_a_second_pass_only_lists(fleet: Fleet) -> None:
    two_remote_records(fleet)
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    fakes = [*fleet.primaries.values(), *fleet.remotes.values()]
    for fake in fakes:
        fake.requests.clear()
    store_before = (fleet.store / "example.com.json").read_bytes()
    result = delegation.run_once()
    assert result.ok and result.status_writes == 0
    assert {r.method for fake in fakes for r in fake.requests} == {"GET"}
    assert all(r.query.get("watch") is None for fake in fakes for r in fake.requests)
    assert (fleet.store / "example.com.json").read_bytes() == store_before


def test_a_deleted_remote_record_takes_only_its_endpoints(fleet: Fleet) -> None:
    two_remote_records(fleet)
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    fleet.remotes["remote-1"].handle("DELETE", f"/apis/kuadrant.io/v1alpha1/namespaces/{NS}/dnsrecords/api", "", b"")
    result = delegation.run_once()
    assert result.ok
    assert result.host(NS, API) is not None and result.host(NS, API).removed_owners == ("owner-r1",)  # type: ignore[union-attr]
    primary = fleet.primaries["primary-a"]
    assert auth_data(primary, API) == {(API, "A"): ("192.0.2.2",)}
    assert "owner-r1" not in decode_owners(auth(primary, API)["metadata"]["annotations"])
    assert zone_data(fleet.store) == {(API, "A", ""): ("192.0.2.2",), (WWW, "A", ""): ("192.0.2.20",)}


def test_a_remote_that_stops_listing_an_endpoint_withdraws_it(fleet: Fleet) -> None:
    two_remote_records(fleet)
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    fleet.remotes["remote-2"].mutate(*DNSR, "api", lambda o: o["spec"].__setitem__(
        "endpoints", [a_endpoint(API, "192.0.2.3")]), namespace=NS)
    assert delegation.run_once().ok
    assert zone_data(fleet.store)[(API, "A", "")] == ("192.0.2.1", "192.0.2.3")


def test_an_unreachable_remote_changes_nothing_and_the_other_still_merges(fleet: Fleet) -> None:
    two_remote_records(fleet)
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    fleet.remotes["remote-1"].stop()
    fleet.remotes["remote-2"].mutate(*DNSR, "www", lambda o: o["spec"].__setitem__(
        "endpoints", [a_endpoint(WWW, "192.0.2.21")]), namespace=NS)
    result = delegation.run_once()
    down = result.cluster("remote-1")
    assert down is not None and not down.reachable and down.error and not result.ok
    assert result.host(NS, API).kept_owners == ("owner-r1",)  # type: ignore[union-attr]
    assert zone_data(fleet.store) == {(API, "A", ""): ("192.0.2.1", "192.0.2.2"), (WWW, "A", ""): ("192.0.2.21",)}
    assert auth_data(fleet.primaries["primary-a"], API) == {(API, "A"): ("192.0.2.1", "192.0.2.2")}


def test_a_removed_cluster_secret_takes_its_endpoints(fleet: Fleet) -> None:
    two_remote_records(fleet)
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    fleet.remotes["remote-1"].stop()  # gone for good, and its secret removed
    fleet.primaries["primary-a"].handle("DELETE", f"/api/v1/namespaces/{SECRETS_NS}/secrets/remote-1", "", b"")
    result = delegation.run_once()
    assert result.ok and result.cluster("remote-1") is None
    assert result.host(NS, API).removed_owners == ("owner-r1",)  # type: ignore[union-attr]
    assert zone_data(fleet.store)[(API, "A", "")] == ("192.0.2.2",)


def test_two_primaries_publish_the_same_zone_without_fighting(fleet: Fleet) -> None:
    two_remote_records(fleet)
    fleet.add_primary("primary-b")
    one, two = fleet.delegation("primary-a"), fleet.delegation("primary-b")
    assert one.run_once().ok and two.run_once().ok
    expected = {(API, "A", ""): ("192.0.2.1", "192.0.2.2"), (WWW, "A", ""): ("192.0.2.20",)}
    assert zone_data(fleet.store) == expected
    assert zone_owners(fleet.store) == {"primary-a", "primary-b"}
    settled = (fleet.store / "example.com.json").read_bytes()
    for _ in range(2):
        assert one.run_once().ok and two.run_once().ok
    assert (fleet.store / "example.com.json").read_bytes() == settled  # nobody rewrites
    for name in ("primary-a", "primary-b"):  # each primary keeps its own status entry
        assert condition(remote_status(fleet.remotes["remote-1"], "api", name))["status"] == "True"
    # a remote record deleted: both primaries withdraw it, and the zone follows
    fleet.remotes["remote-2"].handle("DELETE", f"/apis/kuadrant.io/v1alpha1/namespaces/{NS}/dnsrecords/api", "", b"")
    assert one.run_once().ok
    assert zone_data(fleet.store)[(API, "A", "")] == ("192.0.2.1", "192.0.2.2")  # primary-b still claims .2
    assert two.run_once().ok
    assert zone_data(fleet.store)[(API, "A", "")] == ("192.0.2.1",)
    # one primary stopped: the other keeps the zone right
    fleet.primaries["primary-b"].stop()
    assert not two.run_once().ok
    record(fleet.remotes["remote-2"], "api2", API, [a_endpoint(API, "192.0.2.7")], owner="owner-r2b")
    assert one.run_once().ok
    assert zone_data(fleet.store)[(API, "A", "")] == ("192.0.2.1", "192.0.2.7")


def test_a_resource_version_conflict_is_retried_and_loses_nothing(fleet: Fleet) -> None:
    two_remote_records(fleet)
    metrics = Metrics()
    delegation = fleet.delegation("primary-a", metrics=metrics)
    assert delegation.run_once().ok
    primary = fleet.primaries["primary-a"]
    name = authoritative_record_name(API)
    other = a_endpoint("other.api.example.com", "198.51.100.1")

    def other_writer(request: Request) -> None:  # another writer updates the record between our read and write
        if request.method == "PUT" and request.path.endswith(f"/dnsrecords/{name}"):
            primary.clear_hooks()
            primary.mutate(*DNSR, name, lambda o: o["spec"]["endpoints"].append(other), namespace=NS)

    primary.add_hook(other_writer)
    record(fleet.remotes["remote-1"], "api-b", API, [a_endpoint(API, "192.0.2.5")], owner="owner-r1b")
    result = delegation.run_once()
    assert result.ok, result
    assert primary.count("PUT", f"/dnsrecords/{name}") >= 2  # refused once, then re-read and re-planned
    data = auth_data(primary, API)
    assert data[(API, "A")] == ("192.0.2.1", "192.0.2.2", "192.0.2.5")
    assert data[("other.api.example.com", "A")] == ("198.51.100.1",)  # the other writer's entry kept
    assert (metrics.value("gitdns_stale_write_retries_total", {"zone": API}) or 0) >= 1
    assert (metrics.value("gitdns_zone_writes_total", {"zone": "example.com"}) or 0) >= 1


def test_namespace_requirements_are_checked_and_reported(fleet: Fleet) -> None:
    two_remote_records(fleet)
    remote = fleet.remotes["remote-1"]
    for ns in ("elsewhere", "noprovider"):
        remote.create("", "v1", "namespaces", {"metadata": {"name": ns}})
    fleet.primaries["primary-a"].create("", "v1", "namespaces", {"metadata": {"name": "noprovider"}})
    record(remote, "lost", "lost.example.com", [a_endpoint("lost.example.com", "192.0.2.30")], namespace="elsewhere")
    record(remote, "unpub", "unpub.example.com", [a_endpoint("unpub.example.com", "192.0.2.31")],
           namespace="noprovider")
    result = fleet.delegation("primary-a").run_once()
    assert not result.ok
    lost = result.host("elsewhere", "lost.example.com")
    assert lost is not None and lost.violations and "does not exist on primary" in lost.violations[0]
    assert not lost.record and lost.refused[0][0] == "remote-1/elsewhere/lost"
    ready = condition(remote_status(remote, "lost", "primary-a", "elsewhere"))
    assert ready["status"] == "False" and ready["reason"] == "NamespaceMissingOnPrimary"
    unpub = result.host("noprovider", "unpub.example.com")
    assert unpub is not None and not unpub.published and unpub.record  # merged on the primary, not published
    assert "no default provider secret in namespace noprovider" in unpub.violations[0]
    ready = condition(remote_status(remote, "unpub", "primary-a", "noprovider"))
    assert ready["status"] == "False" and ready["reason"] == "DefaultProviderNotFound"
    assert ("unpub.example.com", "A", "") not in zone_data(fleet.store)
    assert result.host(NS, API).published  # type: ignore[union-attr]  # the other groups go on


def test_an_empty_authoritative_record_is_deleted_after_withdrawal(fleet: Fleet) -> None:
    two_remote_records(fleet)
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    for fake in fleet.remotes.values():
        fake.handle("DELETE", f"/apis/kuadrant.io/v1alpha1/namespaces/{NS}/dnsrecords/api", "", b"")
    result = delegation.run_once()
    assert result.ok and result.host(NS, API).deleted  # type: ignore[union-attr]
    assert not auth_exists(fleet.primaries["primary-a"], API)
    assert zone_data(fleet.store) == {(WWW, "A", ""): ("192.0.2.20",)}
    assert auth_exists(fleet.primaries["primary-a"], WWW)
    assert delegation.run_once().ok


def test_one_bad_record_is_refused_alone(fleet: Fleet) -> None:
    two_remote_records(fleet)
    record(fleet.remotes["remote-1"], "bad", API, [a_endpoint("www.elsewhere.org", "192.0.2.66")], owner="owner-bad")
    result = fleet.delegation("primary-a").run_once()
    host = result.host(NS, API)
    assert host is not None and host.published
    assert [ref for ref, _ in host.refused] == ["remote-1/dnstest/bad"]
    assert zone_data(fleet.store)[(API, "A", "")] == ("192.0.2.1", "192.0.2.2")
    ready = condition(remote_status(fleet.remotes["remote-1"], "bad", "primary-a"))
    assert ready["reason"] == "InvalidEndpoints" and "rootHost" in ready["message"]


def test_conflicting_sources_are_reported(fleet: Fleet) -> None:
    cname = {"dnsName": API, "recordType": "CNAME", "recordTTL": 60, "targets": ["one.example.net"]}
    record(fleet.remotes["remote-1"], "api", API, [cname], owner="owner-r1")
    record(fleet.remotes["remote-2"], "api", API, [{**cname, "targets": ["two.example.net"]}], owner="owner-r2")
    result = fleet.delegation("primary-a").run_once()
    host = result.host(NS, API)
    assert host is not None and [ref for ref, _ in host.refused] == ["remote-2/dnstest/api"]
    assert "ConflictingValues" in host.refused[0][1] or "Conflict" in host.refused[0][1]
    assert zone_data(fleet.store)[(API, "CNAME", "")] == ("one.example.net",)


def test_other_primaries_status_entries_are_kept(fleet: Fleet) -> None:
    two_remote_records(fleet)
    remote = fleet.remotes["remote-1"]
    theirs = {"conditions": [{"type": "Ready", "status": "True", "reason": "ProviderSuccess", "message": "x",
                              "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    remote.mutate(*DNSR, "api", lambda o: o.__setitem__("status", {"ownerID": "owner-r1", "conditions": [
        {"type": "ReadyForDelegation", "status": "True"}], "remoteRecordStatuses": {"other-primary": theirs}}),
        namespace=NS)
    assert fleet.delegation("primary-a").run_once().ok
    status = remote.get(*DNSR, "api", namespace=NS)["status"]
    assert status["remoteRecordStatuses"]["other-primary"] == theirs
    assert status["conditions"] == [{"type": "ReadyForDelegation", "status": "True"}]
    assert "primary-a" in status["remoteRecordStatuses"]
    patches = [r for r in remote.requests if r.method == "PATCH" and r.path.endswith("/api/status")]
    assert patches and patches[0].content_type.startswith("application/merge-patch+json")


def test_records_that_publish_themselves_are_left_alone(fleet: Fleet) -> None:
    remote = fleet.remotes["remote-1"]
    remote.create(*DNSR, {"metadata": {"name": "own", "namespace": NS}, "spec": {
        "rootHost": API, "providerRef": {"name": "aws"}, "endpoints": [a_endpoint(API, "192.0.2.44")]}})
    record(remote, "plain", WWW, [a_endpoint(WWW, "192.0.2.45")], delegate=False)  # no providerRef: delegates
    result = fleet.delegation("primary-a").run_once()
    assert result.cluster("remote-1").records == 1  # type: ignore[union-attr]
    assert zone_data(fleet.store) == {(WWW, "A", ""): ("192.0.2.45",)}


def test_bad_cluster_secrets_are_reported_without_their_content(fleet: Fleet, caplog: pytest.LogCaptureFixture) -> None:
    two_remote_records(fleet)
    primary = fleet.primaries["primary-a"]
    secret = "s3cr3t-token-value"
    fleet.cluster_secret(primary, "broken", "clusters: [this is: not: valid yaml " + secret)
    fleet.cluster_secret(primary, "noserver", kubeconfig("http://127.0.0.1:9", token=secret))
    with caplog.at_level(logging.DEBUG):
        result = fleet.delegation("primary-a").run_once()
    assert result.cluster("broken") is not None and not result.cluster("broken").reachable  # type: ignore[union-attr]
    assert result.cluster("noserver") is not None and not result.cluster("noserver").reachable  # type: ignore[union-attr]
    assert result.host(NS, API).published  # type: ignore[union-attr]
    assert secret not in caplog.text and secret not in repr(result)
    assert "t0k3n-never-logged" not in caplog.text


def test_labels_of_a_kuadrant_made_record_are_completed(fleet: Fleet) -> None:
    primary = fleet.primaries["primary-a"]
    name = authoritative_record_name(API)
    primary.create(*DNSR, {"metadata": {"name": name, "namespace": NS, "labels": {
        "kuadrant.io/authoritative-record": "true", "kuadrant.io/authoritative-record-hash": kuadrant_hash(API)}},
        "spec": {"rootHost": API, "endpoints": []}})
    two_remote_records(fleet)
    assert fleet.delegation("primary-a").run_once().ok
    obj: dict[str, Any] = auth(primary, API)
    assert obj["metadata"]["labels"]["kuadrant.io/primary-authoritative-zone-record"] == API
    assert OWNERS_ANNOTATION in obj["metadata"]["annotations"]


def test_cluster_secret_label_must_be_true(fleet: Fleet) -> None:
    primary: FakeKube = fleet.primaries["primary-a"]
    primary.create("", "v1", "secrets", {"metadata": {"name": "ignored", "namespace": SECRETS_NS,
                                                      "labels": {CLUSTER_LABEL: "false"}},
                                         "data": {"kubeconfig": ""}})
    result = fleet.delegation("primary-a").run_once()
    assert result.cluster("ignored") is None
