"""Ownership TXT codec: Kuadrant-compatible names and values."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gitdns.core import registry
from gitdns.core.records import RecordKey, RecordSet
from gitdns.core.registry import OwnerLabels

owner_ids = st.from_regex(r"[a-z0-9][a-z0-9-]{0,35}", fullmatch=True)
groups = st.none() | st.from_regex(r"[a-z0-9-]{1,16}", fullmatch=True)
ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
hostnames = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){1,3}", fullmatch=True)
targets = st.none() | st.lists(ipv4 | hostnames, min_size=1, max_size=40, unique=True).map(
    lambda v: tuple(sorted(v)))
revs = st.none() | st.builds(lambda t, s: f"{t}.{s}", st.integers(0, 2**40), st.from_regex(r"[0-9a-f]{7}",
                                                                                        fullmatch=True))


def test_value_heritage_first_then_sorted_keys() -> None:
    value, fitted = registry.encode(OwnerLabels("cluster-a-uid", group="site-a", rev="1700000000.abcdef0",
                                                targets=("1.1.1.1", "2.2.2.2")))
    assert fitted
    assert value == (
        "heritage=external-dns,external-dns/group=site-a,external-dns/owner=cluster-a-uid,"
        "external-dns/rev=1700000000.abcdef0,external-dns/targets=1.1.1.1;2.2.2.2,external-dns/version=1"
    )


def test_minimal_value_matches_the_contract() -> None:
    value, _ = registry.encode(OwnerLabels("owner1"))
    assert value == "heritage=external-dns,external-dns/owner=owner1,external-dns/version=1"


def test_txt_name_uses_owner_hash_type_and_wildcard() -> None:
    assert registry.txt_name("owner1", "A", "foo.example.com") == "kuadrant-2tqs20a7-a-foo.example.com"
    assert registry.txt_name("owner1", "CNAME", "*.apps.example.com") == (
        "kuadrant-2tqs20a7-cname-wildcard.apps.example.com")
    assert registry.parse_txt_name("kuadrant-2tqs20a7-cname-wildcard.apps.example.com") == (
        "2tqs20a7", "CNAME", "*.apps.example.com")


def test_targets_dropped_when_they_do_not_fit_255_octets() -> None:
    many = tuple(f"10.0.{i // 250}.{i % 250}" for i in range(40))
    value, fitted = registry.encode(OwnerLabels("cluster-a-uid", targets=many))
    assert not fitted
    assert "targets" not in value
    assert len(value.encode()) <= 255


def test_legacy_unversioned_entry_is_read() -> None:
    txt = RecordSet("kuadrant-a-foo.example.com", "TXT", 300,
                    ('"heritage=external-dns,external-dns/owner=old-owner,external-dns/resource=x"',))
    entry = registry.decode_entry(txt)
    assert entry is not None
    assert entry.key == RecordKey("foo.example.com", "A")
    assert entry.owner == "old-owner"
    assert entry.labels.version is None
    assert entry.labels.extra == (("resource", "x"),)


def test_foreign_heritage_is_not_ownership() -> None:
    assert registry.decode("heritage=someone-else,external-dns/owner=x") is None
    assert registry.decode("v=spf1 -all") is None


def test_owner_hash_must_match_the_owner_in_the_value() -> None:
    forged = RecordSet("kuadrant-00000000-a-foo.example.com", "TXT", 60,
                       ("heritage=external-dns,external-dns/owner=owner1,external-dns/version=1",))
    assert registry.decode_entry(forged) is None


@given(owner=owner_ids, group=groups, rev=revs, tgts=targets)
def test_round_trip_and_every_value_fits_one_txt_string(
    owner: str, group: str | None, rev: str | None, tgts: tuple[str, ...] | None
) -> None:
    labels = OwnerLabels(owner, group=group, rev=rev, targets=tgts)
    value, fitted = registry.encode(labels)
    assert len(value.encode()) <= registry.MAX_TXT_STRING
    decoded = registry.decode(value)
    assert decoded is not None
    expected_targets = tgts if fitted else None
    assert decoded == OwnerLabels(owner, group=group, rev=rev, targets=expected_targets)


@given(owner=owner_ids, rtype=st.sampled_from(["A", "AAAA", "CNAME", "TXT", "MX"]), name=hostnames,
       wildcard=st.booleans())
def test_name_round_trip(owner: str, rtype: str, name: str, wildcard: bool) -> None:
    dns_name = f"*.{name}" if wildcard else name
    txt = RecordSet(registry.txt_name(owner, rtype, dns_name), "TXT", 60,
                    (registry.encode(OwnerLabels(owner))[0],), set_id="x")
    entry = registry.decode_entry(txt)
    assert entry is not None
    assert entry.key == RecordKey(dns_name, rtype, "x")
    assert entry.owner == owner


def test_apex_txt_name_stays_inside_the_zone_and_parses_back() -> None:
    name = registry.txt_name("owner1", "MX", "example.com", zone="example.com")
    assert name == "kuadrant-2tqs20a7-mx.example.com"
    assert name.endswith(".example.com")
    assert registry.parse_txt_name(name) == ("2tqs20a7", "MX", "example.com")
    assert registry.txt_name("owner1", "A", "www.example.com", zone="example.com") == (
        "kuadrant-2tqs20a7-a-www.example.com")


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF), max_size=12)
       | st.text(alphabet='abc-_.:/&,;="\\ \t\x7f\u00e9', max_size=8))
def test_label_error_refuses_exactly_the_characters_the_rule_names(text: str) -> None:
    """The one-set check (`_LABEL_SAFE`) refuses what the per-character rule refuses: printable
    ASCII without blanks and none of ``, ; = " \\ &``."""
    def allowed(ch: str) -> bool:
        return ch.isascii() and ch.isprintable() and ch != " " and ch not in ',;="\\&'
    error = registry.label_error(text)
    assert (error is None) == (bool(text) and all(allowed(ch) for ch in text))
    if error is not None and text:
        assert "contains" in error
