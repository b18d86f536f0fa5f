"""The `local` provider: the embedded default record store.

One versioned file per zone, ``<dir>/<zone>.json``, holding every record with its set
identifier, weight and geo code.  The file is one compact JSON document (json's C decoder
reads 10,000 records in tens of milliseconds)::

    {"format":"gitdns-store","formatVersion":1,"zone":"example.com","version":7,"records":[
    ["api.example.com","CNAME","",300,null,null,["klb.api.example.com"]],
    ["klb.api.example.com","CNAME","US",300,null,"US",["us.klb.api.example.com"]]
    ]}

A row is ``[name, type, set_id, ttl, weight, geo, [values...]]``; names are absolute,
lower-case, without the trailing dot; ``weight``/``geo`` are ``null`` when absent.

Writes are compare-and-swap on the file: under an exclusive ``flock`` on the sidecar
``<zone>.json.lock`` (held only for the compare and the swap) the writer re-reads the
file, applies the changes with `gitdns.core.store.apply_changes` (exact match per change
group, plus guards), bumps ``version`` and replaces the file atomically (temp file in the
same directory, fsync, ``os.replace``, fsync of the directory).  A missing file is an empty
zone; a file that does not decode raises `StoreCorruptError` and is never read as empty.

RFC 1035 master files for serving are rendered from the store into `LocalProvider.views_dir`
by `gitdns.adapters.zonefile.write_views` (each reconcile renders them).  Every write that
changes the store renders them again, the way they were last rendered
(`gitdns.adapters.zonefile.rerender`), so the views follow the store whoever writes it —
``prune-owner``, ``adopt``, ``groups set --direct``, a heartbeat — not only a reconcile.

The store directory a Zone names (``settings.path``) lies inside a base directory: the agent's
state directory, the repository for the one-shot verbs.  ``from_ref`` refuses a path with
``..``, ``~`` or a ``.git`` component (`refuse_static`) and an absolute path outside the base
(`store_directory`); a provider built
with ``base`` then checks before every read and write that no component below the base — the
store directory, the store file, its lock, the views directory and what it holds — is a
symbolic link (``lstat``; files are opened with ``O_NOFOLLOW``), so neither the store, the
views nor the ``.server`` snippet is ever read or written outside the base.

A server that loaded the views (BIND) is told to load them again after every render that changed
a view's master file, when the operator asked for it (``--local-reload rndc``, carried by the
`Fences`; `gitdns.adapters.serverreload`): ``rndc reload ZONE IN VIEW`` per changed view.  A
failed reload is logged and kept for the pass's report (`LocalProvider.take_reload_notes`); it
never fails or undoes the write.  Without the setting nothing is run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import stat
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gitdns import fsutil
from gitdns.adapters.serverreload import ServerReload, notes, reload_views
from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import capabilities_of
from gitdns.core.providertypes.settings import STORE_BASE_HELP
from gitdns.core.records import Change, Guard, RecordKey, RecordSet, ZoneSnapshot, normalize_name
from gitdns.core.store import apply_changes
from gitdns.errors import ConfigError, PermanentError, RetryableError
from gitdns.providers.base import ApplyResult, ZoneInfo, landed
from gitdns.providers.fences import STRICT, Fences, refuse_static, shown
from gitdns.providers.memory import filter_names, snapshot_names, split_valid

log = logging.getLogger(__name__)

FORMAT = "gitdns-store"
FORMAT_VERSION = 1
SUFFIX = ".json"
_TEMP_MARK = fsutil.TEMP_MARK
_ZONE_RE = re.compile(r"^[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?$")


class StoreCorruptError(PermanentError):
    """A store file exists but cannot be decoded.  Never treated as an empty zone."""

    reason = "StoreCorrupt"

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"record store {path} is corrupt: {why}; fix or restore the file")
        self.path = path


class StoreBusyError(RetryableError):
    """Another writer held the zone's lock for longer than the timeout."""

    reason = "StoreBusy"


# --- codec -------------------------------------------------------------------------


def _row(rec: RecordSet) -> list[Any]:
    return [rec.name, rec.type, rec.set_id, rec.ttl, rec.weight, rec.geo, list(rec.values)]


