"""A host whose gateway addresses are all excluded (or none known) publishes nothing.

dns-operator's endpoints builder (pkg/builder/endpoints.go, ``getLoadBalancedEndpoints``:
"nothing to do" when no A record and no host value were made) returns no endpoint at all for
such a target, in either strategy — its unit test "Should return no endpoints if missing
addresses" builds a loadbalanced target (id ``fbf71c44-6b37-4962-ace6-801912e769be``, weight
120, geo ``IE``, the default geo) with an empty address list and expects an empty list — and
kuadrant-operator creates no DNSRecord for a listener without endpoints.  gitdns's builder, its
plans and `gitdns render` must do the same: never a ``klb`` tree with nothing at its leaves.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gitdns.core import builder
from gitdns.core.model import (
    Cluster,
    DesiredState,
    DNSPolicy,
    Gateway,
    Listener,
    ProviderRef,
    Strategy,
    TargetRef,
    Zone,
)
from gitdns.core.plan.planner import plan as make_plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import ZoneSnapshot
from gitdns.core.store import apply_changes

ZONE = Zone(name="example-com", domain="example.com", provider=ProviderRef("memory"))
HOST = "pat.the.cat.example.com"
OPERATOR_ID = "fbf71c44-6b37-4962-ace6-801912e769be"  # dns-operator's builder test literals


def state_with(policy: DNSPolicy, addresses: tuple[str, ...], ident: str = OPERATOR_ID) -> tuple[DesiredState, Cluster]:
    gateway = Gateway("TestName", "TestNamespace", addresses, (Listener(HOST),))
    cluster = Cluster(name="c", id=ident, geo="IE", gateways=(gateway,))
    return DesiredState(zones=(ZONE,), clusters=(cluster,), policies=(policy,)), cluster


LOADBALANCED = DNSPolicy("lb", TargetRef(gateway="TestName"), Strategy.LOADBALANCED, default_weight=120,
                         default_geo="IE")
SIMPLE = DNSPolicy("simple", TargetRef(gateway="TestName"), Strategy.SIMPLE)
FLATTENED = dataclasses.replace(LOADBALANCED, name="flat", flattened=True)


def test_dns_operators_missing_addresses_case_builds_no_endpoints() -> None:
    state, cluster = state_with(LOADBALANCED, ())
    assert builder.desired_for_zone(state, cluster, ZONE) == ()
    [host] = builder.build_hosts(state, cluster, ZONE)
    assert host.records == ()
    assert host.notes == (f"{HOST}: nothing published for this cluster: gateway TestNamespace/TestName has no "
                          "address (NoAddresses)",)


@pytest.mark.parametrize("policy", [LOADBALANCED, SIMPLE, FLATTENED], ids=lambda p: p.name)
@pytest.mark.parametrize(("addresses", "exclude"), [
    (("10.1.2.3", "10.9.9.9"), ("10.0.0.0/8",)),  # a CIDR network
    (("127.0.0.1", "127.0.0.2"), ("127.0.0.1", "127.0.0.2")),  # the IPs themselves
    (("2001:db8::1",), ("2001:db8::/32",)),  # IPv6
    (("lb.cloud.example.net",), ("LB.Cloud.Example.Net.",)),  # a host name (case, trailing dot)
    (("10.1.2.3", "lb.cloud.example.net"), ("10.0.0.0/8", "lb.cloud.example.net")),  # both kinds
], ids=["cidr", "ips", "ipv6", "hostname", "mixed"])
def test_every_address_excluded_publishes_nothing(policy: DNSPolicy, addresses: tuple[str, ...],
                                                   exclude: tuple[str, ...]) -> None:
    state, cluster = state_with(dataclasses.replace(policy, exclude_addresses=exclude), addresses)
    assert builder.desired_for_zone(state, cluster, ZONE) == ()
    notes = builder.notes_for_zone(state, cluster, ZONE)
    assert notes == (f"{HOST}: nothing published for this cluster: every address of gateway TestNamespace/TestName "
                     f"is excluded by DNSPolicy {policy.name} (spec.excludeAddresses) (NoAddresses)",)


def test_an_address_left_keeps_the_whole_tree() -> None:
    """The loadbalanced layout with one address left over is dns-operator's layout for it."""
    policy = dataclasses.replace(LOADBALANCED, exclude_addresses=("10.0.0.0/8",))
    state, cluster = state_with(policy, ("10.1.2.3", "127.0.0.1"))
    got = {(r.name, r.type, r.set_id, r.values) for r in builder.desired_for_zone(state, cluster, ZONE)}
    klb = f"klb.{HOST}"
    target = f"2q5hyv-a8xcra.{klb}"  # dns-operator's idHash and targetHash for these literals
    assert got == {
        (HOST, "CNAME", "", (klb,)),
        (klb, "CNAME", "IE", (f"ie.{klb}",)),
        (klb, "CNAME", "default", (f"ie.{klb}",)),
        (f"ie.{klb}", "CNAME", target, (target,)),
        (target, "A", "", ("127.0.0.1",)),
    }
    assert builder.notes_for_zone(state, cluster, ZONE) == ()


