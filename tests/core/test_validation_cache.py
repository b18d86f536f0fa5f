"""`gitdns.core.blobcache.ValidationCache`: a validation with the cache warm from earlier trees
finds exactly what a cold one finds (the same problems, in the same order, the same desired
state and rejected documents), whatever was edited in between; and an unchanged file is neither
parsed nor checked again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.adapters.repo import load_schemas
from gitdns.core import loader
from gitdns.core.blobcache import ValidationCache, blob_id
from gitdns.core.limits import Unread
from gitdns.core.loader import LoadResult
from gitdns.core.reach import parse_ranges
from gitdns.core.validate import CHECKS, check
from tests.fuzz import mutations
from tests.fuzz.repos import REPOS, mutable, repo_files

SCHEMAS = load_schemas()
NAMES = sorted(REPOS)


def _texts(files: dict[str, bytes]) -> dict[str, str]:
    return {path: data.decode("utf-8", errors="replace") for path, data in files.items()}


def same(warm: LoadResult, cold: LoadResult) -> None:
    assert warm.problems == cold.problems
    assert warm.state == cold.state
    assert warm.rejected == cold.rejected


@dataclass(frozen=True)
class Move:
    """A whole-file edit: ``drop`` it, ``copy`` it to a new path, ``rename`` it, or leave it
    ``unread`` (over the read limits)."""

    what: str
    pick: int

    def run(self, files: dict[str, str]) -> dict[str, str]:
        names = sorted(files)
        if not names:
            return files
        name = names[self.pick % len(names)]
        out = dict(files)
        if self.what == "drop":
            del out[name]
        elif self.what == "copy":
            out[f"copy-{self.pick % 7}/{name}"] = files[name]
        elif self.what == "rename":
            out[f"moved/{name}"] = out.pop(name)
        else:
            out[name] = Unread("the file is over the read limit", "split it", "FileTooLarge", blocks_all=True)
        return out


@dataclass(frozen=True)
class Edit:
    case: mutations.Case

    def run(self, files: dict[str, str]) -> dict[str, str]:
        editable = sorted(f for f in files if not isinstance(files[f], Unread) and f in set(mutable(self.case.repo))
                          and mutations.holds_document(files[f]))
        if not editable:
            return files
        raw = {f: t.encode("utf-8", "surrogatepass") for f, t in files.items() if not isinstance(t, Unread)}
        try:
            mutated = mutations.apply(self.case, raw, editable)
        except (UnicodeDecodeError, ValueError, IndexError):
            return files
        return {**files, mutated.path: mutated.files[mutated.path].decode("utf-8", errors="replace")}


def steps(repo: str) -> st.SearchStrategy[list[Any]]:
    edits = mutations.cases([repo]).map(Edit)
    moves = st.builds(Move, st.sampled_from(["drop", "copy", "rename", "unread"]), mutations.picks)
    return st.lists(st.one_of(edits, edits, edits, moves), min_size=1, max_size=4)


RANGES = ((), parse_ranges("10.0.0.0/8,192.168.0.0/16"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_warm_equals_cold_after_any_edits(data: st.DataObject) -> None:
    repo = data.draw(st.sampled_from(NAMES))
    files = _texts(repo_files(repo))
    cache = ValidationCache()
    same(check(files, SCHEMAS, cache), check(files, SCHEMAS))
    for step in data.draw(steps(repo)):
        files = step.run(files)
        ranges = data.draw(st.sampled_from(RANGES))
        same(check(files, SCHEMAS, cache, ranges), check(files, SCHEMAS, probe_ranges=ranges))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_warm_equals_cold_back_and_forth(data: st.DataObject) -> None:
    """Trees that return to an earlier content (a revert) or swap files between commits."""
    repo = data.draw(st.sampled_from(NAMES))
    base = _texts(repo_files(repo))
    edited = base
    for step in data.draw(steps(repo)):
        edited = step.run(edited)
    cache = ValidationCache()
    for files in (base, edited, base, edited, edited):
        same(check(files, SCHEMAS, cache), check(files, SCHEMAS))


def _repo(hosts: int) -> dict[str, str]:
    zone = ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\n"
            "spec: {domain: example.com, provider: {type: local}}\n")
    listeners = "".join(f"      - {{hostname: h{i}.example.com}}\n" for i in range(hosts))
    clusters = "---\n".join(
        f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: c{c}}}\n"
        f"spec:\n  id: c{c}-uid\n  geo: GEO-EU\n  gateways:\n  - name: web\n    namespace: gw\n"
        f"    addresses: [192.0.2.{c + 1}]\n    listeners:\n{listeners}" for c in range(3))
    policy = ("apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: web}\n"
              "spec: {targetRef: {gateway: web}, strategy: simple}\n")
    records = ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata: {name: statics}\n"
               "spec:\n  zone: example-com\n  records:\n"
               + "".join(f"  - {{name: s{i}, type: A, values: [\"192.0.2.1\"]}}\n" for i in range(20)))
    return {"zones.yaml": zone, "clusters.yaml": clusters, "policies.yaml": policy, "records/static.yaml": records}


def test_an_unchanged_file_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    files = _repo(50)
    cache = ValidationCache()
    check(files, SCHEMAS, cache)
    parsed: list[str] = []
    real = loader._parse
    monkeypatch.setattr(loader, "_parse", lambda file, text: parsed.append(file) or real(file, text))
    edited = {**files, "records/static.yaml": files["records/static.yaml"].replace("192.0.2.1", "192.0.2.9", 1)}
    same(check(edited, SCHEMAS, cache), check(edited, SCHEMAS))
    assert parsed == ["records/static.yaml", *sorted(edited)]  # the warm load, then the cold one
    assert len(cache) == len(files)  # the file's entry of the tree before is dropped


def test_checks_not_reading_a_changed_kind_are_kept() -> None:
    files = _repo(50)
    cache = ValidationCache()
    check(files, SCHEMAS, cache)
    before = dict(cache.checks.entries)
    edited = {**files, "records/static.yaml": files["records/static.yaml"] + "# touched\n"}
    check(edited, SCHEMAS, cache)
    kept = [key for key, entry in cache.checks.entries.items() if before.get(key) is entry]
    redone = [key for key in cache.checks.entries if key not in kept]
    assert "cnames.serving" in kept and "dnsnames.published" in kept and "ix.gateways" in kept
    assert "hosts.policy_hosts_in_zones" in kept and "check:gitdns.core.checks.addressing.gateway_addresses" in kept
    assert "check:gitdns.core.checks.records.record_values" in redone  # it reads the RecordSets
    for key in redone:  # and each redone one read them
        assert any(source == "record_sets" for source, _ in cache.checks.entries[key][0]), key
    again = dict(cache.checks.entries)
    check(edited, SCHEMAS, cache)  # the same tree again: nothing redone
    assert all(again[key] is entry for key, entry in cache.checks.entries.items())
    assert len([k for k in cache.checks.entries if k.startswith("check:")]) == len(CHECKS)


def test_blob_id_is_git_s() -> None:
    assert blob_id("") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert blob_id("hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_blob_ids_given_by_the_caller_are_used() -> None:
    files = _repo(5)
    cache = ValidationCache()
    ids = {name: f"id-{name}" for name in files}
    first = check(files, SCHEMAS, cache, blob_ids=ids)
    edited = {**files, "policies.yaml": files["policies.yaml"].replace("simple", "loadbalanced")}
    # the caller says the blob is unchanged: the file is not read again (the tree's id is trusted)
    assert check(edited, SCHEMAS, cache, blob_ids=ids).state == first.state
    ids = {**ids, "policies.yaml": "id-2"}
    same(check(edited, SCHEMAS, cache, blob_ids=ids), check(edited, SCHEMAS))


def test_the_collector_is_as_it_was_after_a_check() -> None:
    import gc

    files = _repo(3)
    assert gc.isenabled()
    check(files, SCHEMAS)
    assert gc.isenabled()
    gc.disable()
    try:
        check(files, SCHEMAS)
        assert not gc.isenabled()
    finally:
        gc.enable()
