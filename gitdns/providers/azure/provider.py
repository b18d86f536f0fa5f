"""The `azure` provider: Azure DNS through ``azure-mgmt-dns``.

- ``read`` lists the zone's record sets (``GET .../dnsZones/{zone}/recordsets``, paged by
  ``nextLink``), converts them and remembers each record set's **ETag** together with the
  content it was read with (a per-zone cache inside the provider: `RecordSet` has no etag).
  Each page is one request through the agent's gate (`gitdns.providers.base.send`), as each
  write is.  With ``names`` it GETs the record sets that can matter at each name (`probes`)
  from the zone's GET quota (1,000 a minute) instead of listing (60 a minute).
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
ARM JSON shape, in `gitdns.providers.azure.native`; the service goes through `AzureDnsApi`
(`gitdns.providers.azure.api`), a five-call protocol that `SdkClient` implements with
``DnsManagementClient`` (imported only when built) and tests drive over HTTP against a fake.
The SDK's own retry policy is off (``retry_total=0``): the agent owns retries and budgets;
this provider only reports throttling.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gitdns.core.model import ProviderRef
from gitdns.core.names import RESERVED_PREFIXES
from gitdns.core.providertypes import PROVIDER_TYPES, capabilities_of, missing_settings
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet, ZoneSnapshot, in_zone, normalize_name
from gitdns.core.registry import parse_txt_name
from gitdns.errors import ConfigError, ThrottledError
from gitdns.providers.azure.api import DEFAULT_ENDPOINT, ApiError, AzureDnsApi, SdkClient, error_for
from gitdns.providers.azure.native import (
    RECORD_TYPES,
    absolute_name,
    batches,
    from_native,
    native_type,
    relative_name,
    to_native,
    unsupported,
)
from gitdns.providers.base import ApplyOutcome, ApplyResult, ZoneInfo, send
from gitdns.providers.credentials import Credentials, load_credentials
from gitdns.providers.fences import STRICT, Fences, refuse_static
from gitdns.providers.memory import filter_names, invalid_groups, snapshot_names

log = logging.getLogger(__name__)
T = TypeVar("T")

CAPABILITIES = capabilities_of("azure")  # declared in gitdns.core.providertypes


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


class AzureProvider:
    """Azure DNS zones of one resource group (the Azure zone name is the gitdns domain)."""

    name = "azure"
    capabilities = CAPABILITIES

    def __init__(self, domain: str, client: AzureDnsApi, account: str = "azure") -> None:
        self.domain = normalize_name(domain)
        self.account = account
        self._client = client
        self._api = _Counted(client)  # every call goes through it: it counts the requests
        self._lock = threading.Lock()
        self._seen: dict[str, dict[RecordKey, Seen]] = {}

    # --- reads ---------------------------------------------------------------------------------
    def zones(self) -> list[ZoneInfo]:
        return [ZoneInfo(id=z, domain=normalize_name(z)) for z in sorted(self._api.list_zones())]

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        zone = normalize_name(zone)
        wanted = snapshot_names(names)
        try:
            natives = self._api.list_record_sets(zone) if wanted is None else self._get_names(zone, wanted)
        except ApiError as err:
            if err.status == 404:
                raise ConfigError(f"azure: zone {zone} not found in the resource group "
                                  f"({err.code or 'NotFound'})") from None
            raise error_for(err, f"list {zone}") from None
        seen = self._remember(zone, natives)
        with self._lock:
            cache = self._seen.setdefault(zone, {})
            if wanted is None:
                cache.clear()
            else:
                for key in [k for k in cache if k.name in wanted]:
                    del cache[key]
            cache.update({k: s for k, s in seen.items() if wanted is None or k.name in wanted})
        skipped = [RecordKey(absolute_name(str(b.get("name", "@")), zone), native_type(b)) for b in natives
                   if native_type(b) not in RECORD_TYPES and native_type(b) != "SOA"]
        return ZoneSnapshot(zone=zone, records=filter_names((s.record for s in seen.values()), names),
                            complete=True, names=wanted, skipped=tuple(skipped))

    def _get_names(self, zone: str, names: Collection[str]) -> list[dict[str, Any]]:
        """A read by name: a GET per record set that can matter at each name (`probes`), from
        the zone's GET quota (1,000 a minute), not its listing quota (60)."""
        out: list[dict[str, Any]] = []
        for name, rtype in probes(names):
            if not in_zone(name, zone):
                continue
            body = self._api.get(zone, relative_name(name, zone), rtype)
            if body is not None:
                out.append(body)
        return out

    @staticmethod
    def _remember(zone: str, natives: Iterable[Mapping[str, Any]]) -> dict[RecordKey, Seen]:
        seen: dict[RecordKey, Seen] = {}
        for body in natives:
            rec = from_native(body, zone)
            if rec is not None and in_zone(rec.name, zone):
                meta = (body.get("properties") or {}).get("metadata")
                seen[rec.key] = Seen(rec, str(body.get("etag") or ""), dict(meta) if meta else None)
        return seen

    @property
    def requests(self) -> int:
        """Requests sent to the service (the agent's budget charges each): a listing, one per page."""
        return self._api.requests

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
        out = ApplyOutcome(zone=zone, total=len(changes))
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
                out.land([change])  # a landed first half stays reported as applied
        return out.result(log, zone)

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
                    body = self._api.get(zone, relative_name(change.key.name, zone), change.key.type)
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
                self._api.delete(zone, rel, key.type, if_match=seen.etag)
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
        answer = self._api.put(zone, rel, rec.type, body, **cond)
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
            body = self._api.get(zone, relative_name(old.name, zone), old.type)
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


