"""Every JSON gitdns did not write is read without a crash: the strict reader (webhook bodies,
Kubernetes annotations) and the local store's decoder (a store file another writer left)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitdns.core.jsonread import JsonRefused, strict_loads
from gitdns.core.kubesources import OWNERS_ANNOTATION, decode_owners
from gitdns.providers.local import StoreCorruptError, decode_store

DEEP = "[" * 200_000 + "]" * 200_000


def test_a_deep_document_is_refused_before_the_parser_recurses() -> None:
    with pytest.raises(JsonRefused, match="nests deeper than 32"):
        strict_loads(DEEP, max_bytes=10**7)
    assert strict_loads('{"a": [[1]]}') == {"a": [[1]]}


@pytest.mark.parametrize(("text", "why"), [("NaN", "is not JSON"), ('{"a": 1, "a": 2}', "is not JSON"),
                                           (b"\xff", "is not UTF-8"), ("1" * 20, "over 10 bytes")])
def test_what_the_strict_reader_refuses(text: str | bytes, why: str) -> None:
    with pytest.raises(JsonRefused, match=why):
        strict_loads(text, max_bytes=10 if why.startswith("over") else 1000)


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=20))
def test_what_json_writes_shallowly_reads_back(value: object) -> None:
    import json

    assert strict_loads(json.dumps(value), max_depth=64) == value


def test_a_deep_owners_annotation_is_no_owners() -> None:
    assert decode_owners({OWNERS_ANNOTATION: DEEP}) == {}
    assert decode_owners({OWNERS_ANNOTATION: '{"a": "b"}'}) == {"a": "b"}


def test_a_deep_store_file_is_a_corrupt_store_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(StoreCorruptError, match="nested too deep"):
        decode_store(tmp_path / "example.com.json", DEEP.encode(), "example.com")
