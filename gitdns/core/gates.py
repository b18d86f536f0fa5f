"""Every run-time refusal of what the desired state says, and whether `gitdns validate` can
make it (pure data).

`gitdns validate` is the whole static gate: whatever an agent, ``apply``/``plan`` or the
orchestrator would refuse without needing an operator setting, ``validate`` refuses in CI
with the file and line, by calling the same function.  This table holds the two lists
together.  Each `Gate` is one rule; its ``sites`` are where the run time applies it (a
``raise`` of a refusal, or a call of a function that refuses).  Its `Kind` says who can
judge it:

* ``STATIC`` — refused whatever the operator set: ``check`` names the one pure function both
  the run time and ``validate`` call, ``code`` the problem code ``validate`` reports, and
  ``sample`` a hostile document both refuse (``expect``: a fragment of both messages;
  ``runner``: how the test drives the run time);
* ``OPERATOR`` — refused unless the operator allows it (an endpoint's origin on
  ``--provider-endpoints``, a server on ``--rfc2136-servers``, a credential source, a base
  directory): only the agent, with its settings, can tell;
* ``WORLD`` — depends on what is out there when it runs (a file, a Secret's data, what the
  service or the Kubernetes API answers), not on the repository alone;
* ``SETTING`` — the operator's own setting is malformed (the agent or verb stops at start);
* ``RELAY`` — passes on a refusal made by another row (adds the file and line, the zone);
* ``INTERNAL`` — a guard the callers never reach with what the desired state can say.

``tests/test_static_gate.py`` walks `RUNTIME_MODULES` (their source, with ``ast``) for every
refusal site — a ``raise`` of a `gitdns.errors.PermanentError` (or, in the pure modules
listed, a ``ValueError``; or one of `REFUSAL_EXCEPTIONS`), and every call of a function in
`GATE_FUNCTIONS` (a ``raise`` of what a function made or a variable holds counts too, as
``raise error_for(...)``, named after the function or variable, ``?`` when neither) — and
requires each to be a site of some row, and each row's sites to exist.
For every ``STATIC`` row it writes ``sample`` into a copy of ``example-repo/``, and asserts
that ``validate`` reports ``code`` at that file with a line, and that the run time refuses
it, both saying ``expect``.  So a refusal added to the run time later without a ``validate``
counterpart fails that test.

**Adding a row** (a new gate, e.g. probe targets in `gitdns.core.reach`): add the module of
its run-time sites to `RUNTIME_MODULES` (and the name of a refusing function it calls to
`GATE_FUNCTIONS`), then a `Gate` to a tuple below (or a tuple of your own, joined into
`GATES`), with its ``sites``.  A static one also names its ``check`` (``module:function``),
``code``, ``sample`` (a YAML document, written as ``<sample_file>``), ``expect`` and
``runner``: one of the runners the test knows (``provider``: the zone's provider is built
as ``apply`` builds it; ``views``: then its views are rendered; ``orchestrator``: the node
pools are laid out and rendered as the orchestrator does; ``store``: the local store names its
file) or a new one added to ``RUNNERS`` in the test.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    STATIC = "static"
    OPERATOR = "operator"
    WORLD = "world"
    SETTING = "setting"
    RELAY = "relay"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class Site:
    """Where the run time refuses: in ``module`` (a path from the repository's root), in
    ``function`` (its qualified name: ``Class.method``, ``outer.inner``), a ``raise`` of the
    exception class ``name`` or a ``call`` of the function ``name``; ``text``, when given, a
    fragment of that statement's source (to tell apart several sites of one function)."""

    module: str
    function: str
    what: str  # "raise" or "call"
    name: str
    text: str = ""


@dataclass(frozen=True, slots=True)
class Gate:
    name: str
    kind: Kind
    rule: str  # what is refused, in a few words
    sites: tuple[Site, ...]
    check: str = ""  # STATIC: the one pure function, "module:function"
    code: str = ""  # STATIC: the problem code gitdns validate reports
    sample: str = ""  # STATIC: a hostile document (YAML)
    expect: str = ""  # STATIC: a fragment of validate's message and of the run time's
    runner: str = ""  # STATIC: how the test drives the run time
    sample_file: str = "zones/hostile.yaml"


# --- module paths ------------------------------------------------------------------------------------

FENCES = "gitdns/providers/fences.py"
CREDENTIALS = "gitdns/providers/credentials.py"
FACTORY = "gitdns/providers/factory.py"
REGISTRY = "gitdns/providers/registry.py"
DEFAULT = "gitdns/providers/defaultprovider.py"
LOCAL = "gitdns/providers/local.py"
MEMORY = "gitdns/providers/memory.py"
RFC2136 = "gitdns/providers/rfc2136/provider.py"
ROUTE53 = "gitdns/providers/route53/provider.py"
GOOGLE = "gitdns/providers/google/provider.py"
AZURE = "gitdns/providers/azure/provider.py"
ENDPOINT = "gitdns/providers/endpoint.py"
ENGINE = "gitdns/reconcile/engine.py"
SOURCES = "gitdns/orchestrator/sources.py"
POOL = "gitdns/orchestrator/pool.py"
PUBLISHER = "gitdns/orchestrator/publisher.py"
COREFILE = "gitdns/core/corefile/__init__.py"
ZONECOREFILE = "gitdns/core/zonecorefile.py"
PROBES = "gitdns/adapters/probes/prober.py"
PROBEHEADERS = "gitdns/providers/probeheaders.py"

# where the run time refuses what the desired state says: the walk of the completeness test
RUNTIME_MODULES: tuple[str, ...] = (
    FENCES, CREDENTIALS, FACTORY, REGISTRY, DEFAULT, LOCAL, MEMORY, RFC2136, ROUTE53, GOOGLE, AZURE, ENDPOINT,
    ENGINE, SOURCES, POOL, PUBLISHER, COREFILE, ZONECOREFILE, PROBES, PROBEHEADERS,
)
# pure modules whose ValueErrors are refusals (elsewhere a ValueError is a bug or caught)
VALUE_ERROR_MODULES: tuple[str, ...] = (COREFILE, ZONECOREFILE)
# exceptions that refuse without being a gitdns.errors.PermanentError
REFUSAL_EXCEPTIONS: tuple[str, ...] = ("RenderRefused", "ProbeRefused")
# functions whose call is a refusal site (they refuse, or say what to leave out)
GATE_FUNCTIONS: tuple[str, ...] = (
    "refuse_static", "refuse_unknown", "check_endpoint", "check_server", "check_env", "credentials_file",
    "check_namespace", "refused_tenants", "ip_error", "check_hosts", "layout", "Skipped", "view_clients",
    "node_probe", "refusal", "secret_gate",
)


def _from_ref(*modules: str) -> tuple[Site, ...]:
    """The static gate at the start of these providers' ``from_ref``."""
    return tuple(Site(m, "from_ref", "call", "refuse_static") for m in modules)


def _zone(name: str, provider: str, domain: str = "hostile.example") -> str:
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata:\n  name: {name}\nspec:\n  domain: {domain}\n"
            f"  provider:\n{provider}")


