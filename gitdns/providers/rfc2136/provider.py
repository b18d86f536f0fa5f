"""The `rfc2136` provider: RFC 2136 dynamic update signed with TSIG, read by AXFR (dnspython).

- ``read`` transfers the whole zone (one TSIG-signed AXFR: a consistent point-in-time copy,
  ``version`` = the SOA serial) and converts it; with ``names`` it filters that copy.  The SOA
  is never part of a snapshot; the apex NS and every other record are (they carry no
  ownership TXT, so the planner treats them as foreign and never touches them).
- ``apply`` sends **one UPDATE message per change group** (a data record and its ownership
  TXT), which the server applies atomically.  The message's prerequisites make it a
  compare-and-swap (a group lands only when the zone still holds exactly what the plan read,
  else it is refused for a re-read and re-plan; see the provider protocol in
  docs/architecture.md): the exact old rrset (RFC 2136 §2.4.2, "RRset exists
  (value dependent)") for an update or delete, "RRset does not exist" for a create, and the
  group's guards (join/leave race) as "RRset does (not) exist" on the co-owners' TXT names.
  A failed prerequisite (NXRRSET, YXRRSET, YXDOMAIN, NXDOMAIN) refuses that group only.
  DNS prerequisites do not compare TTLs: a TTL-only change by someone else goes unnoticed.

Conversion (`to_native`, `from_native`) and message building (`batches`, `build_update`) are
pure functions in `gitdns.providers.rfc2136.native`; the network goes through `DnsClient`, a
two-call protocol (`transfer`, `update`) that `DnsPythonClient` implements and tests replace
with a fake.  dnspython is imported inside the functions that use it, never when this module
is imported.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import capabilities_of
from gitdns.core.providertypes.settings import (
    port_value,
    seconds_value,
    server_zone_error,
    tsig_algorithm,
)
from gitdns.core.records import Change, Guard, RecordKey, ZoneSnapshot, normalize_name
from gitdns.errors import AuthError, ConfigError, RetryableError, TimedOutError, UnreachableError
from gitdns.providers.base import ApplyOutcome, ApplyResult, ZoneInfo
from gitdns.providers.credentials import Credentials, load_credentials
from gitdns.providers.fences import STRICT, Fences, refuse_static
from gitdns.providers.memory import invalid_groups
from gitdns.providers.rfc2136.native import StaleGroup, absolute, batches, build_update, snapshot, unsupported

if TYPE_CHECKING:
    import dns.message
    import dns.name
    import dns.rrset
    import dns.update

log = logging.getLogger(__name__)

CAPABILITIES = capabilities_of("rfc2136")  # declared in gitdns.core.providertypes
DEFAULT_PORT = 53
DEFAULT_TIMEOUT = 10.0

# rcodes (RFC 2136 §2.2 / RFC 1035), by number so this table needs no import of dnspython
NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED = 0, 1, 2, 3, 4, 5
YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH, NOTZONE = 6, 7, 8, 9, 10
RCODE_TEXT = {NOERROR: "NOERROR", FORMERR: "FORMERR", SERVFAIL: "SERVFAIL", NXDOMAIN: "NXDOMAIN",
              NOTIMP: "NOTIMP", REFUSED: "REFUSED", YXDOMAIN: "YXDOMAIN", YXRRSET: "YXRRSET",
              NXRRSET: "NXRRSET", NOTAUTH: "NOTAUTH", NOTZONE: "NOTZONE"}
# a failed prerequisite: the group was stale, re-read and re-plan
STALE_RCODES = {
    NXRRSET: "a record set differs from what was read, or is gone",
    YXRRSET: "a record set that had to be absent exists (written meanwhile, or a co-owner joined)",
    YXDOMAIN: "the name is already in use",
    NXDOMAIN: "the name no longer exists",
}


def rcode_text(rcode: int) -> str:
    return RCODE_TEXT.get(rcode, f"RCODE{rcode}")


# --- the SDK boundary ---------------------------------------------------------------------------


class DnsClient(Protocol):
    """The only calls the provider makes.  Errors are raised as gitdns errors."""

    def transfer(self, zone: str) -> list[dns.rrset.RRset]:
        """Every rrset of ``zone`` (absolute names), by AXFR."""
        ...

    def update(self, message: dns.update.UpdateMessage) -> int:
        """Send one UPDATE; the response's rcode."""
        ...