ADDRESS = ("A", "AAAA", "CNAME")


def probes(names: Collection[str]) -> list[tuple[str, str]]:
    """The (name, type) record sets a read of ``names`` GETs.  Azure DNS reads one record set
    per request, so a read by name says which types it looks at: an ownership, heartbeat, lock
    or active-groups name holds a TXT; a data name, the address types (a CNAME beside an A is a
    clash the planner decides) and each type an ownership TXT name read with it announces for it
    (a pass reads its own TXT names with its data names: `gitdns.reconcile.readset`); a data
    name read without any, every type Azure holds.  Another type at a data name is not read: the
    pass writes only the types its intent names, and Azure refuses a CNAME beside other data."""
    wanted = {normalize_name(n) for n in names}
    hinted: dict[str, set[str]] = {}
    for name in wanted:
        parsed = parse_txt_name(name)
        if parsed is not None:
            hinted.setdefault(normalize_name(parsed[2]), set()).add(parsed[1])
    out: set[tuple[str, str]] = set()
    for name in wanted:
        if name.startswith(RESERVED_PREFIXES):
            out.add((name, "TXT"))
        elif name in hinted:
            out.update((name, t) for t in (*ADDRESS, *hinted[name]) if t in CAPABILITIES.record_types)
        else:
            out.update((name, t) for t in sorted(CAPABILITIES.record_types))
    return sorted(out)


def _throttled(exc: Exception) -> ThrottledError | None:
    mapped = error_for(exc, "request") if isinstance(exc, ApiError) and exc.status == 429 else None
    return mapped if isinstance(mapped, ThrottledError) else None


class _Counted:
    """The client, each request through the agent's gate (`gitdns.providers.base.send`: a
    throttled record set write or listing page is sent again alone, never the group's half that
    landed or the pages before it), counting the requests (a listing: one per page)."""

    def __init__(self, client: AzureDnsApi) -> None:
        self.client = client
        self.requests = 0

    def _send(self, request: Callable[[], T], kind: str = "read") -> T:
        def counted() -> T:
            self.requests += 1
            return request()
        return send(counted, _throttled, kind)

    def list_zones(self) -> list[str]:
        return self._send(self.client.list_zones)

    def list_record_sets(self, zone: str) -> list[dict[str, Any]]:
        """Every record set of the zone, page by page: each page one request through the gate."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            items, token = self._send(lambda token=token: self.client.list_record_sets(zone, token))  # type: ignore[misc]
            out.extend(items)
            if not token:
                return out

    def get(self, zone: str, relative: str, rtype: str) -> dict[str, Any] | None:
        return self._send(lambda: self.client.get(zone, relative, rtype), "name")

    def put(self, zone: str, relative: str, rtype: str, body: Mapping[str, Any], *,
            if_match: str | None = None, if_none_match: str | None = None) -> dict[str, Any]:
        return self._send(lambda: self.client.put(zone, relative, rtype, body, if_match=if_match,
                                                  if_none_match=if_none_match), "write")

    def delete(self, zone: str, relative: str, rtype: str, *, if_match: str) -> None:
        self._send(lambda: self.client.delete(zone, relative, rtype, if_match=if_match), "write")


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


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: Fences = STRICT) -> AzureProvider:
    """Settings: ``subscriptionId`` and ``resourceGroup`` (else taken from ``azure.json``),
    ``endpoint`` (the ARM endpoint, an https origin the operator allows: ``fences``; default
    https://management.azure.com), ``trafficManager`` (refused: not supported yet).
    Credentials: Kuadrant's ``azure.json``, from a source the fences allow."""
    refuse_static(zone_domain, ref)  # trafficManager, endpoint, ... as `gitdns validate` judges them
    named = ref.setting("endpoint") or None
    endpoint = fences.check_endpoint(named, zone=zone_domain) if named is not None else DEFAULT_ENDPOINT
    creds: Credentials = load_credentials(ref.credentials, provider="azure", fences=fences)
    cfg = azure_json(creds)
    subscription = ref.setting("subscriptionId") or cfg.get("subscriptionId")
    group = ref.setting("resourceGroup") or cfg.get("resourceGroup")
    for key in missing_settings(PROVIDER_TYPES["azure"], {"subscriptionId": subscription,
                                                           "resourceGroup": group}.get):
        raise ConfigError(f"spec.provider.settings.{key}: required for an azure zone ({zone_domain}); "
                          f"give it as a setting or in the credentials' azure.json")
    assert subscription and group
    client = SdkClient(make_credential(cfg), subscription, group, endpoint)
    return AzureProvider(zone_domain, client, account=f"azure:{subscription}")
