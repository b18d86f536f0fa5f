"""The integration pages (docs/integrations/*.md) name only what exists: every metric one of the
daemons exports, every `gitdns` flag and `GITDNS_*` setting the parser knows, every file and
component of the repository, and every alert of the shipped PrometheusRules (with its `for` and
severity as the rule has them)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gitdns.agent.metrics import Metrics
from gitdns.cli.parser import build_parser
from gitdns.orchestrator.metrics import OrchestratorMetrics
from tests.docs.examples import DOCS, ROOT

PAGES = sorted((DOCS / "integrations").glob("*.md"))
RULES = {
    "agent": ROOT / "deploy" / "components" / "prometheus-rule" / "prometheusrule.yaml",
    "orchestrator": ROOT / "deploy" / "orchestrator" / "components" / "prometheus-rule" / "prometheusrule.yaml",
}
# Variables of the shipped CI jobs (docs/examples/ci), not settings of gitdns itself.
CI_VARIABLES = {"GITDNS_VERSION", "GITDNS_PATH"}


def test_the_pages_are_there() -> None:
    assert {p.name for p in PAGES} >= {"argocd.md", "flux.md", "github.md", "gitlab.md", "prometheus-grafana.md"}


def _exported() -> set[str]:
    orchestrator = OrchestratorMetrics()
    orchestrator.set_nodes({"n1": ("10.0.0.1", True, 0, 0.01)})  # the per-node series appear with a node
    names: set[str] = set()
    for registry in (Metrics().registry, orchestrator.registry):
        for family in registry.collect():
            suffixes = {"counter": ("_total",), "histogram": ("", "_bucket", "_sum", "_count"),
                        "summary": ("", "_sum", "_count")}.get(family.type, ("",))
            names.update(family.name + s for s in suffixes)
    return names


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _parsers(child)
    return found


def _options() -> set[str]:
    return {opt for p in _parsers(build_parser()) for a in p._actions for opt in a.option_strings}


def _settings() -> set[str]:
    """GITDNS_<NAME> of every daemon flag --name (docs/agent.md, "Configuration"; the
    orchestrator's the same way) and of the transport and fence flags the verbs share."""
    settings = set()
    for parser in _parsers(build_parser()):
        for action in parser._actions:
            for opt in action.option_strings:
                if opt.startswith("--"):
                    settings.add("GITDNS_" + opt[2:].replace("-", "_").upper())
    return settings


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_metrics_flags_and_settings_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    exported, options, settings = _exported(), _options(), _settings()
    for metric in set(re.findall(r"\b(?:gitdns|health_orchestrator)_[a-z_]+\b", text)):
        assert metric in exported, f"{page.name}: {metric} is not a metric the agent or the orchestrator exports"
    for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", text)):
        assert flag in options, f"{page.name}: {flag} is not a flag of gitdns"
    for setting in set(re.findall(r"\bGITDNS_[A-Z0-9_]+\b", text)):
        assert setting in settings | CI_VARIABLES, f"{page.name}: {setting} is not a setting of gitdns"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_paths_and_components_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for path in set(re.findall(r"`((?:deploy|docs|tests|gitdns|schemas|scripts)/[\w./-]*)`", text)):
        assert (ROOT / path).exists(), f"{page.name}: {path} does not exist"
    for name in set(re.findall(r"`([\w-]+)` component", text)):
        assert (ROOT / "deploy" / "components" / name).is_dir() or \
            (ROOT / "deploy" / "orchestrator" / "components" / name).is_dir(), f"{page.name}: no component {name}"


def test_every_shipped_alert_is_on_the_page_as_the_rule_has_it() -> None:
    text = (DOCS / "integrations" / "prometheus-grafana.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", text, re.MULTILINE)}
    shipped: set[str] = set()
    for daemon, path in RULES.items():
        rule = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        for group in rule["spec"]["groups"]:
            assert f"(group `{group['name']}`)" in text, f"{daemon}: group {group['name']}"
            for alert in group["rules"]:
                name = alert["alert"]
                shipped.add(name)
                assert name in rows, f"{daemon}: alert {name} is not on prometheus-grafana.md"
                cells = [c.strip() for c in rows[name].strip("|").split("|")]
                wait = alert.get("for", "at once")
                assert cells[-2] == wait, f"{name}: for {cells[-2]!r} on the page, {wait!r} in the rule"
                assert cells[-1] == alert["labels"]["severity"], f"{name}: severity {cells[-1]!r}"
    named = set(re.findall(r"`((?:Gitdns)?[A-Z][A-Za-z]+)`", text)) & {n for n in rows if n[0].isupper()}
    assert named <= shipped, f"alerts on the page that no rule ships: {named - shipped}"
