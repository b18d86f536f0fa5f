"""RFC 1035 master files and CoreDNS weight files from a rendered `View` (dnspython).

`to_master_file` builds a ``dns.zone.Zone`` from a view's plain record sets, adds a
generated SOA (serial passed in, e.g. the store version, else derived from the content)
and, when the view has no apex NS, an NS (plus its address when it lies inside the zone),
and writes it relativized.  Store names carry no trailing dot; the names inside CNAME, NS,
MX and SRV values are made absolute here.  `weights_file` writes the view's weights in the
format of CoreDNS's ``loadbalance weighted`` WEIGHTFILE: a domain name on its own line,
then ``<address> <weight>`` lines (weights 1..255), ``#`` comments.  `write_views` renders
a zone read from any provider into ``<view>.zone`` / ``<view>.weights`` files for serving
(BIND views, CoreDNS ``file`` + ``loadbalance weighted``) and, when asked (`Serving`), the
Corefile snippet ``<zone>.server`` that serves them (`gitdns.core.zonecorefile`).

For zones served by several primaries (docs/coredns-primaries.md) every primary must write
byte-identical files from its own store: `Serving` then leaves the ownership registry (TXT
claims, heartbeats — bookkeeping that differs between stores) out of the views and derives the
SOA serial from the content instead of the store version.

The views follow every write to the store, whoever makes it (a reconcile, ``prune-owner``,
``adopt``, ``groups set --direct``, a heartbeat): `write_views` keeps how it rendered a zone
(`Serving`, `ZoneDefaults`) beside the views directory, in ``<views dir>.serving``, and
`rerender` — which the `local` store calls after each write that changed it — renders the
views again the same way.  A zone never rendered has no such file and is not rendered.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdataset
import dns.rdatatype
import dns.zone
import jinja2

from gitdns import __version__, fsutil
from gitdns.core.owner.zone import parse_heartbeat
from gitdns.core.records import RecordSet, ZoneSnapshot, in_zone, normalize_name
from gitdns.core.registry import decode_entry
from gitdns.core.render import make_environment
from gitdns.core.views import DEFAULT_VIEW, View, render_views
from gitdns.core.zonecorefile import ServedView, ViewClients, render_zone_server, server_file

log = logging.getLogger(__name__)

# Index of the value field holding a domain name, per type (-1: the last field).
_NAME_FIELD = {"CNAME": 0, "NS": 0, "MX": 1, "SRV": 3}
_TXT_CHUNK = 255


@dataclass(frozen=True, slots=True)
class ZoneDefaults:
    """What a rendered zone gets when the store does not say: SOA fields and an NS."""

    primary_ns: str = ""  # "" -> ns1.<domain>
    hostmaster: str = ""  # "" -> hostmaster.<domain>
    ns_addresses: tuple[str, ...] = ("127.0.0.1",)  # for an in-zone primary NS with no address
    ttl: int = 300
    refresh: int = 3600
    retry: int = 600
    expire: int = 86400
    minimum: int = 300


def _absolute(name: str) -> str:
    return name if name.endswith(".") else f"{name}."


def _txt_text(value: str) -> str:
    if value.startswith('"'):
        return value  # already in presentation format (`_add` falls back to `_txt_plain` if it is not)
    return _txt_plain(value)


def _txt_plain(value: str) -> str:
    """A TXT value as quoted strings of at most 255 octets each, read back as it was: a byte
    outside printable ASCII is written ``\\DDD`` (so a string may be cut inside a UTF-8
    sequence, and a lone surrogate, what reading bytes that are not UTF-8 leaves, is its byte
    again)."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte was decoded to
        raw = value.encode("utf-8", "surrogatepass")
    chunks = [raw[i : i + _TXT_CHUNK] for i in range(0, len(raw), _TXT_CHUNK)] or [b""]
    return " ".join('"' + "".join(_TXT_BYTES[b] for b in chunk) + '"' for chunk in chunks)


