"""Health settings from git: publishUnchecked, and probe headers from headersSecret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitdns.adapters.repo import load_schemas
from gitdns.agent.health import MonitorHealth
from gitdns.core.health import HealthSettings
from gitdns.core.health.filter import HealthTarget
from gitdns.core.model import HealthCheck
from gitdns.core.validate import check
from gitdns.providers.probeheaders import HeadersNotListed, HeadersUnavailable, ProbeHeaders

POLICY = ("apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata:\n  name: p\nspec:\n"
          "  targetRef: {hosts: [a.example.com]}\n  healthCheck: {publishUnchecked: false, headersSecret: probe}\n")


def test_publish_unchecked_is_a_setting_with_default_true() -> None:
    state = check({"p.yaml": POLICY}, load_schemas()).state
    hc = state.policies[0].health
    assert hc is not None and hc.publish_unchecked is False
    assert HealthSettings.for_policy(hc).publish_unknown is False
    assert HealthSettings.for_policy(HealthCheck()).publish_unknown is True


def test_headers_come_from_the_secret_file_and_never_show(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "probe").write_text(json.dumps({"Authorization": "Bearer s3cr3t"}))
    load = ProbeHeaders(["probe", "absent"], "gitdns-system", tmp_path, in_cluster=False).read
    assert load("probe") == (("Authorization", "Bearer s3cr3t"),)
    with pytest.raises(HeadersUnavailable):
        load("absent")
    with pytest.raises(HeadersNotListed):  # the operator lists the Secrets a headersSecret may name
        load("other")
    health = MonitorHealth(lambda: None, load)
    health.monitor.set_targets = lambda specs: None  # type: ignore[method-assign]
    health.monitor.start = lambda: None  # type: ignore[method-assign]
    target = HealthTarget("a.example.com", "192.0.2.1", HealthCheck(headers_secret="probe"))
    health.set_targets([target])
    spec, _ = health.current[target.target_id]
    assert spec.headers == (("Authorization", "Bearer s3cr3t"),)
    assert "s3cr3t" not in repr(spec)
