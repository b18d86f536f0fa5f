"""The preview is what the agents do (issue 12, item 3), black-box through the real CLI.

For every cluster and zone of `example-repo/` and of every repository under `docs/examples/`,
with and without an ActiveGroups document, and with delegation (one primary and remotes; two
primaries and remotes), a real git repository is committed to, commit after commit (failover
switches, addresses added and withdrawn, static records changing type and value, a policy and a
remote leaving git), and:

* right before each cluster's `gitdns agent --once` runs on the commit, `gitdns plan --cluster X
  --format json` is taken: (zone before) + (the plan's changes) must be the zone after that
  agent ran, and the plan must touch exactly the keys the agent changed (same keys, same
  values, same ownership TXT);
* before any agent runs, `gitdns plan --all-clusters --format json` is taken: (zone before) +
  (every plan in it) must be the zone after every agent ran once (remotes first, then the
  others in git order, as the preview runs them), and its "merged" zone must be what
  `gitdns zone show` lists then; each cluster's plan inside it must be the plan that cluster's
  own `plan --cluster` showed at its turn.

Left out of every comparison, because they are the agent's own housekeeping and no part of any
plan: the heartbeat TXT ``gitdns-heartbeat-*`` and the owner-lease lock TXT ``gitdns-lock-*``
(the lock is released, so deleted, when ``--once`` ends).

The example repositories probe health on documentation addresses (192.0.2.x, ...): the copies
here have their health checks taken out, and nothing run in process may connect beyond
loopback (`cli_kit.loopback_only`).  Health itself is covered by a repository whose one target
is a loopback HTTP server this module starts, answering healthy; its agent runs as its own
process so its probes end with it.

Where the preview and the agents still part, the stories and their diagnoses are in
`test_preview_agent_findings.py`.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reconcile.cli_kit import (
    EXAMPLE_REPO,
    Commit,
    CommitRun,
    Mutation,
    Played,
    Story,
    Workspace,
    changes_by_zone,
    docs_in,
    example_dirs,
    exit_code_mismatches,
    fleet_mismatches,
    story_mismatches,
)
from tests.reconcile.cli_kit import nothing as _nothing


def _values(run: CommitRun, zone: str) -> set[str]:
    return {v for (name, rtype, _), (_, _, _, values) in run.after.get(zone, {}).items()
            if rtype != "TXT" for v in values}


def _owners(run: CommitRun, zone: str) -> str:
    return " ".join(v for (_, rtype, _), (_, _, _, values) in run.after.get(zone, {}).items()
                    if rtype == "TXT" for v in values)


# --- example-repo: ActiveGroups as shipped, one group, none ------------------------------------

SITE_B = {"198.51.100.10", "203.0.113.10", "2001:db8::10", "203.0.113.20"}  # eu-central-1, us-east-1
SITE_A = {"192.0.2.10", "192.0.2.11", "192.0.2.20"}  # eu-west-1
EXAMPLE_ORDER = ["eu-central-1", "eu-west-1", "us-east-1"]


def _only_site_a(run: CommitRun) -> None:
    published = _values(run, "example.com") | _values(run, "example.org")
    assert published >= SITE_A and not SITE_B & published, sorted(published)


def _both_sites(run: CommitRun) -> None:
    published = _values(run, "example.com") | _values(run, "example.org")
    assert published >= SITE_A | SITE_B, sorted(published)


def _groups(serial: int, groups: list[str]) -> Mutation:
    def change(ws: Workspace) -> None:
        for zone in ws.docs("Zone"):
            ws.set_groups(zone["metadata"]["name"], serial, groups)
    return change


def _drop_groups_and_add_address(ws: Workspace) -> None:
    ws.drop_groups()

    def change(doc: dict[str, Any]) -> bool:
        if doc.get("kind") != "Cluster" or doc["metadata"]["name"] != "eu-west-1":
            return False
        doc["spec"]["gateways"][0]["addresses"].append("192.0.2.12")
        return True
    ws.edit(change)


def _statics_and_web_policy_change(ws: Workspace) -> None:
    def change(doc: dict[str, Any]) -> bool:
        if doc.get("kind") != "RecordSet":
            return False
        records = doc["spec"]["records"]
        for rec in records:
            if rec["name"] == "www":
                rec.update(type="A", values=["192.0.2.55"])
            elif rec["name"] == "mail":
                rec["values"] = ["192.0.2.26"]
        doc["spec"]["records"] = [r for r in records if r["type"] != "CAA"]
        return True
    ws.edit(change)
    ws.remove(ws.file_of("DNSPolicy", "web"))


def _ungrouped_and_changed(ws: Workspace) -> None:
    _drop_groups_and_add_address(ws)
    _statics_and_web_policy_change(ws)


def _statics_changed(run: CommitRun) -> None:
    zone = run.after["example.com"]
    assert {"192.0.2.10", "192.0.2.11", "192.0.2.12", "198.51.100.10", "203.0.113.10"} <= _values(run, "example.com")
    assert zone[("www.example.com", "A", "")][3] == ("192.0.2.55",)
    assert ("www.example.com", "CNAME", "") not in zone and ("example.com", "CAA", "") not in zone
    assert zone[("mail.example.com", "A", "")][3] == ("192.0.2.26",)
    assert ("app.example.org", "A", "") not in run.after.get("example.org", {})  # its policy left git


EXAMPLE_REPO_STORY = Story(EXAMPLE_REPO, [
    Commit("example-repo as shipped: ActiveGroups [site-a, site-b]", _nothing, EXAMPLE_ORDER, _both_sites),
    Commit("ActiveGroups [site-a]", _groups(2, ["site-a"]), EXAMPLE_ORDER, _only_site_a),
    Commit("no groups, no ActiveGroups document; eu-west-1 gains an address; www from CNAME to A, mail "
           "renumbered, CAA removed; the web policy removed", _ungrouped_and_changed, EXAMPLE_ORDER, _statics_changed),
])


# --- delegation: example-repo with us-east-1 the primary, the EU clusters remotes ----------------

DELEGATION_ORDER = ["eu-central-1", "eu-west-1", "us-east-1"]


def _delegate(ws: Workspace) -> None:
    ws.set_cluster("us-east-1", mode="primary")
    ws.set_cluster("eu-west-1", mode="remote")
    ws.set_cluster("eu-central-1", mode="remote")
    ws.drop_groups()


def _remote_values_published(run: CommitRun) -> None:
    published = _values(run, "example.com")
    assert {"192.0.2.10", "198.51.100.10", "203.0.113.10"} <= published, sorted(published)
    owners = _owners(run, "example.com")
    # a remote owns nothing: the primary publishes its records under its own id
    assert "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63" not in owners and "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275" in owners


def _site_a_and_remote_withdraws_address(ws: Workspace) -> None:
    for name, group in (("eu-west-1", "site-a"), ("eu-central-1", "site-b"), ("us-east-1", "site-b")):
        ws.set_cluster(name, group=group)
    _groups(2, ["site-a"])(ws)

    def change(doc: dict[str, Any]) -> bool:
        if doc.get("kind") != "Cluster" or doc["metadata"]["name"] != "eu-west-1":
            return False
        doc["spec"]["gateways"][0]["addresses"] = ["192.0.2.10"]
        return True
    ws.edit(change)


def _delegated_site_a(run: CommitRun) -> None:
    published = _values(run, "example.com")
    assert "192.0.2.10" in published and not {"192.0.2.11", "198.51.100.10", "203.0.113.10"} & published, \
        sorted(published)


DELEGATION_STORY = Story(EXAMPLE_REPO, [
    Commit("delegation: us-east-1 primary, eu-west-1 and eu-central-1 remotes; no groups", _delegate,
           DELEGATION_ORDER, _remote_values_published),
    Commit("groups again (the primary in site-b), ActiveGroups [site-a]; a remote withdraws an address",
           _site_a_and_remote_withdraws_address,
           DELEGATION_ORDER, _delegated_site_a),
])


# --- delegation: two primaries (they keep each other's claims in step) and two remotes -------------

def _cluster(name: str, mode: str, addresses: list[str] | None = None, hosts: tuple[str, ...] = ()) -> str:
    lines = ["apiVersion: gitdns.io/v1alpha1", "kind: Cluster", f"metadata: {{name: {name}}}", "spec:",
             f"  id: id-{name}", "  geo: GEO-EU", f"  mode: {mode}"]
    if addresses:
        lines += ["  gateways:", "    - name: gw", "      namespace: ingress",
                  f"      addresses: [{', '.join(addresses)}]", "      listeners:"]
        lines += [f"        - hostname: {h}" for h in hosts]
    return "\n".join(lines) + "\n"


TWO_PRIMARIES = {
    "zones/example.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\n"
                          "spec:\n  domain: example.com\n  provider: {type: local}\n",
    "policies/app.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: app}\n"
                         "spec:\n  targetRef: {gateway: gw, namespace: ingress}\n  strategy: simple\n",
    "clusters/p1.yaml": _cluster("p1", "primary"),
    "clusters/p2.yaml": _cluster("p2", "primary"),
    "clusters/r1.yaml": _cluster("r1", "remote", ["192.0.2.1"], ("app.example.com", "solo1.example.com")),
    "clusters/r2.yaml": _cluster("r2", "remote", ["192.0.2.2"], ("app.example.com",)),
}


def _both_remotes(run: CommitRun) -> None:
    assert run.after["example.com"][("app.example.com", "A", "")][3] == ("192.0.2.1", "192.0.2.2")
    assert ("solo1.example.com", "A", "") in run.after["example.com"]


def _remove_r1(ws: Workspace) -> None:
    ws.remove("clusters/r1.yaml")


def _r1_gone(run: CommitRun) -> None:
    assert run.after["example.com"][("app.example.com", "A", "")][3] == ("192.0.2.2",)
    assert ("solo1.example.com", "A", "") not in run.after["example.com"]


TWO_PRIMARIES_STORY = Story(None, [
    Commit("two primaries, two remotes", _nothing, ["r1", "r2", "p1", "p2"], _both_remotes),
    # r1's agent, removed from git, stays a remote and writes nothing: only the others run
    Commit("remote r1 removed from git", _remove_r1, ["r2", "p1", "p2"], _r1_gone),
], files=TWO_PRIMARIES)


# --- every repository under docs/examples -------------------------------------------------------

PUBLISHER = """apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata: {name: publisher}
spec:
  id: 7c1d2e3f-5a6b-4c7d-8e9f-0a1b2c3d4e5f
