"""Provider credentials from the environment, a file or a Kubernetes Secret.

A Zone names where its secret lives (``spec.provider.credentials``), never the secret, and
the name resolves only among the sources the operator allowed (`gitdns.providers.fences`):

- ``env: NAME`` — the variable ``NAME`` (a JSON object, or one value kept under ``NAME``),
  or, when no such variable exists, every variable starting with ``NAME_`` (kept under its
  full name, so ``env: AWS`` gives ``AWS_ACCESS_KEY_ID`` …); NAME must be one of the
  operator's ``credentials_env_prefixes`` or start with one and ``_``;
- ``file: PATH`` — a JSON object, a YAML mapping, ``KEY=VALUE`` lines, or a Kubernetes Secret
  manifest (``data`` base64-decoded, ``stringData`` as is); PATH lies inside the operator's
  ``credentials_dir`` (no ``..``, no symbolic link out of it);
- ``secret: NAME`` (+ ``namespace``) — a Kubernetes Secret read through the API, in the
  agent's own namespace or one of the operator's ``credentials_namespaces``, and only when the
  operator lists it in ``credentials_secrets`` (``NAME``, or ``NAMESPACE/NAME`` for another
  namespace).

`secret_gate` is the one gate of every Secret (or secret file) the repository names: a Zone's
``credentials.secret`` here, and a ``healthCheck.headersSecret`` of either daemon
(`gitdns.providers.probeheaders`).  It reads nothing: it decides (`gitdns.core.reach.
secret_refusal`) and refuses with a `SecretNotListed` naming the setting, before any request.

Kuadrant's secret types and keys are accepted as they are (``kuadrant.io/aws``:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``; ``kuadrant.io/gcp``:
``GOOGLE``, ``PROJECT_ID``; ``kuadrant.io/azure``: ``azure.json``; ``kuadrant.io/endpoint``:
the endpoint provider's settings), so one Secret serves both.  gitdns's own Secret types are
``gitdns.io/<provider type>`` (``gitdns.io/rfc2136``, ``gitdns.io/route53`` …), for providers
Kuadrant has no type for.  Which type names which provider is declared once, in
`gitdns.core.providertypes`.  Values are returned to the provider only: they never appear in an
error message, a log line or the status branch.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from gitdns.adapters.kube.client import core_v1
from gitdns.core.model import CredentialsRef
from gitdns.core.providertypes import PROVIDER_TYPES
from gitdns.core.reach import secret_refusal
from gitdns.errors import AuthError, ConfigError
from gitdns.providers.fences import Fences, agent_namespace, read_credentials_file, setting_name


class Credentials(dict[str, str]):
    """A mapping whose repr never shows a value."""

    def __repr__(self) -> str:
        return f"Credentials(keys={sorted(self)})"

    __str__ = __repr__


# Secrets already read, handed to the provider being built (`preloaded`): never kept beyond
# the ``with`` block, so a changed Secret is read again the next time a provider is built.
_PRELOADED: ContextVar[Mapping[CredentialsRef, Credentials] | None] = ContextVar("gitdns_preloaded", default=None)


@contextmanager
def preloaded(ref: CredentialsRef, values: Credentials) -> Iterator[None]:
    """Within the block, `load_credentials(ref)` answers ``values`` without reading the Secret
    again (the default provider secret was just listed with its data)."""
    token = _PRELOADED.set({**(_PRELOADED.get() or {}), ref: values})
    try:
        yield
    finally:
        _PRELOADED.reset(token)


class SecretNotListed(ConfigError):
    """A Secret the repository names that the operator does not list: nothing was read."""

    reason = "SecretNotListed"


def secret_gate(name: str, *, listed: Collection[str], setting: str, what: str, namespace: str = "",
                own_namespace: str = "") -> None:
    """The gate of every read of a Secret or secret file the repository names: returns when the
    operator lists it (``NAME`` in ``own_namespace``, ``NAMESPACE/NAME``; without namespaces,
    ``NAME``), else raises `SecretNotListed` naming ``what`` (the field), the Secret and the
    ``setting`` that would list it; never anything of its content (nothing was read)."""
    why = secret_refusal(name, listed, setting=setting, what=what, namespace=namespace, own_namespace=own_namespace)
    if why:
        raise SecretNotListed(why)


def load_credentials(ref: CredentialsRef | None, *, provider: str, fences: Fences | None = None,
                     env: Mapping[str, str] | None = None) -> Credentials:
    """The key/value pairs the reference points at; empty when there is no reference
    (the provider then uses its SDK's default credential chain).  ``fences``: the operator's
    allow-lists, checked before anything is read; None only for a reference the agent made
    itself from its own settings (never one a Zone wrote)."""
    if ref is None:
        return Credentials()
    known = (_PRELOADED.get() or {}).get(ref)
    if known is not None:
        return Credentials(known)
    env = os.environ if env is None else env
    if ref.secret:
        namespace = ref.namespace
        if fences is not None:
            namespace = fences.check_namespace(ref.namespace, "spec.provider.credentials.namespace")
            secret_gate(ref.secret, listed=fences.secrets, setting=setting_name("credentials_secrets"),
                        what="spec.provider.credentials.secret", namespace=namespace,
                        own_namespace=agent_namespace(fences.namespace or None))
        return _from_secret(ref.secret, namespace, provider)
    if ref.file:
        path = fences.credentials_file(ref.file) if fences is not None else Path(os.path.realpath(ref.file))
        return _from_file(path)
    if ref.env:
        if fences is not None:
            fences.check_env(ref.env)
        return _from_env(ref.env, env)
    return Credentials()


def _from_env(name: str, env: Mapping[str, str]) -> Credentials:
    if name in env:
        value = env[name]
        parsed = _json_object(value)
        return Credentials(parsed) if parsed is not None else Credentials({name: value})
    found = {key: value for key, value in env.items() if key.startswith(name + "_")}
    if not found:
        raise ConfigError(f"spec.provider.credentials.env: no variable {name} and none starting with "
                          f"{name}_ in the agent's environment")
    return Credentials(found)


def _json_object(text: str) -> dict[str, str] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


def _from_file(path: Path) -> Credentials:
    text = read_credentials_file(path)
    parsed = _json_object(text)
    if parsed is not None:
        return Credentials(parsed)
    if "=" in text and ":" not in text.split("=", 1)[0]:
        return Credentials(_dotenv(text))
    return Credentials(_yaml_mapping(path, text))


def _dotenv(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.removeprefix("export ").strip()] = value.strip().strip('"').strip("'")
    return out


def _yaml_mapping(path: Path, text: str) -> dict[str, str]:
    from ruamel.yaml import YAML

    try:
        doc: Any = YAML(typ="safe").load(text)
    except Exception:  # the parser's errors would quote the secret's text: say only where
        raise ConfigError(f"spec.provider.credentials.file: {path} is neither JSON, YAML nor KEY=VALUE") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"spec.provider.credentials.file: {path} does not hold a mapping")
    if doc.get("kind") == "Secret":
        return secret_data(doc.get("data") or {}, doc.get("stringData") or {})
    return {str(k): str(v) for k, v in doc.items()}


def secret_data(data: Mapping[str, Any], string_data: Mapping[str, Any]) -> dict[str, str]:
    out = {str(k): base64.b64decode(str(v)).decode("utf-8") for k, v in data.items()}
    out.update({str(k): str(v) for k, v in string_data.items()})
    return out


def _from_secret(name: str, namespace: str | None, provider: str) -> Credentials:
    try:
        from kubernetes.client.exceptions import ApiException
    except ImportError:
        raise ConfigError("spec.provider.credentials.secret needs the kubernetes client: "
                          "pip install 'gitdns[kubernetes]'") from None
    api = core_v1("spec.provider.credentials.secret")
    ns = namespace or agent_namespace()
    try:
        secret = api.read_namespaced_secret(name, ns)
    except ApiException as exc:
        if exc.status in (401, 403):
            raise AuthError(f"spec.provider.credentials.secret: not allowed to read Secret {ns}/{name}") from None
        raise ConfigError(f"spec.provider.credentials.secret: Secret {ns}/{name}: HTTP {exc.status}") from None
    entry = PROVIDER_TYPES.get(provider)
    allowed = (*entry.secret_types, "Opaque") if entry is not None else ()
    if allowed and secret.type not in (*allowed, None):
        raise ConfigError(f"spec.provider.credentials.secret: Secret {ns}/{name} has type {secret.type}; "
                          f"a {provider} zone takes {', '.join(allowed[:-1])} or Opaque")
    return Credentials(secret_data(secret.data or {}, secret.string_data or {}))
