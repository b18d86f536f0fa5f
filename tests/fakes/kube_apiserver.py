"""A fake Kubernetes API server for tests (stdlib only): no real kube-apiserver can run here.

Usable in-process::

    fake = FakeKube()
    fake.register("gateway.networking.k8s.io", "v1", "gateways", kind="Gateway")
    base_url = fake.start()            # http://127.0.0.1:<ephemeral port>
    cfg = kubernetes.client.Configuration(); cfg.host = base_url
    ...
    fake.stop()

or as a process: ``python -m tests.fakes.kube_apiserver PORT [--crd group/version/plural[:Kind]]...``
(prints ``ready http://127.0.0.1:PORT`` once it listens; gateways and dnsrecords are registered).

What it serves (the paths the official ``kubernetes`` Python client uses):

* core v1 ``namespaces`` and ``nodes`` (cluster-scoped), ``configmaps``, ``secrets`` and
  ``serviceaccounts``; ``coordination.k8s.io/v1`` ``leases``; ``rbac.authorization.k8s.io/v1``
  ``clusterroles`` and ``clusterrolebindings`` (cluster-scoped), ``roles`` and ``rolebindings``
  (enforced only with ``fake.enforce_rbac``, below); any custom resource registered with
  ``register(group, version, plural, namespaced=True, kind=..., status_subresource=True)``.
  ``default``, ``kube-system`` (its uid is ``fake.kube_system_uid``: ``FakeKube(kube_system_uid=...)``
  chooses it, as a cluster id), ``kube-public`` and ``kube-node-lease`` exist from the start.
* GET one, LIST (namespaced, or across all namespaces at ``/api/v1/configmaps``), POST, PUT,
  PATCH, DELETE, the ``/status`` subresource, ``/version`` and enough discovery
  (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``) for ``kubectl get``.

What it enforces, as Kubernetes does:

* a global, monotonically increasing ``metadata.resourceVersion`` (a string) bumped by every
  write; ``uid``, ``creationTimestamp`` set on create and kept by updates (a different uid in
  an update is a 409); LIST carries the current resourceVersion in its ``metadata``.
* ``metadata.generation``: custom resources only (as Kubernetes: ConfigMaps, Secrets,
  Leases, Namespaces and Nodes have none). 1 on create, +1 when anything outside
  ``metadata`` and ``status`` changes.
* POST: 409 ``AlreadyExists``; a resourceVersion in the body is refused (500, as Kubernetes);
  a missing name is 422 ``Invalid`` (``generateName`` is not supported); a namespace in the
  body different from the URL's is 400; a namespaced object in a namespace that does not
  exist is 404 (the NamespaceLifecycle admission check).
* PUT: 404 when missing (no create-on-update); 409 ``Conflict`` when the body's
  resourceVersion is not the current one; custom resources require a resourceVersion
  (422, they do not allow unconditional updates), built-in kinds update unconditionally
  without one.
* PATCH: ``application/merge-patch+json`` (RFC 7386) everywhere;
  ``application/strategic-merge-patch+json`` on built-in kinds only, applied as a merge patch
  (maps merged, lists replaced, ``$patch`` directives not understood); custom resources refuse
  it with 415 as Kubernetes does; JSON patch and apply patches are 415. A resourceVersion in
  the patch body is a precondition (409 when stale).
* ``/status`` (kinds with a status subresource: custom resources by default, Namespaces, Nodes):
  PUT/PATCH there change only ``.status``; PUT/PATCH of the main resource keep the stored
  ``.status``; POST creating a custom resource drops ``.status``. Kinds without a status
  subresource answer 404 there.
* DELETE: ``preconditions.resourceVersion`` / ``preconditions.uid`` in the body → 409 when
  stale; a deleted Namespace takes its objects with it at once.
* ``labelSelector``: equality-based terms ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``
  (comma-separated, all must hold); set-based terms (``in``, ``notin``) are a 400.
* Lease ``spec.acquireTime``/``spec.renewTime`` are MicroTime: exactly six fractional digits
  (``2006-01-02T15:04:05.000000Z07:00``), anything else is a 400 as Kubernetes answers; they
  are stored normalised to UTC ``Z``.
* the token controller, for Secrets of type ``kubernetes.io/service-account-token`` whose
  annotation ``kubernetes.io/service-account.name`` names an existing ServiceAccount of their
  namespace: ``data.token`` (a fresh token), ``data["ca.crt"]`` (``fake.ca_pem``) and
  ``data.namespace`` are filled and the annotation ``kubernetes.io/service-account.uid`` set —
  at once, or on the GET that follows ``fake.token_fill_delay`` GETs of the Secret (the real
  controller is asynchronous). ``fake.issued_tokens`` holds every token issued.
* bearer tokens, only when ``fake.require_auth`` (or ``fake.enforce_rbac``) is set: a request must
  carry ``Authorization: Bearer <t>`` with ``t`` an issued token or one of ``fake.admin_tokens``,
  else 401 ``Unauthorized``. ``fake.issue_token(namespace, name)`` issues a token for a
  ServiceAccount as the kubelet's projected token would (the token controller's tokens carry
  their account too); ``fake.subjects`` maps every issued token to its user name
  (``system:serviceaccount:<ns>:<name>``).
* RBAC, only when ``fake.enforce_rbac`` is set: a request with a ServiceAccount's token is
  authorised against the stored Roles, ClusterRoles, RoleBindings and ClusterRoleBindings as
  Kubernetes' RBAC authoriser does (verbs get/list/watch/create/update/patch/delete/deletecollection
  from the method, ``resource/subresource``, ``resourceNames`` (never matching create or list),
  ``*`` wildcards, RoleBindings only in their namespace, a namespace's own name as the namespace
  of ``/api/v1/namespaces/<name>``; subjects by ServiceAccount, user name or the groups
  ``system:serviceaccounts``, ``system:serviceaccounts:<ns>``, ``system:authenticated``), else
  403 ``Forbidden`` with Kubernetes' message; every refusal is kept in ``fake.forbidden`` (not in
  ``fake.requests``, which holds the requests authorised).
  Discovery and ``/version`` are open to every authenticated user (``system:discovery``); admin
  tokens are not checked (``system:masters``).
* TLS, when ``start`` is given ``certfile``/``keyfile``: ``base_url`` is then ``https://``; set
  ``fake.ca_pem`` to the CA's PEM so token Secrets carry it.
* errors are ``Status`` objects (``kind: Status, status: Failure, reason, code, message,
  details``) with Kubernetes' messages; unknown paths are 404 NotFound.

What it does not cover: watch (405), ``fieldSelector`` and ``dryRun`` (400), pagination
(``limit`` is ignored: every item is returned, no ``continue``), LIST ``resourceVersion``
semantics (always the latest), authorisation other than the opt-in RBAC above (no
aggregated ClusterRoles, no non-resource URL rules, no impersonation), authentication beyond the
opt-in bearer tokens above (no client certificates, no token expiry), the TokenRequest API, admission other
than the namespace check, schema validation and defaulting of any kind, finalizers and
graceful deletion, owner references and garbage collection, server-side apply, managedFields,
protobuf/CBOR and YAML bodies (JSON only), table output.

Test hooks: ``fake.requests`` (every request: method, path, query, content type, and the
ServiceAccount user whose token it carried),
``fake.count(method, suffix)``, ``fake.add_hook(fn)``/``clear_hooks()`` (``fn(request)`` runs before a
request is handled, outside the store lock, so it may call ``fake.mutate``), and the
in-process store API ``create``, ``get``, ``mutate``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import json
import re
import socket
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PATCH_TYPES_CUSTOM = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
PATCH_TYPES_BUILTIN = (
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
    "application/strategic-merge-patch+json"
)
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
MICROTIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6})(Z|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool
    custom: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:  # how Kubernetes names the resource in messages: leases.coordination.k8s.io
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTINS = (
    ResourceType("", "v1", "namespaces", "Namespace", False, True, False),
    ResourceType("", "v1", "nodes", "Node", False, True, False),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, False, False),
    ResourceType("", "v1", "secrets", "Secret", True, False, False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, False, False),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, False, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, False, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, False, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, False, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, False, False),
)
SA_TOKEN_TYPE = "kubernetes.io/service-account-token"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
SA_UID_ANNOTATION = "kubernetes.io/service-account.uid"
FAKE_CA_PEM = "-----BEGIN CERTIFICATE-----\nZmFrZSBjbHVzdGVyIENB\n-----END CERTIFICATE-----\n"
VERSION = {"major": "1", "minor": "30", "emulationMajor": "1", "emulationMinor": "30",
           "minCompatibilityMajor": "1", "minCompatibilityMinor": "29", "gitVersion": "v1.30.0-fake",
           "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
           "buildDate": "2024-04-17T00:00:00Z", "goVersion": "go1.22.2", "compiler": "gc", "platform": "linux/amd64"}
SHORT_NAMES = {"namespaces": ["ns"], "nodes": ["no"], "configmaps": ["cm"], "serviceaccounts": ["sa"]}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> JSON:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "details": self.details, "code": self.code}


def _not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found',
                    {"name": name, "group": rt.group, "kind": rt.plural})


def _conflict(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
                    {"name": name, "group": rt.group, "kind": rt.plural})


STALE = "the object has been modified; please apply your changes to the latest version and try again"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any = None
    user: str = ""  # the ServiceAccount's user name of its token; "" for an admin token or none


@dataclass(frozen=True)
class Attributes:
    """What RBAC authorises: Kubernetes' RequestInfo of a resource request."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str

    @property
    def combined(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True)
