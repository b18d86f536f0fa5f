"""Black-box helpers for the preview-equals-agent tests: real git repositories in a temporary
directory, the real CLI (`gitdns.cli.main`, in process, or `python3 -m gitdns.cli`), and the
embedded `local` record store read from its documented file format (docs/providers.md:
one JSON document per zone, rows ``[name, type, set_id, ttl, weight, geo, [values]]``).

A `Workspace` is a desired-state repository: a bare remote (what agents fetch and push their
status branches to) and a work tree (what `gitdns plan` and `gitdns apply` read).  Every Zone
is rewritten to the `local` provider with an absolute store path under the work tree's
``.gitdns/zones`` (ignored by git), so the agents (whose relative paths would land in their
state directories), `plan` and `apply` all see one store; and every health check is taken
out, so no probe is ever sent to the documentation addresses (192.0.2.x, ...) the examples
use.  `no_network_beyond_loopback` makes that a checked rule for what runs in process.

The agent's own housekeeping records are no part of any plan and are left out of every
comparison: the heartbeat TXT (``gitdns-heartbeat-<hash>.<zone>``, gitdns/core/owner/zone.py) and
the owner-lease lock TXT (``gitdns-lock-<hash>.<zone>``, gitdns/agent/lease.py; released, so
deleted, when ``--once`` ends).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_REPO = ROOT / "example-repo"
EXAMPLES_DIR = ROOT / "docs" / "examples"
HOUSEKEEPING = ("gitdns-heartbeat-", "gitdns-lock-")
GIT_ENV = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
           "GIT_COMMITTER_EMAIL": "dev@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

Key = tuple[str, str, str]  # (name, type, set identifier)
Content = tuple[int, int | None, str | None, tuple[str, ...]]  # (ttl, weight, geo, values)
Zone = dict[Key, Content]
Store = dict[str, Zone]  # zone domain -> records


def docs_in(directory: Path, kind: str) -> list[dict[str, Any]]:
    """The documents of ``kind`` in a desired-state directory, in file order."""
    paths = sorted(p for p in directory.rglob("*.y*ml") if ".gitdns" not in p.parts and ".git" not in p.parts)
    return [d for p in paths for d in _load_all(p.read_text()) if isinstance(d, dict) and d.get("kind") == kind]


def example_dirs() -> list[Path]:
    return sorted(p for p in EXAMPLES_DIR.iterdir() if p.is_dir() and any(p.glob("*.yaml")))


# --- git ---------------------------------------------------------------------------------

def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True,
                          text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


_YAML = YAML(typ="safe", pure=True)
_YAML.default_flow_style = False


def _load_all(text: str) -> list[Any]:
    return [d for d in _YAML.load_all(text) if d is not None]


def _dump_all(docs: list[Any]) -> str:
    out = io.StringIO()
    _YAML.dump_all(docs, out)
    return out.getvalue()


class Workspace:
    """A desired-state repository (work tree + bare remote) with a `local` store."""

    def __init__(self, root: Path, source: Path | None = None, files: dict[str, str] | None = None) -> None:
        self.root = root
        self.bare = root / "desired.git"
        self.work = root / "work"
        self.store = self.work / ".gitdns" / "zones"
        self.states = root / "agents"
        git("init", "-q", "--bare", "-b", "main", str(self.bare))
        if source is not None:
            shutil.copytree(source, self.work, ignore=shutil.ignore_patterns(".gitdns", "*.md"))
        self.work.mkdir(parents=True, exist_ok=True)
        for rel, text in (files or {}).items():
            self.write(rel, text)
        (self.work / ".gitignore").write_text(".gitdns/\n")
        git("init", "-q", "-b", "main", str(self.work))
        git("remote", "add", "origin", str(self.bare), cwd=self.work)

    # the desired state --------------------------------------------------------------
    def write(self, rel: str, text: str) -> None:
        path = self.work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def remove(self, rel: str) -> None:
        (self.work / rel).unlink()

    def yaml_files(self) -> list[Path]:
        return sorted(p for p in self.work.rglob("*.y*ml")
                      if ".gitdns" not in p.parts and ".git" not in p.parts)

    def edit(self, change: Callable[[dict[str, Any]], bool]) -> None:
        """Apply ``change`` to every document; files whose documents it changed are rewritten."""
        for path in self.yaml_files():
            docs = _load_all(path.read_text())
            if sum(1 for d in docs if isinstance(d, dict) and change(d)):
                path.write_text(_dump_all(docs))

    def docs(self, kind: str) -> list[dict[str, Any]]:
        return docs_in(self.work, kind)

    def file_of(self, kind: str, name: str) -> str:
        for path in self.yaml_files():
            for doc in _load_all(path.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == kind and doc["metadata"]["name"] == name:
                    return path.relative_to(self.work).as_posix()
        raise AssertionError(f"no {kind} {name} in {self.work}")

    def localize(self, *, keep_health: bool = False) -> None:
        """Every Zone on the one `local` store, every health check out (no probe leaves the host)
        unless ``keep_health`` (the checks then probe loopback only)."""
        store = str(self.store)

        def change(doc: dict[str, Any]) -> bool:
            spec = doc.get("spec") or {}
            kind = doc.get("kind")
            if kind == "Zone":
                spec["provider"] = {"type": "local", "settings": {"path": store}}
                return True
            if keep_health:
                return False
            if kind == "DNSPolicy" and "healthCheck" in spec:
                del spec["healthCheck"]
                return True
            if kind == "NodePool":
                touched = spec.pop("healthCheck", None) is not None
                for node in spec.get("nodes") or ():
                    touched = node.pop("healthEndpoint", None) is not None or touched
                return touched
            return False
        self.edit(change)

    def set_cluster(self, name: str, **spec: Any) -> None:
        def change(doc: dict[str, Any]) -> bool:
            if doc.get("kind") != "Cluster" or doc["metadata"]["name"] != name:
                return False
            for key, value in spec.items():
                if value is None:
                    doc["spec"].pop(key, None)
                else:
                    doc["spec"][key] = value
            return True
        self.edit(change)

    def set_groups(self, zone: str, serial: int, groups: list[str]) -> None:
        """Write (or replace) the zone's ActiveGroups document."""
        for path in self.yaml_files():
            docs = _load_all(path.read_text())
            if any(d.get("kind") == "ActiveGroups" and d["spec"]["zone"] == zone for d in docs):
                path.unlink()
        self.write(f"groups/{zone}.yaml", _dump_all([{
            "apiVersion": "gitdns.io/v1alpha1", "kind": "ActiveGroups",
            "metadata": {"name": f"{zone}-groups"}, "spec": {"zone": zone, "serial": serial, "groups": groups}}]))

    def drop_groups(self) -> None:
        """No failover groups: every ActiveGroups document out, and every Cluster's group (without
        a document every group would be active, with a validate warning)."""
        for path in self.yaml_files():
            docs = _load_all(path.read_text())
            kept = [d for d in docs if d.get("kind") != "ActiveGroups"]
            if len(kept) != len(docs):
                if kept:
                    path.write_text(_dump_all(kept))
                else:
                    path.unlink()

        def ungroup(doc: dict[str, Any]) -> bool:
            return doc.get("kind") == "Cluster" and doc["spec"].pop("group", None) is not None
        self.edit(ungroup)

    def commit(self, message: str) -> str:
        git("add", ".", cwd=self.work)
        git("commit", "-q", "--allow-empty", "-m", message, cwd=self.work)
        git("push", "-q", "origin", "main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def fetch_status(self) -> None:
        """Bring the agents' status branches into the work tree's repository (remote-tracking
        refs), as a CI job that fetches everything would: the preview's health comes from them."""
        git("fetch", "-q", "origin", "+refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*",
            cwd=self.work)

    # the store ------------------------------------------------------------------------
    def read(self) -> Store:
        return read_store(self.store)

    def write_foreign(self, zone: str, rows: list[list[Any]]) -> None:
        """Records written behind gitdns's back (no ownership TXT), in the store's own format."""
        path = self.store / f"{zone}.json"
        doc = json.loads(path.read_text()) if path.exists() else {
            "format": "gitdns-store", "formatVersion": 1, "zone": zone, "version": 0, "records": []}
        doc["records"].extend(rows)
        doc["version"] += 1
        self.store.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))

    # the CLI --------------------------------------------------------------------------
    def plan(self, *args: str) -> Run:
        return cli("plan", "--repo", str(self.work), *args)

    def plan_json(self, *args: str) -> tuple[Run, dict[str, Any]]:
        run = self.plan(*args, "--format", "json")
        assert run.rc in (0, 3, 4, 5), run.describe()
        return run, json.loads(run.out)

    def apply(self, *args: str) -> Run:
        return cli("apply", "--repo", str(self.work), *args)

    def zone_show(self, zone: str) -> list[dict[str, Any]]:
        run = cli("zone", "show", zone, "--repo", str(self.work), "--format", "json")
        assert run.rc == 0, run.describe()
        records: list[dict[str, Any]] = json.loads(run.out)["records"]
        return records

    def agent_args(self, cluster: str) -> list[str]:
        return ["agent", "--repo", str(self.bare), "--cluster", cluster, "--state-dir",
                str(self.states / cluster), "--store-dir", str(self.work), "--lease", "txt", "--git-timeout", "20",
                "--once", "--listen", ""]

    def agent_once(self, cluster: str) -> Run:
        """`gitdns agent --once` in process (no health check is configured: no probe starts)."""
        assert not any("healthCheck" in (d.get("spec") or {}) for d in self.docs("DNSPolicy")), \
            "an in-process agent would leave its probes running: use agent_process"
        return cli(*self.agent_args(cluster))

    def agent_process(self, cluster: str) -> Run:
        """`gitdns agent --once` as its own process (its probes end with it)."""
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *self.agent_args(cluster)],
                              capture_output=True, text=True, timeout=120, check=False, cwd=self.root)
        return Run(done.returncode, done.stdout, done.stderr, ("agent", cluster))


