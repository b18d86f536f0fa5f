"""The text of ``gitdns agent --once``: one section per zone, then the conditions that are not
OK, then Ready or NotReady (`gitdns.commands.daemons` prints it and sets the exit code).

Each zone's section is its summary line (``zone <domain>: N change(s) applied``, with its
conflicts and errors counted), then its conflicts, its layout notes (once each) and its errors:
every error once, with its reason, under its own zone.  The conditions do not repeat them: a
``Ready`` condition that failed on zone errors (``ProviderError``) names the zones whose errors
are printed above, and says in full only an error no section printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitdns.core.conditions import Condition
from gitdns.core.plan import fmt as planfmt

if TYPE_CHECKING:
    from gitdns.agent.cycle import Cycle
    from gitdns.core.status.report import ClusterReport
    from gitdns.reconcile.zonepass import ZoneOutcome

ABNORMAL_WHEN_TRUE = ("UnresolvedConflictDiscovered", "GroupsDivergedFromGit")


def once_lines(cycle: Cycle, report: ClusterReport | None) -> tuple[list[str], bool]:
    """The report's lines and whether the run succeeded (Ready, and the status pushed)."""
    lines: list[str] = []
    printed: dict[str, list[str]] = {}  # zone domain -> the errors its section printed
    for outcome in cycle.outcomes:
        lines.extend(zone_section(outcome))
        if outcome.errors:
            printed.setdefault(outcome.zone.domain, []).extend(outcome.errors)
    if report is None:
        return lines, False
    for condition in report.conditions:
        bad = condition.status if condition.type in ABNORMAL_WHEN_TRUE else not condition.status
        if bad:
            lines.append(condition_line(condition, report, printed))
    lines.append("Ready" if report.ready else "NotReady")
    pushed = all(c.status for c in report.conditions if c.type == "StatusPublished")
    return lines, report.ready and pushed


def zone_section(outcome: ZoneOutcome) -> list[str]:
    domain = outcome.zone.domain
    plan = outcome.plan
    head = f"zone {domain}: "
    summary = head + (outcome.skipped or (f"{outcome.applied} change(s) applied" if plan else "nothing planned"))
    if plan and plan.real_conflicts:
        summary += f", {len(plan.real_conflicts)} conflict(s)"
    summary += planfmt.errors_count(outcome.errors)
    lines = [summary]
    lines.extend(f"{head}{c.reason}: {c.message}" for c in (plan.real_conflicts if plan else ()))
    lines.extend(f"{head}note: {n}" for n in dict.fromkeys(plan.notes if plan else ()))  # once each
    lines.extend(f"{head}error: {e}" for e in dict.fromkeys(outcome.errors))
    lines.extend(f"{head}{r}" for r in outcome.reloads)  # not errors: the store's files are right
    return lines


def condition_line(condition: Condition, report: ClusterReport, printed: dict[str, list[str]]) -> str:
    message = condition.message
    if condition.type == "Ready" and condition.reason == "ProviderError":
        message = _zone_errors(report, printed) or message
    return f"{condition.type}: {condition.reason}: {message}"


def _zone_errors(report: ClusterReport, printed: dict[str, list[str]]) -> str:
    """The zones whose errors failed Ready: by name when their section printed those errors,
    in full otherwise (a zone this cycle did not pass through)."""
    above = [z.zone for z in report.zones if z.error and z.error == "; ".join(printed.get(z.zone, ()))]
    unprinted = [f"{z.zone}: {z.error}" for z in report.zones if z.error and z.zone not in above]
    parts = [f"error(s) in zone {', '.join(above)} (above)"] if above else []
    return "; ".join([*parts, *unprinted])
