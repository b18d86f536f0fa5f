"""The ownership registry codec: Kuadrant-compatible TXT records (docs/records.md).

One TXT per owner per data record key.  Name: ``kuadrant-<hash8(owner)>-<type>-<name>``
(a leading ``*`` becomes ``wildcard``); the TXT copies the data record's set identifier and
routing.  Value: ``heritage=external-dns`` first, then ``external-dns/<key>=<value>`` pairs
sorted by key: ``group``, ``owner``, ``rev``, ``targets`` (only while the value fits one
255-octet TXT string) and ``version=1``.

Kuadrant's legacy, unversioned entries are read too: names ``kuadrant-<type>-<name>`` (no
owner hash) and values without ``external-dns/version``.  They are never written.  Their
``owner`` label may list several owners joined by ``&&`` (one TXT for every owner of a record,
before dns-operator gave each owner its own TXT): such a *joint* TXT is one entry per owner
(`decode_entries`), each claiming the whole record, and is never rewritten or deleted — as
dns-operator, which writes each owner's own TXT beside it and leaves the joint one to its
``prune-legacy-txt-records`` command.  Of several entries of one owner for one data record,
the versioned one counts, then the owner's own legacy TXT, then a joint one (`prefer`).

The value is split on ``,`` (labels), on the first ``=`` (key from value) and on ``;``
(targets), and blanks and quotes are stripped around it, so nothing written may carry those
where they would start a new part: an owner, group or rev that could (`label_error`: no ``,``
``;`` ``=`` ``"`` ``\\`` or blank at all) is refused with ``ValueError``; targets that hold
``,`` or ``;`` (a TXT record's own text may) leave the ``targets`` label out, as when it does
not fit, so the owner claims the whole record.  (``=``, ``"`` and blanks inside a target are
read back as written: ``0 issue "letsencrypt.org"`` keeps its per-target label.)  When a label
appears twice the first one counts: the labels are written in sorted order, ``owner`` before
``targets``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from gitdns.core.names import TXT_PREFIX, short_hash
from gitdns.core.records import RECORD_TYPES, RecordKey, RecordSet

HERITAGE = "heritage=external-dns"
LABEL_PREFIX = "external-dns/"
MAX_TXT_STRING = 255
VERSION = "1"
_TYPES_LOWER = {t.lower(): t for t in RECORD_TYPES}
# Characters no owner, group or rev label may carry: the separators of the value, the quote
# stripped around it, the escape character of zone files and `&` (Kuadrant joins owners with
# `&&`; dns-operator refuses it in group names).
_LABEL_UNSAFE = frozenset(',;="\\&')
# what a label may hold, as one set: a label is checked per record a plan writes (two each)
_LABEL_SAFE = frozenset(chr(c) for c in range(0x21, 0x7F)) - _LABEL_UNSAFE
OWNER_DELIMITER = "&&"
# ... and no target (a target may hold blanks, `=` and quotes: only a `,` or `;` starts a new part).
_TARGET_UNSAFE = frozenset(",;")


@dataclass(frozen=True, slots=True)
class OwnerLabels:
    owner: str
    group: str | None = None
    rev: str | None = None
    targets: tuple[str, ...] | None = None  # None: this owner claims the record's values
    version: str | None = VERSION
    extra: tuple[tuple[str, str], ...] = ()  # unknown labels, kept on rewrite


@dataclass(frozen=True, slots=True)
class OwnershipEntry:
    """A decoded ownership TXT: which owner claims which data record key, with what."""

    key: RecordKey  # the data record it refers to
    labels: OwnerLabels
    txt: RecordSet  # the TXT record as read
    joint: tuple[str, ...] = ()  # every owner the TXT lists, when it lists several (legacy `&&`)
    superseded: tuple[RecordSet, ...] = ()  # the owner's other own TXT for the key (`add_entry`)

    @property
    def owner(self) -> str:
        return self.labels.owner

    @property
    def versioned(self) -> bool:
        """Written in Kuadrant's current format (``external-dns/version=1``)."""
        return self.labels.version == VERSION


def txt_name(owner: str, rtype: str, dns_name: str, zone: str | None = None) -> str:
    """The ownership TXT name.  At the zone apex the Kuadrant form would fall outside the
    zone (``kuadrant-…-mx-example.com`` is a sibling of ``example.com``), so there the type
    is followed by a dot: ``kuadrant-<hash8>-mx.example.com`` (a gitdns extension)."""
    name = "wildcard" + dns_name[1:] if dns_name.startswith("*") else dns_name
    sep = "." if zone is not None and dns_name == zone else "-"
    return f"{TXT_PREFIX}{short_hash(owner, 8)}-{rtype.lower()}{sep}{name}"


