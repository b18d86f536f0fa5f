"""`gitdns plan --all-clusters --base REV`: the pull request previewed from git alone, as a CI job
runs it on a fresh clone with no record store and no credentials (docs/cli.md, "gitdns plan").

Each story: the fleet applies the base (real `gitdns agent --once`, one per cluster), the pull
request is committed, its preview is taken on a fresh clone of the repository — which holds no
store — and then the agents apply the head.  The preview must show the change alone (a weight
change as updates of that host's weighted rows; a failover as changes in its zone only), say it
touched no store, and equal what the agents then wrote: its merged zone is the zone after every
agent ran at the head, and the zone at the base plus its changes is that zone too (the
one-pipeline proof of tests/reconcile/test_preview_equals_agent.py, extended to ``--base``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.reconcile.cli_kit import (
    EXAMPLE_REPO,
    GIT_ENV,
    Key,
    Run,
    Workspace,
    Zone,
    cli,
    git,
    record_of,
    without_housekeeping,
)

CLUSTERS = ("eu-west-1", "eu-central-1", "us-east-1")
OWNERSHIP = "kuadrant-"  # ownership TXT: the preview counts them, the comparison is on data records


def _fleet(tmp_path: Path) -> tuple[Workspace, str]:
    ws = Workspace(tmp_path / "ws", EXAMPLE_REPO)
    ws.localize()
    base = ws.commit("the fleet's desired state")
    for cluster in CLUSTERS:
        run = ws.agent_once(cluster)
        assert run.rc == 0, run.describe()
    return ws, base


def _preview(ws: Workspace, base: str, tmp_path: Path, *extra: str) -> tuple[Run, dict[str, Any]]:
    """The preview on a fresh clone (no store there), JSON, with --exit-code."""
    clone = tmp_path / f"clone-{base[:7]}"
    git("clone", "-q", str(ws.bare), str(clone))
    run = cli("plan", "--repo", str(clone), "--all-clusters", "--base", base, "--format", "json", "--exit-code",
              *extra)
    assert run.rc in (0, 3), run.describe()
    assert not (clone / ".gitdns").exists()  # nothing was read from or written to a store
    return run, json.loads(run.out)


def _data(zone: Zone) -> Zone:
    return {k: v for k, v in without_housekeeping(zone).items() if not k[0].startswith(OWNERSHIP)}


def _merged(doc: dict[str, Any], zone: str) -> Zone:
    found = next(z for z in doc["zones"] if z["zone"] == zone)
    return dict(record_of(r) for r in found["merged"])


def _changed(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {z["zone"]: z["changes"] for z in doc["zones"] if z["changes"]}


def _apply_changes(before: Zone, changes: list[dict[str, Any]]) -> Zone:
    out = dict(before)
    for change in changes:
        if change["old"] is not None:
            key, _ = record_of(change["old"])
            out.pop(key, None)
        if change["new"] is not None:
            key, content = record_of(change["new"])
            out[key] = content
    return out


def _agents(ws: Workspace) -> None:
    for cluster in CLUSTERS:
        run = ws.agent_once(cluster)
        assert run.rc == 0, run.describe()


def _proof(ws: Workspace, doc: dict[str, Any], before: dict[str, Zone]) -> None:
    """What the agents wrote at the head is the preview's merged zone, and the zone at the base
    with the preview's changes."""
    after = ws.read()
    for zone in ("example.com", "example.org"):
        wrote = _data(after[zone])
        assert _data(_merged(doc, zone)) == wrote, f"{zone}: the preview's merged zone is not what the agents wrote"
        changes = _changed(doc).get(zone, [])
        assert _data(_apply_changes(_data(before[zone]), changes)) == wrote, f"{zone}: base + changes != head"


def test_a_weight_change_previews_as_updates_of_that_hosts_weighted_rows(tmp_path: Path) -> None:
    ws, base = _fleet(tmp_path)
    before = ws.read()
    policy = ws.work / "policies" / "api.yaml"
    policy.write_text(policy.read_text().replace("weight: 200", "weight: 250"))
    ws.commit("api: GCP clusters take 250")
    run, doc = _preview(ws, base, tmp_path)
    assert run.rc == 3  # changes pending
    changes = _changed(doc)
    assert list(changes) == ["example.com"], changes
    assert {c["action"] for c in changes["example.com"]} == {"update"}
    for change in changes["example.com"]:
        assert change["old"]["name"].endswith(".klb.api.example.com") and change["old"]["type"] == "CNAME"
        assert (change["old"]["weight"], change["new"]["weight"]) == (200, 250)
        assert change["old"]["values"] == change["new"]["values"]
    summary = doc["summary"]
    assert summary["recordChanges"] == len(changes["example.com"]) == 2 and summary["conflicts"] == 0
    assert summary["stalls"] == 0 and summary["zonesChanged"] == ["example.com"]
    assert [s["host"] for z in doc["zones"] for s in z["splits"]] == ["api.example.com"]
    _agents(ws)
    _proof(ws, doc, before)


