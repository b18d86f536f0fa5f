"""gitdns.core.reach: which addresses a probe may connect to, given the operator's ranges, whether a
node's endpoint is its own address, and which Secrets the repository may name.

Table-driven for every class and encoding, then Hypothesis over addresses: every address of a
forbidden class is refused unless an allowed range covers it (or the IPv4 address it carries),
whatever its encoding; ordinary addresses are never refused.
"""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitdns.core.reach import (
    PROBE_FLAG,
    ProbeReach,
    address_class,
    embedded_ipv4,
    own_address_refusal,
    parse_ranges,
    probe_refusal,
    secret_listed,
    secret_refusal,
)

# every forbidden network, as the module documents it (a copy: the table is the specification)
FORBIDDEN = {
    "unspecified": ["0.0.0.0/8", "::/128"],
    "loopback": ["127.0.0.0/8", "::1/128"],
    "cloud metadata": ["169.254.169.254/32", "169.254.170.2/32", "169.254.0.23/32", "100.100.100.200/32",
                       "192.0.0.192/32", "168.63.129.16/32", "fd00:ec2::/64", "fd20:ce::/64"],
    "link-local": ["169.254.0.0/16", "fe80::/10"],
    "multicast": ["224.0.0.0/4", "ff00::/8"],
    "broadcast": ["255.255.255.255/32"],
    "reserved": ["240.0.0.0/4"],
}
Net = ipaddress.IPv4Network | ipaddress.IPv6Network
V4_NETS: list[Net] = [ipaddress.IPv4Network(n) for nets in FORBIDDEN.values() for n in nets if ":" not in n]
V6_NETS: list[Net] = [ipaddress.IPv6Network(n) for nets in FORBIDDEN.values() for n in nets if ":" in n]