@dataclass(frozen=True, slots=True)
class Run:
    rc: int
    out: str
    err: str
    args: tuple[str, ...] = ()

    def describe(self) -> str:
        return (f"gitdns {' '.join(self.args)} -> {self.rc}\n--- stdout\n{self.out[-4000:]}\n"
                f"--- stderr\n{self.err[-4000:]}")


def cli(*args: str) -> Run:
    """`gitdns ARGS` in process: stdout and stderr captured, the logging set-up undone."""
    from gitdns.cli import main

    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return Run(rc, out.getvalue(), err.getvalue(), args)


# --- the store and plans as plain values ----------------------------------------------------

def read_store(directory: Path) -> Store:
    out: Store = {}
    for path in sorted(directory.glob("*.json")):
        doc = json.loads(path.read_text())
        assert doc.get("format") == "gitdns-store", path
        zone: Zone = {}
        for name, rtype, set_id, ttl, weight, geo, values in doc["records"]:
            zone[(name, rtype, set_id or "")] = (int(ttl), weight, geo, tuple(sorted(set(values))))
        out[doc["zone"]] = zone
    return out


def record_of(doc: dict[str, Any]) -> tuple[Key, Content]:
    """A plan's record (gitdns.core.plan.fmt.record_dict) as (key, content)."""
    return ((doc["name"], doc["type"], doc.get("setIdentifier") or ""),
            (int(doc["ttl"]), doc.get("weight"), doc.get("geo"), tuple(sorted(set(doc["values"])))))


