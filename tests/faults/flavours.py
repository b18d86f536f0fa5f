"""The errors a fault stands for, as each real provider adapter raises them.

A fault is injected above the adapter (`tests.faults.provider.FaultyProvider` wraps the
provider), so what it raises must be what the adapter itself would raise for that condition:
each flavour builds the SDK-level failure and passes it through the adapter's own mapping
function where the adapter has one, so the agent's retry, backoff and budget code sees the
exception it sees in production.

- **timeout before the write** (nothing sent): route53 botocore ``ConnectTimeoutError``
  through `route53_api.map_error`; google requests' ``ConnectTimeout`` as
  `google_api.LibraryApi` maps it; azure azure-core's ``ServiceRequestTimeoutError`` as
  `azure_api.SdkClient._error` maps it; rfc2136 dnspython's ``Timeout`` through
  `rfc2136.DnsPythonClient._error`; local the store lock held past its timeout
  (``StoreBusyError``).
- **timeout after the write** (it landed, no answer): botocore ``ReadTimeoutError``, requests'
  ``ReadTimeout``, azure-core's ``ServiceResponseTimeoutError``, dnspython's ``Timeout``.
  Every timeout is the adapters' ``TimedOutError`` (an `UnreachableError`: the call may have
  taken effect).
- **5xx**: Route53 ``InternalFailure`` (HTTP 500) or ``ServiceUnavailable`` (503), Cloud DNS
  HTTP 503 ``backendError``, Azure HTTP 503, each through the adapter's own mapping
  (`RetryableError`); rfc2136 a SERVFAIL answer (`rcode_error`).
- **throttling**: Route53 ``Throttling`` (HTTP 400 "Rate exceeded", no Retry-After), Cloud DNS
  HTTP 429 ``rateLimitExceeded``, Azure HTTP 429 ``TooManyRequests`` with Retry-After
  (``plan.retry_after``): `ThrottledError`.
- **connection reset mid-response**: botocore ``ConnectionClosedError``, requests'
  ``ConnectionError``, azure-core's ``ServiceResponseError``, a reset or an answer cut short
  on the DNS connection (``ConnectionResetError``, ``EOFError``): `UnreachableError`.

Where a flavour has no such error (no DNS server or file store throttles), the ``mixed``
flavour answers: one of route53, google and azure, chosen by the fault's random stream.  A
partial batch raises the flavour's 5xx error after the groups that landed, as each cloud adapter
does when a later request of the batch fails.

The route53 flavour builds botocore's exceptions by shape and class name, as
`route53_api.map_error` reads them, and the google and azure flavours build the gitdns error
their adapters' mappings make of the SDK's exception, so the agent never imports an SDK for a
fault; `tests/faults/test_fault_fidelity.py` drives every real adapter to the same failure and
checks that it raises the same class, reason and Retry-After.
"""

from __future__ import annotations

import errno
import random
from typing import Any

from gitdns.errors import UnreachableError

CLOUDS = ("route53", "google", "azure")
FLAVOURS = ("route53", "google", "azure", "rfc2136", "local", "mixed")
SERVFAIL = 2


