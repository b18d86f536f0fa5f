"""The default provider secret (Kuadrant's "Cluster Aware DNSRecord Delegation" RFC): a zone
without ``spec.provider`` uses the one Secret labelled ``kuadrant.io/default-provider=true`` in
its namespace.

- `find_default_provider` lists the labelled Secrets of a namespace: exactly one must exist
  (none: ``DefaultProviderNotFound``; several: ``MultipleDefaultProviders``, naming them all).
  The Secret's ``type`` chooses the provider (``kuadrant.io/aws`` route53, ``kuadrant.io/gcp``
  google, ``kuadrant.io/azure`` azure, ``kuadrant.io/endpoint`` endpoint, ``gitdns.io/<type>``
  that provider); its data are the credentials; annotations ``settings.gitdns.io/<key>`` give
  non-secret settings (e.g. ``settings.gitdns.io/hostedZoneId``).
- `make_default_provider` builds the zone's provider from what was found, without reading
  the Secret a second time.
- `provider_for_default_zone` is what the provider factory calls for such a zone: it never
  raises; when no provider can be chosen it returns a stand-in whose every call raises the
  clear error (so the zone is held with the message and other zones go on) and tries again.

Secret values never appear in a repr, a log line, an error or the status branch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitdns.adapters.kube.client import core_v1
from gitdns.core.model import CredentialsRef, DesiredState, ProviderRef
from gitdns.core.providertypes import GITDNS_SECRET_PREFIX, PROVIDER_TYPES, UNSERVED_SECRET_TYPES, type_of_secret
from gitdns.core.records import Change, Guard, ZoneSnapshot
from gitdns.errors import AuthError, ConfigError, GitdnsError, UnreachableError
from gitdns.providers.base import ApplyResult, Capabilities, CasGranularity, Provider, Routing, ZoneInfo
from gitdns.providers.credentials import Credentials, preloaded, secret_data
from gitdns.providers.factory import build_provider
from gitdns.providers.fences import STRICT, Fences, agent_namespace

__all__ = ["DefaultProvider", "PendingDefaultProvider", "agent_namespace", "default_provider_notes",
           "find_default_provider", "make_default_provider", "provider_for_default_zone", "resolve_default_zone"]

log = logging.getLogger(__name__)

LABEL = "kuadrant.io/default-provider"
SELECTOR = f"{LABEL}=true"
SETTINGS_ANNOTATION = "settings.gitdns.io/"  # settings.gitdns.io/<key>: <value>
NOT_FOUND = "DefaultProviderNotFound"
MULTIPLE = "MultipleDefaultProviders"


@dataclass(frozen=True, slots=True)
class DefaultProvider:
    """The default provider secret of a namespace: which Secret, which provider.  The
    credentials ride along for building the provider; they are left out of repr and equality."""

    secret_name: str
    secret_type: str
    provider_type: str
    namespace: str
    settings: tuple[tuple[str, str], ...] = ()  # from settings.gitdns.io/<key> annotations, sorted
    credentials: Credentials = field(default_factory=Credentials, repr=False, compare=False)

    @property
    def secret_ref(self) -> str:
        return f"{self.namespace}/{self.secret_name}"

    def provider_ref(self) -> ProviderRef:
        """The ProviderRef the zone would have had, naming the Secret (never its data)."""
        creds = CredentialsRef(secret=self.secret_name, namespace=self.namespace)
        return ProviderRef(self.provider_type, self.settings, creds)


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def core_api() -> Any:
    """A CoreV1Api from in-cluster credentials, else the kubeconfig."""
    return core_v1("default provider secret")


def _list_labelled(api: Any, namespace: str) -> list[Any]:
    try:
        found = api.list_namespaced_secret(namespace, label_selector=SELECTOR, _request_timeout=10)
    except Exception as exc:  # the client's ApiException, urllib3's connection errors
        status = getattr(exc, "status", None)
        if status in (401, 403):
            raise AuthError(f"default provider secret: not allowed to list Secrets in namespace {namespace} "
                            f"(grant list on secrets there)") from None
        why = f"HTTP {status}" if isinstance(status, int) else type(exc).__name__
        raise UnreachableError(f"default provider secret: listing Secrets in namespace {namespace}: {why}") from None
    # the selector already asks for "true"; a server that ignores it must not widen the choice
    return [s for s in (found.items or []) if ((s.metadata.labels or {}).get(LABEL) == "true")]


def _settings(annotations: dict[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key.removeprefix(SETTINGS_ANNOTATION), str(value))
                        for key, value in (annotations or {}).items()
                        if key.startswith(SETTINGS_ANNOTATION) and len(key) > len(SETTINGS_ANNOTATION)))


def _provider_type(secret: Any, namespace: str) -> str:
    name, secret_type = secret.metadata.name, secret.type or "Opaque"
    unserved = UNSERVED_SECRET_TYPES.get(secret_type)
    if unserved is not None:
        raise ConfigError(f"default provider secret {namespace}/{name} has type {secret_type}: {unserved}; label "
                          f"another Secret as the default, or set spec.provider on the zone")
    provider = type_of_secret(secret_type)
    if provider is None:
        kinds = ", ".join([*(t.kuadrant_secret for t in PROVIDER_TYPES.values() if t.kuadrant_secret),
                           f"{GITDNS_SECRET_PREFIX}<type>"])
        raise ConfigError(f"default provider secret {namespace}/{name} has type {secret_type}, which names no "
                          f"provider; give it one of the types {kinds}")
    return provider


def find_default_provider(namespace: str, *, api: Any | None = None) -> DefaultProvider:
    """The one Secret labelled ``kuadrant.io/default-provider=true`` in ``namespace``.

    ``api`` is a kubernetes ``CoreV1Api`` (made from in-cluster credentials, else the
    kubeconfig, when None).  Raises `ConfigError` with reason ``DefaultProviderNotFound`` (none)
    or ``MultipleDefaultProviders`` (several, all named); `AuthError` when Secrets may not be
    listed there; `UnreachableError` when the API cannot be reached."""
    secrets = _list_labelled(api if api is not None else core_api(), namespace)
    if not secrets:
        raise ConfigError(f"no default provider secret in namespace {namespace}: label exactly one provider "
                          f"Secret there {SELECTOR}, or set spec.provider on the zone", reason=NOT_FOUND)
    if len(secrets) > 1:
        names = ", ".join(sorted(f"{namespace}/{s.metadata.name}" for s in secrets))
        raise ConfigError(f"{len(secrets)} Secrets in namespace {namespace} are labelled {SELECTOR}: {names}; "
                          f"exactly one may be the default: remove the label from the others", reason=MULTIPLE)
    secret = secrets[0]
    return DefaultProvider(
        secret_name=secret.metadata.name,
        secret_type=secret.type or "Opaque",
        provider_type=_provider_type(secret, namespace),
        namespace=namespace,
        settings=_settings(secret.metadata.annotations),
        credentials=Credentials(secret_data(secret.data or {}, secret.string_data or {})),
    )


def make_default_provider(zone_domain: str, found: DefaultProvider, base_dir: Path,
                          fences: Fences = STRICT) -> Provider:
    """The zone's provider from its default provider secret (built from the provider table,
    with the credentials already read; its settings are fenced as a Zone's are)."""
    ref = found.provider_ref()
    assert ref.credentials is not None
    with preloaded(ref.credentials, found.credentials):
        return build_provider(zone_domain, ref, base_dir, fences)


