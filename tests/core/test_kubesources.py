"""Source DNSRecords, owners and status entries of delegation through Kubernetes (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gitdns.core import kubesources as ks
from gitdns.core.endpoints import SourceEndpoints, kuadrant_hash
from gitdns.core.records import RecordSet

T0, T1 = "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"


def obj(name: str = "api", spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "generation": 2, "labels": labels or {}},
            "spec": {"rootHost": "*.Apps.Example.com", "endpoints": [], **(spec or {})}, "status": status or {}}


def test_which_records_delegate() -> None:
    assert ks.is_delegating(obj())  # no providerRef: a primary publishes it
    assert ks.is_delegating(obj(spec={"delegate": True}))  # Kuadrant's flag
    assert not ks.is_delegating(obj(spec={"providerRef": {"name": "aws"}}))  # publishes itself
    assert ks.is_delegating(obj(spec={"providerRef": {"name": "x"}, "delegate": True}))
    assert not ks.is_delegating(obj(labels={"kuadrant.io/authoritative-record": "true"}))
    assert not ks.is_delegating(obj(labels={"kuadrant.io/primary-authoritative-zone-record": "a.example.com"}))


def test_owner_ids() -> None:
    assert ks.owner_id(obj(spec={"ownerID": "abc123"}, status={"ownerID": "zzz999"}), "c") == "abc123"
    assert ks.owner_id(obj(status={"ownerID": "zzz999"}), "c") == "zzz999"
    stable = ks.owner_id(obj(), "remote-1")
    assert stable == "k8s-" + kuadrant_hash("remote-1/ns/api", 8) and stable != ks.owner_id(obj(), "remote-2")
    assert ks.owner_id(obj(spec={"ownerID": "bad,owner=x"}), "c").startswith("k8s-")  # unsafe in a TXT label


def test_parse_source_and_grouping() -> None:
    mine = {"conditions": [{"type": "Ready", "status": "True"}]}
    src = ks.parse_source(obj(status={"remoteRecordStatuses": {"p1": mine, "p2": {}}}), "remote-1", "p1")
    assert src is not None and src.root == "apps.example.com" and src.generation == 2
    assert src.status_entry == mine and src.ref == "remote-1/ns/api" and src.endpoints.ok
    assert ks.parse_source(obj(spec={"providerRef": {"name": "aws"}}), "remote-1", "p1") is None
    other = ks.parse_source(obj("www", {"rootHost": "www.example.com"}), "remote-2", "p1")
    assert other is not None
    assert list(ks.group_sources([other, src])) == [("ns", "apps.example.com"), ("ns", "www.example.com")]


def source(owner: str, records: tuple[RecordSet, ...] = (), cluster: str = "c1", ok: bool = True) -> ks.SourceRecord:
    eps = SourceEndpoints(records, () if ok else ("bad",))
    return ks.SourceRecord(cluster, "ns", f"r-{owner}-{cluster}", "api.example.com", owner, 1, eps)


def test_duplicate_owners() -> None:
    rec = (RecordSet("api.example.com", "A", 60, ("192.0.2.1",)),)
    same = [source("o1", rec, "c1"), source("o1", rec, "c2")]
    kept, refused = ks.split_duplicates(same)
    assert len(kept) == 1 and not refused  # the same record seen twice
    kept, refused = ks.split_duplicates([source("o1", rec, "c1"), source("o1", (), "c2")])
    assert [s.cluster for s in refused] == ["c2"]


def test_owner_map_and_removal_rules() -> None:
    owners = ks.decode_owners({ks.OWNERS_ANNOTATION: ks.encode_owners({"b": "remote-2", "a": "local"})})
    assert owners == {"a": "local", "b": "remote-2"}
    assert ks.decode_owners({ks.OWNERS_ANNOTATION: "not json"}) == {} and ks.decode_owners(None) == {}
    reach, conf = frozenset({"local", "remote-1"}), frozenset({"local", "remote-1", "remote-2"})
    assert ks.removable("a", owners, reach, conf, all_reachable=False)  # its cluster answered
    assert not ks.removable("b", owners, reach, conf, all_reachable=False)  # remote-2 unreachable: kept
    assert ks.removable("b", owners, reach, frozenset({"local", "remote-1"}), all_reachable=True)  # secret gone
    assert not ks.removable("unknown", owners, reach, conf, all_reachable=False)
    assert ks.removable("unknown", owners, reach, conf, all_reachable=True)


def test_status_entries_keep_their_times_until_something_moves() -> None:
    src = source("o1")
    ok = ks.Outcome(True, ks.PROVIDER_SUCCESS, "published", ({"dnsName": "api.example.com"},), True, "example.com",
                    "dns-store", ("o1",))
    first = ks.status_entry(src, ok, "p1", T0)
    assert [c["type"] for c in first["conditions"]] == ["Ready", "gitdns.io/Merged"]
    assert first["zoneDomainName"] == "example.com" and first["providerRef"] == {"name": "dns-store"}
    again = ks.status_entry(replace(src, status_entry=first),
                            ks.Outcome(True, ks.PROVIDER_SUCCESS, "published", ok.endpoints, False, "example.com",
                                       "dns-store", ("o1",)), "p1", T1)
    assert again == first and not ks.entry_changed(first, again)  # nothing moved: no write
    moved = ks.status_entry(replace(src, status_entry=first), ok, "p1", T1)
    assert moved["conditions"][1]["lastTransitionTime"] == T1  # endpoints merged again
    assert moved["conditions"][0]["lastTransitionTime"] == T0
    failed = ks.status_entry(replace(src, status_entry=first),
                             ks.Outcome(False, ks.INVALID_ENDPOINTS, "bad"), "p1", T1)
    assert failed["conditions"][0]["status"] == "False" and failed["conditions"][0]["lastTransitionTime"] == T1
    assert ks.entry_changed(first, failed)


def test_reasons_are_a_closed_set() -> None:
    assert {ks.PROVIDER_SUCCESS, ks.NAMESPACE_MISSING, ks.INVALID_ENDPOINTS, ks.CONFLICT} <= ks.STATUS_REASONS
