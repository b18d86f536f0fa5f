"""Each fault raises what the real provider adapter raises for that failure.

For every flavour and fault kind of tests/faults/flavours.py, the adapter itself is driven to the
failure — its SDK client (or socket) raising the SDK's own exception, or a loopback DNS server
answering SERVFAIL, never answering, or resetting the connection — and what the adapter raises is
compared with what the wrapper injects: the same class, the same ``reason`` and the same
``retry_after``, so the agent's retry, backoff and budget code cannot tell them apart.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from gitdns.core.records import Action, Change, RecordSet
from tests.faults import flavours
from tests.serve_kit import ServerThread

ZONE = "example.test"


def signature(exc: BaseException) -> tuple[type, str, float | None]:
    return type(exc), str(getattr(exc, "reason", "")), getattr(exc, "retry_after", None)


def raised(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except Exception as exc:  # whatever the adapter raises is the point
        return exc
    raise AssertionError("the adapter raised nothing")


def injected(flavour: str, kind: str, op: str, inner: Any = None, retry_after: float = 1.0) -> Exception:
    return flavours.error(flavour, kind, op, ZONE, random.Random(1), retry_after, inner)


# --- route53: botocore's exceptions through Route53Provider -------------------------------------
def route53_failing(exc: Exception) -> Any:
    from gitdns.providers.route53.provider import Route53Provider

    class Client:
        def __getattr__(self, name: str) -> Callable[..., Any]:
            def call(**kwargs: Any) -> Any:
                raise exc
            return call

    return Route53Provider(ZONE, Client(), hosted_zone_id="Z1")  # type: ignore[arg-type]


def client_error(code: str, message: str, status: int) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}}}, "ListResourceRecordSets")


def botocore_error(name: str) -> Exception:
    import botocore.exceptions

    cls: type[Exception] = getattr(botocore.exceptions, name)
    return cls(endpoint_url="https://route53.amazonaws.com/2013-04-01/hostedzone/Z1/rrset")


@pytest.mark.parametrize(("kind", "real"), [
    ("timeout-before", lambda: botocore_error("ConnectTimeoutError")),
    ("timeout-after", lambda: botocore_error("ReadTimeoutError")),
    ("connection-reset", lambda: botocore_error("ConnectionClosedError")),
    ("throttled", lambda: client_error("Throttling", "Rate exceeded", 400)),
    ("5xx", lambda: client_error("InternalFailure", "An internal error occurred", 500)),
    ("5xx", lambda: client_error("ServiceUnavailable", "Service is unavailable", 503)),
])
def test_route53(kind: str, real: Callable[[], Exception]) -> None:
    provider = route53_failing(real())
    got = raised(lambda: provider.read(ZONE))
    want = injected("route53", kind, "read", provider)
    assert signature(want) == signature(got)
    if kind != "5xx":
        assert str(want) == str(got)


# --- google: requests' exceptions through LibraryApi, HTTP errors through GoogleProvider ---------
def library_api_failing(exc: Exception) -> Any:
    from gitdns.providers.google.api import LibraryApi

    class Connection:
        def api_request(self, **kwargs: Any) -> Any:
            raise exc

    class Client:
        project = "p"
        _connection = Connection()

    return LibraryApi(Client())


def requests_error(name: str) -> Exception:
    import requests.exceptions

    cls: type[Exception] = getattr(requests.exceptions, name)
    return cls("('Connection broken: IncompleteRead(107 bytes read, 4893 more expected)')")


@pytest.mark.parametrize(("kind", "name"), [
    ("timeout-before", "ConnectTimeout"), ("timeout-after", "ReadTimeout"),
    ("connection-reset", "ConnectionError"),
    ("connection-reset", "ChunkedEncodingError"),  # the answer cut mid-body (tests/providers/test_cut_answers.py)
])
def test_google_transport(kind: str, name: str) -> None:
    pytest.importorskip("google.api_core")
    api = library_api_failing(requests_error(name))
    got = raised(lambda: api.list_rrsets("mz", None, None))
    assert signature(injected("google", kind, "read")) == signature(got)


@pytest.mark.parametrize(("kind", "status", "reason"), [("throttled", 429, "rateLimitExceeded"),
                                                        ("5xx", 503, "backendError"), ("5xx", 500, "internalError")])
def test_google_http(kind: str, status: int, reason: str) -> None:
    from gitdns.providers.google.api import CloudDnsError
    from gitdns.providers.google.provider import GoogleProvider

    class Api:
        def list_zones(self, page_token: str | None) -> dict[str, Any]:
            return {"managedZones": [{"name": "mz", "dnsName": ZONE + "."}]}

        def list_rrsets(self, zone: str, name: str | None, page_token: str | None) -> dict[str, Any]:
            raise CloudDnsError(status, reason, "said no")

        def create_change(self, zone: str, change: dict[str, Any]) -> dict[str, Any]:
            raise CloudDnsError(status, reason, "said no")

    provider = GoogleProvider(Api(), "p")
    assert signature(injected("google", kind, "read")) == signature(raised(lambda: provider.read(ZONE)))
    rec = RecordSet(f"x.{ZONE}", "A", 60, ("192.0.2.1",))
    got = raised(lambda: provider.apply(ZONE, [Change(Action.CREATE, None, rec, rec.key)]))
    assert signature(injected("google", kind, "apply")) == signature(got)


# --- azure: azure-core's exceptions through SdkClient._error, HTTP errors through AzureProvider --
@pytest.mark.parametrize(("kind", "name"), [
    ("timeout-before", "ServiceRequestTimeoutError"), ("timeout-after", "ServiceResponseTimeoutError"),
    ("connection-reset", "ServiceResponseError"),
    ("connection-reset", "IncompleteReadError"),  # the answer cut mid-body (tests/providers/test_cut_answers.py)
])
def test_azure_transport(kind: str, name: str) -> None:
    exceptions = pytest.importorskip("azure.core.exceptions")
    from gitdns.providers.azure.api import SdkClient

    cls = getattr(exceptions, name, None) or exceptions.ServiceRequestError
    endpoint = type("Client", (), {"endpoint": "https://management.azure.com"})()
    got = SdkClient._error(endpoint, cls("Connection broken: IncompleteRead(107 bytes read)"), f"list {ZONE}")  # type: ignore[arg-type]
    assert signature(injected("azure", kind, "read")) == signature(got)


@pytest.mark.parametrize(("kind", "status", "retry_after"), [("throttled", 429, 2.5), ("5xx", 503, None),
                                                             ("5xx", 500, None)])
def test_azure_http(kind: str, status: int, retry_after: float | None) -> None:
    from gitdns.providers.azure.api import ApiError
    from gitdns.providers.azure.provider import AzureProvider

    class Api:
        def __getattr__(self, name: str) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                raise ApiError(status, "Busy", "try later", retry_after)
            return call

    provider = AzureProvider(ZONE, Api())  # type: ignore[arg-type]
    got = raised(lambda: provider.read(ZONE))
    assert signature(injected("azure", kind, "read", retry_after=2.5)) == signature(got)


# --- rfc2136: a real socket that never answers, resets, or answers SERVFAIL --------------------
@contextmanager
def dns_server(mode: str) -> Iterator[int]:
    """A TCP listener on loopback: ``silent`` reads and never answers, ``reset`` resets the
    connection, ``cut`` sends the first bytes of an answer and closes, ``servfail`` answers every
    message with SERVFAIL.  A connection not closed by its mode is held until the client closes
    it or the server stops."""
    import dns.message
    import dns.rcode

    def serve(conn: socket.socket, _number: int) -> None:
        if mode == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif mode == "cut":
            conn.recv(65535)
            conn.sendall(struct.pack("!H", 200) + b"\x00" * 12)
        elif mode == "servfail":
            while len(head := conn.recv(2)) == 2:
                size = struct.unpack("!H", head)[0]
                query = dns.message.from_wire(conn.recv(size), ignore_trailing=True, keyring=False)
                answer = dns.message.make_response(query)
                answer.set_rcode(dns.rcode.SERVFAIL)
                wire = answer.to_wire()
                conn.sendall(struct.pack("!H", len(wire)) + wire)
        else:  # silent
            while conn.recv(65535):
                pass
        # returning closes the connection (with SO_LINGER 0: a reset)

    with ServerThread(serve, name=f"dns-{mode}", backlog=8) as server:
        yield server.port


def rfc2136_provider(port: int) -> Any:
    from gitdns.providers.rfc2136.provider import DnsPythonClient, Rfc2136Provider

    return Rfc2136Provider(ZONE, DnsPythonClient("127.0.0.1", port, 0.3))


@pytest.mark.parametrize(("kind", "mode"), [("timeout-before", "silent"), ("timeout-after", "silent"),
                                            ("connection-reset", "reset"), ("connection-reset", "cut"),
                                            ("5xx", "servfail")])
def test_rfc2136(kind: str, mode: str) -> None:
    rec = RecordSet(f"x.{ZONE}", "A", 60, ("192.0.2.1",))
    with dns_server(mode) as port:
        provider = rfc2136_provider(port)
        got = raised(lambda: provider.apply(ZONE, [Change(Action.CREATE, None, rec, rec.key)]))
        assert signature(injected("rfc2136", kind, "apply", provider)) == signature(got)
        if mode != "servfail":
            got = raised(lambda: provider.read(ZONE))
            assert signature(injected("rfc2136", kind, "read", provider)) == signature(got)
            if mode == "silent":
                assert str(injected("rfc2136", kind, "read", provider)) == str(got)


def test_rfc2136_has_no_throttling_so_a_cloud_answers() -> None:
    rng = random.Random(4)
    assert {flavours.resolve("rfc2136", "throttled", rng) for _ in range(30)} == set(flavours.CLOUDS)
    assert flavours.resolve("rfc2136", "5xx", rng) == "rfc2136"


def test_local_times_out_as_its_lock_does(tmp_path: Any) -> None:
    import fcntl

    from gitdns.providers.local import LocalProvider

    provider = LocalProvider(tmp_path, lock_timeout=0.1)
    rec = RecordSet(f"x.{ZONE}", "A", 60, ("192.0.2.1",))
    with open(provider.path(ZONE).with_name(f"{ZONE}.json.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        got = raised(lambda: provider.apply(ZONE, [Change(Action.CREATE, None, rec, rec.key)]))
    assert signature(injected("local", "timeout-before", "apply", provider)) == signature(got)