def resolve_default_zone(zone_domain: str, ref: ProviderRef, base_dir: Path, *,
                         namespace: str | None = None, api: Any | None = None,
                         fences: Fences = STRICT) -> Provider:
    """The provider of a zone without ``spec.provider``: its namespace's default provider
    secret (``spec.defaultProviderNamespace`` when the fences allow that namespace, else the
    agent's namespace).  Raises the clear error, naming the zone, when there is none to choose."""
    own = agent_namespace(namespace or fences.namespace or None)
    if ref.default_namespace and ref.default_namespace != own:
        try:
            replace(fences, namespace=own).check_namespace(ref.default_namespace, "spec.defaultProviderNamespace")
        except ConfigError as exc:
            raise ConfigError(f"zone {zone_domain}: {exc}") from None
    if api is None and not in_cluster():
        raise ConfigError(f"zone {zone_domain} has no spec.provider, and the default provider secret is looked "
                          f"up only when gitdns runs in a Kubernetes cluster: set spec.provider on the zone",
                          reason=NOT_FOUND)
    ns = ref.default_namespace or own
    try:
        found = find_default_provider(ns, api=api)
    except (ConfigError, AuthError, UnreachableError) as exc:
        raise type(exc)(f"zone {zone_domain}: {exc}", reason=exc.reason) from None
    log.info("default provider chosen: zone=%s secret=%s type=%s provider=%s",
             zone_domain, found.secret_ref, found.secret_type, found.provider_type)
    return make_default_provider(zone_domain, found, base_dir, fences)


