"""The route53 provider against a real `moto_server` on 127.0.0.1: request/response SHAPES and
PAGING only.  moto accepts stale deletes, duplicate creates and deletes a set identifier
across the whole zone (moto 5.2.5's ``change_resource_record_sets``), so compare-and-swap and the
loadbalanced layout are tested against `tests/providers/route53_fake.py`, never here."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.core.model import CredentialsRef, ProviderRef
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.fences import Fences
from gitdns.providers.route53.provider import Route53Provider, from_ref
from tests.providers.tls import client_context, loopback_tls

INSTALL_HINT = "pip install moto flask flask-cors boto3  (or: pip install -e '.[test]')"


def _moto_server() -> list[str] | None:
    if not all(importlib.util.find_spec(m) for m in ("moto", "flask", "flask_cors", "boto3")):
        return None
    exe = shutil.which("moto_server")
    return [exe] if exe else [sys.executable, "-m", "moto.server"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1, context=client_context()) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    command = _moto_server()
    if command is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"moto_server is not installed: {INSTALL_HINT}")
        pytest.skip(f"moto_server is not installed: {INSTALL_HINT}")
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("w") as out:
        tls = loopback_tls()  # provider endpoints are HTTPS: moto serves the test CA's certificate
        proc = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(port), "--ssl-cert", str(tls.cert_file),
                                 "--ssl-key", str(tls.key_file)], stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"https://127.0.0.1:{port}"
    try:
        for _ in range(400):  # polled readiness, not a timing assertion
            if _up(endpoint + "/moto-api/") or proc.poll() is not None:
                break
            time.sleep(0.05)
        if proc.poll() is not None or not _up(endpoint + "/moto-api/"):
            pytest.fail(f"moto_server did not start: {log.read_text()[-2000:]}")
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(params=["botocore", "rest"])
def provider(moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             request: pytest.FixtureRequest) -> Route53Provider:
    """Both clients: botocore's (the default credential chain) and the provider's own
    (`route53_rest.RestRoute53`, taken for a Zone's access keys)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    urllib.request.urlopen(urllib.request.Request(moto_endpoint + "/moto-api/reset", method="POST"), timeout=5,
                           context=client_context())
    import boto3

    boto3.client("route53", endpoint_url=moto_endpoint, region_name="us-east-1").create_hosted_zone(
        Name="example.test.", CallerReference=str(uuid.uuid4()))
    from gitdns.providers.route53.rest import RestRoute53

    if request.param == "rest":
        ref = ProviderRef("route53", (("endpoint", moto_endpoint), ("waitInsync", "true")), CredentialsRef(env="AWS"))
        fences = Fences.parse(provider_endpoints=moto_endpoint, credentials_env_prefixes="AWS")
    else:
        ref = ProviderRef("route53", (("endpoint", moto_endpoint), ("waitInsync", "true")))
        fences = Fences.parse(provider_endpoints=moto_endpoint)
    provider = from_ref("example.test", ref, tmp_path, fences=fences)
    assert isinstance(provider._client, RestRoute53) == (request.param == "rest")
    return provider


def _a(i: int) -> RecordSet:
    return RecordSet(f"h{i:04d}.example.test", "A", 60, (f"10.0.{i // 250}.{i % 250 + 1}",))


def test_zone_found_by_name_and_listed(provider: Route53Provider) -> None:
    zones = provider.zones()
    assert [z.domain for z in zones] == ["example.test"]
    assert provider.zone_id("example.test") == zones[0].id


def test_1200_records_across_batches_read_back_paged_and_deleted(provider: Route53Provider) -> None:
    recs = [_a(i) for i in range(1200)]
    txt = RecordSet("t.example.test", "TXT", 60, ('say "hi" \\ there', "x" * 300))
    creates = [Change(Action.CREATE, None, r, r.key) for r in [*recs, txt]]
    result = provider.apply("example.test", creates)
    assert result.ok and len(result.applied) == 1201 and len(result.change_ids) == 2  # 1,000 values per request
    snap = provider.read("example.test")
    own = {r.key: r for r in snap.records if r.type in ("A", "TXT")}
    assert len(own) == 1201 and own[recs[777].key] == recs[777] and own[txt.key] == txt
    assert {r.type for r in snap.records} >= {"NS"}  # the apex NS moto creates, read as a (foreign) record
    part = provider.read("example.test", ["h0005.example.test", "h1199.example.test", "nope.example.test"])
    assert part.records == (recs[5], recs[1199])
    update = Change(Action.UPDATE, recs[5], recs[5].with_values(["192.0.2.5"]), recs[5].key)
    assert provider.apply("example.test", [update]).ok
    assert provider.read("example.test", [recs[5].name]).records[0].values == ("192.0.2.5",)
    deletes = [Change(Action.DELETE, r, None, r.key) for r in [*recs[6:], txt]]
    assert provider.apply("example.test", deletes).ok
    left = [r for r in provider.read("example.test").records if r.type == "A"]
    assert len(left) == 6


def test_weighted_and_geo_rows_keep_their_shape(provider: Route53Provider) -> None:
    rows = [
        RecordSet("w.example.test", "CNAME", 60, ("a.example.test",), set_id="a", weight=120),
        RecordSet("g.example.test", "CNAME", 300, ("eu.example.test",), set_id="GEO-EU", geo="GEO-EU"),
        RecordSet("g.example.test", "CNAME", 300, ("us.example.test",), set_id="US", geo="US"),
        RecordSet("g.example.test", "CNAME", 300, ("eu.example.test",), set_id="default", geo="*"),
        RecordSet("*.wild.example.test", "A", 60, ("192.0.2.1",)),
    ]
    assert provider.apply("example.test", [Change(Action.CREATE, None, r, r.key) for r in rows]).ok
    read = {r.key: r for r in provider.read("example.test").records}
    for row in rows:
        assert read[row.key] == row


def test_pages_are_parsed_by_the_fast_path_and_read_the_same_without_it(
        provider: Route53Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitdns.providers.route53 import listing as route53_listing

    rows = [*[_a(i) for i in range(650)], RecordSet("t.example.test", "TXT", 60, ('a "b" & <c>', "é")),
            RecordSet("w.example.test", "CNAME", 60, ("a.example.test",), set_id="a", weight=7)]
    assert provider.apply("example.test", [Change(Action.CREATE, None, r, r.key) for r in rows]).ok
    taken: list[int] = []
    real = route53_listing.split_rows

    def counting(body: bytes) -> Any:
        out = real(body)
        taken.append(0 if out is None else len(out[0]))
        return out

    monkeypatch.setattr(route53_listing, "split_rows", counting)
    fast = provider.read("example.test")
    assert len(taken) == 3 and all(taken)  # 300 per page, every page taken by the fast path
    monkeypatch.setattr(route53_listing, "split_rows", lambda body: None)  # the whole page parsed
    assert provider.read("example.test") == fast
    assert {r.key: r for r in fast.records}[rows[-2].key] == rows[-2]
