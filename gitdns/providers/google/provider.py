"""The `google` provider: Google Cloud DNS (REST API v1 through the google-cloud-dns library).

Cloud DNS holds one resource record set (rrset) per name+type; gitdns holds one `RecordSet`
per set identifier.  The provider folds and unfolds (pure functions `to_native`,
`from_native` in `gitdns.providers.google.native`, which says how weighted and geo rows
map).  A fold that would not read back as the same rows (mixed routing, two TTLs, an
unrecoverable set identifier, two rows on one location) fails that group, never writes
something else.  An rrset using features gitdns does not model (health-checked targets,
primary/backup, fencing) fails every group that would rewrite it.

Writes: the provider takes each change group's rrsets from the read the plan was made from
(else it reads the group's names), checks every ``Change.old`` against them (as
`gitdns.core.store` does) and refuses a group that moved before sending anything; the groups
that are fresh go in **one** Cloud DNS change (up to `GROUPS_PER_CHANGE`), with
``deletions`` = the current rrsets exactly as read and ``additions`` = the re-folded rrsets.
Cloud DNS refuses a deletion that no longer matches (HTTP 412 ``conditionNotMet``) and an
addition over an existing rrset (409 ``alreadyExists``); a change is atomic, so when it refuses
the combined one (another writer came between the read and the change) or fails it, each
group is read again and sent alone (`batches`): one stale or bad group never sinks the others,
and each refused one is `refused`.  One change instead of one per group: at 100 agents on one
project a change is two minutes of an agent's share, and a pass has five or six groups.
The library's ``ResourceRecordSet`` has no ``routingPolicy`` (and fails on rrsets without
``rrdatas``), so the provider calls the REST API through the client's
``_connection.api_request`` behind `CloudDnsApi` (`gitdns.providers.google.api`), a
three-call protocol tests replace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import PROVIDER_TYPES, capabilities_of, missing_settings
from gitdns.core.providertypes.settings import seconds_value
from gitdns.core.records import RECORD_TYPES, Change, Guard, RecordKey, ZoneSnapshot, normalize_name
from gitdns.errors import ConfigError, ThrottledError
from gitdns.providers.base import ApplyOutcome, ApplyResult, ZoneInfo, send
from gitdns.providers.credentials import load_credentials
from gitdns.providers.fences import STRICT, Fences, refuse_static
from gitdns.providers.google.api import (
    THROTTLE_REASONS,
    CloudDnsApi,
    CloudDnsError,
    LibraryApi,
    error_for,
    strip_request_ids,
)
from gitdns.providers.google.native import (
    DEFAULT_GEO_LOCATION,
    ChangeBody,
    FoldError,
    Native,
    StaleGroup,
    absolute,
    batches,
    build_change,
    from_native,
)
from gitdns.providers.memory import filter_names, snapshot_names, split_valid

log = logging.getLogger(__name__)
T = TypeVar("T")

SCOPE = "https://www.googleapis.com/auth/ndev.clouddns.readwrite"
DEFAULT_TIMEOUT = 30.0  # seconds per request, unless spec.provider.settings.timeout says
CAPABILITIES = capabilities_of("google")  # declared in gitdns.core.providertypes


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
        self.requests = 0  # requests sent to the service (the agent's budget charges each)
        self._read: dict[str, _Read] = {}  # zone -> the rrsets of its last read, for the next apply

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
            def request(token: str | None = token) -> dict[str, Any]:
                self.requests += 1
                try:
                    return call(token)
                except CloudDnsError as exc:
                    raise error_for(exc, what) from None
            page = send(request, kind="read")  # inside an apply too: paid as a read
            yield from page.get(key) or ()
            token = page.get("nextPageToken") or None
            if token is None:
                return

    def _rrsets(self, managed: str, name: str | None) -> list[Native]:
        what = f"list rrsets of {managed}" + (f" named {name}" if name else "")
        wanted = None if name is None else absolute(name)
        return [dict(r) for r in self._pages(lambda t: self._api.list_rrsets(managed, wanted, t), "rrsets", what)
                if wanted is None or absolute(normalize_name(str(r["name"]))) == wanted]

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        zone = normalize_name(zone)
        managed = self._managed_zone(zone)
        if names is None:
            natives = self._rrsets(managed, None)
        else:
            natives = [r for n in sorted({normalize_name(n) for n in names}) for r in self._rrsets(managed, n)]
        self._keep(zone, natives, None if names is None else {normalize_name(n) for n in names})
        records = [row for native in natives if native.get("type") in RECORD_TYPES
                   for row in from_native(native, self._default_location)]
        skipped = [RecordKey(normalize_name(str(native.get("name", ""))), str(native.get("type", "")))
                   for native in natives if native.get("type") not in RECORD_TYPES and native.get("type") != "SOA"]
        return ZoneSnapshot(zone=zone, records=filter_names(records, names), complete=True,
                            names=snapshot_names(names), skipped=tuple(skipped))

    def _keep(self, zone: str, natives: Iterable[Native], names: set[str] | None) -> None:
        """Keep what a read saw for the apply that follows it (which plans from that read):
        the change deletes exactly those rrsets, so Cloud DNS refuses it if one moved since, and
        the apply then reads each group again.  Reading again inside the apply cost a read per
        name between the plan and the change (at 100 agents on one project, 30 s each: the
        shared rrsets had moved by the time the change went).  A whole-zone read of more than
        `KEEP_MAX` rrsets is not kept."""
        by_name: dict[str, list[Native]] = {}
        for native in natives:
            by_name.setdefault(normalize_name(str(native.get("name", ""))), []).append(native)
        if names is None:
            self._read[zone] = _Read(complete=True, by_name=by_name) if len(by_name) <= KEEP_MAX else _Read()
            return
        kept = self._read.setdefault(zone, _Read())
        for name in names:
            kept.by_name[name] = by_name.get(name, [])
        if len(kept.by_name) > KEEP_MAX:  # reads by name with no apply between: keep no more than a zone's worth
            del self._read[zone]

    def _from_last_read(self, zone: str, names: set[str]) -> dict[str, list[Native]]:
        """The rrsets the last read saw at ``names`` (the apply's cache; consumed: a later apply
        plans from a later read)."""
        kept = self._read.pop(zone, None)
        if kept is None:
            return {}
        return {n: list(kept.by_name.get(n, [])) for n in names if kept.complete or n in kept.by_name}

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        """``guards`` are not supported (capabilities say so) and ignored."""
        zone = normalize_name(zone)
        good, invalid = split_valid(zone, changes)
        managed = self._managed_zone(zone)
        cache = self._from_last_read(zone, {c.record.name for c in good})
        out = ApplyOutcome(failed=list(invalid), zone=zone, total=len(changes))
        ready: list[tuple[RecordKey, list[Change], list[str]]] = []
        for group, members in batches(good):
            names = sorted({c.record.name for c in members})
            if self._body(managed, cache, group, members, names, out) is not None:  # a check only
                ready.append((group, members, names))
        alone: list[tuple[RecordKey, list[Change], list[str]]] = []
        for chunk in _chunks(ready):
            together = [c for _, members, _ in chunk for c in members]
            if len(chunk) > 1:
                try:
                    body: ChangeBody | None = build_change(together, _current(cache, together),
                                                           self._default_location)
                except (StaleGroup, FoldError):
                    body = None
                if body is not None:
                    kind, detail = self._send(managed, body)
                    if kind == "applied":
                        _landed(out, together, detail, cache, body)
                        continue
                    for _, _, names in chunk:  # refused or failed as a whole: each group alone, read again
                        for name in names:
                            cache.pop(name, None)
            alone.extend(chunk)
        for group, members, names in alone:
            body = self._body(managed, cache, group, members, names, out)
            if body is None:
                continue
            kind, detail = self._send(managed, body)
            if kind == "applied":
                _landed(out, members, detail, cache, body)
                continue
            (out.refused if kind == "refused" else out.failed).append((group, detail))
            for name in names:
                cache.pop(name, None)
        return out.result(log, zone)

    def _body(self, managed: str, cache: dict[str, list[Native]], group: RecordKey, members: list[Change],
              names: list[str], out: ApplyOutcome) -> ChangeBody | None:
        """The group's change built on the rrsets in ``cache`` (its names not there are read);
        None when it is stale (refused) or cannot be held (failed), as ``out`` then says."""
        for name in names:
            if name not in cache:
                cache[name] = self._rrsets(managed, name)
        try:
            return build_change(members, _current(cache, members), self._default_location)
        except StaleGroup as exc:
            out.refused.append((group, str(exc)))
        except FoldError as exc:
            out.failed.append((group, str(exc)))
        return None

    def _send(self, managed: str, body: ChangeBody) -> tuple[str, str]:
        """("applied", change id) | ("refused", why) | ("failed", why); raises for errors that
        are not about this group (throttling, auth, server errors)."""
        if not body.deletions and not body.additions:
            return "applied", ""
        def request() -> dict[str, Any]:
            self.requests += 1
            return self._api.create_change(managed, body.request())

        def throttled(exc: Exception) -> ThrottledError | None:
            mapped = error_for(exc, f"create change in {managed}") if isinstance(exc, CloudDnsError) else None
            return mapped if isinstance(mapped, ThrottledError) else None

        try:
            answer = send(request, throttled, kind="write")
        except CloudDnsError as exc:
            why = f"Cloud DNS answered HTTP {exc.status} {exc.reason}: {strip_request_ids(exc.message)}"
            if exc.status == 412 or (exc.status == 409 and exc.reason == "alreadyExists") or (
                    exc.status == 404 and exc.reason == "notFound"):
                return "refused", f"changed since it was read ({why})"
            if exc.status in (400, 409) and exc.reason not in THROTTLE_REASONS:
                return "failed", why
            raise error_for(exc, f"create change in {managed}") from None
        return "applied", str(answer.get("id") or "")


def _landed(out: ApplyOutcome, members: list[Change], change_id: str, cache: dict[str, list[Native]],
            body: ChangeBody) -> None:
    out.land(members)
    out.change_ids.extend([change_id] if change_id else [])
    _remember(cache, body)


KEEP_MAX = 5000  # rrsets of a whole-zone read kept for the apply that follows it


@dataclass(slots=True)
class _Read:
    complete: bool = False  # a whole-zone read: a name it did not see holds nothing
    by_name: dict[str, list[Native]] = field(default_factory=dict)


GROUPS_PER_CHANGE = 100  # groups sent in one change (a group is at most a few rrsets; Cloud DNS takes 1,000)


def _chunks(ready: list[T]) -> Iterator[list[T]]:
    for i in range(0, len(ready), GROUPS_PER_CHANGE):
        yield ready[i:i + GROUPS_PER_CHANGE]


def _current(cache: dict[str, list[Native]], members: Sequence[Change]) -> dict[tuple[str, str], Native | None]:
    return {(c.record.name, c.record.type): _find(cache[c.record.name], c.record.type) for c in members}


def _find(rrsets: Iterable[Native], rtype: str) -> Native | None:
    return next((r for r in rrsets if r.get("type") == rtype), None)


def _remember(cache: dict[str, list[Native]], body: ChangeBody) -> None:
    """After a change landed, the cache holds what it wrote (no re-read for the next group)."""
    for (name, rtype), after in body.after.items():
        held = [r for r in cache.get(name, []) if r.get("type") != rtype]
        cache[name] = [*held, after] if after is not None else held


# --- construction from a Zone's spec.provider ------------------------------------------------
def _credentials(ref: ProviderRef, endpoint: str | None, fences: Fences) -> tuple[Any, str | None]:
    """(google-auth credentials or None for the default chain, project from the secret)."""
    creds = load_credentials(ref.credentials, provider="google", fences=fences)
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


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: Fences = STRICT) -> GoogleProvider:
    """Settings: ``project`` (else the secret's PROJECT_ID or the key's project_id),
    ``managedZone`` (else found by dnsName), ``endpoint`` (another API base URL: an https
    origin the operator allows, ``fences``; anonymous credentials unless a key is given),
    ``defaultGeoLocation`` (the region that carries the default geo row, default
    europe-west1), ``timeout`` (seconds).  Each setting is judged by
    `gitdns.core.providertypes.settings` first (`refuse_static`, as `gitdns validate` judges it)."""
    refuse_static(zone_domain, ref)
    endpoint = ref.setting("endpoint") or None
    if endpoint is not None:
        endpoint = fences.check_endpoint(endpoint, zone=zone_domain)
    from google.cloud import dns

    credentials, secret_project = _credentials(ref, endpoint, fences)
    project = ref.setting("project") or secret_project
    if missing_settings(PROVIDER_TYPES["google"], {"project": project}.get):
        raise ConfigError(f"zone {zone_domain}: spec.provider.settings.project is required (or PROJECT_ID in "
                          "the credentials)")
    assert project
    timeout = seconds_value(ref.setting("timeout"), DEFAULT_TIMEOUT)
    options = {"api_endpoint": endpoint} if endpoint else None
    client = dns.Client(project=project, credentials=credentials, client_options=options)
    location = ref.setting("defaultGeoLocation") or DEFAULT_GEO_LOCATION
    return GoogleProvider(LibraryApi(client, timeout), project, ref.setting("managedZone") or None, location)
