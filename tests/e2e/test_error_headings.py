"""A change the provider refuses is one error, printed once, with its reason, in the section of
the zone (and cluster) it belongs to — never again under another heading — and that section's
summary counts it.  Read as a person reads it, from `gitdns agent --once` and `gitdns apply`.

The refusal is a real one: BIND refuses an update that deletes the address of the zone's own
nameserver (``ns1.example.test A``, the glue of the apex NS; "post update name server sanity
check failed").  Cluster c1 publishes that name at the glue's own address and adopts the
record, so it owns it; then its listener goes (committed, merged), and its next pass deletes
the record — which BIND refuses.  A second zone (``other.test``, the `local` store) and a
second cluster (c2) give the output other sections the error must stay out of.  BIND's log
shows it was asked once per run: a refused group is not sent again by the re-plans of a pass.

Before: the agent also printed the error in the ``Ready`` condition and, under
``UnresolvedConflictDiscovered: RecordsMissing``, as own records missing that it was
"re-applying with jitter"; `apply` printed it after a plan block that did not list the change
it was about, with a ``RecordsMissing`` line, and neither summary counted it; the pass sent the
refused update four times.

Without ``named`` the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import dns_servers
from tests.e2e.agent_kit import WorkTree
from tests.e2e.dns_servers import DnsServer

ZONE = dns_servers.ZONE  # example.test, on BIND
OTHER = "other.test"  # on the local store
GLUE = f"ns1.{ZONE}"  # the apex NS's address record: BIND refuses to delete it
CLUSTERS = {"c1": ("cluster-1-uid", "127.0.0.1"), "c2": ("cluster-2-uid", "127.0.0.2")}
HEADLINE = re.compile(r"^zone (\S+) cluster (\S+) \(")  # apply: a plan block's first line
APPLY_LINE = re.compile(r"^\[(\S+)\] zone (\S+): ")  # apply: a zone's summary, errors, views
AGENT_LINE = re.compile(r"^zone (\S+): ")  # agent --once: a zone's summary, notes, errors


@pytest.fixture
def bind(tmp_path: Path) -> Iterator[DnsServer]:
    """A BIND of its own for each test: the zone as it was at start (ns1 A its glue)."""
    with dns_servers.bind_server(tmp_path / "bind") as server:
        yield server


class Repo(WorkTree):
    """The desired repository (a work tree and its bare remote) and how the CLI is run on it."""

    def __init__(self, tmp: Path, bind: DnsServer) -> None:
        self.tmp, self.bind = tmp, bind
        self.work, self.bare = tmp / "desired", tmp / "desired.git"
        self.store, self.secrets = tmp / "store", tmp / "secrets"
        for path in (self.work, self.store, self.secrets):
            path.mkdir()
        (self.secrets / "tsig.env").write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        WorkTree.__init__(self, self.work, self.bare)
        self.write("zones/example-test.yaml",
                   "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-test}\n"
                   f"spec:\n  domain: {ZONE}\n  provider:\n    type: rfc2136\n"
                   f"    settings: {{server: 127.0.0.1, port: \"{bind.port}\", tsigKeyName: {dns_servers.KEY_NAME}, "
                   f"timeout: \"5\"}}\n    credentials: {{file: {self.secrets / 'tsig.env'}}}\n")
        self.write("zones/other-test.yaml",
                   "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: other-test}\n"
                   f"spec:\n  domain: {OTHER}\n  provider:\n    type: local\n    settings: {{path: zones}}\n")
        self.write("policies/web.yaml",
                   "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: web}\n"
                   "spec:\n  targetRef: {gateway: gw, namespace: ingress}\n  strategy: simple\n")

    def cluster(self, name: str, hosts: list[str]) -> None:
        ident, address = CLUSTERS[name]
        listeners = "".join(f"\n        - hostname: {h}" for h in hosts)
        self.write(f"clusters/{name}.yaml",
                   f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
                   f"spec:\n  id: {ident}\n  gateways:\n    - name: gw\n      namespace: ingress\n"
                   f"      addresses: [{address}]\n      listeners:{listeners}\n")

    def fences(self) -> list[str]:
        return ["--store-dir", str(self.store), "--rfc2136-servers", f"127.0.0.1:{self.bind.port}",
                "--credentials-dir", str(self.secrets)]

    def cli(self, *args: str, code: int = 0) -> str:
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", *args], capture_output=True, text=True,
                              timeout=180, check=False)
        assert done.returncode == code, f"gitdns {args[0]}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def agent_args(self, name: str) -> list[str]:
        return ["--repo", str(self.bare), "--cluster", name, "--state-dir", str(self.tmp / f"state-{name}"),
                "--lease", "txt", "--once", "--listen", "", "--admin-listen", "", "--status", "false",
                "--git-timeout", "20", *self.fences()]

    def glue(self) -> list[str]:
        return self.bind.query(f"{GLUE}.", "A")

    def refusals(self) -> int:
        """How many updates BIND rejected on its nameserver sanity check so far (its log)."""
        return self.bind.log.read_text().count("update rejected: post update name server sanity check failed")


def refused_glue(tmp: Path, bind: DnsServer) -> Repo:
    """c1 owns the glue (adopted, then applied); then it stops publishing it, committed: its
    next pass deletes the glue, which BIND refuses."""
    repo = Repo(tmp, bind)
    repo.cluster("c1", [GLUE, f"www.{ZONE}", f"app.{OTHER}"])
    repo.cluster("c2", [f"www.{ZONE}", f"app.{OTHER}"])
    repo.commit("c1 publishes the nameserver's name, c2 shares www and app")
    repo.cli("adopt", GLUE, "--zone", ZONE, "--cluster", "c1", "--type", "A", "--repo", str(repo.work),
             *repo.fences())
    repo.cli("apply", "--repo", str(repo.work), "--all-clusters", *repo.fences())
    assert repo.glue() == ["127.0.0.1"] and repo.refusals() == 0
    repo.cluster("c1", [f"www.{ZONE}", f"app.{OTHER}", f"api.{OTHER}"])
    repo.cluster("c2", [f"www.{ZONE}", f"app.{OTHER}", f"api.{ZONE}"])
    repo.commit("c1 no longer publishes ns1; both add a host")
    return repo


def the_refusal(lines: list[str]) -> str:
    """The one line that carries BIND's refusal, its name said once."""
    refused = [line for line in lines if "REFUSED" in line]
    assert len(refused) == 1, "\n".join(lines)
    assert refused[0].count(GLUE) == 1, refused[0]
    return refused[0]


