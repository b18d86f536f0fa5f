"""The `azure` provider: Azure DNS through ``azure-mgmt-dns``.

- ``read`` lists the zone's record sets (``GET .../dnsZones/{zone}/recordsets``, paged by
  ``nextLink``), converts them and remembers each record set's **ETag** together with the
  content it was read with (a per-zone cache inside the provider: `RecordSet` has no etag).
  With ``names`` it lists the whole zone too and keeps only those names.
- ``apply`` writes **one record set per request** (Azure has no multi-record transaction),
  each conditional (a write never overwrites what it did not read): a create is ``PUT`` with ``If-None-Match: *``; an
  update ``PUT`` and a delete ``DELETE`` with ``If-Match: <etag>``.  The etag is the one read
  with exactly ``Change.old``; when the cache holds no such etag (another read came between,
  or the record was never read) the provider ``GET``s the record set, compares its content
  with ``Change.old`` and uses that etag only when they are equal.  A ``412 Precondition
  Failed`` refuses the group (re-read, re-plan).  A group of a record and its ownership TXT is
  two requests in the planner's order (TXT first on create, data first on delete): when the
  second is refused the first stays applied — reported in ``applied`` with the group in
  ``refused``; the next plan sees the landed half and recovers (docs/providers/azure.md).
- Azure DNS has no set identifiers: geo and weighted answers need Traffic Manager, which gitdns
  does not drive.  Capabilities say ``Routing.NONE``; a change with routing fails its group.

Conversion (`to_native`, `from_native`) and batching (`batches`) are pure functions over the
ARM JSON shape; the service goes through `AzureDnsApi`, a five-call protocol that
`SdkClient` implements with ``DnsManagementClient`` (imported only when built) and tests drive
over HTTP against a fake.  The SDK's own retry policy is off (``retry_total=0``): the agent
owns retries and budgets; this provider only reports throttling.
"""

from __future__ import annotations

import email.utils
import io
import json
import logging
import re
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import capabilities_of
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet, ZoneSnapshot, in_zone, normalize_name
from gitdns.core.store import group_changes
from gitdns.errors import AuthError, ConfigError, RetryableError, ThrottledError, UnreachableError, UnsupportedError
from gitdns.providers.base import ApplyResult, ZoneInfo
from gitdns.providers.credentials import Credentials, load_credentials
from gitdns.providers.memory import filter_names, invalid_groups, snapshot_names

log = logging.getLogger(__name__)

CAPABILITIES = capabilities_of("azure")  # declared in gitdns.core.providertypes
RECORD_TYPES = CAPABILITIES.record_types
DEFAULT_ENDPOINT = "https://management.azure.com"
TXT_CHUNK = 255
ROUTING_REFUSED = ("azure: the loadbalanced strategy needs Traffic Manager, which gitdns does not drive yet; "
                   "use the flattened form or another provider")
ARRAY_KEYS = {"A": "ARecords", "AAAA": "AAAARecords", "TXT": "TXTRecords", "MX": "MXRecords",
              "SRV": "SRVRecords", "CAA": "caaRecords", "NS": "NSRecords"}


# --- the SDK boundary ---------------------------------------------------------------------------


class ApiError(Exception):
    """A non-success HTTP answer, already stripped of request ids."""

    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}".rstrip(": "))
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after


class AzureDnsApi(Protocol):
    """The only calls the provider makes; record sets in their ARM JSON shape.  Raises
    `ApiError` for an HTTP error answer and `UnreachableError` when the service cannot be
    reached.  A write always carries a precondition: there is no unconditional call."""

    def list_zones(self) -> list[str]: ...

    def list_record_sets(self, zone: str) -> list[dict[str, Any]]: ...

    def get(self, zone: str, relative: str, rtype: str) -> dict[str, Any] | None:
        """The record set, or None when it does not exist (404)."""
        ...

    def put(self, zone: str, relative: str, rtype: str, body: Mapping[str, Any], *,
            if_match: str | None = None, if_none_match: str | None = None) -> dict[str, Any]: ...

    def delete(self, zone: str, relative: str, rtype: str, *, if_match: str) -> None: ...