_TXT_BYTES = [chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\{b:03d}" for b in range(256)]
_TXT_BYTES[0x22], _TXT_BYTES[0x5C] = '\\"', "\\\\"


def rdata_text(rtype: str, value: str) -> str:
    """A store value in master-file presentation format (absolute names, quoted TXT)."""
    if rtype == "TXT":
        return _txt_text(value)
    index = _NAME_FIELD.get(rtype)
    if index is None:
        return value
    fields = value.split()
    if len(fields) > index:
        fields[index] = _absolute(fields[index])
    return " ".join(fields)


def content_serial(domain: str, view: View) -> int:
    """A serial derived from the content (1..2**31-1) when no version is passed in."""
    digest = hashlib.sha256(domain.encode())
    for rec in view.records:
        digest.update(f"{rec.name} {rec.type} {rec.ttl} {' '.join(rec.values)}\n".encode())
    return int.from_bytes(digest.digest()[:4], "big") % (2**31 - 1) + 1


def _add(zone: dns.zone.Zone, rec: RecordSet) -> None:
    origin = zone.origin
    assert origin is not None
    name = dns.name.from_text(rec.name).relativize(origin)
    rdataset = zone.find_rdataset(name, dns.rdatatype.from_text(rec.type), create=True)
    for rdata in (built := _rdataset(rec, origin)):
        rdataset.add(rdata, built.ttl)


def _rdataset(rec: RecordSet, origin: dns.name.Name) -> dns.rdataset.Rdataset:
    rdtype = dns.rdatatype.from_text(rec.type)
    rdataset = dns.rdataset.Rdataset(dns.rdataclass.IN, rdtype)
    for value in rec.values:
        try:
            rdata = dns.rdata.from_text(dns.rdataclass.IN, rdtype, rdata_text(rec.type, value), origin=origin)
        except dns.exception.SyntaxError:
            if rec.type != "TXT":
                raise
            rdata = dns.rdata.from_text(dns.rdataclass.IN, rdtype, _txt_plain(value))  # quoted, but not well
        rdataset.add(rdata, rec.ttl)
    return rdataset


# A record's master-file lines, keyed by the record: the views of one zone share most of their
# records, and each is parsed and formatted once per render, not once per view.
LineCache = dict[RecordSet, tuple[tuple[bytes, ...], str]]


def _record_lines(rec: RecordSet, origin: dns.name.Name) -> tuple[tuple[bytes, ...], str]:
    """The record's owner name as dnspython orders names (labels from the right, ASCII case
    folded) and its lines as ``Zone.to_file(relativize=True)`` writes them."""
    name = dns.name.from_text(rec.name)
    if not name.is_subdomain(origin):
        raise KeyError(f"{rec.name} is not in zone {origin}")
    relative = name.relativize(origin)
    rdataset = _rdataset(rec, origin)
    text = rdataset.to_text(relative, origin=origin, relativize=True) if len(rdataset) else ""
    return tuple(label.lower() for label in reversed(relative.labels)), text


def _apex_records(domain: str, view: View, defaults: ZoneDefaults, serial: int) -> list[RecordSet]:
    apex_ns = next((r.values for r in view.records if r.name == domain and r.type == "NS" and r.values), ())
    primary = (defaults.primary_ns or (apex_ns[0] if apex_ns else f"ns1.{domain}")).rstrip(".")
    hostmaster = (defaults.hostmaster or f"hostmaster.{domain}").rstrip(".")
    soa = (
        f"{primary}. {hostmaster}. {serial} {defaults.refresh} {defaults.retry} "
        f"{defaults.expire} {defaults.minimum}"
    )
    out = [RecordSet(domain, "SOA", defaults.ttl, (soa,))]
    have = {(r.name, r.type) for r in view.records}
    if (domain, "NS") in have:
        return out
    out.append(RecordSet(domain, "NS", defaults.ttl, (primary,)))
    has_address = (primary, "A") in have or (primary, "AAAA") in have
    if in_zone(primary, domain) and not has_address and defaults.ns_addresses:
        v4 = tuple(a for a in defaults.ns_addresses if ":" not in a)
        v6 = tuple(a for a in defaults.ns_addresses if ":" in a)
        out.extend(RecordSet(primary, t, defaults.ttl, vals) for t, vals in (("A", v4), ("AAAA", v6)) if vals)
    return out


def _merges(records: Sequence[RecordSet]) -> bool:
    """Whether dnspython would merge record sets of these: two of one name and type, one name
    written in two ways, or a CNAME beside other data (the one it adds last replaces the rest)."""
    names = {r.name for r in records}
    if len({(r.name.lower(), r.type) for r in records}) < len(records) or len({n.lower() for n in names}) < len(names):
        return True
    cnames = {r.name for r in records if r.type == "CNAME"}
    return bool(cnames) and sum(r.name in cnames for r in records) > len(cnames)


def to_master_file(
    domain: str, view: View, defaults: ZoneDefaults | None = None, serial: int | None = None,
    cache: LineCache | None = None,
) -> str:
    """The view as an RFC 1035 master file for zone ``domain`` (names relative to it), as
    dnspython's ``Zone.to_file(sorted=True, relativize=True)`` writes it: names in DNS order,
    a name's record sets in the order the view lists them.  ``cache`` keeps each record's lines
    for the other views of the same render."""
    defaults = defaults or ZoneDefaults()
    serial = serial if serial else content_serial(domain, view)
    origin = dns.name.from_text(domain)
    records = (*_apex_records(domain, view, defaults, serial), *view.records)
    buf = io.StringIO()
    buf.write(f"; zone {domain}, view {view.name}: generated by gitdns from the record store\n")
    for note in view.notes:
        buf.write(f"; note: {note}\n")
    if _merges(records):  # dnspython's own way
        zone = dns.zone.Zone(origin, relativize=True)
        for rec in records:
            _add(zone, rec)
        zone.to_file(buf, sorted=True, relativize=True, want_origin=True)
        return buf.getvalue()
    cache = {} if cache is None else cache
    nodes: dict[tuple[bytes, ...], list[str]] = {}
    for rec in records:
        got = cache.get(rec)
        if got is None:
            got = cache[rec] = _record_lines(rec, origin)
        nodes.setdefault(got[0], []).append(got[1])
    buf.write(f"$ORIGIN {origin.to_text()}\n")
    for key in sorted(nodes):
        buf.write("\n".join(t for t in nodes[key] if t))
        buf.write("\n")
    return buf.getvalue()


def weights_file(view: View) -> str:
    """The view's weights as a CoreDNS ``loadbalance weighted`` WEIGHTFILE."""
    lines = [f"# view {view.name}: generated by gitdns (CoreDNS loadbalance weighted)"]
    current = ""
    for name, address, weight in view.weights:
        if name != current:
            lines.extend(["", _absolute(name)])
            current = name
        lines.append(f"{address} {weight}")
    return "\n".join(lines) + "\n"


# --- writing views to disk ---------------------------------------------------------------

ReadZone = Callable[[str, Collection[str] | None], ZoneSnapshot]


def view_file_stem(view_name: str) -> str:
    """A view's file name stem: the view name with anything unsafe made ``_``."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", view_name)
    return f"_{stem}" if stem.startswith(".") else stem


def _write_if_changed(path: Path, text: str) -> bool:
    """Atomically replace ``path`` with ``text`` unless it already holds exactly that."""
    return fsutil.write_if_changed(path, text.encode("utf-8"))


def _remove_stray_temps(out_dir: Path) -> None:
    """Temp files a renderer killed mid-write left, in the views directory and beside it
    (every renderer writes them under ``<out_dir>.lock``, which the caller holds)."""
    stamp = serving_file(out_dir)
    for stray in [*fsutil.remove_stray_temps(out_dir, f".*{fsutil.TEMP_MARK}*"),
                  *fsutil.remove_stray_temps(stamp.parent, fsutil.temp_glob(stamp))]:
        log.warning("render: removed stray_temp=%s", stray)


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _serial(version: str) -> int | None:
    return int(version) if version.isdigit() and 0 < int(version) < 2**32 else None


@dataclass(frozen=True, slots=True)
class Serving:
    """How a zone's views are served.  The defaults render the store as it is."""

    clients: tuple[ViewClients, ...] = ()  # viewClients: every view named gets a file
    snippet: bool = False  # write the CoreDNS snippet <zone>.server
    coredns_dir: str = ""  # where CoreDNS sees the view files; "" -> out_dir
    registry: bool = True  # False: ownership TXT and heartbeats stay out of the views
    content_serial: bool = False  # True: the SOA serial comes from the content, not the version


LOCK_PREFIX = "gitdns-lock-"  # the agent's TXT lease (gitdns.agent.lease.lock_name)


def is_registry(rec: RecordSet) -> bool:
    """An ownership claim, an owner heartbeat or an agent's lock: the store's bookkeeping,
    which differs between primaries' stores, not an answer."""
    return rec.type == "TXT" and (rec.name.startswith(LOCK_PREFIX) or decode_entry(rec) is not None
                                  or parse_heartbeat(rec) is not None)


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    from gitdns.adapters.templates import load_template_sources

    return make_environment(load_template_sources())


def _views(zone: str, records: Collection[RecordSet], serving: Serving) -> Mapping[str, View]:
    if not serving.registry:
        records = [r for r in records if not is_registry(r)]
    views = render_views(zone, records)
    for entry in serving.clients:  # a view clients are routed to always has a file
        views.setdefault(entry.view, replace(views[DEFAULT_VIEW], name=entry.view))
    return views


def serving_file(out_dir: Path) -> Path:
    """Where `write_views` keeps how it rendered ``out_dir`` (beside it, like its lock)."""
    return out_dir.with_name(out_dir.name + ".serving")


def _settings(serving: Serving, defaults: ZoneDefaults | None) -> dict[str, Any]:
    return {"serving": {"clients": [[c.view, list(c.cidrs)] for c in serving.clients], "snippet": serving.snippet,
                        "corednsDir": serving.coredns_dir, "registry": serving.registry,
                        "contentSerial": serving.content_serial},
            "defaults": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(defaults).items()}
            if defaults is not None else None}