def agent_sections(lines: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """agent --once: each zone's lines (one block per zone, in order), then what follows them."""
    sections: dict[str, list[str]] = {}
    order: list[str] = []
    tail: list[str] = []
    for line in lines:
        match = AGENT_LINE.match(line)
        if match is None:
            tail.append(line)
            continue
        assert not tail, f"a zone's line after the conditions:\n{chr(10).join(lines)}"
        zone = match.group(1)
        if zone not in sections:
            order.append(zone)
        assert zone == order[-1], f"zone {zone}'s lines are not one block:\n{chr(10).join(lines)}"
        sections.setdefault(zone, []).append(line)
    return sections, tail


def check_agent_report(lines: list[str]) -> None:
    sections, tail = agent_sections(lines)
    assert set(sections) == {ZONE, OTHER}, lines
    refusal = the_refusal(lines)
    assert refusal.startswith(f"zone {ZONE}: error: {GLUE} A: "), refusal  # with BIND's reason after it
    assert refusal in sections[ZONE], lines
    assert sections[ZONE][0].endswith(", 1 error(s)"), sections[ZONE]  # the zone's summary counts it
    assert not any("error" in line for line in sections[OTHER]), sections[OTHER]
    assert not any("RecordsMissing" in line or "UnresolvedConflictDiscovered" in line for line in lines), lines
    ready = [line for line in tail if line.startswith("Ready: ")]
    assert len(ready) == 1 and ready[0].startswith("Ready: ProviderError: ") and ZONE in ready[0], tail
    assert tail[-1] == "NotReady", tail


def test_agent_once_prints_the_refusal_once_in_its_zone(tmp_path: Path, bind: DnsServer) -> None:
    """The --once report composed from a real agent pass (`gitdns.agent.oncereport`)."""
    from gitdns.agent.config import resolve
    from gitdns.agent.identity import derive_cluster
    from gitdns.agent.main import absolute_paths, build_agent, run_once
    from gitdns.agent.metrics import Metrics
    from gitdns.agent.oncereport import once_lines
    from gitdns.cli import build_parser

    repo = refused_glue(tmp_path, bind)
    args = build_parser().parse_args(["agent", *repo.agent_args("c1")])
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "version")}
    agent = build_agent(derive_cluster(absolute_paths(resolve(flags, {}))), Metrics())
    lines, ok = once_lines(*run_once(agent))
    assert not ok, lines
    check_agent_report(lines)
    assert repo.glue() == ["127.0.0.1"]  # BIND kept its glue
    assert repo.refusals() == 1  # and was asked once: the pass did not send the refused group again


