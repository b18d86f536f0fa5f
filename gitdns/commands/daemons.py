"""``gitdns agent``: configure and run the long-running agent (`gitdns.agent`); with ``--once``
one pass and its report.  ``gitdns orchestrator`` is `gitdns.commands.orchestrate`.

    run_agent(flags, env) -> Result          --once: exit 0 when Ready
    once_report(cycle, report) -> Result     the agent's --once report
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitdns.commands import EXIT_ERROR, EXIT_OK, Result

if TYPE_CHECKING:
    from gitdns.agent.cycle import Cycle
    from gitdns.core.status import ClusterReport

ABNORMAL_WHEN_TRUE = ("UnresolvedConflictDiscovered", "GroupsDivergedFromGit")


def run_agent(flags: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Result:
    """Flags (argparse names), then ``GITDNS_*`` variables of ``env``, then the config file."""
    from gitdns.agent.config import resolve
    from gitdns.agent.identity import derive_cluster
    from gitdns.agent.main import absolute_paths, build_agent, run_once, serve, setup_logging
    from gitdns.agent.metrics import Metrics

    config = resolve(flags, os.environ if env is None else env)
    setup_logging(config)
    config = derive_cluster(absolute_paths(config))
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not config.pod_namespace:
        from dataclasses import replace

        from gitdns.providers.fences import agent_namespace

        # its Lease, mode ConfigMap, credential and headers Secrets: the pod's own namespace
        config = replace(config, pod_namespace=agent_namespace())
    metrics = Metrics()
    agent = build_agent(config, metrics)
    if config.once:
        return once_report(*run_once(agent))
    return Result(serve(agent, config, metrics))


def once_report(cycle: Cycle, report: ClusterReport | None) -> Result:
    """One line per zone (applied, conflicts, errors), the abnormal conditions, Ready or NotReady."""
    result = Result()
    for outcome in cycle.outcomes:
        plan = outcome.plan
        line = f"zone {outcome.zone.domain}: "
        line += outcome.skipped or (f"{outcome.applied} change(s) applied" if plan else "nothing planned")
        if plan and plan.real_conflicts:
            line += f", {len(plan.real_conflicts)} conflict(s)"
        result.line(line)
        for conflict in plan.real_conflicts if plan else ():
            result.line(f"zone {outcome.zone.domain}: {conflict.reason}: {conflict.message}")
        for note in dict.fromkeys(plan.notes if plan else ()):  # what the layouts leave out, once each
            result.line(f"zone {outcome.zone.domain}: note: {note}")
        for error in outcome.errors:
            result.line(f"zone {outcome.zone.domain}: error: {error}")
    if report is None:
        result.code = EXIT_ERROR
        return result
    for condition in report.conditions:
        bad = condition.status if condition.type in ABNORMAL_WHEN_TRUE else not condition.status
        if bad:
            result.line(f"{condition.type}: {condition.reason}: {condition.message}")
    result.line("Ready" if report.ready else "NotReady")
    pushed = all(c.status for c in report.conditions if c.type == "StatusPublished")
    result.code = EXIT_OK if report.ready and pushed else EXIT_ERROR
    return result

