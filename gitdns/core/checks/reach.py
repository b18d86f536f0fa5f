"""Probe targets the repository may name (`gitdns.core.reach`), checked as the daemons check them
under their default settings, so that CI refuses what an agent or an orchestrator would refuse:

* a NodePool node is probed at its own address: its ``healthEndpoint`` must parse and its host
  must be the node's ``ip`` (no setting lifts this);
* no probe goes to a loopback, link-local, cloud metadata, unspecified, multicast, broadcast or
  reserved address — a node's ``ip``, or a gateway address of a Cluster that a DNSPolicy with a
  ``healthCheck`` probes — unless the operator allows its range with ``--probe-allow-ranges`` on
  the daemon.  `gitdns validate` refuses them as the defaults do, unless it is given the same
  setting (``gitdns validate --probe-allow-ranges``, or ``GITDNS_PROBE_ALLOW_RANGES``); the
  problem names the setting.

The problems hold no zone: the daemons refuse the probe (and say so), they do not stop a zone for
it.  `probe_targets` is the check `gitdns.core.validate.CHECKS` runs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from gitdns.core import builder
from gitdns.core.checks.index import Index, problem
from gitdns.core.health import parse_endpoint
from gitdns.core.model import Cluster, DesiredState, Gateway, NodePool
from gitdns.core.problems import Problem, shown
from gitdns.core.reach import PROBE_FLAG, own_address_refusal, probe_refusal

CODE = "ProbeTargetRefused"
# what these problems are: each holds no zone by design (module doc), where another problem with
# no zones is one whose zones cannot be read (`gitdns.agent.loading` holds what its file was)
HOLDS_NOTHING = frozenset({CODE, "InvalidHealthEndpoint"})
_RANGE_HINT = (f"a probe goes to an ordinary address; if this one is meant, the operator allows its range on the "
               f"daemons and on gitdns validate with {PROBE_FLAG}")


def probe_targets(ix: Index) -> Iterable[Problem]:
    """Every node endpoint and probed address the daemons would refuse under default settings."""
    for pool in ix.state.node_pools:
        yield from _nodes(ix, pool)
    if not any(policy.health is not None for policy in ix.state.policies):
        return  # no health check: no gateway address is probed
    state = ix.reading("zones", "policies")  # all that zone_for_host and policy_for read
    for cluster in ix.state.clusters:
        for gi, gateway in enumerate(cluster.gateways):
            yield from _gateway(ix, state, cluster, gi, gateway)


def _nodes(ix: Index, pool: NodePool) -> Iterable[Problem]:
    for i, node in enumerate(pool.nodes):
        if not _is_ip(node.ip):  # a node ip that is no address is the addressing check's
            continue
        parsed = parse_endpoint(node.health_endpoint)
        if isinstance(parsed, str):
            yield problem(pool.origin, ("spec", "nodes", i, "healthEndpoint"), f"node {shown(node.name)}: {parsed}",
                          "scheme://address:port/path with the node's ip as the address, e.g. "
                          "http://10.0.0.1:15021/healthz/ready", (), "InvalidHealthEndpoint")
            continue
        wrong = own_address_refusal(node.ip, parsed[1])
        if wrong:
            yield problem(pool.origin, ("spec", "nodes", i, "healthEndpoint"), f"node {shown(node.name)}: {wrong}",
                          f"write the node's ip as the endpoint's host ({shown(node.ip)}), or leave healthEndpoint "
                          "out to use the pool's healthCheck", (), CODE)
            continue
        why = probe_refusal(node.ip, ix.probe_ranges)
        if why:
            yield problem(pool.origin, ("spec", "nodes", i, "ip"), f"node {shown(node.name)}: {why}; the node's probe "
                          "would go there, and no probe does under the default settings", _RANGE_HINT, (), CODE)


def _gateway(ix: Index, state: DesiredState, cluster: Cluster, gi: int, gateway: Gateway) -> Iterable[Problem]:
    """A gateway's addresses that a DNSPolicy's health check probes (those its policies do not
    exclude), refused under the default settings."""
    probed: set[str] = set()
    for listener in gateway.listeners:
        zone = state.zone_for_host(listener.hostname)
        policy = builder.policy_for(state, zone, gateway, listener.hostname) if zone is not None else None
        if policy is not None and policy.health is not None:
            kept = builder.split_addresses(gateway.addresses, policy.exclude_addresses)
            probed.update(kept.ipv4 + kept.ipv6)
    for ai, raw in enumerate(gateway.addresses):
        if not _is_ip(raw) or str(ipaddress.ip_address(raw)) not in probed:
            continue
        why = probe_refusal(raw, ix.probe_ranges)
        if why:
            yield problem(cluster.origin, ("spec", "gateways", gi, "addresses", ai),
                          f"gateway {shown(gateway.name)}: {why}; a DNSPolicy's health check would probe it, and no "
                          "probe goes there under the default settings", _RANGE_HINT, (), CODE)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
