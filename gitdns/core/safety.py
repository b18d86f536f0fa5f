"""The mass-change guard (docs/records.md).

Judged per owner per zone: updates or deletes of more than ``max_change_fraction`` of the
data records an owner manages (ownership TXT not counted), once it manages at least
``min_managed``, stall the plan with ``MassChangeRefused`` — unless the change follows
from a reviewed removal or switch in the same revision, git acknowledges it, or the
operator forces it on the command line.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitdns.core.plan.values import PlanPolicy
from gitdns.core.records import Action, Change

MASS_CHANGE_REFUSED = "MassChangeRefused"


def disruptive_count(changes: Sequence[Change]) -> int:
    """Updates and deletes of data records (ownership TXT changes are not counted)."""
    return sum(1 for c in changes if c.action is not Action.CREATE and c.key == c.group)


def judge_mass_change(
    changes: Sequence[Change], managed: int, policy: PlanPolicy
) -> tuple[str | None, str | None]:
    """``(stalled reason or None, a note or None)``."""
    count = disruptive_count(changes)
    if managed < policy.min_managed or count <= policy.max_change_fraction * managed:
        return None, None
    share = f"{count} of {managed} managed records ({count / managed:.0%})"
    limit = f"{policy.max_change_fraction:.0%}"
    if policy.force:
        return None, f"mass change allowed by --force: {share} > {limit}"
    if policy.reviewed:
        return None, f"mass change follows a reviewed change in this revision: {share}"
    if policy.acknowledged:
        return None, f"mass change acknowledged in git: {share}"
    return MASS_CHANGE_REFUSED, (
        f"refused: {share} would change, over the {limit} limit; acknowledge it with a commit "
        f"trailer 'Gitdns-Allow-Mass-Change: {policy.zone}', spec.safety.acknowledge, or --force"
    )