"""


def _clusters(ws: Workspace) -> list[str]:
    return [d["metadata"]["name"] for d in ws.docs("Cluster")]


def example_story(source: Path) -> Story:
    """As shipped (a repository without a Cluster gets one without gateways, so an agent
    publishes its static records); then with ActiveGroups if it had none (clusters alternately
    in site-a and site-b, site-a active), or without them if it had some."""
    clusters = [d["metadata"]["name"] for d in docs_in(source, "Cluster")] or ["publisher"]
    had_groups = bool(docs_in(source, "ActiveGroups"))

    def first(ws: Workspace) -> None:
        if not _clusters(ws):
            ws.write("clusters/publisher.yaml", PUBLISHER)

    def second(ws: Workspace) -> None:
        if had_groups:
            ws.drop_groups()
            return
        for i, name in enumerate(clusters):
            ws.set_cluster(name, group="site-a" if i % 2 == 0 else "site-b")
        _groups(1, ["site-a"])(ws)

    return Story(source, [
        Commit(f"{source.name} as shipped", first, clusters),
        Commit(f"{source.name} {'without' if had_groups else 'with'} ActiveGroups", second, clusters),
    ])


# --- health: one target, a loopback HTTP server answering healthy --------------------------------

class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def address_string(self) -> str:  # no reverse lookup of the client
        return str(self.client_address[0])

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def healthy_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def health_story(port: int) -> Story:
    files = {
        "zone.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\n"
                     "spec:\n  domain: example.com\n  provider: {type: local}\n",
        "cluster.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {name: lo}\nspec:\n"
                        "  id: 2f0c4b8a-1d3e-4a5b-9c6d-7e8f9a0b1c2d\n  gateways:\n"
                        "    - name: app-gw\n      namespace: ingress\n"
                        "      addresses: [127.0.0.1]\n      listeners: [{hostname: app.example.com}]\n",
        "policy.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: app}\nspec:\n"
                       "  targetRef: {gateway: app-gw}\n"
                       f"  healthCheck: {{protocol: HTTP, port: {port}, path: /healthz, interval: 1, timeout: 1}}\n",
    }

    def second(ws: Workspace) -> None:
        ws.write("records.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata: {name: extra}\n"
                                 "spec:\n  zone: example-com\n  records:\n"
                                 "    - {name: www, type: CNAME, values: [app.example.com.]}\n")

    def notes(run: CommitRun) -> str:
        return " ".join(n for p in run.turns[0].plan["plans"] for n in p["notes"])

    def first_published(run: CommitRun) -> None:
        assert run.after["example.com"][("app.example.com", "A", "")][3] == ("127.0.0.1",)
        assert "lo has published no status; every target is taken as healthy" in notes(run)

    def published_again(run: CommitRun) -> None:
        assert run.after["example.com"][("app.example.com", "A", "")][3] == ("127.0.0.1",)
        assert "published no status" not in notes(run)  # its status branch said how its target is

    return Story(None, [Commit("a health-checked target on loopback", _nothing, ["lo"], first_published),
                        Commit("a static record joins; the preview reads the published health", second, ["lo"],
                               published_again)], files=files, process=True)


# --- the tests ---------------------------------------------------------------------------------------

STORIES: dict[str, Callable[[int], Story]] = {
    "example-repo": lambda port: EXAMPLE_REPO_STORY,
    "delegation-one-primary": lambda port: DELEGATION_STORY,
    "delegation-two-primaries": lambda port: TWO_PRIMARIES_STORY,
    **{f"docs-examples-{d.name}": (lambda port, d=d: example_story(d)) for d in example_dirs()},
    "health-on-loopback": health_story,
}


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory, healthy_server: int) -> Played:
    return Played(tmp_path_factory, {name: (lambda make=make: make(healthy_server)) for name, make in STORIES.items()})


@pytest.mark.parametrize("name", list(STORIES))
def test_each_clusters_plan_is_what_its_agent_applies(played: Played, name: str) -> None:
    _, runs = played(name)
    problems = story_mismatches(runs)
    assert not problems, "\n".join(problems)
    planned = sum(len(c) for run in runs for turn in run.turns for c in changes_by_zone(turn.plan).values())
    assert planned > 0  # the story changed the zone: the comparison was not between empty plans


@pytest.mark.parametrize("name", list(STORIES))
def test_the_merged_preview_is_the_zone_after_every_agent_ran(played: Played, name: str) -> None:
    _, runs = played(name)
    problems = fleet_mismatches(runs)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", list(STORIES))
def test_plan_and_agent_exit_codes_agree_and_each_commit_did_what_it_says(played: Played, name: str) -> None:
    story, runs = played(name)
    problems = exit_code_mismatches(runs)
    assert not problems, "\n".join(problems)
    assert len(runs) == len(story.commits)
    for run, commit in zip(runs, story.commits, strict=True):
        commit.check(run)