class ClientError(Exception):
    """botocore's ``ClientError`` as `route53_api.map_error` reads it: ``response``."""

    def __init__(self, code: str, message: str, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"An error occurred ({code}): {message}")
        self.response = {"Error": {"Code": code, "Message": message},
                         "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers or {}}}


def _botocore(name: str) -> Exception:
    """An exception whose class is named as botocore's (``map_error`` checks the name)."""
    cls = type(name, (Exception,), {})
    return cls(f"{name}: Could not connect to the endpoint URL")


def _timed_out(message: str, unreachable: str) -> Exception:
    """``TimedOutError`` (sent, no answer in time) where `gitdns.errors` has it, else the
    `UnreachableError` the adapters raised before it."""
    from gitdns import errors

    timed_out = getattr(errors, "TimedOutError", None)
    return timed_out(message) if timed_out is not None else UnreachableError(unreachable)


def route53(kind: str, op: str, zone: str, rng: random.Random, retry_after: float, inner: Any) -> Exception:
    from gitdns.providers.route53.api import map_error

    what = "list_resource_record_sets" if op == "read" else "change_resource_record_sets"
    if kind == "timeout-before":
        exc: Exception = _botocore("ConnectTimeoutError")
    elif kind == "timeout-after":
        exc = _botocore("ReadTimeoutError")
    elif kind == "connection-reset":
        exc = _botocore("ConnectionClosedError")
    elif kind == "throttled":
        exc = ClientError("Throttling", "Rate exceeded", 400)
    else:  # 5xx
        exc = rng.choice((ClientError("InternalFailure", "An internal error occurred", 500),
                          ClientError("ServiceUnavailable", "Service is unavailable", 503)))
    return map_error(exc, what)


def google(kind: str, op: str, zone: str, rng: random.Random, retry_after: float, inner: Any) -> Exception:
    from gitdns.providers.google.api import CloudDnsError, error_for

    what = f"list rrsets of {zone}" if op == "read" else f"create change in {zone.replace('.', '-')}"
    if kind in ("timeout-before", "timeout-after"):  # google_api.LibraryApi._call: requests' Timeout
        cause = "ConnectTimeout" if kind == "timeout-before" else "ReadTimeout"
        return _timed_out(f"Cloud DNS: no answer from the API in time ({cause})",
                          f"Cloud DNS: cannot reach the API ({cause})")
    if kind == "connection-reset":  # requests' ConnectionError
        return UnreachableError("Cloud DNS: cannot reach the API (ConnectionError)")
    if kind == "throttled":
        return error_for(CloudDnsError(429, "rateLimitExceeded", "Rate Limit Exceeded"), what)
    return error_for(CloudDnsError(503, "backendError", "Backend Error"), what)


def azure(kind: str, op: str, zone: str, rng: random.Random, retry_after: float, inner: Any) -> Exception:
    from gitdns.providers.azure.api import DEFAULT_ENDPOINT, ApiError, error_for

    what = f"list {zone}" if op == "read" else f"write {zone}"
    endpoint = str(getattr(getattr(inner, "_client", None), "endpoint", "") or DEFAULT_ENDPOINT)
    if kind in ("timeout-before", "timeout-after"):  # azure_api.SdkClient._error: azure-core's timeouts
        cause = "ServiceRequestTimeoutError" if kind == "timeout-before" else "ServiceResponseTimeoutError"
        return _timed_out(f"azure: {what}: no answer from {endpoint} in time ({cause})",
                          f"azure: {what}: cannot reach {endpoint} ({cause})")
    if kind == "connection-reset":  # azure-core's ServiceResponseError
        return UnreachableError(f"azure: {what}: cannot reach {endpoint} (ServiceResponseError)")
    if kind == "throttled":
        return error_for(ApiError(429, "TooManyRequests", "The request is being throttled.", retry_after), what)
    return error_for(ApiError(503, "ServiceUnavailable", "The service is temporarily unavailable."), what)


def rfc2136(kind: str, op: str, zone: str, rng: random.Random, retry_after: float, inner: Any) -> Exception:
    import dns.exception

    from gitdns.providers.rfc2136.provider import DnsPythonClient, rcode_error

    client = getattr(inner, "_client", None)
    if not callable(getattr(client, "_error", None)):
        client = DnsPythonClient("127.0.0.1", 53, 5.0)
    what = f"AXFR of {zone}" if op == "read" else "UPDATE"
    if kind in ("timeout-before", "timeout-after"):
        out: Exception = client._error(dns.exception.Timeout(), what)
        return out
    if kind == "connection-reset":  # a reset (RST), or the connection closed before the whole answer (EOF)
        cut = rng.choice((ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), EOFError("EOF")))
        out = client._error(cut, what)
        return out
    where = getattr(client, "where", "")
    return rcode_error(SERVFAIL, f"{what} from {where}" if op == "read" else f"UPDATE of {zone}")


def local(kind: str, op: str, zone: str, rng: random.Random, retry_after: float, inner: Any) -> Exception:
    from gitdns.providers.local import StoreBusyError

    path = getattr(inner, "path", None)
    lock = f"{path(zone)}.lock" if callable(path) else f"{zone}.json.lock"
    return StoreBusyError(f"record store lock {lock} held for over 30s")  # local's lock timeout


BUILDERS = {"route53": route53, "google": google, "azure": azure, "rfc2136": rfc2136, "local": local}
ALL_KINDS = frozenset({"timeout-before", "timeout-after", "5xx", "throttled", "connection-reset"})
SUPPORTS = {"route53": ALL_KINDS, "google": ALL_KINDS, "azure": ALL_KINDS,
            "rfc2136": ALL_KINDS - {"throttled"}, "local": frozenset({"timeout-before"})}


def resolve(flavour: str, kind: str, rng: random.Random) -> str:
    """The flavour that raises ``kind``: ``flavour`` itself when it has such an error, else
    (and for ``mixed``) one of the clouds, chosen by ``rng``."""
    if flavour == "mixed" or kind not in SUPPORTS[flavour]:
        return rng.choice(CLOUDS)
    return flavour


def flavour_of(inner: Any, wanted: str) -> str:
    """``wanted``, or for ``auto`` the wrapped provider's own (``local`` for the file and
    in-memory stores)."""
    if wanted != "auto":
        if wanted not in FLAVOURS:
            raise ValueError(f"unknown fault flavour {wanted!r}: one of {', '.join(FLAVOURS)} or auto")
        return wanted
    name = str(getattr(inner, "name", ""))
    return name if name in BUILDERS else "local"


def error(flavour: str, kind: str, op: str, zone: str, rng: random.Random, retry_after: float,
          inner: Any) -> Exception:
    """The error ``flavour`` raises for ``kind`` (one `resolve` says has it): whatever the
    adapter's mapping gives, a gitdns error or (were the mapping to miss one) the raw exception
    the adapter would let through."""
    return BUILDERS[flavour](kind, op, zone, rng, retry_after, inner)
