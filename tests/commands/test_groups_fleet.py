"""The failover workflow on a fleet built as an operator builds one (docs/failover.md): a bare
origin, a work clone of `example-repo/`, and its three clusters each run as `gitdns agent
--once` (``GITDNS_CLUSTER``, its own ``--state-dir``, one shared ``--store-dir`` for the
embedded `local` store) pushing its status branch — ``health.yaml`` among its files — to origin.

* `groups set --push` and `failover simulate` read those status branches where they are:
  origin's ``refs/heads/gitdns-status/*`` (groups fetches), the clone's own
  ``gitdns-status/*`` branches and its remote-tracking ``refs/remotes/origin/gitdns-status/*``
  (simulate); a cluster with no branch keeps "has published no status"; branches that could
  not be read are said to be so, with the reason, and no cluster is said to have published
  nothing.
* A `local` store that holds no file for the zone (the verbs read ``.gitdns/zones`` inside
  the repository unless ``--store-dir`` names the agents' store) is said plainly by `failover
  simulate`, `groups get` and the pull-request text of `groups set`, and the endpoint counts
  carry the caveat; an empty zone that exists is not "absent".

The example's addresses are documentation addresses, and its DNSPolicy probes them: the copy
here moves every gateway and node address to loopback, so the agents' probes never leave the
host.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import gitdns
from gitdns.adapters.status.branch import StatusBranch
from gitdns.commands import EXIT_OK
from gitdns.core.status.doc import dump, load
from gitdns.core.text import md_text
from gitdns.errors import UnreachableError
from tests.commands.test_groups import GIT_ENV, _git_identity, git, run

__all__ = ["_git_identity"]  # the fixture this module shares

EXAMPLE = Path(__file__).resolve().parents[2] / "example-repo"
SOURCE = Path(gitdns.__file__).resolve().parents[1]  # the gitdns under test, for the agents' processes
CLUSTERS = {"eu-west-1": "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63",  # site-a
            "eu-central-1": "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34",  # site-b
            "us-east-1": "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"}  # site-b
# every address a probe could be sent to, moved to loopback
LOOPBACK = {"192.0.2.10": "127.0.0.10", "192.0.2.11": "127.0.0.11", "192.0.2.20": "127.0.0.20",
            "198.51.100.10": "127.0.0.30", "203.0.113.10": "127.0.0.40", '"2001:db8::10"': '"::1"',
            "203.0.113.20": "127.0.0.50", "192.0.2.101": "127.0.0.101", "198.51.100.102": "127.0.0.102",
            "203.0.113.103": "127.0.0.103"}
SITE_A_API = ("127.0.0.10", "127.0.0.11")  # eu-west-1's api.example.com addresses
NO_STATUS = "has published no status"
STATUS_REFSPEC = "+refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*"
ABSENT = ("holds no zone example.com: pass --store-dir (the agents' --store-dir / state directory) to compare "
          "with what they published")
SIMULATE = ("failover", "simulate", "example.com", "--to", "site-b")
CAVEAT = "(counted from no zone at all, not from what the agents published: see the note above)"


@dataclass(frozen=True)
class Fleet:
    root: Path

    @property
    def origin(self) -> Path:
        return self.root / "origin.git"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def store(self) -> Path:
        return self.root / "store"

    def agent(self, cluster: str) -> None:
        """One `gitdns agent --once` of ``cluster``, in its own process (its probes end with it)."""
        state = self.root / "state" / cluster
        state.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **GIT_ENV, "GITDNS_CLUSTER": cluster, "PYTHONPATH": str(SOURCE)}
        done = subprocess.run(
            [sys.executable, "-m", "gitdns.cli", "agent", "--repo", str(self.origin), "--state-dir", str(state),
             "--store-dir", str(self.store), "--lease", "txt", "--git-timeout", "20", "--once", "--listen", ""],
            env=env, cwd=self.root, capture_output=True, text=True, timeout=180, check=False)
        assert done.returncode == 0, f"agent {cluster}: {done.stdout[-3000:]}{done.stderr[-3000:]}"

    def files_of(self, cluster: str) -> dict[str, str]:
        branch = f"gitdns-status/{CLUSTERS[cluster]}"
        listing = git("ls-tree", "-r", "--name-only", branch, cwd=self.origin).split()
        return {path: git("show", f"{branch}:{path}", cwd=self.origin) + "\n" for path in listing}

    def publish(self, cluster: str, files: dict[str, str]) -> None:
        """A new status commit of ``cluster``, pushed to origin as its agent pushes one."""
        branch = StatusBranch(str(self.origin), CLUSTERS[cluster], workdir=self.root / "publish" / cluster)
        assert branch.publish(files, f"status({cluster}): edited by the test") is not None


def _build(root: Path) -> None:
    origin, work = root / "origin.git", root / "work"
    git("init", "-q", "--bare", "-b", "main", str(origin), cwd=root)
    seed = root / "seed"
    shutil.copytree(EXAMPLE, seed, ignore=shutil.ignore_patterns("*.md", ".gitdns"))
    for path in [*seed.glob("clusters/*.yaml"), *seed.glob("tenants/*.yaml")]:
        text = path.read_text(encoding="utf-8")
        for old, new in LOOPBACK.items():
            text = re.sub(rf"(?<![0-9.:]){re.escape(old)}(?![0-9.:])", new, text)
        path.write_text(text, encoding="utf-8")
    (seed / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=seed)
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "example-repo", cwd=seed)
    git("push", "-q", str(origin), "main", cwd=seed)
    git("clone", "-q", str(origin), str(work), cwd=root)
    fleet = Fleet(root)
    fleet.store.mkdir()
    for cluster in CLUSTERS:
        fleet.agent(cluster)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    _build(root)
    return root


@pytest.fixture
def fleet(built: Path, tmp_path: Path) -> Fleet:
    """A copy of the built fleet of this test's own (its clone's origin is the copy's)."""
    root = tmp_path / "fleet"
    shutil.copytree(built, root, symlinks=True)
    git("remote", "set-url", "origin", str(root / "origin.git"), cwd=root / "work")
    return Fleet(root)


