"""The `google` provider: Google Cloud DNS (REST API v1 through the google-cloud-dns library).

Cloud DNS holds one resource record set (rrset) per name+type; gitdns holds one `RecordSet`
per set identifier.  The provider folds and unfolds (pure functions `to_native`,
`from_native`):

- rows without routing → one rrset with ``rrdatas`` (exactly one such row per name+type);
- weighted rows → one rrset with ``routingPolicy.wrr.items`` (weight + rrdatas per row).
  Cloud DNS keeps no set identifier: on read it is recovered from the item — the CNAME
  target for data rows (gitdns builds ``geo.klb.H`` rows with set_id == target), the
  ``external-dns/targets`` label for ownership TXT rows that copy that routing;
- geo rows → ``routingPolicy.geo.items`` (location = the geo code, a GCP region; set_id ==
  the geo code).  Cloud DNS has no ``*``: the default row (set_id ``default``, geo ``*``) is
  the item at ``defaultGeoLocation`` (setting, default ``europe-west1`` as Kuadrant's
  dns-operator maps it), so that region is reserved for the default row.

A fold that would not read back as the same rows (mixed routing, two TTLs, an
unrecoverable set identifier, two rows on one location) fails that group, never writes
something else.  An rrset using features gitdns does not model (health-checked targets,
primary/backup, fencing) fails every group that would rewrite it.

Writes: one Cloud DNS change per change group (`batches`).  The provider reads the group's
names, checks every ``Change.old`` against what it read (as `gitdns.core.store` does), and
sends ``deletions`` = the current rrsets exactly as read and ``additions`` = the re-folded
rrsets; Cloud DNS refuses a deletion that no longer matches (HTTP 412 ``conditionNotMet``)
and an addition over an existing rrset (409 ``alreadyExists``): both are `refused`.
The library's ``ResourceRecordSet`` has no ``routingPolicy`` (and fails on rrsets without
``rrdatas``), so the provider calls the REST API through the client's
``_connection.api_request`` behind `CloudDnsApi`, a three-call protocol tests replace.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gitdns.core import registry
from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import capabilities_of
from gitdns.core.records import (
    RECORD_TYPES,
    Action,
    Change,
    Guard,
    RecordKey,
    RecordSet,
    ZoneSnapshot,
    normalize_name,
)
from gitdns.core.store import group_changes
from gitdns.errors import (
    AuthError,
    ConfigError,
    GitdnsError,
    PermanentError,
    RetryableError,
    ThrottledError,
    UnreachableError,
)
from gitdns.providers.base import ApplyResult, ZoneInfo
from gitdns.providers.credentials import load_credentials
from gitdns.providers.memory import filter_names, snapshot_names, split_valid

log = logging.getLogger(__name__)

Native = dict[str, Any]  # a ResourceRecordSet as JSON
DEFAULT_GEO_LOCATION = "europe-west1"  # Kuadrant dns-operator's stand-in for geo "*"
SCOPE = "https://www.googleapis.com/auth/ndev.clouddns.readwrite"
CAPABILITIES = capabilities_of("google")  # declared in gitdns.core.providertypes
_THROTTLE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})
_REQUEST_ID = re.compile(r"\s*\(?\b(?:request[ _-]?id|x-goog-request-id)\b[:= ]*[\w-]+\)?", re.IGNORECASE)


class CloudDnsError(Exception):
    """An HTTP error answer of the Cloud DNS API (raised by `CloudDnsApi` implementations)."""

    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


class CloudDnsApi(Protocol):
    """The three REST calls the provider makes.  Each returns the decoded JSON answer and
    raises `CloudDnsError` for an HTTP error, `UnreachableError` when it cannot connect."""

    def list_zones(self, page_token: str | None) -> dict[str, Any]: ...

    def list_rrsets(self, zone: str, name: str | None, page_token: str | None) -> dict[str, Any]: ...

    def create_change(self, zone: str, change: dict[str, Any]) -> dict[str, Any]: ...


# --- conversion (pure) --------------------------------------------------------------------
class FoldError(ValueError):
    """Rows of one name+type that Cloud DNS cannot hold so that they read back the same."""


def _absolute(name: str) -> str:
    return name if name.endswith(".") else name + "."


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unquote(text: str) -> str:
    """A TXT rrdata (one or more quoted strings, or bare text) as one plain string."""
    text = text.strip()
    if not text.startswith('"'):
        return text
    out: list[str] = []
    i, inside = 0, False
    while i < len(text):
        char = text[i]
        if char == "\\" and inside and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if char == '"':
            inside = not inside
        elif inside:
            out.append(char)
        i += 1
    return "".join(out)


def rdata(rtype: str, value: str) -> str:
    """A gitdns value as Cloud DNS rrdata: TXT quoted, CNAME/NS absolute with a dot."""
    if rtype == "TXT":
        return _quote(value)
    if rtype in ("CNAME", "NS"):
        return _absolute(value)
    return value


def value(rtype: str, text: str) -> str:
    """Cloud DNS rrdata as a gitdns value (the inverse of `rdata`)."""
    if rtype == "TXT":
        return _unquote(text)
    if rtype in ("CNAME", "NS"):
        return normalize_name(text)
    return text


def wrr_set_id(rtype: str, values: Sequence[str]) -> str:
    """The set identifier of a weighted row, recovered from its values ("" when it cannot be)."""
    if rtype == "TXT":
        found = {t for v in values if (labels := registry.decode(v)) is not None for t in labels.targets or ()}
        return normalize_name(next(iter(found))) if len(found) == 1 else ""
    return values[0] if len(values) == 1 else ""


def _geo_set_id(geo: str) -> str:
    return "default" if geo == "*" else geo


def _values(rtype: str, item: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(value(rtype, str(r)) for r in item.get("rrdatas") or ())


def from_native(rrset: Mapping[str, Any], default_location: str = DEFAULT_GEO_LOCATION) -> list[RecordSet]:
    """The gitdns rows of one Cloud DNS rrset (unfold)."""
    name, rtype, ttl = normalize_name(str(rrset["name"])), str(rrset["type"]), int(rrset.get("ttl") or 0)
    policy = rrset.get("routingPolicy") or {}
    rows: list[RecordSet] = []
    for item in (policy.get("wrr") or {}).get("items") or ():
        values = _values(rtype, item)
        rows.append(RecordSet(name, rtype, ttl, values, set_id=wrr_set_id(rtype, values),
                              weight=round(float(item.get("weight", 0)))))
    for item in (policy.get("geo") or {}).get("items") or ():
        location = str(item.get("location", ""))
        geo = "*" if location == default_location else location
        rows.append(RecordSet(name, rtype, ttl, _values(rtype, item), set_id=_geo_set_id(geo), geo=geo))
    if not policy:
        rows.append(RecordSet(name, rtype, ttl, _values(rtype, rrset)))
    return rows


def _mode(rec: RecordSet) -> str:
    if rec.weight is not None and rec.geo is not None:
        raise FoldError(f"{rec.key}: Cloud DNS routes an rrset by weight or by geo, not both")
    return "wrr" if rec.weight is not None else "geo" if rec.geo is not None else "plain"


def to_native(rows: Sequence[RecordSet], default_location: str = DEFAULT_GEO_LOCATION) -> Native:
    """One Cloud DNS rrset holding ``rows`` (all of one name+type) (fold)."""
    if not rows:
        raise FoldError("no rows to fold")
    first = rows[0]
    modes = {_mode(r) for r in rows}
    if len(modes) > 1:
        raise FoldError(f"{first.name} {first.type}: Cloud DNS holds one rrset per name and type; rows with "
                        f"different routing ({', '.join(sorted(modes))}) cannot share it")
    if len({r.ttl for r in rows}) > 1:
        raise FoldError(f"{first.name} {first.type}: Cloud DNS holds one TTL per rrset; rows want "
                        f"{sorted({r.ttl for r in rows})}")
    native: Native = {"kind": "dns#resourceRecordSet", "name": _absolute(first.name), "type": first.type,
                      "ttl": first.ttl}
    mode = modes.pop()
    ordered = sorted(rows, key=lambda r: r.set_id)
    if mode == "plain":
        if len(rows) > 1 or first.set_id:
            raise FoldError(f"{first.key}: a row without routing needs no set identifier and must be alone")
        native["rrdatas"] = [rdata(first.type, v) for v in first.values]
        return native
    items: list[dict[str, Any]] = []
    locations: set[str] = set()
    for rec in ordered:
        data = [rdata(rec.type, v) for v in rec.values]
        if mode == "wrr":
            assert rec.weight is not None
            if rec.weight < 0 or not rec.set_id or wrr_set_id(rec.type, rec.values) != rec.set_id:
                raise FoldError(f"{rec.key}: a weighted row needs a weight >= 0 and a set identifier Cloud DNS "
                                "can recover (the single target; for TXT its external-dns/targets label)")
            items.append({"weight": float(rec.weight), "rrdatas": data})
            continue
        assert rec.geo is not None
        location = default_location if rec.geo == "*" else rec.geo
        if rec.set_id != _geo_set_id(rec.geo) or location in locations or (
                rec.geo != "*" and rec.geo == default_location):
            raise FoldError(f"{rec.key}: a geo row's set identifier must be its geo code ('default' for '*') and "
                            f"each location used once; {default_location} is reserved for the default row "
                            "(setting defaultGeoLocation)")
        locations.add(location)
        items.append({"location": location, "rrdatas": data})
    native["routingPolicy"] = {mode: {"items": items}}
    return native


def canonical(rrset: Mapping[str, Any]) -> Any:
    """An rrset with `kind`, DNSSEC signatures and item order dropped (for comparison)."""
    rtype = str(rrset.get("type"))

    def clean(obj: Any) -> Any:
        if isinstance(obj, dict):
            out = {k: clean(v) for k, v in obj.items() if k not in ("kind", "signatureRrdatas")}
            if "rrdatas" in out:
                out["rrdatas"] = sorted(value(rtype, str(r)) for r in out["rrdatas"])
            if "weight" in out:
                out["weight"] = float(out["weight"])
            if "name" in out:
                out["name"] = normalize_name(str(out["name"]))
            if isinstance(out.get("items"), list):
                out["items"] = sorted(out["items"], key=lambda i: json.dumps(i, sort_keys=True))
            return out
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    return clean(dict(rrset))


def representable(rrset: Mapping[str, Any], default_location: str = DEFAULT_GEO_LOCATION) -> bool:
    """Whether gitdns can rewrite ``rrset`` without losing anything (unfold then fold is exact)."""
    try:
        again = to_native(from_native(rrset, default_location), default_location)
    except (FoldError, KeyError, TypeError, ValueError):
        return False
    return bool(canonical(again) == canonical(rrset))


# --- one change per group (pure) ----------------------------------------------------------
class StaleGroup(Exception):
    """A change's ``old`` is not what the zone holds now: re-read and re-plan."""