def test_a_failover_previews_as_changes_in_its_zone_only(tmp_path: Path) -> None:
    ws, base = _fleet(tmp_path)
    before = ws.read()
    ws.set_groups("example-com", 2, ["site-b"])
    ws.commit("example.com fails over to site-b")
    run, doc = _preview(ws, base, tmp_path)
    assert run.rc == 3
    changes = _changed(doc)
    assert list(changes) == ["example.com"], changes
    zone = next(z for z in doc["zones"] if z["zone"] == "example.com")
    failover = zone["failover"]
    assert (failover["groupsBefore"], failover["groupsAfter"]) == (["site-a", "site-b"], ["site-b"])
    assert (failover["serialBefore"], failover["serialAfter"]) == (1, 2)
    assert failover["leaving"] and not failover["joining"]
    removed: set[Key] = {record_of(c["old"])[0] for c in changes["example.com"] if c["new"] is None}
    assert removed and all(name.endswith("example.com") for name, _, _ in removed)
    _agents(ws)
    _proof(ws, doc, before)


def test_a_branch_cut_before_the_base_moved_still_shows_its_change(tmp_path: Path) -> None:
    """The pull request's commit is older than the base it merges into: the preview takes it as
    its merge (newer), so the agents' owners do not yield to the base's, and the change shows."""
    ws, _ = _fleet(tmp_path)
    git("checkout", "-q", "-b", "ttl", cwd=ws.work)
    zone = ws.work / "zones" / "example-com.yaml"
    zone.write_text(zone.read_text().replace("loadbalancedInner: 60", "loadbalancedInner: 45"))
    git("add", ".", cwd=ws.work)
    old = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000"}
    subprocess.run(["git", "commit", "-q", "-m", "example.com: inner TTL 45"], cwd=ws.work, env=old, check=True)
    git("push", "-q", "origin", "ttl", cwd=ws.work)
    git("checkout", "-q", "main", cwd=ws.work)
    ws.write("records/extra.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata: {name: extra}\n"
             "spec:\n  zone: example-org\n  records: [{name: extra, type: A, values: [192.0.2.77]}]\n")
    base = ws.commit("main moves on")
    clone = tmp_path / "clone"
    git("clone", "-q", "-b", "ttl", str(ws.bare), str(clone))
    run = cli("plan", "--repo", str(clone), "--all-clusters", "--base", "origin/main", "--format", "json")
    assert run.rc == 0, run.describe()
    doc = json.loads(run.out)
    assert any("older than the base" in note for note in doc["notes"]), doc["notes"]
    ttl = [c for c in _changed(doc).get("example.com", []) if c["old"] and c["old"]["ttl"] == 60]
    assert ttl and all(c["new"]["ttl"] == 45 for c in ttl), _changed(doc)
    assert not any(p["conflicts"] for z in doc["zones"] for p in z["plans"])
    assert base  # the base is main's head, which the branch does not contain


def test_a_base_git_does_not_know_is_a_clear_error(tmp_path: Path) -> None:
    ws, _ = _fleet(tmp_path)
    run = cli("plan", "--repo", str(ws.work), "--all-clusters", "--base", "no-such-branch")
    assert run.rc == 1 and "--base 'no-such-branch': not a revision" in run.err and "git fetch" in run.err, run.err
    dry = cli("apply", "--repo", str(ws.work), "--all-clusters", "--base", "HEAD")
    assert dry.rc == 1 and "needs --dry-run" in dry.err


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_the_preview_says_it_read_no_store_and_where_health_comes_from(tmp_path: Path, fmt: str) -> None:
    ws, base = _fleet(tmp_path)
    ws.fetch_status()
    run = cli("plan", "--repo", str(ws.work), "--all-clusters", "--base", base, "--format", fmt)
    assert run.rc == 0, run.describe()
    assert "no record store and no provider read" in run.out
    health = [line for line in run.out.splitlines() if "health: from the status branches of" in line]
    assert len(health) == 1 and all(c in health[0] for c in CLUSTERS), run.out
    assert "has published no status" not in run.out  # said once, not per plan
    assert run.out.splitlines()[2 if fmt == "markdown" else 0].strip("*").startswith("no record changes")