def test_agent_once_cli_prints_the_refusal_once_in_its_zone(tmp_path: Path, bind: DnsServer) -> None:
    repo = refused_glue(tmp_path, bind)
    lines = repo.cli("agent", *repo.agent_args("c1"), code=1).splitlines()
    check_agent_report(lines)
    assert repo.glue() == ["127.0.0.1"] and repo.refusals() == 1


def apply_sections(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    """apply: each (zone, cluster)'s plan block and lines; every ``[cluster] zone D:`` line
    is checked to sit in its own (D, cluster)'s section."""
    sections: dict[tuple[str, str], list[str]] = {}
    key = ("", "")  # before the first plan block ("acting on …")
    for line in lines:
        head = HEADLINE.match(line)
        if head is not None:
            key = (head.group(1), head.group(2))
            assert key not in sections, f"two blocks for {key}:\n{chr(10).join(lines)}"
        own = APPLY_LINE.match(line)
        if own is not None:
            assert (own.group(2), own.group(1)) == key, f"{line!r} sits under {key}:\n{chr(10).join(lines)}"
        sections.setdefault(key, []).append(line)
    return sections


def test_apply_prints_the_refusal_once_in_its_zone_and_cluster(tmp_path: Path, bind: DnsServer) -> None:
    repo = refused_glue(tmp_path, bind)
    lines = repo.cli("apply", "--repo", str(repo.work), "--all-clusters", *repo.fences(), code=1).splitlines()
    sections = apply_sections(lines)
    assert {(ZONE, "c1"), (ZONE, "c2"), (OTHER, "c1"), (OTHER, "c2")} <= set(sections), lines
    refusal = the_refusal(lines)
    assert refusal.startswith(f"[c1] zone {ZONE}: error: {GLUE} A: "), refusal
    mine = sections[(ZONE, "c1")]
    assert refusal in mine, lines
    # the block lists the change the error is about, and the summary counts the error
    assert any(line.startswith(f"  failed: - {GLUE} A ") for line in mine), mine
    summary = [line for line in mine if line.startswith(f"[c1] zone {ZONE}: applied ")]
    assert len(summary) == 1 and summary[0].endswith(", 1 error(s)"), mine
    for key, block in sections.items():
        if key != (ZONE, "c1"):
            assert not any("error" in line or "failed:" in line for line in block), (key, block)
    assert not any("RecordsMissing" in line for line in lines), lines
    assert repo.glue() == ["127.0.0.1"] and repo.refusals() == 1  # asked once, not once per re-plan

    # the same in JSON: one error for c1 in example.test, and the group it failed
    doc = json.loads(repo.cli("apply", "--repo", str(repo.work), "--all-clusters", "--format", "json",
                              *repo.fences(), code=1))
    errors = {(o["cluster"], o["zone"]): o["errors"] for o in doc if o["errors"]}
    assert list(errors) == [("c1", ZONE)] and len(errors[("c1", ZONE)]) == 1, errors
    [entry] = [o for o in doc if o["errors"]]
    assert [f["group"] for f in entry["failed"]] == [f"{GLUE} A"], entry["failed"]
    assert "REFUSED" in entry["failed"][0]["error"] and GLUE not in entry["failed"][0]["error"], entry["failed"]
    assert entry["pendingAfterApply"] == 0, entry
