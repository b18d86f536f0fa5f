"""What a Zone's ``spec.provider`` may say, whatever the operator allows (pure).

Each rule is one function here.  The run time calls it where it reads the setting (the
provider's ``from_ref``, `gitdns.providers.fences`, the `local` store), and `gitdns validate`
calls it through `problems` and `unknown_settings` (`gitdns.core.checks.providers`), so a pull
request learns in CI, with the file and line, what every agent would refuse.  What only the
operator's settings decide — whether an endpoint's origin is on ``--provider-endpoints``, a
server on ``--rfc2136-servers`` — stays with `gitdns.providers.fences`; the table of every
run-time refusal and which kind it is lives in `gitdns.core.gates`.

The rules:

* ``endpoint`` (route53, google, azure): ``https://host[:port][/path]`` and nothing else — no
  other scheme, no user name or password, no query, fragment, backslash, white space or
  non-ASCII character; the host a host name or an IP address (IPv6 in brackets), the port
  1..65535 (`parse_endpoint`).  The operator's ``--provider-endpoints`` entries are read by
  the same function, so an endpoint refused here could never be allowed there.
* ``path`` (local): a directory below the base (`store_path_error`): no ``..`` or ``.git``
  component, no leading ``~``, no NUL (an absolute path must lie inside the base, which the
  operator chooses: the provider judges that).
* ``server`` (rfc2136): a host name or an IP address (`server_error`); the port is ``port``.
* ``port`` (rfc2136): a decimal number 1..65535 (`port_value`); ``timeout`` (rfc2136, google):
  a finite positive number of seconds (`seconds_value`).
* ``tsigAlgorithm``, ``tsigKeyName``, ``zone`` (rfc2136); ``private``, ``waitInsync``,
  ``healthChecks`` (route53: ``true`` or ``false``); ``trafficManager`` (azure: refused when
  on); ``namespace``, ``ENDPOINT_GVR`` … (endpoint); ``corednsDir`` (local).
* the settings a type cannot run without (`gitdns.core.providertypes.missing_settings`), and
  keys the type does not read (`unknown_settings`).

Settings that a type may also take from its credentials (google, azure, endpoint: the
Secret's keys override or complete them) are judged here only when the zone names no
credentials; otherwise the provider judges what the credentials give, with the same functions.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from gitdns.core.addresses import host_error, ip_error
from gitdns.core.model import ProviderRef
from gitdns.core.problems import shown
from gitdns.core.providertypes import COREDNS_DIR, PROVIDER_TYPES, VIEW_CLIENTS, ProviderType, missing_settings
from gitdns.core.records import in_zone, normalize_name

HTTPS_PORT = 443
DNS_PORT = 53
TSIG_ALGORITHMS = ("hmac-sha256", "hmac-sha512", "hmac-sha384", "hmac-sha224", "hmac-sha1", "hmac-md5")
FLAGS = ("true", "false")
TRUE_WORDS = ("true", "yes", "1", "on")  # what turns azure's trafficManager on
STORE_BASE_HELP = "--store-dir, else the agent's --state-dir; the repository for the one-shot verbs"
ENDPOINT_HINT = ("an https:// URL, https://host[:port][/path], whose origin the operator lists in --provider-endpoints "
                 "(GITDNS_PROVIDER_ENDPOINTS, providerEndpoints in the agent's config file); or remove the setting to "
                 "use the SDK's endpoint")
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)(/.*)?", re.DOTALL)
_PORT = re.compile(r"[0-9]{1,5}")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# reported by another check (`gitdns.core.checks.serving`: InvalidViewClients), not as unknown
_REPORTED_ELSEWHERE = frozenset({VIEW_CLIENTS})


# --- hosts ---------------------------------------------------------------------------------------


def host_key(host: str) -> str:
    """A host for comparison: an IP address in its compressed form (brackets dropped), else the
    name in lower case without a trailing dot."""
    bare = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(bare).compressed
    except ValueError:
        return bare.lower().rstrip(".")


def _name_or_address_error(host: str) -> str | None:
    """What keeps ``host`` from being a host name or an IP address (IPv6 without brackets)."""
    if ":" in host:
        return ip_error(host, 6)
    if host and all(c.isdigit() or c == "." for c in host):
        return ip_error(host, 4)
    if host.startswith("*"):
        return f"{shown(host)} is a wildcard, not a host"
    return host_error(host)


# --- endpoint (route53, google, azure) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A provider endpoint as the SDK will read it: the URL and its origin."""

    url: str  # as written, without surrounding white space
    host: str  # `host_key`
    port: int
    path: str  # "" or from the first "/"