@pytest.mark.parametrize(("address", "kind"), [
    # IPv4
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"), ("169.254.169.254", "cloud metadata"), ("169.254.170.2", "cloud metadata"),
    ("169.254.0.23", "cloud metadata"), ("100.100.100.200", "cloud metadata"), ("192.0.0.192", "cloud metadata"),
    ("168.63.129.16", "cloud metadata"), ("169.254.1.1", "link-local"), ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"), ("255.255.255.255", "broadcast"), ("240.0.0.1", "reserved"),
    # IPv6
    ("::1", "loopback"), ("::", "unspecified"), ("fd00:ec2::254", "cloud metadata"),
    ("fd00:ec2::23", "cloud metadata"), ("fd20:ce::254", "cloud metadata"), ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"), ("ff02::1", "multicast"),
    # IPv6 carrying a forbidden IPv4 address
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:7f00:1", "loopback"), ("::ffff:169.254.169.254", "cloud metadata"),
    ("::ffff:0.0.0.0", "unspecified"), ("::127.0.0.1", "loopback"), ("::ffff:0:127.0.0.1", "loopback"),
    ("64:ff9b::169.254.169.254", "cloud metadata"), ("64:ff9b::7f00:1", "loopback"),
    ("2002:7f00:1::", "loopback"), ("2002:a9fe:a9fe::1", "cloud metadata"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1 (obfuscated)
])
def test_every_forbidden_class_is_refused_by_default(address: str, kind: str) -> None:
    why = probe_refusal(address)
    assert f"{kind} address" in why, why
    refusal = ProbeReach().refusal(address)
    assert refusal.startswith("not probed: ") and "--probe-allow-ranges" in refusal
    assert len(refusal) <= 160  # a target's last error keeps 160 characters


@pytest.mark.parametrize("address", ["10.0.0.1", "192.0.2.10", "8.8.8.8", "172.16.5.4", "100.64.0.1",
                                     "169.253.255.255", "169.255.0.0", "223.255.255.255", "2001:db8::1",
                                     "2600:1f18::1", "fd00:ec3::254", "fd12:3456::1", "::ffff:10.0.0.1",
                                     "64:ff9b::8.8.8.8", "2002:c000:20a::1"])
def test_ordinary_addresses_are_probed(address: str) -> None:
    assert probe_refusal(address) == "" and ProbeReach().refusal(address) == ""


@pytest.mark.parametrize("text", ["127.1", "0x7f000001", "2130706433", "017700000001", "0177.0.0.1", "localhost",
                                  "metadata.google.internal", "127.0.0.1.", " 127.0.0.1", "[::1]", ""])
def test_what_is_not_an_address_literal_is_refused_without_a_range_to_allow_it(text: str) -> None:
    """Other spellings of an address (inet_aton's) are no IP literal here: the prober resolves a
    host name and judges what it resolved to, and never connects to the text itself."""
    why = probe_refusal(text, parse_ranges("0.0.0.0/0,::/0"))
    assert "is not an IP address" in why
    assert "--probe-allow-ranges" not in ProbeReach.parse("0.0.0.0/0").refusal(text)


@pytest.mark.parametrize(("address", "ranges", "allowed"), [
    ("127.0.0.1", "127.0.0.0/8", True),
    ("127.0.0.1", "127.0.0.2/32", False),
    ("::ffff:127.0.0.1", "127.0.0.0/8", True),  # the IPv4 it carries is covered
    ("::ffff:127.0.0.1", "::ffff:0:0/96", True),  # or the IPv6 form itself
    ("::ffff:127.0.0.1", "::1/128", False),
    ("169.254.169.254", "169.254.0.0/16", True),  # a range covers what it holds: allow narrow ranges
    ("169.254.169.254", "10.0.0.0/8,169.254.169.254", True),
    ("fe80::1%eth0", "fe80::/10", True),
    ("fd00:ec2::254", "fd00::/8", True),
    ("0.0.0.0", "127.0.0.0/8", False),
    ("224.0.0.1", "224.0.0.0/24", True),
])
def test_an_operator_range_allows_what_it_covers_and_nothing_else(address: str, ranges: str, allowed: bool) -> None:
    reach = ProbeReach.parse(ranges)
    assert (reach.refusal(address) == "") is allowed


@pytest.mark.parametrize("entry", ["10.1.2.3/8", "not-a-net", "127.0.0.0/33", "fe80::/10%eth0", "10.0.0.0/8/1"])
def test_a_bad_range_is_refused_naming_the_setting(entry: str) -> None:
    with pytest.raises(ValueError, match="--probe-allow-ranges"):
        parse_ranges(f"127.0.0.0/8, {entry}")
    with pytest.raises(ValueError, match="probeAllowRanges"):
        ProbeReach.parse([entry], "--probe-allow-ranges (GITDNS_PROBE_ALLOW_RANGES, probeAllowRanges in ...)")


def test_ranges_are_comma_or_space_separated_or_a_list() -> None:
    expected = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
    assert parse_ranges("127.0.0.0/8,::1") == parse_ranges(" 127.0.0.0/8  ::1 ") == parse_ranges(["127.0.0.0/8",
                                                                                                   "::1"]) == expected
    assert parse_ranges("") == parse_ranges(None) == ()
    assert PROBE_FLAG == "--probe-allow-ranges (GITDNS_PROBE_ALLOW_RANGES)"


# --- Hypothesis ---------------------------------------------------------------------------------------


def _in(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> st.SearchStrategy[int]:
    return st.integers(int(net.network_address), int(net.broadcast_address))


forbidden_v4 = st.sampled_from(V4_NETS).flatmap(_in).map(ipaddress.IPv4Address)
forbidden_v6 = st.sampled_from(V6_NETS).flatmap(_in).map(ipaddress.IPv6Address)
networks = st.one_of(
    st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32)).map(
        lambda t: ipaddress.IPv4Network((t[0] >> (32 - t[1]) << (32 - t[1]) if t[1] else 0, t[1]))),
    st.tuples(st.integers(0, 2**128 - 1), st.integers(0, 128)).map(
        lambda t: ipaddress.IPv6Network((t[0] >> (128 - t[1]) << (128 - t[1]) if t[1] else 0, t[1]))))


def encodings(v4: ipaddress.IPv4Address) -> list[str]:
    """``v4`` and the IPv6 spellings that carry it."""
    n = int(v4)
    return [str(v4), f"::ffff:{v4}", str(ipaddress.IPv6Address((0xFFFF << 32) | n)),  # mapped
            str(ipaddress.IPv6Address(n)) if n > 1 else str(v4),  # compatible
            str(ipaddress.IPv6Address((0xFFFF << 48) | n)),  # translated (SIIT): ::ffff:0:a.b.c.d
            str(ipaddress.IPv6Address((0x64FF9B << 96) | n)),  # NAT64 well-known prefix
            str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80))),  # 6to4
            str(ipaddress.IPv6Address((0x20010000 << 96) | (~n & 0xFFFFFFFF)))]  # Teredo client (obfuscated)


