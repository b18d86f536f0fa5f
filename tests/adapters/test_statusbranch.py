"""Status branches against local bare repositories, and `gitdns status` aggregation."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.status.branch import PUBLISH_CACHE, StatusBranch, read_all
from gitdns.adapters.status.cache import GitOut, remote_error, sanitize
from gitdns.commands.status.view import aggregate, to_json, to_text
from gitdns.core.status.doc import StatusTree, commit_message, dump, parse_trailers
from gitdns.errors import ConfigError, RetryableError, UnreachableError

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "1700000000 +0000",
       "GIT_COMMITTER_DATE": "1700000000 +0000"}
FILES = {"summary.yaml": "ready: true\n", "zones/example.com.yaml": "zone: example.com\n"}


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """A bare remote with a desired branch ``main``; force pushes and deletes are refused."""
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", "-b", "main", str(remote), cwd=tmp_path)
    git("config", "receive.denyNonFastForwards", "true", cwd=remote)
    git("config", "receive.denyDeletes", "true", cwd=remote)
    work = tmp_path / "desired"
    git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    (work / "zones.yaml").write_text("kind: Zone\n")
    git("add", "zones.yaml", cwd=work)
    git("commit", "-q", "-m", "desired", cwd=work)
    git("push", "-q", str(remote), "main", cwd=work)
    return remote


def tip(remote: Path, branch: str) -> str:
    return git("rev-parse", f"refs/heads/{branch}", cwd=remote)


def tree_files(remote: Path, ref: str) -> dict[str, str]:
    names = git("ls-tree", "-r", "--name-only", ref, cwd=remote).splitlines()
    return {n: subprocess.run(["git", "show", f"{ref}:{n}"], cwd=remote, check=True, capture_output=True,
                              text=True).stdout for n in names}


def parents(remote: Path, sha: str) -> list[str]:
    return git("rev-list", "--parents", "-n1", sha, cwd=remote).split()[1:]


def count(remote: Path, branch: str) -> int:
    return int(git("rev-list", "--count", f"refs/heads/{branch}", cwd=remote))


# -- publish ---------------------------------------------------------------------------------


def test_first_publish_is_an_orphan_whose_tree_is_exactly_the_files(bare: Path, tmp_path: Path) -> None:
    main = tip(bare, "main")
    sb = StatusBranch(str(bare), "c1", workdir=tmp_path / "w")
    msg = commit_message("eu-1", True, main[:7], "1 zone", {"Desired-Revision": main, "Serial": "1"})
    sha = sb.publish(FILES, msg)
    assert sha is not None and tip(bare, "gitdns-status/c1") == sha
    assert parents(bare, sha) == []
    assert tree_files(bare, sha) == FILES
    body = git("log", "-1", "--format=%B", sha, cwd=bare)
    assert body.splitlines()[0] == f"status(eu-1): Ready {main[:7]} 1 zone"
    assert parse_trailers(body)["Desired-Revision"] == main
    assert tip(bare, "main") == main
    refs = git("for-each-ref", "--format=%(refname)", cwd=bare).splitlines()
    assert sorted(refs) == ["refs/heads/gitdns-status/c1", "refs/heads/main"]


def test_unchanged_files_make_no_commit(bare: Path, tmp_path: Path) -> None:
    sb = StatusBranch(str(bare), "c1", workdir=tmp_path / "w")
    first = sb.publish(FILES, "one")
    assert sb.publish(dict(reversed(list(FILES.items()))), "two") is None
    assert tip(bare, "gitdns-status/c1") == first and count(bare, "gitdns-status/c1") == 1
    # a fresh cache (another pod, same cluster) sees the same: unchanged
    assert StatusBranch(str(bare), "c1", workdir=tmp_path / "w2").publish(FILES, "three") is None


def test_changed_files_fast_forward_and_replace_the_tree(bare: Path, tmp_path: Path) -> None:
    main = tip(bare, "main")
    sb = StatusBranch(str(bare), "c1", workdir=tmp_path / "w")
    first = sb.publish(FILES, "one")
    files = {"summary.yaml": "ready: false\n", "zones/b.example.yaml": "zone: b.example\n", "groups.yaml": "x: 1\n"}
    second = sb.publish(files, "two")
    assert second is not None and parents(bare, second) == [first]
    assert tree_files(bare, second) == files  # the old zone file is gone: the tree is exactly `files`
    assert sb.publish({}, "empty") is not None and tree_files(bare, "gitdns-status/c1") == {}
    assert tip(bare, "main") == main


def test_bad_paths_are_refused(bare: Path, tmp_path: Path) -> None:
    sb = StatusBranch(str(bare), "c1", workdir=tmp_path / "w")
    for path in ("/abs.yaml", "a/../b.yaml", ".git/config", "a//b", "", "x\ny"):
        with pytest.raises(ValueError):
            sb.publish({path: "x"}, "m")
    with pytest.raises(ValueError):
        sb.publish({"a": "x", "a/b": "y"}, "m")


def test_same_cluster_id_in_turn_rebuilds_on_the_other_tip(bare: Path, tmp_path: Path) -> None:
    one = StatusBranch(str(bare), "c1", workdir=tmp_path / "w1")
    two = StatusBranch(str(bare), "c1", workdir=tmp_path / "w2")
    a = one.publish({"summary.yaml": "a\n"}, "a")
    b = two.publish({"summary.yaml": "b\n"}, "b")
    assert b is not None and parents(bare, b) == [a]
    c = one.publish({"summary.yaml": "c\n"}, "c")
    assert c is not None and parents(bare, c) == [b]


def test_push_refused_because_the_tip_moved_is_rebuilt_and_retried(
        bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = StatusBranch(str(bare), "c1", workdir=tmp_path / "w1")
    two = StatusBranch(str(bare), "c1", workdir=tmp_path / "w2")
    base = one.publish({"summary.yaml": "base\n"}, "base")
    real_push = two._push
    calls: list[bool] = []
    moved: list[str | None] = []

    def racing_push(commit: str) -> bool:
        if not moved:  # another writer lands between our read of the tip and our push
            moved.append(one.publish({"summary.yaml": "one\n"}, "one"))
        calls.append(real_push(commit))
        return calls[-1]

    monkeypatch.setattr(two, "_push", racing_push)
    landed = two.publish({"summary.yaml": "two\n"}, "two")
    assert calls == [False, True]  # refused (not a fast-forward), then rebuilt on the new tip
    assert landed is not None and parents(bare, landed) == [moved[0]] and parents(bare, moved[0]) == [base]
    assert tree_files(bare, landed) == {"summary.yaml": "two\n"}


def test_twenty_publishers_in_parallel_all_land(bare: Path, tmp_path: Path) -> None:
    barrier = threading.Barrier(20)
    results: dict[str, str | None] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        sb = StatusBranch(str(bare), f"cluster-{i:02d}", workdir=tmp_path / f"w{i}")
        barrier.wait()
        try:
            results[sb.cluster_id] = sb.publish({"summary.yaml": f"cluster: c{i}\n"}, f"status {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 20 and all(results.values())
    for cid, sha in results.items():
        assert tip(bare, f"gitdns-status/{cid}") == sha
    trees = read_all(str(bare), workdir=tmp_path / "reader")
    assert {cid: t.files for cid, t in trees.items()} == {
        f"cluster-{i:02d}": {"summary.yaml": f"cluster: c{i}\n"} for i in range(20)}


def test_same_cluster_id_in_parallel_all_land_without_force(bare: Path, tmp_path: Path) -> None:
    barrier = threading.Barrier(6)
    landed: list[str | None] = []

    def run(i: int) -> None:
        sb = StatusBranch(str(bare), "shared", workdir=tmp_path / f"w{i}", max_attempts=20)
        barrier.wait()
        landed.append(sb.publish({"summary.yaml": f"writer: {i}\n"}, f"w{i}"))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(landed) == 6 and all(landed)
    history = git("rev-list", "refs/heads/gitdns-status/shared", cwd=bare).splitlines()
    assert sorted(history) == sorted(s for s in landed if s)  # a line of 6 commits: nothing lost


# -- crash recovery --------------------------------------------------------------------------


def _plant_debris(cache: Path) -> None:
    (cache / "refs" / "status" / "c1.lock").parent.mkdir(parents=True, exist_ok=True)
    (cache / "refs" / "status" / "c1.lock").write_text("half")
    (cache / "packed-refs.lock").write_text("")
    (cache / "objects" / "ab").mkdir(parents=True, exist_ok=True)
    (cache / "objects" / "ab" / "tmp_obj_XyZ").write_bytes(b"\x78\x01half-written")
    (cache.parent / f"{cache.name}.tmp-999-1").mkdir()


def test_a_killed_publisher_recovers_on_restart(bare: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    StatusBranch(str(bare), "c1", workdir=workdir).publish(FILES, "one")
    cache = workdir / PUBLISH_CACHE
    _plant_debris(cache)
    again = StatusBranch(str(bare), "c1", workdir=workdir)  # the restarted process
    sha = again.publish({"summary.yaml": "after restart\n"}, "two")
    assert sha is not None and tip(bare, "gitdns-status/c1") == sha
    assert not list(cache.rglob("*.lock")) and not list(cache.rglob("tmp_obj_*"))
    assert not list(workdir.glob(f"{PUBLISH_CACHE}.tmp-*"))


def test_a_lock_appearing_mid_life_does_not_lose_the_push(bare: Path, tmp_path: Path) -> None:
    sb = StatusBranch(str(bare), "c1", workdir=tmp_path / "w")
    sb.publish(FILES, "one")
    _plant_debris(tmp_path / "w" / PUBLISH_CACHE)
    landed = sb.publish({"summary.yaml": "x\n"}, "two")  # tracking the tip fails; the cache is reset
    assert landed is not None and tip(bare, "gitdns-status/c1") == landed
    assert not (tmp_path / "w" / PUBLISH_CACHE).exists()
    sha = sb.publish({"summary.yaml": "y\n"}, "three")  # rebuilt cache, fetched tip, fast-forward
    assert sha is not None and parents(bare, sha) == [landed]


def test_a_lock_on_the_fetch_ref_fails_once_then_recovers(bare: Path, tmp_path: Path) -> None:
    first = StatusBranch(str(bare), "c1", workdir=tmp_path / "w1")
    second = StatusBranch(str(bare), "c1", workdir=tmp_path / "w2")
    first.publish(FILES, "one")
    moved = second.publish({"summary.yaml": "two\n"}, "two")
    lock = tmp_path / "w1" / PUBLISH_CACHE / "refs" / "status" / "c1.lock"
    lock.write_text("")  # appears while `first` runs: no sweep until restart
    with pytest.raises(RetryableError) as info:
        first.publish({"summary.yaml": "three\n"}, "three")
    assert info.value.reason == "StatusCacheError"
    sha = first.publish({"summary.yaml": "three\n"}, "three")
    assert sha is not None and parents(bare, sha) == [moved]
    assert tree_files(bare, "gitdns-status/c1") == {"summary.yaml": "three\n"}


def test_a_half_made_cache_is_rebuilt(bare: Path, tmp_path: Path) -> None:
    (tmp_path / "w" / PUBLISH_CACHE / "objects").mkdir(parents=True)  # killed during `git init`
    assert StatusBranch(str(bare), "c1", workdir=tmp_path / "w").publish(FILES, "one") is not None


# -- unreachable remotes ---------------------------------------------------------------------


def test_missing_remote_is_unreachable(tmp_path: Path) -> None:
    sb = StatusBranch(str(tmp_path / "nowhere.git"), "c1", workdir=tmp_path / "w")
    with pytest.raises(UnreachableError):
        sb.publish(FILES, "m")
    with pytest.raises(UnreachableError):
        read_all(str(tmp_path / "nowhere.git"), workdir=tmp_path / "r")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_hanging_remote_times_out_as_unreachable(tmp_path: Path, silent_port: int) -> None:
    url = f"git://127.0.0.1:{silent_port}/status.git"
    sb = StatusBranch(url, "c1", workdir=tmp_path / "w", timeout=1.0)
    with pytest.raises(UnreachableError) as info:
        sb.publish(FILES, "m")
    assert "timed out" in str(info.value)


def test_messages_never_carry_url_credentials(tmp_path: Path) -> None:
    assert sanitize("fatal: https://bot:s3cret@git.example.com/x.git") == "fatal: https://***@git.example.com/x.git"
    sb = StatusBranch("http://bot:s3cret@127.0.0.1:9/x.git", "c1", workdir=tmp_path / "w", timeout=5)
    with pytest.raises(UnreachableError) as info:
        sb.publish(FILES, "m")
    assert "s3cret" not in str(info.value) and "s3cret" not in repr(sb)


# -- read ------------------------------------------------------------------------------------


def test_read_all_and_read_one(bare: Path, tmp_path: Path) -> None:
    assert read_all(str(bare), workdir=tmp_path / "r") == {}
    for cid in ("a", "b"):
        StatusBranch(str(bare), cid, workdir=tmp_path / cid).publish(
            {"summary.yaml": f"cluster: {cid}\n", f"zones/{cid}.example.yaml": "zone: x\n"}, f"status {cid}")
    trees = read_all(str(bare), workdir=tmp_path / "r")
    assert sorted(trees) == ["a", "b"]
    assert trees["a"].files == {"summary.yaml": "cluster: a\n", "zones/a.example.yaml": "zone: x\n"}
    assert trees["a"].message == "status a\n" and trees["a"].time > 0
    assert trees["b"].sha == tip(bare, "gitdns-status/b")
    reader = StatusBranch(str(bare), "a", workdir=tmp_path / "one")
    assert reader.read_one() == trees["a"] and reader.read_one("b") == trees["b"]
    assert reader.read_one("absent") is None


# -- aggregation (gitdns status) -------------------------------------------------------------


def _tree(cid: str, summary: dict[str, Any], zones: dict[str, dict[str, Any]] | None = None) -> StatusTree:
    files = {"summary.yaml": dump(summary)}
    files.update({f"zones/{z}.yaml": dump(doc) for z, doc in (zones or {}).items()})
    return StatusTree(f"{cid}-sha", files, "m\n", 1700000000)


def _summary(name: str, ready: bool, policies: dict[str, Any], applied: str = "1700000000.abc1234",
             conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"cluster": name, "clusterId": f"id-{name}", "mode": "default", "group": None,
            "desiredRevision": "1700000000.abc1234", "appliedRevision": applied,
            "attemptedRevision": applied, "ready": ready,
            "conditions": conditions or [{"type": "Ready", "status": "True" if ready else "False",
                                          "reason": "Reconciled" if ready else "ProviderError", "message": ""}],
            "policies": policies, "heartbeat": "2024-01-01T10:00Z"}


def _fleet() -> dict[str, StatusTree]:
    web = {"ready": True, "hosts": ["api.example.com"], "message": ""}
    return {
        "id-eu": _tree("id-eu", _summary("eu", True, {"web": web, "mail": {"ready": True, "hosts": []}}),
                       {"example.com": {"zone": "example.com", "provider": "local", "held": False, "problems": [],
                                        "owned": [{"name": "api.example.com", "type": "A", "ttl": 60,
                                                   "values": ["1.1.1.1"]}], "conflicts": [], "lastChangeIds": []}}),
        "id-us": _tree("id-us", _summary("us", False, {
            "web": {"ready": False, "hosts": ["api.example.com"], "message": "zone held"},
            "mail": {"ready": False, "hosts": ["mx.example.com"], "message": "provider down"}},
            applied="1699999999.0000000",
            conditions=[{"type": "Ready", "status": "False", "reason": "ProviderError", "message": "503"},
                        {"type": "Stalled", "status": "True", "reason": "MassChangeRefused", "message": "40%"},
                        {"type": "Reconciling", "status": "False", "reason": "Done", "message": ""}]),
            {"example.com": {"zone": "example.com", "held": True, "problems": ["bad file"], "owned": []}}),
        "id-ap": _tree("id-ap", _summary("ap", True, {"web": web, "dns-only": {"ready": True, "hosts": []}})),
    }


def test_policy_is_ready_only_when_every_cluster_with_hosts_says_so() -> None:
    trees = _fleet()
    agg = aggregate(trees)
    assert agg["policies"]["web"] == {"ready": False, "clusters": ["id-ap", "id-eu", "id-us"], "lagging": ["id-us"],
                                      "hosts": ["api.example.com"], "messages": {"id-us": "zone held"}}
    assert agg["policies"]["mail"]["ready"] is False and agg["policies"]["mail"]["clusters"] == ["id-us"]
    assert agg["policies"]["dns-only"]["ready"] is False  # no cluster publishes a host for it
    assert agg["policies"]["dns-only"]["clusters"] == []
    assert agg["ready"] is False

    trees["id-us"] = _tree("id-us", _summary("us", True, {"web": {"ready": True, "hosts": ["api.example.com"]}}))
    agg = aggregate(trees)
    assert agg["policies"]["web"]["ready"] is True and agg["policies"]["web"]["lagging"] == []
    assert agg["policies"]["mail"]["ready"] is False  # now nobody has hosts for it


def test_cluster_rows_show_revisions_and_what_is_not_ok() -> None:
    agg = aggregate(_fleet())
    us, eu = agg["clusters"]["id-us"], agg["clusters"]["id-eu"]
    assert eu["ready"] and eu["upToDate"] and eu["notOk"] == [] and eu["zones"]["example.com"]["owned"] == 1
    assert not us["ready"] and not us["upToDate"]
    assert [c["type"] for c in us["notOk"]] == ["Ready", "Stalled"]
    assert us["heldZones"] == ["example.com"]
    assert agg["counts"] == {"clusters": 3, "clustersReady": 2, "policies": 3, "policiesReady": 0}


def test_unreadable_status_counts_as_not_ready() -> None:
    trees = {"id-x": StatusTree("s", {"summary.yaml": "ready: [\n"}, "", 0),
             "id-y": StatusTree("s", {"zones/a.yaml": "zone: a\n"}, "", 0)}
    agg = aggregate(trees)
    assert not agg["clusters"]["id-x"]["ready"] and agg["clusters"]["id-x"]["errors"]
    assert agg["clusters"]["id-y"]["errors"] == ["summary.yaml: missing"]


def test_filter_by_cluster_id_or_name() -> None:
    assert list(aggregate(_fleet(), cluster="eu")["clusters"]) == ["id-eu"]
    assert list(aggregate(_fleet(), cluster="id-us")["clusters"]) == ["id-us"]
    assert aggregate(_fleet(), cluster="nope")["ready"] is False


def test_json_and_text_output() -> None:
    agg = aggregate(_fleet())
    assert json.loads(to_json(agg)) == agg
    assert to_json(agg) == json.dumps(agg, indent=2, sort_keys=True) + "\n"
    text = to_text(agg)
    lines = text.splitlines()
    assert lines[0].split() == ["CLUSTER", "ID", "READY", "APPLIED", "APPLIED", "AT", "LAG", "ZONES", "NOT", "OK"]
    us = next(line for line in lines if line.startswith("us "))
    assert "NotReady" in us and "1699999999.0000000*" in us
    assert "Ready=False(ProviderError)" in us and "Stalled=True(MassChangeRefused)" in us and "held:example.com" in us
    web = next(line for line in lines if line.startswith("web "))
    assert web.split()[:3] == ["web", "NotReady", "3"] and "us (zone held)" in web
    assert lines[-1] == "2/3 clusters ready, 0/3 policies ready — NOT READY"


def test_aggregate_of_published_branches(bare: Path, tmp_path: Path) -> None:
    for cid, tree in _fleet().items():
        StatusBranch(str(bare), cid, workdir=tmp_path / cid).publish(tree.files, "m")
    agg = aggregate(read_all(str(bare), workdir=tmp_path / "r"))
    assert sorted(agg["clusters"]) == ["id-ap", "id-eu", "id-us"]
    assert agg["policies"]["web"]["lagging"] == ["id-us"]


def test_file_url_and_deleted_branches_disappear_from_read_all(bare: Path, tmp_path: Path) -> None:
    url = bare.as_uri()  # file://
    for cid in ("a", "b"):
        assert StatusBranch(url, cid, workdir=tmp_path / cid).publish(FILES, cid) is not None
    assert sorted(read_all(url, workdir=tmp_path / "r")) == ["a", "b"]
    git("config", "receive.denyDeletes", "false", cwd=bare)
    git("update-ref", "-d", "refs/heads/gitdns-status/a", cwd=bare)  # a cluster removed by an operator
    assert sorted(read_all(url, workdir=tmp_path / "r")) == ["b"]


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("fatal: Authentication failed for 'https://git.example.com/x.git/'", "AuthError"),
        ("fatal: unable to access 'https://h/x.git/': The requested URL returned error: 403", "AuthError"),
        ("git@h: Permission denied (publickey).", "AuthError"),
        ("fatal: unable to access 'https://h:4010/x.git/': Could not resolve host: h", "UnreachableError"),
    ],
)
def test_remote_errors_are_classified(stderr: str, kind: str) -> None:
    err = remote_error("push", "https://u:p@h/x.git", GitOut(128, b"", stderr))
    assert type(err).__name__ == kind and "u:p@" not in str(err)


def test_bad_cluster_ids_are_refused(tmp_path: Path) -> None:
    for cid in ("", "a/b", "../x", "x.lock", "-x", "a b"):
        with pytest.raises(ConfigError):
            StatusBranch("/nowhere", cid, workdir=tmp_path)


def test_a_later_publish_is_one_push_on_the_tip_it_pushed_and_a_moved_tip_is_read(
        bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tip this publisher pushed is the parent it tries first: one remote git command (the
    push) per later publish; when another writer moved the branch, the push is refused as
    non-fast-forward and the remote tip is read and built on."""
    import gitdns.adapters.status.branch as sb

    calls: list[str] = []
    real = sb.run_remote

    def counting(cache: Any, args: Any, auth: Any, **kw: Any) -> Any:
        calls.append(args[0])
        return real(cache, args, auth, **kw)

    monkeypatch.setattr(sb, "run_remote", counting)
    one = StatusBranch(str(bare), "c-1", workdir=tmp_path / "one")
    one.publish(FILES, "status 1")
    calls.clear()
    second = one.publish({**FILES, "summary.yaml": "ready: false\n"}, "status 2")
    assert calls == ["push"] and tip(bare, "gitdns-status/c-1") == second
    other = StatusBranch(str(bare), "c-1", workdir=tmp_path / "other")  # a second writer moves the branch
    moved = other.publish({**FILES, "summary.yaml": "ready: maybe\n"}, "status from elsewhere")
    calls.clear()
    third = one.publish({**FILES, "summary.yaml": "ready: true\nround: 3\n"}, "status 3")
    assert calls[0] == "push" and "ls-remote" in calls  # refused, then the moved tip was read
    assert third is not None and tip(bare, "gitdns-status/c-1") == third
    assert git("rev-parse", f"{third}^", cwd=bare) == moved  # built on the other writer's commit
