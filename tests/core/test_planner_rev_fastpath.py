"""`_same_but_rev` compares ownership TXT text with the rev label cut out before it decodes
labels; both ways must agree (a rev-only difference is not a rewrite, anything else is)."""

from __future__ import annotations

from gitdns.core.plan.txt import _same_but_rev
from gitdns.core.records import RecordSet

NAME = "kuadrant-27t7n3l6-a-www.example.com"
OWNER = "external-dns/owner=0b7e4a52-5c1d-4f7e-9a5e-000000000001"


def txt(value: str, ttl: int = 300) -> RecordSet:
    return RecordSet(NAME, "TXT", ttl, (value,))


def test_rev_only_difference_is_the_same() -> None:
    old = txt(f"heritage=external-dns,{OWNER},external-dns/rev=100.aaaaaaa,external-dns/targets=192.0.2.1,"
              "external-dns/version=1")
    new = txt(f"heritage=external-dns,{OWNER},external-dns/rev=200.bbbbbbb,external-dns/targets=192.0.2.1,"
              "external-dns/version=1")
    assert _same_but_rev(old, new) and _same_but_rev(new, old)
    assert _same_but_rev(old, txt(f"heritage=external-dns,{OWNER},external-dns/targets=192.0.2.1,"
                                  "external-dns/version=1"))


def test_other_differences_are_not() -> None:
    old = txt(f"heritage=external-dns,{OWNER},external-dns/rev=100.aaaaaaa,external-dns/targets=192.0.2.1,"
              "external-dns/version=1")
    assert not _same_but_rev(old, txt(old.values[0].replace("192.0.2.1", "192.0.2.2")))
    assert not _same_but_rev(old, txt(old.values[0], ttl=60))
    assert not _same_but_rev(old, txt("not an ownership value"))


def test_labels_in_another_order_fall_back_to_decoding() -> None:
    old = txt(f"heritage=external-dns,external-dns/version=1,external-dns/targets=192.0.2.1,{OWNER},"
              "external-dns/rev=100.aaaaaaa")
    new = txt(f"heritage=external-dns,{OWNER},external-dns/rev=200.bbbbbbb,external-dns/targets=192.0.2.1,"
              "external-dns/version=1")
    assert _same_but_rev(old, new)
