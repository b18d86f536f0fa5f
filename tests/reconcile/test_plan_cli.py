"""`gitdns plan` tells a reviewer what the merge will do (issue 12, item 2), black-box through
the real CLI on real git repositories with the `local` store:

* a decommission (a Cluster file deleted after every agent applied the previous commit) shows
  in `plan --all-clusters`: the departed cluster's records are removed in the markdown, the
  merged zone no longer lists its addresses, and once its agent ran `--once` the zone is the
  preview's merged zone;
* `plan --exit-code` and `apply --dry-run` agree: conflicts (ForeignRecordInTheWay,
  RecordTypeConflict) exit 5 from both, a mass-change stall exits 4 from both, pending
  changes exit 3 from `plan --exit-code` (0 without it); headings name a cluster by its
  Cluster name with its id beside it;
* `apply --all-clusters` honours ActiveGroups: with [site-a] no record of a site-b cluster is
  published.

Health checks of the example repository are taken out of the copies (no probe leaves the
host); the agent's heartbeat and lock TXT (its housekeeping, in no plan) are left out of
zone comparisons.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reconcile.cli_kit import (
    EXAMPLE_REPO,
    Store,
    Workspace,
    apply_changes,
    changes_by_zone,
    loopback_only,
    strip_rows,
    without_housekeeping,
    zone_diff,
)

EU_WEST = ("eu-west-1", "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63")
EU_CENTRAL = ("eu-central-1", "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34")
US_EAST = ("us-east-1", "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275")
US_EAST_VALUES = {"203.0.113.10", "2001:db8::10", "203.0.113.20"}
SITE_B_VALUES = {"198.51.100.10", *US_EAST_VALUES}
ORDER = [EU_CENTRAL[0], EU_WEST[0], US_EAST[0]]
ZONES = ["example.com", "example.org"]


@pytest.fixture(autouse=True)
def _loopback_only() -> Iterator[None]:
    with loopback_only() as refused:
        yield
    assert not refused, f"a connection beyond loopback was attempted: {refused}"


def example(root: Path) -> Workspace:
    ws = Workspace(root, EXAMPLE_REPO)
    ws.localize()
    return ws


def data_values(store: Store) -> set[str]:
    return {v for zone in store.values() for (_, rtype, _), c in zone.items() if rtype != "TXT" for v in c[3]}


def txt_text(store: Store) -> str:
    return " ".join(v for zone in store.values() for (name, rtype, _), c in zone.items()
                    if rtype == "TXT" and not name.startswith(("gitdns-heartbeat-", "gitdns-lock-")) for v in c[3])


def sections(markdown: str) -> dict[str, str]:
    """The markdown plan per heading line (``**zone ... cluster NAME (ID): ...**``)."""
    out: dict[str, str] = {}
    heading = ""
    for line in markdown.splitlines():
        if line.startswith("**zone "):
            heading = line
            out[heading] = ""
        elif heading:
            out[heading] += line + "\n"
    return out


def test_the_loopback_rule_refuses_a_documentation_address_before_any_packet() -> None:
    with loopback_only() as refused, pytest.raises(OSError, match="no packet beyond loopback"):
        socket.create_connection(("192.0.2.10", 443), timeout=0.1)
    assert refused == ["('192.0.2.10', 0)"]


# --- 2. the decommission preview ---------------------------------------------------------------

class Decommission:
    def __init__(self, root: Path) -> None:
        self.ws = ws = example(root)
        ws.commit("example-repo as shipped")
        for cluster in ORDER:
            done = ws.agent_once(cluster)
            assert done.rc == 0, done.describe()
        self.applied = ws.read()
        ws.remove("clusters/us-east-1.yaml")
        ws.commit("decommission us-east-1")
        self.markdown = ws.plan("--all-clusters", "--format", "markdown", "--verbose")
        self.review = ws.plan("--all-clusters", "--format", "markdown")
        run = ws.plan("--all-clusters", "--format", "json")
        self.json_rc = run.rc
        self.preview: dict[str, Any] = json.loads(run.out)
        self.exit_code = ws.plan("--all-clusters", "--exit-code").rc
        assert ws.read() == self.applied  # a preview writes nothing
        self.agent = ws.agent_once(US_EAST[0])
        self.after_departed = ws.read()
        self.shown = {zone: ws.zone_show(zone) for zone in ZONES}
        self.others = [ws.agent_once(c) for c in (EU_CENTRAL[0], EU_WEST[0])]
        self.after_all = ws.read()


@pytest.fixture(scope="module")
def decommission(tmp_path_factory: pytest.TempPathFactory) -> Decommission:
    with loopback_only() as refused:
        made = Decommission(tmp_path_factory.mktemp("decommission"))
    assert not refused
    return made


def test_decommission_preview_shows_the_departed_clusters_removals(decommission: Decommission) -> None:
    md = decommission.markdown
    assert decommission.markdown.rc == 0, md.describe()
    label = f"cluster {US_EAST[0]} ({US_EAST[1]})"
    mine = {h: body for h, body in sections(md.out).items() if label in h}
    assert mine, f"no heading for {label}:\n{md.out}"
    for heading, body in mine.items():
        assert "_No changes._" not in body and "No record changes" not in body, f"{heading}\n{body}"
        assert "to delete" in heading and not re.search(r"0 to create, 0 to update, 0 to delete", heading), heading
    removed = "\n".join(line for body in mine.values() for line in body.splitlines()
                        if line.startswith(("- ", "~ ")))
    for value in ("203.0.113.10", "2001:db8::10", "203.0.113.20"):
        assert value in removed, f"{value} not shown as removed:\n{md.out}"
    assert "owner c5d09a7f" not in md.out  # named by its Cluster name, not by its id alone
    # the preview a reviewer reads: the departed cluster among those writing, its addresses deleted
    preview = decommission.review.out
    verdict = next(line for line in preview.splitlines() if line.startswith("**"))
    assert "clusters affected:" in verdict and US_EAST[0] in verdict and US_EAST[1] not in verdict, verdict
    deleted = [line for line in preview.splitlines() if line.startswith(("| - |", "| ~ |"))]  # a value out of a record
    for value in ("203.0.113.10", "2001:db8::10", "203.0.113.20"):
        assert any(value in line for line in deleted), f"{value} not shown as deleted:\n{preview}"


def test_decommission_merged_zone_no_longer_lists_its_addresses(decommission: Decommission) -> None:
    assert decommission.json_rc == 0
    merged = [r for zone in decommission.preview["zones"] for r in zone["merged"]]
    listed = {v for r in merged for v in r["values"]}
    assert not US_EAST_VALUES & listed, sorted(US_EAST_VALUES & listed)
    assert {"192.0.2.10", "198.51.100.10", "192.0.2.20"} <= listed  # the others stay
    assert not any(US_EAST[0] in r["owners"] or US_EAST[1] in r["owners"] for r in merged)
    # before the merge the zone still holds them: the preview is what changes
    assert data_values(decommission.applied) >= US_EAST_VALUES
    assert decommission.exit_code == 3  # pending changes


def test_decommission_zone_after_the_departed_agent_is_the_merged_preview(decommission: Decommission) -> None:
    assert decommission.agent.rc == 0, decommission.agent.describe()
    after = decommission.after_departed
    assert not US_EAST_VALUES & data_values(after)
    assert US_EAST[1] not in txt_text(after)  # its ownership TXT went with its records
    previews = {z["zone"]: z for z in decommission.preview["zones"]}
    for zone in ZONES:
        assert strip_rows(previews[zone]["merged"]) == strip_rows(decommission.shown[zone]), zone
        changes = [c for p in previews[zone]["plans"] for c in p["changes"]]
        expected, problems = apply_changes(decommission.applied.get(zone, {}), changes)
        assert not problems, problems
        diff = zone_diff(without_housekeeping(expected), without_housekeeping(after.get(zone, {})))
        assert not diff, "\n".join(diff)
    # and the other agents, on the same commit, have nothing left to do
    assert all(o.rc == 0 for o in decommission.others)
    assert {z: without_housekeeping(r) for z, r in decommission.after_all.items()} == \
        {z: without_housekeeping(r) for z, r in after.items()}


# --- 3. exit codes: plan --exit-code and apply --dry-run agree ----------------------------------------

@pytest.fixture
def fresh(tmp_path: Path) -> Workspace:
    ws = example(tmp_path)
    ws.commit("example-repo as shipped")
    return ws


def test_pending_changes_exit_3_from_plan_exit_code_only(fresh: Workspace) -> None:
    assert fresh.plan("--cluster", EU_WEST[0], "--exit-code").rc == 3
    assert fresh.plan("--all-clusters", "--exit-code").rc == 3
    assert fresh.plan("--cluster", EU_WEST[0]).rc == 0
    dry = fresh.apply("--cluster", EU_WEST[0], "--dry-run")
    assert dry.rc == 0, dry.describe()
    assert fresh.read() == {}  # neither wrote
    fresh.apply("--cluster", EU_WEST[0])
    assert fresh.plan("--cluster", EU_WEST[0], "--exit-code").rc == 0  # applied: nothing pending


def test_plan_headings_name_the_cluster_with_its_id(fresh: Workspace) -> None:
    label = f"cluster {EU_WEST[0]} ({EU_WEST[1]})"
    for fmt in ("text", "markdown"):
        out = fresh.plan("--cluster", EU_WEST[0], "--format", fmt).out
        assert label in out and f"owner {EU_WEST[1]}" not in out, out
    merged = fresh.plan("--all-clusters", "--format", "markdown", "--verbose").out
    for name, ident in (EU_WEST, EU_CENTRAL, US_EAST):
        assert f"cluster {name} ({ident})" in merged, merged
    preview = fresh.plan("--all-clusters", "--format", "markdown").out  # names, never ids alone
    assert all(name in preview and ident not in preview for name, ident in (EU_WEST, EU_CENTRAL, US_EAST)), preview
    plan = json.loads(fresh.plan("--cluster", EU_WEST[0], "--format", "json").out)
    assert {p["cluster"] for p in plan["plans"]} == {EU_WEST[0]}


def conflicts(ws: Workspace, cluster: str) -> tuple[int, list[str]]:
    run = ws.plan("--cluster", cluster, "--format", "json", "--exit-code")
    return run.rc, [c["reason"] for p in json.loads(run.out)["plans"] for c in p["conflicts"]]


def test_foreign_record_in_the_way_exits_5_from_plan_and_apply_dry_run(fresh: Workspace) -> None:
    # mail.example.com A is a static record of the repository; someone wrote one by hand
    fresh.write_foreign("example.com", [["mail.example.com", "A", "", 300, None, None, ["192.0.2.77"]]])
    before = fresh.read()
    rc, reasons = conflicts(fresh, EU_WEST[0])
    assert "ForeignRecordInTheWay" in reasons and rc == 5
    assert fresh.plan("--cluster", EU_WEST[0]).rc == 5  # with or without --exit-code
    assert fresh.plan("--all-clusters", "--exit-code").rc == 5
    dry = fresh.apply("--cluster", EU_WEST[0], "--dry-run")
    assert dry.rc == 5, dry.describe()
    assert fresh.read() == before
    applied = fresh.apply("--cluster", EU_WEST[0])
    assert applied.rc == 5  # the rest applied, the conflict left as it was
    assert fresh.read()["example.com"][("mail.example.com", "A", "")][3] == ("192.0.2.77",)


def test_record_type_conflict_exits_5_from_plan_and_apply_dry_run(fresh: Workspace, tmp_path: Path) -> None:
    # another desired-state repository (another team, another owner) publishes an A record at
    # www.example.com, where this repository wants its CNAME
    other = Workspace(tmp_path / "other", files={
        "zone.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\n"
                     "spec:\n  domain: example.com\n  provider: {type: local}\n",
        "cluster.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {name: other-team}\n"
                        "spec: {id: other-team-0001}\n",
        "records.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata: {name: www}\nspec:\n"
                        "  zone: example-com\n  records:\n    - {name: www, type: A, values: [192.0.2.88]}\n"})
    other.store = fresh.store
    other.localize()
    other.commit("the other team's www")
    # the shared store lies in this workspace's checkout: the operator names it for the other one
    assert other.apply("--cluster", "other-team", "--store-dir", str(fresh.work)).rc == 0
    before = fresh.read()
    assert before["example.com"][("www.example.com", "A", "")][3] == ("192.0.2.88",)
    rc, reasons = conflicts(fresh, EU_WEST[0])
    assert "RecordTypeConflict" in reasons and rc == 5
    dry = fresh.apply("--cluster", EU_WEST[0], "--dry-run")
    assert dry.rc == 5, dry.describe()
    assert fresh.read() == before


def test_mass_change_stall_exits_4_from_plan_and_apply_dry_run(fresh: Workspace) -> None:
    assert fresh.apply("--cluster", EU_WEST[0]).rc == 0  # the only owner of what it published
    published = fresh.read()

    # new values for most static records in one commit: a renumbering is no reviewed removal,
    # so the mass-change guard holds it until git acknowledges it
    def renumber(doc: dict[str, Any]) -> bool:
        if doc.get("kind") != "RecordSet":
            return False
        for rec in doc["spec"]["records"]:
            if rec["type"] in ("A", "TXT", "MX", "CAA"):
                rec["values"] = [v.replace("25", "26").replace("10 ", "15 ").replace("letsencrypt", "pki")
                                 for v in rec["values"]]
        return True
    fresh.edit(renumber)
    fresh.commit("renumber the static records")
    text = fresh.plan("--cluster", EU_WEST[0], "--exit-code")
    assert text.rc == 4, text.describe()
    assert "STALLED" in text.out
    assert fresh.plan("--cluster", EU_WEST[0]).rc == 4
    dry = fresh.apply("--cluster", EU_WEST[0], "--dry-run")
    assert dry.rc == 4, dry.describe()
    assert fresh.apply("--cluster", EU_WEST[0]).rc == 4
    assert fresh.read() == published  # stalled: nothing written
    assert fresh.plan("--cluster", EU_WEST[0], "--force", "--exit-code").rc == 3  # --force: pending


# --- 4. apply --all-clusters honours ActiveGroups ------------------------------------------------------

def test_apply_all_clusters_publishes_no_record_of_an_inactive_group(tmp_path: Path) -> None:
    ws = example(tmp_path)
    for zone in ("example-com", "example-org"):
        ws.set_groups(zone, 2, ["site-a"])
    ws.commit("ActiveGroups [site-a]")
    preview = json.loads(ws.plan("--all-clusters", "--format", "json").out)
    done = ws.apply("--all-clusters")
    assert done.rc == 0, done.describe()
    store = ws.read()
    published = data_values(store)
    assert {"192.0.2.10", "192.0.2.11", "192.0.2.20"} <= published
    assert not SITE_B_VALUES & published, sorted(SITE_B_VALUES & published)
    owners = txt_text(store)
    assert EU_WEST[1] in owners
    assert EU_CENTRAL[1] not in owners and US_EAST[1] not in owners
    for zone in preview["zones"]:  # what apply did is what the preview said
        assert strip_rows(zone["merged"]) == strip_rows(ws.zone_show(zone["zone"])), zone["zone"]
    # and applying again, as the agents would, has nothing left to do
    again = json.loads(ws.plan("--all-clusters", "--format", "json").out)
    assert not [c for z in again["zones"] for p in z["plans"] for c in p["changes"]]
    for name, _ in (EU_WEST, EU_CENTRAL, US_EAST):
        assert not any(changes_by_zone(json.loads(ws.plan("--cluster", name, "--format", "json").out)).values())
