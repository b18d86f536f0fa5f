"""Where the preview and the agents still part (issue 12, item 3), each proven black-box the way
`test_preview_equals_agent.py` proves the examples: a real git repository, `gitdns plan` right
before each `gitdns agent --once`, the `local` store compared before and after (the agent's
heartbeat and lock TXT, its own housekeeping and in no plan, left out).

The stories run on `example-repo/` with two clusters (eu-west-1 and us-east-1; eu-central-1
and the failover groups taken out), health checks off, nothing beyond loopback.  The tests
that fail on a known discrepancy are marked ``xfail(strict=True)`` with the diagnosis: once
the product is fixed they pass, and strict xfail makes the suite say so.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.reconcile.cli_kit import (
    EXAMPLE_REPO,
    Commit,
    CommitRun,
    Played,
    Story,
    Workspace,
    exit_code_mismatches,
    fleet_mismatches,
    story_mismatches,
)

ORDER = ["eu-west-1", "us-east-1"]
US_EAST_ID = "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"
EU_WEST_ID = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"


def two_clusters(ws: Workspace) -> None:
    ws.remove(ws.file_of("Cluster", "eu-central-1"))
    ws.drop_groups()


# --- a removal merged, then another commit before the agents poll ------------------------------------

def _remove_api_and_statics(ws: Workspace) -> None:
    ws.remove(ws.file_of("DNSPolicy", "api"))
    ws.remove(ws.file_of("RecordSet", "example-com-static"))


def _unrelated(ws: Workspace) -> None:
    ws.write("notes.yaml", "# an unrelated change\n")


REMOVAL_THEN_ANOTHER_COMMIT = Story(EXAMPLE_REPO, [
    Commit("example-repo, two clusters, no groups", two_clusters, ORDER),
    Commit("the api policy and the static records removed (no agent polls in between)", _remove_api_and_statics, []),
    Commit("an unrelated change", _unrelated, ORDER),
])

REVIEWED_AGAINST = (
    "The mass-change guard's reviewed-removal exemption (reconcile.engine._reviewed) is judged against "
    "different revisions: `gitdns plan` against HEAD's parent (commands/plan.py: desired.previous = "
    "reconcile.engine.previous_state), the agent against the revision it last applied (agent/loading.py: "
    "desired.previous = the state at applied_sha, restored from its status branch). A removal merged, then "
    "another commit before the agents poll: the preview stalls (MassChangeRefused, no change listed, "
    "plan exit 4) for eu-west-1 and us-east-1 while both agents apply the removal (15 and 22 changes). "
    "Fix: judge each cluster's preview pass against the revision that cluster last applied (its status "
    "branch's summary.yaml appliedRevision, else the newest rev label of its ownership TXT in the zone, "
    "else HEAD's parent): a per-cluster desired.previous in reconcile.preview.preview_pass")


# --- a default cluster becomes a remote of a new primary -----------------------------------------------

def _to_delegation(ws: Workspace) -> None:
    ws.set_cluster("us-east-1", mode="primary")
    ws.set_cluster("eu-west-1", mode="remote")


DEFAULT_TO_REMOTE = Story(EXAMPLE_REPO, [
    Commit("example-repo, two clusters, no groups", two_clusters, ORDER),
    Commit("us-east-1 becomes a primary, eu-west-1 its remote", _to_delegation, ORDER),
])

REMOTE_CLAIMS = (
    "A primary prunes the old ownership TXT (and heartbeat) of a cluster that published in default mode and "
    "is now its merged remote: agent/roles.py Role.clean_remote_claims, called by agent/zonework.py after the "
    "pipeline (with the heartbeat), outside it. The preview's pipeline (reconcile.pipeline "
    "Role.PREVIEW_PRIMARY) has no such step: `plan --cluster us-east-1` and `plan --all-clusters` omit the "
    "deletion of eu-west-1's ownership TXT (11 in example.com, 1 in example.org) and the merged zone still "
    "lists eu-west-1 as an owner. Fix: make it a step of the primary roles (after peers, in PRIMARY and "
    "PREVIEW_PRIMARY), so the preview runs it against its copy of the zone")


# --- a cluster stays in git but leaves a zone ------------------------------------------------------------

def _us_east_leaves_example_org(ws: Workspace) -> None:
    def change(doc: dict[str, Any]) -> bool:
        if doc.get("kind") != "Cluster" or doc["metadata"]["name"] != "us-east-1":
            return False
        doc["spec"]["gateways"] = [g for g in doc["spec"]["gateways"] if g["name"] != "web-gw"]
        return True
    ws.edit(change)


CLUSTER_LEAVES_A_ZONE = Story(EXAMPLE_REPO, [
    Commit("example-repo, two clusters, no groups", two_clusters, ORDER),
    Commit("us-east-1's web gateway removed: it leaves example.org", _us_east_leaves_example_org, ORDER),
])

ZONE_LEFT = (
    "A cluster that stays in git but no longer has a host in a zone (us-east-1 without its web gateway) keeps "
    "its value 203.0.113.20 in app.example.org: the preview runs only the clusters whose zones_of() include "
    "the zone plus departed() owners (Clusters gone from git), and a restarted agent (`--once`: no zone "
    "tracked in memory) reconciles only builder.zones_for_cluster(); only a long-running agent that still "
    "tracks the zone (agent/zones.py, 'left the cluster') removes it. Fix: treat an owner in the zone whose "
    "Cluster no longer publishes it as departed in the preview (reconcile.preview.departed), and have the "
    "agent track the zones of its applied revision after a restart, as _track_removed_zones does for a "
    "Cluster removed from git")

ZONE_LEFT_NAMES = (
    "The merged zone of `plan --all-clusters` names owners only by the clusters that ran in that zone "
    "(commands/plan.py plan_all: names = {c.id: c.name for c, _ in sim.plans}): us-east-1, still in git but "
    "no longer publishing example.org, is listed by its id where `gitdns zone show` names it us-east-1. "
    "Fix: the names of every Cluster in git plus the departed ones")


STORIES = {
    "removal-then-another-commit": lambda: REMOVAL_THEN_ANOTHER_COMMIT,
    "default-to-remote": lambda: DEFAULT_TO_REMOTE,
    "cluster-leaves-a-zone": lambda: CLUSTER_LEAVES_A_ZONE,
}


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    return Played(tmp_path_factory, STORIES)


def last(played: Played, name: str) -> CommitRun:
    return played(name)[1][-1]


def _data(run: CommitRun, zone: str) -> dict[tuple[str, str, str], tuple[str, ...]]:
    return {k: c[3] for k, c in run.after.get(zone, {}).items() if k[1] != "TXT"}


# removal merged, then another commit -----------------------------------------------------------------------

def test_removal_then_another_commit_the_agents_apply_the_removal(played: Played) -> None:
    run = last(played, "removal-then-another-commit")
    assert not [k for k in _data(run, "example.com") if k[0].endswith("api.example.com")]
    assert ("mail.example.com", "A", "") not in _data(run, "example.com")


@pytest.mark.xfail(strict=True, reason=REVIEWED_AGAINST)
def test_removal_then_another_commit_each_plan_is_what_its_agent_applies(played: Played) -> None:
    problems = story_mismatches(played("removal-then-another-commit")[1])
    assert not problems, "\n".join(problems)


@pytest.mark.xfail(strict=True, reason=REVIEWED_AGAINST)
def test_removal_then_another_commit_merged_preview_is_the_zone_after_the_agents(played: Played) -> None:
    problems = fleet_mismatches(played("removal-then-another-commit")[1])
    assert not problems, "\n".join(problems)


@pytest.mark.xfail(strict=True, reason=REVIEWED_AGAINST)
def test_removal_then_another_commit_plan_does_not_stall_where_the_agents_apply(played: Played) -> None:
    problems = exit_code_mismatches(played("removal-then-another-commit")[1])
    assert not problems, "\n".join(problems)


# a default cluster becomes a remote --------------------------------------------------------------------------

def test_default_to_remote_the_primary_takes_over_the_remotes_records(played: Played) -> None:
    run = last(played, "default-to-remote")
    assert not exit_code_mismatches(played("default-to-remote")[1])
    assert _data(run, "example.org")[("app.example.org", "A", "")] == ("192.0.2.20", "203.0.113.20")
    owners = " ".join(v for (_, t, _), c in run.after["example.com"].items() if t == "TXT" for v in c[3])
    assert US_EAST_ID in owners


@pytest.mark.xfail(strict=True, reason=REMOTE_CLAIMS)
def test_default_to_remote_each_plan_is_what_its_agent_applies(played: Played) -> None:
    problems = story_mismatches(played("default-to-remote")[1])
    assert not problems, "\n".join(problems)


@pytest.mark.xfail(strict=True, reason=REMOTE_CLAIMS)
def test_default_to_remote_merged_preview_is_the_zone_after_the_agents(played: Played) -> None:
    problems = fleet_mismatches(played("default-to-remote")[1])
    assert not problems, "\n".join(problems)


# a cluster leaves a zone ---------------------------------------------------------------------------------------

def test_cluster_leaves_a_zone_each_plan_is_what_its_agent_applies(played: Played) -> None:
    # the preview and a restarted agent agree (both leave the value: see the next tests)
    problems = story_mismatches(played("cluster-leaves-a-zone")[1])
    assert not problems, "\n".join(problems)
    assert not exit_code_mismatches(played("cluster-leaves-a-zone")[1])


@pytest.mark.xfail(strict=True, reason=ZONE_LEFT)
def test_cluster_leaves_a_zone_its_value_is_removed(played: Played) -> None:
    run = last(played, "cluster-leaves-a-zone")
    assert _data(run, "example.org")[("app.example.org", "A", "")] == ("192.0.2.20",)


@pytest.mark.xfail(strict=True, reason=ZONE_LEFT_NAMES)
def test_cluster_leaves_a_zone_merged_preview_names_owners_as_zone_show_does(played: Played) -> None:
    problems = fleet_mismatches(played("cluster-leaves-a-zone")[1])
    assert not problems, "\n".join(problems)
