"""Delivery of the orchestrator's CoreDNS files (gitdns/adapters/coredns_delivery.py).

Directory: atomic writes only on change (the mtime stays when the content does), removal of
what the owner no longer publishes, never another owner's files, SIGHUP to a pid file.
ConfigMap: against the HTTP-level fake Kubernetes API (tests/fakes/kube_apiserver.py), which
enforces resourceVersion: only changed keys are touched, a 409 is re-read and retried, a
result over 1 MiB is refused before anything is written.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.coredns_delivery import (
    CONFIGMAP_LIMIT,
    ConfigMapDelivery,
    ConfigMapTooLargeError,
    DirectoryDelivery,
    configmap_size,
)
from gitdns.errors import AuthError, ConfigError, StaleWriteError
from tests.fakes.kube_apiserver import FakeKube, Request

FILES = {
    "tenant-a.hosts": "# x\n10.0.0.1 api.tenant-a.io\n",
    "gitdns-edge.server": "tenant-a.io:53 {\n  errors\n}\n",
}

# --- directory --------------------------------------------------------------------------------


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_first_delivery_writes_every_file_world_readable(tmp_path: Path) -> None:
    result = DirectoryDelivery(tmp_path / "out", "edge").deliver(FILES)
    assert result.written == ("gitdns-edge.server", "tenant-a.hosts") and result.removed == ()
    out = tmp_path / "out"
    assert listing(out) == [".gitdns-edge.owned", "gitdns-edge.server", "tenant-a.hosts"]
    assert (out / "tenant-a.hosts").read_text() == FILES["tenant-a.hosts"]
    assert (out / "tenant-a.hosts").stat().st_mode & 0o777 == 0o644


def test_unchanged_content_is_not_rewritten(tmp_path: Path) -> None:
    delivery = DirectoryDelivery(tmp_path, "edge")
    delivery.deliver(FILES)
    hosts = tmp_path / "tenant-a.hosts"
    old = hosts.stat()
    os.utime(hosts, ns=(old.st_atime_ns, old.st_mtime_ns - 10_000_000_000))  # 10 s back: any write shows
    before = hosts.stat().st_mtime_ns
    result = delivery.deliver(dict(FILES))
    assert not result.changed
    assert hosts.stat().st_mtime_ns == before and hosts.stat().st_ino == old.st_ino


def test_only_the_changed_file_is_written(tmp_path: Path) -> None:
    delivery = DirectoryDelivery(tmp_path, "edge")
    delivery.deliver(FILES)
    server_inode = (tmp_path / "gitdns-edge.server").stat().st_ino
    result = delivery.deliver({**FILES, "tenant-a.hosts": "10.0.0.2 api.tenant-a.io\n"})
    assert result.written == ("tenant-a.hosts",)
    assert (tmp_path / "gitdns-edge.server").stat().st_ino == server_inode
    assert (tmp_path / "tenant-a.hosts").read_text() == "10.0.0.2 api.tenant-a.io\n"


def test_files_no_longer_published_are_removed_but_nobody_elses(tmp_path: Path) -> None:
    (tmp_path / "mine.override").write_text("log\n")
    other = DirectoryDelivery(tmp_path, "core")
    other.deliver({"tenant-z.hosts": "10.9.9.9 z.io\n"})
    edge = DirectoryDelivery(tmp_path, "edge")
    edge.deliver({**FILES, "tenant-b.hosts": "10.0.0.1 b.io\n"})
    result = edge.deliver(FILES)
    assert result.removed == ("tenant-b.hosts",)
    assert listing(tmp_path) == [".gitdns-core.owned", ".gitdns-edge.owned", "gitdns-edge.server",
                                 "mine.override", "tenant-a.hosts", "tenant-z.hosts"]
    assert edge.owned() == set(FILES)
    assert edge.deliver({}).removed == ("gitdns-edge.server", "tenant-a.hosts")
    assert listing(tmp_path) == [".gitdns-core.owned", ".gitdns-edge.owned", "mine.override", "tenant-z.hosts"]


def test_no_temporary_files_are_left(tmp_path: Path) -> None:
    delivery = DirectoryDelivery(tmp_path, "edge")
    for n in range(5):
        delivery.deliver({"tenant-a.hosts": f"10.0.0.{n + 1} a.io\n"})
    assert listing(tmp_path) == [".gitdns-edge.owned", "tenant-a.hosts"]


def test_temporary_files_a_killed_writer_left_are_removed_but_nobody_elses(tmp_path: Path) -> None:
    """kill -9 between a temporary file's write and its rename leaves it (bench/crash.py found
    them piling up); the next process's first delivery removes this owner's, never another's."""
    DirectoryDelivery(tmp_path, "core").deliver({"tenant-z.hosts": "10.9.9.9 z.io\n"})
    edge = DirectoryDelivery(tmp_path, "edge")
    edge.deliver({**FILES, "tenant-b.hosts": "10.0.0.1 b.io\n"})
    left = [".tenant-a.hosts.tmp-4242-0badf00d", ".tenant-b.hosts.tmp-4242-0badf00e",
            "..gitdns-edge.owned.tmp-4242-0badf00f", ".new.hosts.tmp-4242-0badf010"]
    others = [".tenant-z.hosts.tmp-77-00000001", "..gitdns-core.owned.tmp-77-00000002", ".mine.override.tmp-1-2"]
    for name in [*left, *others]:
        (tmp_path / name).write_text("half of a fi")
    restarted = DirectoryDelivery(tmp_path, "edge")
    restarted.deliver({**FILES, "new.hosts": "10.0.0.3 n.io\n"})  # tenant-b gone, new.hosts new
    assert listing(tmp_path) == sorted([".gitdns-core.owned", ".gitdns-edge.owned", "gitdns-edge.server", "new.hosts",
                                        "tenant-a.hosts", "tenant-z.hosts", *others])


