"""gitdns.agent.metrics: counters, gauges that replace their label sets, the revision swap."""

from __future__ import annotations

import pytest

from gitdns.agent.metrics import CONTENT_TYPE, Metrics


def test_own_registry_not_the_global_one() -> None:
    from prometheus_client import REGISTRY

    a, b = Metrics(), Metrics()
    a.record_apply("example.com", writes=1)
    assert a.registry is not REGISTRY
    assert b.value("gitdns_zone_writes_total", {"zone": "example.com"}) is None


def test_record_apply_counts_seed_000_events() -> None:
    m = Metrics()
    m.record_apply("example.com", writes=3, deletes=1, prunes=2)
    m.record_apply("example.com", writes=2)
    m.record_desired_set_change("example.com")
    zone = {"zone": "example.com"}
    assert m.value("gitdns_zone_writes_total", zone) == 5
    assert m.value("gitdns_zone_deletes_total", zone) == 1
    assert m.value("gitdns_zone_prunes_total", zone) == 2
    assert m.value("gitdns_owned_desired_set_changes_total", zone) == 1
    with pytest.raises(ValueError):
        m.record_apply("example.com", writes=-1)


def test_counters_by_label() -> None:
    m = Metrics()
    m.record_stale_retries("example.com", 2)
    m.record_git_error("Unreachable")
    m.record_git_error("Unreachable")
    m.record_provider_call("example.com", "read")
    m.record_provider_call("example.com", "apply", 3)
    m.record_webhook("github", "accepted")
    m.record_webhook("gitlab", "forged")
    assert m.value("gitdns_stale_write_retries_total", {"zone": "example.com"}) == 2
    assert m.value("gitdns_git_errors_total", {"reason": "Unreachable"}) == 2
    assert m.value("gitdns_provider_calls_total", {"zone": "example.com", "op": "apply"}) == 3
    assert m.value("gitdns_webhook_deliveries_total", {"provider": "github", "result": "accepted"}) == 1
    assert m.value("gitdns_webhook_deliveries_total", {"provider": "gitlab", "result": "forged"}) == 1
    with pytest.raises(ValueError):
        m.record_webhook("github", "maybe")


def test_revision_info_swaps_its_label() -> None:
    m = Metrics()
    assert m.revision is None
    m.set_revision("abc1234")
    assert m.value("gitdns_applied_revision_info", {"revision": "abc1234"}) == 1
    m.set_revision("abc1234")  # unchanged: still one series
    m.set_revision("def5678")
    assert m.value("gitdns_applied_revision_info", {"revision": "def5678"}) == 1
    assert m.value("gitdns_applied_revision_info", {"revision": "abc1234"}) is None
    assert m.render().count(b"gitdns_applied_revision_info{") == 1
    assert m.revision == "def5678"


def test_conflicts_replace_the_zones_reasons() -> None:
    m = Metrics()
    m.set_conflicts("example.com", {"ForeignOwner": 2, "TypeClash": 1})
    m.set_conflicts("other.com", {"ForeignOwner": 4})
    m.set_conflicts("example.com", {"ForeignOwner": 1})
    assert m.value("gitdns_conflicts", {"zone": "example.com", "reason": "ForeignOwner"}) == 1
    assert m.value("gitdns_conflicts", {"zone": "example.com", "reason": "TypeClash"}) is None
    assert m.value("gitdns_conflicts", {"zone": "other.com", "reason": "ForeignOwner"}) == 4
    m.set_conflicts("example.com", {})
    assert m.value("gitdns_conflicts", {"zone": "example.com", "reason": "ForeignOwner"}) is None


def test_validation_problems_replace_the_zone_set() -> None:
    m = Metrics()
    m.set_validation_problems({"a.com": 2, "b.com": 1})
    m.set_validation_problems({"b.com": 3})
    assert m.value("gitdns_validation_problems", {"zone": "a.com"}) is None
    assert m.value("gitdns_validation_problems", {"zone": "b.com"}) == 3


def test_cycle_success_and_readiness_gauges() -> None:
    m = Metrics()
    assert m.value("gitdns_ready") == 0
    m.observe_cycle(1.5)
    m.observe_cycle(0.2)
    m.mark_success(1_700_000_000.0)
    m.set_ready(True)
    assert m.value("gitdns_cycle_last_duration_seconds") == 0.2
    assert m.value("gitdns_cycle_duration_seconds_count") == 2
    assert m.value("gitdns_cycle_duration_seconds_sum") == pytest.approx(1.7)
    assert m.value("gitdns_last_success_timestamp_seconds") == 1_700_000_000.0
    assert m.value("gitdns_ready") == 1
    m.mark_success()
    assert (m.value("gitdns_last_success_timestamp_seconds") or 0) > 1_700_000_000.0
    m.set_ready(False)
    assert m.value("gitdns_ready") == 0


def test_render_is_text_exposition_of_gitdns_names() -> None:
    m = Metrics()
    m.record_apply("example.com", writes=1)
    text = m.render().decode()
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")
    assert "# TYPE gitdns_zone_writes_total counter" in text
    assert 'gitdns_zone_writes_total{zone="example.com"} 1.0' in text
    assert "# TYPE gitdns_cycle_duration_seconds histogram" in text
    assert "gitdns_ready 0.0" in text
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert names and all(name.startswith("gitdns_") for name in names)
