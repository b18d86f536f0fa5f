"""The provider factory: a Zone's ``spec.provider`` to a `Provider`.

Each provider module is imported only when a zone uses it, so an agent that runs only the
embedded `local` store never imports a cloud SDK.  To add a provider, add a builder to
``_BUILDERS``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitdns.core.model import ProviderRef
from gitdns.errors import ConfigError
from gitdns.providers.base import Provider

DEFAULT_LOCAL_PATH = "store"


def _module(name: str) -> Any:
    return importlib.import_module(f"gitdns.providers.{name}")


def _memory(zone_domain: str, ref: ProviderRef, base_dir: Path) -> Provider:
    provider: Provider = _module("memory").MemoryProvider()
    return provider


def _local(zone_domain: str, ref: ProviderRef, base_dir: Path) -> Provider:
    raw = ref.setting("path", DEFAULT_LOCAL_PATH) or DEFAULT_LOCAL_PATH
    directory = Path(raw).expanduser()
    if not directory.is_absolute():
        directory = base_dir / directory
    provider: Provider = _module("local").LocalProvider(directory)
    return provider


def _by_module(module: str) -> Callable[[str, ProviderRef, Path], Provider]:
    """Providers with an SDK live in their own module exposing
    ``from_ref(zone_domain, ref, base_dir) -> Provider``; imported only when used."""

    def build(zone_domain: str, ref: ProviderRef, base_dir: Path) -> Provider:
        try:
            mod = _module(module)
        except ImportError as exc:
            raise ConfigError(
                f"spec.provider.type {ref.type!r} (zone {zone_domain}) needs a library that is not "
                f"installed ({exc.name}): pip install 'gitdns[{EXTRAS.get(ref.type, ref.type)}]'"
            ) from None
        provider: Provider = mod.from_ref(zone_domain, ref, base_dir)
        return provider

    return build


# the pip extra that brings each provider's SDK
EXTRAS = {"route53": "route53", "google": "google", "azure": "azure"}

_BUILDERS: dict[str, Callable[[str, ProviderRef, Path], Provider]] = {
    "local": _local,
    "memory": _memory,
}
for _type, _module_name in (("rfc2136", "rfc2136"), ("route53", "route53"), ("google", "google"),
                            ("azure", "azure")):
    if importlib.util.find_spec(f"gitdns.providers.{_module_name}") is not None:
        _BUILDERS[_type] = _by_module(_module_name)
_BUILDERS["endpoint"] = _by_module("endpoint")  # a Kubernetes resource's spec.endpoints as the zone (seed 001)


# Types the desired state may name (validation accepts them) whose providers are not built yet.
PLANNED_TYPES = frozenset({"rfc2136", "route53", "google", "azure", "coredns"})


def known_types() -> tuple[str, ...]:
    return tuple(sorted(_BUILDERS))


def make_provider(zone_domain: str, ref: ProviderRef, base_dir: Path, *,
                  namespace: str | None = None) -> Provider:
    """The provider for a zone.  ``base_dir`` anchors relative paths in the settings
    (the `local` store's ``path``, default ``store``).  A zone without ``spec.provider``
    gets the provider of its namespace's default provider secret (``namespace``: the
    agent's, unless the zone names one), or a stand-in whose calls raise why there is none
    (`gitdns.providers.defaultprovider`)."""
    if ref.is_default:
        from gitdns.providers.defaultprovider import provider_for_default_zone

        return provider_for_default_zone(zone_domain, ref, base_dir, namespace=namespace)
    builder = _BUILDERS.get(ref.type)
    if builder is None and ref.type in PLANNED_TYPES:
        raise ConfigError(
            f"spec.provider.type: provider {ref.type!r} (zone {zone_domain}) is not available in this "
            f"version of gitdns; available: {', '.join(known_types())}"
        )
    if builder is None:
        raise ConfigError(
            f"spec.provider.type: unknown provider type {ref.type!r} for zone {zone_domain}; "
            f"known types: {', '.join(known_types())}"
        )
    return builder(zone_domain, ref, base_dir)
