"""The `local` record store: the store contract, file format, concurrency across
processes, corruption and crash safety, views rendered from it, and the provider factory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gitdns.adapters.zonefile import view_file_stem, write_views
from gitdns.core.model import ProviderRef
from gitdns.core.records import RecordSet
from gitdns.errors import ConfigError, PermanentError, RetryableError
from gitdns.providers import local as local_mod
from gitdns.providers.local import LocalProvider, StoreBusyError, StoreCorruptError
from gitdns.providers.memory import MemoryProvider
from gitdns.providers.registry import make_provider
from tests.providers.test_memory import WWW, ZONE, StoreContract, create, update


class TestLocalStore(StoreContract):
    @pytest.fixture
    def provider(self, tmp_path: Path) -> LocalProvider:
        return LocalProvider(tmp_path / "store")


@pytest.fixture
def store(tmp_path: Path) -> LocalProvider:
    return LocalProvider(tmp_path)


def test_name_and_missing_directory(tmp_path: Path) -> None:
    provider = LocalProvider(tmp_path / "absent")
    assert provider.name == "local"
    assert provider.zones() == [] and provider.read(ZONE).records == ()


def test_file_format(store: LocalProvider, worked_example: tuple[RecordSet, ...]) -> None:
    store.apply(ZONE, [create(r) for r in worked_example])
    doc = json.loads((store.directory / "example.com.json").read_text())
    assert {k: doc[k] for k in ("format", "formatVersion", "zone", "version")} == {
        "format": "gitdns-store",
        "formatVersion": 1,
        "zone": ZONE,
        "version": 1,
    }
    us_row = ["klb.api.example.com", "CNAME", "US", 300, None, "US", ["us.klb.api.example.com"]]
    assert us_row in doc["records"]
    assert [
        "geo-eu.klb.api.example.com", "CNAME", "1hrxie-30ics1.klb.api.example.com", 60, 120, None,
        ["1hrxie-30ics1.klb.api.example.com"],
    ] in doc["records"]


# --- concurrency across processes -----------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from gitdns.core.records import Action, Change, RecordSet
    from gitdns.providers.local import LocalProvider
    directory, go, spec = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
    def record(name, rtype, ttl, values):
        return RecordSet(name, rtype, ttl, tuple(values))
    old = record(*spec["old"]) if spec["old"] else None
    new = record(*spec["new"])
    change = Change(Action.UPDATE if old else Action.CREATE, old, new, new.key)
    provider = LocalProvider(directory)
    while not go.exists():
        time.sleep(0.001)
    result = provider.apply("example.com", [change])
    print(json.dumps({"applied": len(result.applied), "refused": len(result.refused)}))
    """
)


def _race(directory: Path, specs: list[dict[str, object]]) -> list[dict[str, int]]:
    go = directory / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(directory), str(go), json.dumps(spec)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for spec in specs
    ]
    go.touch()
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    return [json.loads(out) for out in outs]


def _spec(rec: RecordSet | None) -> list[object] | None:
    return None if rec is None else [rec.name, rec.type, rec.ttl, list(rec.values)]


def test_processes_writing_different_groups_all_land(store: LocalProvider) -> None:
    recs = [RecordSet(f"h{i}.example.com", "A", 60, (f"192.0.2.{i}",)) for i in range(6)]
    results = _race(store.directory, [{"old": None, "new": _spec(r)} for r in recs])
    assert all(r == {"applied": 1, "refused": 0} for r in results)
    snap = store.read(ZONE)
    assert set(snap.records) == set(recs) and snap.version == "6"


def test_processes_writing_same_record_exactly_one_lands(store: LocalProvider) -> None:
    store.apply(ZONE, [create(WWW)])
    news = [WWW.with_values([f"192.0.2.{i}"]) for i in range(10, 16)]
    results = _race(store.directory, [{"old": _spec(WWW), "new": _spec(n)} for n in news])
    assert sorted(r["applied"] for r in results) == [0] * 5 + [1]
    assert sum(r["refused"] for r in results) == 5
    assert store.read(ZONE).by_key()[WWW.key] in news


# --- corruption and crashes ------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b'{"format": "gitdns-store", "formatVersion": 1, "zone": "example.com", "vers',
        b"",
        b'{"format": "something-else"}',
        b'{"format":"gitdns-store","formatVersion":1,"zone":"example.com","version":1,"records":[["x"]]}',
        b'{"format":"gitdns-store","formatVersion":1,"zone":"other.com","version":1,"records":[]}',
    ],
    ids=["truncated", "empty", "foreign", "bad-row", "wrong-zone"],
)
def test_corrupt_file_is_a_clear_error_never_empty(store: LocalProvider, content: bytes) -> None:
    path = store.directory / "example.com.json"
    path.write_bytes(content)
    with pytest.raises(StoreCorruptError) as err:
        store.read(ZONE)
    assert isinstance(err.value, PermanentError) and str(path) in str(err.value)
    with pytest.raises(StoreCorruptError):
        store.apply(ZONE, [create(WWW)])
    assert path.read_bytes() == content  # a write never papers over it