class Forbidden:
    """A request RBAC refused: who, what, and the message sent."""

    user: str
    attributes: Attributes
    message: str


NAMESPACE_SUBRESOURCES = ("status", "finalize")
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_attributes(method: str, parts: list[str], query: dict[str, str]) -> Attributes | None:
    """Kubernetes' RequestInfo for a resource path; None for a non-resource path (discovery,
    /version)."""
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method == "GET":
        watch = query.get("watch") in ("true", "1")
        verb = "get" if name else ("watch" if watch else "list")
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    else:
        verb = VERBS.get(method, method.lower())
    return Attributes(verb, group, resource, subresource, namespace, name)


def _rule_allows(rule: JSON, attrs: Attributes) -> bool:
    if not isinstance(rule, dict):
        return False
    verbs = rule.get("verbs") or []
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    names = rule.get("resourceNames") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if "*" not in groups and attrs.group not in groups:
        return False
    combined = attrs.combined
    if not any(r == "*" or r == combined
               or (attrs.subresource and r == f"*/{attrs.subresource}")
               or (r.endswith("/*") and attrs.subresource and r[:-2] == attrs.resource)
               for r in resources):
        return False
    return not names or attrs.name in names


def _subject_matches(subject: JSON, user: str, namespace: str, name: str) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        return subject.get("name") == name and subject.get("namespace") == namespace
    if kind == "User":
        return subject.get("name") == user
    if kind == "Group":
        return subject.get("name") in ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                       "system:authenticated")
    return False