class DnsPythonClient:
    """`DnsClient` over dnspython: TSIG-signed AXFR and UPDATE over TCP."""

    def __init__(self, server: str, port: int, timeout: float, key_name: str | None = None,
                 algorithm: str = "hmac-sha256", secret: str | None = None) -> None:
        import dns.name
        import dns.tsig

        self.server, self.port, self.timeout = server, port, timeout
        self._keyring: dict[dns.name.Name, dns.tsig.Key] | None = None
        self._key_name: dns.name.Name | None = None
        self._algorithm = dns.name.from_text(algorithm)
        if key_name and secret:
            self._key_name = dns.name.from_text(key_name)
            self._keyring = {self._key_name: dns.tsig.Key(self._key_name, secret, self._algorithm)}

    @property
    def where(self) -> str:
        return f"{self.server}:{self.port}"

    def transfer(self, zone: str) -> list[dns.rrset.RRset]:
        import dns.query

        try:
            xfr = dns.query.xfr(self.server, absolute(zone), port=self.port, timeout=self.timeout,
                                lifetime=self.timeout, keyring=self._keyring, keyname=self._key_name,
                                keyalgorithm=self._algorithm, relativize=False)
            return rrsets_of_transfer(xfr)
        except Exception as exc:
            raise self._error(exc, f"AXFR of {zone}") from None

    def update(self, message: dns.update.UpdateMessage) -> int:
        import dns.query

        if self._keyring is not None:
            message.use_tsig(self._keyring, keyname=self._key_name, algorithm=self._algorithm)
        try:
            response = dns.query.tcp(message, self.server, port=self.port, timeout=self.timeout)
        except Exception as exc:
            raise self._error(exc, "UPDATE") from None
        return int(response.rcode())

    def _error(self, exc: Exception, what: str) -> Exception:
        """A gitdns error for a dnspython/socket failure: no message ids, no key material."""
        import dns.exception
        import dns.message
        import dns.tsig
        import dns.xfr

        where = self.where
        if isinstance(exc, dns.exception.Timeout):
            return TimedOutError(f"{what}: no answer from {where} within {self.timeout:g}s")
        if isinstance(exc, dns.xfr.TransferError):
            return rcode_error(int(exc.rcode), f"{what} from {where}")
        if isinstance(exc, dns.tsig.PeerError | dns.tsig.BadSignature | dns.message.UnknownTSIGKey):
            return AuthError(f"{what}: {where} rejected the TSIG signature ({type(exc).__name__}): "
                             "check tsigKeyName, tsigAlgorithm and the secret")
        if isinstance(exc, dns.exception.FormError) and "TSIG" in str(exc):
            return AuthError(f"{what}: {where} answered without a TSIG signature, so it did not accept "
                             "the key: check tsigKeyName, tsigAlgorithm and the secret")
        if isinstance(exc, EOFError):  # dnspython: the connection closed before the whole answer
            return UnreachableError(f"{what}: {where} closed the connection before the whole answer")
        if isinstance(exc, OSError):
            return UnreachableError(f"{what}: cannot reach {where}: {exc.strerror or type(exc).__name__}")
        if isinstance(exc, dns.exception.DNSException):
            return RetryableError(f"{what}: bad answer from {where}: {type(exc).__name__}")
        return exc


def rrsets_of_transfer(messages: Iterable[dns.message.Message]) -> list[dns.rrset.RRset]:
    """The rrsets of an AXFR's messages (`dns.query.xfr` checks the transfer: it begins and
    ends with the zone's SOA), each once: the closing SOA left out, an rrset the server split
    over messages joined.  Taken from the messages as they are rather than built into a
    `dns.zone.Zone` first (``from_xfr``), which checked every rdata again by its wire form: a
    third of the CPU of reading a 10,000-record zone."""
    import dns.rdatatype

    out: dict[tuple[object, int, int], dns.rrset.RRset] = {}
    for message in messages:
        for rrset in message.answer:
            key = (rrset.name, rrset.rdtype, rrset.covers)
            have = out.get(key)
            if have is None:
                out[key] = rrset
            elif rrset.rdtype != dns.rdatatype.SOA:
                have.union_update(rrset)  # type: ignore[no-untyped-call]
    return list(out.values())


def rcode_error(rcode: int, what: str) -> Exception:
    """The error for an rcode that concerns the whole server rather than one group."""
    text = rcode_text(rcode)
    if rcode in (REFUSED, NOTAUTH):
        return AuthError(f"{what}: {text}: the server does not allow it for this key (or is not "
                         "authoritative for the zone): check allow-update/allow-transfer and the TSIG key")
    return RetryableError(f"{what}: {text}")


# --- the provider ---------------------------------------------------------------------------------


