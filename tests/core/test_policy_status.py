"""Per-DNSPolicy readiness in the status summary: a held zone makes only the policies with hosts
in it not ready; the cluster not Ready for another reason makes every policy not ready; a policy
whose document does not validate is listed, not ready."""

from __future__ import annotations

from gitdns.core.conditions import Condition
from gitdns.core.status.report import ClusterReport, ZoneReport, summary_document

POLICIES = {"api": ["api.example.com"], "web": ["www.example.org"]}


def _report(ready: Condition, *, held: str = "", zones_only: bool = False,
            rejected: tuple[str, ...] = ()) -> ClusterReport:
    zones = (ZoneReport("example.com", "local", held=held == "example.com"),
             ZoneReport("example.org", "local", held=held == "example.org"))
    return ClusterReport("eu-west-1", "id-1", "primary", None, "a" * 40, "a" * 40, "a" * 40, (ready,), zones,
                         POLICIES, zones_only=zones_only, rejected_policies=rejected)


def _policies(report: ClusterReport) -> dict[str, tuple[bool, str]]:
    return {name: (p["ready"], p["message"]) for name, p in summary_document(report)["policies"].items()}


def test_a_held_zone_holds_only_its_policies() -> None:
    held = Condition("Ready", False, "ValidationFailed", "zones held at their last good revision: example.com")
    got = _policies(_report(held, held="example.com", zones_only=True))
    assert got["api"] == (False, "the last published DNS has been preserved: api.example.com")
    assert got["web"] == (True, "published")


def test_not_ready_for_another_reason_holds_every_policy() -> None:
    unreachable = Condition("Ready", False, "GitUnreachable", "origin did not answer")
    got = _policies(_report(unreachable))
    assert got == {"api": (False, "the last published DNS has been preserved: not ready"),
                   "web": (False, "the last published DNS has been preserved: not ready")}


def test_ready_publishes_every_policy_and_a_rejected_one_is_listed() -> None:
    ok = Condition("Ready", True, "ReconcileSucceeded", "applied aaaaaaa")
    got = _policies(_report(ok, rejected=("broken",)))
    assert got["api"] == got["web"] == (True, "published")
    assert got["broken"][0] is False and "does not validate" in got["broken"][1]