def test_the_fleet_is_what_the_user_had(fleet: Fleet) -> None:
    heads = git("for-each-ref", "--format=%(refname)", "refs/heads/gitdns-status/", cwd=fleet.origin).split()
    assert sorted(heads) == sorted(f"refs/heads/gitdns-status/{cid}" for cid in CLUSTERS.values())
    for cluster in CLUSTERS:
        assert "targets" in load(fleet.files_of(cluster)["health.yaml"])
    assert (fleet.store / ".gitdns" / "zones" / "example.com.json").is_file()
    assert not (fleet.work / ".gitdns").exists()  # the clone's own store holds nothing


# -- 1. the status branches are read where they are ------------------------------------------------


def test_set_push_reads_origins_status_branches(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(fleet.work),
                         "--store-dir", str(fleet.store), "--push")
    assert code == EXIT_OK, err
    assert "pushed to origin" in out
    assert NO_STATUS not in out and "could not be read" not in out
    assert "### Endpoints: 0 added, 3 removed\n" in out
    for ip in SITE_A_API:
        assert f"A {ip}" in out.split("### Endpoints")[1].split("### Plans")[0]


def test_a_cluster_without_a_status_branch_keeps_the_sentence(fleet: Fleet,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    git("update-ref", "-d", f"refs/heads/gitdns-status/{CLUSTERS['eu-central-1']}", cwd=fleet.origin)
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(fleet.work),
                         "--store-dir", str(fleet.store))
    assert code == EXIT_OK, err
    assert f"health: eu-central-1 {NO_STATUS}" in out
    git("fetch", "-q", "origin", STATUS_REFSPEC, cwd=fleet.work)
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work), "--store-dir", str(fleet.store))
    assert code == EXIT_OK  # the text lists every cluster's plan
    assert f"health: eu-central-1 {NO_STATUS}" in out
    assert f"us-east-1 {NO_STATUS}" not in out and f"eu-west-1 {NO_STATUS}" not in out


