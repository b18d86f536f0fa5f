"""What the operator lets the desired state name: provider endpoints, rfc2136 servers,
credential sources and the directory of `local` stores; and, the operator's alone, how the
server serving a `local` store's views picks up its writes.

A Zone is written by whoever can open a pull request; the agent (and the one-shot verbs that
build providers) hold the operator's credentials.  So a Zone only *names* an endpoint, a DNS
server or a credential source, and the name is honoured only when the operator allowed it
(flag, ``GITDNS_<NAME>`` environment variable or the agent's config file; never the
repository):

====================================  ===============================================================
setting                               a Zone may name
====================================  ===============================================================
``provider_endpoints``                ``settings.endpoint`` of route53, google, azure: an https origin
                                      on this list (default: none, only the SDKs' own endpoints)
``rfc2136_servers``                   ``settings.server`` (+ ``port``) of rfc2136: ``host``
                                      (port 53), ``host:port`` or ``host:*`` (default: none)
``credentials_env_prefixes``          ``credentials.env: NAME`` when NAME is one of these or starts
                                      with one and ``_`` (default: none)
``credentials_dir``                   ``credentials.file``: a file inside this directory, no ``..``,
                                      no symbolic link out of it (default: none)
``credentials_namespaces``            ``credentials.secret`` (and ``defaultProviderNamespace``) in
                                      these namespaces besides the agent's own (default: only its own)
``credentials_secrets``               ``credentials.secret``: a Secret on this list, ``NAME`` (the
                                      agent's own namespace) or ``NAMESPACE/NAME`` (default: none)
``store_dir``                         ``settings.path`` of a `local` store: a directory inside this one
                                      (default: the agent's state directory; the repository for the
                                      one-shot verbs), no ``..``, no symbolic link
``local_reload``                      nothing: how a server picks up a `local` store's writes, ``none``
                                      (default: nothing is run) or ``rndc`` (``rndc reload ZONE IN
                                      VIEW`` per changed view; `gitdns.adapters.serverreload`)
``rndc_config``                       nothing: the rndc configuration file (``rndc -c``) of
                                      ``local_reload: rndc`` (default: rndc's own)
====================================  ===============================================================

`Fences()` allows none of it: only the SDKs' default endpoints and credential chains, the
agent's own namespace, and `local` stores inside the caller's base directory; and it runs
nothing after a `local` store's write.  Every refusal is
a `ConfigError` naming the Zone's field and the setting that would allow it; no request is sent
before the checks pass.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitdns.adapters.serverreload import KINDS as RELOAD_KINDS
from gitdns.adapters.serverreload import ServerReload
from gitdns.core.model import ProviderRef
from gitdns.core.providertypes.settings import (
    ENDPOINT_HINT,
    credentials_file_error,
    host_key,
    parse_endpoint,
    problems,
    server_error,
    unknown_settings,
)
from gitdns.errors import ConfigError, UnsupportedError

# the settings, named as the agent's (flag --provider-endpoints, GITDNS_PROVIDER_ENDPOINTS,
# providerEndpoints in the config file)
SETTINGS = ("provider_endpoints", "rfc2136_servers", "credentials_env_prefixes", "credentials_dir",
            "credentials_namespaces", "credentials_secrets", "store_dir", "local_reload", "rndc_config")
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
FALLBACK_NAMESPACE = "gitdns-system"
MAX_CREDENTIALS_FILE = 1 << 20  # bytes: a credentials file is a few kB
_SHOWN = 80  # characters of an untrusted value quoted in a message
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_SECRET = re.compile(r"([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/)?[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?\Z")
_DNS_PORT = 53


def setting_name(name: str) -> str:
    """How an operator sets ``name``: ``--flag (GITDNS_NAME, configKey)``."""
    head, *rest = name.split("_")
    key = head + "".join(part.capitalize() for part in rest)
    return f"--{name.replace('_', '-')} (GITDNS_{name.upper()}, {key} in the agent's config file)"


def shown(value: object) -> str:
    """An untrusted value for a message: quoted, at most 80 characters."""
    text = str(value)
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def agent_namespace(configured: str | None = None) -> str:
    """The agent's own namespace: the setting (``--pod-namespace``), ``GITDNS_POD_NAMESPACE``,
    ``POD_NAMESPACE``, the service account's namespace file, else gitdns-system."""
    for value in (configured, os.environ.get("GITDNS_POD_NAMESPACE"), os.environ.get("POD_NAMESPACE")):
        if value:
            return value
    try:
        value = Path(SERVICE_ACCOUNT_NAMESPACE).read_text().strip()
    except OSError:
        value = ""
    return value or FALLBACK_NAMESPACE


