"""Read only what a pass needs.

Between two revisions an owner's intent changes in a few records; reading those names and
the ownership TXT names of every owner git knows for them is enough to plan safely.  Whether
that beats one whole-zone read depends on the provider: per-name reads cost one call per
name, a whole-zone read one call per page.
"""

from __future__ import annotations

from collections.abc import Iterable

from gitdns.core.records import RecordKey, RecordSet
from gitdns.core.registry import txt_name


def changed_keys(before: Iterable[RecordSet], after: Iterable[RecordSet]) -> set[RecordKey]:
    """Keys whose content differs between two intents (added, removed or changed)."""
    old = {r.key: r for r in before}
    new = {r.key: r for r in after}
    return {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}


def names_to_read(keys: Iterable[RecordKey], owners: Iterable[str], zone: str) -> frozenset[str]:
    """The changed names, and every known owner's ownership TXT name for each changed key
    (the data record's name also covers other types at that name: CNAME vs A clashes)."""
    owner_list = sorted(set(owners))
    out: set[str] = set()
    for key in keys:
        out.add(key.name)
        out.update(txt_name(owner, key.type, key.name, zone) for owner in owner_list)
        if key.type in ("A", "AAAA", "CNAME"):  # a type clash is decided by the other types' TXT too
            for other in ("A", "AAAA", "CNAME"):
                out.update(txt_name(owner, other, key.name, zone) for owner in owner_list)
    return frozenset(out)


def per_name_is_cheaper(names: int, zone_records: int, page_size: int, name_cost: float = 1.0) -> bool:
    """Per-name reads cost ``name_cost`` pages per name (one call per name; Azure's GETs, from
    their own larger quota, less: `Capabilities.name_read_cost`); a whole-zone read
    ``zone_records / page_size`` calls (``page_size`` 0: the whole zone in one call, as AXFR or
    a local file)."""
    if page_size <= 0:
        return False
    whole = max(1, -(-zone_records // page_size))
    return names * name_cost < whole
