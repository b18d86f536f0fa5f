"""An answer the server cuts off mid-way is a retryable `UnreachableError` on every provider.

A load balancer restarting, a proxy timing out or a server crashing closes the connection after
the first bytes of an answer (a body shorter than its Content-Length, a chunked body that stops,
a DNS message shorter than its length prefix).  Each provider's real client is pointed at a
loopback server that does exactly that; what comes out must be the provider's `UnreachableError`
(the agent retries it on its validation loop), never the SDK's own exception: that one escapes
the provider, fails the zone's pass as ``InternalError`` with a traceback in the log, and makes
the agent take back what the pass had written.  (Found while checking that the soak's
``connection-reset`` fault raises what each adapter raises: tests/faults/test_fault_fidelity.py.)
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitdns.core.model import ProviderRef
from gitdns.core.records import Action, Change, RecordSet
from gitdns.errors import UnreachableError
from gitdns.providers.fences import Fences
from tests.providers.tls import server_context
from tests.serve_kit import ServerThread, read_head

ZONE = "example.test"
CUTS = {
    "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"a\": \"" + b"x" * 100,
    "chunked": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"1000\r\n" + b"x" * 100),
}


@contextmanager
def cutting_https(answer: bytes) -> Iterator[str]:
    """An HTTPS server on loopback that reads a request, sends ``answer`` (the start of a longer
    one) and closes."""
    context = server_context()

    def serve(conn: socket.socket, _number: int) -> None:
        # TLS on a duplicate: wrap_socket takes the descriptor it is given, and `conn` stays the
        # server's to shut down (which ends a handshake or a read on either)
        with context.wrap_socket(conn.dup(), server_side=True) as tls:
            read_head(tls)
            tls.sendall(answer)

    with ServerThread(serve, name="cutting-https", backlog=16) as server:
        yield f"https://127.0.0.1:{server.port}"


def check(call: Callable[[], object]) -> UnreachableError:
    with pytest.raises(UnreachableError) as err:
        call()
    return err.value


def record() -> Change:
    rec = RecordSet(f"x.{ZONE}", "A", 60, ("192.0.2.1",))
    return Change(Action.CREATE, None, rec, rec.key)


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_route53(cut: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("botocore")
    from gitdns.providers.route53 import provider as route53

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with cutting_https(CUTS[cut]) as url:
        ref = ProviderRef("route53", (("endpoint", url), ("hostedZoneId", "Z1")))
        provider = route53.from_ref(ZONE, ref, Path("."), fences=Fences.parse(provider_endpoints=url))
        check(lambda: provider.read(ZONE))
        check(lambda: provider.apply(ZONE, [record()]))


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_google(cut: str) -> None:
    pytest.importorskip("google.cloud.dns")
    from gitdns.providers.google import provider as google

    with cutting_https(CUTS[cut]) as url:
        ref = ProviderRef("google", (("endpoint", url), ("managedZone", "mz"), ("project", "p")))
        provider = google.from_ref(ZONE, ref, Path("."), fences=Fences.parse(provider_endpoints=url))
        assert "cannot reach" in str(check(lambda: provider.read(ZONE)))
        check(lambda: provider.apply(ZONE, [record()]))


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_azure(cut: str) -> None:
    pytest.importorskip("azure.mgmt.dns")
    from gitdns.providers.azure.api import SdkClient
    from gitdns.providers.azure.provider import AzureProvider
    from tests.providers.azure_fake import FakeCredential

    with cutting_https(CUTS[cut]) as url:
        provider = AzureProvider(ZONE, SdkClient(FakeCredential(), "sub", "rg", url, timeout=5))
        assert "cannot reach" in str(check(lambda: provider.read(ZONE)))
        check(lambda: provider.apply(ZONE, [record()]))


@contextmanager
def cutting_dns() -> Iterator[int]:
    """A DNS server over TCP on loopback that reads a message, answers with a length prefix of
    200 octets and 12 of them, and closes."""

    def serve(conn: socket.socket, _number: int) -> None:
        conn.recv(65535)
        conn.sendall(struct.pack("!H", 200) + b"\x00" * 12)

    with ServerThread(serve, name="cutting-dns", backlog=16) as server:
        yield server.port


def test_rfc2136() -> None:
    from gitdns.providers.rfc2136.provider import DnsPythonClient, Rfc2136Provider

    with cutting_dns() as port:
        provider = Rfc2136Provider(ZONE, DnsPythonClient("127.0.0.1", port, 5.0))
        assert "closed the connection" in str(check(lambda: provider.read(ZONE)))
        check(lambda: provider.apply(ZONE, [record()]))
