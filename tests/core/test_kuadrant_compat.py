"""gitdns against Kuadrant dns-operator's own unit tests, literal for literal.

Every input and expected output below is copied from the dns-operator test (or, where a test
says so, the code) named beside it, read at github.com/Kuadrant/dns-operator commit
57b9db50acedff236622b5529e4e8f1c515e4ec6.  gitdns's builder (`gitdns.core.builder`), TXT
codec and reader (`gitdns.core.registry`) and active-groups codec (`gitdns.core.groups`) must
give the same names, values and TTLs.

dns-operator's tests configure its registry with test prefixes (``foo-``, ``txt-``, ``txt.``)
and wildcard replacements (``wc``); in production it runs with prefix ``kuadrant-`` and
replacement ``wildcard`` (internal/controller/dnsrecord_controller.go: ``txtRegistryPrefix``,
``txtRegistryWildcardReplacement``), the only configuration gitdns speaks.  `_prod` rewrites a
literal TXT name to that configuration and nothing else.  dns-operator's TXT targets carry the
zone-file quotes (``"\"heritage=…\""``); gitdns values are the string inside them (`_q`).

The ``test_difference_*`` tests pin where gitdns differs on purpose; docs/records.md,
"Differences from dns-operator", says why and what it means on a shared zone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import pytest

from gitdns.core import builder, groups, names, registry
from gitdns.core.model import (
    ActiveGroups,
    Cluster,
    DesiredState,
    DNSPolicy,
    Gateway,
    Listener,
    PolicyTTLs,
    ProviderRef,
    Strategy,
    TargetRef,
    Zone,
)
from gitdns.core.owner.zone import OwnerKind
from gitdns.core.owner.zone import owners as owner_rows
from gitdns.core.records import Action, RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.registry import OwnerLabels, OwnershipEntry
from tests.core import planner_kit

COMMIT = "57b9db50acedff236622b5529e4e8f1c515e4ec6"  # the dns-operator commit every literal is from


def _q(target: str) -> str:
    """A dns-operator TXT target without its zone-file quotes."""
    assert target.startswith('"') and target.endswith('"'), target
    return target[1:-1]


def _prod(name: str, prefix: str, wildcard: str = "") -> str:
    """A TXT name a dns-operator test wrote with its test prefix (and wildcard replacement), as
    dns-operator writes it in production (prefix ``kuadrant-``, replacement ``wildcard``)."""
    assert name.lower().startswith(prefix.lower()), (name, prefix)
    rest = name[len(prefix):]
    if wildcard:
        head, sep, tail = rest.partition(f"-{wildcard}.")
        if sep:
            rest = f"{head}-wildcard.{tail}"
    return "kuadrant-" + rest


# --- the hash: internal/common/hash/hash_test.go, pkg/builder/endpoints_test.go, name_mapper_test.go


@pytest.mark.parametrize(("value", "length", "expected"), [
    # hash_test.go TestToBase36Hash (the whole hash) and TestToBase36HashLen
    ("9c8f876c-4ddc-44a3-9842-460f97e6c037", 44, "32ah7xkbrefse005knttdnvhaybhyeezwh0d6cln7r6l"),
    ("9c8f876c-4ddc-44a3-9842-460f97e6c037", 8, "32ah7xkb"),
    # pkg/builder/endpoints_test.go: idHash of id, targetHash of "<gateway name>-<namespace>"
    ("fbf71c44-6b37-4962-ace6-801912e769be", 6, "2q5hyv"),
    ("TestName-TestNamespace", 6, "a8xcra"),
    # internal/external-dns/registry/name_mapper_test.go TestToTXTName: owner1 -> 2tqs20a7
    ("owner1", 8, "2tqs20a7"),
])
def test_hash(value: str, length: int, expected: str) -> None:
    assert names.short_hash(value, length) == expected


# --- the TXT name mapper: internal/external-dns/registry/name_mapper_test.go and txt_test.go

# (record name, type, owner, the TXT name the test expects, its prefix, its wildcard replacement)
TXT_NAMES = [
    # name_mapper_test.go TestToTXTName "prefix with dash" / "prefix with wildcard"
    ("example.com", "A", "owner1", "foo-2tqs20a7-a-example.com", "foo-", ""),
    ("*.example.com", "A", "owner1", "foo-2tqs20a7-a-wc.example.com", "foo-", "wc"),
    # txt_test.go TestGenerateTXT / TestGenerateTXTWildcard / TestGenerateTXTForAAAA (no prefix)
    ("foo.test-zone.example.org", "CNAME", "owner1", "2tqs20a7-cname-foo.test-zone.example.org", "", ""),
    ("*.test-zone.example.org", "CNAME", "owner1", "2tqs20a7-cname-wc.test-zone.example.org", "", "wc"),
    ("foo.test-zone.example.org", "AAAA", "owner1", "2tqs20a7-aaaa-foo.test-zone.example.org", "", ""),
    # txt_test.go testTXTRegistryApplyChangesWithPrefix, expected creates (prefix "txt.")
    ("new-record-1.test-zone.example.org", "CNAME", "owner1",
     "txt.2tqs20a7-cname-new-record-1.test-zone.example.org", "txt.", ""),
    ("multiple.test-zone.example.org", "CNAME", "owner1", "txt.2tqs20a7-cname-multiple.test-zone.example.org",
     "txt.", ""),
]


@pytest.mark.parametrize(("name", "rtype", "owner", "literal", "prefix", "wc"), TXT_NAMES)
def test_txt_name(name: str, rtype: str, owner: str, literal: str, prefix: str, wc: str) -> None:
    expected = _prod(literal, prefix, wc)
    assert registry.txt_name(owner, rtype, name) == expected
    assert registry.parse_txt_name(expected) == (names.short_hash(owner, 8), rtype, name)


@pytest.mark.parametrize(("literal", "prefix", "wc", "name", "rtype"), [
    # name_mapper_test.go TestToEndpointsName, version "1"
    ("foo-11111111-cname-example.com", "foo-", "", "example.com", "CNAME"),
    ("foo-11111111-a-wc.example.com", "foo-", "wc", "*.example.com", "A"),
    # TestToEndpointsName, legacy ("V2": type and affix, no owner id)
    ("foo-cname-example.com", "foo-", "", "example.com", "CNAME"),
    # TestExtractRecordTypeDefaultPosition: the legacy type prefixes
    ("foo-ns-zone.example.com", "foo-", "", "zone.example.com", "NS"),
    ("foo-aaaa-zone.example.com", "foo-", "", "zone.example.com", "AAAA"),
    # testTXTRegistryRecordsPrefixed EP10: the prefix is read whatever its case ("TxT-")
    ("TxT-b1e3677c-cname-tar.test-zone.example.org", "TxT-", "", "tar.test-zone.example.org", "CNAME"),
])
def test_txt_name_read_back(literal: str, prefix: str, wc: str, name: str, rtype: str) -> None:
    parsed = registry.parse_txt_name(_prod(literal, prefix, wc).upper() if prefix == "TxT-" else
                                     _prod(literal, prefix, wc))
    assert parsed is not None and parsed[1:] == (rtype, name)


def test_txt_name_round_trip() -> None:
    # name_mapper_test.go TestToTXTNameRoundTrip: ToTXTName("*.example.com", "owner1", "A") reads back
    parsed = registry.parse_txt_name(registry.txt_name("owner1", "A", "*.example.com"))
    assert parsed is not None and parsed[1:] == ("A", "*.example.com")


def test_a_host_whose_txt_name_cannot_exist() -> None:
    # txt_test.go TestFailGenerateTXT: no TXT for this host (its TXT label would pass 63 octets);
    # gitdns refuses such a host on a txt-registry zone (NameTooLongForRegistry, docs/spec.md)
    host = "foo-some-really-big-name-not-supported-and-will-fail-000000000000000000.test-zone.example.org"
    label = names.first_label(registry.txt_name("owner1", "CNAME", host))
    assert len(label) > names.MAX_LABEL
    assert len(names.first_label(host)) > names.MAX_FIRST_LABEL_ON_TXT_ZONES


# --- the TXT value: txt_test.go, group_test.go, provider/inmemory/inmemory_test.go

GENERATED = '"heritage=external-dns,external-dns/owner=owner1,external-dns/version=1"'  # TestGenerateTXT
WITH_RESOURCE = ('"heritage=external-dns,external-dns/owner=owner1,external-dns/resource=ingress/default/'
                 'my-ingress,external-dns/version=1"')  # testTXTRegistryApplyChangesWithPrefix, EP1
# inmemory_test.go "real-world example - registry TXT record under limit" (a grouped owner)
GROUPED = ('"heritage=external-dns,external-dns/owner=abc12345,external-dns/targets=192.168.1.1;'
           '192.168.1.2;192.168.1.3,external-dns/group=group1,external-dns/version=1"')


def test_value_of_an_owner() -> None:
    assert registry.encode(OwnerLabels("owner1")) == (_q(GENERATED), False)
    labels = registry.decode(GENERATED)
    assert labels == OwnerLabels("owner1", version="1")


def test_value_keys_are_sorted_as_dns_operator_serializes_them() -> None:
    # the resource label is dns-operator's own; gitdns keeps an unknown label and sorts it in
    labels = registry.decode(WITH_RESOURCE)
    assert labels is not None and labels.extra == (("resource", "ingress/default/my-ingress"),)
    assert registry.encode(labels)[0] == _q(WITH_RESOURCE)


def test_grouped_value_with_semicolon_joined_targets() -> None:
    labels = registry.decode(GROUPED)
    assert labels == OwnerLabels("abc12345", group="group1", targets=("192.168.1.1", "192.168.1.2", "192.168.1.3"),
                                 version="1")
    value, fitted = registry.encode(labels)
    # what dns-operator's GroupRegistry writes for these labels: Labels.SerializePlain sorts the
    # keys (external-dns endpoint/labels.go), Targets.String() joins with ";"
    assert fitted and value == (
        "heritage=external-dns,external-dns/group=group1,external-dns/owner=abc12345,"
        "external-dns/targets=192.168.1.1;192.168.1.2;192.168.1.3,external-dns/version=1")
    assert len(_q(GROUPED).encode()) <= registry.MAX_TXT_STRING == 255  # inmemory validateTXTRecord's limit


def test_value_with_additional_labels() -> None:
    # group_test.go "TXT records with additional labels", owner1
    labels = registry.decode('"heritage=external-dns,external-dns/owner=owner1,external-dns/version=1,'
                             'external-dns/group=group1,external-dns/target=us-east-1,external-dns/weight=100"')
    assert labels == OwnerLabels("owner1", group="group1", version="1",
                                 extra=(("target", "us-east-1"), ("weight", "100")))


@pytest.mark.parametrize("value", [
    '"some-random-text"',  # group_test.go "TXT records with invalid heritage"
    "random",  # txt_test.go EP3 "txt record that we are not managing"
    '""',  # txt_test.go EP4 "TXT record has the wrong format"
])
def test_values_that_are_no_ownership(value: str) -> None:
    assert registry.decode(value) is None


# --- the registry reader: txt_test.go testTXTRegistryRecords*, testTXTRegistryMissingRecordsWithPrefix


def _owners_by_key(records: Iterable[RecordSet]) -> tuple[dict[RecordKey, set[str]], set[RecordKey]]:
    """Owners of each data record as gitdns reads the zone, and the data records."""
    found: dict[RecordKey, dict[str, OwnershipEntry]] = {}
    data: set[RecordKey] = set()
    for rec in records:
        entries = registry.decode_entries(rec)
        for entry in entries:
            registry.add_entry(found, entry)
        if not entries:
            data.add(rec.key)
    return {k: set(v) for k, v in found.items()}, data


def _ep(name: str, rtype: str, *targets: str, set_id: str = "") -> RecordSet:
    return RecordSet(name, rtype, 300, targets or ('""',), set_id)


Z = "test-zone.example.org"


def test_registry_reader_prefixed_zone() -> None:
    # testTXTRegistryRecordsPrefixed: the zone, then the owner label each endpoint gets
    # (prefix "txt-", wildcard replacement "wc"); EP10's TXT names a hash that is not owner2's:
    # test_difference_a_txt_whose_hash_is_not_its_owners
    def p(name: str) -> str:
        return _prod(name, "txt-", "wc")

    v1 = '"heritage=external-dns,external-dns/owner=owner1,external-dns/version=1"'
    zone = [
        _ep(f"foo.{Z}", "CNAME", "foo.loadbalancer.com"),  # EP1
        _ep(p(f"txt-2tqs20a7-cname-bar.{Z}"), "CNAME", f"baz.{Z}"),  # EP2: a CNAME is data
        _ep(f"qux.{Z}", "TXT", "random"),  # EP3
        _ep(f"foobar.{Z}", "CNAME", "foobar.loadbalancer.com"), _ep(f"foobar.{Z}", "TXT"),  # EP4
        _ep(f"*.wildcard.{Z}", "CNAME", "foo.loadbalancer.com"),  # EP5
        _ep(p(f"txt-2tqs20a7-cname-wc.wildcard.{Z}"), "TXT", v1),
        _ep(f"bar.{Z}", "CNAME", "my-domain.com"),  # EP6 (legacy TXT)
        _ep(p(f"txt-cname-bar.{Z}"), "TXT", '"heritage=external-dns,external-dns/owner=owner1"'),
        _ep(f"multiple.{Z}", "CNAME", "lb1.loadbalancer.com", set_id="test-set-1"),  # EP7 (legacy, set id)
        _ep(p(f"txt-cname-multiple.{Z}"), "TXT", '"heritage=external-dns,external-dns/owner=owner1"',
            set_id="test-set-1"),
        _ep(f"multiple.{Z}", "CNAME", "lb2.loadbalancer.com", set_id="test-set-2"),  # EP8
        _ep(p(f"txt-2tqs20a7-cname-multiple.{Z}"), "TXT", v1, set_id="test-set-2"),
        _ep(f"dualstack.{Z}", "A", "1.1.1.1"),  # EP9
        _ep(p(f"txt-2tqs20a7-a-dualstack.{Z}"), "TXT", v1),
        _ep(f"dualstack.{Z}", "AAAA", "2001:DB8::1"),  # EP11 (legacy TXT)
        _ep(p(f"txt-aaaa-dualstack.{Z}"), "TXT", '"heritage=external-dns,external-dns/owner=owner2"'),
    ]
    owners, data = _owners_by_key(zone)
    expected = {  # the owner label of each expected endpoint; EP1-EP4 have none
        RecordKey(f"*.wildcard.{Z}", "CNAME"): {"owner1"},
        RecordKey(f"bar.{Z}", "CNAME"): {"owner1"},
        RecordKey(f"multiple.{Z}", "CNAME", "test-set-1"): {"owner1"},
        RecordKey(f"multiple.{Z}", "CNAME", "test-set-2"): {"owner1"},
        RecordKey(f"dualstack.{Z}", "A"): {"owner1"},
        RecordKey(f"dualstack.{Z}", "AAAA"): {"owner2"},
    }
    assert {k: v for k, v in owners.items() if k in data} == expected
    assert {RecordKey(f"foo.{Z}", "CNAME"), RecordKey(p(f"txt-2tqs20a7-cname-bar.{Z}"), "CNAME"),
            RecordKey(f"qux.{Z}", "TXT"), RecordKey(f"foobar.{Z}", "TXT")} <= data - set(owners)


def test_registry_reader_several_strings_in_one_txt() -> None:
    # testTXTRegistryRecordsNoPrefix EP6: the owner is read from whichever string carries it
    txt = _ep("kuadrant-cname-txt.bar." + Z, "TXT", '"heritage=external-dns,external-dns/foo=bar"',
              '"heritage=external-dns,external-dns/resource=ingress/default/my-ingress"',
              '"heritage=external-dns,external-dns/owner=owner1"')
    (entry,) = registry.decode_entries(txt)
    assert (entry.key, entry.owner) == (RecordKey(f"txt.bar.{Z}", "CNAME"), "owner1")


def test_registry_reader_new_format_and_orphan_txt() -> None:
    # testTXTRegistryMissingRecordsWithPrefix (prefix "txt."): EP3 the NS record is owner1's,
    # EP7 a TXT of the new format with no endpoint is not an endpoint, EP4/EP8 are plain TXT
    v1 = '"heritage=external-dns,external-dns/owner=owner1,external-dns/version=1"'
    zone = [
        _ep(f"newformat.{Z}", "NS", "foobar.nameserver.com"),
        _ep(_prod(f"txt.2tqs20a7-ns-newformat.{Z}", "txt."), "TXT", v1),
        _ep(_prod(f"txt.2tqs20a7-cname-newformat.{Z}", "txt."), "TXT", v1),
        _ep(f"oldformat3.{Z}", "TXT", "random"), _ep(f"noheritage.{Z}", "TXT", "random"),
    ]
    owners, data = _owners_by_key(zone)
    assert owners == {RecordKey(f"newformat.{Z}", "NS"): {"owner1"}, RecordKey(f"newformat.{Z}", "CNAME"): {"owner1"}}
    assert data == {RecordKey(f"newformat.{Z}", "NS"), RecordKey(f"oldformat3.{Z}", "TXT"),
                    RecordKey(f"noheritage.{Z}", "TXT")}
    rows = {r.owner: r for r in owner_rows(ZoneSnapshot(Z, tuple(zone)), known=())}
    assert (rows["owner1"].keys, rows["owner1"].orphans) == ((RecordKey(f"newformat.{Z}", "NS"),), 1)


def test_registry_reader_groups() -> None:
    # group_test.go "Multiple groups and owners against a shared hostname": the values as the
    # test writes them; the names carry each owner's real hash (the test's names do not, and
    # dns-operator never checks them: test_difference_a_txt_whose_hash_is_not_its_owners)
    def txt(host: str, value: str) -> RecordSet:
        labels = registry.decode(value)
        assert labels is not None
        return RecordSet(registry.txt_name(labels.owner, "CNAME", host), "TXT", 300, (value,))

    shared, other = "shared-host.example.org", "other-host.example.org"
    h = "heritage=external-dns,external-dns/"
    zone = [
        txt(shared, f'"{h}owner=cluster1,{h}version=1,{h}group=geo-us,{h}target=us-east-1,{h}geo-code=NA"'),
        txt(shared, f'"{h}owner=cluster2,{h}version=1,{h}group=geo-us,{h}target=us-west-2,{h}geo-code=NA"'),
        txt(shared, f'"{h}owner=cluster3,{h}version=1,{h}group=geo-eu,{h}target=eu-west-1,{h}geo-code=EU"'),
        txt(shared, f'"{h}owner=cluster4,{h}version=1,{h}group=geo-eu,{h}target=eu-central-1,{h}geo-code=EU"'),
        txt(shared, f'"{h}owner=cluster5,{h}version=1,{h}group=geo-asia,{h}target=ap-southeast-1,{h}geo-code=AS"'),
        txt(shared, f'"{h}owner=cluster6,{h}version=1,{h}target=us-south-1"'),
        txt(other, f'"{h}owner=cluster7,{h}version=1,{h}group=geo-us"'),
    ]
    by_group: dict[tuple[str, str | None], set[str]] = {}
    for rec in zone:
        for entry in registry.decode_entries(rec):
            by_group.setdefault((entry.key.name, entry.labels.group), set()).add(entry.owner)
    assert by_group == {
        (shared, "geo-us"): {"cluster1", "cluster2"}, (shared, "geo-eu"): {"cluster3", "cluster4"},
        (shared, "geo-asia"): {"cluster5"}, (shared, None): {"cluster6"}, (other, "geo-us"): {"cluster7"},
    }
    cluster1 = registry.decode_entry(zone[0])
    assert cluster1 is not None and dict(cluster1.labels.extra) == {"target": "us-east-1", "geo-code": "NA"}


# --- the registry writer: txt_test.go testTXTRegistryApplyChanges*, TestGenerateTXT


def test_writer_copies_the_set_identifier_and_routing() -> None:
    # testTXTRegistryApplyChangesWithPrefix EP2: the TXT of a record with set id test-set-3
    # carries it (generateTXTRecord: WithSetIdentifier, ProviderSpecific copied)
    data = RecordSet(f"multiple.{Z}", "CNAME", 60, ("lb3.loadbalancer.com",), set_id="test-set-3", weight=120)
    txt, _ = registry.ownership_record(data, OwnerLabels("owner1"))
    assert txt.key == RecordKey(_prod(f"txt.2tqs20a7-cname-multiple.{Z}", "txt."), "TXT", "test-set-3")
    assert (txt.weight, txt.geo) == (120, None)


def test_writer_deletes_only_its_own_txt_of_a_shared_record() -> None:
    # testTXTRegistryApplyChangesMultipleOwners: owner1 leaves a CNAME owner2 keeps; the only
    # change is the delete of owner1's TXT (owner2's TXT carries owner2's real hash here)
    zone = planner_kit.Zone([
        RecordSet(f"foobar.{planner_kit.ZONE}", "CNAME", 300, ("foobar.loadbalancer.com",)),
        RecordSet(registry.txt_name("owner1", "CNAME", f"foobar.{planner_kit.ZONE}"), "TXT", 300, (_q(GENERATED),)),
        RecordSet(registry.txt_name("owner2", "CNAME", f"foobar.{planner_kit.ZONE}"), "TXT", 300,
                  ("heritage=external-dns,external-dns/owner=owner2,external-dns/version=1",)),
    ])
    p = zone.plan("owner1", [])
    assert [(c.action, c.old.name if c.old else None) for c in p.changes] == [
        (Action.DELETE, registry.txt_name("owner1", "CNAME", f"foobar.{planner_kit.ZONE}"))]


def test_leaving_never_empties_a_record_another_owner_holds() -> None:
    # internal/external-dns/plan/plan.go calculateDesired: a leaving owner's previous targets
    # are removed "but not if we are going to be left with none"; here owner2 is a dns-operator
    # cluster (no targets label: it claims the record) publishing the same address as owner1
    zone = planner_kit.Zone([
        planner_kit.a("foo", "1.1.1.1"),
        RecordSet(registry.txt_name("owner2", "A", f"foo.{planner_kit.ZONE}"), "TXT", 300,
                  ("heritage=external-dns,external-dns/owner=owner2,external-dns/version=1",)),
    ])
    zone.sync("owner1", [planner_kit.a("foo", "1.1.1.1")])
    zone.sync("owner1", [])
    assert zone.data()[(f"foo.{planner_kit.ZONE}", "A", "")] == ("1.1.1.1",)


# --- the endpoints builder: pkg/builder/endpoints_test.go (suite_test.go: HostOne = test.<domain>,
# HostWildcard = *.<domain>)

DOMAIN = "example.com"
IP1, IP2 = "127.0.0.1", "127.0.0.2"
ID = "fbf71c44-6b37-4962-ace6-801912e769be"
ID_HASH, TARGET_HASH = "2q5hyv", "a8xcra"
ZONE = Zone(name="example-com", domain=DOMAIN, provider=ProviderRef("memory"))
ZONE_TTLS = PolicyTTLs()  # the zone's: simple 60, loadbalanced 300, inner 60 (dns-operator's defaults)


def _build(host: str, addresses: tuple[str, ...], *, geo: str | None = "IE", default_geo: str | None = None,
           strategy: Strategy = Strategy.LOADBALANCED, ttl: PolicyTTLs = ZONE_TTLS,
           exclude: tuple[str, ...] = ()) -> set[tuple[object, ...]]:
    gateway = Gateway("TestName", "TestNamespace", addresses, (Listener(host),))
    cluster = Cluster(name="c", id=ID, geo=geo, gateways=(gateway,))
    policy = DNSPolicy(name="p", target=TargetRef(gateway="TestName"), strategy=strategy, default_weight=120,
                       default_geo=default_geo or geo, ttl=ttl, exclude_addresses=exclude)
    state = DesiredState(zones=(ZONE,), clusters=(cluster,), policies=(policy,))
    return {(r.name, r.type, r.ttl, r.set_id, r.weight, r.geo, tuple(sorted(r.values)))
            for r in builder.desired_for_zone(state, cluster, ZONE)}


def _traversable(records: set[tuple[object, ...]], host: str, destinations: set[str]) -> bool:
    """suite_test.go EndpointsTraversable: every destination is reached from ``host``."""
    reached: set[str] = set()
    todo, seen = [host], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for rec in records:
            if rec[0] == name:
                values = rec[6]
                assert isinstance(values, tuple)
                (todo.extend if rec[1] == "CNAME" else reached.update)(values)
    return destinations <= reached


def test_builder_simple_sets_the_default_ttl() -> None:
    # "Should set default TTL": SetDefaultTTL(123)
    got = _build("test." + DOMAIN, (IP1, IP2), strategy=Strategy.SIMPLE, ttl=PolicyTTLs(simple=123))
    assert {(r[0], r[2]) for r in got} == {("test." + DOMAIN, 123)}


@pytest.mark.parametrize("host", ["test." + DOMAIN, "*." + DOMAIN])  # "Should generate (wildcard) endpoint"
def test_builder_simple(host: str) -> None:
    assert _build(host, (IP1, IP2), strategy=Strategy.SIMPLE) == {(host, "A", 60, "", None, None, (IP1, IP2))}


def test_builder_simple_hostname() -> None:
    # "Should generate hostname endpoint"
    assert _build("test." + DOMAIN, ("pat.the.cat",), strategy=Strategy.SIMPLE) == {
        ("test." + DOMAIN, "CNAME", 60, "", None, None, ("pat.the.cat",))}


def _lb(host: str, geo: str, default: bool, inner: int = 60, outer: int = 300) -> set[tuple[object, ...]]:
    """The endpoints "Load-balanced routing strategy" expects (weight 120 as ProviderSpecific
    weight, geo as SetIdentifier and ProviderSpecific geo-code)."""
    bare = host.removeprefix("*.")
    klb = f"klb.{bare}"
    cluster = f"{ID_HASH}-{TARGET_HASH}.{klb}"
    geo_name = f"{geo.lower()}.{klb}"
    out: set[tuple[object, ...]] = {
        (cluster, "A", inner, "", None, None, (IP1, IP2)),
        (geo_name, "CNAME", inner, cluster, 120, None, (cluster,)),
        (klb, "CNAME", outer, geo, None, geo, (geo_name,)),
        (host, "CNAME", outer, "", None, None, (klb,)),
    }
    if default:
        out.add((klb, "CNAME", outer, "default", None, "*", (geo_name,)))
    return out


@pytest.mark.parametrize("host", ["test." + DOMAIN, "*." + DOMAIN])
def test_builder_loadbalanced_default_geo(host: str) -> None:
    # "With default geo": "Should generate endpoints" / "Should generate wildcard endpoints"
    got = _build(host, (IP1, IP2), geo="IE")
    assert got == _lb(host, "IE", default=True)
    assert _traversable(got, host, {IP1, IP2})


def test_builder_loadbalanced_ttls() -> None:
    # "Should set default TTl and loadbalancing TTL": SetDefaultTTL(123), SetDefaultLoadBalancedTTL(234)
    got = _build("test." + DOMAIN, (IP1, IP2), geo="IE", ttl=PolicyTTLs(loadbalanced=234, loadbalanced_inner=123))
    assert got == _lb("test." + DOMAIN, "IE", default=True, inner=123, outer=234)


@pytest.mark.parametrize("host", ["test." + DOMAIN, "*." + DOMAIN])
def test_builder_loadbalanced_non_default_geo(host: str) -> None:
    # "With non-default geo" (geo CAD, IsDefaultGeo false)
    got = _build(host, (IP1, IP2), geo="CAD", default_geo="IE")
    assert got == _lb(host, "CAD", default=False)
    assert _traversable(got, host, {IP1, IP2})


def test_builder_loadbalanced_hostname_targets() -> None:
    # pkg/builder/endpoints.go getLoadBalancedEndpoints (no test literal): each host name is a
    # weighted CNAME of its own, its set identifier the host name, and there is no A record
    host, klb = "test." + DOMAIN, "klb.test." + DOMAIN
    assert _build(host, ("pat.the.cat",), geo="IE") == {
        ("ie." + klb, "CNAME", 60, "pat.the.cat", 120, None, ("pat.the.cat",)),
        (klb, "CNAME", 300, "IE", None, "IE", ("ie." + klb,)),
        (klb, "CNAME", 300, "default", None, "*", ("ie." + klb,)),
        (host, "CNAME", 300, "", None, None, (klb,)),
    }


def test_builder_excluded_address_is_left_out() -> None:
    # dns-operator builds from the addresses it is given; Kuadrant drops excluded ones first:
    # with 127.0.0.2 excluded the endpoints are those of the gateway with 127.0.0.1 alone
    got = _build("test." + DOMAIN, (IP1, IP2), geo="IE", exclude=(IP2,))
    lone = {(r[0], r[1], r[2], r[3], r[4], r[5], (IP1,) if r[1] == "A" else r[6]) for r in _lb(
        "test." + DOMAIN, "IE", default=True)}
    assert got == lone


@pytest.mark.parametrize("strategy", [Strategy.SIMPLE, Strategy.LOADBALANCED])
@pytest.mark.parametrize("exclude", [(), (IP1, IP2), ("127.0.0.0/8",)])
def test_builder_no_address_no_endpoints(strategy: Strategy, exclude: tuple[str, ...]) -> None:
    # "Should return no endpoints if missing addresses" (WithLoadBalancingFor(id, 120, "IE", true)),
    # and every address excluded
    addresses = () if not exclude else (IP1, IP2)
    assert _build("test." + DOMAIN, addresses, strategy=strategy, exclude=exclude) == set()


# --- the active-groups record: cmd/plugin/failover/shared_test.go, internal/controller


@pytest.mark.parametrize(("given", "literal"), [
    (["group1"], '"version=1;groups=group1"'),  # "generates valid record with one group"
    (["group1", "group2"], '"version=1;groups=group1&&group2"'),  # "... with multiple groups"
    ([], '"version=1"'),  # "... with no groups"
    (["group2", "group2", "group1", "group2", "group3", "group1", "group1"],
     '"version=1;groups=group1&&group2&&group3"'),  # unsorted and duplicate groups
    ([""], '"version=1"'),  # an empty group name
])
def test_active_groups_record_written(given: list[str], literal: str) -> None:
    # TestGenerateGroupTXTRecord: name kuadrant-active-groups.cat.com, TTL GroupRecordTTL = 60
    assert groups.kuadrant_name("cat.com") == "kuadrant-active-groups.cat.com"
    assert groups.kuadrant_value(given) == _q(literal)
    git = ActiveGroups("groups", "cat-com", 1, tuple(given))
    state = groups.read_zone_groups(ZoneSnapshot("cat.com", ()), "cat.com")
    written = {c.new.name: c.new for c in groups.decide(git, state, "cat.com").write if c.new}
    record = written["kuadrant-active-groups.cat.com"]
    assert (record.ttl, record.values) == (60, (_q(literal),))


@pytest.mark.parametrize(("value", "active"), [
    ('"version=1;groups=group1"', ("group1",)),  # TestGetActiveGroupsFromTarget "gets a single group"
    ('"version=1;groups=group1&&group2&&group3"', ("group1", "group2", "group3")),  # "gets multiple groups"
    ('"version=1"', ()),  # "gets no groups"
    ("version=1;groups=", ()),  # what gitdns wrote for an empty list before
    ("groups=g1&&g2", ("g1", "g2")),  # internal/controller/helper_test.go setActiveGroupsInDNS
    ("groups=group1&&group2;version=1", ("group1", "group2")),  # dnsrecord_groups.go, its documented form
])
def test_active_groups_record_read(value: str, active: tuple[str, ...]) -> None:
    record = RecordSet("kuadrant-active-groups.cat.com", "TXT", 60, (value,))
    assert groups.read_zone_groups(ZoneSnapshot("cat.com", (record,)), "cat.com").kuadrant == active


def test_active_groups_record_of_another_version_is_read_as_the_controller_reads_it() -> None:
    # TestGetActiveGroupsFromTarget "reports legacy version": the CLI ignores it; the controller
    # (getActiveGroups, internal/controller/dnsrecord_groups.go) reads the groups key whatever
    # the version, and so does gitdns
    record = RecordSet("kuadrant-active-groups.cat.com", "TXT", 60, ('"version=legacyVersion;groups=group1"',))
    assert groups.read_zone_groups(ZoneSnapshot("cat.com", (record,)), "cat.com").kuadrant == ("group1",)


def test_an_empty_list_read_either_way_leaves_the_record_alone() -> None:
    for value in ("version=1", "version=1;groups="):
        record = RecordSet("kuadrant-active-groups.cat.com", "TXT", 60, (value,))
        mine = RecordSet("gitdns-active-groups.cat.com", "TXT", 60, (groups.gitdns_value(1, ()),))
        state = groups.read_zone_groups(ZoneSnapshot("cat.com", (record, mine)), "cat.com")
        assert groups.decide(ActiveGroups("groups", "cat-com", 1, ()), state, "cat.com").write == ()


# --- owner kinds on a shared zone (`gitdns owners`)


def test_owner_kinds_of_a_shared_zone() -> None:
    h = "heritage=external-dns,external-dns/"
    foo = f"foo.{Z}"
    zone = (
        RecordSet(foo, "A", 60, ("1.1.1.1", "2.2.2.2", "3.3.3.3")),
        RecordSet(registry.txt_name("owner1", "A", foo), "TXT", 60, (_q(GENERATED),)),  # dns-operator
        RecordSet(f"kuadrant-a-{foo}", "TXT", 60, (f"{h}owner=owner2&&owner3",)),  # legacy, joint
        RecordSet(registry.txt_name("gd-uid", "A", foo), "TXT", 60,
                  (f"{h}owner=gd-uid,{h}rev=1700000000.abcdef0,{h}targets=3.3.3.3,{h}version=1",)),  # gitdns
        RecordSet(registry.txt_name("git-uid", "A", foo), "TXT", 60, (f"{h}owner=git-uid,{h}version=1",)),
        RecordSet(f"kuadrant-aaaa-{foo}", "TXT", 60, (f"{h}owner=odd,{h}version=2",)),  # another version
    )
    rows = {r.owner: r for r in owner_rows(ZoneSnapshot(Z, zone), known={"git-uid"})}
    assert {o: r.kind for o, r in rows.items()} == {
        "owner1": OwnerKind.DNS_OPERATOR, "owner2": OwnerKind.LEGACY, "owner3": OwnerKind.LEGACY,
        "gd-uid": OwnerKind.GITDNS, "git-uid": OwnerKind.GITDNS, "odd": OwnerKind.UNKNOWN}
    assert rows["owner1"].keys == (RecordKey(foo, "A"),) and rows["odd"].keys == () and rows["odd"].orphans == 1


# --- where gitdns differs on purpose (docs/records.md, "Differences from dns-operator")


def test_difference_apex_txt_name() -> None:
    # dns-operator's mapper (ToTXTName) puts the TXT of a record at the zone apex outside the zone
    dns_operator = "kuadrant-" + names.short_hash("owner1", 8) + "-a-" + DOMAIN
    assert not dns_operator.endswith("." + DOMAIN)
    assert registry.txt_name("owner1", "A", DOMAIN) == dns_operator  # no zone given: the same name
    assert registry.txt_name("owner1", "A", DOMAIN, zone=DOMAIN) == "kuadrant-2tqs20a7-a." + DOMAIN


def test_difference_empty_active_groups() -> None:
    # dns-operator: an empty list activates only ungrouped clusters (GroupAdapter.IsActive);
    # gitdns (failover-groups design): absent or empty means every group is active
    decision = groups.decide(ActiveGroups("groups", "cat-com", 1, ()),
                             groups.read_zone_groups(ZoneSnapshot("cat.com", ()), "cat.com"), "cat.com")
    assert decision.active == frozenset()
    assert groups.is_active("site-a", decision.active) and groups.is_active(None, decision.active)
    assert {c.new.values for c in decision.write if c.new and c.new.name.startswith("kuadrant-")} == {("version=1",)}


def test_difference_a_txt_whose_hash_is_not_its_owners() -> None:
    # txt_test.go testTXTRegistryRecordsPrefixed EP10 and group_test.go name owners with hashes
    # that are not theirs ("b1e3677c" for owner2, "c2f4788d" for owner3); dns-operator never
    # checks the hash, gitdns reads such a TXT as no ownership (a copied or forged TXT claims nothing)
    assert names.short_hash("owner2", 8) != "b1e3677c"
    tar = _ep(_prod(f"TxT-b1e3677c-cname-tar.{Z}", "TxT-"), "TXT",
              '"heritage=external-dns,external-dns/owner=owner2,external-dns/version=1,'
              'external-dns/resource=ingress/default/my-ingress"')
    assert registry.decode_entries(tar) == ()
    right = dataclasses.replace(tar, name=registry.txt_name("owner2", "CNAME", f"tar.{Z}"))
    assert [e.owner for e in registry.decode_entries(right)] == ["owner2"]


@pytest.mark.parametrize(("literal", "prefix"), [
    ("foo-example.com", "foo-"),  # TestToEndpointsName legacy "V1": no type, the owner of any type
    ("foo-ptr-zone.example.com", "foo-"),  # TestExtractRecordTypeDefaultPosition: "ptr" is no known type
    ("foo-11111111-test.example.com", "foo-"),  # TestDropPrefix: "not a format we support"
])
def test_difference_typeless_legacy_names_are_not_read(literal: str, prefix: str) -> None:
    # dns-operator reads these as legacy TXT of no record type (any type at the name); gitdns
    # does not read them as ownership: the records they name look foreign (never changed)
    assert registry.parse_txt_name(_prod(literal, prefix)) is None


def test_difference_txt_ttl() -> None:
    # TestGenerateTXT: dns-operator's TXT has no TTL of its own (the provider's default); gitdns's
    # copies its data record's TTL
    data = RecordSet(f"foo.{Z}", "CNAME", 77, ("new-foo.loadbalancer.com",))
    txt, _ = registry.ownership_record(data, OwnerLabels("owner1"))
    assert (txt.name, txt.ttl, txt.values) == (_prod(f"2tqs20a7-cname-foo.{Z}", ""), 77, (_q(GENERATED),))


def test_difference_targets_label_of_ungrouped_owners() -> None:
    # dns-operator writes `targets` only for grouped clusters (GroupRegistry.AdjustEndpoints);
    # gitdns writes it for every owner, so a co-owner leaving takes only its own values
    value, fitted = registry.encode(OwnerLabels("owner1", targets=("1.1.1.1",)))
    assert fitted and value == _q(GENERATED).replace(",external-dns/version", ",external-dns/targets=1.1.1.1"
                                                     ",external-dns/version")


def test_difference_ipv6_and_mixed_addresses() -> None:
    # pkg/builder/endpoints.go targetsFromAddresses/getSimpleEndpoints: every IP address goes into
    # one A endpoint, host names into a CNAME beside it; gitdns splits A and AAAA, and a gateway
    # with addresses publishes no CNAME (a CNAME cannot share its name)
    got = _build("test." + DOMAIN, (IP1, "2001:db8::1", "pat.the.cat"), strategy=Strategy.SIMPLE)
    assert got == {("test." + DOMAIN, "A", 60, "", None, None, (IP1,)),
                   ("test." + DOMAIN, "AAAA", 60, "", None, None, ("2001:db8::1",))}


def test_difference_record_types_beyond_dns_operators() -> None:
    # dns-operator's mappers know A, AAAA, CNAME and NS (getSupportedTypes); the TXT gitdns writes
    # for an MX, TXT, SRV or CAA record is read by dns-operator as the owner of no known type
    assert registry.txt_name("owner1", "MX", f"mail.{Z}") == f"kuadrant-2tqs20a7-mx-mail.{Z}"
    assert registry.parse_txt_name(f"kuadrant-2tqs20a7-mx-mail.{Z}") == ("2tqs20a7", "MX", f"mail.{Z}")