class Rfc2136Provider:
    """A zone on a DNS server that takes RFC 2136 updates.  ``domain`` is the gitdns zone;
    ``dns_zone`` the server's zone holding it (the same unless the ``zone`` setting says)."""

    name = "rfc2136"
    capabilities = CAPABILITIES

    def __init__(self, domain: str, client: DnsClient, dns_zone: str | None = None, account: str = "") -> None:
        self.domain = normalize_name(domain)
        self.dns_zone = normalize_name(dns_zone or domain)
        self.account = account or "rfc2136"
        self._client = client
        wrong = server_zone_error(self.dns_zone, self.domain)
        if wrong is not None:
            raise ConfigError(f"spec.provider.settings.zone: {wrong}")

    def _server_zone(self, zone: str) -> str:
        zone = normalize_name(zone)
        return self.dns_zone if zone == self.domain else zone

    def zones(self) -> list[ZoneInfo]:
        return [ZoneInfo(id=self.dns_zone, domain=self.domain)]

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        return snapshot(normalize_name(zone), self._client.transfer(self._server_zone(zone)), names)

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        domain = normalize_name(zone)
        server_zone = self._server_zone(zone)
        bad = invalid_groups(domain, changes)
        out = ApplyOutcome(zone=domain, total=len(changes))
        for group, members, group_guards in batches(changes, guards):
            why = bad.get(group) or next((w for w in map(unsupported, members) if w), "")
            if why:
                out.failed.append((group, why))
                continue
            self._send(server_zone, group, members, group_guards, out)
        return out.result(log, domain)

    def _send(self, server_zone: str, group: RecordKey, members: list[Change], group_guards: list[Guard],
              out: ApplyOutcome) -> None:
        import dns.exception

        try:
            message = build_update(server_zone, members, group_guards)
        except StaleGroup as exc:
            out.refused.append((group, str(exc)))
            return
        except (dns.exception.DNSException, ValueError) as exc:
            out.failed.append((group, f"{group}: a value is not valid rdata ({type(exc).__name__}: {exc})"))
            return
        rcode = self._client.update(message)
        if rcode == NOERROR:
            out.land(members)
        elif rcode in STALE_RCODES:
            out.refused.append((group, f"{group}: prerequisite failed ({rcode_text(rcode)}): "
                                       f"{STALE_RCODES[rcode]}"))
        elif rcode == REFUSED and self._key_allowed(server_zone):
            # BIND also answers REFUSED for content it will not take (an MX or SRV target with
            # no address, check-mx/check-srv-cname): the key may update, so it is this group's
            out.failed.append((group, f"{group}: the server refused this content (REFUSED; a policy "
                                      "such as check-mx or check-integrity, see the server's log)"))
        elif rcode in (REFUSED, NOTAUTH, SERVFAIL):
            raise rcode_error(rcode, f"UPDATE of {group}")
        else:  # FORMERR, NOTZONE, NOTIMP, ...: this group's content, not the server
            out.failed.append((group, f"{group}: the server rejected the update ({rcode_text(rcode)})"))


    def _key_allowed(self, server_zone: str) -> bool:
        """Whether an empty UPDATE (no prerequisites, no changes: a no-op) is accepted, which
        tells a refused key from refused content."""
        import dns.update

        return self._client.update(dns.update.UpdateMessage(absolute(server_zone))) == NOERROR


# --- construction from a Zone's spec.provider --------------------------------------------------------


def tsig_secret(creds: Mapping[str, str]) -> str | None:
    """The base64 TSIG secret from the credentials: key ``TSIG_SECRET``, ``secret``, any key
    ending in ``_TSIG_SECRET`` (an ``env:`` prefix), or the only value there is."""
    for key in ("TSIG_SECRET", "secret"):
        if creds.get(key):
            return creds[key]
    suffixed = [v for k, v in creds.items() if k.endswith("_TSIG_SECRET") and v]
    if len(suffixed) == 1:
        return suffixed[0]
    if len(creds) == 1:
        return next(iter(creds.values()))
    return None


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: Fences = STRICT) -> Rfc2136Provider:
    """Settings: ``server`` (required; with ``port``, a server the operator allows:
    ``fences``), ``port`` (53), ``tsigKeyName``, ``tsigAlgorithm`` (hmac-sha256), ``timeout``
    (seconds, 10), ``zone`` (the server's zone when it differs from the domain): each judged by
    `gitdns.core.providertypes.settings` (`refuse_static`, as `gitdns validate` judges them) before
    the server is checked against the fences.  Credentials: the base64 TSIG secret (see
    `tsig_secret`), from a source the fences allow."""
    refuse_static(zone_domain, ref)
    server = (ref.setting("server") or "").strip()
    port = port_value(ref.setting("port"), DEFAULT_PORT)
    fences.check_server(server, port, zone=zone_domain)
    timeout = seconds_value(ref.setting("timeout"), DEFAULT_TIMEOUT)
    algorithm = tsig_algorithm(ref.setting("tsigAlgorithm"))
    key_name = ref.setting("tsigKeyName") or None
    secret: str | None = None
    if key_name:
        creds: Credentials = load_credentials(ref.credentials, provider="rfc2136", fences=fences)
        secret = tsig_secret(creds)
        if not secret:
            raise ConfigError(f"spec.provider.credentials: no TSIG secret for key {key_name} (zone "
                              f"{zone_domain}); give TSIG_SECRET (base64), keys found: {sorted(creds)}")
        try:
            base64.b64decode(secret, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"spec.provider.credentials: the TSIG secret for key {key_name} is not "
                              f"valid base64 (zone {zone_domain})") from None
    client = DnsPythonClient(server, port, timeout, key_name, algorithm, secret)
    dns_zone = ref.setting("zone") or zone_domain
    return Rfc2136Provider(zone_domain, client, dns_zone, account=f"rfc2136:{server}:{port}")