def parse_txt_name(name: str) -> tuple[str | None, str, str] | None:
    """``(hash8 or None for legacy, record type, data record name)`` or None.  Case does not
    matter (dns-operator lower-cases the name before it reads it)."""
    name = name.lower()
    if not name.startswith(TXT_PREFIX):
        return None
    rest = name[len(TXT_PREFIX) :]
    head, sep, tail = rest.partition("-")
    if not sep:
        return None
    owner_hash: str | None = None
    if head.lower() not in _TYPES_LOWER and len(head) == 8:
        owner_hash = head
        head, tail = _split_type(tail)
    rtype = _TYPES_LOWER.get(head.lower())
    if rtype is None or not tail:
        return None
    if tail.startswith("wildcard.") or tail == "wildcard":
        tail = "*" + tail[len("wildcard") :]
    return owner_hash, rtype, tail


def _split_type(text: str) -> tuple[str, str]:
    """``a-foo.example.com`` -> (a, foo.example.com); ``mx.example.com`` (apex) -> (mx, example.com)."""
    for idx, char in enumerate(text):
        if char in "-.":
            return text[:idx], text[idx + 1 :]
    return text, ""


def _shown(text: str, limit: int = 40) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def label_error(text: str) -> str | None:
    """What keeps ``text`` from being an owner, group or rev label value; None when it can be
    one (printable ASCII, no space, none of ``, ; = " \\``)."""
    if not text:
        return "it is empty"
    if _LABEL_SAFE.issuperset(text):
        return None
    bad = sorted({ch for ch in text if ch in _LABEL_UNSAFE or not ch.isascii() or not ch.isprintable() or ch == " "})
    return f"{_shown(text)} contains {' '.join(map(repr, bad[:6]))}" if bad else None


def targets_fit(targets: tuple[str, ...]) -> bool:
    """Whether every target can go into the ``targets`` label as it is (no ``,`` ``;`` or
    control character)."""
    return all(t and t.isprintable() and not _TARGET_UNSAFE.intersection(t) for t in targets)


def _checked(labels: OwnerLabels) -> None:
    for name, value in (("owner", labels.owner), ("group", labels.group), ("rev", labels.rev)):
        if value is not None and (name == "owner" or value):
            wrong = label_error(value)
            if wrong is not None:
                raise ValueError(f"the ownership label {name} cannot be written: {wrong}")


def _pairs(labels: OwnerLabels, with_targets: bool) -> list[tuple[str, str]]:
    pairs = [("owner", labels.owner)]
    if labels.group:
        pairs.append(("group", labels.group))
    if labels.rev:
        pairs.append(("rev", labels.rev))
    if with_targets and labels.targets is not None:
        pairs.append(("targets", ";".join(labels.targets)))
    if labels.version:
        pairs.append(("version", labels.version))
    pairs.extend(labels.extra)
    return sorted(pairs)


def _join(pairs: list[tuple[str, str]]) -> str:
    return ",".join([HERITAGE, *(f"{LABEL_PREFIX}{k}={v}" for k, v in pairs)])


def encode(labels: OwnerLabels) -> tuple[str, bool]:
    """The TXT value and whether the per-target ``targets`` label fitted (in one 255-octet TXT
    string, with characters it can carry).  Raises ``ValueError`` for an owner, group or rev
    that `label_error` refuses."""
    _checked(labels)
    if labels.targets is None:
        return _join(_pairs(labels, False)), False
    full = _join(_pairs(labels, True))
    read_back = full.strip().strip('"') == full  # `decode` strips blanks and quotes around the value
    if len(full.encode("utf-8")) <= MAX_TXT_STRING and targets_fit(labels.targets) and read_back:
        return full, True
    return _join(_pairs(labels, False)), False


def decode(value: str) -> OwnerLabels | None:
    """Labels of an ownership TXT value; None when heritage is not external-dns, or when the
    value did not read as text (no owner writes one: see `_is_text`)."""
    value = value.strip().strip('"')
    parts = value.split(",")
    if not parts or parts[0] != HERITAGE or not _is_text(value):
        return None
    found: dict[str, str] = {}
    for part in parts[1:]:
        key, sep, val = part.partition("=")
        if not sep or not key.startswith(LABEL_PREFIX):
            continue
        found.setdefault(key[len(LABEL_PREFIX) :], val)  # the first one counts
    owner = sys.intern(found.pop("owner", ""))  # one string per owner and per revision, not one per
    if not owner:                               # TXT: a zone holds thousands of them
        return None
    targets_text = found.pop("targets", None)
    targets = tuple(t for t in targets_text.split(";") if t) if targets_text is not None else None
    return OwnerLabels(
        owner=owner,
        group=found.pop("group", None) or None,
        rev=sys.intern(found.pop("rev", "")) or None,
        targets=targets,
        version=found.pop("version", None),
        extra=tuple(sorted(found.items())),
    )


