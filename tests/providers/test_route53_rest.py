"""The route53 provider's own client (`route53_rest`): what it sends is what botocore sends
(the signature, the change batch body), its errors read as botocore's through `map_error`,
and `light_client` hands everything it does not cover to botocore."""

from __future__ import annotations

import datetime
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from gitdns.errors import ThrottledError
from gitdns.providers.route53 import rest
from gitdns.providers.route53.api import Rejected, make_client, map_error
from tests.serve_kit import ServerThread, read_head

KEYS = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "bench-dummy/secret+key"}
BATCH = {"Comment": "gitdns", "Changes": [
    {"Action": "DELETE", "ResourceRecordSet": {"Name": "a.example.com.", "Type": "TXT", "TTL": 300,
                                               "ResourceRecords": [{"Value": '"x & <y> \\"z\\""'}]}},
    {"Action": "CREATE", "ResourceRecordSet": {"Name": "w.example.com.", "Type": "A", "SetIdentifier": "eu",
                                               "Weight": 10, "GeoLocation": {"CountryCode": "DE"}, "TTL": 60,
                                               "ResourceRecords": [{"Value": "192.0.2.1"}, {"Value": "192.0.2.2"}],
                                               "HealthCheckId": "hc-1"}},
    {"Action": "CREATE", "ResourceRecordSet": {"Name": "b.example.com.", "Type": "A", "AliasTarget": {
        "HostedZoneId": "Z2", "DNSName": "lb.example.net.", "EvaluateTargetHealth": True}}},
]}


def botocore_request(op: str, **kwargs: Any) -> Any:
    """The request botocore's client would send (caught before it leaves)."""
    pytest.importorskip("botocore")
    from gitdns.providers.route53.api import boto3_client

    client: Any = boto3_client("us-east-1", "https://r53.example.test", KEYS)
    seen: list[Any] = []

    def catch(request: Any, **_: Any) -> Any:
        seen.append(request)
        raise RuntimeError("caught")

    client.meta.events.register("before-send.route-53", catch)
    with pytest.raises(RuntimeError, match="caught"):
        getattr(client, op)(**kwargs)
    return seen[0]


def test_the_change_batch_body_is_botocore_s() -> None:
    sent = botocore_request("change_resource_record_sets", HostedZoneId="/hostedzone/Z1", ChangeBatch=BATCH)
    assert rest.change_batch_xml(BATCH) == sent.body
    assert sent.url == "https://r53.example.test/2013-04-01/hostedzone/Z1/rrset/"


def test_the_signature_is_botocore_s(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("botocore")
    import botocore.auth
    import botocore.credentials
    from botocore.awsrequest import AWSRequest

    client = rest.RestRoute53("https://r53.example.test:8443", "us-east-1", {**KEYS, "AWS_SESSION_TOKEN": "tok"},
                              lambda: None, connect_timeout=1, read_timeout=1, env={}, clock=lambda: 1_700_000_000)
    query = "maxitems=100&name=a%2Ab.example.com."
    uri = "/2013-04-01/hostedzone/Z1/rrset"
    mine = client._sign("GET", uri, query, b"")
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: datetime.datetime(2023, 11, 14, 22, 13, 20))
    request = AWSRequest(method="GET", url=f"https://r53.example.test:8443{uri}?{query}")
    creds = botocore.credentials.Credentials(KEYS["AWS_ACCESS_KEY_ID"], KEYS["AWS_SECRET_ACCESS_KEY"], "tok")
    botocore.auth.SigV4Auth(creds, "route53", "us-east-1").add_auth(request)
    assert mine["Authorization"] == request.headers["Authorization"]
    assert mine["x-amz-security-token"] == "tok"


