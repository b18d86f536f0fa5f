"""The reviewer's part of ``gitdns plan --all-clusters`` (`gitdns.core.prpreview`): one zone's
review from its preview, with what only the commands can read — a failover's targets leaving
and joining, and the health gate's answer from the clusters' status branches."""

from __future__ import annotations

from collections.abc import Mapping

from gitdns.core import groups
from gitdns.core.desired import Desired
from gitdns.core.model import Zone
from gitdns.core.prpreview import Failover, ZoneReview, review_zone
from gitdns.core.records import ZoneSnapshot
from gitdns.core.status.doc import StatusTree
from gitdns.reconcile.preview import Preview


def zone_review(desired: Desired, zone: Zone, sim: Preview, names: Mapping[str, str],
                trees: Mapping[str, StatusTree] | None) -> ZoneReview:
    plans = [(names.get(cluster.id, cluster.name), plan) for cluster, plan in sim.plans]
    return review_zone(zone.domain, sim.before, sim.after, plans, names=names,
                       failover=failover_of(desired, zone, sim.before, sim.after, trees))


def failover_of(desired: Desired, zone: Zone, before: ZoneSnapshot, after: ZoneSnapshot,
                trees: Mapping[str, StatusTree] | None) -> Failover | None:
    """The switch of the zone's active groups the preview makes (None: no switch): the groups
    and serials before and after, the endpoints that leave and join, and what the health gate
    says of the groups it activates (`groups set` refuses on the same answer)."""
    from gitdns.commands.failover import endpoint_diff
    from gitdns.commands.groups.health import activation_problems

    was, now = groups.read_zone_groups(before, zone.domain), groups.read_zone_groups(after, zone.domain)
    if was.groups is None or now.groups is None or (was.serial, was.groups) == (now.serial, now.groups):
        return None
    diff = endpoint_diff(before, after)
    activated = [g for g in now.groups if was.groups and g not in was.groups]
    gate = activation_problems(desired, zone, activated, trees) if activated else []
    return Failover(was.groups or (), now.groups, was.serial, now.serial, tuple(e.line() for e in diff.removed),
                    tuple(e.line() for e in diff.added), tuple(gate), tuple(activated))