_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_NOISE = re.compile(r"\s*[(\[]?\b(?:request|correlation|activity|tracking)[ -]?id\b[^.;)\]]*[)\]]?\.?", re.I)
_TIMESTAMP = re.compile(r"\s*[(\[]?\btimestamp\b[^.;)\]]*[)\]]?\.?", re.I)


def clean_message(text: str) -> str:
    """An error text without request/correlation ids, GUIDs or timestamps (so a status that
    quotes it does not churn), on one line."""
    text = _NOISE.sub("", text)
    text = _TIMESTAMP.sub("", text)
    text = _GUID.sub("<id>", text)
    return " ".join(text.split())


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class SdkClient:
    """`AzureDnsApi` over ``azure.mgmt.dns.DnsManagementClient`` (retries off)."""

    def __init__(self, credential: Any, subscription_id: str, resource_group: str,
                 endpoint: str = DEFAULT_ENDPOINT, timeout: float = 30.0) -> None:
        from azure.mgmt.dns import DnsManagementClient

        self.resource_group = resource_group
        self.endpoint = endpoint.rstrip("/")
        self._client = DnsManagementClient(credential, subscription_id, base_url=self.endpoint, retry_total=0,
                                           connection_timeout=timeout, read_timeout=timeout)
        # a plain-http endpoint (the test fake) must be allowed to carry the bearer token
        self._call: dict[str, Any] = {} if self.endpoint.startswith("https://") else {"enforce_https": False}

    def _error(self, exc: Exception, what: str) -> Exception:
        from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

        if isinstance(exc, HttpResponseError) and exc.status_code is not None:
            code, message = "", str(exc.reason or "")
            error = getattr(exc, "error", None)
            if error is not None:
                code, message = str(error.code or ""), str(error.message or message)
            response: Any = exc.response
            headers = response.headers if response is not None else {}
            return ApiError(int(exc.status_code), code, clean_message(message), retry_after(headers.get("Retry-After")))
        if isinstance(exc, ServiceRequestError | ServiceResponseError):
            return UnreachableError(f"azure: {what}: cannot reach {self.endpoint} ({type(exc).__name__})")
        return exc

    @staticmethod
    def _json(model: Any) -> dict[str, Any]:
        out: dict[str, Any] = model.serialize(keep_readonly=True)
        return out

    def list_zones(self) -> list[str]:
        try:
            return [str(z.name) for z in self._client.zones.list_by_resource_group(self.resource_group, **self._call)]
        except Exception as exc:
            raise self._error(exc, "list zones") from None

    def list_record_sets(self, zone: str) -> list[dict[str, Any]]:
        try:
            pages = self._client.record_sets.list_by_dns_zone(self.resource_group, zone, **self._call)
            return [self._json(rs) for rs in pages]
        except Exception as exc:
            raise self._error(exc, f"list {zone}") from None

    def get(self, zone: str, relative: str, rtype: str) -> dict[str, Any] | None:
        try:
            return self._json(self._client.record_sets.get(self.resource_group, zone, relative, rtype, **self._call))
        except Exception as exc:
            err = self._error(exc, f"get {relative} {rtype}")
            if isinstance(err, ApiError) and err.status == 404:
                return None
            raise err from None

    def put(self, zone: str, relative: str, rtype: str, body: Mapping[str, Any], *,
            if_match: str | None = None, if_none_match: str | None = None) -> dict[str, Any]:
        if not if_match and if_none_match != "*":
            raise ValueError("azure: refusing an unconditional PUT")
        try:
            result = self._client.record_sets.create_or_update(
                self.resource_group, zone, relative, rtype, io.BytesIO(json.dumps(body).encode()),
                if_match=if_match, if_none_match=if_none_match, content_type="application/json", **self._call)
        except Exception as exc:
            raise self._error(exc, f"put {relative} {rtype}") from None
        return self._json(result)

    def delete(self, zone: str, relative: str, rtype: str, *, if_match: str) -> None:
        if not if_match:
            raise ValueError("azure: refusing an unconditional DELETE")
        try:
            self._client.record_sets.delete(self.resource_group, zone, relative, rtype, if_match=if_match,
                                            **self._call)
        except Exception as exc:
            raise self._error(exc, f"delete {relative} {rtype}") from None


