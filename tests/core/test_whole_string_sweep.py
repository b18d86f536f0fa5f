"""Every string field of every kind is checked as a whole string.

One repository (`DOCS`) writes every string field the schemas declare, each with a valid value
(a test below fails when a schema gains a string field the repository does not write).  Each
field is then given a hostile value — the valid one with a trailing newline, with a trailing
NUL, with a control character inside, and a 10 kB value — and validation must report a problem
in that file at that field; the messages quote at most a cut of the value.  Hypothesis then
puts any control character anywhere in any field.

Free-text fields are listed in `FREE_TEXT`; the only one is ``metadata.annotations.<key>``
(Kubernetes annotations hold any text): gitdns never stores or renders annotations, so any
value is accepted there and nothing of it reaches the desired state.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.adapters.repo import load_schemas
from gitdns.core.model import KINDS
from gitdns.core.problems import Problem
from gitdns.core.validate import check

Json = dict[str, Any]
Slot = tuple[str, ...]  # a schema path: property names, "[]" for list items, "{}" map values, "{key}" map keys
Where = tuple[str | int, ...]  # a concrete path in one document


def _meta(name: str) -> Json:
    return {"name": name, "labels": {"app.kubernetes.io/part-of": "dns"},
            "annotations": {"example.com/note": "owned by the platform team"}}


def _doc(kind: str, name: str, spec: Json) -> Json:
    return {"apiVersion": "gitdns.io/v1alpha1", "kind": kind, "metadata": _meta(name), "spec": spec}


DOCS: dict[str, list[Json]] = {
    "zones.yaml": [
        _doc("Zone", "example-com", {
            "domain": "example.com",
            "provider": {"type": "route53", "settings": {"hostedZoneId": "Z0123456789", "region": "us-east-1"},
                         "credentials": {"env": "AWS", "file": "/var/run/secrets/aws.json",
                                         "secret": "aws-credentials", "namespace": "dns"}},
            "registry": "txt", "publisher": "gitdns", "defaultPolicy": "api",
            "safety": {"acknowledge": "3f9c2e1"},
        }),
        _doc("Zone", "example-org", {"domain": "example.org", "defaultProviderNamespace": "dns"}),
    ],
    "clusters.yaml": [
        _doc("Cluster", "eu", {
            "id": "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63", "geo": "GEO-EU", "attributes": {"cloud": "GCP"},
            "group": "site-a", "mode": "default",
            "gateways": [{"name": "api-gw", "namespace": "ingress", "addresses": ["192.0.2.10", "lb.example.net"],
                          "listeners": [{"hostname": "api.example.com", "name": "https"}]}],
        }),
        _doc("Cluster", "ns", {
            "id": "0b7d1c52-1f0e-4a8e-9d51-3c3e8f0a2e11", "mode": "primary",
            "nameserver": {"name": "ns-eu.example.org", "addresses": ["192.0.2.53"]},
        }),
    ],
    "groups.yaml": [_doc("ActiveGroups", "example-com-groups", {"zone": "example-com", "serial": 1,
                                                                "groups": ["site-a"]})],
    "policies.yaml": [
        _doc("DNSPolicy", "api", {
            "targetRef": {"gateway": "api-gw", "namespace": "ingress"},
            "strategy": "loadbalanced",
            "loadBalancing": {"weighted": {"custom": [{"attribute": "cloud", "value": "GCP", "weight": 200}]},
                              "geo": {"defaultGeo": "GEO-EU"}},
            "healthCheck": {"protocol": "HTTPS", "path": "/healthz", "headersSecret": "probe-headers"},
            "excludeAddresses": ["10.0.0.0/8"],
        }),
        _doc("DNSPolicy", "web", {"targetRef": {"hosts": ["docs.example.com"]}}),
    ],
    "records.yaml": [
        _doc("RecordSet", "static", {"zone": "example-com", "records": [
            {"name": "@", "type": "MX", "values": ["10 mail.example.com."]},
            {"name": "@", "type": "TXT", "values": ["v=spf1 mx -all"]},
            {"name": "mail", "type": "A", "values": ["192.0.2.25"]},
            {"name": "mail", "type": "AAAA", "values": ["2001:db8::25"]},
            {"name": "www", "type": "CNAME", "values": ["api.example.com."]},
            {"name": "_sip._tcp", "type": "SRV", "values": ["10 5 5060 sip.example.com."]},
            {"name": "@", "type": "CAA", "values": ['0 issue "letsencrypt.org"']},
            {"name": "sub", "type": "NS", "values": ["ns1.example.net."]},
        ]}),
    ],
    "tenants.yaml": [
        _doc("NodePool", "edge", {
            "nodes": [{"name": "edge-1", "ip": "192.0.2.101",
                       "healthEndpoint": "http://192.0.2.101:15021/healthz/ready"}],
            "healthCheck": {"protocol": "HTTP", "path": "/healthz/ready", "headersSecret": "probe-headers"},
            "discovery": {"labelSelector": "node-role.kubernetes.io/ingress=true"},
            "tenants": {"allowInside": ["example.com"]},
        }),
        _doc("Tenant", "tenant-a", {"nodePool": "edge", "zone": "tenant-a.io", "domains": ["api.tenant-a.io"]}),
    ],
}

# The free-text fields: (kind, slot).  Any text is accepted there (see the module docstring).
FREE_TEXT: frozenset[tuple[str, Slot]] = frozenset(
    (kind, ("metadata", "annotations", "{}")) for kind in KINDS
)

BIG = 10 * 1024


# What YAML does not let stand as it is in a double-quoted scalar (nor reads as a line break:
# libyaml, a YAML 1.1 parser, reads NEL, LS and PS as line breaks)
_UNPRINTABLE = re.compile("[^\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[\u2028\u2029]")


def _yaml(doc: Json) -> str:
    """``doc`` as YAML (JSON's flow style), every character the loader must read escaped."""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(doc, ensure_ascii=False))


def _files(docs: dict[str, list[Json]]) -> dict[str, str]:
    return {name: "\n---\n".join(_yaml(d) for d in ds) + "\n" for name, ds in docs.items()}


def _string_slots(schema: Json, at: Slot = ()) -> Iterator[Slot]:
    if schema.get("type") == "string" or isinstance(schema.get("const"), str):
        yield at
    for key, sub in schema.get("properties", {}).items():
        yield from _string_slots(sub, (*at, key))
    if isinstance(schema.get("items"), dict):
        yield from _string_slots(schema["items"], (*at, "[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _string_slots(schema["additionalProperties"], (*at, "{}"))
    if isinstance(schema.get("propertyNames"), dict):
        yield from _string_slots(schema["propertyNames"], (*at, "{key}"))


def _instances(node: Any, slot: Slot, at: Where = ()) -> Iterator[Where]:
    """Concrete paths of ``slot`` in ``node``; a map key's path ends in ("{key}", key)."""
    if not slot:
        yield at
        return
    head, rest = slot[0], slot[1:]
    if head == "[]" and isinstance(node, list):
        for i, item in enumerate(node):
            yield from _instances(item, rest, (*at, i))
    elif head == "{}" and isinstance(node, dict):
        for key, item in node.items():
            yield from _instances(item, rest, (*at, key))
    elif head == "{key}" and isinstance(node, dict):
        for key in node:
            yield (*at, "{key}", key)
    elif isinstance(node, dict) and head in node:
        yield from _instances(node[head], rest, (*at, head))


def _get(doc: Json, where: Where) -> str:
    if where[-2:-1] == ("{key}",):
        return str(where[-1])
    node: Any = doc
    for part in where:
        node = node[part]
    return str(node)


def _set(doc: Json, where: Where, value: str) -> None:
    node: Any = doc
    is_key = where[-2:-1] == ("{key}",)
    parts = where[:-2] if is_key else where[:-1]
    for part in parts:
        node = node[part]
    if is_key:
        node[value] = node.pop(where[-1])
    else:
        node[where[-1]] = value


def _field(where: Where) -> Where:
    """The path a problem names: a map key's problem names the map (or the key under it)."""
    return where[:-2] if where[-2:-1] == ("{key}",) else where


def _cases() -> list[tuple[str, int, str, Slot, Where]]:
    """(file, document index, kind, slot, concrete path) for every string field written in DOCS."""
    out = []
    for file, docs in DOCS.items():
        for index, doc in enumerate(docs):
            for slot in _SLOTS[doc["kind"]]:
                out.extend((file, index, doc["kind"], slot, where) for where in _instances(doc, slot))
    return out


_SCHEMAS = load_schemas()
_SLOTS = {kind: list(dict.fromkeys(_string_slots(schema))) for kind, schema in _SCHEMAS.items()}
CASES = _cases()
STRICT = [c for c in CASES if (c[2], c[3]) not in FREE_TEXT]
FREE = [c for c in CASES if (c[2], c[3]) in FREE_TEXT]
_BASELINE = check(_files(DOCS), _SCHEMAS)


def _check_with(file: str, index: int, where: Where, value: str) -> list[Problem]:
    docs = copy.deepcopy(DOCS)
    _set(docs[file][index], where, value)
    return check(_files(docs), _SCHEMAS).problems


def _assert_refused(file: str, where: Where, value: str, problems: list[Problem]) -> None:
    field = _field(where)
    hits = [p for p in problems if p.file == file and p.path[: len(field)] == field]
    if len(value) > 1024 and where[-2:-1] == ("{key}",):
        # YAML itself refuses a key over 1024 characters: the parser names the file and line only
        hits += [p for p in problems if p.file == file and p.code == "ParseError"]
    assert hits, f"{file}: {field} = {value[:80]!r} was accepted; problems: {[p.format() for p in problems]}"
    for problem in problems:
        said = problem.format()
        assert len(said) < 2000, f"an untrusted value is quoted whole: {said[:200]}..."
        assert all(ch.isprintable() for ch in said), f"a raw control character in {said!r}"


def test_the_repository_is_valid_as_written() -> None:
    assert _BASELINE.problems == []
    assert len(_BASELINE.state.zones) == 2 and len(_BASELINE.state.record_sets[0].records) == 8


def test_every_string_field_of_every_kind_is_written() -> None:
    written = {(kind, slot) for _, _, kind, slot, _ in CASES}
    missing = [(kind, "/".join(slot)) for kind, slots in _SLOTS.items() for slot in slots
               if (kind, slot) not in written]
    assert missing == []
    assert set(FREE_TEXT) <= written


HOSTILE = {
    "trailing newline": lambda v: v + "\n",
    "trailing NUL": lambda v: v + "\x00",
    "escape inside": lambda v: v[:1] + "\x1b[2J" + v[1:],
    "carriage return inside": lambda v: v[:1] + "\r" + v[1:],
    "10 kB": lambda v: (v * (BIG // max(len(v), 1) + 1))[:BIG],
}


@pytest.mark.parametrize("how", list(HOSTILE))
@pytest.mark.parametrize(("file", "index", "kind", "slot", "where"), STRICT,
                         ids=[f"{c[2]}:{'.'.join(map(str, _field(c[4])))}" for c in STRICT])
def test_a_hostile_value_is_a_problem_at_its_field(file: str, index: int, kind: str, slot: Slot, where: Where,
                                                    how: str) -> None:
    value = HOSTILE[how](_get(DOCS[file][index], where))
    _assert_refused(file, where, value, _check_with(file, index, where, value))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_control_character_anywhere_is_refused(data: st.DataObject) -> None:
    file, index, _kind, _slot, where = data.draw(st.sampled_from(STRICT), label="field")
    valid = _get(DOCS[file][index], where)
    char = data.draw(st.characters(categories=["Cc"]), label="control character")
    at = data.draw(st.integers(0, len(valid)), label="position")
    value = valid[:at] + char + valid[at:]
    _assert_refused(file, where, value, _check_with(file, index, where, value))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_free_text_takes_any_text_and_none_of_it_is_kept(data: st.DataObject) -> None:
    file, index, _kind, _slot, where = data.draw(st.sampled_from(FREE), label="field")
    value = data.draw(st.text(max_size=64) | st.just("x" * BIG) | st.just("a\nb\x00c\x1b"), label="value")
    docs = copy.deepcopy(DOCS)
    _set(docs[file][index], where, value)
    result = check(_files(docs), _SCHEMAS)
    assert result.problems == []
    assert result.state == _BASELINE.state  # annotations are not kept: the same desired state



# --- the patterns themselves ------------------------------------------------------------------


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


ALL_PATTERNS = sorted({p for schema in _SCHEMAS.values() for p in _patterns(schema)})


@pytest.mark.parametrize("pattern", ALL_PATTERNS)
def test_every_schema_pattern_is_anchored_at_both_ends_for_any_engine(pattern: str) -> None:
    """``^...$(?!\\n)``: whole string under ECMA-262 (where ``$`` is the end) and under Python's
    ``re.search`` as jsonschema runs it (where ``$`` also matches before a final newline)."""
    assert pattern.startswith("^") and pattern.endswith("$(?!\\n)")


@pytest.mark.parametrize(("pattern", "text", "whole"), [
    ("^[a-z]+$", "abc", True),
    ("^[a-z]+$", "abc\n", False),
    ("^(?!default$)[a-z0-9]+$", "default", False),
    ("^(?!default$)[a-z0-9]+$", "defaults", True),
    ("^[$]+$", "$$", True),
    ("^[]$]+$", "]$", True),
    ("^[^]$]+$", "ab", True),
    ("^[\\[$]$", "$", True),
    ("^a\\$$", "a$", True),
    ("^a\\$$", "a$\n", False),
])
def test_a_dollar_means_the_end_of_the_string(pattern: str, text: str, whole: bool) -> None:
    from gitdns.core.patterns import whole_string_regex

    assert (whole_string_regex(pattern).search(text) is not None) is whole


def test_the_schema_validator_and_the_quick_check_match_whole_strings() -> None:
    from jsonschema import Draft202012Validator

    from gitdns.core.patterns import schema_validator
    from gitdns.core.quickschema import quick_check

    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}}}
    assert list(Draft202012Validator(schema).iter_errors({"name": "evil\n"})) == []  # what re.search does
    [error] = schema_validator(schema).iter_errors({"name": "evil\n"})
    assert error.validator == "pattern" and tuple(error.absolute_path) == ("name",)
    assert list(schema_validator(schema).iter_errors({"name": "evil"})) == []
    quick = quick_check(schema)
    assert quick is not None and quick({"name": "evil"}) and not quick({"name": "evil\n"})
