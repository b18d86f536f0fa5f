"""The example repositories validate clean and say what their READMEs say."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gitdns.adapters.repo import load_repo
from gitdns.core.model import DesiredState, Strategy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def _minimal(s: DesiredState) -> None:
    assert (len(s.zones), len(s.clusters), len(s.policies)) == (1, 1, 1)
    assert s.policies[0].strategy is Strategy.SIMPLE


def _loadbalanced(s: DesiredState) -> None:
    assert [c.id for c in s.clusters] == ["cluster-a-uid", "cluster-b-uid"]
    assert [c.geo for c in s.clusters] == ["GEO-EU", "US"]
    policy = s.policies[0]
    assert (policy.strategy, policy.default_geo, policy.default_weight) == (Strategy.LOADBALANCED, "GEO-EU", 120)


def _custom_weights(s: DesiredState) -> None:
    assert s.zones[0].provider.type == "route53" and s.zones[0].provider.credentials is not None
    assert sorted(c.geo or "" for c in s.clusters) == ["GEO-EU", "GEO-NA", "JP"]
    [custom] = s.policies[0].custom_weights
    assert (custom.attribute, custom.value, custom.weight) == ("cloud", "GCP", 200)


def _static_and_tenants(s: DesiredState) -> None:
    assert s.clusters == () and s.policies == ()
    types = sorted(r.type for r in s.record_sets[0].records)
    assert types == ["A", "A", "CAA", "CNAME", "MX", "SRV", "TXT", "TXT"]
    assert {t.node_pool for t in s.tenants} == {"edge"} and len(s.tenants) == 2


def _groups(s: DesiredState) -> None:
    assert sorted(c.group or "" for c in s.clusters) == ["site-a", "site-b"]
    groups = s.groups_for_zone("example-com")
    assert groups is not None and (groups.serial, groups.groups) == (3, ("site-a",))


def _example_repo(s: DesiredState) -> None:
    assert sorted(z.domain for z in s.zones) == ["example.com", "example.org"]
    assert sorted(c.geo or "" for c in s.clusters) == ["GEO-EU", "GEO-EU", "US"]
    assert {c.group for c in s.clusters} == {"site-a", "site-b"}
    assert {p.name: p.strategy for p in s.policies} == {"api": Strategy.LOADBALANCED, "web": Strategy.SIMPLE}
    assert {g.zone for g in s.active_groups} == {"example-com", "example-org"}
    names = {(r.name, r.type) for rs in s.record_sets for r in rs.records}
    assert {
        ("example.com", "MX"),
        ("example.com", "TXT"),
        ("example.com", "CAA"),
        ("www.example.com", "CNAME"),
    } <= names
    assert len(s.tenants) == 2 and {t.node_pool for t in s.tenants} == {"edge"}


CASES: list[tuple[Path, Callable[[DesiredState], None]]] = [
    (EXAMPLES / "01-minimal", _minimal),
    (EXAMPLES / "02-loadbalanced", _loadbalanced),
    (EXAMPLES / "03-geo-and-custom-weights", _custom_weights),
    (EXAMPLES / "04-static-records-and-tenants", _static_and_tenants),
    (EXAMPLES / "05-failover-groups", _groups),
    (ROOT / "example-repo", _example_repo),
]


@pytest.mark.parametrize(("root", "expect"), CASES, ids=[c[0].name for c in CASES])
def test_example_validates_clean_and_holds_what_it_says(root: Path, expect: Callable[[DesiredState], None]) -> None:
    result = load_repo(root)
    assert [p.format() for p in result.problems] == []
    expect(result.state)


def test_every_example_folder_is_tested_and_has_a_readme() -> None:
    folders = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
    repositories = [p for p in folders if p.name != "ci"]  # ci/: CI jobs, tests/docs/test_ci_examples.py
    assert repositories == sorted(root for root, _ in CASES if root.parent == EXAMPLES)
    assert all((folder / "README.md").read_text().strip() for folder in folders)
