"""Loader: parsing, envelope and schema problems (with lines and zones), normalisation, read_tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitdns.adapters.repo import load_repo, load_schemas, read_tree
from gitdns.core.loader import load
from gitdns.core.model import Origin
from gitdns.core.problems import blocked_zones
from gitdns.core.validate import check
from gitdns.errors import ConfigError
from tests.spies import record_calls

HEAD = "apiVersion: gitdns.io/v1alpha1\n"
ZONE = f"{HEAD}kind: Zone\nmetadata: {{name: example-com}}\nspec: {{domain: Example.COM., provider: {{type: local}}}}\n"
ZONE_ORG = (
    f"{HEAD}kind: Zone\nmetadata: {{name: example-org}}\nspec: {{domain: example.org, provider: {{type: local}}}}\n"
)


def run(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return load(files, load_schemas())


def test_malformed_yaml_is_one_problem_with_the_parser_line_that_blocks_all() -> None:
    result = run({"z.yaml": ZONE, "bad.yaml": "a: 1\nb: [1, 2\nc: 3\n"})
    [problem] = result.problems
    assert (problem.file, problem.line, problem.code, problem.blocks_all) == ("bad.yaml", 3, "ParseError", True)
    assert "not valid YAML" in problem.message
    assert len(result.state.zones) == 1


def test_duplicate_keys_are_a_parse_problem() -> None:
    [problem] = run({"d.yaml": "kind: Zone\nkind: Cluster\n"}).problems
    assert (problem.line, problem.code) == (2, "ParseError")


@pytest.mark.parametrize(
    ("text", "path", "message", "hint", "line"),
    [
        ("kind: Zone\nmetadata: {name: z}\nspec: {}\n", "apiVersion", "no apiVersion", "gitdns.io/v1alpha1", 1),
        (
            "apiVersion: v1\nkind: Zone\nmetadata: {name: z}\nspec: {}\n",
            "apiVersion",
            "unsupported apiVersion 'v1'",
            "use apiVersion: gitdns.io/v1alpha1",
            1,
        ),
        (f"{HEAD}metadata: {{name: z}}\n", ".", "no kind", "ActiveGroups", 1),
        (f"{HEAD}kind: dnspolicy\n", "kind", "unknown kind 'dnspolicy'", "did you mean DNSPolicy?", 2),
        (f"{HEAD}kind: Gadget\n", "kind", "unknown kind 'Gadget'", "use one of Zone", 2),
        ("- just\n- a list\n", ".", "must be a mapping", "apiVersion, kind", 1),
    ],
)
def test_envelope_problems(text: str, path: str, message: str, hint: str, line: int) -> None:
    [problem] = run({"x.yaml": text}).problems
    assert (problem.yaml_path, problem.line) == (path, line)
    assert message in problem.message and hint in problem.hint


def test_unknown_kind_blocks_everything_but_wrong_api_version_only_its_zone() -> None:
    unknown = run({"x.yaml": f"{HEAD}kind: Gadget\n"}).problems[0]
    wrong = run({"z.yaml": ZONE.replace(HEAD, "apiVersion: v2\n")}).problems[0]
    assert unknown.blocks_all and not wrong.blocks_all
    assert wrong.zones == ("example-com",)


@pytest.mark.parametrize(
    ("spec", "path", "message", "hint"),
    [
        (
            "{domain: a.test, provider: {type: local}, registry: dns}",
            "spec.registry",
            "'dns' is not allowed",
            "use one of: txt, none",
        ),
        (
            "{domain: a.test, provider: {type: local}, ttl: {simple: 0}}",
            "spec.ttl.simple",
            "below the minimum 1",
            "from 1 to 604800",
        ),
        (
            "{domain: a.test, provider: {type: local, setings: {}}}",
            "spec.provider.setings",
            "unknown field 'setings'",
            "did you mean 'settings'?",
        ),
        ("{provider: {type: local}}", "spec", "missing required field 'domain'", "add domain"),
        ("{domain: [a.test], provider: {type: local}}", "spec.domain", "expected a string, got a list", "zone apex"),
        (
            "{domain: 'not a domain', provider: {type: local}}",
            "spec.domain",
            "not in the expected form",
            "zone apex",
        ),
    ],
)
def test_schema_errors_in_plain_words(spec: str, path: str, message: str, hint: str) -> None:
    [problem] = run({"z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec: {spec}\n"}).problems
    assert (problem.yaml_path, problem.code, problem.zones) == (path, "SchemaViolation", ("z",))
    assert message in problem.message and hint in problem.hint, problem.format()


def test_line_of_a_schema_error_deep_in_a_multi_document_file() -> None:
    cluster = (
        f"{HEAD}kind: Cluster\nmetadata: {{name: c{{n}}}}\nspec:\n  id: id-{{n}}\n  gateways:\n"
        "    - name: gw\n      namespace: ns\n      addresses: [192.0.2.1]\n      listeners:\n"
        "        - hostname: a{n}.example.com\n"
    )
    docs = [cluster.replace("{n}", str(i)).replace("{{", "{").replace("}}", "}") for i in range(3)]
    docs[2] = docs[2].replace("- hostname: a2.example.com", "- hostname: a2.example.com\n          port: 443")
    text = "---\n".join(docs)
    [problem] = run({"z.yaml": ZONE, "clusters.yaml": text}).problems
    assert problem.yaml_path == "spec.gateways[0].listeners[0].port"
    assert problem.line == text.splitlines().index("          port: 443") + 1 == 36
    assert problem.zones == ("example-com",)


def test_one_problem_per_unknown_field_each_on_its_line() -> None:
    text = f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n  provider: {{type: local}}\n"
    text += "  foo: 1\n  bar: 2\n"
    problems = run({"z.yaml": text}).problems
    assert [(p.yaml_path, p.line) for p in problems] == [("spec.foo", 7), ("spec.bar", 8)]


def test_hosts_are_normalised_and_origins_recorded() -> None:
    cluster = (
        f"{HEAD}kind: Cluster\nmetadata: {{name: c}}\nspec:\n  id: c-id\n  gateways:\n    - name: gw\n"
        "      namespace: ns\n      addresses: [LB.Example.NET.]\n"
        "      listeners: [{hostname: '*.Apps.Example.COM.'}]\n"
    )
    state = run({"a/z.yaml": ZONE, "b/c.yaml": "# comment\n" + cluster}).state
    assert state.zones[0].domain == "example.com"
    gateway = state.clusters[0].gateways[0]
    assert gateway.listeners[0].hostname == "*.apps.example.com"
    assert gateway.addresses == ("lb.example.net",)
    assert state.zones[0].origin == Origin("a/z.yaml", 0, 1)
    assert state.clusters[0].origin == Origin("b/c.yaml", 0, 2)


@pytest.mark.parametrize(
    ("zone", "name", "expected"),
    [
        ("example-com", "@", "example.com"),
        ("example-com", "www", "www.example.com"),
        ("example-com", "WWW.Example.COM", "www.example.com"),
        ("example-com", "mail.example.com.", "mail.example.com"),
        ("example-com", "_sip._tcp", "_sip._tcp.example.com"),
        (None, "deep.sub.example.org", "deep.sub.example.org"),
        ("example-com", "a.example.org", "a.example.org"),  # absolute: under a known zone
    ],
)
def test_record_names(zone: str | None, name: str, expected: str) -> None:
    zone_line = f"  zone: {zone}\n" if zone else ""
    text = f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nspec:\n{zone_line}  records:\n"
    text += f"    - {{name: '{name}', type: CNAME, values: [Target.Example.NET.]}}\n"
    state = run({"z.yaml": ZONE, "o.yaml": ZONE_ORG, "r.yaml": text}).state
    record = state.record_sets[0].records[0]
    assert (record.name, record.ttl, record.values) == (expected, 300, ("Target.Example.NET.",))


def test_defaults_filled_in() -> None:
    pool = f"{HEAD}kind: NodePool\nmetadata: {{name: edge}}\nspec:\n  nodes: [{{name: n1, ip: '2001:db8::1'}}]\n"
    policy = f"{HEAD}kind: DNSPolicy\nmetadata: {{name: p}}\nspec:\n  targetRef: {{gateway: gw}}\n"
    policy += "  healthCheck: {port: 8443}\n"
    state = run({"pool.yaml": pool, "p.yaml": policy, "z.yaml": ZONE}).state
    node = state.node_pools[0].nodes[0]
    assert node.health_endpoint == "http://[2001:db8::1]:15021/healthz/ready"
    assert state.node_pools[0].health.interval == 5.0 and state.node_pools[0].health.failure_threshold == 2
    p = state.policies[0]
    assert (p.strategy, p.default_weight, p.health.port, p.health.protocol) == ("simple", 120, 8443, "HTTPS")  # type: ignore[union-attr]
    zone = state.zones[0]
    assert (zone.ttl.simple, zone.ttl.loadbalanced, zone.registry, zone.publisher) == (60, 300, "txt", "gitdns")


def test_a_bad_tenant_file_does_not_block_a_zone_it_does_not_touch() -> None:
    tenant = f"{HEAD}kind: Tenant\nmetadata: {{name: t}}\nspec: {{domains: [shop.tenant.test]}}\n"
    result = check({"z.yaml": ZONE, "t.yaml": tenant}, load_schemas())
    [problem] = result.problems
    assert "missing required field 'nodePool'" in problem.message
    assert blocked_zones(result.problems, ["example-com"]) == set()


def test_read_tree_skips_hidden_and_non_yaml(tmp_path: Path) -> None:
    (tmp_path / "zones").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitdns" / "zones").mkdir(parents=True)
    (tmp_path / "zones" / "z.yaml").write_text(ZONE)
    (tmp_path / "c.yml").write_text("# empty\n")
    (tmp_path / "README.md").write_text("hi")
    (tmp_path / ".git" / "x.yaml").write_text("a: [")
    (tmp_path / ".gitdns" / "zones" / "store.yaml").write_text("a: [")
    assert list(read_tree(tmp_path)) == ["c.yml", "zones/z.yaml"]
    result = load_repo(tmp_path)
    assert result.problems == [] and len(result.state.zones) == 1


def test_read_tree_of_a_missing_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_tree(tmp_path / "nope")


def test_every_kind_has_a_packaged_schema() -> None:
    schemas = load_schemas()
    assert sorted(schemas) == sorted(
        ["Zone", "Cluster", "DNSPolicy", "RecordSet", "Tenant", "NodePool", "ActiveGroups"]
    )
    for schema in schemas.values():
        assert schema["$schema"].endswith("2020-12/schema") and schema["additionalProperties"] is False


@pytest.mark.parametrize(
    "spec",
    [
        {"domain": "a.test", "provider": {"type": "local"}, "registry": "dns"},
        {"domain": "a.test", "provider": {"type": "local"}, "ttl": {"simple": 0}},
        {"domain": "a.test", "provider": {"type": "local"}, "ttl": {"simple": True}},
        {"domain": "a.test", "provider": {"type": "local", "settings": {"a": 1}}},
        {"domain": "a.test", "provider": {"type": "local", "settings": {1: "a"}}},
        {"domain": "a.test", "provider": {"type": "default"}},
        {"domain": "bad domain", "provider": {"type": "local"}},
        {"domain": "a.test", "provider": {"type": "local"}, "safety": {"maxChangeFraction": 1.5}},
    ],
)
def test_quick_check_never_passes_what_jsonschema_rejects(spec: dict[str, object]) -> None:
    from jsonschema import Draft202012Validator

    from gitdns.core.quickschema import quick_check

    schema = load_schemas()["Zone"]
    doc = {"apiVersion": "gitdns.io/v1alpha1", "kind": "Zone", "metadata": {"name": "z"}, "spec": spec}
    quick = quick_check(schema)
    assert quick is not None
    assert list(Draft202012Validator(schema).iter_errors(doc))
    assert quick(doc) is False
    good = {**doc, "spec": {"domain": "a.test", "provider": {"type": "local"}}}
    assert quick(good) is True


def test_a_parse_memo_parses_a_shared_file_once_and_loads_the_same_state(monkeypatch: pytest.MonkeyPatch) -> None:
    import gitdns.core.loader as loader_module

    parsed = record_calls(monkeypatch, loader_module, "parse")
    memo: loader_module.ParseMemo = {}
    first = load({"z.yaml": ZONE, "o.yaml": ZONE_ORG}, load_schemas(), memo)
    second = load({"z.yaml": ZONE, "o.yaml": ZONE_ORG.replace("example.org", "example.net")}, load_schemas(), memo)
    assert parsed.count(ZONE) == 1  # shared by both trees: parsed once
    assert len(parsed) == 3
    com = [z for z in first.state.zones if z.name == "example-com"]
    assert com and com == [z for z in second.state.zones if z.name == "example-com"]
    assert {z.domain for z in second.state.zones} == {"example.com", "example.net"}
    bad = {"bad.yaml": "a: [1\n"}
    assert load(bad, load_schemas(), memo).problems == load(bad, load_schemas(), memo).problems  # problems kept too
    assert list(load({"z.yaml": ZONE}, load_schemas()).state.zones) == com  # the same as without a memo