def error_for(err: ApiError, what: str) -> Exception:
    """The gitdns error for an answer that concerns the service rather than one group."""
    text = f"azure: {what}: HTTP {err.status}" + (f" {err.code}" if err.code else "") + (
        f": {err.message}" if err.message else "")
    if err.status == 429:
        return ThrottledError(text, retry_after=err.retry_after)
    if err.status in (401, 403):
        return AuthError(text + " (check the service principal's role on the zone's resource group)")
    if err.status >= 500 or err.status in (408, 0):
        return RetryableError(text)
    return ConfigError(text)


# --- conversion (pure) ---------------------------------------------------------------------------


def relative_name(name: str, zone: str) -> str:
    """The Azure record-set name of an absolute gitdns name: ``@`` for the apex."""
    name, zone = normalize_name(name), normalize_name(zone)
    return "@" if name == zone else name[: -len(zone) - 1]


def absolute_name(relative: str, zone: str) -> str:
    relative = normalize_name(relative)
    return normalize_name(zone) if relative in ("@", "") else f"{relative}.{normalize_name(zone)}"


def _dotless(target: str) -> str:
    return target[:-1] if target.endswith(".") else target


def _txt_chunks(value: str) -> list[str]:
    raw = value.encode("utf-8")
    return [raw[i:i + TXT_CHUNK].decode("utf-8", "ignore") for i in range(0, len(raw), TXT_CHUNK)] or [""]


