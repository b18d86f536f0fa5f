"""What plan, apply and the groups preview read of a status branch (health.yaml's unhealthy
targets, summary.yaml's applied revision): anyone who can push a status branch writes it, so
any shape reads as "nothing said", never as a crash."""

from __future__ import annotations

import pytest

from gitdns.reconcile.run import applied_of, unhealthy_of


@pytest.mark.parametrize("text", ["", "targets: [a, b]", "targets: 3", "- a\n- b\n", "targets: {", "&a [*a]",
                                  "targets: {h|1: unhealthy}", "9" * 5000])
def test_any_shape_of_health_yaml_reads_as_nothing_unhealthy(text: str) -> None:
    assert unhealthy_of(text) == frozenset()


def test_unhealthy_targets_are_read() -> None:
    text = ("targets:\n  api.example.com|192.0.2.10: {state: unhealthy}\n"
            "  api.example.com|192.0.2.11: {state: healthy}\n")
    assert unhealthy_of(text) == frozenset({"api.example.com|192.0.2.10"})


@pytest.mark.parametrize(("text", "applied"), [("appliedRevision: abc1234", "abc1234"), ("appliedRevision: [x]", ""),
                                                ("appliedRevision: 12", ""), ("a: [", ""), ("", "")])
def test_applied_revision(text: str, applied: str) -> None:
    assert applied_of(text) == applied
