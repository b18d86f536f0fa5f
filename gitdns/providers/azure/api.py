"""The `azure` provider's SDK boundary: `AzureDnsApi`, the five calls the provider makes on
record sets in their ARM JSON shape, and `SdkClient`, which implements them with
``DnsManagementClient`` (imported only when built; tests drive it over HTTP against a fake).
The SDK's own retry policy is off (``retry_total=0``): the agent owns retries and budgets.
Error answers come out as `ApiError` without request ids, GUIDs or timestamps; `error_for`
turns one that concerns the service rather than one group into a gitdns error.
"""

from __future__ import annotations

import email.utils
import io
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from gitdns.errors import AuthError, ConfigError, RetryableError, ThrottledError, TimedOutError, UnreachableError

DEFAULT_ENDPOINT = "https://management.azure.com"


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

    def list_record_sets(self, zone: str, page: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the zone's record sets (``page``: the continuation token of the page
        before, None for the first) and the next page's token (None after the last): one request,
        so that each page is paced and a throttled page is sent again alone."""
        ...

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
        if not self.endpoint.startswith("https://"):  # the SDK would refuse to send the token anyway
            raise ConfigError(f"azure: the endpoint {self.endpoint[:80]!r} is not https://")
        self._client = DnsManagementClient(credential, subscription_id, base_url=self.endpoint, retry_total=0,
                                           connection_timeout=timeout, read_timeout=timeout)
        self._call: dict[str, Any] = {}

    def _error(self, exc: Exception, what: str) -> Exception:
        from azure.core.exceptions import (
            HttpResponseError,
            ServiceRequestError,
            ServiceRequestTimeoutError,
            ServiceResponseError,
            ServiceResponseTimeoutError,
        )

        if isinstance(exc, HttpResponseError) and exc.status_code is not None:
            code, message = "", str(exc.reason or "")
            error = getattr(exc, "error", None)
            if error is not None:
                code, message = str(error.code or ""), str(error.message or message)
            response: Any = exc.response
            headers = response.headers if response is not None else {}
            return ApiError(int(exc.status_code), code, clean_message(message), retry_after(headers.get("Retry-After")))
        if isinstance(exc, HttpResponseError):  # no status: the answer was cut off (IncompleteReadError)
            return UnreachableError(f"azure: {what}: cannot reach {self.endpoint} ({type(exc).__name__})")
        if isinstance(exc, ServiceRequestTimeoutError | ServiceResponseTimeoutError):
            return TimedOutError(f"azure: {what}: no answer from {self.endpoint} in time ({type(exc).__name__})")
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

    def list_record_sets(self, zone: str, page: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        try:
            pages = self._client.record_sets.list_by_dns_zone(self.resource_group, zone, **self._call).by_page(
                continuation_token=page)
            items = [self._json(rs) for rs in next(pages)]
            return items, getattr(pages, "continuation_token", None) or None  # the pager's next link
        except StopIteration:
            return [], None
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
