"""The `route53` provider: AWS Route53 hosted zones through boto3.

- ``read(zone)`` pages through ``ListResourceRecordSets`` (300 per page); ``read(zone, names)``
  makes one ``ListResourceRecordSets(StartRecordName=name, MaxItems=100)`` call per name and
  reads until the name changes (more calls only for a name with over 100 rows, in pages of 300:
  a weighted name of 1,000 clusters' rows is 4 calls, not 10).
- ``apply`` turns each change group (a data record and its ownership TXT) into Route53 changes
  — ``DELETE`` of the exact old rrset and ``CREATE`` of the new one, which Route53 applies
  atomically and refuses when the old rrset is not exactly what the zone holds (a
  compare-and-swap) — and packs groups into ``ChangeResourceRecordSets``
  requests within Route53's limits (`route53_batch.batches`).  A refused request is narrowed
  to the groups its ``InvalidChangeBatch`` message names (else bisected) and the rest is sent
  again: stale groups go to ``refused``, others to ``failed`` (`route53_apply`).  A
  ``present`` guard (a co-owner still holds the record this owner leaves) rides in its group's
  request as an unchanged ``DELETE``/``CREATE`` pair of the record it names; an ``absent``
  guard (no joiner announced) cannot be said to Route53 and is ignored (capabilities: no
  guards).
- Errors: throttling → `ThrottledError`; 5xx → `RetryableError`; connection failures →
  `UnreachableError`; refused credentials → `AuthError`.  botocore runs with one attempt
  (the agent owns retries); request ids never reach a message.

`from_ref` takes its client from `route53_api.make_client`: for a Zone's access keys the
provider's own (`route53_rest`: the standard library only), else botocore's (the default
credential chain), imported only by `route53_api.boto3_client`.  The provider talks to either
through `Route53Client`, the calls it makes; tests drive it with a fake.  Health checks
(setting ``healthChecks``) are in `route53_health`.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import capabilities_of
from gitdns.core.providertypes.settings import flag_value
from gitdns.core.records import Change, Guard, RecordKey, RecordSet, ZoneSnapshot, in_zone, normalize_name
from gitdns.errors import ConfigError
from gitdns.providers.base import ApplyResult, ZoneInfo, send
from gitdns.providers.credentials import load_credentials
from gitdns.providers.fences import STRICT, Fences, refuse_static
from gitdns.providers.memory import filter_names, snapshot_names
from gitdns.providers.route53.api import Route53Client, make_client, map_error
from gitdns.providers.route53.apply import ChangeApplier
from gitdns.providers.route53.batch import decode_name, encode_name, from_native
from gitdns.providers.route53.health import HealthChecks

log = logging.getLogger(__name__)

CAPABILITIES = capabilities_of("route53")  # declared in gitdns.core.providertypes
NAME_PAGE = "100"  # a name's first page: most names hold a few rows, and the page runs on into the next names
ZONE_PAGE = "300"  # the most ListResourceRecordSets returns: a whole zone, and a name past its first page
INSYNC_TIMEOUT = 120.0
INSYNC_INTERVAL = 5.0


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
        self._applier = ChangeApplier(self._call, self._health_ids, self.health, self._settle)
        self.requests = 0  # requests sent to the service (the agent's budget charges each)

    # -- calls
    def _call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        def request() -> dict[str, Any]:
            self.requests += 1
            try:
                result: dict[str, Any] = getattr(self._client, op)(**kwargs)
            except Exception as exc:
                mapped = map_error(exc, op)
                if mapped is exc:
                    raise
                raise mapped from None
            return result
        return send(request, kind="write" if op.startswith(("change_", "create_", "delete_", "update_")) else "read")

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
            # a name of many rows (a weighted name of a large fleet): the rest in pages of 300
            kwargs = {**kwargs, **_next(page), "MaxItems": ZONE_PAGE}

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
        skipped: list[RecordKey] = []
        health = self._health_ids.setdefault(domain, {})
        for rrs in self._rows(zone_id, domain, names):
            rec = from_native(rrs)
            if rec is None and rrs.get("Type") != "SOA":
                skipped.append(RecordKey(decode_name(str(rrs.get("Name", ""))), str(rrs.get("Type", ""))))
            if rec is None or not in_zone(rec.name, domain):
                continue
            records.append(rec)
            if rrs.get("HealthCheckId"):
                health[rec.key] = str(rrs["HealthCheckId"])
            else:
                health.pop(rec.key, None)
        return ZoneSnapshot(zone=domain, records=filter_names(records, names), complete=True, version="",
                            names=snapshot_names(names),
                            skipped=tuple(k for k in skipped if in_zone(k.name, domain)))

    # -- apply
    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        domain = normalize_name(zone)
        zone_id = self.zone_id(domain)
        out = self._applier.apply(domain, zone_id, changes, guards, self._held(domain, changes, guards))
        return out.result(log, domain)

    def _held(self, domain: str, changes: Sequence[Change],
              guards: Sequence[Guard]) -> dict[RecordKey, RecordSet]:
        """The records the ``present`` guards of these changes name, read now: each goes into its
        group's request unchanged (`route53_batch.with_unchanged`), so Route53 refuses the group
        if it changed or went meanwhile.  ``absent`` guards cannot be said to Route53 (a request
        cannot require a record to be missing without creating it): they are ignored."""
        groups = {c.group for c in changes}
        names = sorted({g.key.name for g in guards if g.present and g.group in groups})
        return self.read(domain, names).by_key() if names else {}

    def _settle(self, change_id: str, status: str) -> None:
        """After a request landed: wait for INSYNC when asked to."""
        if self.wait_insync and change_id:
            self._wait(change_id, status)

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


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: Fences = STRICT) -> Route53Provider:
    """Settings: ``hostedZoneId``, ``private``, ``region``, ``endpoint`` (an https origin the
    operator allows: ``fences``), ``waitInsync``, ``healthChecks``.  Credentials (Kuadrant
    ``kuadrant.io/aws`` keys): ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``
    (optional ``AWS_SESSION_TOKEN``), from a source the fences allow; without a credentials
    reference boto3's default chain.  Each setting is judged by
    `gitdns.core.providertypes.settings` first (`refuse_static`, as `gitdns validate` judges it)."""
    refuse_static(zone_domain, ref)
    endpoint = ref.setting("endpoint") or None
    if endpoint is not None:
        endpoint = fences.check_endpoint(endpoint, zone=zone_domain)
    found = load_credentials(ref.credentials, provider="route53", fences=fences)
    creds = {key: credential(found, key) for key in CREDENTIAL_KEYS}
    if bool(creds["AWS_ACCESS_KEY_ID"]) != bool(creds["AWS_SECRET_ACCESS_KEY"]):
        raise ConfigError(f"spec.provider.credentials: give both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                          f"(zone {zone_domain}); keys found: {sorted(found)}")
    region = ref.setting("region") or creds["AWS_REGION"] or "us-east-1"
    client = make_client(region, endpoint, creds)
    return Route53Provider(
        zone_domain, client, hosted_zone_id=ref.setting("hostedZoneId") or None,
        private=flag_value(ref.setting("private")), wait_insync=flag_value(ref.setting("waitInsync")),
        health_checks=flag_value(ref.setting("healthChecks")),
        account=account_of(creds.get("AWS_ACCESS_KEY_ID"), region),
    )