def _is_text(value: str) -> bool:
    """False for a value holding U+FFFD or a lone surrogate: bytes that are no UTF-8, as a
    provider reads them (replaced, or kept with ``surrogateescape``; a ``\\udcff`` escape in
    JSON).  No owner writes one, and such a value cannot be matched or hashed as it is on the
    server (a delete conditional on it is refused for good): it is another writer's."""
    if value.isascii():
        return True
    if "\ufffd" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def ownership_record(data: RecordSet, labels: OwnerLabels, zone: str | None = None) -> tuple[RecordSet, bool]:
    """The ownership TXT for ``data`` (same set identifier and routing) and whether its
    per-target label fitted."""
    value, fitted = encode(labels)
    txt = RecordSet(
        name=txt_name(labels.owner, data.type, data.name, zone),
        type="TXT",
        ttl=data.ttl,
        values=(value,),
        set_id=data.set_id,
        weight=data.weight,
        geo=data.geo,
    )
    return txt, fitted


def split_owners(owner_label: str) -> tuple[str, ...]:
    """The owners an ``owner`` label lists: Kuadrant joins several with ``&&`` (sorted, no
    duplicates or empty names, as its ``SplitLabels``/``EnsureLabel``)."""
    if OWNER_DELIMITER not in owner_label:
        return (owner_label,) if owner_label else ()
    return tuple(sorted({o for o in owner_label.split(OWNER_DELIMITER) if o}))


def decode_entry(txt: RecordSet) -> OwnershipEntry | None:
    """Decode one TXT record set into an ownership entry, or None if it is not one: the first
    value with the external-dns heritage, an owner and (for hashed names) an owner hashing to
    the name counts.  The owner is the label as written, a joint one included (``a&&b``, with
    `OwnershipEntry.joint` naming each): for readers that need the record a TXT claims; who
    owns it is `decode_entries`."""
    if txt.type != "TXT" or txt.name != txt.name.lower():  # not a name any owner writes: another writer's
        return None
    parsed = parse_txt_name(txt.name)
    if parsed is None:
        return None
    owner_hash, rtype, dns_name = parsed
    for value in txt.values:
        labels = decode(value)
        if labels is None:
            continue
        if owner_hash is not None and short_hash(labels.owner, 8) != owner_hash:
            continue
        owners = split_owners(labels.owner)
        if not owners:
            continue
        return OwnershipEntry(RecordKey(dns_name, rtype, txt.set_id), labels, txt,
                              owners if len(owners) > 1 else ())
    return None


def decode_entries(txt: RecordSet) -> tuple[OwnershipEntry, ...]:
    """The ownership entries of one TXT record set: none when it is not one, one per owner it
    lists (a joint legacy TXT lists several, each then claiming the whole record)."""
    entry = decode_entry(txt)
    if entry is None:
        return ()
    owners = split_owners(entry.owner)
    if owners == (entry.owner,):
        return (entry,)
    return tuple(replace(entry, labels=replace(entry.labels, owner=sys.intern(o))) for o in owners)


def _rank(entry: OwnershipEntry) -> tuple[bool, bool, bool]:
    parsed = parse_txt_name(entry.txt.name)
    return (not entry.joint, entry.versioned, parsed is not None and parsed[0] is not None)


def prefer(held: OwnershipEntry | None, new: OwnershipEntry) -> OwnershipEntry:
    """Which of two entries of one owner for one data record counts: the versioned one over a
    legacy one (dns-operator: "once the new set of TXTs is created, the old ones are
    ignored"), the owner's own TXT over a joint one, a hashed name over a legacy name; on a tie
    the TXT whose name sorts first (the same answer whatever order the zone was read in)."""
    if held is None:
        return new
    a, b = _rank(held), _rank(new)
    if a != b:
        return held if a > b else new
    return held if held.txt.name <= new.txt.name else new


def add_entry(owners: dict[RecordKey, dict[str, OwnershipEntry]], entry: OwnershipEntry) -> None:
    """File ``entry`` under its data record and owner, keeping the one `prefer` picks; the
    owner's own TXT it hides (not a joint one) go to its `OwnershipEntry.superseded`, for the
    owner to delete."""
    found = owners.setdefault(entry.key, {})
    held = found.get(entry.owner)
    if held is None:
        found[entry.owner] = entry
        return
    kept = prefer(held, entry)
    lost = entry if kept is held else held
    hidden = (*kept.superseded, *lost.superseded, *(() if lost.joint else (lost.txt,)))
    found[entry.owner] = replace(kept, superseded=hidden) if hidden else kept


def with_targets(labels: OwnerLabels, targets: tuple[str, ...] | None) -> OwnerLabels:
    return replace(labels, targets=targets)