def parse_endpoint(raw: str) -> Endpoint:
    """``raw`` as an https endpoint (see the module docstring); a ValueError saying what is
    wrong otherwise.  A URL carrying a user name or password is never quoted."""
    text = raw.strip()
    if "@" in text:
        raise ValueError("a provider endpoint carries no user name or password (the URL is not shown)")
    if not text or not all("!" <= c <= "~" for c in text):
        raise ValueError(f"{shown(text)} is not a URL of printable ASCII without white space (write an "
                         "international name in its xn-- form)")
    match = _URL.fullmatch(text)
    if match is None:
        raise ValueError(f"{shown(text)} is not a URL (https://host[:port][/path])")
    scheme, authority, path = match.group(1), match.group(2), match.group(3) or ""
    if scheme.lower() != "https":
        raise ValueError(f"{shown(text)} is not an https:// URL: provider endpoints carry credentials, so they "
                         "are HTTPS only")
    if any(c in text for c in "?#\\"):
        raise ValueError(f"{shown(text)}: a provider endpoint has no query, fragment or backslash")
    if authority.startswith("["):
        host, bracket, rest = authority[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{shown(text)}: an IPv6 host is written in brackets, [2001:db8::1]:port")
        wrong = ip_error(host, 6)
        port_text = rest[1:] if rest else None
    else:
        if authority.count(":") > 1:
            raise ValueError(f"{shown(text)}: an IPv6 host is written in brackets, [2001:db8::1]:port")
        host, colon, port_text_ = authority.partition(":")
        port_text = port_text_ if colon else None
        wrong = _name_or_address_error(host) if host else f"{shown(text)} names no host"
    if wrong is not None:
        raise ValueError(f"{shown(text)}: the host: {wrong}")
    port = HTTPS_PORT
    if port_text is not None:
        if not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
            raise ValueError(f"{shown(text)}: the port must be a number from 1 to 65535")
        port = int(port_text)
    return Endpoint(text, host_key(host), port, path)


def endpoint_error(raw: str) -> str | None:
    """Why ``raw`` can never be a provider endpoint (`parse_endpoint`), or None."""
    try:
        parse_endpoint(raw)
    except ValueError as exc:
        return str(exc)
    return None


# --- path (local) -----------------------------------------------------------------------------------


def store_path_error(raw: str) -> str | None:
    """Why ``raw`` (a local store's ``path``) is not a directory below the base, whatever the
    base is: a NUL, a leading ``~``, or a ``..``/``.git`` component.  (Whether an absolute path
    lies inside the base depends on the base, the operator's ``--store-dir`` or the agent's
    state directory: only the provider can tell.)"""
    if "\x00" in raw:
        return f"{shown(raw)} holds a NUL character"
    if raw.startswith("~"):
        return f"{shown(raw)} starts with '~': name a directory relative to the base directory"
    parts = raw.split("/")
    if ".." in parts or ".git" in parts:
        return f"{shown(raw)}: a path with '..' or '.git' is refused"
    return None


def credentials_file_error(raw: str) -> str | None:
    """Why ``raw`` (``credentials.file``) is refused whatever the credentials directory is: a
    ``..`` component (or a NUL).  Whether it lies inside that directory is the agent's call."""
    if "\x00" in raw:
        return f"{shown(raw)} holds a NUL character"
    if ".." in raw.split("/"):
        return f"{shown(raw)}: a path with '..' is refused"
    return None


# --- rfc2136 ----------------------------------------------------------------------------------------


def server_error(raw: str) -> str | None:
    """Why ``raw`` (an rfc2136 ``server``) is not a host name or an IP address (IPv6 may be in
    brackets); the port is the ``port`` setting."""
    text = raw.strip()
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if ":" in bare and bare.count(":") == 1:
        return f"{shown(text)} carries a port: give the host alone and the port as spec.provider.settings.port"
    return _name_or_address_error(bare)


def port_value(raw: str | None, default: int = DNS_PORT) -> int:
    """A port: decimal digits, 1..65535 (``default`` when not given); else a ValueError."""
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"{shown(raw)} is not a port (a number from 1 to 65535)")
    return int(text)


def seconds_value(raw: str | None, default: float) -> float:
    """A number of seconds: finite and positive (``default`` when not given); else a ValueError."""
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{shown(raw)} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{shown(raw)} is not a positive number of seconds")
    return value


def tsig_algorithm(raw: str | None) -> str:
    """The TSIG algorithm (default hmac-sha256); a ValueError for one dnspython does not sign with."""
    algorithm = (raw or "hmac-sha256").strip().lower().rstrip(".")
    if algorithm not in TSIG_ALGORITHMS:
        raise ValueError(f"{shown(algorithm)} is not one of {', '.join(TSIG_ALGORITHMS)}")
    return algorithm


def dns_name_error(raw: str) -> str | None:
    """Why ``raw`` (a TSIG key name, a server zone) is not a DNS name."""
    if raw.startswith("*"):
        return f"{shown(raw)} is a wildcard, not a name"
    return host_error(raw)