def _stamp_text(serving: Serving, defaults: ZoneDefaults | None, version: str, views: Collection[str]) -> str:
    """How the views were rendered (for `rerender`) and from what: the store version, the views
    written and the gitdns that wrote them (a render of the same is skipped)."""
    doc = {"format": "gitdns-views", "formatVersion": 1, **_settings(serving, defaults),
           "rendered": {"storeVersion": version, "views": sorted(views), "by": __version__}}
    return json.dumps(doc, sort_keys=True, indent=1) + "\n"


def _current(out_dir: Path, zone: str, serving: Serving, defaults: ZoneDefaults | None,
             version: str) -> dict[str, str] | None:
    """The views as they are, when they were rendered from this store version with these
    settings by this gitdns and every file is there; else None (render)."""
    if not version.isdigit():
        return None  # a store without versions: nothing says the content is the same
    try:
        doc = json.loads(serving_file(out_dir).read_text())
        done = doc["rendered"]
        if (done["storeVersion"] != version or done["by"] != __version__
                or {k: doc.get(k) for k in ("serving", "defaults")} != _settings(serving, defaults)):
            return None
        stems = {name: view_file_stem(name) for name in done["views"]}
        files = [out_dir / f"{stem}.{ext}" for stem in stems.values() for ext in ("zone", "weights")]
        if serving.snippet:
            files.append(out_dir / server_file(zone))
        if not stems or not all(f.is_file() for f in files):
            return None
        return {name: (out_dir / f"{stem}.zone").read_text() for name, stem in stems.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def read_settings(out_dir: Path) -> tuple[Serving, ZoneDefaults | None] | None:
    """How ``out_dir`` was last rendered; None when it never was (or the file is not ours:
    then it is rendered again only by a reconcile, which rewrites the file)."""
    try:
        doc = json.loads(serving_file(out_dir).read_text())
        raw = doc["serving"]
        clients = tuple(ViewClients(str(v), tuple(str(c) for c in cidrs)) for v, cidrs in raw["clients"])
        serving = Serving(clients=clients, snippet=bool(raw["snippet"]), coredns_dir=str(raw["corednsDir"]),
                          registry=bool(raw["registry"]), content_serial=bool(raw["contentSerial"]))
        found = doc.get("defaults")
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in (found or {}).items()}
        defaults = None if found is None else ZoneDefaults(**fields)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("render: unreadable=%s error=%s", serving_file(out_dir), exc)
        return None
    return serving, defaults


