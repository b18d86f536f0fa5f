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
import importlib.util
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
        for name in entry.sdk:  # before any credential is read: a missing SDK fails this zone, nothing else
            if importlib.util.find_spec(name) is None:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        provider: Provider = module.from_ref(zone_domain, ref, base_dir, fences=fences)
    except ImportError as exc:
        raise missing_library(zone_domain, ref.type, entry.extra, exc) from None
    return provider


def missing_library(zone_domain: str, type_name: str, extra: str | None, exc: ImportError) -> ConfigError:
    """The zone's error when its provider's library does not import: names the library and the
    extra that brings it (``reason: ProviderLibraryMissing``)."""
    hint = f": pip install 'gitdns[{extra}]' (the gitdns image has every provider)" if extra else ""
    return ConfigError(f"zone {zone_domain}: spec.provider.type {type_name!r} needs a library that is not "
                       f"installed or does not import ({exc.name or exc}){hint}", reason="ProviderLibraryMissing")