def server_zone_error(raw: str, domain: str) -> str | None:
    """Why ``raw`` (rfc2136 ``zone``: the server's zone) cannot hold the gitdns zone ``domain``."""
    wrong = dns_name_error(raw)
    if wrong is not None:
        return wrong
    if not in_zone(normalize_name(domain), normalize_name(raw)):
        return f"{normalize_name(raw)} does not contain {normalize_name(domain)}"
    return None


# --- route53, azure, endpoint -------------------------------------------------------------------------


def flag_value(raw: str | None) -> bool:
    """A route53 flag: ``"true"`` or ``"false"`` (default false); else a ValueError."""
    text = (raw or "false").strip().lower()
    if text not in FLAGS:
        raise ValueError(f"{shown(raw)} is not \"true\" or \"false\"")
    return text == "true"


def traffic_manager_error(raw: str | None) -> str | None:
    """azure: Traffic Manager is not driven, so a zone asking for it is refused."""
    if (raw or "").strip().lower() in TRUE_WORDS:
        return ("gitdns does not drive Azure Traffic Manager yet; remove the setting and use the simple strategy "
                "or the flattened loadbalanced form, or another provider")
    return None


def namespace_error(raw: str) -> str | None:
    """Why ``raw`` (the endpoint provider's ``namespace``) is not a Kubernetes namespace name."""
    if _NAMESPACE.fullmatch(raw.strip()):
        return None
    return f"{shown(raw)} is not a namespace name (1 to 63 lower-case letters, digits or '-')"


def endpoint_resource_error(settings: Mapping[str, str]) -> str | None:
    """Why the endpoint provider's resource type and zone selector do not parse, or None."""
    from gitdns.core.endpoints import endpoint_gvr, zone_selector  # jinja2: not at import

    try:
        endpoint_gvr(settings)
        zone_selector(settings)
    except ValueError as exc:
        return str(exc)
    return None


# --- the problems of one spec.provider -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingProblem:
    """One setting a provider refuses whatever the operator allows."""

    path: tuple[str, ...]  # below spec.provider: ("settings", "endpoint")
    message: str
    hint: str
    code: str  # validate's problem code
    unsupported: bool = False  # the run time raises UnsupportedError (else ConfigError)

    @property
    def field(self) -> str:
        return ".".join(("spec", "provider", *self.path))

    def text(self, zone: str) -> str:
        """The run time's message: the field, the zone, what is wrong, what would be right."""
        return f"{self.field} (zone {zone}): {self.message}; {self.hint}"


Rule = Callable[[ProviderRef, str], Iterator[SettingProblem]]


def _setting(key: str, message: str, hint: str, code: str, *, unsupported: bool = False) -> SettingProblem:
    return SettingProblem(("settings", key), message, hint, code, unsupported)


