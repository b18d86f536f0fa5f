"""`gitdns.core.quickschema.quick_check`, the loader's yes/no schema check, never says yes where
jsonschema says no, and says yes to every valid example document (a check that always said no
would be safe and useless: jsonschema would then run on every document)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.adapters.repo import load_schemas
from gitdns.core import quickschema
from gitdns.core.patterns import schema_validator
from gitdns.core.yamlparse import parse
from tests.fuzz import mutations
from tests.fuzz.repos import REPOS, mutable, repo_files

SCHEMAS = load_schemas()
FAST = {kind: quickschema.quick_check(schema) for kind, schema in SCHEMAS.items()}
FULL = {kind: schema_validator(schema) for kind, schema in SCHEMAS.items()}


def _agree(data: Any) -> None:
    for kind in SCHEMAS:
        fast = FAST[kind]
        assert fast is not None, f"{kind}: the quick check covers every shipped schema"
        if fast(data):
            assert not list(FULL[kind].iter_errors(data)), kind


def test_every_example_document() -> None:
    checked = 0
    for name in REPOS:
        for text in repo_files(name).values():
            for doc in parse(text.decode(), finite=True):
                _agree(doc.data)
                kind = doc.data.get("kind") if isinstance(doc.data, dict) else None
                check = FAST.get(kind) if isinstance(kind, str) else None
                if check is not None and not list(FULL[kind].iter_errors(doc.data)):
                    assert check(doc.data), f"{name}: a valid {kind} the quick check refuses"
                    checked += 1
    assert checked > 10


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_documents(data: st.DataObject) -> None:
    repo = data.draw(st.sampled_from(sorted(REPOS)))
    case = data.draw(mutations.cases([repo]))
    try:
        mutated = mutations.apply(case, repo_files(repo), mutable(repo))
        text = mutated.files[mutated.path].decode("utf-8")
        docs = parse(text, finite=True)
    except Exception:  # a mutation the parser refuses: nothing to check
        return
    for doc in docs:
        _agree(doc.data)


def test_an_unsupported_keyword_leaves_it_to_jsonschema() -> None:
    assert quickschema.quick_check({"type": "object", "properties": {"a": {"anyOf": []}}}) is None
