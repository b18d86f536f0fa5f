"""tests/alert_eval.py evaluates the rules' PromQL forms as Prometheus does (the fault-alert
tests rest on it): ranges, a counter born at 1, counter resets, ``for``, ``or``, matchers."""

from __future__ import annotations

import pytest

from tests.alert_eval import Expr, Timeline, firing


def pages(*values: float | None, name: str = "c_total", labels: str = 'kind="x"') -> list[tuple[float, str]]:
    out = []
    for i, value in enumerate(values):
        body = "" if value is None else f"# TYPE c counter\n{name}{{{labels}}} {value}\n"
        out.append((60.0 * i, body + "# TYPE g gauge\ng{type=\"A\",reason=\"R\"} 0\n"))
    return out


def value(expr: str, timeline: Timeline, t: float) -> dict[str, float]:
    return {dict(labels).get("kind", ""): v for labels, v in Expr(expr).evaluate(timeline, t).items()}


def test_increase_needs_two_samples_in_the_range_and_follows_resets() -> None:
    tl = Timeline.of(pages(1, 1, 3, 0, 2))
    assert value("increase(c_total[10m])", tl, 0) == {}  # one sample: a series born at 1 shows nothing
    assert value("increase(c_total[10m])", tl, 60) == {"x": 0}
    assert value("increase(c_total[10m])", tl, 240) == {"x": 4}  # 1 -> 3, reset to 0, -> 2
    assert value("increase(c_total[2m])", tl, 240) == {"x": 2}  # (t - 2m, t]: the last two scrapes


def test_comparisons_filter_and_aggregations_keep_their_by_labels() -> None:
    tl = Timeline.of(pages(0, 5))
    assert value('sum by (kind) (increase(c_total{kind=~"x|y"}[5m])) > 0', tl, 60) == {"x": 5}
    assert value('sum by (kind) (increase(c_total{kind!="x"}[5m])) > 0', tl, 60) == {}
    assert len(Expr('max by (reason) (g{type="A"} == 0) or c_total > 100').evaluate(tl, 60)) == 1
    assert value("time() - c_total > 50", tl, 60) == {"x": 55}


def test_for_holds_an_alert_until_it_was_true_that_long() -> None:
    rule = {"alert": "A", "expr": "c_total > 0", "for": "3m", "labels": {"severity": "warning"}}
    assert firing(rule, Timeline.of(pages(1, 1, 1))) == []  # true for 2 minutes only
    [alert] = firing(rule, Timeline.of(pages(1, 1, 1, 1)))
    assert alert == {"alertname": "A", "severity": "warning", "kind": "x", "namespace": "gitdns-system",
                     "pod": "gitdns-0", "instance": "10.0.0.7:9090", "job": "gitdns"}
    assert firing(rule, Timeline.of(pages(1, 1, None, 1, 1))) == []  # a gap (a stale series) restarts it


@pytest.mark.parametrize("expr", ["rate(c_total[5m]) > 0", "c_total + c_total", "topk(1, c_total)"])
def test_a_form_the_rules_do_not_use_is_refused(expr: str) -> None:
    with pytest.raises(ValueError):
        Expr(expr).evaluate(Timeline.of(pages(1, 2)), 60)
