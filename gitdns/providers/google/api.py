"""The `google` provider's API boundary: `CloudDnsApi`, the three REST calls the provider
makes, and `LibraryApi`, which implements them with google-cloud-dns.  The library's
``ResourceRecordSet`` has no ``routingPolicy`` (and fails on rrsets without ``rrdatas``), so
`LibraryApi` calls the REST API through the client's ``_connection.api_request``; tests
replace the protocol.  `error_for` turns an API error that is not about one group's content
into a gitdns error.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from gitdns.errors import (
    AuthError,
    ConfigError,
    GitdnsError,
    PermanentError,
    RetryableError,
    ThrottledError,
    TimedOutError,
    UnreachableError,
)

THROTTLE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})
_REQUEST_ID = re.compile(r"\s*\(?\b(?:request[ _-]?id|x-goog-request-id)\b[:= ]*[\w-]+\)?", re.IGNORECASE)


# --- the protocol and its errors ---------------------------------------------------------
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


def strip_request_ids(text: str) -> str:
    return _REQUEST_ID.sub("", text).strip()


def error_for(exc: CloudDnsError, what: str) -> GitdnsError:
    """The gitdns error for an API error that is not about one group's content."""
    message = f"{what}: Cloud DNS answered HTTP {exc.status} {exc.reason}: {strip_request_ids(exc.message)}"
    if exc.status == 429 or exc.reason in THROTTLE_REASONS:
        return ThrottledError(message, retry_after=exc.retry_after)
    if exc.status >= 500 or exc.status == 408:
        return RetryableError(message)
    if exc.status in (401, 403):
        return AuthError(message)
    if exc.status == 404:
        return ConfigError(message)
    return PermanentError(message)


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
        except rexc.Timeout as exc:  # sent, no answer in time: it may have taken effect
            raise TimedOutError(f"Cloud DNS: no answer from the API in time ({type(exc).__name__})") from None
        except (rexc.ConnectionError, aexc.TransportError) as exc:
            raise UnreachableError(f"Cloud DNS: cannot reach the API ({type(exc).__name__})") from None
        except (rexc.ChunkedEncodingError, rexc.ContentDecodingError) as exc:  # the answer was cut off mid-body
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