# what a zone's stand-in declares until its provider is known: nothing to batch, no budget
PENDING_CAPABILITIES = Capabilities(record_types=frozenset(), routing=Routing.NONE, cas=CasGranularity.NONE)


class PendingDefaultProvider:
    """Stands in for the provider of a zone whose default provider secret could not be chosen.

    Every call first tries again (one Secret list), so labelling the right Secret is enough:
    no restart.  Until then each call raises the reason, and the agent holds this zone alone
    with the message in its status."""

    def __init__(self, resolve: Any, error: GitdnsError) -> None:
        self._resolve = resolve
        self._error: GitdnsError | None = error  # the failure just seen, raised once without retrying
        self._inner: Provider | None = None
        self.name = "default"
        self.capabilities: Capabilities = PENDING_CAPABILITIES
        self.account = "default"

    def _provider(self) -> Provider:
        if self._inner is not None:
            return self._inner
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        inner: Provider = self._resolve()
        self._inner = inner
        self.name, self.capabilities = inner.name, inner.capabilities
        self.account = str(getattr(inner, "account", inner.name))
        return inner

    def __getattr__(self, item: str) -> Any:  # views_dir and other extras, once resolved
        inner = self.__dict__.get("_inner")
        if inner is None or item.startswith("_"):
            raise AttributeError(item)
        return getattr(inner, item)

    def zones(self) -> list[ZoneInfo]:
        return self._provider().zones()

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        provider = self._provider()
        return provider.read(zone) if names is None else provider.read(zone, names)

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        return self._provider().apply(zone, changes, guards)


def provider_for_default_zone(zone_domain: str, ref: ProviderRef, base_dir: Path, *,
                              namespace: str | None = None, api: Any | None = None,
                              fences: Fences = STRICT) -> Provider:
    """What the provider factory returns for a zone without ``spec.provider``; never raises.
    The provider when its default provider secret is found, else a `PendingDefaultProvider`
    whose calls raise the reason (the zone is held, other zones go on) and try again."""

    def resolve() -> Provider:
        return resolve_default_zone(zone_domain, ref, base_dir, namespace=namespace, api=api, fences=fences)

    try:
        return resolve()
    except GitdnsError as exc:
        log.info("default provider pending: zone=%s reason=%s", zone_domain, exc.reason)
        return PendingDefaultProvider(resolve, exc)


def default_provider_notes(state: DesiredState) -> list[str]:
    """One line per zone that names no provider, for `gitdns validate` (information, not a
    problem): its provider is the default provider secret, chosen at run time in a cluster."""
    notes = []
    for zone in state.zones:
        if zone.provider.is_default:
            origin = zone.origin
            where = f"{origin.file}:{origin.line}" if origin.line else origin.file
            namespace = f"namespace {zone.provider.default_namespace}" if zone.provider.default_namespace \
                else "the agent's namespace"
            notes.append(f"{where}: zone {zone.domain} names no spec.provider: it uses the default provider "
                         f"secret, the one Secret labelled {SELECTOR} in {namespace} (looked up when the "
                         f"agent runs in a Kubernetes cluster)")
    return notes
