"""Failover groups on the Kubernetes delegation path (Kuadrant's "DNS Failover" design: "The
Primary clusters when reconciling a remote DNS Record will need to look at the GroupID"): a
source DNSRecord's group is its ``status.group`` (set by the dns-operator of its cluster, as
dns-operator's primary reads it); the zone's active groups are decided as on the git path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.core import groups
from gitdns.providers.local import LocalProvider
from gitdns.reconcile.engine import load
from tests.commands.test_failover import write_repo
from tests.kubedelegation.kube_fleet import (
    DNSR,
    NS,
    ZONE,
    Fleet,
    a_endpoint,
    auth_data,
    condition,
    record,
    remote_status,
    zone_data,
)

pytest.importorskip("kubernetes.client")

API = "api.example.com"
R1, R2 = "remote-1/dnstest/api", "remote-2/dnstest/api"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(store=tmp_path / "store")
    f.add_remote("remote-1")
    f.add_remote("remote-2")
    f.add_primary("primary-a")
    yield f
    f.stop()


def grouped(fleet: Fleet, remote: str, name: str, ip: str, group: str | None) -> None:
    """A remote DNSRecord whose own cluster's dns-operator put it in ``group`` (status.group)."""
    fake = fleet.remotes[remote]
    record(fake, name, API, [a_endpoint(API, ip)], owner=f"owner-{remote}-{name}")
    if group is not None:
        fake.mutate(*DNSR, name, lambda obj: obj.setdefault("status", {}).update(group=group), namespace=NS)


def site_records(fleet: Fleet) -> None:
    grouped(fleet, "remote-1", "api", "192.0.2.1", "site-a")
    grouped(fleet, "remote-2", "api", "198.51.100.2", "site-b")


def set_zone_groups(store: Path, *names: str) -> None:
    """What the agents (or a break-glass `groups --direct`) leave in the zone: both TXT records."""
    provider = LocalProvider(store)
    state = groups.read_zone_groups(provider.read(ZONE), ZONE)
    _, changes = groups.direct_changes(state, ZONE, names, 0)
    assert provider.apply(ZONE, changes).ok


def api_values(fleet: Fleet) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the authoritative record's values, the zone's values) of api.example.com A."""
    return (auth_data(fleet.primaries["primary-a"], API).get((API, "A"), ()),
            zone_data(fleet.store).get((API, "A", ""), ()))


def test_an_inactive_remote_contributes_nothing(fleet: Fleet) -> None:
    site_records(fleet)
    grouped(fleet, "remote-2", "api-plain", "203.0.113.7", None)  # ungrouped: always active
    set_zone_groups(fleet.store, "site-a")
    result = fleet.delegation("primary-a").run_once()
    assert result.ok, result
    host = result.host(NS, API)
    assert host is not None and host.published
    assert host.inactive == ((R2, "site-b"),) and host.active_groups == ("site-a",)
    assert set(host.merged) == {R1, "remote-2/dnstest/api-plain"} and host.refused == ()
    assert api_values(fleet) == (("192.0.2.1", "203.0.113.7"), ("192.0.2.1", "203.0.113.7"))
    entry = remote_status(fleet.remotes["remote-2"], "api", "primary-a")
    ready = condition(entry)
    assert ready["status"] == "False" and ready["reason"] == "MemberOfInactiveGroup"
    assert "group site-b is not active in zone example.com (active: site-a)" in ready["message"]
    assert entry["endpoints"] == []
    assert condition(remote_status(fleet.remotes["remote-1"], "api", "primary-a"))["reason"] == "ProviderSuccess"


def test_switching_groups_moves_the_record_within_one_pass(fleet: Fleet) -> None:
    site_records(fleet)
    set_zone_groups(fleet.store, "site-a")
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    assert api_values(fleet) == (("192.0.2.1",), ("192.0.2.1",))
    set_zone_groups(fleet.store, "site-b")
    result = delegation.run_once()  # one pass
    assert result.ok, result
    assert api_values(fleet) == (("198.51.100.2",), ("198.51.100.2",))
    host = result.host(NS, API)
    assert host is not None and host.inactive == ((R1, "site-a"),) and host.merged == (R2,)
    ready = condition(remote_status(fleet.remotes["remote-1"], "api", "primary-a"))
    assert ready["reason"] == "MemberOfInactiveGroup"
    assert condition(remote_status(fleet.remotes["remote-2"], "api", "primary-a"))["reason"] == "ProviderSuccess"
    # the owner of the inactive source left the authoritative record (its ownership too)
    from gitdns.core.plan.planner import decode_zone
    from gitdns.kubedelegation.merge import snapshot_of

    obj = fleet.primaries["primary-a"].get(*DNSR, host.record, namespace=NS)
    owners = {o for entries in decode_zone(snapshot_of(obj, API)).owners.values() for o in entries}
    assert owners == {"owner-remote-2-api"}
    # and back
    set_zone_groups(fleet.store, "site-a", "site-b")
    assert delegation.run_once().ok
    assert api_values(fleet) == (("192.0.2.1", "198.51.100.2"), ("192.0.2.1", "198.51.100.2"))


def test_no_active_groups_anywhere_means_every_group(fleet: Fleet) -> None:
    site_records(fleet)
    result = fleet.delegation("primary-a").run_once()
    assert result.ok, result
    host = result.host(NS, API)
    assert host is not None and host.inactive == () and host.active_groups == ()
    assert api_values(fleet) == (("192.0.2.1", "198.51.100.2"), ("192.0.2.1", "198.51.100.2"))


def test_git_active_groups_decide_as_on_the_git_path(fleet: Fleet, tmp_path: Path) -> None:
    """With the agent's desired state, git's ActiveGroups counts (the zone holds nothing yet);
    a zone holding a higher serial (break-glass) wins over git, as on the git path."""
    site_records(fleet)
    state = load(write_repo(tmp_path / "repo", active=("site-b",), serial=3)).state
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once(state).ok
    assert api_values(fleet) == (("198.51.100.2",), ("198.51.100.2",))
    provider = LocalProvider(fleet.store)
    zone_state = groups.read_zone_groups(provider.read(ZONE), ZONE)
    serial, changes = groups.direct_changes(zone_state, ZONE, ["site-a"], 3)
    assert serial == 4 and provider.apply(ZONE, changes).ok
    assert delegation.run_once(state).ok
    assert api_values(fleet) == (("192.0.2.1",), ("192.0.2.1",))


def test_a_zone_that_cannot_be_read_changes_nothing(fleet: Fleet) -> None:
    """Grouped sources and no default provider secret: the active groups are unknown, so the
    authoritative record is left as it is and the pass says why."""
    site_records(fleet)
    set_zone_groups(fleet.store, "site-a")
    delegation = fleet.delegation("primary-a")
    assert delegation.run_once().ok
    before = auth_data(fleet.primaries["primary-a"], API)
    fleet.primaries["primary-a"].mutate("", "v1", "secrets", "dns-store",
                                        lambda obj: obj["metadata"]["labels"].clear(), namespace=NS)
    set_zone_groups(fleet.store, "site-b")  # a switch the primary cannot see now
    result = delegation.run_once()
    host = result.host(NS, API)
    assert not result.ok and host is not None
    assert any("active groups cannot be read" in e for e in host.errors), host.errors
    assert auth_data(fleet.primaries["primary-a"], API) == before