def forbidden_message(user: str, attrs: Attributes) -> str:
    """Kubernetes' words for a refused request."""
    what = f'{attrs.resource} "{attrs.name}"' if attrs.name else attrs.resource
    if attrs.group:
        what = f'{attrs.resource}.{attrs.group} "{attrs.name}"' if attrs.name else f"{attrs.resource}.{attrs.group}"
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (f'{what} is forbidden: User "{user}" cannot {attrs.verb} resource "{attrs.combined}" in API group '
            f'"{attrs.group}" {where}')


@dataclass
class _Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, null removes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _selector(text: str) -> Callable[[dict[str, str]], bool]:
    terms: list[Callable[[dict[str, str]], bool]] = []
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        if re.search(r"\s(in|notin)\s*\(", raw) or "(" in raw:
            raise ApiError(400, "BadRequest", f"fake kube-apiserver: set-based label selector {raw!r} "
                                              "is not supported (equality-based only)")
        if "!=" in raw:
            key, value = (s.strip() for s in raw.split("!=", 1))
            terms.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in raw:
            key, value = (s.strip() for s in re.split("==?", raw, maxsplit=1))
            terms.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif raw.startswith("!"):
            absent = raw[1:].strip()
            terms.append(lambda labels, k=absent: k not in labels)
        else:
            terms.append(lambda labels, k=raw: k in labels)
    return lambda labels: all(term(labels) for term in terms)


class _TLSServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that speaks TLS when ``tls`` is set: the handshake runs in the
    connection's own thread, so a client that stalls holds up nobody else."""

    tls: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            conn = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(conn, client_address)
        finally:
            with contextlib.suppress(OSError):
                conn.close()


