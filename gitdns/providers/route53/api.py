"""The `route53` provider's SDK boundary: `Route53Client`, the boto3 calls the provider makes;
`boto3_client`, the one place botocore is imported (one attempt per call: the agent owns
retries); and `map_error`, which turns a botocore exception into a gitdns error (throttling →
`ThrottledError`; 5xx → `RetryableError`; connection failures → `UnreachableError`; refused
credentials → `AuthError`; a refused request's content → `Rejected`), without request ids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from gitdns.errors import (
    AuthError,
    ConfigError,
    PermanentError,
    RetryableError,
    ThrottledError,
    TimedOutError,
    UnreachableError,
)
from gitdns.providers.route53 import listing as route53_listing

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0

THROTTLE_CODES = frozenset({"Throttling", "ThrottlingException", "PriorRequestNotComplete", "RequestLimitExceeded",
                            "TooManyRequestsException", "SlowDown"})
AUTH_CODES = frozenset({"AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch",
                        "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException", "InvalidAccessKeyId",
                        "MissingAuthenticationToken", "AuthFailure", "IncompleteSignature"})
ZONE_CODES = frozenset({"NoSuchHostedZone", "HostedZoneNotFound"})
UNREACHABLE_NAMES = frozenset({"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                               "ConnectionClosedError", "ProxyConnectionError", "SSLError", "ConnectionError"})
TIMEOUT_NAMES = frozenset({"ConnectTimeoutError", "ReadTimeoutError"})
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


def make_client(region: str | None, endpoint: str | None, credentials: Mapping[str, str]) -> Route53Client:
    """The client a provider talks through: `route53_rest.RestRoute53` (the standard library
    only) for explicit access keys where nothing in the environment or the AWS config file
    changes how botocore would send (`route53_rest.light_client`), else `boto3_client` (the
    default credential chain: environment, profile, web identity)."""
    from gitdns.providers.route53 import rest as route53_rest

    light = route53_rest.light_client(region, endpoint, credentials)
    if light is None:
        return boto3_client(region, endpoint, credentials)
    origin, signing_region = light
    return route53_rest.RestRoute53(origin, signing_region, credentials,
                                    lambda: boto3_client(region, endpoint, credentials),
                                    connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT)


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
    if name in TIMEOUT_NAMES or isinstance(exc, TimeoutError):  # no answer in time: a write may have taken effect
        return TimedOutError(f"{what}: no answer from Route53 in time ({name})")
    if name in UNREACHABLE_NAMES or isinstance(exc, OSError):
        return UnreachableError(f"{what}: cannot reach Route53 ({name})")
    if name in CREDENTIAL_NAMES:
        return AuthError(f"{what}: no usable AWS credentials or region ({name})")
    return exc
