"""The `route53` provider: AWS Route53 hosted zones through boto3.

- ``read(zone)`` pages through ``ListResourceRecordSets`` (300 per page); ``read(zone, names)``
  makes one ``ListResourceRecordSets(StartRecordName=name, MaxItems=100)`` call per name and
  reads until the name changes (more calls only for a name with over 100 rows).
- ``apply`` turns each change group (a data record and its ownership TXT) into Route53 changes
  — ``DELETE`` of the exact old rrset and ``CREATE`` of the new one, which Route53 applies
  atomically and refuses when the old rrset is not exactly what the zone holds (a
  compare-and-swap) — and packs groups into ``ChangeResourceRecordSets``
  requests within Route53's limits (`route53_batch.batches`).  A refused request is narrowed
  to the groups its ``InvalidChangeBatch`` message names (else bisected) and the rest is sent
  again: stale groups go to ``refused``, others to ``failed``.  Guards are not supported
  (Route53 cannot condition a change on other names); they are ignored.
- Errors: throttling → `ThrottledError`; 5xx → `RetryableError`; connection failures →
  `UnreachableError`; refused credentials → `AuthError`.  botocore runs with one attempt
  (the agent owns retries); request ids never reach a message.

The SDK (botocore, the core of boto3) is imported only by `boto3_client` (called from
`from_ref`).  The provider talks to it through `Route53Client`, the calls it makes; tests
drive it with a fake.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import capabilities_of
from gitdns.core.records import Change, Guard, RecordKey, RecordSet, ZoneSnapshot, in_zone, normalize_name
from gitdns.core.store import group_changes
from gitdns.errors import AuthError, ConfigError, PermanentError, RetryableError, ThrottledError, UnreachableError
from gitdns.providers import route53_listing
from gitdns.providers.base import ApplyResult, ZoneInfo
from gitdns.providers.credentials import load_credentials
from gitdns.providers.memory import filter_names, invalid_groups, snapshot_names
from gitdns.providers.route53_batch import (
    STALE_PHRASES,
    GroupOps,
    StaleGroup,
    batches,
    decode_name,
    encode_name,
    from_native,
    group_ops,
    oversize,
    parse_batch_error,
    request_changes,
    unsupported,
)

log = logging.getLogger(__name__)

CAPABILITIES = capabilities_of("route53")  # declared in gitdns.core.providertypes
NAME_PAGE = "100"
ZONE_PAGE = "300"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0
INSYNC_TIMEOUT = 120.0
INSYNC_INTERVAL = 5.0

THROTTLE_CODES = frozenset({"Throttling", "ThrottlingException", "PriorRequestNotComplete", "RequestLimitExceeded",
                            "TooManyRequestsException", "SlowDown"})
AUTH_CODES = frozenset({"AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch",
                        "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException", "InvalidAccessKeyId",
                        "MissingAuthenticationToken", "AuthFailure", "IncompleteSignature"})
ZONE_CODES = frozenset({"NoSuchHostedZone", "HostedZoneNotFound"})
UNREACHABLE_NAMES = frozenset({"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                               "ConnectionClosedError", "ProxyConnectionError", "SSLError", "ConnectionError"})
CREDENTIAL_NAMES = frozenset({"NoCredentialsError", "PartialCredentialsError", "NoRegionError"})
_REQUEST_ID = re.compile(r"\s*[(\[]?\b(?:request[ _-]?id|x-amzn-requestid)\b\s*[:=]?\s*[0-9A-Za-z-]+[)\]]?", re.I)


# --- the SDK boundary -------------------------------------------------------------------------------------


class Route53Client(Protocol):
    """The boto3 Route53 client calls the provider makes (keyword arguments as boto3 takes
    them; the responses are boto3's dicts).  Errors are raised as botocore raises them."""

    def list_hosted_zones(self, **kwargs: Any) -> dict[str, Any]: ...

    def list_resource_record_sets(self, **kwargs: Any) -> dict[str, Any]: ...

    def change_resource_record_sets(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_change(self, **kwargs: Any) -> dict[str, Any]: ...

    def create_health_check(self, **kwargs: Any) -> dict[str, Any]: ...

    def list_health_checks(self, **kwargs: Any) -> dict[str, Any]: ...

    def change_tags_for_resource(self, **kwargs: Any) -> dict[str, Any]: ...

    def list_tags_for_resource(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_health_check(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_health_check(self, **kwargs: Any) -> dict[str, Any]: ...


def boto3_client(region: str | None, endpoint: str | None, credentials: Mapping[str, str]) -> Route53Client:
    """A Route53 client (botocore's, which boto3 wraps; boto3's own import also loads
    s3transfer and its resource layer, ~3 MiB and 50 ms this provider never uses): one
    attempt per call (``total_max_attempts=1``: botocore's ``max_attempts`` counts retries
    *after* the first attempt), bounded timeouts; without credentials the default chain."""
    import botocore.session
    from botocore.config import Config

    # parameter_validation off: the requests are built here (and tested), Route53 checks them
    # anyway, and botocore's walk of a 1,000-value change batch costs more than sending it
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=CONNECT_TIMEOUT,
                    read_timeout=READ_TIMEOUT, region_name=region, parameter_validation=False)
    session = botocore.session.get_session()
    client: Route53Client = session.create_client(
        "route53", region_name=region, endpoint_url=endpoint or None, config=config,
        aws_access_key_id=credentials.get("AWS_ACCESS_KEY_ID") or None,
        aws_secret_access_key=credentials.get("AWS_SECRET_ACCESS_KEY") or None,
        aws_session_token=credentials.get("AWS_SESSION_TOKEN") or None,
    )
    _drop_endpoint_table(client)
    route53_listing.install(client)
    return client


def _drop_endpoint_table(client: object) -> None:
    """botocore resolves the endpoint when it creates the client, then keeps every service's
    endpoint table (endpoints.json, ~7 MiB parsed) in the client's loader cache for the
    client's life.  Drop that one entry: were it needed again, botocore reloads it."""
    cache = getattr(getattr(client, "_loader", None), "_cache", None)
    if isinstance(cache, dict):
        cache.pop(("load_data_with_path", "endpoints"), None)


# --- errors ----------------------------------------------------------------------------------------------


class Rejected(PermanentError):
    """Route53 refused a request for its content (HTTP 4xx that is neither throttling nor
    credentials): per change group, a ``failed`` or ``refused`` entry, never raised by `apply`."""

    reason = "ProviderRejected"

    def __init__(self, message: str, code: str, detail: str) -> None:
        super().__init__(message)
        self.code, self.detail = code, detail


def strip_request_ids(text: str) -> str:
    return _REQUEST_ID.sub("", text).strip()


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def map_error(exc: Exception, what: str) -> Exception:
    """The gitdns error for a botocore exception (checked by shape and class name, so this
    needs no botocore import); the exception itself when it is none of them."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        err = response.get("Error") or {}
        meta = response.get("ResponseMetadata") or {}
        code = str(err.get("Code") or "Unknown")
        detail = strip_request_ids(str(err.get("Message") or ""))
        status = int(meta.get("HTTPStatusCode") or 0)
        message = f"{what}: {code}: {detail}" if detail else f"{what}: {code}"
        if code in THROTTLE_CODES or status == 429:
            return ThrottledError(message, _retry_after(meta.get("HTTPHeaders") or {}))
        if code in AUTH_CODES or status in (401, 403):
            return AuthError(f"{message} (check the credentials and their IAM permissions)")
        if code in ZONE_CODES:
            return ConfigError(f"{message} (check spec.provider.settings.hostedZoneId)")
        if status >= 500 or code in ("ServiceUnavailable", "InternalFailure", "InternalError"):
            return RetryableError(message)
        return Rejected(message, code, detail)
    name = type(exc).__name__
    if name in UNREACHABLE_NAMES or isinstance(exc, OSError):
        return UnreachableError(f"{what}: cannot reach Route53 ({name})")
    if name in CREDENTIAL_NAMES:
        return AuthError(f"{what}: no usable AWS credentials or region ({name})")
    return exc


# --- the provider ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Outcome:
    applied: list[Change] = field(default_factory=list)
    refused: list[tuple[RecordKey, str]] = field(default_factory=list)
    failed: list[tuple[RecordKey, str]] = field(default_factory=list)
    change_ids: list[str] = field(default_factory=list)


class Route53Provider:
    """The hosted zone holding ``domain``: ``hosted_zone_id``, else the most specific zone
    whose name contains the domain (public zones; private ones only with ``private``)."""

    name = "route53"
    capabilities = CAPABILITIES

    def __init__(self, domain: str, client: Route53Client, *, hosted_zone_id: str | None = None,
                 private: bool = False, wait_insync: bool = False, health_checks: bool = False,
                 account: str = "route53", sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, insync_timeout: float = INSYNC_TIMEOUT) -> None:
        self.domain = normalize_name(domain)
        self.account = account
        self.private = private
        self.wait_insync = wait_insync
        self.insync_timeout = insync_timeout
        self._client = client
        self._sleep, self._clock = sleep, clock
        self._zone_ids: dict[str, str] = {}
        if hosted_zone_id:
            self._zone_ids[self.domain] = hosted_zone_id.rsplit("/", 1)[-1]
        self._health_ids: dict[str, dict[RecordKey, str]] = {}
        self.health = HealthChecks(self._call, self.domain, self._a_values) if health_checks else None

    # -- calls
    def _call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = getattr(self._client, op)(**kwargs)
        except Exception as exc:
            mapped = map_error(exc, op)
            if mapped is exc:
                raise
            raise mapped from None
        return result

    def _a_values(self, name: str) -> tuple[str, ...]:
        for rec in self.read(self.domain, [name]).records:
            if rec.type == "A" and not rec.set_id:
                return rec.values
        return ()

    # -- zones
    def _hosted_zones(self) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"MaxItems": "100"}
        while True:
            page = self._call("list_hosted_zones", **kwargs)
            yield from page.get("HostedZones", ())
            if not page.get("IsTruncated") or not page.get("NextMarker"):
                return
            kwargs["Marker"] = page["NextMarker"]

    def zones(self) -> list[ZoneInfo]:
        return [ZoneInfo(id=str(z["Id"]).rsplit("/", 1)[-1], domain=decode_name(z["Name"]))
                for z in self._hosted_zones()]

    def zone_id(self, zone: str) -> str:
        """The hosted zone id for ``zone`` (looked up once, then remembered)."""
        domain = normalize_name(zone)
        if domain in self._zone_ids:
            return self._zone_ids[domain]
        matches: list[tuple[int, str, str]] = []
        for z in self._hosted_zones():
            name = decode_name(z["Name"])
            is_private = bool((z.get("Config") or {}).get("PrivateZone"))
            if in_zone(domain, name) and is_private == self.private:
                matches.append((name.count(".") + 1, name, str(z["Id"]).rsplit("/", 1)[-1]))
        kind = "private" if self.private else "public"
        if not matches:
            raise ConfigError(f"route53: no {kind} hosted zone holds {domain}; create one or set "
                              "spec.provider.settings.hostedZoneId")
        best = max(m[0] for m in matches)
        ids = sorted(m[2] for m in matches if m[0] == best)
        if len(ids) > 1:
            raise ConfigError(f"route53: {len(ids)} {kind} hosted zones are named {matches[0][1]} "
                              f"({', '.join(ids)}); choose one with spec.provider.settings.hostedZoneId")
        self._zone_ids[domain] = ids[0]
        return ids[0]

    # -- read
    def _pages(self, kwargs: dict[str, Any]) -> Iterator[Sequence[dict[str, Any]]]:
        """``ListResourceRecordSets`` pages from ``kwargs`` on, one at a time: a page's dicts
        are dropped once the caller has converted them (a 20,000-rrset zone is never held
        twice)."""
        while True:
            page = self._call("list_resource_record_sets", **kwargs)
            yield page.get("ResourceRecordSets", ())
            if not page.get("IsTruncated"):
                return
            kwargs = {**kwargs, **_next(page)}

    def _rows_of_name(self, zone_id: str, name: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"HostedZoneId": zone_id, "StartRecordName": encode_name(name), "MaxItems": NAME_PAGE}
        while True:
            page = self._call("list_resource_record_sets", **kwargs)
            for rrs in page.get("ResourceRecordSets", ()):
                if decode_name(rrs["Name"]) != name:
                    return
                yield rrs
            if not page.get("IsTruncated") or decode_name(page.get("NextRecordName", "")) != name:
                return
            kwargs = {**kwargs, **_next(page)}

    def _rows(self, zone_id: str, domain: str, names: Collection[str] | None) -> Iterator[dict[str, Any]]:
        if names is None:
            for rows in self._pages({"HostedZoneId": zone_id, "MaxItems": ZONE_PAGE}):
                yield from rows
            return
        for name in sorted({normalize_name(n) for n in names}):
            if in_zone(name, domain):
                yield from self._rows_of_name(zone_id, name)

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        domain = normalize_name(zone)
        zone_id = self.zone_id(domain)
        records: list[RecordSet] = []
        health = self._health_ids.setdefault(domain, {})
        for rrs in self._rows(zone_id, domain, names):
            rec = from_native(rrs)
            if rec is None or not in_zone(rec.name, domain):
                continue
            records.append(rec)
            if rrs.get("HealthCheckId"):
                health[rec.key] = str(rrs["HealthCheckId"])
            else:
                health.pop(rec.key, None)
        return ZoneSnapshot(zone=domain, records=filter_names(records, names), complete=True, version="",
                            names=snapshot_names(names))

    # -- apply
    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        domain = normalize_name(zone)
        zone_id = self.zone_id(domain)
        out = _Outcome()
        # groups are converted as the batches fill and each request is built when it is
        # sent: only one request's Route53 dicts are alive at a time
        for batch in batches(self._prepare(domain, changes, out)):
            self._send(domain, zone_id, batch, out)
        if out.refused or out.failed:
            log.info("apply: zone=%s applied=%d refused=%d failed=%d",
                     domain, len(out.applied), len(out.refused), len(out.failed))
        return ApplyResult(applied=tuple(out.applied), refused=tuple(out.refused), failed=tuple(out.failed),
                           change_ids=tuple(out.change_ids))

    def _prepare(self, domain: str, changes: Sequence[Change], out: _Outcome) -> Iterator[GroupOps]:
        """The groups to send, one at a time; the others go to ``out`` on the way."""
        bad = invalid_groups(domain, changes)
        observed = self._health_ids.get(domain, {})
        for group, members in group_changes(changes).items():
            why = bad.get(group) or next((w for c in members for r in (c.old, c.new) if r is not None
                                          for w in [unsupported(r)] if w), "")
            if why:
                out.failed.append((group, why))
                continue
            try:
                wanted = self.health.ids_for(members, changes) if self.health else {}
                ops = group_ops(group, members, observed, wanted)
            except StaleGroup as exc:
                out.refused.append((group, str(exc)))
                continue
            except (ValueError, Rejected) as exc:
                out.failed.append((group, f"{group}: {exc}"))
                continue
            too_big = oversize(ops)
            if too_big:
                out.failed.append((group, too_big))
            elif not ops.deletes and not ops.creates:
                out.applied.extend(members)
            else:
                yield ops

    def _send(self, domain: str, zone_id: str, batch: Sequence[GroupOps], out: _Outcome) -> None:
        try:
            response = self._call("change_resource_record_sets", HostedZoneId=zone_id,
                                  ChangeBatch={"Comment": "gitdns", "Changes": request_changes(batch)})
        except Rejected as exc:
            self._narrow(domain, zone_id, batch, exc, out)
            return
        for ops in batch:
            out.applied.extend(ops.changes)
        change_id = str((response.get("ChangeInfo") or {}).get("Id", "")).rsplit("/", 1)[-1]
        if change_id:
            out.change_ids.append(change_id)
        self._landed(domain, batch)
        if self.wait_insync and change_id:
            self._wait(change_id, (response.get("ChangeInfo") or {}).get("Status", ""))

    def _narrow(self, domain: str, zone_id: str, batch: Sequence[GroupOps], exc: Rejected, out: _Outcome) -> None:
        """After a refused request: drop the groups the message names (stale → refused,
        else failed) and send the rest again; when it names none, bisect."""
        culprits: dict[RecordKey, tuple[bool, str]] = {}
        if exc.code == "InvalidChangeBatch":
            for problem in parse_batch_error(exc.detail):
                for ops in batch:
                    hit = problem.key in ops.keys if problem.key else any(k.name == problem.name for k in ops.keys)
                    if hit:
                        culprits.setdefault(ops.group, (problem.stale, problem.text))
        if culprits:
            for ops in batch:
                if ops.group in culprits:
                    stale, text = culprits[ops.group]
                    target = out.refused if stale else out.failed
                    target.append((ops.group, f"{ops.group}: route53 refused the change: {text}"))
            rest = [ops for ops in batch if ops.group not in culprits]
            if rest:
                self._send(domain, zone_id, rest, out)
            return
        if len(batch) == 1:
            group = batch[0].group
            stale = exc.code == "InvalidChangeBatch" and any(p in exc.detail for p in STALE_PHRASES)
            (out.refused if stale else out.failed).append((group, f"{group}: route53 refused the change: {exc}"))
            return
        mid = len(batch) // 2
        self._send(domain, zone_id, batch[:mid], out)
        self._send(domain, zone_id, batch[mid:], out)

    def _landed(self, domain: str, batch: Sequence[GroupOps]) -> None:
        """Remember the health check ids the zone now holds; retire the checks no row uses."""
        health = self._health_ids.setdefault(domain, {})
        dropped: set[str] = set()
        for ops in batch:
            for rrs in ops.deletes:
                key = RecordKey(decode_name(rrs["Name"]), rrs["Type"], rrs.get("SetIdentifier", ""))
                if health.pop(key, None) and rrs.get("HealthCheckId"):
                    dropped.add(str(rrs["HealthCheckId"]))
            for rrs in ops.creates:
                if rrs.get("HealthCheckId"):
                    key = RecordKey(decode_name(rrs["Name"]), rrs["Type"], rrs.get("SetIdentifier", ""))
                    health[key] = str(rrs["HealthCheckId"])
        if self.health is not None:
            self.health.retire(dropped - set(health.values()))

    def _wait(self, change_id: str, status: str) -> None:
        deadline = self._clock() + self.insync_timeout
        while status != "INSYNC":
            if self._clock() >= deadline:
                log.info("apply: change=%s not INSYNC after %gs; continuing", change_id, self.insync_timeout)
                return
            self._sleep(INSYNC_INTERVAL)
            status = str((self._call("get_change", Id=change_id).get("ChangeInfo") or {}).get("Status", ""))


def _next(page: Mapping[str, Any]) -> dict[str, Any]:
    out = {"StartRecordName": page["NextRecordName"]}
    if page.get("NextRecordType"):
        out["StartRecordType"] = page["NextRecordType"]
    if page.get("NextRecordIdentifier"):
        out["StartRecordIdentifier"] = page["NextRecordIdentifier"]
    return out


# --- health checks (optional) ------------------------------------------------------------------------------

HEALTH_CONFIG = {"Port": 443, "Type": "HTTPS", "ResourcePath": "/", "RequestInterval": 30, "FailureThreshold": 3}
_OWNER = re.compile(r"external-dns/owner=([^,]+)")


class HealthChecks:
    """Route53 health checks for weighted CNAME rows whose target is an A name: one HTTPS
    check per target IP (``CallerReference`` derived from zone, set id and IP, so a re-run
    finds the same check), a CALCULATED check (healthy while one child is) when the name has
    several IPs; tagged ``gitdns-owner`` and ``gitdns-zone``.  A check is deleted once no row
    of the zone uses it (so `gitdns prune-owner`, which deletes the owner's rows, removes
    them too); only checks tagged with this zone are ever deleted."""

    def __init__(self, call: Callable[..., dict[str, Any]], zone: str,
                 a_values: Callable[[str], tuple[str, ...]]) -> None:
        self._call, self.zone, self._a_values = call, zone, a_values
        self._known: dict[str, str] = {}  # CallerReference -> id

    def ids_for(self, members: Sequence[Change], changes: Sequence[Change]) -> dict[RecordKey, str]:
        owner = next((m[1] for c in members if c.new is not None and c.new.type == "TXT"
                      for v in c.new.values for m in [_OWNER.search(v)] if m), "")
        out: dict[RecordKey, str] = {}
        for change in members:
            new = change.new
            if new is None or new.weight is None or new.type != "CNAME" or len(new.values) != 1:
                continue
            target = new.values[0]
            ips = next((c.new.values for c in changes if c.new is not None and c.new.type == "A"
                        and c.new.name == target and not c.new.set_id), None)
            if ips is None:
                ips = self._a_values(target)
            ids = [self._ensure(f"{new.set_id}|{ip}", {"IPAddress": ip, **HEALTH_CONFIG}, owner) for ip in ips]
            if len(ids) == 1:
                out[new.key] = ids[0]
            elif ids:
                out[new.key] = self._ensure(f"{new.set_id}|calculated|{'|'.join(sorted(ids))}",
                                            {"Type": "CALCULATED", "ChildHealthChecks": sorted(ids),
                                             "HealthThreshold": 1}, owner)
        return out

    def _ensure(self, what: str, config: dict[str, Any], owner: str) -> str:
        ref = "gitdns-" + hashlib.sha256(f"{self.zone}|{what}".encode()).hexdigest()[:48]
        if ref in self._known:
            return self._known[ref]
        check = self._call("create_health_check", CallerReference=ref, HealthCheckConfig=config)["HealthCheck"]
        check_id = str(check["Id"])
        tags = [{"Key": "gitdns-zone", "Value": self.zone}]
        if owner:
            tags.append({"Key": "gitdns-owner", "Value": owner})
        self._call("change_tags_for_resource", ResourceType="healthcheck", ResourceId=check_id, AddTags=tags)
        self._known[ref] = check_id
        return check_id

    def retire(self, ids: Collection[str]) -> None:
        for check_id in sorted(ids):
            try:
                tags = self._call("list_tags_for_resource", ResourceType="healthcheck", ResourceId=check_id)
                values = {t["Key"]: t["Value"] for t in (tags.get("ResourceTagSet") or {}).get("Tags", ())}
                if values.get("gitdns-zone") != self.zone:
                    continue
                config = self._call("get_health_check", HealthCheckId=check_id)["HealthCheck"]["HealthCheckConfig"]
                self._call("delete_health_check", HealthCheckId=check_id)
                self._known = {k: v for k, v in self._known.items() if v != check_id}
                self.retire(config.get("ChildHealthChecks") or ())
            except Rejected as exc:  # in use by a row someone else wrote, or gone already
                log.info("health: check=%s not deleted: %s", check_id, exc.code)


# --- construction from a Zone's spec.provider ----------------------------------------------------------


def account_of(key_id: str | None, region: str | None = None) -> str:
    """Whose budget the calls spend: the account an access key id encodes (AKIA/ASIA keys
    carry it; an undocumented encoding, so only used when it decodes to 12 digits), else
    the key id hashed; the default credential chain is one budget per region."""
    if not key_id:
        return f"aws:default:{region or 'default'}"
    account = _account_from_key(key_id)
    if account:
        return f"aws:{account}"
    return "aws-key:" + hashlib.sha256(key_id.encode()).hexdigest()[:12]


def _account_from_key(key_id: str) -> str:
    import base64
    import binascii

    if len(key_id) != 20 or key_id[:4] not in ("AKIA", "ASIA"):
        return ""
    try:
        raw = base64.b32decode(key_id[4:])
    except (binascii.Error, ValueError):
        return ""
    number = (int.from_bytes(raw[:6], "big") & 0x7FFFFFFFFF80) >> 7
    text = f"{number:012d}"
    return text if len(text) == 12 else ""


CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION")


def credential(creds: Mapping[str, str], key: str) -> str:
    """``key`` from the credentials, or the one key ending in ``_<key>`` (an ``env:`` prefix
    such as ``R53`` keeps full variable names: ``R53_AWS_ACCESS_KEY_ID``)."""
    if creds.get(key):
        return creds[key]
    suffixed = [v for k, v in creds.items() if k.endswith("_" + key) and v]
    return suffixed[0] if len(suffixed) == 1 else ""


def _flag(ref: ProviderRef, key: str, zone: str) -> bool:
    raw = (ref.setting(key) or "false").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"spec.provider.settings.{key}: {raw!r} is not \"true\" or \"false\" (zone {zone})")
    return raw == "true"


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path) -> Route53Provider:
    """Settings: ``hostedZoneId``, ``private``, ``region``, ``endpoint``, ``waitInsync``,
    ``healthChecks``.  Credentials (Kuadrant ``kuadrant.io/aws`` keys): ``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` (optional ``AWS_SESSION_TOKEN``); without a
    credentials reference boto3's default chain."""
    found = load_credentials(ref.credentials, provider="route53")
    creds = {key: credential(found, key) for key in CREDENTIAL_KEYS}
    if bool(creds["AWS_ACCESS_KEY_ID"]) != bool(creds["AWS_SECRET_ACCESS_KEY"]):
        raise ConfigError(f"spec.provider.credentials: give both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                          f"(zone {zone_domain}); keys found: {sorted(found)}")
    region = ref.setting("region") or creds["AWS_REGION"] or "us-east-1"
    client = boto3_client(region, ref.setting("endpoint"), creds)
    return Route53Provider(
        zone_domain, client, hosted_zone_id=ref.setting("hostedZoneId") or None,
        private=_flag(ref, "private", zone_domain), wait_insync=_flag(ref, "waitInsync", zone_domain),
        health_checks=_flag(ref, "healthChecks", zone_domain),
        account=account_of(creds.get("AWS_ACCESS_KEY_ID"), region),
    )