def _caa_value(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


def _native_value(rtype: str, value: str) -> dict[str, Any]:
    """One value as its Azure record object; ValueError when the rdata text does not parse."""
    fields = value.split()
    if rtype == "A":
        return {"ipv4Address": value}
    if rtype == "AAAA":
        return {"ipv6Address": value}
    if rtype == "TXT":
        return {"value": _txt_chunks(value)}
    if rtype == "NS":
        return {"nsdname": _dotless(value)}
    if rtype == "MX" and len(fields) == 2:
        return {"preference": int(fields[0]), "exchange": _dotless(fields[1])}
    if rtype == "SRV" and len(fields) == 4:
        return {"priority": int(fields[0]), "weight": int(fields[1]), "port": int(fields[2]),
                "target": _dotless(fields[3])}
    if rtype == "CAA" and len(fields) >= 3:
        return {"flags": int(fields[0]), "tag": fields[1], "value": _caa_value(value.split(None, 2)[2])}
    raise ValueError(f"{value!r} is not valid {rtype} rdata")


def to_native(rec: RecordSet, zone: str, metadata: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """A record set as ``(relative name, ARM request body)``.  MX/SRV targets and CNAME/NS
    names go without their trailing dot.  Raises ValueError for a value that does not parse
    and for routing (set identifier, weight, geo), which Azure DNS cannot hold."""
    if rec.set_id or rec.weight is not None or rec.geo is not None:
        raise ValueError(ROUTING_REFUSED)
    props: dict[str, Any] = {"TTL": rec.ttl}
    if metadata:
        props["metadata"] = dict(metadata)
    if rec.type == "CNAME":
        if len(rec.values) != 1:
            raise ValueError(f"{rec.key}: a CNAME holds exactly one value")
        props["CNAMERecord"] = {"cname": _dotless(rec.values[0])}
    elif rec.type in ARRAY_KEYS:
        props[ARRAY_KEYS[rec.type]] = [_native_value(rec.type, v) for v in rec.values]
    else:
        raise ValueError(f"{rec.key}: record type {rec.type} is not supported by azure")
    return relative_name(rec.name, zone), {"properties": props}


def _absolute(target: Any) -> str:
    return normalize_name(str(target)) + "."


def _values(rtype: str, props: Mapping[str, Any]) -> list[str]:
    if rtype == "CNAME":
        cname = (props.get("CNAMERecord") or {}).get("cname")
        return [normalize_name(str(cname))] if cname else []
    items: list[dict[str, Any]] = props.get(ARRAY_KEYS[rtype]) or []
    if rtype == "A":
        return [str(i["ipv4Address"]) for i in items]
    if rtype == "AAAA":
        return [str(i["ipv6Address"]) for i in items]
    if rtype == "TXT":
        return ["".join(i.get("value") or []) for i in items]
    if rtype == "NS":
        return [normalize_name(str(i["nsdname"])) for i in items]
    if rtype == "MX":
        return [f"{i['preference']} {_absolute(i['exchange'])}" for i in items]
    if rtype == "SRV":
        return [f"{i['priority']} {i['weight']} {i['port']} {_absolute(i['target'])}" for i in items]
    return [f"{i['flags']} {i['tag']} \"{i['value']}\"" for i in items]  # CAA


def native_type(body: Mapping[str, Any]) -> str:
    """``Microsoft.Network/dnszones/A`` -> ``A``."""
    return str(body.get("type", "")).rsplit("/", 1)[-1].upper()


def from_native(body: Mapping[str, Any], zone: str) -> RecordSet | None:
    """An ARM record set as a record set; None for SOA, PTR and other types gitdns does not
    manage, and for a record set with no values (an empty set Azure keeps, or an alias)."""
    rtype = native_type(body)
    if rtype not in RECORD_TYPES:
        return None
    props: Mapping[str, Any] = body.get("properties") or {}
    values = _values(rtype, props)
    if not values:
        return None
    return RecordSet(absolute_name(str(body.get("name", "@")), zone), rtype, int(props.get("TTL") or 0),
                     tuple(values))


def unsupported(change: Change) -> str:
    """Why a change cannot be written to Azure DNS ("" when it can)."""
    for rec in (change.old, change.new):
        if rec is None:
            continue
        if rec.set_id or rec.weight is not None or rec.geo is not None:
            return ROUTING_REFUSED
        if rec.type not in RECORD_TYPES:
            return f"{rec.key}: record type {rec.type} is not supported by azure"
    return ""


def batches(changes: Sequence[Change]) -> list[tuple[RecordKey, list[Change]]]:
    """One batch per change group, in first-seen order, each in the planner's order (TXT
    before data on create, data before TXT on delete): every change is one request."""
    return list(group_changes(changes).items())


# --- the provider ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """A record set as last read or written: its content, ETag and metadata."""

    record: RecordSet
    etag: str
    metadata: Mapping[str, str] | None = None


class Stale(Exception):
    """The group was stale: re-read and re-plan."""


class GroupFailed(Exception):
    """This group cannot be written (bad value, conflict): the others go on."""


@dataclass(slots=True)
class _Outcome:
    applied: list[Change] = field(default_factory=list)
    refused: list[tuple[RecordKey, str]] = field(default_factory=list)
    failed: list[tuple[RecordKey, str]] = field(default_factory=list)


class AzureProvider:
    """Azure DNS zones of one resource group (the Azure zone name is the gitdns domain)."""

    name = "azure"
    capabilities = CAPABILITIES

    def __init__(self, domain: str, client: AzureDnsApi, account: str = "azure") -> None:
        self.domain = normalize_name(domain)
        self.account = account
        self._client = client
        self._lock = threading.Lock()
        self._seen: dict[str, dict[RecordKey, Seen]] = {}

    # --- reads ---------------------------------------------------------------------------------
    def zones(self) -> list[ZoneInfo]:
        return [ZoneInfo(id=z, domain=normalize_name(z)) for z in sorted(self._client.list_zones())]

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        zone = normalize_name(zone)
        try:
            natives = self._client.list_record_sets(zone)
        except ApiError as err:
            if err.status == 404:
                raise ConfigError(f"azure: zone {zone} not found in the resource group "
                                  f"({err.code or 'NotFound'})") from None
            raise error_for(err, f"list {zone}") from None
        seen = self._remember(zone, natives)
        wanted = snapshot_names(names)
        with self._lock:
            cache = self._seen.setdefault(zone, {})
            if wanted is None:
                cache.clear()
            else:
                for key in [k for k in cache if k.name in wanted]:
                    del cache[key]
            cache.update({k: s for k, s in seen.items() if wanted is None or k.name in wanted})
        return ZoneSnapshot(zone=zone, records=filter_names((s.record for s in seen.values()), names),
                            complete=True, names=wanted)

    @staticmethod
    def _remember(zone: str, natives: Iterable[Mapping[str, Any]]) -> dict[RecordKey, Seen]:
        seen: dict[RecordKey, Seen] = {}
        for body in natives:
            rec = from_native(body, zone)
            if rec is not None and in_zone(rec.name, zone):
                meta = (body.get("properties") or {}).get("metadata")
                seen[rec.key] = Seen(rec, str(body.get("etag") or ""), dict(meta) if meta else None)
        return seen

    def etag_of(self, zone: str, key: RecordKey) -> str:
        """The cached ETag of a record set ("" when none): for tests and diagnostics."""
        with self._lock:
            entry = self._seen.get(normalize_name(zone), {}).get(key)
        return entry.etag if entry else ""

    # --- writes --------------------------------------------------------------------------------
    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        """``guards`` are not supported (capabilities say so) and are ignored."""
        zone = normalize_name(zone)
        bad = invalid_groups(zone, changes)
        out = _Outcome()
        for group, members in batches(changes):
            why = bad.get(group) or next((w for w in map(unsupported, members) if w), "")
            if why:
                out.failed.append((group, why))
                continue
            try:
                self._preflight(zone, members)
            except Stale as exc:
                out.refused.append((group, str(exc)))
                continue
            for change in members:
                try:
                    self._write(zone, change)
                except Stale as exc:
                    out.refused.append((group, str(exc)))
                    break
                except GroupFailed as exc:
                    out.failed.append((group, str(exc)))
                    break
                out.applied.append(change)  # a landed first half stays reported as applied
        if out.refused or out.failed:
            log.info("apply: zone=%s applied=%d refused=%d failed=%d",
                     zone, len(out.applied), len(out.refused), len(out.failed))
        return ApplyResult(applied=tuple(out.applied), refused=tuple(out.refused), failed=tuple(out.failed))

    def _preflight(self, zone: str, members: Sequence[Change]) -> None:
        """Before the first write of a group, check the later members against the service
        (a GET each: absent for a create, exactly ``Change.old`` otherwise), so a group that is
        already stale is refused whole; the remaining window is between this GET and the
        member's own conditional write."""
        touched = {members[0].key} if members else set()
        for change in members[1:]:
            if change.key in touched:
                continue
            touched.add(change.key)
            if change.action is Action.CREATE:
                try:
                    body = self._client.get(zone, relative_name(change.key.name, zone), change.key.type)
                except ApiError as err:
                    raise error_for(err, f"read {change.key}") from None
                if body is not None:
                    raise Stale(f"{change.key} already exists")
            else:
                assert change.old is not None
                self._current(zone, change.old, fresh=True)

    def _write(self, zone: str, change: Change) -> None:
        key = change.key
        rel = relative_name(key.name, zone)
        try:
            if change.action is Action.CREATE:
                assert change.new is not None
                self._put(zone, change.new, None, if_none_match="*")
                return
            assert change.old is not None
            seen = self._current(zone, change.old)
            if change.action is Action.UPDATE:
                assert change.new is not None
                self._put(zone, change.new, seen.metadata, if_match=seen.etag)
            else:
                self._client.delete(zone, rel, key.type, if_match=seen.etag)
                self._forget(zone, key)
        except ApiError as err:
            self._forget(zone, key)
            if err.status == 412:
                verb = "already exists" if change.action is Action.CREATE else "changed since it was read"
                raise Stale(f"{key} {verb} (ETag precondition failed)") from None
            if err.status in (400, 404, 409, 422):
                raise GroupFailed(f"{key}: azure refused the write: HTTP {err.status}"
                                  + (f" {err.code}" if err.code else "") + (f": {err.message}" if err.message else "")
                                  ) from None
            raise error_for(err, f"write {key}") from None

    def _put(self, zone: str, rec: RecordSet, metadata: Mapping[str, str] | None, **cond: str) -> None:
        try:
            rel, body = to_native(rec, zone, metadata)
        except ValueError as exc:
            raise GroupFailed(f"{rec.key}: {exc}") from None
        answer = self._client.put(zone, rel, rec.type, body, **cond)
        written = from_native(answer, zone)
        with self._lock:
            cache = self._seen.setdefault(zone, {})
            if written is not None and answer.get("etag"):
                meta = (answer.get("properties") or {}).get("metadata")
                cache[rec.key] = Seen(written, str(answer["etag"]), dict(meta) if meta else None)
            else:
                cache.pop(rec.key, None)

    def _current(self, zone: str, old: RecordSet, fresh: bool = False) -> Seen:
        """The ETag that goes with exactly ``old``: the cached one when it was read with that
        content (unless ``fresh``), else a GET whose content must equal ``old``."""
        with self._lock:
            cached = self._seen.get(zone, {}).get(old.key)
        if not fresh and cached is not None and cached.record == old and cached.etag:
            return cached
        try:
            body = self._client.get(zone, relative_name(old.name, zone), old.type)
        except ApiError as err:
            raise error_for(err, f"read {old.key}") from None
        rec = from_native(body, zone) if body is not None else None
        if body is None or rec is None:
            self._forget(zone, old.key)
            raise Stale(f"{old.key} no longer exists")
        meta = (body.get("properties") or {}).get("metadata")
        seen = Seen(rec, str(body.get("etag") or ""), dict(meta) if meta else None)
        with self._lock:
            self._seen.setdefault(zone, {})[old.key] = seen
        if rec != old or not seen.etag:
            raise Stale(f"{old.key} changed since it was read")
        return seen

    def _forget(self, zone: str, key: RecordKey) -> None:
        with self._lock:
            self._seen.get(zone, {}).pop(key, None)


# --- construction from a Zone's spec.provider --------------------------------------------------------


def azure_json(creds: Mapping[str, str]) -> dict[str, str]:
    """Kuadrant's ``azure.json`` (a key holding JSON, as in a ``kuadrant.io/azure`` Secret),
    or the credentials themselves when they are that JSON's keys already."""
    raw = creds.get("azure.json")
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise ConfigError("spec.provider.credentials: azure.json is not valid JSON") from None
        if not isinstance(parsed, dict):
            raise ConfigError("spec.provider.credentials: azure.json does not hold a JSON object")
        return {str(k): str(v) for k, v in parsed.items() if v is not None}
    return dict(creds)


def make_credential(cfg: Mapping[str, str]) -> Any:
    """``ClientSecretCredential`` when ``tenantId``, ``aadClientId`` and ``aadClientSecret`` are
    given; else ``DefaultAzureCredential`` (workload or managed identity, environment, CLI)."""
    from azure.identity import ClientSecretCredential, DefaultAzureCredential

    tenant, client_id, secret = cfg.get("tenantId"), cfg.get("aadClientId"), cfg.get("aadClientSecret")
    if tenant and client_id and secret:
        return ClientSecretCredential(tenant, client_id, secret)
    identity = cfg.get("userAssignedIdentityID") or None
    return DefaultAzureCredential(managed_identity_client_id=identity)


def _true(raw: str | None) -> bool:
    return (raw or "").strip().lower() in ("true", "yes", "1", "on")


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path) -> AzureProvider:
    """Settings: ``subscriptionId`` and ``resourceGroup`` (else taken from ``azure.json``),
    ``endpoint`` (the ARM endpoint; default https://management.azure.com), ``trafficManager``
    (refused: not supported yet).  Credentials: Kuadrant's ``azure.json``."""
    if _true(ref.setting("trafficManager")):
        raise UnsupportedError(f"spec.provider.settings.trafficManager: zone {zone_domain}: gitdns does not "
                               "drive Azure Traffic Manager yet; remove the setting and use the simple strategy "
                               "or the flattened loadbalanced form, or another provider")
    creds: Credentials = load_credentials(ref.credentials, provider="azure")
    cfg = azure_json(creds)
    subscription = ref.setting("subscriptionId") or cfg.get("subscriptionId")
    group = ref.setting("resourceGroup") or cfg.get("resourceGroup")
    for key, value in (("subscriptionId", subscription), ("resourceGroup", group)):
        if not value:
            raise ConfigError(f"spec.provider.settings.{key}: required for an azure zone ({zone_domain}); "
                              f"give it as a setting or in the credentials' azure.json")
    assert subscription and group
    endpoint = ref.setting("endpoint") or DEFAULT_ENDPOINT
    if not endpoint.startswith(("https://", "http://")):
        raise ConfigError(f"spec.provider.settings.endpoint: {endpoint!r} is not an http(s) URL (zone {zone_domain})")
    client = SdkClient(make_credential(cfg), subscription, group, endpoint)
    return AzureProvider(zone_domain, client, account=f"azure:{subscription}")