def test_simulate_reads_the_clones_remote_tracking_status_refs(fleet: Fleet,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    git("fetch", "-q", "origin", STATUS_REFSPEC, cwd=fleet.work)
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work), "--store-dir", str(fleet.store))
    assert code == EXIT_OK
    assert NO_STATUS not in out and "fetch them first" not in out
    assert "endpoints added: 0, removed: 3\n" in out


def test_simulate_reads_the_clones_local_status_branches(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    git("fetch", "-q", "origin", "+refs/heads/gitdns-status/*:refs/heads/gitdns-status/*", cwd=fleet.work)
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work), "--store-dir", str(fleet.store))
    assert code == EXIT_OK
    assert NO_STATUS not in out and "fetch them first" not in out


def test_simulate_before_a_fetch_keeps_the_sentence_and_says_how_to_fetch(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work), "--store-dir", str(fleet.store))
    assert code == EXIT_OK  # the clone holds no status branch: true of what was read, kept
    for cluster in CLUSTERS:
        assert f"health: {cluster} {NO_STATUS}" in out
    assert ("note: health: read from this repository's gitdns-status/* branches and refs/remotes/*/gitdns-status/* "
            f"(nothing is fetched): none for {', '.join(sorted(CLUSTERS))}; if their agents pushed them to origin, "
            f"fetch them first: git fetch origin '{STATUS_REFSPEC}'") in out


def test_published_unhealthy_targets_are_withdrawn_in_the_preview(fleet: Fleet,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    files = fleet.files_of("us-east-1")
    health = load(files["health.yaml"])
    assert set(health["targets"]) == {"api.example.com|127.0.0.40", "api.example.com|::1"}
    for target in health["targets"]:
        health["targets"][target] = {"state": "unhealthy", "error": "connection refused"}
    fleet.publish("us-east-1", {**files, "health.yaml": dump(health)})
    git("fetch", "-q", "origin", STATUS_REFSPEC, cwd=fleet.work)
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work),
                       "--store-dir", str(fleet.store))
    assert code == EXIT_OK
    endpoints = out.split("\n\n")[0]
    assert "endpoints added: 0, removed: 3, changed: 1\n" in endpoints
    # every target of us-east-1 is down (eu-central-1's is not: no fail open): its weighted row goes to 0
    before, after = next(line for line in endpoints.splitlines() if line.startswith("~ us.klb.")).split(" -> ")
    assert "(weight=200)" in before and "(weight=0)" in after
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(fleet.work),
                         "--store-dir", str(fleet.store))
    assert code == EXIT_OK, err
    section = out.split("### Endpoints")[1].split("### Plans")[0]
    assert "~ us.klb.api.example.com CNAME" in section and "(weight=0)" in section


def test_status_branches_that_cannot_be_read_are_said_so(fleet: Fleet, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "no-git"  # the desired state outside any git repository
    shutil.copytree(fleet.work, bare, ignore=shutil.ignore_patterns(".git"))
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(bare),
                       "--store-dir", str(fleet.store))
    assert code == EXIT_OK
    assert NO_STATUS not in out
    assert "health: the clusters' status branches could not be read" in out
    assert f"{bare} is not in a git repository" in out


def test_origins_status_branches_not_read_are_said_so(fleet: Fleet, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import gitdns.adapters.status.branch as statusbranch

    def refused(*_: object, **__: object) -> None:
        raise UnreachableError("git fetch of the status branches: connection reset")

    monkeypatch.setattr(statusbranch, "read_all", refused)
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(fleet.work),
                         "--store-dir", str(fleet.store))
    assert code == EXIT_OK, err
    assert NO_STATUS not in out
    assert "health: origin's status branches could not be read (git fetch of the status branches: " \
           "connection reset" in out
    assert "not found there either: taken as healthy" in out  # the clone has none of its own