@pytest.mark.parametrize("name", ["../escape.hosts", ".hidden", "a/b", "spaced name"])
def test_bad_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError):
        DirectoryDelivery(tmp_path, "edge").deliver({name: "x"})
    assert listing(tmp_path) == []


def test_a_changed_delivery_signals_the_pid_file(tmp_path: Path) -> None:
    script = "import signal,sys,time\nsignal.signal(signal.SIGHUP, lambda *a: (print('hup', flush=True)))\n" \
             "print('ready', flush=True)\ntime.sleep(30)\n"
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        pid_file = tmp_path / "dnsmasq.pid"
        pid_file.write_text(f"{proc.pid}\n")
        delivery = DirectoryDelivery(tmp_path / "out", "edge", pid_file=pid_file)
        assert delivery.deliver(FILES).signalled
        assert proc.stdout.readline().strip() == "hup"
        assert not delivery.deliver(FILES).signalled  # nothing changed: no signal
    finally:
        proc.kill()
        proc.wait()


def test_a_missing_pid_file_is_not_fatal(tmp_path: Path) -> None:
    result = DirectoryDelivery(tmp_path / "out", "edge", pid_file=tmp_path / "nope.pid").deliver(FILES)
    assert result.written and not result.signalled


def test_an_unreadable_manifest_owns_nothing(tmp_path: Path) -> None:
    (tmp_path / ".gitdns-edge.owned").write_text("{not json")
    (tmp_path / "stray.hosts").write_text("x")
    DirectoryDelivery(tmp_path, "edge").deliver(FILES)
    assert (tmp_path / "stray.hosts").exists()


# --- ConfigMap ----------------------------------------------------------------------------------

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client  # noqa: E402

NS, NAME = "kube-system", "coredns-custom"
CM = ("", "v1", "configmaps")
USER_KEY = "log.override"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.create(*CM, {"metadata": {"name": NAME, "namespace": NS}, "data": {USER_KEY: "log\n"}})
    kube.start()
    yield kube
    kube.stop()


def api_for(fake: FakeKube) -> Any:
    cfg = client.Configuration()
    cfg.host = fake.base_url
    return client.CoreV1Api(client.ApiClient(cfg))


def delivery(fake: FakeKube, **kw: Any) -> ConfigMapDelivery:
    return ConfigMapDelivery(NS, NAME, "edge", api=api_for(fake), sleep=lambda _s: None, **kw)


def stored(fake: FakeKube) -> dict[str, Any]:
    return fake.get(*CM, NAME, namespace=NS)


def puts(fake: FakeKube) -> int:
    return fake.count("PUT", f"/configmaps/{NAME}")


def test_configmap_gets_our_keys_and_keeps_the_users(fake: FakeKube) -> None:
    result = delivery(fake).deliver(FILES)
    assert result.written == ("gitdns-edge.server", "tenant-a.hosts") and result.attempts == 1
    cm = stored(fake)
    assert cm["data"] == {USER_KEY: "log\n", **FILES}
    assert cm["metadata"]["annotations"]["gitdns.io/owned-edge"] == "gitdns-edge.server,tenant-a.hosts"
    assert puts(fake) == 1 and fake.count("PATCH") == 0


