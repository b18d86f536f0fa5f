"""`gitdns validate` warns, from git alone, when a committed ActiveGroups serial is at or below
one the clusters already applied: the ``groups.yaml`` of every status branch the work tree's
repository holds (local or remote-tracking; nothing is fetched) against the desired state.

The status branches are written by real `gitdns agent --once` runs (the `local` store) on a copy
of example-repo, after a switch made with `gitdns groups set` and merged: eu-west-1 (site-a) and
us-east-1 (site-b) then report serial 2, groups site-a, for example.com."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gitdns.adapters.status.branch import StatusBranch
from gitdns.adapters.status.refs import cluster_of
from gitdns.core.groups.serials import Applied, Report, applied_groups, serial_warnings
from gitdns.core.status.doc import dump
from gitdns.core.status.doc import load as load_status
from gitdns.reconcile.engine import load
from tests.reconcile.cli_kit import EXAMPLE_REPO, GIT_ENV, Run, Workspace, cli, git

GROUPS_FILE = "groups/example-com.yaml"
EU_WEST = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # site-a
US_EAST = "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"  # site-b
AGENTS = ("eu-west-1", "us-east-1")


def groups_text(serial: int, groups: str) -> str:
    return ("# re-created by hand\napiVersion: gitdns.io/v1alpha1\nkind: ActiveGroups\n"
            f"metadata:\n  name: example-com-groups\nspec:\n  zone: example-com\n  serial: {serial}\n"
            f"  groups: [{groups}]\n")


SERIAL_LINE = groups_text(0, "").splitlines().index("  serial: 0") + 1


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two agents applied serial 1 (site-a, site-b), then the merged switch to serial 2 (site-a);
    the work tree has their status branches as remote-tracking refs."""
    ws = Workspace(tmp_path_factory.mktemp("serials") / "ws", EXAMPLE_REPO)
    ws.localize()
    ws.commit("desired state")
    for cluster in AGENTS:
        assert ws.agent_once(cluster).rc == 0
    switch = cli("groups", "set", "example-com", "site-a", "--repo", str(ws.work))
    assert switch.rc == 0, switch.describe()
    git("merge", "-q", "--ff-only", "gitdns/groups-example-com-2", cwd=ws.work)
    git("push", "-q", "origin", "main", cwd=ws.work)
    for cluster in AGENTS:
        run = ws.agent_once(cluster)
        assert run.rc == 0, run.describe()
    ws.fetch_status()
    reported = git("show", f"origin/gitdns-status/{EU_WEST}:groups.yaml", cwd=ws.work)
    assert applied_groups(load_status(reported))["example.com"] == Applied(2, ("site-a",))
    return ws.root


@pytest.fixture
def work(template: Path, tmp_path: Path) -> Path:
    """A copy of the template (its work tree), so each test edits its own."""
    shutil.copytree(template, tmp_path / "ws", symlinks=True)
    return tmp_path / "ws" / "work"


def recreate(work: Path, serial: int, groups: str) -> None:
    """Delete the ActiveGroups document in one commit and write it again in the next."""
    git("rm", "-q", GROUPS_FILE, cwd=work)
    git("commit", "-q", "-m", "drop the ActiveGroups document", cwd=work)
    (work / GROUPS_FILE).write_text(groups_text(serial, groups), encoding="utf-8")
    git("add", GROUPS_FILE, cwd=work)
    git("commit", "-q", "-m", "ActiveGroups again", cwd=work)


def validate(work: Path, *args: str) -> Run:
    return cli("validate", str(work), *args)


def warnings_of(run: Run) -> list[str]:
    return [line for line in run.out.splitlines() if line.startswith("warning: ")]


def json_warnings(work: Path) -> list[dict[str, object]]:
    run = validate(work, "--format", "json")
    assert run.rc == 0, run.describe()
    doc = json.loads(run.out)
    assert doc["valid"] is True and doc["problems"] == []
    return list(doc["warnings"])


def test_a_recreated_document_below_the_applied_serial_is_warned(work: Path) -> None:
    recreate(work, 1, "site-b")
    run = validate(work)
    assert run.rc == 0, run.describe()  # a warning: the exit status is unchanged
    [line] = warnings_of(run)
    assert line.startswith(f"warning: {GROUPS_FILE}:{SERIAL_LINE}: spec.serial: ")
    assert "commits serial 1 with groups site-b, below serial 2" in line
    assert "(groups site-a by clusters eu-west-1, us-east-1)" in line
    assert "agents keep the zone's groups (ZoneSerialAhead)" in line and "does not happen" in line
    assert "`gitdns groups set example-com site-b`: it numbers the change above every serial it reads" in line
    assert "set spec.serial to 3 or more" in line
    assert run.out.splitlines()[-1].startswith("valid: ")
    [warning] = json_warnings(work)
    assert warning["code"] == "ActiveGroupsSerialBelowApplied" and warning["zones"] == []
    assert (warning["file"], warning["path"], warning["line"]) == (GROUPS_FILE, "spec.serial", SERIAL_LINE)
    assert "below serial 2" in str(warning["message"]) and "gitdns groups set" in str(warning["hint"])