class FakeKube:
    """The store and the HTTP server. Thread-safe: one lock around every store operation."""

    def __init__(self, *, kube_system_uid: str | None = None) -> None:
        self._lock = threading.RLock()
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._objects: dict[tuple[str, str, str, str], JSON] = {}  # (group, plural, namespace, name)
        self._rv = 0
        self._hooks: list[Callable[[Request], None]] = []
        self.requests: list[Request] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[Any] = set()
        self.base_url = ""
        self.ca_pem = FAKE_CA_PEM
        self.token_fill_delay = 0  # GETs of a service-account-token Secret before it is filled
        self.issued_tokens: set[str] = set()
        self.require_auth = False
        self.admin_tokens: set[str] = set()
        self.subjects: dict[str, str] = {}  # issued token -> system:serviceaccount:<ns>:<name>
        self.enforce_rbac = False
        self.forbidden: list[Forbidden] = []
        self._pending_tokens: dict[tuple[str, str, str, str], int] = {}
        for rt in BUILTINS:
            self._types[(rt.group, rt.version, rt.plural)] = rt
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create("", "v1", "namespaces", {"metadata": {"name": ns}})
        if kube_system_uid is not None:
            with self._lock:
                self._objects[("", "namespaces", "", "kube-system")]["metadata"]["uid"] = kube_system_uid
        self.kube_system_uid: str = self.get("", "v1", "namespaces", "kube-system")["metadata"]["uid"]

    # --- registration and test hooks ------------------------------------------------------

    def register(self, group: str, version: str, plural: str, *, namespaced: bool = True, kind: str | None = None,
                 status_subresource: bool = True) -> ResourceType:
        """Serve a custom resource (what installing its CRD would do)."""
        rt = ResourceType(group, version, plural, kind or plural[:1].upper() + plural[1:].removesuffix("s"),
                          namespaced, status_subresource, True)
        with self._lock:
            self._types[(group, version, plural)] = rt
        return rt

    def add_hook(self, hook: Callable[[Request], None]) -> None:
        self._hooks.append(hook)

    def clear_hooks(self) -> None:
        self._hooks.clear()

    def count(self, method: str, suffix: str = "") -> int:
        """Requests with this method whose path ends with ``suffix``."""
        return sum(1 for r in list(self.requests) if r.method == method and r.path.endswith(suffix))

    def issue_token(self, namespace: str, service_account: str) -> str:
        """A bearer token for the ServiceAccount (which must exist), as the kubelet's projected
        service-account token gives a pod."""
        with self._lock:
            if ("", "serviceaccounts", namespace, service_account) not in self._objects:
                raise KeyError(f"no ServiceAccount {namespace}/{service_account}")
            return self._issue(namespace, service_account)

    def _issue(self, namespace: str, service_account: str) -> str:
        token = f"fake-token-{uuid.uuid4().hex}"
        self.issued_tokens.add(token)
        self.subjects[token] = f"system:serviceaccount:{namespace}:{service_account}"
        return token

    def _type(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self._types.get((group, version, plural))
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rt

    # --- the in-process store API (no HTTP, same rules) -----------------------------------

    def create(self, group: str, version: str, plural: str, obj: JSON, namespace: str | None = None) -> JSON:
        rt = self._type(group, version, plural)
        ns = namespace or obj.get("metadata", {}).get("namespace") or (None if not rt.namespaced else "default")
        return self._create(_Target(rt, ns, None, None), copy.deepcopy(obj))

    def get(self, group: str, version: str, plural: str, name: str, namespace: str | None = None) -> JSON:
        rt = self._type(group, version, plural)
        with self._lock:
            return self._present(rt, self._load(rt, namespace, name))

    def mutate(self, group: str, version: str, plural: str, name: str, change: Callable[[JSON], None],
               namespace: str | None = None) -> JSON:
        """Change a stored object in place as another writer would (status included), bumping
        its resourceVersion (and generation when the spec changed)."""
        rt = self._type(group, version, plural)
        with self._lock:
            old = self._load(rt, namespace, name)
            new = copy.deepcopy(old)
            change(new)
            return self._store_update(rt, old, new)

    # --- store internals (call with the lock held) ----------------------------------------

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[str, str, str, str]:
        return (rt.group, rt.plural, namespace or "", name)

    def _load(self, rt: ResourceType, namespace: str | None, name: str) -> JSON:
        obj = self._objects.get(self._key(rt, namespace, name))
        if obj is None:
            raise _not_found(rt, name)
        return obj

    def _present(self, rt: ResourceType, obj: JSON) -> JSON:
        out = copy.deepcopy(obj)
        out["apiVersion"] = rt.api_version
        out["kind"] = rt.kind
        return out

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _check_body(self, rt: ResourceType, target: _Target, obj: Any) -> JSON:
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", f"{rt.kind} in version \"{rt.version}\" cannot be handled as a "
                                              f"{rt.kind}: the body is not a JSON object")
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        body_ns = meta.get("namespace")
        if rt.namespaced:
            if body_ns and body_ns != target.namespace:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match "
                                                  "the namespace sent on the request")
            meta["namespace"] = target.namespace
        else:
            meta.pop("namespace", None)
        name = meta.get("name")
        if target.name is not None and name and name != target.name:
            raise ApiError(400, "BadRequest", f"the name of the object ({name}) does not match the name on "
                                              f"the URL ({target.name})")
        if target.name is not None and not name:
            meta["name"] = target.name
        for key in ("labels", "annotations"):
            values = meta.get(key)
            if values is not None and (not isinstance(values, dict)
                                       or not all(isinstance(v, str) for v in values.values())):
                raise ApiError(400, "BadRequest", f"{rt.kind} in version \"{rt.version}\" cannot be handled as a "
                                                  f"{rt.kind}: metadata.{key} values must be strings")
        if rt.plural == "leases" and isinstance(obj.get("spec"), dict):
            for key in ("acquireTime", "renewTime"):
                value = obj["spec"].get(key)
                if value is None:
                    continue
                match = MICROTIME_RE.match(value) if isinstance(value, str) else None
                if not match:
                    raise ApiError(400, "BadRequest",
                                   f'Lease in version "v1" cannot be handled as a Lease: parsing time "{value}" '
                                   'as "2006-01-02T15:04:05.000000Z07:00": cannot parse as RFC3339Micro')
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
                obj["spec"][key] = parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        return obj

    def _create(self, target: _Target, obj: Any) -> JSON:
        rt = target.rt
        with self._lock:
            obj = self._check_body(rt, target, obj)
            meta = obj["metadata"]
            name = meta.get("name")
            if not name:
                raise ApiError(422, "Invalid", f"{rt.kind} \"\" is invalid: metadata.name: Required value: "
                                               "name or generateName is required",
                               {"group": rt.group, "kind": rt.kind})
            if not isinstance(name, str) or len(name) > 253 or not NAME_RE.match(name):
                raise ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: '
                                               "a lowercase RFC 1123 subdomain must consist of lower case "
                                               "alphanumeric characters, '-' or '.'",
                               {"name": str(name), "group": rt.group, "kind": rt.kind})
            if meta.get("resourceVersion"):
                raise ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created")
            if rt.namespaced and self._objects.get(("", "namespaces", "", target.namespace or "")) is None:
                raise ApiError(404, "NotFound", f'namespaces "{target.namespace}" not found',
                               {"name": target.namespace or "", "kind": "namespaces"})
            key = self._key(rt, target.namespace, name)
            if key in self._objects:
                raise ApiError(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists',
                               {"name": name, "group": rt.group, "kind": rt.plural})
            if rt.custom and rt.status_subresource:
                obj.pop("status", None)  # create cannot set status
            if rt.plural == "namespaces":
                obj["status"] = {"phase": "Active"}
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta["resourceVersion"] = self._next_rv()
            if rt.custom:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            self._objects[key] = obj
            if rt.plural == "secrets" and not rt.group and obj.get("type") == SA_TOKEN_TYPE:
                self._pending_tokens[key] = self.token_fill_delay
                if not self.token_fill_delay:
                    self._token_controller(key)
            return self._present(rt, obj)

    def _token_controller(self, key: tuple[str, str, str, str]) -> None:
        """Fill a service-account-token Secret once its delay ran out (lock held)."""
        left = self._pending_tokens.get(key)
        if left is None:
            return
        if left > 0:
            self._pending_tokens[key] = left - 1
            return
        obj = self._objects.get(key)
        namespace = key[2]
        sa_name = ((obj or {}).get("metadata", {}).get("annotations") or {}).get(SA_NAME_ANNOTATION)
        sa = self._objects.get(("", "serviceaccounts", namespace, sa_name or ""))
        if obj is None or sa is None:
            return  # the real controller waits for the ServiceAccount too
        del self._pending_tokens[key]
        token = self._issue(namespace, sa_name or "")
        new = copy.deepcopy(obj)
        new["metadata"].setdefault("annotations", {})[SA_UID_ANNOTATION] = sa["metadata"]["uid"]
        new["data"] = {**(obj.get("data") or {}), "token": _b64(token), "ca.crt": _b64(self.ca_pem),
                       "namespace": _b64(namespace)}
        rt = self._types[("", "v1", "secrets")]
        self._store_update(rt, obj, new)

    def _store_update(self, rt: ResourceType, old: JSON, new: JSON) -> JSON:
        meta = new.setdefault("metadata", {})
        old_meta = old["metadata"]
        for key in ("uid", "creationTimestamp", "name", "namespace"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if rt.custom:
            def spec(o: JSON) -> JSON:
                return {k: v for k, v in o.items() if k not in ("metadata", "status", "apiVersion", "kind")}
            meta["generation"] = old_meta.get("generation", 1) + (0 if spec(old) == spec(new) else 1)
        else:
            meta.pop("generation", None)
        meta["resourceVersion"] = self._next_rv()
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        self._objects[self._key(rt, old_meta.get("namespace"), old_meta["name"])] = new
        return self._present(rt, new)

    def _update(self, target: _Target, obj: Any, *, conditional: bool = False) -> JSON:
        rt, name = target.rt, target.name or ""
        with self._lock:
            old = self._load(rt, target.namespace, name)
            obj = self._check_body(rt, target, obj)
            meta = obj["metadata"]
            rv = meta.get("resourceVersion")
            if not rv and rt.custom and not conditional:
                raise ApiError(422, "Invalid", f'{rt.kind}.{rt.group} "{name}" is invalid: '
                                               "metadata.resourceVersion: Invalid value: 0x0: must be specified "
                                               "for an update", {"name": name, "group": rt.group, "kind": rt.kind})
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise _conflict(rt, name, STALE)
            uid = meta.get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise _conflict(rt, name, f"Precondition failed: UID in precondition: {uid}, "
                                          f"UID in object meta: {old['metadata']['uid']}")
            if target.subresource == "status":
                new = copy.deepcopy(old)
                if "status" in obj:
                    new["status"] = obj["status"]
                else:
                    new.pop("status", None)
            else:
                new = obj
                if rt.status_subresource:
                    if "status" in old:
                        new["status"] = copy.deepcopy(old["status"])
                    else:
                        new.pop("status", None)
            return self._store_update(rt, old, new)

    def _patch(self, target: _Target, patch: Any, content_type: str) -> JSON:
        rt, name = target.rt, target.name or ""
        media = content_type.split(";")[0].strip().lower()
        allowed = PATCH_TYPES_CUSTOM if rt.custom else PATCH_TYPES_BUILTIN
        if media not in (MERGE_PATCH, STRATEGIC_PATCH) or (media == STRATEGIC_PATCH and rt.custom):
            if media in allowed.split(", "):
                raise ApiError(415, "UnsupportedMediaType", f"fake kube-apiserver: {media} is not implemented "
                                                            "(merge patches only)")
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                                        f"accepted media types include: {allowed}")
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
        with self._lock:
            old = self._load(rt, target.namespace, name)
            merged = merge_patch(old, patch)
            if not isinstance(merged.get("metadata"), dict):
                merged["metadata"] = {}
            # The patch's resourceVersion (if any) is a precondition; otherwise the current one.
            merged["metadata"]["resourceVersion"] = (patch.get("metadata") or {}).get(
                "resourceVersion", old["metadata"]["resourceVersion"])
            return self._update(target, merged, conditional=True)

    def _delete(self, target: _Target, options: Any) -> JSON:
        rt, name = target.rt, target.name or ""
        with self._lock:
            old = self._load(rt, target.namespace, name)
            pre = (options.get("preconditions") if isinstance(options, dict) else None) or {}
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise _conflict(rt, name, f"Precondition failed: ResourceVersion in precondition: "
                                          f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                          f"{old['metadata']['resourceVersion']}")
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise _conflict(rt, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                          f"UID in object meta: {old['metadata']['uid']}")
            del self._objects[self._key(rt, target.namespace, name)]
            if rt.plural == "namespaces" and not rt.group:
                for key in [k for k in self._objects if k[2] == name]:
                    del self._objects[key]
            self._next_rv()
            if rt.custom or rt.plural == "namespaces":
                return self._present(rt, old)  # these return the deleted object
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": old["metadata"]["uid"]}}

    def _list(self, target: _Target, query: dict[str, str]) -> JSON:
        rt = target.rt
        matches = _selector(query.get("labelSelector", ""))
        with self._lock:
            items = [self._present(rt, obj) for (group, plural, ns, _), obj in sorted(self._objects.items())
                     if group == rt.group and plural == rt.plural
                     and (target.namespace is None or ns == target.namespace)
                     and matches(obj["metadata"].get("labels") or {})]
            return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                    "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    # --- authorisation (opt-in RBAC) ------------------------------------------------------

    def authorized(self, user: str, attrs: Attributes) -> bool:
        """Whether the RBAC objects stored grant ``user`` (a ServiceAccount's user name) the request."""
        _, _, sa_namespace, sa_name = [*user.split(":", 3), "", "", "", ""][:4]
        with self._lock:
            objects = dict(self._objects)
        rbac = "rbac.authorization.k8s.io"

        def rules(kind: str, name: str, namespace: str) -> list[Any]:
            plural = "clusterroles" if kind == "ClusterRole" else "roles"
            role = objects.get((rbac, plural, "" if kind == "ClusterRole" else namespace, name))
            return list((role or {}).get("rules") or [])

        for (group, plural, namespace, _), binding in objects.items():
            if group != rbac or plural not in ("clusterrolebindings", "rolebindings"):
                continue
            if plural == "rolebindings" and namespace != attrs.namespace:
                continue
            if not any(_subject_matches(s, user, sa_namespace, sa_name) for s in binding.get("subjects") or []
                       if isinstance(s, dict)):
                continue
            ref = binding.get("roleRef") or {}
            if plural == "clusterrolebindings" and ref.get("kind") != "ClusterRole":
                continue
            if any(_rule_allows(rule, attrs) for rule in rules(str(ref.get("kind")), str(ref.get("name")), namespace)):
                return True
        return False

    def _authorize(self, token: str, method: str, parts: list[str], query: dict[str, str]) -> None:
        user = self.subjects.get(token)
        if user is None:
            return  # an admin token: system:masters
        attrs = request_attributes(method, parts, query)
        if attrs is None or self.authorized(user, attrs):
            return  # discovery and /version: system:discovery
        message = forbidden_message(user, attrs)
        self.forbidden.append(Forbidden(user, attrs, message))
        raise ApiError(403, "Forbidden", message, {"name": attrs.name, "group": attrs.group,
                                                   "kind": attrs.resource} if attrs.name else
                       {"group": attrs.group, "kind": attrs.resource})

    # --- HTTP routing ---------------------------------------------------------------------

    def _route(self, parts: list[str]) -> _Target | None:
        """The target of a resource path, or None for a discovery path."""
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return None
        ns: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and rest[2] in ("status", "finalize")):
            ns, rest = rest[1], rest[2:]
        rt = self._type(group, version, rest[0])
        if len(rest) > 3 or (ns is not None and not rt.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if rt.namespaced and ns is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub is not None and (sub != "status" or not rt.status_subresource):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _Target(rt, ns, name, sub)

    def _discovery(self, parts: list[str]) -> JSON:
        with self._lock:
            types = list(self._types.values())
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if parts == ["apis"]:
            groups: dict[str, list[str]] = {}
            for rt in types:
                if rt.group and rt.version not in groups.setdefault(rt.group, []):
                    groups[rt.group].append(rt.version)
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                for g, vs in sorted(groups.items())]}
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        resources: list[JSON] = []
        for rt in types:
            if (rt.group, rt.version) != (group, version):
                continue
            resources.append({"name": rt.plural, "singularName": rt.kind.lower(), "namespaced": rt.namespaced,
                              "kind": rt.kind, "verbs": ["create", "delete", "get", "list", "patch", "update"],
                              "shortNames": SHORT_NAMES.get(rt.plural, []) if not rt.custom else []})
            if rt.status_subresource:
                resources.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                                  "kind": rt.kind, "verbs": ["get", "patch", "update"]})
        if not resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}

    def handle(self, method: str, raw_path: str, content_type: str, raw_body: bytes,
               authorization: str = "") -> tuple[int, JSON]:
        url = urlsplit(raw_path)
        token = authorization[7:].strip() if authorization.lower().startswith("bearer ") else ""
        if (self.require_auth or self.enforce_rbac) and token not in self.issued_tokens | self.admin_tokens:
            return 401, ApiError(401, "Unauthorized", "Unauthorized").status()
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body: Any = None
        try:
            if self.enforce_rbac:
                self._authorize(token, method, [p for p in url.path.split("/") if p], query)
            if raw_body:
                try:
                    body = json.loads(raw_body)
                except ValueError as exc:
                    raise ApiError(400, "BadRequest", f"fake kube-apiserver: the body is not JSON: {exc}") from exc
            request = Request(method, url.path, query, content_type, body, self.subjects.get(token, ""))
            self.requests.append(request)
            for hook in list(self._hooks):
                hook(request)
            parts = [p for p in url.path.split("/") if p]
            if method == "GET" and parts == ["version"]:
                return 200, VERSION
            if query.get("watch") in ("true", "1"):
                raise ApiError(405, "MethodNotAllowed", "fake kube-apiserver: watch is not supported")
            for unsupported in ("fieldSelector", "dryRun"):
                if query.get(unsupported):
                    raise ApiError(400, "BadRequest", f"fake kube-apiserver: {unsupported} is not supported")
            target = None if parts in (["api"], ["apis"]) else self._route(parts)
            if target is None:
                if method != "GET":
                    raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method ({method})")
                return 200, self._discovery(parts)
            return self._dispatch(method, target, query, content_type, body)
        except ApiError as exc:
            return exc.code, exc.status()

    def _dispatch(self, method: str, target: _Target, query: dict[str, str], content_type: str,
                  body: Any) -> tuple[int, JSON]:
        not_allowed = ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the "
                                                        f"requested resource ({method})")
        if target.name is None:
            if method == "GET":
                return 200, self._list(target, query)
            if method == "POST" and (target.namespace is not None or not target.rt.namespaced):
                return 201, self._create(target, body)
            raise not_allowed
        if method == "GET":
            with self._lock:
                if target.rt.plural == "secrets" and not target.rt.group:
                    self._token_controller(self._key(target.rt, target.namespace, target.name))
                return 200, self._present(target.rt, self._load(target.rt, target.namespace, target.name))
        if method == "PUT":
            return 200, self._update(target, body)
        if method == "PATCH":
            return 200, self._patch(target, body, content_type)
        if method == "DELETE" and target.subresource is None:
            return 200, self._delete(target, body)
        raise not_allowed

    # --- server lifecycle -------------------------------------------------------------------

    def start(self, port: int = 0, host: str = "127.0.0.1", *, certfile: str | None = None,
              keyfile: str | None = None) -> str:
        """Serve on ``host:port`` (0: a free port); HTTPS with ``certfile``/``keyfile`` (PEM)."""
        fake = self
        tls: ssl.SSLContext | None = None
        if certfile:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(certfile, keyfile)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
            timeout = 60

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every keep-alive request
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                fake._connections.add(self.connection)

            def finish(self) -> None:
                fake._connections.discard(self.connection)
                super().finish()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                code, payload = fake.handle(self.command, self.path, self.headers.get("Content-Type") or "", raw,
                                            self.headers.get("Authorization") or "")
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return None

        server = _TLSServer((host, port), Handler)
        server.daemon_threads = True
        server.tls = tls
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="fake-kube-apiserver",
                                        daemon=True)
        self._thread.start()
        self.base_url = f"{'https' if tls else 'http'}://{host}:{server.server_address[1]}"
        return self.base_url

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # idle keep-alive handlers return at once
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeKube:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.kube_apiserver",
                                     description="A fake Kubernetes API server for tests (no auth, in memory).")
    parser.add_argument("port", type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--crd", action="append", default=[], metavar="GROUP/VERSION/PLURAL[:Kind]",
                        help="serve another namespaced custom resource")
    args = parser.parse_args(argv)
    fake = FakeKube()
    fake.register("gateway.networking.k8s.io", "v1", "gateways", kind="Gateway")
    fake.register("kuadrant.io", "v1alpha1", "dnsrecords", kind="DNSRecord")
    for spec in args.crd:
        path, _, kind = spec.partition(":")
        group, version, plural = path.split("/")
        fake.register(group, version, plural, kind=kind or None)
    url = fake.start(args.port, args.host)
    print(f"ready {url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
