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
by `gitdns.adapters.zonefile.write_views` (the agent wires the two together).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gitdns import fsutil
from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import capabilities_of
from gitdns.core.records import Change, Guard, RecordKey, RecordSet, ZoneSnapshot, normalize_name
from gitdns.core.store import apply_changes
from gitdns.errors import ConfigError, PermanentError, RetryableError
from gitdns.providers.base import ApplyResult, ZoneInfo
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
    return body.encode("utf-8")


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
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
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
    """The record store in ``directory`` (created on first write)."""

    name = "local"
    capabilities = capabilities_of("local")

    def __init__(self, directory: Path, *, lock_timeout: float = 30.0) -> None:
        self.directory = Path(directory)
        self.lock_timeout = lock_timeout

    def path(self, zone: str) -> Path:
        zone = normalize_name(zone)
        if not _ZONE_RE.match(zone) or ".." in zone:
            raise ConfigError(f"zone {zone!r} cannot name a store file: use a plain domain name")
        return self.directory / f"{zone}{SUFFIX}"

    def zones(self) -> list[ZoneInfo]:
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
            data = path.read_bytes()
        except FileNotFoundError:
            return 0, {}
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
        return ApplyResult(
            applied=result.applied, refused=result.refused, failed=failed, change_ids=change_ids
        )

    def _remove_stray_temps(self, path: Path) -> None:
        """Temp files left by a writer that crashed (only called under the zone's lock)."""
        for stray in self.directory.glob(fsutil.temp_glob(path)):
            log.warning("remove: stray_temp=%s", stray)
            with contextlib.suppress(OSError):
                stray.unlink()

    def views_dir(self, zone: str) -> Path:
        """Where rendered views of ``zone`` go: ``<dir>/<zone>.views/`` (see
        `gitdns.adapters.zonefile.write_views`)."""
        return self.path(zone).with_name(f"{normalize_name(zone)}.views")


DEFAULT_PATH = "store"  # the store directory when spec.provider.settings.path is not given


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path) -> LocalProvider:
    """Settings: ``path``, the store directory (default ``store``; relative to ``base_dir``,
    the repository or state directory).  No credentials."""
    raw = ref.setting("path", DEFAULT_PATH) or DEFAULT_PATH
    directory = Path(raw).expanduser()
    return LocalProvider(directory if directory.is_absolute() else base_dir / directory)