# --- a Zone's spec.provider ---------------------------------------------------------------------------

PROVIDER_GATES: tuple[Gate, ...] = (
    Gate("provider.endpoint", Kind.STATIC,
         "settings.endpoint of route53, google, azure: https://host[:port][/path] only (no other scheme, user "
         "name, query, fragment, backslash, white space; a host name or IP address; a port 1..65535)",
         (Site(FENCES, "Fences.check_endpoint", "raise", "ConfigError", "ENDPOINT_HINT"),
          *_from_ref(ROUTE53, GOOGLE, AZURE)),
         check="gitdns.core.providertypes.settings:parse_endpoint", code="InvalidEndpoint",
         sample=_zone("hostile-endpoint", "    type: route53\n    settings:\n"
                      "      endpoint: http://169.254.169.254/latest\n"),
         expect="is not an https:// URL", runner="provider"),
    Gate("provider.endpoint-allowed", Kind.OPERATOR,
         "settings.endpoint: its origin is on --provider-endpoints",
         (Site(FENCES, "Fences.check_endpoint", "raise", "ConfigError", "is not a provider endpoint the operator"),
          Site(ROUTE53, "from_ref", "call", "check_endpoint"), Site(GOOGLE, "from_ref", "call", "check_endpoint"),
          Site(AZURE, "from_ref", "call", "check_endpoint"))),
    Gate("local.path", Kind.STATIC,
         "settings.path of local: no '..' or '.git' component, no leading '~', no NUL",
         _from_ref(LOCAL), check="gitdns.core.providertypes.settings:store_path_error", code="InvalidStorePath",
         sample=_zone("hostile-path", "    type: local\n    settings:\n      path: store/../../etc\n"),
         expect="a path with '..' or '.git' is refused", runner="provider"),
    Gate("local.path-inside-base", Kind.OPERATOR,
         "settings.path of local: an absolute path lies inside the base (--store-dir, the state directory, the "
         "repository for the one-shot verbs)",
         (Site(LOCAL, "store_directory", "raise", "ConfigError", "is outside the base directory"),)),
    Gate("local.corednsDir", Kind.STATIC,
         "settings.corednsDir of local: an absolute path CoreDNS reads unquoted (letters, digits, '-._/+@=,~')",
         (*_from_ref(LOCAL),
          Site(ZONECOREFILE, "render_zone_server", "raise", "ValueError", "COREDNS_DIR")),
         check="gitdns.core.zonecorefile:directory_error", code="InvalidCorednsDir",
         sample=_zone("hostile-coredns", "    type: local\n    settings:\n"
                      "      corednsDir: \"/srv/views } import /etc/*\"\n"),
         expect="is not an absolute path of letters", runner="provider"),
    Gate("local.viewClients", Kind.STATIC,
         "settings.viewClients of local: VIEW=CIDR[,CIDR...] entries separated by ';'",
         (Site(ZONECOREFILE, "parse_view_clients", "raise", "ValueError", "is not VIEW=CIDR"),
          Site(ZONECOREFILE, "parse_view_clients", "raise", "ValueError", "is not a geo code"),
          Site(ZONECOREFILE, "parse_view_clients", "raise", "ValueError", "is listed twice"),
          Site(ZONECOREFILE, "parse_view_clients", "raise", "ValueError", "has no CIDR"),
          Site(ZONECOREFILE, "_network", "raise", "ValueError"),
          Site(ZONECOREFILE, "view_clients", "raise", "ValueError"),
          Site(ENGINE, "render_views", "call", "view_clients"),
          Site(ENGINE, "render_views", "raise", "ConfigError")),
         check="gitdns.core.zonecorefile:parse_view_clients", code="InvalidViewClients",
         sample=_zone("hostile-views", "    type: local\n    settings:\n      viewClients: \"EU=10.0.0.0/33\"\n"),
         expect="is not a network in CIDR form", runner="views"),
    Gate("local.store-file", Kind.STATIC,
         "the zone's domain names the local store's file (<zone>.json): the Zone schema's spec.domain",
         (Site(LOCAL, "LocalProvider.path", "raise", "ConfigError"),),
         check="gitdns/data/schemas/zone.schema.json:spec.domain", code="SchemaViolation",
         sample=_zone("hostile-domain", "    type: local\n", domain="../../etc"),
         expect="../../etc", runner="store"),
    Gate("provider.unknown-type", Kind.STATIC,
         "spec.provider.type names a provider of the table (gitdns.core.providertypes.PROVIDER_TYPES)",
         (Site(FACTORY, "build_provider", "raise", "ConfigError"),),
         check="gitdns.core.providertypes:PROVIDER_TYPES", code="UnknownProvider",
         sample=_zone("hostile-type", "    type: coredns\n"), expect="coredns", runner="provider"),
    Gate("provider.unknown-setting", Kind.STATIC,
         "a key of spec.provider.settings the type does not read (a typo is never ignored)",
         (Site(FENCES, "refuse_unknown", "raise", "ConfigError"),
          Site(REGISTRY, "make_provider", "call", "refuse_unknown")),
         check="gitdns.core.providertypes.settings:unknown_settings", code="UnknownSetting",
         sample=_zone("hostile-key", "    type: route53\n    settings:\n      endPoint: https://example.net\n"),
         expect="has no setting 'endPoint'", runner="provider"),
    Gate("provider.missing-setting", Kind.STATIC,
         "a setting the type cannot run without (rfc2136 server; google project, azure subscriptionId and "
         "resourceGroup, endpoint namespace when the zone names no credentials)",
         _from_ref(RFC2136, GOOGLE, AZURE, ENDPOINT),
         check="gitdns.core.providertypes:missing_settings", code="MissingSetting",
         sample=_zone("hostile-missing", "    type: rfc2136\n    settings:\n      port: \"53\"\n"),
         expect="needs spec.provider.settings server", runner="provider"),
    Gate("provider.settings-gate", Kind.RELAY,
         "the first problem gitdns.core.providertypes.settings.problems finds, raised before any credential is read",
         (Site(FENCES, "refuse_static", "raise", "ConfigError"),
          Site(FENCES, "refuse_static", "raise", "UnsupportedError")),
         check="gitdns.core.providertypes.settings:problems"),
    Gate("rfc2136.server", Kind.STATIC,
         "settings.server of rfc2136: a host name or an IP address, the port apart",
         _from_ref(RFC2136), check="gitdns.core.providertypes.settings:server_error", code="InvalidServer",
         sample=_zone("hostile-server", "    type: rfc2136\n    settings:\n      server: ns1.example.net:5353\n"),
         expect="carries a port", runner="provider"),
    Gate("rfc2136.server-allowed", Kind.OPERATOR,
         "settings.server and port of rfc2136 are on --rfc2136-servers",
         (Site(FENCES, "Fences.check_server", "raise", "ConfigError"),
          Site(RFC2136, "from_ref", "call", "check_server"))),
    Gate("rfc2136.port", Kind.STATIC,
         "settings.port of rfc2136: a number 1..65535",
         _from_ref(RFC2136), check="gitdns.core.providertypes.settings:port_value", code="InvalidPort",
         sample=_zone("hostile-port", "    type: rfc2136\n    settings:\n      server: 192.0.2.53\n"
                      "      port: \"inf\"\n"),
         expect="is not a port", runner="provider"),
    Gate("provider.timeout", Kind.STATIC,
         "settings.timeout of rfc2136 and google: a finite positive number of seconds",
         _from_ref(RFC2136, GOOGLE), check="gitdns.core.providertypes.settings:seconds_value", code="InvalidTimeout",
         sample=_zone("hostile-timeout", "    type: rfc2136\n    settings:\n      server: 192.0.2.53\n"
                      "      timeout: \"nan\"\n"),
         expect="is not a positive number of seconds", runner="provider"),
    Gate("rfc2136.tsigAlgorithm", Kind.STATIC,
         "settings.tsigAlgorithm of rfc2136: one dnspython signs with",
         _from_ref(RFC2136), check="gitdns.core.providertypes.settings:tsig_algorithm", code="InvalidTsigAlgorithm",
         sample=_zone("hostile-alg", "    type: rfc2136\n    settings:\n      server: 192.0.2.53\n"
                      "      tsigAlgorithm: rot13\n"),
         expect="is not one of hmac-sha256", runner="provider"),
    Gate("rfc2136.tsigKeyName", Kind.STATIC,
         "settings.tsigKeyName of rfc2136: a DNS name",
         _from_ref(RFC2136), check="gitdns.core.providertypes.settings:dns_name_error", code="InvalidTsigKeyName",
         sample=_zone("hostile-key-name", "    type: rfc2136\n    settings:\n      server: 192.0.2.53\n"
                      "      tsigKeyName: \"a..b\"\n    credentials: {env: TSIG}\n"),
         expect="is not a host name", runner="provider"),
    Gate("rfc2136.tsig-credentials", Kind.STATIC,
         "settings.tsigKeyName of rfc2136 signs with a secret: the zone names credentials",
         _from_ref(RFC2136), check="gitdns.core.providertypes.settings:_tsig", code="MissingCredentials",
         sample=_zone("hostile-tsig", "    type: rfc2136\n    settings:\n      server: 192.0.2.53\n"
                      "      tsigKeyName: ddns-key\n"),
         expect="names no credentials holding it", runner="provider"),
    Gate("rfc2136.tsig-secret", Kind.WORLD,
         "the credentials hold a base64 TSIG secret",
         (Site(RFC2136, "from_ref", "raise", "ConfigError", "no TSIG secret"),
          Site(RFC2136, "from_ref", "raise", "ConfigError", "not valid base64"))),
    Gate("rfc2136.zone", Kind.STATIC,
         "settings.zone of rfc2136: a DNS name holding the zone's domain",
         (*_from_ref(RFC2136), Site(RFC2136, "Rfc2136Provider.__init__", "raise", "ConfigError")),
         check="gitdns.core.providertypes.settings:server_zone_error", code="InvalidServerZone",
         sample=_zone("hostile-server-zone", "    type: rfc2136\n    settings:\n      server: 192.0.2.53\n"
                      "      zone: other.example\n"),
         expect="does not contain hostile.example", runner="provider"),
    Gate("route53.flags", Kind.STATIC,
         "settings.private, waitInsync, healthChecks of route53: \"true\" or \"false\"",
         _from_ref(ROUTE53), check="gitdns.core.providertypes.settings:flag_value", code="InvalidFlag",
         sample=_zone("hostile-flag", "    type: route53\n    settings:\n      private: \"yes\"\n"),
         expect="is not \"true\" or \"false\"", runner="provider"),
    Gate("azure.trafficManager", Kind.STATIC,
         "settings.trafficManager of azure: not driven yet, so refused when on",
         _from_ref(AZURE), check="gitdns.core.providertypes.settings:traffic_manager_error", code="UnsupportedSetting",
         sample=_zone("hostile-tm", "    type: azure\n    settings:\n      subscriptionId: s\n      resourceGroup: g\n"
                      "      trafficManager: \"true\"\n"),
         expect="Traffic Manager", runner="provider"),
    Gate("endpoint.namespace", Kind.STATIC,
         "settings.namespace of endpoint: a namespace name (when the zone names no credentials)",
         _from_ref(ENDPOINT), check="gitdns.core.providertypes.settings:namespace_error", code="InvalidNamespace",
         sample=_zone("hostile-ns", "    type: endpoint\n    settings:\n      namespace: Not_A_Namespace\n"),
         expect="is not a namespace name", runner="provider"),
    Gate("endpoint.resource", Kind.STATIC,
         "settings ENDPOINT_GVR / ENDPOINT_GVK / the zone label selectors of endpoint parse (when the zone names "
         "no credentials)",
         _from_ref(ENDPOINT), check="gitdns.core.providertypes.settings:endpoint_resource_error",
         code="InvalidEndpointResource",
         sample=_zone("hostile-gvr", "    type: endpoint\n    settings:\n      namespace: dnstest\n"
                      "      ENDPOINT_ZONE_RECORD_LABEL: \"a!=b\"\n"),
         expect="only key=value and key are supported", runner="provider"),
    Gate("provider.settings-from-credentials", Kind.WORLD,
         "what the named credentials give completes the settings (google project, azure subscriptionId and "
         "resourceGroup, endpoint namespace and resource), judged by the same functions as the zone's",
         (Site(GOOGLE, "from_ref", "raise", "ConfigError", "project is required"),
          Site(AZURE, "from_ref", "raise", "ConfigError", "required for an azure zone"),
          Site(ENDPOINT, "from_ref", "raise", "ConfigError", "namespace: required"),
          Site(ENDPOINT, "from_ref", "raise", "ConfigError", "(endpoint zone"))),
    Gate("credentials.file-dotdot", Kind.STATIC,
         "credentials.file: no '..' component",
         (Site(FENCES, "Fences.credentials_file", "raise", "ConfigError", "no file is read')"),),
         check="gitdns.core.providertypes.settings:credentials_file_error", code="InvalidCredentialsFile",
         sample=_zone("hostile-creds", "    type: route53\n    credentials: {file: ../../etc/shadow}\n"),
         expect="a path with '..' is refused", runner="credentials"),
    Gate("credentials.file-nul", Kind.STATIC,
         "credentials.file: no NUL (and no control character: the Zone schema)",
         (Site(FENCES, "Fences.credentials_file", "raise", "ConfigError", "NUL character"),),
         check="gitdns/data/schemas/zone.schema.json:spec.provider.credentials.file", code="SchemaViolation",
         sample=_zone("hostile-creds-nul", "    type: route53\n    credentials: {file: \"a\\0b\"}\n"),
         expect="credentials", runner="credentials"),
    Gate("credentials.sources", Kind.OPERATOR,
         "credentials.env under --credentials-env-prefixes, credentials.file inside --credentials-dir, "
         "credentials.namespace and defaultProviderNamespace among --credentials-namespaces",
         (Site(FENCES, "Fences.check_env", "raise", "ConfigError"),
          Site(FENCES, "Fences.credentials_file", "raise", "ConfigError", "no credentials directory is set"),
          Site(FENCES, "Fences.credentials_file", "raise", "ConfigError", "is not inside the credentials"),
          Site(FENCES, "Fences.check_namespace", "raise", "ConfigError"),
          Site(CREDENTIALS, "load_credentials", "call", "check_namespace"),
          Site(CREDENTIALS, "load_credentials", "call", "credentials_file"),
          Site(CREDENTIALS, "load_credentials", "call", "check_env"),
          Site(DEFAULT, "resolve_default_zone", "call", "check_namespace"))),
    Gate("credentials.read", Kind.WORLD,
         "what the credential source holds: the variables, the file (regular, UTF-8, at most 1 MiB, a mapping), "
         "the Secret (readable, of the provider's type), the keys each provider needs",
         (Site(FENCES, "read_credentials_file", "raise", "ConfigError"),
          Site(CREDENTIALS, "_from_env", "raise", "ConfigError"),
          Site(CREDENTIALS, "_yaml_mapping", "raise", "ConfigError"),
          Site(CREDENTIALS, "_from_secret", "raise", "ConfigError"),
          Site(CREDENTIALS, "_from_secret", "raise", "AuthError"),
          Site(ROUTE53, "from_ref", "raise", "ConfigError", "give both AWS_ACCESS_KEY_ID"),
          Site(GOOGLE, "_credentials", "raise", "ConfigError"),
          Site(AZURE, "azure_json", "raise", "ConfigError"))),
    Gate("default-provider", Kind.WORLD,
         "the default provider secret: exactly one labelled Secret, readable, of a type that names a provider; "
         "looked up only in a Kubernetes cluster",
         (Site(DEFAULT, "_list_labelled", "raise", "AuthError"),
          Site(DEFAULT, "_provider_type", "raise", "ConfigError"),
          Site(DEFAULT, "find_default_provider", "raise", "ConfigError"),
          Site(DEFAULT, "resolve_default_zone", "raise", "ConfigError", "has no spec.provider"))),
    Gate("provider.zone-file", Kind.RELAY,
         "a provider's refusal with the Zone's file and line (engine), or its zone (default provider secret); "
         "a pending default provider raising what it met",
         (Site(ENGINE, "default_factory.factory", "raise", "ConfigError"),
          Site(DEFAULT, "resolve_default_zone", "raise", "ConfigError", "{exc}"),
          Site(DEFAULT, "resolve_default_zone", "raise", "?"),
          Site(DEFAULT, "PendingDefaultProvider._provider", "raise", "error"))),
    Gate("provider.library", Kind.WORLD,
         "the provider's SDK is installed (the gitdns image has every one)",
         (Site(FACTORY, "build_provider", "raise", "missing_library"),)),
    Gate("provider.service", Kind.WORLD,
         "what the service holds and answers: the hosted zone, managed zone, resource group zone, the zone "
         "resource; errors of the service mapped to gitdns errors",
         (Site(ROUTE53, "Route53Provider.zone_id", "raise", "ConfigError"),
          Site(ROUTE53, "Route53Provider._call.request", "raise", "mapped"),
          Site(RFC2136, "DnsPythonClient.transfer", "raise", "_error"),
          Site(RFC2136, "DnsPythonClient.update", "raise", "_error"),
          Site(RFC2136, "Rfc2136Provider._send", "raise", "rcode_error"),
          Site(GOOGLE, "GoogleProvider._pages.request", "raise", "error_for"),
          Site(GOOGLE, "GoogleProvider._send", "raise", "error_for"),
          Site(AZURE, "AzureProvider.read", "raise", "error_for"),
          Site(AZURE, "AzureProvider._preflight", "raise", "error_for"),
          Site(AZURE, "AzureProvider._write", "raise", "error_for"),
          Site(AZURE, "AzureProvider._current", "raise", "error_for"),
          Site(GOOGLE, "GoogleProvider._managed_zone", "raise", "ConfigError"),
          Site(AZURE, "AzureProvider.read", "raise", "ConfigError"),
          Site(ENDPOINT, "EndpointProvider._call", "raise", "AuthError"),
          Site(ENDPOINT, "EndpointProvider._find", "raise", "ConfigError"),
          Site(ENDPOINT, "EndpointProvider._records", "raise", "ConfigError"))),
    Gate("local.filesystem", Kind.WORLD,
         "what lies below the local store's base: no symbolic link or special file, a store file that decodes "
         "(for the one-shot verbs the base is the checkout: a committed link is refused here)",
         (Site(LOCAL, "decode_store", "raise", "StoreCorruptError"),
          Site(LOCAL, "LocalProvider._no_links", "raise", "ConfigError"),
          Site(LOCAL, "LocalProvider._load", "raise", "ConfigError"),
          Site(LOCAL, "check_no_links", "raise", "ConfigError"))),
    Gate("provider.operator-settings", Kind.SETTING,
         "the operator's own allow-lists are well formed (https origins, host[:port|*], names), and so is how a "
         "local store's write reaches its server (--local-reload none|rndc, an --rndc-config file that exists)",
         (Site(FENCES, "_origin", "raise", "ConfigError"), Site(FENCES, "_server", "raise", "ConfigError"),
          Site(FENCES, "Fences.parse", "raise", "ConfigError"),
          Site(FENCES, "_reload", "raise", "ConfigError"),
          Site(ENGINE, "find_cluster", "raise", "ConfigError"))),
)


