"""Edges where the preview and the agents once parted, each proven black-box the way
`test_preview_equals_agent.py` proves the examples: a real git repository, `gitdns plan` right
before each `gitdns agent --once`, the `local` store compared before and after (the agent's
heartbeat and lock TXT, its own housekeeping and in no plan, left out).

The stories run on `example-repo/` with two clusters (eu-west-1 and us-east-1; eu-central-1
and the failover groups taken out), health checks off, nothing beyond loopback.  The tests
cover the edges where the two once parted: a removal followed by another commit before the
agents poll, a default cluster turned remote, and a cluster that leaves a zone but stays in git.
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

# A removal merged, then another commit before the agents poll: each cluster's preview judges the
# reviewed-removal exemption against the revision that cluster last applied (its status branch,
# else its newest rev label, else the previous commit), as its agent does.


# --- a default cluster becomes a remote of a new primary -----------------------------------------------

def _to_delegation(ws: Workspace) -> None:
    ws.set_cluster("us-east-1", mode="primary")
    ws.set_cluster("eu-west-1", mode="remote")


DEFAULT_TO_REMOTE = Story(EXAMPLE_REPO, [
    Commit("example-repo, two clusters, no groups", two_clusters, ORDER),
    Commit("us-east-1 becomes a primary, eu-west-1 its remote", _to_delegation, ORDER),
])

# A default cluster becomes a remote: the primary's clean-remote-claims step removes its old
# ownership TXT and heartbeat, in the agent and in the preview alike.


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

# A cluster stays in git but leaves a zone: the preview runs it as an owner that will remove its
# records, and a restarted agent tracks the zones of its applied revision.

# The merged zone names owners by every Cluster in git, as `gitdns zone show` does.


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


def test_removal_then_another_commit_each_plan_is_what_its_agent_applies(played: Played) -> None:
    problems = story_mismatches(played("removal-then-another-commit")[1])
    assert not problems, "\n".join(problems)


def test_removal_then_another_commit_merged_preview_is_the_zone_after_the_agents(played: Played) -> None:
    problems = fleet_mismatches(played("removal-then-another-commit")[1])
    assert not problems, "\n".join(problems)


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


def test_default_to_remote_each_plan_is_what_its_agent_applies(played: Played) -> None:
    problems = story_mismatches(played("default-to-remote")[1])
    assert not problems, "\n".join(problems)


def test_default_to_remote_merged_preview_is_the_zone_after_the_agents(played: Played) -> None:
    problems = fleet_mismatches(played("default-to-remote")[1])
    assert not problems, "\n".join(problems)


# a cluster leaves a zone ---------------------------------------------------------------------------------------

def test_cluster_leaves_a_zone_each_plan_is_what_its_agent_applies(played: Played) -> None:
    # the preview and a restarted agent agree (both leave the value: see the next tests)
    problems = story_mismatches(played("cluster-leaves-a-zone")[1])
    assert not problems, "\n".join(problems)
    assert not exit_code_mismatches(played("cluster-leaves-a-zone")[1])


def test_cluster_leaves_a_zone_its_value_is_removed(played: Played) -> None:
    run = last(played, "cluster-leaves-a-zone")
    assert _data(run, "example.org")[("app.example.org", "A", "")] == ("192.0.2.20",)


def test_cluster_leaves_a_zone_merged_preview_names_owners_as_zone_show_does(played: Played) -> None:
    problems = fleet_mismatches(played("cluster-leaves-a-zone")[1])
    assert not problems, "\n".join(problems)
