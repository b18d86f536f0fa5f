"""What the desired state may make a daemon reach (pure): probe addresses and Secrets.

The repository is written by whoever opens a pull request.  It *names* probe targets (a
NodePool node's ``ip`` and ``healthEndpoint``, a Cluster's gateway addresses) and Secrets
(``headersSecret``, a Zone's ``credentials.secret``); whether a name is honoured is the
operator's decision, made here from the operator's settings and nothing else.

Probe connections (`probe_refusal`, `ProbeReach`): a probe goes to the node's own address or
to the gateway's own address, and never to an address of a class below unless one of the
operator's ranges (``--probe-allow-ranges``) covers it:

=================  ================================================================================
class              addresses
=================  ================================================================================
unspecified        ``0.0.0.0/8``, ``::`` (connecting to them reaches the host itself)
loopback           ``127.0.0.0/8``, ``::1``
cloud metadata     ``169.254.169.254`` (AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle...),
                   ``169.254.170.2`` (AWS ECS), ``169.254.0.23`` (Tencent), ``100.100.100.200``
                   (Alibaba), ``192.0.0.192`` (Oracle, legacy), ``168.63.129.16`` (Azure's host),
                   ``fd00:ec2::/64`` (AWS IPv6: IMDS, DNS, NTP), ``fd20:ce::/64`` (GCP IPv6)
link-local         ``169.254.0.0/16``, ``fe80::/10``
multicast          ``224.0.0.0/4``, ``ff00::/8``
broadcast          ``255.255.255.255``
reserved           ``240.0.0.0/4``
=================  ================================================================================

An IPv6 address carrying an IPv4 address (IPv4-mapped ``::ffff:127.0.0.1``, IPv4-compatible
``::127.0.0.1``, IPv4-translated ``::ffff:0:127.0.0.1``, NAT64 ``64:ff9b::127.0.0.1``, 6to4
``2002:7f00:1::``, Teredo's client and server) is judged by the IPv4 address too: refused when
either is in a class above, unless a range holds each form in such a class (or the whole IPv6
address).  Text that is not an IP address
literal (``127.1``, ``0x7f000001``, ``localhost``) is not an address: a caller resolves it and
judges what it resolved to.

Secrets (`secret_refusal`): a Secret the repository names is read only when the operator lists
it (``NAME`` in the daemon's own namespace, ``NAMESPACE/NAME`` elsewhere).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from gitdns.core.problems import shown

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

PROBE_SETTING = "probe_allow_ranges"
# how an operator gives it, as both daemons take it (the agent also reads probeAllowRanges from
# its config file)
PROBE_FLAG = "--probe-allow-ranges (GITDNS_PROBE_ALLOW_RANGES)"

UNSPECIFIED, LOOPBACK, METADATA, LINK_LOCAL = "unspecified", "loopback", "cloud metadata", "link-local"
MULTICAST, BROADCAST, RESERVED = "multicast", "broadcast", "reserved"

# first match wins: the metadata addresses before the link-local network holding most of them
_CLASSES: tuple[tuple[Network, str], ...] = tuple((ipaddress.ip_network(net), kind) for net, kind in (
    ("0.0.0.0/8", UNSPECIFIED),
    ("127.0.0.0/8", LOOPBACK),
    ("169.254.169.254/32", METADATA),
    ("169.254.170.2/32", METADATA),
    ("169.254.0.23/32", METADATA),
    ("100.100.100.200/32", METADATA),
    ("192.0.0.192/32", METADATA),
    ("168.63.129.16/32", METADATA),
    ("169.254.0.0/16", LINK_LOCAL),
    ("224.0.0.0/4", MULTICAST),
    ("255.255.255.255/32", BROADCAST),
    ("240.0.0.0/4", RESERVED),
    ("::/128", UNSPECIFIED),
    ("::1/128", LOOPBACK),
    ("fd00:ec2::/64", METADATA),
    ("fd20:ce::/64", METADATA),
    ("fe80::/10", LINK_LOCAL),
    ("ff00::/8", MULTICAST),
))
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


def embedded_ipv4(address: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, translated, NAT64,
    6to4, Teredo); none for an IPv4 address or a plain IPv6 one."""
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address in _TRANSLATED or address in _NAT64:
        return (low,)
    if address in _COMPATIBLE and int(address) > 1:  # not :: or ::1 (classified as such)
        return (low,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        server, client = address.teredo
        return (client, server)
    return ()


def address_class(address: Address) -> str | None:
    """The class (`_CLASSES`) ``address`` itself belongs to, or None."""
    bare = _bare(address)
    return next((kind for net, kind in _CLASSES if bare.version == net.version and bare in net), None)


def forbidden(address: Address) -> list[tuple[str, Address]]:
    """Each (class, form) of ``address`` — itself, or an IPv4 address it carries — that is in a
    class no probe goes to by default; empty for an ordinary address."""
    found = []
    for form in (address, *embedded_ipv4(address)):
        kind = address_class(form)
        if kind is not None:
            found.append((kind, form))
    return found


def _bare(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        return ipaddress.IPv6Address(int(address))
    return address


def covered(address: Address, allowed: Iterable[Network]) -> bool:
    """Whether one of ``allowed`` holds ``address`` (without its zone index)."""
    bare = _bare(address)
    return any(bare.version == net.version and bare in net for net in allowed)


def probe_refusal(address: str, allowed: Sequence[Network] = ()) -> str:
    """Why no probe may connect to ``address`` given the operator's ranges ``allowed``: "" when
    it may.  ``address`` is what the connection goes to, an IP address literal: anything else is
    refused (resolve a host name first and judge the address it resolved to)."""
    return _refusal(address, allowed)[0]


def _refusal(address: str, allowed: Sequence[Network]) -> tuple[str, bool]:
    """(why not, whether a range would allow it)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return f"{shown(address)} is not an IP address (a host name is resolved and its address judged)", False
    # each forbidden form must be allowed: by a range holding it, or one holding the whole address
    left = [(kind, form) for kind, form in forbidden(parsed)
            if not (covered(form, allowed) or covered(parsed, allowed))]
    if not left:
        return "", False
    kind, form = left[0]
    text = address if address.isprintable() and len(address) <= 64 else shown(address)
    carried = "" if form == parsed else f" (as {form})"
    return f"{text} is a{'n' if kind[0] in 'aeiou' else ''} {kind} address{carried}", True


def parse_ranges(value: str | Iterable[str] | None, setting: str = PROBE_FLAG) -> tuple[Network, ...]:
    """The operator's ranges: CIDR networks or single addresses, comma- or space-separated (or a
    list from a config file).  ValueError naming ``setting`` for an entry that is neither, or a
    network with host bits set (``10.1.2.3/8``: write ``10.0.0.0/8``)."""
    if value is None:
        return ()
    parts = value.replace(",", " ").split() if isinstance(value, str) else [str(v).strip() for v in value]
    out: list[Network] = []
    for entry in (p for p in parts if p):
        try:
            net = ipaddress.ip_network(entry, strict=True)
        except ValueError as exc:
            raise ValueError(f"{setting}: {shown(entry)} is not a network in CIDR form (127.0.0.0/8, "
                             f"fd00:ec2::254/128) or an address: {exc}") from None
        if isinstance(net, ipaddress.IPv6Network) and "%" in entry:
            raise ValueError(f"{setting}: {shown(entry)}: a zone index means nothing in a range")
        out.append(net)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ProbeReach:
    """The operator's probe ranges (``--probe-allow-ranges``): `ProbeReach()` allows no address of
    the classes above."""

    ranges: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, value: str | Iterable[str] | None, setting: str = PROBE_FLAG) -> ProbeReach:
        """From the setting's text; ValueError naming ``setting`` for a bad entry."""
        return cls(parse_ranges(value, setting))

    def refusal(self, address: str) -> str:
        """The probe error for a connection to ``address`` ("" when it may be made): short, for a
        target's last error (it names the flag; the setting's other names are in the docs)."""
        why, rangeable = _refusal(address, self.ranges)
        if not why:
            return ""
        return f"not probed: {why}" + ("; allowed only by --probe-allow-ranges" if rangeable else "")


def own_address_refusal(node_ip: str, endpoint_address: str) -> str:
    """Why a node's health endpoint may not be probed: its address must be the node's own ``ip``
    (the same address, not another spelling of it, no zone index); "" when it is."""
    try:
        same = ipaddress.ip_address(endpoint_address) == ipaddress.ip_address(node_ip)
    except ValueError:
        same = False
    if same and "%" not in endpoint_address:
        return ""
    return (f"the healthEndpoint's host {shown(endpoint_address)} is not the node's ip {shown(node_ip)}: a node is "
            "probed at its own address only")


# --- Secrets ---------------------------------------------------------------------------------------------


def secret_listed(name: str, namespace: str, own_namespace: str, listed: Collection[str]) -> bool:
    """Whether the operator lists the Secret ``namespace/name``: ``NAME`` lists it in the daemon's own
    namespace, ``NAMESPACE/NAME`` in any."""
    if not name or "/" in name:
        return False
    return f"{namespace}/{name}" in listed or (namespace == own_namespace and name in listed)


def secret_refusal(name: str, listed: Collection[str], *, setting: str, what: str,
                   namespace: str = "", own_namespace: str = "") -> str:
    """Why the Secret (or secret file) ``name`` that the repository names may not be read: "" when
    the operator lists it (`secret_listed`; without namespaces: ``name`` on the list).  The message
    names ``what`` (the field naming it), the setting and the names listed, nothing else."""
    if secret_listed(name, namespace, own_namespace, listed):
        return ""
    where = f"{namespace}/{name}" if namespace else name
    now = ", ".join(sorted(listed)) or "none"
    return (f"{what}: {shown(where)} is not a Secret the operator lets the repository name; nothing was read.  "
            f"List it with {setting} (listed now: {now})")
