"""The soak's servers on loopback: BIND (tests/e2e/dns_servers.py) and moto's Route53.

moto's own ``ChangeResourceRecordSets`` is not Route53's (it accepts stale deletes and
duplicate creates, and deletes a set identifier across the zone: tests/e2e/dnsoperator_zone.py
says how), so the soak runs the Route53 semantics that module gives moto — a batch checked
whole, DELETE only of the exact current rrset, CREATE only of an absent one — and, since
``moto_server`` serves requests on threads, one lock around each change batch and each listing,
as Route53 applies a batch atomically.  Everything else is moto's.

    python bench/soak_peers.py moto -H 127.0.0.1 -p PORT --ssl-cert CERT --ssl-key KEY
"""

from __future__ import annotations

import os
import secrets
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e import dns_servers  # noqa: E402

INSTALL_HINT = "pip install moto flask flask-cors boto3  (the test extra)"


def geo_code(location: Mapping[str, str]) -> str:
    """Route53's GeoLocation as a gitdns geo code (``GEO-XX`` for a continent)."""
    if "ContinentCode" in location:
        return "GEO-" + location["ContinentCode"]
    return location.get("CountryCode", "*")


def serve_moto(argv: list[str]) -> None:
    from moto.route53.models import Route53Backend
    from moto.server import main

    from tests.e2e.dnsoperator_zone import _change_resource_record_sets

    lock = threading.Lock()
    listing = Route53Backend.list_resource_record_sets

    def change(self: Any, zoneid: str, change_list: list[dict[str, Any]]) -> None:
        with lock:
            _change_resource_record_sets(self, zoneid, change_list)

    def list_rrsets(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return listing(self, *args, **kwargs)

    Route53Backend.change_resource_record_sets = change  # type: ignore[method-assign]
    Route53Backend.list_resource_record_sets = list_rrsets  # type: ignore[method-assign]
    main(argv)


class Moto:
    """``moto_server`` with Route53's batch semantics (module doc) on a free loopback port, over
    TLS with the test CA (provider endpoints are https only); one hosted zone ``zone``."""

    def __init__(self, directory: Path, zone: str) -> None:
        import importlib.util

        if not all(importlib.util.find_spec(m) for m in ("moto", "flask", "flask_cors", "boto3")):
            raise dns_servers.ToolMissing(f"moto is not installed: {INSTALL_HINT}")
        from tests.providers.tls import loopback_tls

        self.tls = loopback_tls()
        self.port = dns_servers.free_port()
        directory.mkdir(parents=True, exist_ok=True)
        self.log = directory / "moto.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "moto", "-H", "127.0.0.1", "-p", str(self.port),
                 "--ssl-cert", str(self.tls.cert_file), "--ssl-key", str(self.tls.key_file)],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 60
        while not self._up():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        made = self.client().create_hosted_zone(Name=zone + ".", CallerReference=secrets.token_hex(8))
        self.zone_id = str(made["HostedZone"]["Id"]).rsplit("/", 1)[-1]

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _up(self) -> bool:
        try:
            context = ssl.create_default_context(cafile=str(self.tls.ca_file))
            with urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1, context=context) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def client(self) -> Any:
        import boto3

        return boto3.client("route53", endpoint_url=self.endpoint, region_name="us-east-1",
                            verify=str(self.tls.ca_file), aws_access_key_id="testing",
                            aws_secret_access_key="testing")

    def agent_env(self) -> dict[str, str]:
        """What an agent needs to reach it: the test CA, credentials moto takes, a region."""
        return {**self.tls.env(), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1"}

    def stop(self) -> None:
        dns_servers.stop_process(self.proc)


if __name__ == "__main__":
    if sys.argv[1:2] == ["moto"]:
        serve_moto(sys.argv[2:])
    else:
        raise SystemExit("usage: python bench/soak_peers.py moto [moto_server arguments]")