def _endpoint(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    raw = ref.setting("endpoint")
    if raw:
        wrong = endpoint_error(raw)
        if wrong is not None:
            yield _setting("endpoint", f"{wrong}; nothing is sent to it", ENDPOINT_HINT, "InvalidEndpoint")


def _path(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    raw = ref.setting("path")
    if raw:
        wrong = store_path_error(raw)
        if wrong is not None:
            hint = f"name a directory relative to the base directory, which the operator chooses: {STORE_BASE_HELP}"
            yield _setting("path", wrong, hint, "InvalidStorePath")


def _coredns_dir(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    raw = ref.setting(COREDNS_DIR)
    if raw:
        from gitdns.core.zonecorefile import directory_error  # jinja2: not at import

        wrong = directory_error(raw)
        if wrong is not None:
            hint = "the absolute directory where CoreDNS sees the view files, e.g. /var/lib/gitdns/store"
            yield _setting(COREDNS_DIR, wrong, hint, "InvalidCorednsDir")


def _server(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    raw = ref.setting("server")
    if raw:
        wrong = server_error(raw)
        if wrong is not None:
            hint = "the primary's host name or IP address (192.0.2.53, ns1.example.net, 2001:db8::53)"
            yield _setting("server", f"{wrong}; nothing is sent to it", hint, "InvalidServer")


def _value(key: str, parse: Callable[[str], object], hint: str, code: str) -> Rule:
    def rule(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
        raw = ref.setting(key)
        if raw is None:
            return
        try:
            parse(raw)
        except ValueError as exc:
            yield _setting(key, str(exc), hint, code)

    rule.__name__ = f"_{key}"
    return rule


def _tsig(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    raw = ref.setting("tsigKeyName")
    if not raw:
        return
    wrong = dns_name_error(raw)
    if wrong is not None:
        yield _setting("tsigKeyName", wrong, "the TSIG key's name as the server knows it, e.g. ddns-key",
                       "InvalidTsigKeyName")
    if ref.credentials is None:
        message = f"tsigKeyName {shown(raw)} signs with a secret, and the zone names no credentials holding it"
        yield SettingProblem(("credentials",), message, "name the credentials holding TSIG_SECRET "
                             "(env, file or secret)", "MissingCredentials")


def _server_zone(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    raw = ref.setting("zone")
    if raw:
        wrong = server_zone_error(raw, domain)
        if wrong is not None:
            yield _setting("zone", wrong, f"the server's zone holding {normalize_name(domain)}, or leave it out",
                           "InvalidServerZone")


def _traffic_manager(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    wrong = traffic_manager_error(ref.setting("trafficManager"))
    if wrong is not None:
        yield _setting("trafficManager", wrong, "remove spec.provider.settings.trafficManager", "UnsupportedSetting",
                       unsupported=True)


def _endpoint_resource(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    if ref.credentials is not None:
        return  # a kuadrant.io/endpoint Secret may override them: judged with what it holds
    raw = ref.setting("namespace")
    if raw:
        wrong = namespace_error(raw)
        if wrong is not None:
            yield _setting("namespace", wrong, "the namespace of the zone resources, e.g. dnstest",
                           "InvalidNamespace")
    wrong = endpoint_resource_error(dict(ref.settings))
    if wrong is not None:
        yield SettingProblem(("settings",), wrong, "ENDPOINT_GVR group/version.resource, "
                             "ENDPOINT_ZONE_RECORD_LABEL key=value", "InvalidEndpointResource")


def _missing(ref: ProviderRef, domain: str) -> Iterator[SettingProblem]:
    entry = PROVIDER_TYPES[ref.type]
    if entry.settings_from_credentials and ref.credentials is not None:
        return  # the credentials may hold them: the provider judges what they give
    missing = missing_settings(entry, ref.setting)
    if missing:
        elsewhere = " (or name credentials that hold them)" if entry.settings_from_credentials else ""
        message = f"provider {entry.name} needs spec.provider.settings {', '.join(missing)}"
        hint = f"set {', '.join(f'{key}: ...' for key in missing)} under spec.provider.settings{elsewhere}"
        yield SettingProblem((), message, hint, "MissingSetting")


_PORT_HINT = "a number from 1 to 65535 (default 53)"
_SECONDS_HINT = "a positive number of seconds, e.g. \"10\""
_FLAG_HINT = "\"true\" or \"false\""

# the rules of each provider type, in the order the run time applies them
RULES: Mapping[str, tuple[Rule, ...]] = {
    "local": (_path, _coredns_dir),
    "memory": (),
    "rfc2136": (_missing, _server, _value("port", port_value, _PORT_HINT, "InvalidPort"),
                _value("timeout", lambda raw: seconds_value(raw, 1.0), _SECONDS_HINT, "InvalidTimeout"),
                _value("tsigAlgorithm", tsig_algorithm, ", ".join(TSIG_ALGORITHMS), "InvalidTsigAlgorithm"),
                _tsig, _server_zone),
    "route53": (_endpoint, *(_value(key, flag_value, _FLAG_HINT, "InvalidFlag")
                             for key in ("private", "waitInsync", "healthChecks"))),
    "google": (_endpoint, _value("timeout", lambda raw: seconds_value(raw, 1.0), _SECONDS_HINT, "InvalidTimeout"),
               _missing),
    "azure": (_traffic_manager, _endpoint, _missing),
    "endpoint": (_missing, _endpoint_resource),
}


def problems(ref: ProviderRef, domain: str) -> list[SettingProblem]:
    """Every value of ``ref`` (a zone ``domain``'s ``spec.provider``) its provider refuses
    whatever the operator allows; empty for the default provider secret and unknown types
    (reported as such).  The run time refuses the first, `gitdns validate` reports them all."""
    entry = PROVIDER_TYPES.get(ref.type)
    if entry is None:
        return []
    return [problem for rule in RULES.get(entry.name, ()) for problem in rule(ref, domain)]


def unknown_settings(ref: ProviderRef) -> list[SettingProblem]:
    """Keys of ``ref``'s settings its provider type does not read (a typo is never ignored)."""
    entry: ProviderType | None = PROVIDER_TYPES.get(ref.type)
    if entry is None:
        return []
    out = []
    for key, _ in ref.settings:
        if key in entry.settings or key in _REPORTED_ELSEWHERE:
            continue
        known = ", ".join(entry.settings) or "none"
        near = [k for k in entry.settings if k.lower() == key.lower()]
        hint = f"did you mean {near[0]}?" if near else f"{entry.name} reads: {known}"
        out.append(_setting(key, f"provider {entry.name} has no setting {shown(key)}", hint, "UnknownSetting"))
    return out
