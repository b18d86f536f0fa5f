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
    from gitdns.core.status.report import ClusterReport



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
    """Each zone's section (its errors once, under it), the abnormal conditions, Ready or
    NotReady (`gitdns.agent.oncereport`); exit 0 when Ready and the status was pushed."""
    from gitdns.agent.oncereport import once_lines

    lines, ok = once_lines(cycle, report)
    result = Result()
    result.lines(lines)
    result.code = EXIT_OK if ok else EXIT_ERROR
    return result