# -- 2. a `local` store that holds no zone -------------------------------------------------------------


def test_simulate_says_the_local_store_holds_no_zone(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    git("fetch", "-q", "origin", STATUS_REFSPEC, cwd=fleet.work)
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work))
    assert code == EXIT_OK
    store = fleet.work / ".gitdns" / "zones"
    assert f"note: the local store {store} {ABSENT}" in out
    added = next(line for line in out.splitlines() if line.startswith("endpoints added: "))
    assert added.endswith(f", removed: 0 {CAVEAT}") and not added.startswith("endpoints added: 0,")
    code, md, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work),
                      "--format", "markdown")
    assert code == EXIT_OK and f"> {md_text(f'the local store {store} {ABSENT}')}" in md  # markdown-escaped
    assert next(line for line in md.splitlines() if line.startswith("### Endpoints:")).endswith(CAVEAT)
    # with the agents' store: the switch's real effect, and no caveat
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work),
                       "--store-dir", str(fleet.store))
    assert code == EXIT_OK
    assert "holds no zone" not in out and "endpoints added: 0, removed: 3\n" in out


def test_an_empty_zone_that_exists_is_not_absent(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    store = fleet.work / ".gitdns" / "zones"
    store.mkdir(parents=True)
    (store / "example.com.json").write_text(json.dumps(
        {"format": "gitdns-store", "formatVersion": 1, "zone": "example.com", "version": 1, "records": []}))
    code, out, _ = run(capsys, *SIMULATE, "--repo", str(fleet.work))
    assert code == EXIT_OK
    assert "holds no zone" not in out and "counted from no zone" not in out


def test_groups_get_says_the_local_store_holds_no_zone(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "groups", "get", "example.com", "--repo", str(fleet.work))
    assert code == EXIT_OK
    lines = out.splitlines()
    zone_line = next(i for i, line in enumerate(lines) if line.startswith("zone: gitdns-active-groups"))
    assert "absent" in lines[zone_line]
    assert lines[zone_line + 1] == f"note: the local store {fleet.work / '.gitdns' / 'zones'} {ABSENT}"
    assert next(line for line in lines if line.startswith("endpoints added: ")).endswith(CAVEAT)
    code, out, _ = run(capsys, "groups", "get", "example.com", "--repo", str(fleet.work),
                       "--store-dir", str(fleet.store))
    assert code == EXIT_OK
    assert "holds no zone" not in out and "level: the zone mirrors git" in out


def test_set_without_store_dir_says_so_in_the_pull_request(fleet: Fleet,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--repo", str(fleet.work), "--push")
    assert code == EXIT_OK, err
    store = fleet.work / ".gitdns" / "zones"
    assert f"> {md_text(f'the local store {store} {ABSENT}')}" in out  # markdown-escaped
    heading = next(line for line in out.splitlines() if line.startswith("### Endpoints:"))
    assert heading.endswith(f"removed {CAVEAT}") and not heading.startswith("### Endpoints: 0 added")
    assert f"warning: the local store {store} {ABSENT}; the new serial rests on git alone" in err
    assert NO_STATUS not in out  # origin's status branches were read all the same


def test_direct_without_store_dir_warns_that_it_creates_the_zone(fleet: Fleet,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "groups", "set", "example.com", "site-b", "--direct", "--repo", str(fleet.work))
    assert code == EXIT_OK, err
    store = fleet.work / ".gitdns" / "zones"
    assert f"warning: the local store {store} {ABSENT}; this write creates it there" in err
    assert next(line for line in out.splitlines() if line.startswith("endpoints added: ")).endswith(CAVEAT)
    # the agents' store is untouched: their zone still has both groups active
    agents = json.loads((fleet.store / ".gitdns" / "zones" / "example.com.json").read_text())
    assert any("groups=site-a&&site-b" in value for row in agents["records"] for value in row[6])