def housekeeping(key: Key) -> bool:
    return key[0].startswith(HOUSEKEEPING)


def without_housekeeping(zone: Zone) -> Zone:
    return {k: v for k, v in zone.items() if not housekeeping(k)}


def apply_changes(before: Zone, changes: list[dict[str, Any]]) -> tuple[Zone, list[str]]:
    """``before`` with a plan's changes applied in order, and every change whose ``old`` is not
    what the zone held at that point (the plan would not have applied as written)."""
    zone = dict(before)
    problems: list[str] = []
    for change in changes:
        old, new = change.get("old"), change.get("new")
        if old is not None:
            key, content = record_of(old)
            if zone.get(key) != content:
                problems.append(f"{change['action']} {key}: the plan's old {content} but the zone held {zone.get(key)}")
            zone.pop(key, None)
        if new is not None:
            key, content = record_of(new)
            if old is None and key in zone:
                problems.append(f"create {key}: the zone already held {zone[key]}")
            zone[key] = content
    return zone, problems


def touched_keys(changes: list[dict[str, Any]]) -> set[Key]:
    keys: set[Key] = set()
    for change in changes:
        for side in ("old", "new"):
            if change.get(side) is not None:
                keys.add(record_of(change[side])[0])
    return {k for k in keys if not housekeeping(k)}