def test_the_same_groups_below_the_applied_serial_are_warned_too(work: Path) -> None:
    recreate(work, 1, "site-a")
    [line] = warnings_of(validate(work))
    assert "commits serial 1 with groups site-a, below serial 2" in line
    assert "agents follow the zone's serial, not this document (ZoneSerialAhead)" in line


def test_an_equal_serial_with_other_groups_is_warned(work: Path) -> None:
    (work / GROUPS_FILE).write_text(groups_text(2, "site-b"), encoding="utf-8")  # a hand edit, serial kept
    [line] = warnings_of(validate(work))
    assert f"{GROUPS_FILE}:{SERIAL_LINE}: spec.serial: " in line
    assert "commits serial 2 with groups site-b, equal to serial 2" in line
    assert "(groups site-a by clusters eu-west-1, us-east-1)" in line
    assert "one serial now names two different switches" in line and "gitdns groups set example-com site-b" in line
    [warning] = json_warnings(work)
    assert warning["code"] == "ActiveGroupsSerialReused"


@pytest.mark.parametrize(("serial", "groups"), [(3, "site-b"), (3, "site-a"), (2, "site-a")])
def test_a_higher_serial_or_the_applied_switch_itself_is_not_warned(work: Path, serial: int, groups: str) -> None:
    (work / GROUPS_FILE).write_text(groups_text(serial, groups), encoding="utf-8")
    run = validate(work)
    assert run.rc == 0 and warnings_of(run) == [], run.describe()
    assert json_warnings(work) == []


def test_without_status_branches_nothing_is_said(work: Path) -> None:
    us_east = git("rev-parse", f"origin/gitdns-status/{US_EAST}", cwd=work)
    for ref in git("for-each-ref", "--format=%(refname)", "refs/remotes/origin/gitdns-status/", cwd=work).split():
        git("update-ref", "-d", ref, cwd=work)
    recreate(work, 1, "site-b")
    run = validate(work)
    assert run.rc == 0 and warnings_of(run) == [], run.describe()
    # a local status branch counts as a remote-tracking one does
    git("branch", f"gitdns-status/{US_EAST}", us_east, cwd=work)
    [line] = warnings_of(validate(work))
    assert "(groups site-a by cluster us-east-1)" in line


def test_outside_a_git_repository_nothing_is_said(work: Path, tmp_path: Path) -> None:
    (work / GROUPS_FILE).write_text(groups_text(1, "site-b"), encoding="utf-8")
    assert warnings_of(validate(work))  # inside the repository: warned
    plain = tmp_path / "plain"
    shutil.copytree(work, plain, ignore=shutil.ignore_patterns(".git"))
    run = validate(plain)
    assert run.rc == 0 and warnings_of(run) == [] and run.out.startswith("valid: "), run.describe()


def test_nothing_is_fetched_or_written(work: Path) -> None:
    """A newer report on origin (serial 5) is not fetched: the judgement rests on the refs the
    repository has, and they are left as they were."""
    origin = git("remote", "get-url", "origin", cwd=work)
    report = {"zones": {"example.com": {"activeGroups": ["site-b"], "serial": 5, "diverged": False}}}
    assert StatusBranch(origin, EU_WEST, workdir=work.parent / "agent-state").publish(
        {"groups.yaml": dump(report)}, "status(eu-west-1): Ready") is not None
    (work / GROUPS_FILE).write_text(groups_text(3, "site-b"), encoding="utf-8")
    refs, changed = git("for-each-ref", cwd=work), git("status", "--porcelain", cwd=work)
    run = validate(work)
    assert run.rc == 0 and warnings_of(run) == [], run.describe()
    assert (git("for-each-ref", cwd=work), git("status", "--porcelain", cwd=work)) == (refs, changed)
    git("fetch", "-q", "origin", "+refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*", cwd=work)
    [line] = warnings_of(validate(work))  # once fetched, the newer report counts
    assert "below serial 5 that the clusters' status branches report applied (groups site-b by cluster eu-west-1)" \
        in line


