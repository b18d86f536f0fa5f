"""The one provider table (`gitdns.core.providertypes`) agrees with everything that names a
provider type: each provider module and class, the factory, credentials, the pip extras, the
Zone schema and the docs' provider table (rendered from the code table; rewrite it with
``python3 -m tests.providers.test_provider_table``)."""

from __future__ import annotations

import importlib
import json
import sys
import tomllib
from pathlib import Path

import pytest

from gitdns.core.model import ProviderRef
from gitdns.core.providertypes import (
    GITDNS_SECRET_PREFIX,
    PROVIDER_TYPES,
    UNSERVED_SECRET_TYPES,
    Capabilities,
    CasGranularity,
    ProviderType,
    Routing,
    known_types,
    type_of_secret,
)
from gitdns.errors import ConfigError
from gitdns.providers.memory import MemoryProvider
from gitdns.providers.registry import make_provider

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "providers.md"
BEGIN, END = "<!-- provider-table: begin (generated) -->", "<!-- provider-table: end -->"
ENTRIES = list(PROVIDER_TYPES.values())


def provider_class(entry: ProviderType) -> type:
    module = importlib.import_module(entry.module)
    found = [obj for obj in vars(module).values() if isinstance(obj, type)
             and obj.__module__ == module.__name__ and getattr(obj, "name", None) == entry.name]
    assert len(found) == 1, f"{entry.module} defines one provider class named {entry.name!r}"
    return found[0]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_each_entry_is_its_module_and_its_class_declares_the_entry_s_capabilities(entry: ProviderType) -> None:
    module = importlib.import_module(entry.module)  # importing a provider module imports no SDK
    assert callable(getattr(module, "from_ref", None)), f"{entry.module} exposes from_ref"
    cls = provider_class(entry)
    assert getattr(cls, "capabilities") == entry.capabilities  # noqa: B009 - the class attribute itself


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_each_entry_is_consistent(entry: ProviderType) -> None:
    caps = entry.capabilities
    low, high = caps.weights
    assert 0 <= low <= high and caps.record_types and entry.credentials in ((), ("env", "file", "secret"))
    assert type_of_secret(GITDNS_SECRET_PREFIX + entry.name) == entry.name
    if entry.kuadrant_secret:
        assert type_of_secret(entry.kuadrant_secret) == entry.name
    if entry.page:
        assert (ROOT / "docs" / entry.page).is_file()
    assert not entry.settings_from_credentials or entry.credentials  # settings ride with credentials


def test_every_extra_is_a_pip_extra_of_the_package() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {e.extra for e in ENTRIES if e.extra} <= set(extras)


def test_coredns_names_no_provider_and_its_secret_type_says_what_to_do_instead() -> None:
    assert "coredns" not in PROVIDER_TYPES and type_of_secret("kuadrant.io/coredns") is None
    assert "local store" in UNSERVED_SECRET_TYPES["kuadrant.io/coredns"]
    assert type_of_secret("gitdns.io/coredns") is None and type_of_secret("Opaque") is None


def test_the_zone_schema_offers_exactly_the_table_s_types() -> None:
    for schema_dir in (ROOT / "schemas", ROOT / "gitdns" / "data" / "schemas"):
        zone = json.loads((schema_dir / "zone.schema.json").read_text())
        provider_type = zone["properties"]["spec"]["properties"]["provider"]["properties"]["type"]
        assert provider_type["examples"] == list(known_types())
        assert f"The DNS provider: {' | '.join(known_types())} " in provider_type["description"]


def test_an_unknown_type_names_the_known_ones(tmp_path: Path) -> None:
    known = "local, memory, rfc2136, route53, google, azure, endpoint"
    with pytest.raises(ConfigError, match=rf"unknown provider type 'coredns'.*known types: {known}"):
        make_provider("example.com", ProviderRef("coredns"), tmp_path)


# --- adding a provider is its module plus one entry ------------------------------------------


class TableProvider(MemoryProvider):
    name = "tabletest"


def from_ref(zone_domain: str, ref: ProviderRef, base_dir: Path, *, fences: object = None) -> TableProvider:
    """This module doubles as a provider module for the test below (``fences``: the
    operator's allow-lists, which a provider checks before it sends anything)."""
    return TableProvider()