def test_when_the_last_address_is_excluded_the_owner_withdraws_its_tree() -> None:
    """Before: one address published; after: excluded.  The plan removes every record and
    ownership TXT of the owner, and writes nothing that leads nowhere."""
    before, cluster = state_with(LOADBALANCED, ("127.0.0.1",))
    after, _ = state_with(dataclasses.replace(LOADBALANCED, exclude_addresses=("127.0.0.0/8",)), ("127.0.0.1",))
    policy = PlanPolicy(zone=ZONE.domain, known_owners=(cluster.id,))
    first = make_plan(Intent(cluster.id, builder.desired_for_zone(before, cluster, ZONE)),
                      ZoneSnapshot(ZONE.domain, ()), policy)
    records = apply_changes({}, first.changes, ()).records
    assert {k.name for k in records} >= {HOST, f"klb.{HOST}"}
    second = make_plan(Intent(cluster.id, builder.desired_for_zone(after, cluster, ZONE)),
                       ZoneSnapshot(ZONE.domain, tuple(records.values())), policy)
    assert not second.stalled and not second.conflicts
    assert apply_changes(records, second.changes, ()).records == {}


# --- through the commands: render and plan ------------------------------------------------------

ZONE_DOC = """apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: example-com}
spec:
  domain: example.com
  publisher: %(publisher)s
  provider: {type: local, settings: {path: zones}}
"""
CLUSTER_DOC = """apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata: {name: c1}
spec:
  id: cluster-1-uid
  geo: IE
  gateways:
    - name: gw
      namespace: ingress
      addresses: [10.1.2.3, 10.1.2.4]
      listeners:
        - hostname: api.example.com
"""
POLICY_DOC = """apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata: {name: api}
spec:
  targetRef: {gateway: gw, namespace: ingress}
  strategy: loadbalanced
  loadBalancing:
    geo: {defaultGeo: IE}
  excludeAddresses: [%(exclude)s]
"""


def repo(tmp_path: Path, *, publisher: str, exclude: str) -> Path:
    root = tmp_path / "repo"
    root.mkdir(exist_ok=True)
    (root / "zone.yaml").write_text(ZONE_DOC % {"publisher": publisher})
    (root / "cluster.yaml").write_text(CLUSTER_DOC)
    (root / "policy.yaml").write_text(POLICY_DOC % {"exclude": exclude})
    return root


def test_render_writes_no_dnsrecord_for_a_host_with_every_address_excluded(tmp_path: Path) -> None:
    from gitdns.commands.render import render

    out = tmp_path / "out"
    first = render(repo(tmp_path, publisher="kuadrant", exclude="192.0.2.0/24"), "c1", out)
    manifest = out / "c1" / "api-example-com.yaml"
    assert first.code == 0 and "".join(first.out).split() == [str(manifest)]
    assert "klb.api.example.com" in manifest.read_text()
    second = render(repo(tmp_path, publisher="kuadrant", exclude="10.0.0.0/8"), "c1", out)
    assert second.code == 0 and "".join(second.out).split() == []
    assert not manifest.exists()  # the old one would have Argo CD apply a tree that leads nowhere
    assert any("api.example.com: nothing published for this cluster" in line and "no DNSRecord rendered" in line
               for line in second.err), second.err


def test_plan_shows_no_klb_tree_and_says_why(tmp_path: Path) -> None:
    from gitdns.commands.plan.command import plan

    result = plan(repo(tmp_path, publisher="gitdns", exclude="10.0.0.0/8"), cluster="c1", fmt="json")
    assert result.code == 0, result.err
    text = "\n".join(result.out)
    assert "klb." not in text
    [doc] = json.loads(text)["plans"]
    assert doc["changes"] == []
    assert any("nothing published for this cluster" in n and "(NoAddresses)" in n for n in doc["notes"])


def test_notes_come_once_per_host_and_sorted() -> None:
    policy = dataclasses.replace(LOADBALANCED, exclude_addresses=("10.0.0.0/8",))
    gateway = Gateway("TestName", "TestNamespace", ("10.0.0.1",), (Listener(HOST), Listener(f"b.{HOST}")))
    cluster = Cluster(name="c", id="c-uid", geo="IE", gateways=(gateway, dataclasses.replace(gateway, name="x")))
    state = DesiredState(zones=(ZONE,), clusters=(cluster,), policies=(
        policy, dataclasses.replace(policy, name="other", target=TargetRef(gateway="x"))))
    notes = builder.notes_for_zone(state, cluster, ZONE)
    assert list(notes) == sorted(set(notes)) and len(notes) == 4
    assert all(n.endswith("(NoAddresses)") for n in notes)
    assert builder.desired_for_zone(state, cluster, ZONE) == ()
    assert [h.records for h in builder.build_hosts(state, cluster, ZONE)] == [()] * 4