def rerender(out_dir: Path, zone: str, read: ReadZone, changed: set[str] | None = None) -> dict[str, str]:
    """Render ``zone`` again as it was last rendered into ``out_dir`` (nothing when it never was);
    ``changed`` as `write_views` fills it."""
    found = read_settings(out_dir)
    if found is None:
        return {}
    serving, defaults = found
    return write_views(out_dir, zone, read, defaults, serving, changed=changed)


def write_views(
    out_dir: Path, zone: str, read: ReadZone, defaults: ZoneDefaults | None = None,
    serving: Serving | None = None, changed: set[str] | None = None,
) -> dict[str, str]:
    """Render ``zone`` (read with ``read``, e.g. ``LocalProvider.read``) into one master
    file per geo view, ``<out_dir>/<view>.zone``, and a CoreDNS weight file,
    ``<view>.weights``.  Files are replaced atomically and only when their content changed;
    the SOA serial is the store version when it is a number (unless ``serving`` asks for a
    content serial).  Renderers take turns on ``<out_dir>.lock`` and read under it, so the
    last one writes the newest version.  Files of views that no longer exist are left alone
    (a server config may name them).  With ``serving.snippet`` the CoreDNS snippet
    ``<zone>.server`` is written too, and how the zone was rendered goes to `serving_file`
    (for `rerender`), with the store version: rendering the same version again the same way,
    every file still there, reads the files instead.  Returns ``{view name: master file text}``;
    the names of the views whose master file was written (changed) are added to ``changed``: a
    server that loaded them must load them again (`gitdns.adapters.serverreload`)."""
    zone = normalize_name(zone)
    serving = serving or Serving()
    out_dir.mkdir(parents=True, exist_ok=True)
    texts: dict[str, str] = {}
    with _locked(out_dir.with_name(out_dir.name + ".lock")):
        _remove_stray_temps(out_dir)
        snapshot = read(zone, None)
        current = _current(out_dir, zone, serving, defaults, snapshot.version)
        if current is not None:
            return current  # rendered from this very version already (the write re-rendered it)
        serial = None if serving.content_serial else _serial(snapshot.version)
        views = _views(zone, snapshot.records, serving)
        cache: LineCache = {}
        for name, view in views.items():
            texts[name] = to_master_file(zone, view, defaults, serial=serial, cache=cache)
            stem = view_file_stem(name)
            master = _write_if_changed(out_dir / f"{stem}.zone", texts[name])
            if master and changed is not None:
                changed.add(name)
            if _write_if_changed(out_dir / f"{stem}.weights", weights_file(view)) or master:
                log.info("render: zone=%s view=%s version=%s", zone, name, snapshot.version)
                for note in view.notes:
                    log.warning("render: zone=%s view=%s note=%s", zone, name, note)
        if serving.snippet:
            _write_snippet(out_dir, zone, views, serving)
        stamp = _stamp_text(serving, defaults, snapshot.version, views)
        fsutil.write_if_changed(serving_file(out_dir), stamp.encode("utf-8"))
    return texts


def _write_snippet(out_dir: Path, zone: str, views: Mapping[str, View], serving: Serving) -> None:
    served = [ServedView(name, view_file_stem(name), bool(view.weights)) for name, view in sorted(views.items())]
    text = render_zone_server(_environment(), zone, serving.coredns_dir or str(out_dir.resolve()), served,
                              serving.clients)
    if _write_if_changed(out_dir / server_file(zone), text):
        log.info("render: zone=%s corefile=%s", zone, server_file(zone))