# --- the allow-list entries ------------------------------------------------------------------------------


def _host(text: str) -> str:
    """A host for comparison (`gitdns.core.providertypes.settings.host_key`)."""
    return host_key(text)


@dataclass(frozen=True, slots=True)
class Origin:
    """An allowed provider endpoint: ``https://host[:port]`` (any path on it)."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}" + ("" if self.port == 443 else f":{self.port}")


@dataclass(frozen=True, slots=True)
class Server:
    """An allowed rfc2136 server: a host and a port (None: any port)."""

    host: str
    port: int | None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{'*' if self.port is None else self.port}"


def _origin(entry: str, setting: str) -> Origin:
    """An entry of ``--provider-endpoints``: read as a Zone's endpoint is
    (`gitdns.core.providertypes.settings.parse_endpoint`), and an origin only."""
    try:
        endpoint = parse_endpoint(entry)
    except ValueError as exc:
        if "@" in entry:  # never quoted: it may carry a password
            raise ConfigError(f"{setting}: an entry carries a user name or password (not shown): give the origin "
                              "only, https://host[:port]") from None
        raise ConfigError(f"{setting}: {shown(entry)} is not an https:// origin (https://host or https://host:port, "
                          f"provider endpoints must be HTTPS): {exc}") from None
    if endpoint.path not in ("", "/"):
        raise ConfigError(f"{setting}: {shown(entry)}: give the origin only (https://host[:port]), without a path")
    return Origin(endpoint.host, endpoint.port)


def _server(entry: str, setting: str) -> Server:
    text = entry.strip()
    host, port_text = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ConfigError(f"{setting}: {shown(entry)} is not host, host:port or host:*")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    if not host or server_error(host) is not None:
        raise ConfigError(f"{setting}: {shown(entry)} is not host, host:port or host:* (a host name or an IP "
                          "address)")
    if port_text == "*":
        return Server(_host(host), None)
    if not port_text:
        return Server(_host(host), _DNS_PORT)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"{setting}: {shown(entry)}: the port must be a number from 1 to 65535, or *")
    return Server(_host(host), int(port_text))


def _items(value: str | Iterable[str] | None) -> list[str]:
    """A comma- (or space-) separated list, or a list from a config file."""
    if value is None:
        return []
    parts = re.split(r"[,\s]+", value) if isinstance(value, str) else [str(v).strip() for v in value]
    return [p for p in (x.strip() for x in parts) if p]


def _reload(kind: str | None, config: str | None) -> ServerReload | None:
    """``--local-reload`` and ``--rndc-config``: None (nothing is run) unless the operator chose
    ``rndc``; the configuration file must exist."""
    chosen = (kind or "").strip().lower() or "none"
    path = (config or "").strip()
    if chosen not in RELOAD_KINDS:
        raise ConfigError(f"{setting_name('local_reload')}: {shown(kind)} is not one of {', '.join(RELOAD_KINDS)}")
    if chosen == "none":
        if path:
            raise ConfigError(f"{setting_name('rndc_config')} is read only with --local-reload rndc "
                              f"({setting_name('local_reload')})")
        return None
    if path and not os.path.isfile(path):
        raise ConfigError(f"{setting_name('rndc_config')}: {shown(path)} is not a file")
    return ServerReload(chosen, Path(os.path.abspath(path)) if path else None)


# --- the fences ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fences:
    """The operator's allow-lists.  ``Fences()`` allows nothing beyond the SDKs' defaults."""

    endpoints: tuple[Origin, ...] = ()
    servers: tuple[Server, ...] = ()
    env_prefixes: tuple[str, ...] = ()
    credentials_dir: Path | None = None
    namespaces: tuple[str, ...] = ()  # besides the agent's own
    namespace: str = ""  # the agent's own ("": found by `agent_namespace`)
    store_dir: Path | None = None  # the base of every `local` store (None: the caller's base directory)
    credentials_files: tuple[Path, ...] = field(default=())  # files the operator named itself (groups --direct)
    secrets: tuple[str, ...] = ()  # Secrets credentials.secret may name: NAME (own namespace) or NAMESPACE/NAME
    reload: ServerReload | None = None  # how the server serving a local store's views is told of a write

    @classmethod
    def parse(cls, *, provider_endpoints: str | Iterable[str] | None = None,
              rfc2136_servers: str | Iterable[str] | None = None,
              credentials_env_prefixes: str | Iterable[str] | None = None,
              credentials_dir: str | None = None,
              credentials_namespaces: str | Iterable[str] | None = None,
              store_dir: str | None = None, namespace: str | None = None,
              credentials_secrets: str | Iterable[str] | None = None,
              local_reload: str | None = None, rndc_config: str | None = None) -> Fences:
        """The fences from the settings' text (comma-separated lists); a `ConfigError`
        naming the setting for an entry that is not what it must be."""
        prefixes = _items(credentials_env_prefixes)
        for prefix in prefixes:
            if not _ENV_NAME.match(prefix):
                raise ConfigError(f"{setting_name('credentials_env_prefixes')}: {shown(prefix)} is not an "
                                  "environment variable name")
        spaces = _items(credentials_namespaces)
        for ns in spaces:
            if not _NAMESPACE.match(ns):
                raise ConfigError(f"{setting_name('credentials_namespaces')}: {shown(ns)} is not a namespace name")
        listed = _items(credentials_secrets)
        for entry in listed:
            if not _SECRET.match(entry):
                raise ConfigError(f"{setting_name('credentials_secrets')}: {shown(entry)} is not a Secret name "
                                  "(NAME or NAMESPACE/NAME)")
        directory = (credentials_dir or "").strip()
        return cls(
            endpoints=tuple(_origin(e, setting_name("provider_endpoints")) for e in _items(provider_endpoints)),
            servers=tuple(_server(e, setting_name("rfc2136_servers")) for e in _items(rfc2136_servers)),
            env_prefixes=tuple(prefixes), credentials_dir=Path(os.path.abspath(directory)) if directory else None,
            namespaces=tuple(spaces), namespace=namespace or "", secrets=tuple(listed),
            store_dir=Path(os.path.abspath(store_dir.strip())) if store_dir and store_dir.strip() else None,
            reload=_reload(local_reload, rndc_config))

    def allowing_credentials(self, *, env: str | None = None, file: str | None = None) -> Fences:
        """These fences plus a credential source the operator named on the command line."""
        out = self
        if env:
            out = replace(out, env_prefixes=(*out.env_prefixes, env))
        if file:
            out = replace(out, credentials_files=(*out.credentials_files, Path(os.path.realpath(file))))
        return out

    # --- endpoints ---------------------------------------------------------------------------------------

    def check_endpoint(self, url: str, *, zone: str, field_name: str = "spec.provider.settings.endpoint") -> str:
        """``url`` when it is an https URL (`gitdns.core.providertypes.settings.parse_endpoint`, which
        `gitdns validate` runs too) on an origin the operator allows; else a `ConfigError`
        naming the field and the setting.  Called before any client is made."""
        where = f"{field_name} (zone {zone})"
        try:
            endpoint = parse_endpoint(url)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}; nothing was sent to it.  {ENDPOINT_HINT}") from None
        origin = Origin(endpoint.host, endpoint.port)
        if origin not in self.endpoints:
            allowed = ", ".join(map(str, self.endpoints)) or "none"
            raise ConfigError(f"{where}: {shown(origin)} is not a provider endpoint the operator allows; nothing was "
                              f"sent to it.  Allow it with {setting_name('provider_endpoints')}, or remove the "
                              f"setting to use the SDK's endpoint (allowed now: {allowed})")
        return endpoint.url

    def check_server(self, server: str, port: int, *, zone: str) -> None:
        """An rfc2136 ``server``/``port`` the operator allows; else a `ConfigError`."""
        host = _host(server)
        if any(s.host == host and (s.port is None or s.port == port) for s in self.servers):
            return
        allowed = ", ".join(map(str, self.servers)) or "none"
        raise ConfigError(f"spec.provider.settings.server (zone {zone}): {shown(server)} port {port} is not an "
                          f"rfc2136 server the operator allows; nothing was sent to it.  Allow it with "
                          f"{setting_name('rfc2136_servers')} (allowed now: {allowed})")

    # --- credentials -------------------------------------------------------------------------------------

    def check_env(self, name: str) -> None:
        if any(name == p or name.startswith(p + "_") for p in self.env_prefixes):
            return
        allowed = ", ".join(self.env_prefixes) or "none"
        raise ConfigError(f"spec.provider.credentials.env: {shown(name)} is not a prefix the operator allows; no "
                          f"variable was read.  Allow it with {setting_name('credentials_env_prefixes')} "
                          f"(allowed now: {allowed})")

    def credentials_file(self, raw: str) -> Path:
        """The file ``raw`` names, inside the credentials directory (relative to it, or an
        absolute path within it), without ``..`` and resolving to a file inside it; else a
        `ConfigError`.  The path is resolved: open it with ``O_NOFOLLOW``."""
        if "\x00" in raw:
            raise ConfigError("spec.provider.credentials.file: the path holds a NUL character")
        named = Path(os.path.realpath(raw)) if Path(raw).is_absolute() else None
        if named is not None and named in self.credentials_files:
            return named
        if self.credentials_dir is None:
            raise ConfigError(f"spec.provider.credentials.file: {shown(raw)}: no credentials directory is set, so "
                              f"no file is read.  Mount the credentials in a directory and name it with "
                              f"{setting_name('credentials_dir')}")
        wrong = credentials_file_error(raw)  # as `gitdns validate` judges it
        if wrong is not None:
            raise ConfigError(f"spec.provider.credentials.file: {wrong}; no file is read")
        base = Path(os.path.realpath(self.credentials_dir))
        candidate = Path(raw) if Path(raw).is_absolute() else self.credentials_dir / raw
        real = Path(os.path.realpath(candidate))
        if real == base or base not in real.parents:
            raise ConfigError(f"spec.provider.credentials.file: {shown(raw)} is not inside the credentials "
                              f"directory {self.credentials_dir} (symbolic links are followed only within it; "
                              f"{setting_name('credentials_dir')})")
        return real

    def check_namespace(self, namespace: str | None, field_name: str) -> str:
        """The namespace a Secret (or the default provider secret) is read in: the agent's own
        when None; another only when the operator allows it."""
        own = agent_namespace(self.namespace or None)
        if namespace is None or namespace == own or namespace in self.namespaces:
            return namespace or own
        allowed = ", ".join([own, *self.namespaces])
        raise ConfigError(f"{field_name}: namespace {shown(namespace)} is not one the operator allows credentials "
                          f"from; nothing was read.  Allow it with {setting_name('credentials_namespaces')} "
                          f"(allowed now: {allowed})")


# --- what no operator setting allows ----------------------------------------------------------------------


def refuse_static(zone: str, ref: ProviderRef) -> None:
    """Refuse ``ref`` (zone ``zone``'s ``spec.provider``) when one of its values is what its
    provider refuses whatever the operator allows (`gitdns.core.providertypes.settings.problems`,
    which `gitdns validate` reports with the file and line): a `ConfigError` (an
    `UnsupportedError` for what gitdns cannot do yet) naming the field.  Every provider's
    ``from_ref`` calls it first, before any credential is read or client made."""
    found = problems(ref, zone)
    if found and found[0].unsupported:
        raise UnsupportedError(found[0].text(zone))
    if found:
        raise ConfigError(found[0].text(zone))


def refuse_unknown(zone: str, ref: ProviderRef) -> None:
    """Refuse a Zone's ``spec.provider`` naming a setting its type does not read
    (`gitdns.core.providertypes.settings.unknown_settings`; the default provider secret's annotations
    are not judged by this)."""
    found = unknown_settings(ref)
    if found:
        raise ConfigError(found[0].text(zone))


def read_credentials_file(path: Path) -> str:
    """The text of a resolved credentials file: opened without following a symbolic link,
    a regular file of at most 1 MiB; errors name the path, never the content."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"spec.provider.credentials.file: cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"spec.provider.credentials.file: {path} is not a regular file")
        data = fh.read(MAX_CREDENTIALS_FILE + 1)
    if len(data) > MAX_CREDENTIALS_FILE:
        raise ConfigError(f"spec.provider.credentials.file: {path} is larger than {MAX_CREDENTIALS_FILE} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"spec.provider.credentials.file: {path} is not UTF-8 text") from None


def fences_from(values: Mapping[str, object], env: Mapping[str, str] | None = None, *,
                namespace: str | None = None) -> Fences:
    """The fences from flag values (None or absent: not given), else ``GITDNS_<NAME>``
    variables of ``env`` (the process environment by default): the one-shot verbs' way."""
    env = os.environ if env is None else env
    chosen: dict[str, str | None] = {}
    for name in SETTINGS:
        value = values.get(name)
        chosen[name] = str(value) if value is not None else env.get(f"GITDNS_{name.upper()}")
    return Fences.parse(**chosen, namespace=namespace)


STRICT = Fences()