def allowed_by(ranges: list[ipaddress.IPv4Network | ipaddress.IPv6Network], text: str) -> bool:
    """The rule, restated: every form in a forbidden network (the address, an IPv4 address it
    carries) is held by a range, or the whole address is."""
    address = ipaddress.ip_address(text.split("%")[0])

    def held(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return any(a.version == n.version and a in n for n in ranges)

    forms = [address, *embedded_ipv4(address)]
    bad = [f for f in forms if any(f.version == n.version and f in n for n in (*V4_NETS, *V6_NETS))]
    return all(held(f) or held(address) for f in bad)


@settings(max_examples=400, deadline=None)
@given(forbidden_v4, st.lists(networks, max_size=3))
def test_every_forbidden_ipv4_in_every_encoding_is_refused_unless_a_range_covers_it(
        v4: ipaddress.IPv4Address, ranges: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
    for text in encodings(v4):
        assert (probe_refusal(text, ranges) == "") == allowed_by(ranges, text), (text, ranges)
        assert probe_refusal(text) != "", text


@settings(max_examples=400, deadline=None)
@given(forbidden_v6, st.lists(networks, max_size=3))
def test_every_forbidden_ipv6_is_refused_unless_a_range_covers_it(
        v6: ipaddress.IPv6Address, ranges: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
    assert (probe_refusal(str(v6), ranges) == "") == allowed_by(ranges, str(v6))
    assert probe_refusal(str(v6)) != ""


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address),
                 st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)))
def test_an_address_is_refused_exactly_when_it_or_what_it_carries_is_in_a_forbidden_network(
        address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    forms = [address, *embedded_ipv4(address)]
    expected = any(f.version == n.version and f in n for f in forms for n in (*V4_NETS, *V6_NETS))
    assert (probe_refusal(str(address)) != "") is expected
    assert (address_class(address) is not None) is any(address.version == n.version and address in n
                                                       for n in (*V4_NETS, *V6_NETS))


# --- a node's own address ------------------------------------------------------------------------------


@pytest.mark.parametrize(("ip", "host", "own"), [
    ("10.0.0.1", "10.0.0.1", True),
    ("2001:db8::1", "2001:db8::1", True),
    ("2001:db8::1", "2001:DB8:0::1", True),  # the same address, written otherwise
    ("10.0.0.1", "10.0.0.2", False),
    ("10.0.0.1", "127.0.0.1", False),
    ("10.0.0.1", "169.254.169.254", False),
    ("10.0.0.1", "::ffff:10.0.0.1", False),  # another family: not the node's ip as written
    ("10.0.0.1", "node-1.example.com", False),  # a host name: resolved elsewhere, never the node's ip
    ("10.0.0.1", "010.0.0.1", False),
    ("fe80::1", "fe80::1%eth0", False),
    ("10.0.0.1", "", False),
])
def test_a_nodes_endpoint_must_be_its_own_ip(ip: str, host: str, own: bool) -> None:
    why = own_address_refusal(ip, host)
    assert (why == "") is own
    if not own:
        assert "is not the node's ip" in why


# --- Secrets -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "namespace", "listed", "ok"), [
    ("aws", "gitdns-system", {"aws"}, True),
    ("aws", "gitdns-system", {"gitdns-system/aws"}, True),
    ("aws", "other", {"aws"}, False),  # a bare name is the daemon's own namespace only
    ("aws", "other", {"other/aws"}, True),
    ("gitdns-git-ssh", "gitdns-system", {"aws"}, False),
    ("aws", "gitdns-system", set(), False),
    ("", "gitdns-system", {""}, False),
    ("a/b", "gitdns-system", {"a/b"}, False),
])
def test_a_secret_is_listed_by_name_in_its_namespace(name: str, namespace: str, listed: set[str], ok: bool) -> None:
    assert secret_listed(name, namespace, "gitdns-system", listed) is ok
    why = secret_refusal(name, listed, setting="--x-secrets (GITDNS_X_SECRETS)", what="field",
                         namespace=namespace, own_namespace="gitdns-system")
    assert (why == "") is ok
    if not ok:
        assert why.startswith("field: ") and "--x-secrets (GITDNS_X_SECRETS)" in why and "nothing was read" in why


def test_a_refusal_quotes_the_name_safely() -> None:
    why = secret_refusal("evil\nname\x1b[31m", [], setting="--s", what="healthCheck.headersSecret")
    assert "\n" not in why and "\x1b" not in why
