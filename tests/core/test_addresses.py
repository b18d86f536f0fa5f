"""Addresses, networks and host names are what they claim to be (`gitdns.core.addresses`)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitdns.core.addresses import address_error, host_error, ip_error, network_error


@given(st.ip_addresses())
def test_every_ip_address_is_an_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    assert address_error(str(ip)) is None and ip_error(str(ip), ip.version) is None
    assert ip_error(str(ip), 10 - ip.version) is not None  # the other family


@given(st.lists(st.integers(0, 999), min_size=1, max_size=6))
def test_digits_and_dots_are_an_ipv4_address_or_nothing(octets: list[int]) -> None:
    text = ".".join(map(str, octets))
    is_ipv4 = len(octets) == 4 and all(o <= 255 for o in octets)
    assert (address_error(text) is None) == is_ipv4
    assert host_error(text) is not None  # never a host name


@pytest.mark.parametrize(("text", "says"), [
    ("127.0.0.300", "octet 300 (> 255) not permitted"),
    ("10.1.2", "expected 4 octets"),
    ("010.0.0.1", "leading zeros"),
    ("2001:db8::zz", "not an IPv6 address"),
    ("fe80::1%eth0", "zone index"),
    ("lb..example.net", "an empty label"),
    ("-lb.example.net", "the label '-lb'"),
    ("lb.example.123", "all digits"),
    ("a" * 64 + ".example.net", "labels are 1 to 63"),
])
def test_what_is_wrong_is_said(text: str, says: str) -> None:
    found = address_error(text)
    assert found is not None and says in found and repr(text) in found


@pytest.mark.parametrize("text", ["lb.example.net", "LB-2.example.net.", "host", "_srv.example.com",
                                  "*.apps.example.com", "2.0.192.in-addr.arpa"])
def test_host_names(text: str) -> None:
    assert host_error(text) is None


@pytest.mark.parametrize(("text", "ok"), [
    ("10.0.0.0/8", True), ("10.0.0.1/8", True), ("192.0.2.7", True), ("2001:db8::/32", True), ("::/0", True),
    ("10.0.0.0/33", False), ("2001:db8::/129", False), ("10.0.0.0/", False), ("10.0.0.0/x", False),
    ("192.0.2.256/24", False), ("example.com", False),
])
def test_networks(text: str, ok: bool) -> None:
    assert (network_error(text) is None) == ok