# --- the CoreDNS files: views of a local zone, the orchestrator's tenants -----------------------------------


def _tenant(name: str, spec: str) -> str:
    return f"apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: {name}\nspec:\n  nodePool: edge\n{spec}"


_TWO_POOLS = ("apiVersion: gitdns.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: aaa-pool\nspec:\n"
              "  nodes:\n    - {name: a-1, ip: 192.0.2.201}\n  tenants:\n    allowInside: [shared.example.net]\n---\n"
              "apiVersion: gitdns.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: edge-shared\nspec:\n"
              "  nodes:\n    - {name: s-1, ip: 192.0.2.202}\n  tenants:\n    allowInside: [shared.example.net]\n---\n"
              "apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: first\nspec:\n  nodePool: aaa-pool\n"
              "  zone: shared.example.net\n  domains: [a.shared.example.net]\n---\n"
              "apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: second\nspec:\n"
              "  nodePool: edge-shared\n  zone: shared.example.net\n  domains: [b.shared.example.net]\n")

CORE_DNS_GATES: tuple[Gate, ...] = (
    Gate("zone.snippet", Kind.OPERATOR,
         "a local zone's rendered Corefile snippet passes CoreDNS's parse rules (its names are judged statically; "
         "the text depends on the operator's templates)",
         (Site(ZONECOREFILE, "render_zone_server", "raise", "ValueError", "fails CoreDNS's parse rules"),)),
    Gate("tenant.fences", Kind.STATIC,
         "a tenant's name, zone and domains, its zone not reserved, not a public suffix, not inside a Zone or "
         "another pool's tenant zone unless allowed (gitdns.core.checks.tenants)",
         (Site(SOURCES, "hold_fenced", "call", "refused_tenants"),
          Site(COREFILE, "layout", "call", "Skipped", "refused[tenant.name]"),
          Site(PUBLISHER, "Publisher._hosts", "call", "check_hosts")),
         check="gitdns.core.checks.tenants:refused_tenants", code="ReservedTenantZone",
         sample=_tenant("hostile-tenant", "  zone: svc.cluster.local\n  domains: [api.svc.cluster.local]\n"),
         expect="cluster.local", runner="orchestrator", sample_file="tenants/hostile.yaml"),
    Gate("tenant.no-zone", Kind.STATIC,
         "a tenant without spec.zone whose domains share no parent below a top-level domain",
         (Site(COREFILE, "layout", "call", "Skipped", "share no parent"),),
         check="gitdns.core.corefile:tenant_zone", code="ReservedTenantZone",
         sample=_tenant("hostile-nozone", "  domains: [a.one.example, b.two.example]\n"),
         expect="share no parent", runner="orchestrator", sample_file="tenants/hostile.yaml"),
    Gate("tenant.zone-served-elsewhere", Kind.STATIC,
         "a tenant zone that another node pool serves (one CoreDNS server block per zone)",
         (Site(COREFILE, "layout", "call", "Skipped", "is served by node pool"),
          Site(POOL, "PoolView._take", "call", "layout")),
         check="gitdns.core.corefile:layout", code="TenantZoneServedElsewhere",
         sample=_TWO_POOLS, expect="is served by node pool aaa-pool", runner="orchestrator",
         sample_file="tenants/hostile.yaml"),
    Gate("tenant.domain-outside-zone", Kind.STATIC,
         "a tenant domain outside its spec.zone",
         (Site(COREFILE, "layout", "call", "Skipped", "is outside zone"),),
         check="gitdns.core.corefile:layout", code="TenantDomainOutsideZone",
         sample=_tenant("hostile-outside", "  zone: shop.tenant-c.test\n"
                        "  domains: [shop.tenant-c.test, www.elsewhere.test]\n"),
         expect="www.elsewhere.test is outside zone", runner="orchestrator", sample_file="tenants/hostile.yaml"),
    Gate("tenant.hosts-file", Kind.STATIC,
         "a zone block's hosts file name CoreDNS takes (<tenant>.hosts, <zone>.hosts of a shared zone)",
         (Site(PUBLISHER, "Publisher._block_problems", "call", "check_server"),),
         check="gitdns.core.corefile.check:file_name_error", code="InvalidTenantFile",
         sample=(_tenant("hostile-file-a", "  zone: _acme.tenant-d.test\n  domains: [a._acme.tenant-d.test]\n")
                 + "---\n" + _tenant("hostile-file-b", "  zone: _acme.tenant-d.test\n"
                                     "  domains: [b._acme.tenant-d.test]\n")),
         expect="is not a plain file name ending in .hosts", runner="orchestrator",
         sample_file="tenants/hostile.yaml"),
    Gate("tenant.snippet", Kind.OPERATOR,
         "the pool's rendered snippet as a whole passes CoreDNS's parse rules (its names are judged statically; "
         "the text depends on the operator's templates and CoreDNS settings)",
         (Site(PUBLISHER, "Publisher.render", "call", "check_server"),
          Site(PUBLISHER, "Publisher.render", "raise", "RenderRefused", "wrong[:3]"))),
    Gate("tenant.every-block", Kind.RELAY,
         "every zone block of the pool was refused by the rows above: nothing is delivered",
         (Site(PUBLISHER, "Publisher.render", "raise", "RenderRefused", "every zone block fails"),)),
    Gate("node.ip", Kind.STATIC,
         "a NodePool node's ip is an IP address",
         (Site(SOURCES, "hold_addresses", "call", "ip_error"),),
         check="gitdns.core.addresses:ip_error", code="InvalidAddress",
         sample=("apiVersion: gitdns.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: hostile-pool\nspec:\n"
                 "  nodes:\n    - {name: n-1, ip: 192.0.2.300}\n"),
         expect="192.0.2.300", runner="orchestrator", sample_file="tenants/hostile.yaml"),
    Gate("node.discovered-ip", Kind.WORLD,
         "a node Kubernetes lists for discovery.labelSelector has an InternalIP",
         (Site(SOURCES, "discover_nodes", "call", "ip_error"),)),
    Gate("orchestrator.source", Kind.SETTING,
         "the orchestrator's --repo is a directory",
         (Site(SOURCES, "DirectorySource.read", "raise", "ConfigError"),)),
    Gate("hosts.empty", Kind.INTERNAL,
         "a hosts file is never rendered empty (the publisher fails open first)",
         (Site(COREFILE, "render_hosts", "raise", "ValueError"),)),
)