def batches(changes: Sequence[Change]) -> list[tuple[RecordKey, list[Change]]]:
    """One Cloud DNS change per change group, in first-seen order: one stale name never
    sinks the others, and a record and its ownership TXT always land together."""
    return list(group_changes(changes).items())


@dataclass
class ChangeBody:
    deletions: list[Native] = field(default_factory=list)
    additions: list[Native] = field(default_factory=list)
    after: dict[tuple[str, str], Native | None] = field(default_factory=dict)  # what the zone then holds

    def request(self) -> dict[str, Any]:
        return {"kind": "dns#change", "deletions": self.deletions, "additions": self.additions}


def build_change(members: Sequence[Change], current: Mapping[tuple[str, str], Native | None],
                 default_location: str = DEFAULT_GEO_LOCATION) -> ChangeBody:
    """The Cloud DNS change for one group, given the rrsets it touches as just read.
    Raises `StaleGroup` when a ``Change.old`` no longer matches, `FoldError` when the result
    cannot be held."""
    rows: dict[tuple[str, str], dict[str, RecordSet]] = {}
    for key, native in current.items():
        if native is not None and not representable(native, default_location):
            raise FoldError(f"{key[0]} {key[1]}: the rrset uses Cloud DNS features gitdns does not model "
                            "(health checks, primary/backup, fencing or non-integer weights); not rewritten")
        rows[key] = {r.set_id: r for r in from_native(native, default_location)} if native else {}
    for change in members:
        rec = change.record
        held = rows.setdefault((rec.name, rec.type), {})
        now = held.get(rec.set_id)
        if change.action is Action.CREATE and now is not None:
            raise StaleGroup(f"{change.key} already exists")
        if change.action is not Action.CREATE and now != change.old:
            raise StaleGroup(f"{change.key} {'no longer exists' if now is None else 'changed since it was read'}")
        if change.new is None:
            held.pop(rec.set_id, None)
        else:
            held[rec.set_id] = change.new
    body = ChangeBody()
    for key, held in rows.items():
        before = current.get(key)
        after = to_native(list(held.values()), default_location) if held else None
        if before is not None and after is not None and canonical(before) == canonical(after):
            body.after[key] = before
            continue
        if before is not None:
            body.deletions.append(dict(before))
        if after is not None:
            body.additions.append(after)
        body.after[key] = after
    return body


