"""Route53 health checks for the `route53` provider (optional: setting ``healthChecks``)."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

from gitdns.core.records import Change, RecordKey
from gitdns.providers.route53.api import Rejected

log = logging.getLogger(__name__)

HEALTH_CONFIG = {"Port": 443, "Type": "HTTPS", "ResourcePath": "/", "RequestInterval": 30, "FailureThreshold": 3}
_OWNER = re.compile(r"external-dns/owner=([^,]+)")


class HealthChecks:
    """Route53 health checks for weighted CNAME rows whose target is an A name: one HTTPS
    check per target IP (``CallerReference`` derived from zone, set id and IP, so a re-run
    finds the same check), a CALCULATED check (healthy while one child is) when the name has
    several IPs; tagged ``gitdns-owner`` and ``gitdns-zone``.  A check is deleted once no row
    of the zone uses it (so `gitdns prune-owner`, which deletes the owner's rows, removes
    them too); only checks tagged with this zone are ever deleted."""

    def __init__(self, call: Callable[..., dict[str, Any]], zone: str,
                 a_values: Callable[[str], tuple[str, ...]]) -> None:
        self._call, self.zone, self._a_values = call, zone, a_values
        self._known: dict[str, str] = {}  # CallerReference -> id

    def ids_for(self, members: Sequence[Change], changes: Sequence[Change]) -> dict[RecordKey, str]:
        owner = next((m[1] for c in members if c.new is not None and c.new.type == "TXT"
                      for v in c.new.values for m in [_OWNER.search(v)] if m), "")
        out: dict[RecordKey, str] = {}
        for change in members:
            new = change.new
            if new is None or new.weight is None or new.type != "CNAME" or len(new.values) != 1:
                continue
            target = new.values[0]
            ips = next((c.new.values for c in changes if c.new is not None and c.new.type == "A"
                        and c.new.name == target and not c.new.set_id), None)
            if ips is None:
                ips = self._a_values(target)
            ids = [self._ensure(f"{new.set_id}|{ip}", {"IPAddress": ip, **HEALTH_CONFIG}, owner) for ip in ips]
            if len(ids) == 1:
                out[new.key] = ids[0]
            elif ids:
                out[new.key] = self._ensure(f"{new.set_id}|calculated|{'|'.join(sorted(ids))}",
                                            {"Type": "CALCULATED", "ChildHealthChecks": sorted(ids),
                                             "HealthThreshold": 1}, owner)
        return out

    def _ensure(self, what: str, config: dict[str, Any], owner: str) -> str:
        ref = "gitdns-" + hashlib.sha256(f"{self.zone}|{what}".encode()).hexdigest()[:48]
        if ref in self._known:
            return self._known[ref]
        check = self._call("create_health_check", CallerReference=ref, HealthCheckConfig=config)["HealthCheck"]
        check_id = str(check["Id"])
        tags = [{"Key": "gitdns-zone", "Value": self.zone}]
        if owner:
            tags.append({"Key": "gitdns-owner", "Value": owner})
        self._call("change_tags_for_resource", ResourceType="healthcheck", ResourceId=check_id, AddTags=tags)
        self._known[ref] = check_id
        return check_id

    def retire(self, ids: Collection[str]) -> None:
        for check_id in sorted(ids):
            try:
                tags = self._call("list_tags_for_resource", ResourceType="healthcheck", ResourceId=check_id)
                values = {t["Key"]: t["Value"] for t in (tags.get("ResourceTagSet") or {}).get("Tags", ())}
                if values.get("gitdns-zone") != self.zone:
                    continue
                config = self._call("get_health_check", HealthCheckId=check_id)["HealthCheck"]["HealthCheckConfig"]
                self._call("delete_health_check", HealthCheckId=check_id)
                self._known = {k: v for k, v in self._known.items() if v != check_id}
                self.retire(config.get("ChildHealthChecks") or ())
            except Rejected as exc:  # in use by a row someone else wrote, or gone already
                log.info("health: check=%s not deleted: %s", check_id, exc.code)