# --- what the repository may make a daemon reach: probe targets, Secrets (gitdns.core.reach) -------------

_POOL = "apiVersion: gitdns.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: hostile-pool\nspec:\n  nodes:\n"

REACH_GATES: tuple[Gate, ...] = (
    Gate("node.endpoint", Kind.STATIC,
         "a NodePool node's healthEndpoint parses: scheme://address[:port][/path], a tcp endpoint with a port",
         (Site(SOURCES, "pool_targets", "call", "node_probe"),),
         check="gitdns.core.health:parse_endpoint", code="InvalidHealthEndpoint",
         sample=_POOL + "    - {name: n-1, ip: 192.0.2.5, healthEndpoint: \"tcp://192.0.2.5\"}\n",
         expect="a tcp endpoint needs a port", runner="probes", sample_file="tenants/hostile.yaml"),
    Gate("node.own-address", Kind.STATIC,
         "a NodePool node is probed at its own ip: its healthEndpoint's host is the node's ip",
         (Site(SOURCES, "pool_targets", "call", "node_probe"),),
         check="gitdns.core.reach:own_address_refusal", code="ProbeTargetRefused",
         sample=_POOL + "    - {name: n-1, ip: 192.0.2.5, healthEndpoint: \"http://169.254.169.254/latest/\"}\n",
         expect="is not the node's ip", runner="probes", sample_file="tenants/hostile.yaml"),
    Gate("probe.address", Kind.OPERATOR,
         "no probe connects to a loopback, link-local, cloud metadata, unspecified, multicast, broadcast or "
         "reserved address unless --probe-allow-ranges holds it (validate refuses them as the default settings "
         "do: gitdns.core.checks.reach)",
         (Site(SOURCES, "pool_targets", "call", "refusal"), Site(PROBES, "Prober.destination", "call", "refusal"),
          Site(PROBES, "Prober.destination", "raise", "ProbeRefused"))),
    Gate("probe.resolve", Kind.WORLD,
         "a gateway host name resolves when it is probed",
         (Site(PROBES, "Prober.destination", "raise", "gaierror"),)),
    Gate("secret.listed", Kind.OPERATOR,
         "a Secret the repository names (a Zone's credentials.secret, a healthCheck.headersSecret) is on the "
         "operator's --credentials-secrets / --headers-secrets",
         (Site(CREDENTIALS, "secret_gate", "raise", "SecretNotListed"),
          Site(CREDENTIALS, "load_credentials", "call", "secret_gate"),
          Site(PROBEHEADERS, "ProbeHeaders.read", "call", "secret_gate"),
          Site(PROBEHEADERS, "ProbeHeaders.read", "raise", "HeadersNotListed"))),
    Gate("probe-headers.name", Kind.INTERNAL,
         "a listed headersSecret is one path component (the schema's pattern; the operator listed it)",
         (Site(PROBEHEADERS, "ProbeHeaders.read", "raise", "HeadersUnavailable", "not a Secret name"),)),
    Gate("probe-headers.read", Kind.WORLD,
         "the listed headersSecret exists and the daemon may read it",
         (Site(PROBEHEADERS, "ProbeHeaders.read", "raise", "HeadersUnavailable"),)),
)

GATES: tuple[Gate, ...] = (*PROVIDER_GATES, *CORE_DNS_GATES, *REACH_GATES)


def static_gates() -> tuple[Gate, ...]:
    """The rows `gitdns validate` refuses."""
    return tuple(g for g in GATES if g.kind is Kind.STATIC)
