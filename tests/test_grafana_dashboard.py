"""deploy/grafana/gitdns-dashboard.json: an importable Grafana dashboard whose every expression
reads metrics the agent and the orchestrator export, and which shows every metric they export.

The exported metrics are read from the registries the daemons build (`Metrics`,
`OrchestratorMetrics`), never from a regex of the source: each family's name, type and label
names.  The panels' PromQL is parsed by a PromQL parser (promql-parser, the test extra), the
Grafana variables replaced first, and each selector's metric and label names checked, and the
labels each ``by (...)`` groups on.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitdns.agent.metrics import Metrics
from gitdns.core.conditions import Condition
from gitdns.orchestrator.metrics import OrchestratorMetrics

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "gitdns-dashboard.json"
PREFIXES = ("gitdns_", "health_orchestrator_")
# labels a PodMonitor's scrape adds to every series, and the histogram bucket label
SCRAPE_LABELS = frozenset({"namespace", "pod", "instance", "job", "container", "endpoint", "service"})
# Exported families no panel shows, each with why (none today: a new metric goes on a panel or here).
NOT_SHOWN: Mapping[str, str] = {}
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def promql() -> Any:
    try:
        import promql_parser
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("promql-parser is required in CI (the test extra: pip install -e '.[test]')")
        pytest.skip("promql-parser not installed (the test extra)")
    return promql_parser


# --- what the code exports -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    type: str  # counter, gauge, histogram, info, ...
    labels: frozenset[str]

    def series(self) -> frozenset[str]:
        """The names its samples are queried by."""
        return frozenset({
            "counter": {f"{self.name}_total"},
            "histogram": {f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count"},
            "info": {f"{self.name}_info"},
        }.get(self.type, {self.name}))


def _families(registry: Any, wrappers: Iterator[Any]) -> dict[str, Family]:
    labels: dict[str, set[str]] = {}
    for wrapper in wrappers:  # the labelled metrics' declared names (children may not exist yet)
        described = wrapper.describe()[0]
        labels.setdefault(described.name, set()).update(getattr(wrapper, "_labelnames", ()))
    found: dict[str, Family] = {}
    for family in registry.collect():
        names = set(labels.get(family.name, ()))
        for sample in family.samples:
            names.update(sample.labels)
        found[family.name] = Family(family.name, family.type, frozenset(names))
    return found


def _wrappers(owner: object) -> Iterator[Any]:
    from prometheus_client.metrics import MetricWrapperBase

    return (v for v in vars(owner).values() if isinstance(v, MetricWrapperBase))


def exported() -> dict[str, Family]:
    """Every family of the agent's and the orchestrator's registries, the families built at scrape
    time given one series each (so their label names show)."""
    agent = Metrics()
    agent.set_conditions([Condition("Healthy", False, "AllTargetsUnhealthy")])
    orchestrator = OrchestratorMetrics()
    orchestrator.set_nodes({"node-a": ("10.0.0.1", True, 0, 0.01)})
    orchestrator.set_conditions((("Ready", True, "Ready"),))
    orchestrator.set_faults({"render": "RenderFailed"})
    families = _families(agent.registry, _wrappers(agent))
    families |= _families(orchestrator.registry, _wrappers(orchestrator))
    return families


# --- what the dashboard asks ---------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels(doc: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for panel in doc["panels"]:
        yield panel
        yield from panel.get("panels", ())  # a collapsed row holds its panels


def expressions(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(panel title, expr)`` of every query of every panel."""
    for panel in panels(doc):
        for target in panel.get("targets", ()):
            yield panel["title"], target["expr"]


