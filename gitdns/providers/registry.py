"""The provider factory: a Zone's ``spec.provider`` to a `Provider`.

A named type is built from its entry in the one provider table
(`gitdns.core.providertypes`) by `gitdns.providers.factory`, which imports the type's module
only when a zone uses it.  A zone without ``spec.provider`` gets the provider of its
namespace's default provider secret (`gitdns.providers.defaultprovider`).  To add a provider,
add its module and its entry in the table; nothing here changes.
"""

from __future__ import annotations

from pathlib import Path

from gitdns.core import providertypes
from gitdns.core.model import ProviderRef
from gitdns.providers.base import Provider
from gitdns.providers.defaultprovider import provider_for_default_zone
from gitdns.providers.factory import build_provider
from gitdns.providers.fences import STRICT, Fences, refuse_unknown


def known_types() -> tuple[str, ...]:
    """Every provider type a zone may name, sorted."""
    return tuple(sorted(providertypes.known_types()))


def make_provider(zone_domain: str, ref: ProviderRef, base_dir: Path, *,
                  namespace: str | None = None, fences: Fences = STRICT) -> Provider:
    """The provider for a zone.  ``base_dir`` anchors relative paths in the settings
    (the `local` store's ``path``, default ``store``, which must stay inside it).  ``fences``
    are the operator's allow-lists of endpoints, rfc2136 servers and credential sources
    (`gitdns.providers.fences`; default: none beyond the SDKs' own).  A zone without
    ``spec.provider`` gets the provider of its namespace's default provider secret
    (``namespace``: the agent's, unless the zone names one the fences allow), or a stand-in
    whose calls raise why there is none (`gitdns.providers.defaultprovider`).  A setting the
    type does not read is refused (`refuse_unknown`, as `gitdns validate` reports it)."""
    if ref.is_default:
        return provider_for_default_zone(zone_domain, ref, base_dir, namespace=namespace, fences=fences)
    refuse_unknown(zone_domain, ref)
    return build_provider(zone_domain, ref, base_dir, fences)
