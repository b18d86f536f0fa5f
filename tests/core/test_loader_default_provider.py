"""A Zone without ``spec.provider`` (the default provider secret): schema, loader, validate and
`gitdns validate`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gitdns.adapters.repo import load_schemas
from gitdns.cli import EXIT_ERROR, EXIT_OK, main
from gitdns.core.model import DEFAULT_PROVIDER, ProviderRef
from gitdns.core.validate import check
from gitdns.providers.defaultprovider import default_provider_notes
from tests.agent.fakes import ROOT, example_files

HEAD = "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-org}\n"
PROVIDER_BLOCK = re.compile(r"\n  provider:\n(    .*\n)+")


def zone(spec: str) -> dict[str, str]:
    return {"zones/org.yaml": f"{HEAD}spec: {spec}\n"}


def without_provider(text: str, extra: str = "") -> str:
    text = text if text.endswith("\n") else text + "\n"
    out, count = PROVIDER_BLOCK.subn("\n" + extra, text)
    assert count == 1
    return out


def test_a_zone_without_provider_loads_as_the_default_provider() -> None:
    result = check(zone("{domain: example.org}"), load_schemas())
    assert result.problems == []
    [z] = result.state.zones
    assert z.provider == ProviderRef(DEFAULT_PROVIDER) and z.provider.is_default
    assert z.provider.default_namespace is None


def test_the_zone_may_name_the_namespace_of_its_default_secret() -> None:
    result = check(zone("{domain: example.org, defaultProviderNamespace: dns-providers}"), load_schemas())
    assert result.problems == []
    assert result.state.zones[0].provider == ProviderRef("default", default_namespace="dns-providers")


def test_type_default_cannot_be_written_only_left_out() -> None:
    result = check(zone("{domain: example.org, provider: {type: default}}"), load_schemas())
    [problem] = result.problems
    assert (problem.yaml_path, problem.code, problem.zones) == ("spec.provider.type", "SchemaViolation",
                                                                ("example-org",))
    assert "omit spec.provider" in problem.hint


def test_a_namespace_beside_a_provider_is_a_problem_that_holds_the_zone() -> None:
    result = check(zone("{domain: example.org, provider: {type: local}, defaultProviderNamespace: dns}"),
                   load_schemas())
    [problem] = result.problems
    assert (problem.yaml_path, problem.code, problem.zones) == (
        "spec.defaultProviderNamespace", "UnusedDefaultProviderNamespace", ("example-org",))


def test_a_bad_namespace_name_is_a_schema_problem() -> None:
    [problem] = check(zone("{domain: example.org, defaultProviderNamespace: Not_A_Namespace}"),
                      load_schemas()).problems
    assert (problem.yaml_path, problem.code) == ("spec.defaultProviderNamespace", "SchemaViolation")


@pytest.mark.parametrize("default", [True, False])
def test_weights_of_a_default_zone_are_judged_against_every_providers_range(default: bool) -> None:
    files = example_files()
    if default:
        files["zones/example-com.yaml"] = without_provider(files["zones/example-com.yaml"])
    files["policies/api.yaml"] = files["policies/api.yaml"].replace("defaultWeight: 120", "defaultWeight: 500")
    found = check(files, load_schemas()).problems
    if default:  # Google and Azure take 500: the secret may name either
        assert found == [], [p.format() for p in found]
    else:  # the local store takes Route53's 0..255
        [problem] = found
        assert problem.code == "WeightOutOfRange" and "provider local" in problem.message


def test_validate_notes_name_each_zone_on_the_default_secret() -> None:
    files = example_files()
    files["zones/example-org.yaml"] = without_provider(files["zones/example-org.yaml"],
                                                       "  defaultProviderNamespace: dns\n")
    state = check(files, load_schemas()).state
    [note] = default_provider_notes(state)
    assert note.startswith("zones/example-org.yaml:")
    assert "zone example.org names no spec.provider" in note and "kuadrant.io/default-provider=true in " \
        "namespace dns" in note


def test_gitdns_validate_accepts_a_repo_relying_on_the_default_secret(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", repo, ignore=shutil.ignore_patterns(".gitdns"))
    org = repo / "zones" / "example-org.yaml"
    org.write_text(without_provider(org.read_text()))
    assert main(["validate", str(repo)]) == EXIT_OK
    assert "valid: 2 zone(s)" in capsys.readouterr().out
    org.write_text(org.read_text().replace("domain: example.org", "domain: example.org\n  provider: {type: default}"))
    assert main(["validate", str(repo)]) == EXIT_ERROR
    assert "spec.provider.type" in capsys.readouterr().out