def variables(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {v["name"]: v for v in doc["templating"]["list"]}


def substituted(expr: str, names: set[str]) -> str:
    """``expr`` as Prometheus receives it: Grafana's interval macros as durations, each
    dashboard variable as a regex matching anything (every variable is used in ``=~``)."""
    for macro, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(macro, value)
    used = set(re.findall(r"\$(\w+)", expr))
    assert used <= names, f"{expr}: variables {sorted(used - names)} are not defined"
    return re.sub(r"\$(\w+)", ".*", expr)


@dataclass(frozen=True)
class Selector:
    name: str
    labels: frozenset[str]


def selectors(pq: Any, expr: str) -> tuple[list[Selector], list[tuple[frozenset[str], list[Selector]]]]:
    """The vector selectors of ``expr`` (name and matched labels), and each aggregation's ``by``
    labels with the selectors below it."""
    tree = pq.parse(expr)
    found: list[Selector] = []
    groupings: list[tuple[frozenset[str], list[Selector]]] = []

    def below(node: Any) -> list[Selector]:
        inner: list[Selector] = []
        pq.walk(node, lambda n: inner.append(_selector(pq, n)) if isinstance(n, pq.VectorSelector) else None)
        return inner

    def visit(node: Any) -> None:
        if isinstance(node, pq.VectorSelector):
            found.append(_selector(pq, node))
        elif isinstance(node, pq.AggregateExpr) and node.modifier is not None:
            groupings.append((frozenset(node.modifier.labels), below(node.expr)))

    pq.walk(tree, visit)
    return found, groupings


def _selector(pq: Any, node: Any) -> Selector:
    matched = {m.name for m in node.matchers.matchers} - {"__name__"}
    return Selector(node.name or "", frozenset(matched))


def family_of(series: str, families: Mapping[str, Family]) -> Family | None:
    return next((f for f in families.values() if series in f.series()), None)


# --- the tests -----------------------------------------------------------------------------------------


def test_the_registries_are_read_and_every_family_is_ours() -> None:
    families = exported()
    assert {"gitdns_zone_writes", "gitdns_cycle_duration_seconds", "gitdns_condition",
            "health_orchestrator_node_status", "health_orchestrator_faults"} <= set(families)
    assert families["gitdns_cycle_duration_seconds"].type == "histogram"
    assert families["gitdns_zone_writes"].type == "counter"
    assert "zone" in families["gitdns_provider_errors"].labels
    assert all(name.startswith(PREFIXES) for name in families)  # the expressions' names are found by prefix


def test_the_dashboard_is_importable_json() -> None:
    doc = dashboard()
    assert 36 <= doc["schemaVersion"] <= 41
    assert doc["uid"] and doc["title"] and doc.get("id") is None  # an import gives it an id
    source = variables(doc)["datasource"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    ids = [p["id"] for p in panels(doc)]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in panels(doc):
        assert panel["type"] in {"row", "stat", "timeseries", "table", "state-timeline"}, panel["title"]
        x, w = panel["gridPos"]["x"], panel["gridPos"]["w"]
        assert x >= 0 and x + w <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            assert var["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, var["name"]


def test_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard()["panels"]:
        g = panel["gridPos"]
        for row in range(g["y"], g["y"] + g["h"]):
            for col in range(g["x"], g["x"] + g["w"]):
                assert (row, col) not in cells, f"{panel['title']} overlaps {cells[(row, col)]}"
                cells[(row, col)] = panel["title"]


def test_every_expression_reads_exported_metrics_and_their_labels() -> None:
    pq = promql()
    doc = dashboard()
    families = exported()
    names = set(variables(doc))
    checked = 0
    for title, expr in expressions(doc):
        found, groupings = selectors(pq, substituted(expr, names))
        assert found, f"{title}: {expr} reads no metric"
        for sel in found:
            family = family_of(sel.name, families)
            assert family is not None, f"{title}: {sel.name} is not a metric gitdns exports"
            extra = {"le"} if sel.name.endswith("_bucket") else set()
            unknown = sel.labels - family.labels - SCRAPE_LABELS - extra
            assert not unknown, f"{title}: {sel.name} has no label(s) {sorted(unknown)}"
            checked += 1
        for labels, inner in groupings:
            have = set(SCRAPE_LABELS)
            for sel in inner:
                family = family_of(sel.name, families)
                have |= (family.labels if family else set()) | ({"le"} if sel.name.endswith("_bucket") else set())
            assert labels <= have, f"{title}: {expr} groups by {sorted(labels - have)}, which no series has"
    assert checked >= 40


def test_the_variables_query_exported_metrics() -> None:
    pq = promql()
    doc = dashboard()
    families = exported()
    for var in doc["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
        assert match, f"{var['name']}: {query}"
        (sel,), _ = selectors(pq, substituted(match[1], set(variables(doc))))
        family = family_of(sel.name, families)
        assert family is not None, f"{var['name']}: {sel.name} is not exported"
        assert match[2] in family.labels | SCRAPE_LABELS, f"{var['name']}: {sel.name} has no label {match[2]}"


def test_every_exported_family_is_on_a_panel() -> None:
    pq = promql()
    doc = dashboard()
    families = exported()
    shown: set[str] = set()
    for _, expr in expressions(doc):
        found, _ = selectors(pq, substituted(expr, set(variables(doc))))
        shown |= {f.name for sel in found for f in [family_of(sel.name, families)] if f is not None}
    missing = set(families) - shown - set(NOT_SHOWN)
    assert not missing, f"exported but on no panel (add a panel, or to NOT_SHOWN with why): {sorted(missing)}"
    assert not set(NOT_SHOWN) & shown, "NOT_SHOWN lists a family a panel shows"
    assert set(NOT_SHOWN) <= set(families), "NOT_SHOWN lists a family gitdns no longer exports"


def test_the_prefix_scan_misses_no_metric_name() -> None:
    """Every metric-like word of an expression is a selector the parser found (no name hides
    in a string or a function the check above would not see)."""
    pq = promql()
    doc = dashboard()
    for title, expr in expressions(doc):
        found, _ = selectors(pq, substituted(expr, set(variables(doc))))
        words = set(re.findall(r"\b(?:gitdns|health_orchestrator)_\w+", expr))
        assert words == {s.name for s in found}, title


def test_the_deploy_readme_points_at_the_dashboard() -> None:
    assert "grafana/gitdns-dashboard.json" in (ROOT / "deploy" / "README.md").read_text(encoding="utf-8")