def strip_request_ids(text: str) -> str:
    return _REQUEST_ID.sub("", text).strip()


def error_for(exc: CloudDnsError, what: str) -> GitdnsError:
    """The gitdns error for an API error that is not about one group's content."""
    message = f"{what}: Cloud DNS answered HTTP {exc.status} {exc.reason}: {strip_request_ids(exc.message)}"
    if exc.status == 429 or exc.reason in _THROTTLE_REASONS:
        return ThrottledError(message, retry_after=exc.retry_after)
    if exc.status >= 500 or exc.status == 408:
        return RetryableError(message)
    if exc.status in (401, 403):
        return AuthError(message)
    if exc.status == 404:
        return ConfigError(message)
    return PermanentError(message)


# --- the provider -------------------------------------------------------------------------
class GoogleProvider:
    """Cloud DNS zones of one project.  ``managed_zone`` pins the managed zone's name; else it
    is found by its DNS name (one paged list, cached)."""

    name = "google"
    capabilities = CAPABILITIES

    def __init__(self, api: CloudDnsApi, project: str, managed_zone: str | None = None,
                 default_location: str = DEFAULT_GEO_LOCATION) -> None:
        self._api = api
        self.account = project
        self._pinned = managed_zone
        self._default_location = default_location
        self._zone_names: dict[str, str] = {}

    def zones(self) -> list[ZoneInfo]:
        found: list[ZoneInfo] = []
        for item in self._pages(lambda token: self._api.list_zones(token), "managedZones", "list managed zones"):
            found.append(ZoneInfo(id=str(item["name"]), domain=normalize_name(str(item["dnsName"]))))
        return sorted(found, key=lambda z: z.domain)

    def _managed_zone(self, zone: str) -> str:
        if self._pinned:
            return self._pinned
        if zone not in self._zone_names:
            self._zone_names.update({z.domain: z.id for z in self.zones()})
        if zone not in self._zone_names:
            raise ConfigError(f"zone {zone}: no Cloud DNS managed zone with dnsName {zone}. in project "
                              f"{self.account}; create it or set spec.provider.settings.managedZone")
        return self._zone_names[zone]

    def _pages(self, call: Callable[[str | None], dict[str, Any]], key: str, what: str) -> Iterable[Any]:
        token: str | None = None
        while True:
            try:
                page = call(token)
            except CloudDnsError as exc:
                raise error_for(exc, what) from None
            yield from page.get(key) or ()
            token = page.get("nextPageToken") or None
            if token is None:
                return

    def _rrsets(self, managed: str, name: str | None) -> list[Native]:
        what = f"list rrsets of {managed}" + (f" named {name}" if name else "")
        wanted = None if name is None else _absolute(name)
        return [dict(r) for r in self._pages(lambda t: self._api.list_rrsets(managed, wanted, t), "rrsets", what)
                if wanted is None or _absolute(normalize_name(str(r["name"]))) == wanted]

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        zone = normalize_name(zone)
        managed = self._managed_zone(zone)
        if names is None:
            natives = self._rrsets(managed, None)
        else:
            natives = [r for n in sorted({normalize_name(n) for n in names}) for r in self._rrsets(managed, n)]
        records = [row for native in natives if native.get("type") in RECORD_TYPES
                   for row in from_native(native, self._default_location)]
        return ZoneSnapshot(zone=zone, records=filter_names(records, names), complete=True,
                            names=snapshot_names(names))

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        """``guards`` are not supported (capabilities say so) and ignored."""
        zone = normalize_name(zone)
        good, invalid = split_valid(zone, changes)
        managed = self._managed_zone(zone)
        cache: dict[str, list[Native]] = {}
        applied: list[Change] = []
        refused: list[tuple[RecordKey, str]] = []
        failed: list[tuple[RecordKey, str]] = list(invalid)
        ids: list[str] = []
        for group, members in batches(good):
            names = sorted({c.record.name for c in members})
            for name in names:
                if name not in cache:
                    cache[name] = self._rrsets(managed, name)
            current = {(c.record.name, c.record.type): _find(cache[c.record.name], c.record.type) for c in members}
            try:
                body = build_change(members, current, self._default_location)
            except StaleGroup as exc:
                refused.append((group, str(exc)))
                continue
            except FoldError as exc:
                failed.append((group, str(exc)))
                continue
            kind, detail = self._send(managed, body)
            if kind == "applied":
                applied.extend(members)
                ids.extend([detail] if detail else [])
                _remember(cache, body)
                continue
            (refused if kind == "refused" else failed).append((group, detail))
            for name in names:
                cache.pop(name, None)
        if refused or failed:
            log.info("apply: zone=%s applied=%d refused=%d failed=%d",
                     zone, len(applied), len(refused), len(failed))
        return ApplyResult(applied=tuple(applied), refused=tuple(refused), failed=tuple(failed),
                           change_ids=tuple(ids))

    def _send(self, managed: str, body: ChangeBody) -> tuple[str, str]:
        """("applied", change id) | ("refused", why) | ("failed", why); raises for errors that
        are not about this group (throttling, auth, server errors)."""
        if not body.deletions and not body.additions:
            return "applied", ""
        try:
            answer = self._api.create_change(managed, body.request())
        except CloudDnsError as exc:
            why = f"Cloud DNS answered HTTP {exc.status} {exc.reason}: {strip_request_ids(exc.message)}"
            if exc.status == 412 or (exc.status == 409 and exc.reason == "alreadyExists") or (
                    exc.status == 404 and exc.reason == "notFound"):
                return "refused", f"changed since it was read ({why})"
            if exc.status in (400, 409) and exc.reason not in _THROTTLE_REASONS:
                return "failed", why
            raise error_for(exc, f"create change in {managed}") from None
        return "applied", str(answer.get("id") or "")