def changed_keys(before: Zone, after: Zone) -> set[Key]:
    return {k for k in set(before) | set(after) if before.get(k) != after.get(k) and not housekeeping(k)}


def zone_diff(expected: Zone, actual: Zone, most: int = 8) -> list[str]:
    """What differs, one line per key, the first ``most`` of them (empty when equal)."""
    keys = [k for k in sorted(set(expected) | set(actual)) if expected.get(k) != actual.get(k)]
    lines = [f"{k}: expected {_short(expected.get(k))} got {_short(actual.get(k))}" for k in keys[:most]]
    if len(keys) > most:
        lines.append(f"... and {len(keys) - most} more key(s): {[k[0] for k in keys[most:]]}")
    return lines


def _short(content: Content | None) -> str:
    text = str(content)
    return text if len(text) <= 160 else text[:157] + "..."


def changes_by_zone(plan_doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """`gitdns plan --cluster X --format json`: zone -> every change in its plans, in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for plan in plan_doc["plans"]:
        out.setdefault(plan["zone"], []).extend(plan["changes"])
    return out


def strip_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((r for r in rows if not r["name"].startswith(HOUSEKEEPING)),
                  key=lambda r: (r["name"], r["type"], r.get("setIdentifier", "")))


# --- what a test may send ---------------------------------------------------------------------

def _loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX and friends
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def loopback_only() -> Iterator[list[str]]:
    """Refuse (and record) any connection, datagram or name lookup beyond loopback made in this
    process while the block runs."""
    refused: list[str] = []
    real_connect, real_connect_ex, real_sendto = socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto
    real_getaddrinfo = socket.getaddrinfo

    def check(address: Any) -> None:
        if not _loopback(address):
            refused.append(repr(address))
            raise OSError(f"test rule: no packet beyond loopback ({address!r})")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> int:
        check(args[-1])
        return real_sendto(self, data, *args)  # type: ignore[call-overload,no-any-return]

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None:
            check((host.decode() if isinstance(host, bytes) else str(host), 0))
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = sendto  # type: ignore[assignment]
    socket.getaddrinfo = getaddrinfo
    try:
        yield refused
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]
        socket.socket.sendto = real_sendto  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo


@dataclass
class Turn:
    """One cluster's turn at one commit: the zone before, its plan, its agent, the zone after."""

    cluster: str
    before: Store
    plan_rc: int
    plan: dict[str, Any]
    agent: Run
    after: Store


@dataclass
class CommitRun:
    label: str
    sha: str
    before: Store
    merged_rc: int
    merged: dict[str, Any]  # `gitdns plan --all-clusters --format json`
    turns: list[Turn] = field(default_factory=list)
    after: Store = field(default_factory=dict)
    shown: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # `gitdns zone show` after
    skipped: bool = False  # no agent ran on this commit (a later commit was merged before they polled)


def run_commit(ws: Workspace, label: str, order: list[str], *, zones: list[str],
               process: bool = False) -> CommitRun:
    """Commit what the work tree holds, preview it (every cluster, then each cluster right
    before its own agent runs), and run every agent's ``--once`` in ``order``."""
    sha = ws.commit(label)
    if not order:
        return CommitRun(label, sha, ws.read(), 0, {"zones": []}, skipped=True)
    ws.fetch_status()
    before = ws.read()
    merged_run, merged = ws.plan_json("--all-clusters")
    run = CommitRun(label, sha, before, merged_run.rc, merged)
    for cluster in order:
        zone_before = ws.read()
        plan_run, plan = ws.plan_json("--cluster", cluster)
        agent = ws.agent_process(cluster) if process else ws.agent_once(cluster)
        run.turns.append(Turn(cluster, zone_before, plan_run.rc, plan, agent, ws.read()))
    run.after = ws.read()
    run.shown = {zone: ws.zone_show(zone) for zone in zones}
    return run


def plan_conflicts(plan_doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(zone, reason, message) of every conflict that needs an operator in a JSON plan."""
    return {(p["zone"], c["reason"], c["message"]) for p in plan_doc["plans"] for c in p["conflicts"]
            if c["reason"] != "NewerRevisionSeen"}


def agent_conflicts(agent: Run) -> set[tuple[str, str, str]]:
    """The same, as `gitdns agent --once` prints them (``zone <domain>: <Reason>: <message>``)."""
    found = (re.match(r"^zone (\S+): ([A-Z]\w+): (.*)$", line) for line in agent.out.splitlines())
    return {(m[1], m[2], m[3]) for m in found if m}


def turn_mismatches(turn: Turn) -> list[str]:
    """Where (zone before) + (the cluster's plan) differs from (zone after its agent's --once),
    and where the conflicts the plan lists differ from those the agent reports."""
    problems: list[str] = []
    by_zone = changes_by_zone(turn.plan)
    for zone in sorted(set(turn.before) | set(turn.after) | set(by_zone)):
        before = turn.before.get(zone, {})
        after = turn.after.get(zone, {})
        changes = by_zone.get(zone, [])
        expected, bad = apply_changes(before, changes)
        problems += [f"{zone}: {p}" for p in bad]
        problems += [f"{zone}: {d}" for d in zone_diff(without_housekeeping(expected), without_housekeeping(after))]
        planned, applied = touched_keys(changes), changed_keys(before, after)
        if planned != applied:
            problems.append(f"{zone}: {len(planned - applied)} key(s) the plan changes and the agent did not, "
                            f"{len(applied - planned)} key(s) the agent changed and the plan did not")
    planned_conflicts, reported = plan_conflicts(turn.plan), agent_conflicts(turn.agent)
    if planned_conflicts != reported:
        problems.append(f"conflicts only in the plan {sorted(planned_conflicts - reported)}; "
                        f"only reported by the agent {sorted(reported - planned_conflicts)}")
    return [f"[{turn.cluster}] {p}" for p in problems]


def merged_mismatches(run: CommitRun) -> list[str]:
    """Where `plan --all-clusters` differs from the zone after every agent ran once."""
    problems: list[str] = []
    if run.skipped:
        return problems
    previews = {z["zone"]: z for z in run.merged["zones"]}
    for zone in sorted(set(run.after) | set(previews)):
        preview = previews.get(zone)
        if preview is None:
            if without_housekeeping(run.after[zone]) != without_housekeeping(run.before.get(zone, {})):
                problems.append(f"{zone}: the agents changed a zone the preview does not list")
            continue
        changes = [c for p in preview["plans"] for c in p["changes"]]
        expected, bad = apply_changes(run.before.get(zone, {}), changes)
        problems += [f"{zone}: {p}" for p in bad]
        problems += [f"{zone}: merged plans: {d}" for d in zone_diff(without_housekeeping(expected),
                                                                      without_housekeeping(run.after.get(zone, {})))]
        if zone in run.shown and strip_rows(preview["merged"]) != strip_rows(run.shown[zone]):
            want = {json.dumps(r, sort_keys=True) for r in strip_rows(preview["merged"])}
            got = {json.dumps(r, sort_keys=True) for r in strip_rows(run.shown[zone])}
            problems.append(f"{zone}: merged zone differs from `zone show` after the agents: preview only "
                            f"{sorted(want - got)}; zone only {sorted(got - want)}")
    return problems


# --- stories: a repository committed to, commit after commit, every agent running once on each ---------

Mutation = Callable[[Workspace], None]


@dataclass(frozen=True)
class Commit:
    label: str
    change: Mutation
    order: list[str]  # the agents, in the order they run (remotes first, then git order); [] none
    check: Callable[[CommitRun], None] = lambda run: None  # what the commit must have done


@dataclass(frozen=True)
class Story:
    source: Path | None  # a desired-state directory to copy, or None
    commits: list[Commit]
    files: dict[str, str] | None = None  # files to write (besides or instead of the copy)
    process: bool = False  # agents as their own processes, health checks kept (they probe loopback)


def nothing(ws: Workspace) -> None:
    pass


def play(story: Story, root: Path) -> list[CommitRun]:
    ws = Workspace(root, story.source, story.files)
    runs = []
    for commit in story.commits:
        commit.change(ws)
        ws.localize(keep_health=story.process)
        zones = [z["spec"]["domain"] for z in ws.docs("Zone")]
        runs.append(run_commit(ws, commit.label, commit.order, zones=zones, process=story.process))
    return runs


class Played:
    """Each story played once (when a test first asks for it), under `loopback_only`."""

    def __init__(self, tmp: Any, stories: dict[str, Callable[[], Story]]) -> None:
        self.tmp = tmp  # a pytest.TempPathFactory
        self.stories = stories
        self.cache: dict[str, tuple[Story, list[CommitRun]] | BaseException] = {}

    def __call__(self, name: str) -> tuple[Story, list[CommitRun]]:
        if name not in self.cache:
            story = self.stories[name]()
            try:
                with loopback_only() as refused:
                    runs = play(story, self.tmp.mktemp(name) / "repo")
                assert not refused, f"a connection beyond loopback was attempted: {refused}"
                self.cache[name] = story, runs
            except Exception as exc:  # played once: every test of the story reports it
                self.cache[name] = exc
        played = self.cache[name]
        if isinstance(played, BaseException):
            raise played
        return played


def story_mismatches(runs: list[CommitRun]) -> list[str]:
    """Every turn's plan against its agent."""
    return [f"{run.label}: {p}" for run in runs for turn in run.turns for p in turn_mismatches(turn)]


def fleet_mismatches(runs: list[CommitRun]) -> list[str]:
    """Every commit's merged preview against the zone after every agent, and each cluster's
    plan inside the merged preview against its own `plan --cluster` at its turn."""
    problems = [f"{run.label}: {p}" for run in runs for p in merged_mismatches(run)]
    for run in runs:
        if run.skipped:
            continue
        if run.merged_rc not in (0, 5):
            problems.append(f"{run.label}: plan --all-clusters exited {run.merged_rc}")
        for zone in run.merged["zones"]:
            merged = {p["owner"]: p["changes"] for p in zone["plans"]}
            for turn in run.turns:
                own = [c for p in turn.plan["plans"] if p["zone"] == zone["zone"] for c in p["changes"]]
                owner = next((p["owner"] for p in turn.plan["plans"]), None)
                if owner is not None and (own or owner in merged) and merged.get(owner) != own:
                    problems.append(f"{run.label}: {turn.cluster} in {zone['zone']}: its plan in the merged "
                                    "preview is not its own plan")
    return problems


def exit_code_mismatches(runs: list[CommitRun]) -> list[str]:
    """`plan --cluster` exits as `apply` would (conflicts 5, stalled 4, else 0) and the agent is
    Ready (0) exactly when its plan lists no conflict and did not stall."""
    problems = []
    for run in runs:
        for turn in run.turns:
            stalled = any(p["stalled"] for p in turn.plan["plans"])
            conflicted = bool(plan_conflicts(turn.plan))
            want_plan = 4 if stalled else 5 if conflicted else 0
            if turn.plan_rc != want_plan:
                problems.append(f"{run.label}: [{turn.cluster}] plan exited {turn.plan_rc}, not {want_plan}")
            want_agent = 1 if stalled or conflicted else 0
            if turn.agent.rc != want_agent:
                problems.append(f"{run.label}: [{turn.cluster}] agent --once exited {turn.agent.rc}, not "
                                f"{want_agent}: {turn.agent.out[-1500:]}")
    return problems