def encode_store(zone: str, version: int, records: Mapping[RecordKey, RecordSet]) -> bytes:
    """The store document: a header line, one record row per line, sorted by key."""
    header = json.dumps(
        {"format": FORMAT, "formatVersion": FORMAT_VERSION, "zone": zone, "version": version},
        separators=(",", ":"),
    )
    rows = ",\n".join(
        json.dumps(_row(records[key]), separators=(",", ":"), ensure_ascii=False)
        for key in sorted(records)
    )
    body = f'{header[:-1]},"records":[\n{rows}\n]}}\n' if rows else f'{header[:-1]},"records":[]}}\n'
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, read from a "\udcff" escape another writer left
        return encode_store_escaped(header, records)


def encode_store_escaped(header: str, records: Mapping[RecordKey, RecordSet]) -> bytes:
    """`encode_store` for a zone holding a string that is no Unicode text (a lone surrogate,
    which JSON can escape and UTF-8 cannot hold): the rows holding one are written with
    ``\\uXXXX`` escapes, as such a value came in, and read back as they were."""
    def row(rec: RecordSet) -> str:
        text = json.dumps(_row(rec), separators=(",", ":"), ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(_row(rec), separators=(",", ":"))
        return text

    rows = ",\n".join(row(records[key]) for key in sorted(records))
    return f'{header[:-1]},"records":[\n{rows}\n]}}\n'.encode()


def _decode_row(row: Any) -> tuple[RecordKey, RecordSet]:
    name, rtype, set_id, ttl, weight, geo, values = row
    if not (type(name) is str and type(rtype) is str and type(set_id) is str):
        raise TypeError("name, type and set_id must be strings")
    if type(ttl) is not int or not (weight is None or type(weight) is int):
        raise TypeError("ttl and weight must be integers")
    if not (geo is None or type(geo) is str) or type(values) is not list:
        raise TypeError("geo must be a string and values a list")
    if not all(type(v) is str for v in values):
        raise TypeError("values must be strings")
    return RecordKey(name, rtype, set_id), RecordSet(name, rtype, ttl, tuple(values), set_id, weight, geo)


def decode_store(path: Path, data: bytes, zone: str) -> tuple[int, dict[RecordKey, RecordSet]]:
    """``(version, records)`` from a store document; `StoreCorruptError` naming ``path``."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreCorruptError(path, f"not JSON ({exc})") from exc
    except RecursionError:  # nested deeper than any store: another writer's file, never a crash
        raise StoreCorruptError(path, "not a store document (nested too deep)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StoreCorruptError(path, f'not a {FORMAT} document (no "format": "{FORMAT}")')
    if doc.get("formatVersion") != FORMAT_VERSION:
        raise StoreCorruptError(path, f"formatVersion {doc.get('formatVersion')!r} is not {FORMAT_VERSION}")
    if doc.get("zone") != zone:
        raise StoreCorruptError(path, f"holds zone {doc.get('zone')!r}, expected {zone!r}")
    version, rows = doc.get("version"), doc.get("records")
    if type(version) is not int or not isinstance(rows, list):
        raise StoreCorruptError(path, "version must be an integer and records a list")
    records: dict[RecordKey, RecordSet] = {}
    for index, row in enumerate(rows):
        try:
            key, rec = _decode_row(row)
        except (ValueError, TypeError) as exc:
            raise StoreCorruptError(path, f"record {index} is malformed ({exc}): {row!r}") from exc
        if key in records:
            raise StoreCorruptError(path, f"record {index} repeats key {key}")
        records[key] = rec
    return version, records


# --- file helpers ------------------------------------------------------------------


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (temp file, fsync, rename, fsync of the directory)."""
    fsutil.write_atomic(path, data)


@contextlib.contextmanager
def _locked(lock_path: Path, timeout: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock_path``; `StoreBusyError` after ``timeout`` s."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreBusyError(f"record store lock {lock_path} held for over {timeout:g}s") from None
                time.sleep(0.002)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# --- provider ----------------------------------------------------------------------


class LocalProvider:
    """The record store in ``directory`` (created on first write).  With ``base``, the store
    must stay inside it: no component from ``base`` down is a symbolic link (checked before
    every read and write).  With ``reload`` (the operator's), the server serving the views is
    told to load a view again whenever its master file changed (`reload_views`)."""

    name = "local"
    capabilities = capabilities_of("local")
    MAX_NOTES = 32  # reload notes kept per zone until a pass takes them

    def __init__(self, directory: Path, *, lock_timeout: float = 30.0, base: Path | None = None,
                 reload: ServerReload | None = None) -> None:
        self.directory = Path(directory)
        self.lock_timeout = lock_timeout
        self.base = Path(base) if base is not None else None
        self.reload = reload
        self._reload_notes: dict[str, list[str]] = {}

    def path(self, zone: str) -> Path:
        zone = normalize_name(zone)
        if not _ZONE_RE.match(zone) or ".." in zone:
            raise ConfigError(f"zone {zone!r} cannot name a store file: use a plain domain name")
        path = self.directory / f"{zone}{SUFFIX}"
        self._no_links(path, path.with_name(path.name + ".lock"))
        return path

    def _no_links(self, *paths: Path) -> None:
        """Refuse when the store directory (below ``base``) or one of ``paths`` is a symbolic
        link or, for ``paths``, not a regular file or directory."""
        if self.base is None:
            return
        check_no_links(self.base, self.directory)
        for path in paths:
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ConfigError(f"local store: {path} is a symbolic link or a special file: the store never "
                                  "follows one out of its directory; remove it")

    def zones(self) -> list[ZoneInfo]:
        self._no_links()
        if not self.directory.is_dir():
            return []
        found = sorted(
            p.name[: -len(SUFFIX)]
            for p in self.directory.iterdir()
            if p.name.endswith(SUFFIX) and not p.name.startswith(".") and p.is_file()
        )
        return [ZoneInfo(id=z, domain=z) for z in found]

    def _load(self, zone: str) -> tuple[int, dict[RecordKey, RecordSet]]:
        path = self.path(zone)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return 0, {}
        except OSError as exc:
            raise ConfigError(f"local store: cannot open {path}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ConfigError(f"local store: {path} is not a regular file")
            data = fh.read()
        return decode_store(path, data, normalize_name(zone))

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        zone = normalize_name(zone)
        version, records = self._load(zone)
        return ZoneSnapshot(
            zone=zone,
            records=filter_names(records.values(), names),
            complete=True,
            version=str(version),
            names=snapshot_names(names),
        )

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        zone = normalize_name(zone)
        path = self.path(zone)
        good, failed = split_valid(zone, changes)
        if not good:
            return ApplyResult(failed=failed)
        self.directory.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_name(path.name + ".lock"), self.lock_timeout):
            self._remove_stray_temps(path)
            version, records = self._load(zone)
            result = apply_changes(records, good, guards)
            if result.changed:
                version += 1
                write_atomic(path, encode_store(zone, version, result.records))
        log.info(
            "apply: zone=%s version=%d applied=%d refused=%d failed=%d",
            zone, version, len(result.applied), len(result.refused), len(failed),
        )
        change_ids = (f"{zone}@{version}",) if result.changed else ()
        if result.changed:
            self._follow_views(zone)
        landed(zone, len(result.applied), len(changes))  # the store is written whole: one step
        return ApplyResult(
            applied=result.applied, refused=result.refused, failed=failed, change_ids=change_ids
        )

    def _remove_stray_temps(self, path: Path) -> None:
        """Temp files left by a writer that crashed (only called under the zone's lock)."""
        for stray in fsutil.remove_stray_temps(self.directory, fsutil.temp_glob(path)):
            log.warning("remove: stray_temp=%s", stray)

    def _follow_views(self, zone: str) -> None:
        """Render the zone's views again after a write (only when they were rendered before).
        The write has landed whatever happens here: a failure is logged, and the next
        reconcile renders them."""
        from gitdns.adapters.zonefile import rerender

        changed: set[str] = set()
        try:
            rerender(self.views_dir(zone), zone, self.read, changed=changed)
        except Exception as exc:  # never undo or fail a write that landed because its views lag
            log.warning("views not rendered after a write: zone=%s error=%s: %s", zone, type(exc).__name__, exc)
        self.reload_views(zone, changed)

    def reload_views(self, zone: str, views: Collection[str]) -> None:
        """Tell the server to load ``views`` of ``zone`` again (their master files changed), when
        the operator set a reload (`gitdns.adapters.serverreload`); nothing otherwise.  What it
        did is logged and kept for `take_reload_notes`; it never raises."""
        if self.reload is None or not views:
            return
        zone = normalize_name(zone)
        try:
            results = reload_views(self.reload, zone, sorted(views))
        except Exception as exc:  # a write that landed never fails because the server was not told
            log.warning("server reload: zone=%s error=%s: %s", zone, type(exc).__name__, exc)
            return
        for result in results:
            if result.ok:
                log.info("server reload: zone=%s view=%s answer=%s", zone, result.view, result.message)
            else:
                log.warning("server reload failed: zone=%s view=%s error=%s", zone, result.view, result.message)
        kept = self._reload_notes.setdefault(zone, [])
        kept.extend(notes(self.reload, zone, results))
        del kept[: -self.MAX_NOTES]

    def take_reload_notes(self, zone: str) -> list[str]:
        """What the reloads since the last call did for ``zone`` (`reload_views`), once."""
        return self._reload_notes.pop(normalize_name(zone), [])

    def views_dir(self, zone: str) -> Path:
        """Where rendered views of ``zone`` go: ``<dir>/<zone>.views/`` (see
        `gitdns.adapters.zonefile.write_views`); with ``base``, checked first: neither it, its
        lock, its ``.serving`` settings nor a file in it (views, weights, the ``.server``
        snippet) is a symbolic link."""
        views = self.path(zone).with_name(f"{normalize_name(zone)}.views")
        self._no_links(views, views.with_name(views.name + ".lock"), views.with_name(views.name + ".serving"))
        if self.base is not None and views.is_dir():
            self._no_links(*views.iterdir())
        return views


DEFAULT_PATH = "store"  # the store directory when spec.provider.settings.path is not given


def check_no_links(base: Path, directory: Path) -> None:
    """Refuse when a component of ``directory`` below ``base`` is a symbolic link (or not a
    directory): the local store never follows a link out of its base."""
    try:
        rel = Path(os.path.relpath(os.path.abspath(directory), os.path.abspath(base)))
    except ValueError:
        rel = Path("..")
    if ".." in rel.parts:
        raise ConfigError(f"local store: {directory} is outside its base directory {base}")
    here = Path(base)
    for part in rel.parts:
        if part == ".":
            continue
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:  # a component of the base is a regular file, or cannot be read
            raise ConfigError(f"local store: {here} cannot be read as a directory ({exc.strerror}): the store "
                              f"directory lies below the base directory {base}") from None
        if not stat.S_ISDIR(mode):
            raise ConfigError(f"local store: {here} is a symbolic link or not a directory: the store never "
                              f"follows a link out of its base directory {base}; remove it")


def store_directory(base_dir: Path, raw: str, zone: str) -> Path:
    """The store directory ``raw`` (``spec.provider.settings.path``, already through
    `refuse_static`: no ``..``, ``~`` or ``.git``) names: relative to ``base_dir``, or an
    absolute path inside it.  Whether it is inside depends on the base the operator chose, so
    only this can tell: a `ConfigError` naming the field says it is not."""
    path = Path(raw)
    if not path.is_absolute():
        return base_dir / path
    base = os.path.normpath(os.path.abspath(base_dir))
    inside = os.path.normpath(path)
    if os.path.commonpath([base, inside]) != base:
        raise ConfigError(f"spec.provider.settings.path (zone {zone}): {shown(raw)} is outside the base directory "
                          f"{base} ({STORE_BASE_HELP}); nothing was written.  Use a path relative to it")
    return base_dir / os.path.relpath(inside, base)


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: Fences = STRICT) -> LocalProvider:
    """Settings: ``path``, the store directory (default ``store``), relative to the base
    directory or an absolute path inside it (`store_directory`), without ``..``, ``~`` or
    ``.git`` (`gitdns.core.providertypes.settings.store_path_error`, checked by `refuse_static` with
    the other settings); ``corednsDir`` (checked there too), ``viewClients`` (read when the
    views are rendered).  The base is the operator's ``store_dir`` (``fences``), else
    ``base_dir``: the state directory, or the repository; how the server is told of a write is
    the operator's too (``fences.reload``), never a setting of the Zone.  No credentials."""
    refuse_static(zone_domain, ref)
    base = fences.store_dir if fences.store_dir is not None else Path(base_dir)
    directory = store_directory(base, ref.setting("path") or DEFAULT_PATH, zone_domain)
    check_no_links(base, directory)
    return LocalProvider(directory, base=base, reload=fences.reload)