def _find(rrsets: Iterable[Native], rtype: str) -> Native | None:
    return next((r for r in rrsets if r.get("type") == rtype), None)


def _remember(cache: dict[str, list[Native]], body: ChangeBody) -> None:
    """After a change landed, the cache holds what it wrote (no re-read for the next group)."""
    for (name, rtype), after in body.after.items():
        held = [r for r in cache.get(name, []) if r.get("type") != rtype]
        cache[name] = [*held, after] if after is not None else held


# --- the library behind CloudDnsApi --------------------------------------------------------
class LibraryApi:
    """`CloudDnsApi` over google-cloud-dns: its authenticated connection's ``api_request``
    (the library's record-set model lacks ``routingPolicy``)."""

    def __init__(self, client: Any, timeout: float = 30.0) -> None:
        self._client = client
        self._project = str(client.project)
        self._timeout = timeout

    def _call(self, method: str, path: str, query: dict[str, str] | None = None,
              data: dict[str, Any] | None = None) -> dict[str, Any]:
        import requests.exceptions as rexc
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as aexc

        try:
            answer = self._client._connection.api_request(
                method=method, path=f"/projects/{self._project}{path}", query_params=query or None, data=data,
                timeout=self._timeout)
        except gexc.GoogleAPICallError as exc:
            raise _api_error(exc) from None
        except (rexc.ConnectionError, rexc.Timeout, aexc.TransportError) as exc:
            raise UnreachableError(f"Cloud DNS: cannot reach the API ({type(exc).__name__})") from None
        except aexc.GoogleAuthError as exc:  # a refused or unrefreshable token (401 and no refresh)
            raise AuthError(f"Cloud DNS: the credentials were refused ({type(exc).__name__})") from None
        return dict(answer or {})

    def list_zones(self, page_token: str | None) -> dict[str, Any]:
        return self._call("GET", "/managedZones", {"pageToken": page_token} if page_token else None)

    def list_rrsets(self, zone: str, name: str | None, page_token: str | None) -> dict[str, Any]:
        query = {k: v for k, v in (("name", name), ("pageToken", page_token)) if v}
        return self._call("GET", f"/managedZones/{zone}/rrsets", query)

    def create_change(self, zone: str, change: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"/managedZones/{zone}/changes", data=change)


