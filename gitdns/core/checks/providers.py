"""What a zone's provider type accepts, read from the provider table
(`gitdns.core.providertypes`): the type itself, credentials, settings
(`gitdns.core.providertypes.settings`: the functions the providers call), record types, geo codes,
weights and routing.  A zone on the default provider secret (``spec.provider`` left out) may land on
any provider: its geo codes are not checked, its weights against the widest range."""

from __future__ import annotations

from collections.abc import Iterable

from gitdns.core.checks.index import Index, on, problem
from gitdns.core.model import DEFAULT_PROVIDER, Cluster, DNSPolicy, Strategy
from gitdns.core.problems import Path, Problem
from gitdns.core.providertypes import (
    CREDENTIAL_REFERENCES,
    PROVIDER_TYPES,
    ProviderType,
    Routing,
    known_types,
    widest_weights,
)
from gitdns.core.providertypes.settings import credentials_file_error, problems, unknown_settings


def _entry(ix: Index, zone_name: str) -> ProviderType | None:
    """The zone's provider type; None for the default provider secret and unknown types."""
    return PROVIDER_TYPES.get(ix.provider(zone_name))


def provider_types(ix: Index) -> Iterable[Problem]:
    known = ", ".join(known_types())
    for zone in ix.state.zones:
        if not zone.provider.is_default and zone.provider.type not in PROVIDER_TYPES:
            message = f"unknown provider type {zone.provider.type!r}"
            yield on(ix, zone, ("spec", "provider", "type"), message, f"use one of: {known}", "UnknownProvider")


def provider_credentials(ix: Index) -> Iterable[Problem]:
    for zone in ix.state.zones:
        entry, ref = PROVIDER_TYPES.get(zone.provider.type), zone.provider.credentials
        if entry is None or ref is None:
            continue
        refused = [kind for kind in CREDENTIAL_REFERENCES if getattr(ref, kind) and kind not in entry.credentials]
        if not refused:
            continue
        path: Path = ("spec", "provider", "credentials")
        if not entry.credentials:
            message = f"provider {entry.name} takes no credentials: spec.provider.credentials would be ignored"
            yield on(ix, zone, path, message, "remove spec.provider.credentials", "UnusedCredentials")
        else:
            message = f"provider {entry.name} does not read credentials from {' or '.join(refused)}"
            hint = f"give them as {' or '.join(entry.credentials)}"
            yield on(ix, zone, (*path, refused[0]), message, hint, "UnusedCredentials")


def provider_settings(ix: Index) -> Iterable[Problem]:
    """Every setting the zone's provider refuses whatever the operator allows, with the very
    functions the provider calls (`gitdns.core.providertypes.settings`): a missing required setting,
    an endpoint that is not https, a store path with ``..``, a bad port, an unknown key...  So
    CI refuses, with the file and line, what every agent would refuse at run time; what only
    the operator's settings decide (an endpoint's origin, an rfc2136 server) is the agent's."""
    for zone in ix.state.zones:
        if zone.provider.is_default:
            continue
        for found in (*problems(zone.provider, zone.domain), *unknown_settings(zone.provider)):
            yield on(ix, zone, ("spec", "provider", *found.path), found.message, found.hint, found.code)
        named = zone.provider.credentials.file if zone.provider.credentials is not None else None
        wrong = credentials_file_error(named) if named else None
        if wrong is not None:
            hint = "a file inside the operator's --credentials-dir, relative to it"
            yield on(ix, zone, ("spec", "provider", "credentials", "file"), wrong, hint, "InvalidCredentialsFile")


def record_types(ix: Index) -> Iterable[Problem]:
    for doc in ix.state.record_sets:
        for i, record in enumerate(doc.records):
            zone_name = doc.zone or ix.lookup.zone_of(record.name)
            entry = _entry(ix, zone_name) if zone_name is not None and zone_name in ix.zones else None
            if zone_name is None or entry is None or record.type in entry.capabilities.record_types:
                continue
            message = f"provider {entry.name} (zone {zone_name!r}) cannot hold {record.type} records"
            hint = f"{entry.name} holds {', '.join(sorted(entry.capabilities.record_types))}"
            yield problem(doc.origin, ("spec", "records", i, "type"), message, hint, (zone_name,),
                          "RecordTypeUnsupported")


def geo_codes(ix: Index) -> Iterable[Problem]:
    for cluster in ix.state.clusters:
        if cluster.geo is not None:
            yield from _geo_problems(ix, cluster, cluster.geo, ("spec", "geo"))
    for policy in ix.state.policies:
        if policy.default_geo is not None:
            yield from _geo_problems(ix, policy, policy.default_geo, ("spec", "loadBalancing", "geo", "defaultGeo"))


def _geo_problems(ix: Index, obj: Cluster | DNSPolicy, code: str, path: Path) -> Iterable[Problem]:
    for zone_name in ix.zones_of(obj):
        entry = _entry(ix, zone_name)
        if entry is not None and not entry.capabilities.geo.accepts(code):
            message = f"geo code {code!r} is not valid in zone {zone_name!r} (provider {entry.name})"
            hint = f"{entry.name} accepts {entry.capabilities.geo.hint}"
            yield problem(obj.origin, path, message, hint, (zone_name,), "InvalidGeo")


def _weight_range(ix: Index, zone_name: str) -> tuple[int, int] | None:
    entry = _entry(ix, zone_name)
    if entry is not None:
        return entry.capabilities.weights
    return widest_weights() if ix.provider(zone_name) == DEFAULT_PROVIDER else None


def weights(ix: Index) -> Iterable[Problem]:
    for policy in ix.state.policies:
        base = ("spec", "loadBalancing", "weighted")
        found: list[tuple[int, Path]] = [(policy.default_weight, (*base, "defaultWeight"))]
        found += [(c.weight, (*base, "custom", i, "weight")) for i, c in enumerate(policy.custom_weights)]
        for zone_name in ix.zones_of(policy):
            provider, limits = ix.provider(zone_name), _weight_range(ix, zone_name)
            if limits is None:
                continue  # an unknown provider type: reported once, on the zone
            low, high = limits
            for weight, path in found:
                if not low <= weight <= high:
                    message = f"weight {weight} is out of range for zone {zone_name!r} (provider {provider})"
                    hint = f"{provider} takes weights from {low} to {high}"
                    yield problem(policy.origin, path, message, hint, (zone_name,), "WeightOutOfRange")


def loadbalanced_needs_routing(ix: Index) -> Iterable[Problem]:
    for policy in ix.state.policies:
        if policy.strategy != Strategy.LOADBALANCED or policy.flattened:
            continue
        for zone_name in ix.zones_of(policy):
            entry = _entry(ix, zone_name)
            if entry is not None and entry.capabilities.routing is Routing.NONE:
                message = (f"strategy loadbalanced needs routing policies, which zone {zone_name!r} "
                           f"(provider {entry.name}) does not have")
                hint = "use strategy simple, or flattened: true (one multi-value A/AAAA, no geo or weights)"
                yield problem(policy.origin, ("spec", "strategy"), message, hint, (zone_name,), "StrategyUnsupported")