def test_errors_read_as_botocore_s_through_map_error() -> None:
    batch = (b'<?xml version="1.0"?>\n<InvalidChangeBatch xmlns="https://route53.amazonaws.com/doc/2013-04-01/">'
             b"<Messages><Message>Tried to delete resource record set [name='a.example.com.', type='A'] but it "
             b"was not found</Message></Messages><RequestId>r-1</RequestId></InvalidChangeBatch>")
    exc = rest.ClientError(rest._error(batch, 400, {}), "ChangeResourceRecordSets")
    mapped = map_error(exc, "change_resource_record_sets")
    assert isinstance(mapped, Rejected) and mapped.code == "InvalidChangeBatch"
    assert "Tried to delete resource record set [name='a.example.com.', type='A'] but it was not found" in mapped.detail
    throttle = (b'<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><Error><Type>Sender</Type>'
                b"<Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>r-2</RequestId>"
                b"</ErrorResponse>")
    mapped = map_error(rest.ClientError(rest._error(throttle, 400, {"Retry-After": "3"}), "ListResourceRecordSets"),
                       "list_resource_record_sets")
    assert isinstance(mapped, ThrottledError) and "r-2" not in str(mapped)


def test_light_client_only_for_access_keys_and_a_plain_environment(tmp_path: Any) -> None:
    plain = {"AWS_CONFIG_FILE": str(tmp_path / "none")}
    assert rest.light_client("eu-west-1", None, KEYS, plain) == ("https://route53.amazonaws.com", "us-east-1")
    assert rest.light_client("cn-north-1", None, KEYS, plain) == ("https://route53.amazonaws.com.cn",
                                                                  "cn-northwest-1")
    assert rest.light_client("eu-west-1", "https://vpce.example.test/", KEYS, plain) == (
        "https://vpce.example.test", "eu-west-1")
    assert rest.light_client("eu-west-1", None, {}, plain) is None  # the default chain
    assert rest.light_client("eu-west-1", None, KEYS, {**plain, "HTTPS_PROXY": "http://proxy:3128"}) is None
    assert rest.light_client("eu-west-1", None, KEYS, {**plain, "AWS_ENDPOINT_URL": "https://x.test"}) is None
    config = tmp_path / "config"
    config.write_text("[default]\nca_bundle = /etc/ca.pem\n")
    assert rest.light_client("eu-west-1", None, KEYS, {"AWS_CONFIG_FILE": str(config)}) is None


def test_make_client_picks_the_light_client_for_access_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for var in rest.PROXY_VARS + rest.ENDPOINT_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert isinstance(make_client("us-east-1", "https://r53.example.test", KEYS), rest.RestRoute53)


@contextmanager
def _one_answer_server(answers: list[bytes]) -> Iterator[tuple[int, list[bytes]]]:
    """A loopback server answering each request on a connection with the next canned bytes, and
    closing it after the last; (its port, the requests seen)."""
    seen: list[bytes] = []

    def serve(conn: socket.socket, _number: int) -> None:
        for answer in answers:
            got = read_head(conn)
            if got is None:
                return
            seen.append(got[0] + b"\r\n\r\n" + got[1])
            conn.sendall(answer)

    with ServerThread(serve, name="route53-rest", backlog=1) as server:
        yield server.port, seen


def test_the_wire_reads_sized_chunked_and_closing_answers() -> None:
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
               b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
               b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nRetry-After: 2\r\nContent-Length: 2\r\n\r\nno"]
    with _one_answer_server(answers) as (port, seen):
        wire = rest.Wire("127.0.0.1", port, f"127.0.0.1:{port}", None, 5, 5)
        first = wire.exchange("GET", "/a?b=c", {"x-amz-date": "d"}, b"")
        assert first == (200, {"content-length": "5"}, b"hello", True)
        assert wire.exchange("POST", "/p", {}, b"<x/>")[2:] == (b"abcde", True)
        status, headers, body, keep = wire.exchange("GET", "/e", {}, b"")
        assert (status, headers["retry-after"], body, keep) == (400, "2", b"no", False)
        wire.close()
    assert seen[0].startswith(b"GET /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:") and b"x-amz-date: d\r\n" in seen[0]
    assert b"Content-Length: 4\r\n" in seen[1]


def test_the_wire_raises_a_connection_error_for_a_cut_answer() -> None:
    with _one_answer_server([b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort"]) as (port, _):
        wire = rest.Wire("127.0.0.1", port, "127.0.0.1", None, 5, 5)
        with pytest.raises(ConnectionError):
            wire.exchange("GET", "/", {}, b"")
        wire.close()


def test_the_default_trust_is_botocore_s() -> None:
    pytest.importorskip("botocore")
    from botocore.httpsession import get_cert_path

    assert rest._default_ca_file() == get_cert_path(True)
