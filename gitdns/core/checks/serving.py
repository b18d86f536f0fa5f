"""CoreDNS primaries: nameservers and the clients of each geo view."""

from __future__ import annotations

from collections.abc import Iterable

from gitdns.core.addresses import ip_error
from gitdns.core.checks.index import Index, on, problem
from gitdns.core.model import DesiredState, Mode
from gitdns.core.problems import Path, Problem
from gitdns.core.zonecorefile import VIEW_CLIENTS, parse_view_clients


def _served_candidates(state: DesiredState) -> set[str]:
    """Zones a primary's nameserver affects: every `local` zone and its closest parent."""
    out: set[str] = set()
    for zone in state.zones:
        if zone.provider.type == "local":
            out.add(zone.name)
            parent = state.zone_for_host(zone.domain.partition(".")[2]) if "." in zone.domain else None
            if parent is not None:
                out.add(parent.name)
    return out


def nameservers(ix: Index) -> Iterable[Problem]:
    """CoreDNS primaries: a nameserver only on a primary, with IP addresses; viewClients parses."""
    affected = _served_candidates(ix.state)
    for cluster in ix.state.clusters:
        ns = cluster.nameserver
        if ns is None:
            continue
        zones = set(ix.zones_of(cluster)) | affected
        if cluster.mode is not Mode.PRIMARY:
            message = (f"spec.nameserver is set but the Cluster's mode is {cluster.mode.value}: only "
                       "primaries serve zones, so this nameserver would never be published")
            hint = "set spec.mode: primary, or remove spec.nameserver"
            yield problem(cluster.origin, ("spec", "nameserver"), message, hint, zones, "NameserverNotPrimary")
        for i, address in enumerate(ns.addresses):
            wrong = ip_error(address)
            if wrong is not None:
                message = f"nameserver address {wrong}"
                hint = "glue records need IP addresses, e.g. 192.0.2.53 or 2001:db8::53"
                yield problem(cluster.origin, ("spec", "nameserver", "addresses", i), message, hint, zones,
                               "InvalidAddress")
    for zone in ix.state.zones:
        raw = zone.provider.setting(VIEW_CLIENTS)
        if raw is None:
            continue
        path: Path = ("spec", "provider", "settings", VIEW_CLIENTS)
        if zone.provider.type != "local":
            message = f"{VIEW_CLIENTS} is a setting of the local provider; provider {zone.provider.type!r} ignores it"
            yield on(ix, zone, path, message, "remove it, or use provider type local", "InvalidViewClients")
            continue
        try:
            parse_view_clients(raw)
        except ValueError as exc:
            hint = ('VIEW=CIDR[,CIDR...] entries separated by ";", e.g. '
                    '"GEO-EU=10.1.0.0/16,192.0.2.0/24;US=198.51.100.0/24"')
            yield on(ix, zone, path, str(exc), hint, "InvalidViewClients")