def plumb(work: Path, *args: str, data: bytes) -> str:
    """A git plumbing command with ``data`` on its standard input."""
    done = subprocess.run(["git", *args], cwd=work, input=data, env={**os.environ, **GIT_ENV},
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().strip()


def _branch(work: Path, cluster_id: str, files: dict[str, bytes]) -> None:
    """A local status branch ``gitdns-status/<cluster_id>`` whose tip holds ``files`` (built with
    git's plumbing, as anyone who can push a branch could)."""
    entries = []
    for name, data in files.items():
        blob = plumb(work, "hash-object", "-w", "--stdin", data=data)
        entries.append(f"100644 blob {blob}\t{name}")
    tree = plumb(work, "mktree", data=("\n".join(entries) + "\n").encode())
    commit = git("commit-tree", tree, "-m", "status(x): Ready", cwd=work)
    git("update-ref", f"refs/heads/gitdns-status/{cluster_id}", commit, cwd=work)


HOSTILE: dict[str, bytes] = {
    "alias": b"zones: &a {example.com: *a}\n",
    "not-yaml": b"zones: [1, 2\n",
    "a-list": b"- zones\n",
    "long-int": b"zones: {example.com: {serial: " + b"9" * 5000 + b", activeGroups: [x]}}\n",
    "huge-serial": b"zones: {example.com: {serial: " + b"9" * 40 + b", activeGroups: [x]}}\n",
    "types": b"zones: {example.com: {serial: '7', activeGroups: site-b}, example.org: {serial: true}}\n",
    "binary": b"\xff\xfe\x00\x01zones",
    "deep": b"zones: " + b"[" * 200 + b"]" * 200 + b"\n",
    "too-large": b"zones: {}\n" + b"#" * (2 << 20) + b"\n",
}


def test_garbage_status_documents_are_left_out(work: Path) -> None:
    recreate(work, 1, "site-b")
    for name, data in HOSTILE.items():
        _branch(work, f"0000-{name}", {"groups.yaml": data})
    _branch(work, "0000-no-file", {"summary.yaml": b"ready: true\n"})
    blob = plumb(work, "hash-object", "-w", "--stdin", data=b"zones: {}\n")
    git("update-ref", "refs/remotes/origin/gitdns-status/0000-a-blob", blob, cwd=work)  # names no commit
    missing = work / ".git" / "refs" / "remotes" / "origin" / "gitdns-status" / "0000-missing"
    missing.write_text("0123456789abcdef0123456789abcdef01234567\n")  # names no object at all
    (missing.parent / "0000-loop").write_text("ref: refs/remotes/origin/gitdns-status/0000-loop\n")
    (missing.parent / "0000-dangling").write_text("ref: refs/heads/nowhere\n")
    run = validate(work)
    assert run.rc == 0, run.describe()
    [line] = warnings_of(run)  # the agents' real reports still count; no garbage is named
    assert "(groups site-a by clusters eu-west-1, us-east-1)" in line and "0000-" not in line
    assert len(json_warnings(work)) == 1


def test_a_hostile_report_is_quoted_on_one_line(work: Path) -> None:
    report = {"zones": {"example.com": {"activeGroups": ["evil\nwarning: all is fine"], "serial": 7}}}
    _branch(work, "retired\u202eid", {"groups.yaml": dump(report).encode()})
    run = validate(work)
    [line] = warnings_of(run)
    assert "below serial 7" in line and r"'evil\nwarning: all is fine'" in line
    assert r"cluster id 'retired\u202eid' (no Cluster in git)" in line
    assert "warning: all is fine" not in run.out.replace(r"\nwarning: all is fine", "")


# -- the pure parts ---------------------------------------------------------------------------

def test_applied_groups_reads_what_the_agent_writes_and_nothing_else() -> None:
    doc = {"zones": {"example.com": {"activeGroups": ["site-b", "site-a"], "serial": 4, "diverged": True,
                                     "group": "site-a", "active": True},
                     "Example.ORG.": {"activeGroups": [], "serial": 1},
                     "bad.example": {"activeGroups": "site-a", "serial": 2},
                     "neg.example": {"activeGroups": [], "serial": -1},
                     "bool.example": {"activeGroups": [], "serial": True},
                     "big.example": {"activeGroups": [], "serial": 2**63}}}
    assert applied_groups(doc) == {"example.com": Applied(4, ("site-a", "site-b"), True),
                                   "example.org": Applied(1, ())}
    assert applied_groups({"zones": [1]}) == {} and applied_groups({}) == {}


def test_a_diverged_report_names_reconcile_and_serial_zero_names_no_switch() -> None:
    state = load(EXAMPLE_REPO).state  # example.com: serial 1, site-a and site-b
    diverged = Report(EU_WEST, "refs/heads/gitdns-status/x", {"example.com": Applied(4, ("site-b",), True)})
    [problem] = serial_warnings(state, [diverged])
    assert "cluster eu-west-1" in problem.message and "gitdns groups reconcile example-com" in problem.hint
    nothing = Report(EU_WEST, "refs/heads/gitdns-status/x", {"example.com": Applied(0, ("site-b",))})
    assert serial_warnings(state, [nothing]) == []


def test_cluster_of_takes_status_branches_only() -> None:
    assert cluster_of("refs/heads/gitdns-status/abc") == "abc"
    assert cluster_of("refs/remotes/origin/gitdns-status/abc") == "abc"
    assert cluster_of("refs/remotes/up/stream/gitdns-status/abc") == "abc"
    for ref in ("refs/tags/gitdns-status/abc", "refs/heads/gitdns-status/", "refs/heads/gitdns-status/a/b",
                "refs/heads/main", "refs/heads/x-gitdns-status/abc"):
        assert cluster_of(ref) is None