def test_one_entry_makes_a_type_that_validates_and_builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gitdns.adapters.repo import load_schemas
    from gitdns.core.validate import check

    caps = Capabilities(frozenset({"A", "TXT"}), Routing.NONE, CasGranularity.RECORD)
    monkeypatch.setitem(PROVIDER_TYPES, "tabletest", ProviderType("tabletest", __name__, "a test", caps))
    zone = ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: z}\nspec: {domain: z.test, "
            "provider: {type: tabletest}}\n")
    records = ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata: {name: r}\nspec:\n  zone: z\n  records:\n"
               "    - {name: mx, type: A, values: [192.0.2.1]}\n"
               "    - {name: '@', type: MX, values: ['10 mx.z.test.']}\n")
    problems = check({"z.yaml": zone, "r.yaml": records}, load_schemas()).problems
    assert [(p.code, p.yaml_path, p.line) for p in problems] == [("RecordTypeUnsupported", "spec.records[1].type", 8)]
    assert "tabletest (zone 'z') cannot hold MX records" in problems[0].message
    assert isinstance(make_provider("z.test", ProviderRef("tabletest"), tmp_path), TableProvider)


def test_a_missing_library_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    caps = Capabilities(frozenset({"A"}), Routing.NONE, CasGranularity.RECORD)
    entry = ProviderType("sdkless", "gitdns.providers.no_such_module", "nothing", caps, extra="route53")
    monkeypatch.setitem(PROVIDER_TYPES, "sdkless", entry)
    with pytest.raises(ConfigError, match=r"needs a library that is not installed .*pip install 'gitdns\[route53\]'"):
        make_provider("z.test", ProviderRef("sdkless"), tmp_path)


# --- the docs' table --------------------------------------------------------------------------


def _routing(caps: Capabilities) -> str:
    return {Routing.GEO: "geo + weighted", Routing.WEIGHTED: "weighted",
            Routing.NONE: "none (simple, or loadbalanced flattened)"}[caps.routing]


def _batch(caps: Capabilities) -> str:
    limits = [f"{n:,} {what}" for n, what in ((caps.max_changes_per_batch, "changes"),
                                             (caps.max_values_per_batch, "values"),
                                             (caps.max_chars_per_batch, "characters")) if n]
    return ", ".join(limits) or "none"


def _budget(caps: Capabilities) -> str:
    if not (caps.reads_per_minute or caps.writes_per_minute):
        return "none"
    return f"{caps.reads_per_minute:g} reads, {caps.writes_per_minute:g} writes per minute"


def _row(entry: ProviderType) -> str:
    caps = entry.capabilities
    name = f"[`{entry.name}`]({entry.page})" if entry.page else f"`{entry.name}`"
    geo = "any (not checked)" if caps.geo.codes is None else f"{caps.geo.name} style"
    credentials = ", ".join(entry.credentials) or "none"
    secrets = ", ".join(f"`{t}`" for t in entry.secret_types)
    required = ", ".join(f"`{s}`" for s in entry.required_settings) or "—"
    if entry.required_settings and entry.settings_from_credentials:
        required += " (or in the credentials)"
    extra = f"`gitdns[{entry.extra}]`" if entry.extra else "—"
    cells = [name, entry.service, " ".join(sorted(caps.record_types)), _routing(caps), geo,
             f"{caps.weights[0]}..{caps.weights[1]}", caps.cas.value, "yes" if caps.guards else "no", _batch(caps),
             _budget(caps), credentials, secrets, required, extra]
    return "| " + " | ".join(cells) + " |"


def rendered_table() -> str:
    head = ["type", "what it holds the zone in", "record types", "routing", "geo codes", "weights",
            "compare-and-swap", "guards", "batch limits", "request budget", "credentials from", "Secret types",
            "required settings", "pip extra"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *map(_row, ENTRIES)]
    return "\n".join([BEGIN, *lines, END])


def _documented(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def test_the_docs_provider_table_is_the_code_table() -> None:
    assert _documented(DOCS.read_text()) == rendered_table(), \
        "docs/providers.md is stale: run python3 -m tests.providers.test_provider_table"


def test_the_docs_hand_written_table_names_every_type_and_no_other() -> None:
    lines = DOCS.read_text().split("### How each provider writes", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| provider |"))
    rows = [line for line in lines[start + 2:] if line.startswith("|")]
    rows = rows[:next((i for i, line in enumerate(lines[start + 2:]) if not line.startswith("|")), len(rows))]
    assert sorted(row.split("|")[1].strip().strip("`") for row in rows) == sorted(known_types())


def write_docs() -> None:
    text = DOCS.read_text()
    DOCS.write_text(text.replace(_documented(text), rendered_table()))


if __name__ == "__main__":
    write_docs()
    sys.stdout.write(f"rewrote the provider table in {DOCS}\n")
