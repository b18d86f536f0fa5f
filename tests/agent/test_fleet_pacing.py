"""How a fleet spreads what it sends one account: the webhook's wake-up by hash(cluster), the
drift check's whole-zone reads over an interval that grows with the fleet and the zone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gitdns.agent.ports import AgentView
from gitdns.agent.runner import WAKE_SPREAD, wake_delay
from gitdns.agent.zones.work import DRIFT_SHARE, drift_interval
from gitdns.core.model import Cluster, Mode
from gitdns.core.providertypes import capabilities_of


def _view(ident: str, fleet: int) -> AgentView:
    current: Any = SimpleNamespace(state=SimpleNamespace(clusters=[None] * fleet))
    return AgentView(Cluster(name=ident, id=ident), Mode.DEFAULT, current)


def test_the_webhook_wakes_each_agent_at_its_own_point_of_a_window() -> None:
    delays = [wake_delay(_view(f"cluster-{i:04d}", 1000)) for i in range(1000)]
    assert all(0.0 <= d < WAKE_SPREAD for d in delays)
    assert min(delays) < 0.1 * WAKE_SPREAD and max(delays) > 0.9 * WAKE_SPREAD  # spread over the window
    assert len({round(d, 3) for d in delays}) > 900  # not bunched
    assert wake_delay(_view("cluster-0001", 1000)) == delays[1]  # the same agent: the same point
    # a small fleet waits little: 0.05 s per Cluster in git
    assert all(wake_delay(_view(f"cluster-{i}", 2)) < 0.1 for i in range(50))
    assert wake_delay(AgentView(None, Mode.DEFAULT, None)) == 0.0


def test_the_drift_check_takes_a_tenth_of_the_accounts_reads_at_most() -> None:
    route53 = capabilities_of("route53")
    base = 3600.0
    # 1,000 clusters, 8,000 record sets: 27 pages each, 1,000 agents, 0.1 x 5 reads a second
    assert drift_interval(route53, 8000, 1000, base) == 1000 * 27 / (DRIFT_SHARE * 5)
    assert drift_interval(route53, 60, 10, base) == base  # a small fleet: the base interval
    assert drift_interval(capabilities_of("local"), 8000, 1000, base) == base  # no limit to share
