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

import secrets
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.providers.moto_server import MotoServer  # noqa: E402


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


class Moto(MotoServer):
    """``moto_server`` with Route53's batch semantics (module doc) on a free loopback port, over
    TLS with the test CA (provider endpoints are https only); one hosted zone ``zone``."""

    def __init__(self, directory: Path, zone: str) -> None:
        super().__init__(directory, [sys.executable, str(Path(__file__).resolve()), "moto"], cwd=ROOT,
                         pythonpath=ROOT, wait=60)
        made = self.client().create_hosted_zone(Name=zone + ".", CallerReference=secrets.token_hex(8))
        self.zone_id = str(made["HostedZone"]["Id"]).rsplit("/", 1)[-1]

    def agent_env(self) -> dict[str, str]:
        """What an agent needs to reach it: the test CA, credentials moto takes, a region."""
        return {**self.tls.env(), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1"}



if __name__ == "__main__":
    if sys.argv[1:2] == ["moto"]:
        serve_moto(sys.argv[2:])
    else:
        raise SystemExit("usage: python bench/soak_peers.py moto [moto_server arguments]")