def test_configmap_unchanged_is_not_written(fake: FakeKube) -> None:
    d = delivery(fake)
    d.deliver(FILES)
    rv = stored(fake)["metadata"]["resourceVersion"]
    assert not d.deliver(dict(FILES)).changed
    assert puts(fake) == 1 and stored(fake)["metadata"]["resourceVersion"] == rv


def test_configmap_only_changed_keys_are_touched(fake: FakeKube) -> None:
    d = delivery(fake)
    d.deliver({**FILES, "tenant-b.hosts": "10.0.0.1 b.io\n"})
    before = stored(fake)["data"]
    result = d.deliver({**FILES, "tenant-a.hosts": "10.0.0.3 api.tenant-a.io\n"})
    assert result.written == ("tenant-a.hosts",) and result.removed == ("tenant-b.hosts",)
    after = stored(fake)["data"]
    assert after == {USER_KEY: "log\n", "gitdns-edge.server": before["gitdns-edge.server"],
                     "tenant-a.hosts": "10.0.0.3 api.tenant-a.io\n"}
    assert stored(fake)["metadata"]["annotations"]["gitdns.io/owned-edge"] == "gitdns-edge.server,tenant-a.hosts"


def test_configmap_409_is_reread_and_retried(fake: FakeKube) -> None:
    raced: list[bool] = []

    def another_writer(request: Request) -> None:
        if request.method == "PUT" and not raced:
            raced.append(True)
            fake.mutate(*CM, NAME, lambda o: o["data"].update({"other.server": "x.io {\n errors\n}\n"}), namespace=NS)

    fake.add_hook(another_writer)
    result = delivery(fake).deliver(FILES)
    assert result.attempts == 2 and puts(fake) == 2
    data = stored(fake)["data"]
    assert data["other.server"].startswith("x.io") and data["tenant-a.hosts"] == FILES["tenant-a.hosts"]
    assert data[USER_KEY] == "log\n"


def test_configmap_conflicts_are_bounded(fake: FakeKube) -> None:
    counter = iter(range(1000))

    def always(request: Request) -> None:
        if request.method == "PUT":
            fake.mutate(*CM, NAME, lambda o: o["data"].update({"n": str(next(counter))}), namespace=NS)

    fake.add_hook(always)
    with pytest.raises(StaleWriteError, match="3 attempts"):
        delivery(fake, max_attempts=3).deliver(FILES)
    assert puts(fake) == 3


def test_configmap_over_one_mebibyte_is_refused_before_writing(fake: FakeKube) -> None:
    fake.mutate(*CM, NAME, lambda o: o["data"].update({"big.override": "x" * (CONFIGMAP_LIMIT - 200)}), namespace=NS)
    with pytest.raises(ConfigMapTooLargeError) as info:
        delivery(fake).deliver({"tenant-a.hosts": "10.0.0.1 api.tenant-a.io\n" * 20})
    message = str(info.value)
    assert "1 MiB" in message and "over the Kubernetes limit of 1048576" in message and "--out" in message
    assert info.value.reason == "ConfigMapTooLarge"
    assert puts(fake) == 0


def test_configmap_size_counts_keys_values_and_decoded_binary() -> None:
    assert configmap_size({"ab": "cd"}) == 4
    assert configmap_size({"a": "é"}) == 3
    assert configmap_size({}, {"bin": base64.b64encode(b"12345").decode()}) == 8


def test_configmap_missing_is_a_clear_error(fake: FakeKube) -> None:
    d = ConfigMapDelivery(NS, "absent", "edge", api=api_for(fake))
    with pytest.raises(ConfigError, match="does not exist"):
        d.deliver(FILES)


def test_configmap_forbidden_names_the_rbac(fake: FakeKube) -> None:
    def forbid(request: Request) -> None:
        if request.method == "PUT":
            from tests.fakes.kube_apiserver import ApiError

            raise ApiError(403, "Forbidden", "configmaps is forbidden")

    fake.add_hook(forbid)
    with pytest.raises(AuthError) as info:
        delivery(fake).deliver(FILES)
    assert "get and update" in str(info.value)


def test_configmap_client_is_not_imported_for_directories() -> None:
    code = ("import sys; from gitdns.adapters.coredns_delivery import DirectoryDelivery; "
            "print('kubernetes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"

