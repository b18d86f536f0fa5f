"""Build the provider of a named type from its entry in `gitdns.core.providertypes`.

The entry names the module; it is imported only when a zone uses the type, so an agent that
runs only the embedded `local` store never imports a cloud SDK.  Every provider module exposes
``from_ref(zone_domain, ref, base_dir, *, fences) -> Provider``: ``fences`` are the operator's
allow-lists (`gitdns.providers.fences`), which the module checks before it makes a client or
reads a credential.  Zones without ``spec.provider`` go
through `gitdns.providers.registry.make_provider`, which adds the default provider secret.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import PROVIDER_TYPES, known_types
from gitdns.errors import ConfigError
from gitdns.providers.base import Provider
from gitdns.providers.fences import STRICT, Fences


def build_provider(zone_domain: str, ref: ProviderRef, base_dir: Path, fences: Fences = STRICT) -> Provider:
    """The provider ``ref.type`` names, built from ``ref``'s settings and credentials;
    ``base_dir`` anchors relative paths in the settings (and fences them: a `local` store
    stays inside it); ``fences`` say which endpoints, servers and credential sources the
    settings may name (default: none beyond the SDKs' own)."""
    entry = PROVIDER_TYPES.get(ref.type)
    if entry is None:
        raise ConfigError(f"spec.provider.type: unknown provider type {ref.type!r} for zone {zone_domain}; "
                          f"known types: {', '.join(known_types())}")
    try:
        module = importlib.import_module(entry.module)
    except ImportError as exc:
        extra = f": pip install 'gitdns[{entry.extra}]'" if entry.extra else ""
        raise ConfigError(f"spec.provider.type {ref.type!r} (zone {zone_domain}) needs a library that is not "
                          f"installed ({exc.name}){extra}") from None
    provider: Provider = module.from_ref(zone_domain, ref, base_dir, fences=fences)
    return provider