def _api_error(exc: Any) -> CloudDnsError:
    errors = list(getattr(exc, "errors", None) or [])
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    status = int(getattr(exc, "code", 0) or 0)
    reason = str(first.get("reason") or type(exc).__name__)
    message = str(first.get("message") or "")
    response = getattr(exc, "response", None)
    retry_after: float | None = None
    header = response.headers.get("Retry-After") if response is not None else None
    if header:
        try:
            retry_after = float(header)
        except ValueError:
            retry_after = None
    return CloudDnsError(status, reason, message, retry_after)


def _credentials(ref: ProviderRef, endpoint: str | None) -> tuple[Any, str | None]:
    """(google-auth credentials or None for the default chain, project from the secret)."""
    creds = load_credentials(ref.credentials, provider="google")
    project = creds.get("PROJECT_ID") or None
    raw = creds.get("GOOGLE")
    if raw:
        from google.oauth2 import service_account

        try:
            info = json.loads(raw)
            factory: Any = service_account.Credentials
            account = factory.from_service_account_info(info, scopes=[SCOPE])
        except (ValueError, KeyError, TypeError):
            raise ConfigError("spec.provider.credentials: key GOOGLE does not hold a service account JSON "
                              "key (type service_account, client_email, private_key)") from None
        return account, project or info.get("project_id")
    if endpoint:
        from google.auth import credentials as gcreds

        anonymous: Any = gcreds.AnonymousCredentials
        return anonymous(), project
    return None, project


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path) -> GoogleProvider:
    """Settings: ``project`` (else the secret's PROJECT_ID or the key's project_id),
    ``managedZone`` (else found by dnsName), ``endpoint`` (another API base URL, e.g. a test
    fake: anonymous credentials unless a key is given), ``defaultGeoLocation`` (the region
    that carries the default geo row, default europe-west1), ``timeout`` (seconds)."""
    from google.cloud import dns

    endpoint = ref.setting("endpoint") or None
    credentials, secret_project = _credentials(ref, endpoint)
    project = ref.setting("project") or secret_project
    if not project:
        raise ConfigError(f"zone {zone_domain}: spec.provider.settings.project is required (or PROJECT_ID in "
                          "the credentials)")
    try:
        timeout = float(ref.setting("timeout", "30") or 30)
    except ValueError:
        raise ConfigError(f"zone {zone_domain}: spec.provider.settings.timeout must be a number of seconds") from None
    options = {"api_endpoint": endpoint} if endpoint else None
    client = dns.Client(project=project, credentials=credentials, client_options=options)
    location = ref.setting("defaultGeoLocation") or DEFAULT_GEO_LOCATION
    return GoogleProvider(LibraryApi(client, timeout), project, ref.setting("managedZone") or None, location)
