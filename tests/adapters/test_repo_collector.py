"""The cyclic collector is paused by the adapter that loads a tree (`gitdns.adapters.repo.check_files`),
never by the pure check underneath it (`gitdns.core.validate.check`)."""

from __future__ import annotations

import gc

import pytest

import gitdns.core.validate as validate_module
from gitdns.adapters.repo import check_files, load_schemas
from gitdns.core.validate import check

ZONE = "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-org}\nspec: {domain: example.org}\n"


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the collector ran while the documents were loaded, once per load."""
    found: list[bool] = []
    load = getattr(validate_module, "load")  # noqa: B009 - a name the module imports, not exports

    def spy(*args: object, **kwargs: object) -> object:
        found.append(gc.isenabled())
        return load(*args, **kwargs)

    monkeypatch.setattr(validate_module, "load", spy)
    return found


def test_the_adapter_pauses_the_collector_and_restores_it(seen: list[bool]) -> None:
    assert gc.isenabled()
    result = check_files({"zone.yaml": ZONE}, load_schemas())
    assert seen == [False] and gc.isenabled() and result.problems == []
    gc.disable()
    try:
        check_files({"zone.yaml": ZONE}, load_schemas())
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_the_pure_check_leaves_the_collector_alone(seen: list[bool]) -> None:
    check({"zone.yaml": ZONE}, load_schemas())
    assert seen == [True] and gc.isenabled()
