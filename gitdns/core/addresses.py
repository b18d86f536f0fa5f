"""IP addresses, networks and host names as written in the desired state: each function says
what is wrong with a string, or returns None when it is what it claims to be.

A string of digits and dots is an IPv4 address or nothing: ``127.0.0.300`` is not an address,
and it is not a host name either (a host name's last label is never all digits, RFC 1123
§2.1, RFC 3696 §2).  A string with a colon is an IPv6 address or nothing.  Addresses with a
zone index (``fe80::1%eth0``) mean nothing outside one host and are refused.
"""

from __future__ import annotations

import ipaddress
import re

from gitdns.core.problems import shown as _shown

# Matched whole (`re.fullmatch`): `$` alone would also match before a final newline.
_LABEL = re.compile(r"[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?")
_NAME = re.compile(r"(?:[A-Za-z0-9_](?:[-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?\.)*"
                   r"[A-Za-z0-9_](?:[-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?")
_DOTTED = re.compile(r"[0-9.]+")
MAX_NAME = 253
SHOWN = 256  # characters of an untrusted value quoted in a message here: a whole host name fits


def shown(text: str, limit: int = SHOWN) -> str:
    """``text`` quoted for a message (`gitdns.core.problems.shown`), cut to ``limit`` characters."""
    return _shown(text, limit)


def _reason(exc: ValueError, text: str) -> str:
    """ipaddress's message without the repeated input: 'octet 300 (> 255) not permitted'."""
    message = str(exc).removesuffix(f" in {text!r}")
    return message[:1].lower() + message[1:]


def ip_error(text: str, version: int | None = None) -> str | None:
    """What keeps ``text`` from being an IP address (of ``version`` 4 or 6 when given)."""
    if version == 4 or (version is None and ":" not in text):
        parser: type[ipaddress.IPv4Address | ipaddress.IPv6Address] = ipaddress.IPv4Address
        kind = "an IPv4 address"
    else:
        parser, kind = ipaddress.IPv6Address, "an IPv6 address"
    try:
        parsed = parser(text)
    except ValueError as exc:
        return f"{shown(text)} is not {kind} ({_reason(exc, text)[:SHOWN]})"
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.scope_id:
        return f"{shown(text)} carries a zone index (%{parsed.scope_id}), which means nothing outside one host"
    return None


def network_error(text: str) -> str | None:
    """What keeps ``text`` from being an IP address or a network in CIDR form (``10.0.0.0/8``;
    host bits are allowed and ignored)."""
    address, slash, prefix = text.partition("/")
    found = ip_error(address)
    if found is not None or not slash:
        return found
    longest = 128 if ":" in address else 32
    if not prefix.isdigit() or int(prefix) > longest:
        return f"{shown(text)} is not a network (the prefix length must be a number from 0 to {longest})"
    return None


def host_error(text: str) -> str | None:
    """What keeps ``text`` from being a host name (a leading ``*.`` and a trailing dot allowed)."""
    name = text.removeprefix("*.").removesuffix(".")
    if not name:
        return f"{shown(text)} is not a host name (it is empty)"
    if len(name) > MAX_NAME:
        return f"{shown(text)} is not a host name (it is {len(name)} characters long; at most {MAX_NAME})"
    if not _NAME.fullmatch(name):  # the one regular expression first: most names are fine
        bad = next(label for label in name.split(".") if not _LABEL.fullmatch(label))
        why = "an empty label" if not bad else f"the label {shown(bad)}"
        return f"{shown(text)} is not a host name ({why}: labels are 1 to 63 letters, digits, '-' or '_')"
    last = name.rpartition(".")[2]
    if last.isdigit():
        return f"{shown(text)} is not a host name (its last label {last!r} is all digits)"
    return None


def address_error(text: str) -> str | None:
    """What keeps ``text`` from being an IP address or a host name."""
    if ":" in text:
        return ip_error(text, 6)
    if _DOTTED.fullmatch(text):
        found = ip_error(text, 4)
        return None if found is None else f"{found}, and digits and dots are not a host name"
    return host_error(text)
