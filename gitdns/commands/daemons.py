"""``gitdns agent`` and ``gitdns orchestrator``: configure and run the long-running processes
(`gitdns.agent`, `gitdns.orchestrator`); with ``--once`` one pass and its report.

    run_agent(flags, env) -> Result          --once: exit 0 when Ready
    run_orchestrator(flags) -> Result        --once: exit 0 when delivered
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
    from gitdns.agent.main import absolute_paths, build_agent, run_once, serve, setup_logging
    from gitdns.agent.metrics import Metrics

    config = resolve(flags, os.environ if env is None else env)
    setup_logging(config)
    config = absolute_paths(config)
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


def run_orchestrator(flags: Mapping[str, Any]) -> Result:
    """The node pool's orchestrator; its probe headers come from ``healthCheck.headersSecret``."""
    from gitdns.agent.health import secret_headers
    from gitdns.orchestrator import wiring
    from gitdns.orchestrator.config import config_from_flags

    wiring.setup_logging(str(flags.get("log_level") or "info"))
    config = config_from_flags(flags)
    orch = wiring.build(config, headers=secret_headers(str(config.state_dir)))
    if not flags.get("once"):
        return Result(wiring.serve(orch, config.listen))
    delivered = orch.run_once()
    result = Result(EXIT_OK if delivered else EXIT_ERROR)
    result.line(f"node pool {config.node_pool}: " + ("delivered" if delivered else "not delivered") +
                f" to {orch.delivery.target}; published {' '.join(orch.published.ips) or 'nothing'}")
    result.lines([f"note: {note}" for note in orch.status()["notes"]])
    result.lines([f"error: {step}: {error}" for step, error in orch.errors.items()])
    return result
