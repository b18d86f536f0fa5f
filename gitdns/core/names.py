"""Name contracts shared with Kuadrant dns-operator (docs/records.md)."""

from __future__ import annotations

import hashlib
from functools import lru_cache

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
KLB = "klb"
TXT_PREFIX = "kuadrant-"
# `kuadrant-` + 8-char owner hash + `-` + up to 5-char type + `-` = 24 octets for `cname-`.
TXT_PREFIX_OCTETS = 24
MAX_LABEL = 63
MAX_FIRST_LABEL_ON_TXT_ZONES = MAX_LABEL - TXT_PREFIX_OCTETS
# Names the TXT records of the registry and of gitdns itself start with: Kuadrant's registry
# (ownership, active groups), gitdns's heartbeats, active groups and agent leases.  A record
# from the repository under one of them could be read as one of those.
RESERVED_PREFIXES = (TXT_PREFIX, "gitdns-heartbeat-", "gitdns-active-groups.", "gitdns-lock-")


def reserved_prefix(name: str) -> str | None:
    """The reserved prefix ``name`` (a leading ``*.`` aside) starts with, or None."""
    bare = name.removeprefix("*.")
    return next((prefix for prefix in RESERVED_PREFIXES if bare.startswith(prefix)), None)


@lru_cache(maxsize=65536)
def short_hash(value: str, length: int) -> str:
    """Kuadrant's ``ToBase36HashLen``: SHA-224 of ``value`` as a big-endian integer in base 36,
    with one ``0`` per leading zero byte of the digest (the base-36 codec Kuadrant uses keeps
    them, as base58 codecs do), first ``length`` chars."""
    digest = hashlib.sha224(value.encode("utf-8")).digest()
    number = int.from_bytes(digest, "big")
    digits: list[str] = []
    while number:
        number, rem = divmod(number, 36)
        digits.append(_ALPHABET[rem])
    zeros = len(digest) - len(digest.lstrip(b"\0"))
    return ("0" * zeros + "".join(reversed(digits)))[:length]


def lb_host(host: str) -> str:
    """The host the klb names hang under: a leading ``*.`` is dropped."""
    return host[2:] if host.startswith("*.") else host


def klb_name(host: str) -> str:
    return f"{KLB}.{lb_host(host)}"


def geo_name(host: str, geo: str) -> str:
    return f"{geo.lower()}.{KLB}.{lb_host(host)}"


def cluster_target_name(host: str, cluster_id: str, gateway: str, namespace: str) -> str:
    prefix = f"{short_hash(cluster_id, 6)}-{short_hash(f'{gateway}-{namespace}', 6)}"
    return f"{prefix}.{KLB}.{lb_host(host)}"


def root_host_of(name: str) -> str:
    """The listener host a record name belongs to (undoes the klb layout)."""
    marker = f".{KLB}."
    if name.startswith(f"{KLB}."):
        return name[len(KLB) + 1 :]
    idx = name.find(marker)
    if idx >= 0:
        return name[idx + len(marker) :]
    return lb_host(name)


def first_label(name: str) -> str:
    return name.split(".", 1)[0]