def test_stray_temp_file_is_ignored_and_cleaned(store: LocalProvider) -> None:
    store.apply(ZONE, [create(WWW)])
    stray = store.directory / ".example.com.json.tmp-99999-deadbeef"
    stray.write_bytes(b'{"half written')  # a writer crashed before its rename
    assert store.read(ZONE).records == (WWW,)
    assert [z.domain for z in store.zones()] == [ZONE]
    other = RecordSet("api.example.com", "A", 60, ("192.0.2.5",))
    assert store.apply(ZONE, [create(other)]).ok
    assert not stray.exists()


def test_crash_before_rename_leaves_old_file(store: LocalProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    store.apply(ZONE, [create(WWW)])
    before = (store.directory / "example.com.json").read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(local_mod.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        store.apply(ZONE, [update(WWW, WWW.with_values(["192.0.2.50"]))])
    monkeypatch.undo()
    assert (store.directory / "example.com.json").read_bytes() == before
    assert store.read(ZONE).records == (WWW,)
    assert sorted(p.name for p in store.directory.iterdir()) == ["example.com.json", "example.com.json.lock"]


def test_zone_names_that_are_not_file_names_are_refused(store: LocalProvider) -> None:
    with pytest.raises(ConfigError):
        store.read("../etc")


# --- rendered views (gitdns.adapters.zonefile.write_views over the store) -----------------


def test_render_views_writes_changed_files_only(
    store: LocalProvider, worked_example: tuple[RecordSet, ...]
) -> None:
    store.apply(ZONE, [create(r) for r in worked_example])
    texts = write_views(store.views_dir(ZONE), ZONE, store.read)
    assert sorted(texts) == ["GEO-EU", "US", "default"]
    views = store.directory / "example.com.views"
    assert sorted(p.name for p in views.iterdir()) == [
        "GEO-EU.weights", "GEO-EU.zone", "US.weights", "US.zone", "default.weights", "default.zone",
    ]
    assert "klb.api 300 IN CNAME us.klb.api" in (views / "US.zone").read_text()
    assert "us.klb.api.example.com.\n2.2.2.2 120\n" in (views / "US.weights").read_text()
    stamps = {p.name: p.stat().st_mtime_ns for p in views.iterdir()}
    inodes = {p.name: p.stat().st_ino for p in views.iterdir()}
    assert write_views(store.views_dir(ZONE), ZONE, store.read) == texts
    assert {p.name: p.stat().st_ino for p in views.iterdir()} == inodes  # nothing rewritten
    assert {p.name: p.stat().st_mtime_ns for p in views.iterdir()} == stamps


def test_render_removes_temp_files_a_killed_renderer_left(
    store: LocalProvider, worked_example: tuple[RecordSet, ...]
) -> None:
    store.apply(ZONE, [create(r) for r in worked_example])
    views = store.views_dir(ZONE)
    texts = write_views(views, ZONE, store.read)
    strays = [views / ".US.zone.tmp-99999-deadbeef",  # killed between its write and its rename
              views.with_name(".example.com.views.serving.tmp-99999-0dfe2074")]
    for stray in strays:
        stray.write_bytes(b"half written")
    keep = store.directory / ".example.com.json.tmp-99999-cafef00d"  # the store's, under another lock
    keep.write_bytes(b"{")
    assert write_views(views, ZONE, store.read) == texts  # the same version: nothing to render
    assert [s for s in strays if s.exists()] == []
    assert keep.exists()


# --- provider factory -------------------------------------------------------------------


def test_factory_builds_local_relative_to_base_dir(tmp_path: Path) -> None:
    provider = make_provider(ZONE, ProviderRef("local", (("path", "zones"),)), tmp_path)
    assert isinstance(provider, LocalProvider) and provider.directory == tmp_path / "zones"
    absolute = make_provider(ZONE, ProviderRef("local", (("path", str(tmp_path / "abs")),)), tmp_path)
    assert isinstance(absolute, LocalProvider) and absolute.directory == tmp_path / "abs"
    with pytest.raises(ConfigError, match=r"settings\.path .* is outside the base directory"):
        make_provider(ZONE, ProviderRef("local", (("path", str(tmp_path / "abs")),)), Path("/x"))


def test_factory_builds_memory(tmp_path: Path) -> None:
    assert isinstance(make_provider(ZONE, ProviderRef("memory"), tmp_path), MemoryProvider)


def test_factory_names_the_field_and_known_types(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        make_provider(ZONE, ProviderRef("nope"), tmp_path)
    assert "spec.provider.type" in str(err.value) and "local, memory" in str(err.value)


def test_view_file_names_are_safe() -> None:
    assert view_file_stem("GEO-EU") == "GEO-EU"
    assert view_file_stem("../x/y") == "_.._x_y"


def test_held_lock_times_out_as_retryable(tmp_path: Path) -> None:
    import fcntl
    import os

    store = LocalProvider(tmp_path, lock_timeout=0.05)
    store.apply(ZONE, [create(WWW)])
    fd = os.open(tmp_path / "example.com.json.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(StoreBusyError) as err:
            store.apply(ZONE, [update(WWW, WWW.with_values(["192.0.2.60"]))])
        assert isinstance(err.value, RetryableError)
    finally:
        os.close(fd)
    assert store.read(ZONE).records == (WWW,)
