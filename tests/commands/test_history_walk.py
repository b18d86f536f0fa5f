"""The git side of `gitdns history` at its edges: a subdirectory path (absent in early commits,
a file where a directory is expected), symlinks and submodules in the tree, objects read in
bulk from the cache, a corrupt cache recovered by fetching again, a shallow cache deepened."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.git.cache import CacheCorrupt, GitCache
from gitdns.commands.history import fmt as histfmt
from gitdns.commands.history import trace as hist
from gitdns.errors import ConfigError
from tests.commands.test_history import EXAMPLE, HOST, Repo, git
from tests.spies import record_calls


def _repo(tmp_path: Path) -> Repo:
    (tmp_path / "repo").mkdir()
    return Repo(tmp_path / "repo")


def _weights(result: hist.History) -> list[str]:
    return [e.commit.subject for e in result.entries if e.status == "changed"]


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """The desired state at the root, then moved below dns/, then a weight changed there."""
    r = Repo(tmp_path_factory.mktemp("moved"))
    r.commit("Alice", "at the root")
    (r.work / "dns").mkdir()
    for child in sorted(EXAMPLE.iterdir()):
        if child.name != ".gitdns":
            git("mv", child.name, f"dns/{child.name}", cwd=r.work)
    r.commit("Bob", "move the desired state below dns/")
    api = "dns/policies/api.yaml"
    r.write(api, r.read(api).replace("weight: 200", "weight: 210"))
    r.commit("Carol", "api: 210")
    return r


def test_a_subdirectory_path_reads_only_below_it(moved: Repo, tmp_path: Path) -> None:
    result = hist.history(HOST, str(moved.bare), path="dns", state_dir=tmp_path)
    # the first commit has no dns/ directory (no files: nothing published), the move adds every
    # record, the weight change changes two
    assert _weights(result) == ["move the desired state below dns/", "api: 210"]
    assert any("weight=210" in histfmt.change_line(c) for c in result.entries[-1].changes)
    at_root = hist.history(HOST, str(moved.bare), state_dir=tmp_path)
    assert "at the root" in _weights(at_root)


def test_a_path_that_is_a_file_is_named(moved: Repo, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"path dns/policies/api.yaml in commit [0-9a-f]{40} is not a directory"):
        hist.history(HOST, str(moved.bare), path="dns/policies/api.yaml", state_dir=tmp_path)


def test_symlinks_are_not_followed_and_submodules_are_skipped(tmp_path: Path) -> None:
    r = _repo(tmp_path)
    r.commit("Alice", "initial")
    (r.work / "policies" / "link.yaml").symlink_to("/etc/hostname")
    nested = r.work / "vendor.yaml"  # an embedded repository: `git add` records it as a submodule
    nested.mkdir()
    git("init", "-q", cwd=nested)
    (nested / "x.yaml").write_text("kind: Zone\n")
    git("add", "x.yaml", cwd=nested)
    git("-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q", "-m", "vendored", cwd=nested)
    api = "policies/api.yaml"
    r.write(api, r.read(api).replace("weight: 200", "weight: 220"))
    r.commit("Bob", "api: 220, a symlink and a submodule")
    listing = git("ls-tree", "-r", "HEAD", cwd=r.work)
    assert "120000 blob" in listing and "160000 commit" in listing  # the tree really holds both
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path / "state")
    last = result.entries[-1]
    assert last.commit.subject == "api: 220, a symlink and a submodule"
    # the symlink is a problem of its own file (never read), the submodule is no file at all
    assert last.status == "changed", last.problems
    assert any("weight=220" in histfmt.change_line(c) for c in last.changes)


def test_bulk_reads_return_each_object_and_name_a_missing_one(tmp_path: Path) -> None:
    r = _repo(tmp_path)
    sha = r.commit("Alice", "initial")
    cache = GitCache(str(r.bare), "main", tmp_path / "work", GitAuth(), 30.0)
    cache.with_repo(lambda repo: repo.git.execute(
        ["git", "fetch", "-q", str(r.bare), f"+refs/heads/main:{cache.ref}"]))
    tree = git("rev-parse", f"{sha}^{{tree}}", cwd=r.work)
    blob = git("rev-parse", f"{sha}:policies/api.yaml", cwd=r.work)
    found = cache.objects([tree, blob, blob])
    assert set(found) == {tree, blob}
    assert found[blob] == ("blob", (r.work / "policies/api.yaml").read_bytes())
    assert found[tree][0] == "tree" and b"policies" in found[tree][1]
    assert cache.sizes([blob]) == {blob: (r.work / "policies/api.yaml").stat().st_size}
    missing = "0" * 40
    with pytest.raises(CacheCorrupt, match=f"object {missing} is missing"):
        cache.objects([blob, missing])
    with pytest.raises(CacheCorrupt, match=f"object {missing} is missing"):
        cache.sizes([missing])
    with pytest.raises(ValueError):
        cache.objects(["HEAD"])  # only object ids: nothing git would read as an option or a revision


def test_a_corrupt_cache_is_wiped_and_fetched_again(tmp_path: Path) -> None:
    r = _repo(tmp_path)
    r.commit("Alice", "initial")
    api = "policies/api.yaml"
    r.write(api, r.read(api).replace("weight: 200", "weight: 230"))
    r.commit("Bob", "api: 230")
    state = tmp_path / "state"
    first = hist.history(HOST, str(r.bare), state_dir=state)
    objects = state / "history" / "cache.git" / "objects"
    packs = list(objects.glob("pack/*.pack"))
    loose = list(objects.glob("??/*"))
    assert packs or loose
    for path in packs + loose:
        path.unlink()
    again = hist.history(HOST, str(r.bare), state_dir=state)
    assert _weights(again) == _weights(first) == ["initial", "api: 230"]
    assert [e.changes for e in again.entries] == [e.changes for e in first.entries]


def test_a_shallow_cache_is_deepened(tmp_path: Path) -> None:
    r = _repo(tmp_path)
    r.commit("Alice", "initial")
    api = "policies/api.yaml"
    for weight in (240, 250):
        r.write(api, r.read(api).replace("weight: 200", f"weight: {weight}").replace("weight: 240",
                                                                                   f"weight: {weight}"))
        r.commit("Bob", f"api: {weight}")
    cache = tmp_path / "state" / "history" / "cache.git"
    cache.parent.mkdir(parents=True)
    git("init", "-q", "--bare", str(cache), cwd=tmp_path)
    git("fetch", "-q", "--depth=1", f"file://{r.bare}", "+refs/heads/main:refs/remotes/origin/main", cwd=cache)
    assert (cache / "shallow").is_file()
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path / "state")
    assert _weights(result) == ["initial", "api: 240", "api: 250"]
    assert not (cache / "shallow").exists()


def test_a_cache_that_stays_unreadable_is_a_retryable_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = _repo(tmp_path)
    r.commit("Alice", "initial")
    calls: list[int] = []

    def corrupt(self: object, ids: object) -> dict[str, tuple[str, bytes]]:
        calls.append(1)
        raise CacheCorrupt("object 1234 is missing")

    monkeypatch.setattr(GitCache, "objects", corrupt)
    monkeypatch.setattr(GitCache, "recover", lambda self: True)
    with pytest.raises(hist.RetryableError, match="cannot be read: object 1234 is missing") as caught:
        hist.history(HOST, str(r.bare), state_dir=tmp_path / "state")
    assert caught.value.reason == "CacheUnreadable"
    assert len(calls) == 2  # tried again once after the cache was wiped


def test_a_file_over_the_read_cap_is_held_unread(tmp_path: Path) -> None:
    from gitdns.core.limits import DEFAULT_LIMITS

    r = _repo(tmp_path)
    r.commit("Alice", "initial")
    r.write("records/huge.yaml", "# " + "x" * DEFAULT_LIMITS.file_bytes + "\n")
    r.commit("Mallory", "a file over the cap")
    r.write("records/huge.yaml", None)
    r.commit("Alice", "remove it")
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path / "state")
    held = [e for e in result.entries if e.commit.subject == "a file over the cap"]
    assert [e.status for e in held] == ["invalid"]
    assert any("records/huge.yaml" in p and "over the cap" in p for p in held[0].problems)
    assert result.entries[-1].status == "fixed"


def test_status_facts_are_kept_by_blob_and_a_broken_facts_file_is_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitdns.commands.history import facts as historyfacts
    from tests.commands.test_history_audit import _status_commit

    r = _repo(tmp_path)
    first_sha = r.commit("Alice", "initial")
    api = "policies/api.yaml"
    r.write(api, r.read(api).replace("weight: 200", "weight: 250"))
    second_sha = r.commit("Bob", "api: 250")
    cid = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"
    one = _status_commit(r, cid, "eu-west-1", first_sha, [f"{HOST}|192.0.2.10"], "", 1_700_100_000)
    _status_commit(r, cid, "eu-west-1", second_sha, [], one, 1_700_200_000)
    parsed = record_calls(monkeypatch, historyfacts, "load_status")
    state = tmp_path / "state"

    def run() -> list[tuple[str, tuple[tuple[str, int], ...], tuple[str, ...]]]:
        result = hist.history(HOST, str(r.bare), state_dir=state)
        return [(e.status, tuple((a.cluster, a.at) for a in e.applied if a.branch), e.notes) for e in result.entries]

    cold = run()
    assert len(parsed) == 4  # two summaries, two health documents
    assert ("health", (), (f"withdrawn {HOST} 192.0.2.10 (unhealthy)",)) in cold
    assert [a for s, a, _ in cold if s == "changed"][-1] == (("eu-west-1", 1_700_200_000),)
    parsed.clear()
    assert run() == cold and parsed == []  # warm: every status blob known by id
    facts = state / "history" / "status-facts.json"
    for broken in ("not json", '{"version": 1, "facts": {"abc": [1, 2, 3]}}', '{"version": 99, "facts": {}}', "[]"):
        facts.write_text(broken)
        parsed.clear()
        assert run() == cold and len(parsed) == 4  # read again from git, and the file rewritten
    parsed.clear()
    assert run() == cold and parsed == []
