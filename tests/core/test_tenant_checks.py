"""Tenant zones are fenced (gitdns/core/checks/tenants/__init__.py), node addresses are IPs, and what is
rendered for CoreDNS is checked with its parse rules before delivery (gitdns/core/corefile/check.py,
corefile.check_server / check_hosts, zonecorefile.render_zone_server).

The rules of docs/health.md ("Tenant zones"): at least two labels; not a public suffix; not
cluster.local or below; nothing below arpa; not equal to or inside a gitdns Zone or another pool's
tenant zone unless the tenant's NodePool lists that domain in spec.tenants.allowInside.
"""

from __future__ import annotations

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitdns.adapters.repo import load_schemas
from gitdns.adapters.templates import load_template_sources
from gitdns.core.checks.tenants import fences, refused_tenants
from gitdns.core.corefile import CorefileSettings, check_hosts, check_server, layout, render_files, sort_ips
from gitdns.core.corefile.check import character_problems, hosts_problems, hosts_rows_match, lex, snippet_problems
from gitdns.core.model import DesiredState, NodePool, ProviderRef, Tenant, Zone
from gitdns.core.problems import Problem
from gitdns.core.render import make_environment
from gitdns.core.validate import check
from gitdns.core.zonecorefile import ServedView, parse_view_clients, render_zone_server

HEAD = "apiVersion: gitdns.io/v1alpha1\n"
ZONE = f"{HEAD}kind: Zone\nmetadata: {{name: example-org}}\nspec: {{domain: example.org}}\n"


def pool(name: str = "edge", allow: list[str] | None = None, ip: str = "10.0.0.1") -> str:
    text = f"{HEAD}kind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  nodes: [{{name: n1, ip: {ip!r}}}]\n"
    if allow is not None:
        text += f"  tenants: {{allowInside: [{', '.join(allow)}]}}\n"
    return text


def tenant(name: str, domains: list[str], zone: str | None = None, node_pool: str = "edge") -> str:
    text = f"{HEAD}kind: Tenant\nmetadata: {{name: {name!r}}}\nspec:\n  nodePool: {node_pool}\n"
    text += f"  domains: [{', '.join(domains)}]\n"
    return text + (f"  zone: {zone!r}\n" if zone else "")


def problems(files: dict[str, str]) -> list[Problem]:
    return check(files, load_schemas()).problems


def codes_at(found: list[Problem], file: str) -> list[tuple[str, str]]:
    return [(p.code, p.yaml_path) for p in found if p.file == file]


# --- the fences, through `gitdns validate`'s pipeline -------------------------------------------


@pytest.mark.parametrize(("zone", "domains", "words"), [
    ("com", ["google.com"], "one label"),
    ("co.uk", ["bank.co.uk"], "public suffix"),
    ("github.io", ["someone.github.io"], "public suffix"),
    ("cluster.local", ["kubernetes.default.svc.cluster.local"], "cluster domain"),
    ("svc.cluster.local", ["api.svc.cluster.local"], "cluster domain"),
    ("10.in-addr.arpa", ["1.0.0.10.in-addr.arpa"], "reverse zone"),
])
def test_reserved_zones_are_refused(zone: str, domains: list[str], words: str) -> None:
    found = problems({"pool.yaml": pool(allow=[zone]), "t.yaml": tenant("t", domains, zone)})
    hits = [p for p in found if p.file == "t.yaml"]
    assert [(p.code, p.yaml_path) for p in hits] == [("ReservedTenantZone", "spec.zone")]
    assert words in hits[0].message and hits[0].line == 7  # the spec.zone line
    assert hits[0].zones == () and not hits[0].blocks_all  # tenants hold no gitdns Zone back


def test_an_inferred_zone_is_fenced_too() -> None:
    found = problems({"pool.yaml": pool(), "t.yaml": tenant("t", ["a.example.co.uk", "b.other.co.uk"])})
    assert codes_at(found, "t.yaml") == [("ReservedTenantZone", "spec.domains")]
    found = problems({"pool.yaml": pool(), "t.yaml": tenant("t", ["a.example.com", "b.other.net"])})
    assert codes_at(found, "t.yaml") == [("ReservedTenantZone", "spec.domains")]
    assert "set spec.zone" in found[0].hint


def test_a_zone_inside_a_gitdns_zone_needs_the_pools_allowance() -> None:
    files = {"zone.yaml": ZONE, "pool.yaml": pool(),
             "t.yaml": tenant("t", ["api.shop.example.org"], "shop.example.org"),
             "apex.yaml": tenant("apex", ["example.org"])}
    found = problems(files)
    assert codes_at(found, "t.yaml") == [("TenantZoneInsideZone", "spec.zone")]
    assert codes_at(found, "apex.yaml") == [("TenantZoneInsideZone", "spec.domains")]
    assert "Zone 'example-org' (zone.yaml)" in found[0].message and "allowInside" in found[0].hint
    assert problems({**files, "pool.yaml": pool(allow=["example.org"])}) == []
    # an allowance for another domain lifts nothing
    assert codes_at(problems({**files, "pool.yaml": pool(allow=["example.com"])}), "t.yaml") != []


def test_a_zone_equal_to_or_inside_another_pools_tenant_zone_is_refused() -> None:
    files = {"pools.yaml": pool("edge") + "---\n" + pool("other", ip="10.0.0.2"),
             "a.yaml": tenant("a", ["api.tenant-a.io"], "tenant-a.io"),
             "b.yaml": tenant("b", ["x.api.tenant-a.io"], "api.tenant-a.io", node_pool="other"),
             "same.yaml": tenant("same", ["app.tenant-a.io"], "tenant-a.io", node_pool="other")}
    found = problems(files)
    assert codes_at(found, "a.yaml") == [("TenantZoneInsideTenant", "spec.zone")]  # equal to same's zone
    assert codes_at(found, "same.yaml") == [("TenantZoneInsideTenant", "spec.zone")]
    assert codes_at(found, "b.yaml") == [("TenantZoneInsideTenant", "spec.zone")]
    assert "Tenant 'a' of node pool 'edge' (a.yaml)" in next(p.message for p in found if p.file == "b.yaml")
    # within one pool nesting is fine; another pool may be let in explicitly
    del files["same.yaml"]
    files["pools.yaml"] = pool("edge") + "---\n" + pool("other", allow=["tenant-a.io"], ip="10.0.0.2")
    assert problems(files) == []


def test_the_allowance_cannot_lift_the_hard_rules_and_is_itself_checked() -> None:
    found = problems({"pool.yaml": pool(allow=["com", "'exa mple.org'"]),
                      "t.yaml": tenant("t", ["google.com"], "com")})
    assert codes_at(found, "t.yaml") == [("ReservedTenantZone", "spec.zone")]
    assert codes_at(found, "pool.yaml") == [("InvalidAllowInside", "spec.tenants.allowInside[0]"),
                                            ("InvalidAllowInside", "spec.tenants.allowInside[1]")]


def test_a_tenant_of_an_unknown_pool_is_only_an_unknown_reference() -> None:
    found = problems({"zone.yaml": ZONE, "t.yaml": tenant("t", ["a.example.org"], node_pool="nope")})
    assert [p.code for p in found] == ["UnknownReference"]


def test_a_node_address_is_an_ip_named_by_file_and_field() -> None:
    found = problems({"pool.yaml": pool(ip="999.1.1.1"), "t.yaml": tenant("t", ["api.tenant-a.io"])})
    [bad] = found
    assert (bad.file, bad.yaml_path, bad.code, bad.line) == ("pool.yaml", "spec.nodes[0].ip", "InvalidAddress", 5)
    assert "999.1.1.1" in bad.message


def test_fences_refuse_names_that_would_break_out_of_the_coredns_files() -> None:
    # what the model may hold when a schema pattern lets a trailing newline through
    state = DesiredState(
        node_pools=(NodePool("edge", ()),),
        tenants=(Tenant("evil\n", ("x.evil.io",), "edge"), Tenant("z", ("a.z.io",), "edge", "z.io\nimport /x"),
                 Tenant("d", ("a.d.io\n",), "edge"), Tenant("ok", ("api.ok.io",), "edge")))
    refused = refused_tenants(state)
    assert sorted(refused) == ["d", "evil\n", "z"]
    assert "not a tenant name" in refused["evil\n"] and "'evil\\n'" in refused["evil\n"]
    assert "not a DNS name" in refused["z"] and "not a DNS name" in refused["d"]
    codes = {(f.tenant.name, f.code) for f in fences(state)}
    assert ("evil\n", "InvalidTenantName") in codes and ("z", "InvalidTenantZone") in codes


def test_a_refused_tenant_claims_no_zone_in_the_layout() -> None:
    state = DesiredState(
        zones=(Zone("example-org", "example.org", ProviderRef("memory")),),
        node_pools=(NodePool("aaa", ()), NodePool("edge", ())),
        tenants=(Tenant("thief", ("x.tenant-a.io",), "aaa", "com"), Tenant("a", ("api.tenant-a.io",), "edge"),
                 Tenant("inside", ("api.example.org",), "edge")))
    refused = refused_tenants(state)
    assert sorted(refused) == ["inside", "thief"]
    plan = layout(state, "edge", refused)
    assert [b.tenants for b in plan.blocks] == [("a",)]
    assert [s.tenant for s in plan.refused] == ["inside"] and plan.skipped == ()


# --- what is rendered, checked with CoreDNS's parse rules ----------------------------------------


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return make_environment(load_template_sources())


def test_rendered_files_pass_their_check(env: jinja2.Environment) -> None:
    state = DesiredState(tenants=(Tenant("a", ("api.a.io", "app.a.io"), "edge"),
                                  Tenant("b", ("*.b.io", "b.io"), "edge")))
    plan = layout(state, "edge")
    files = render_files(env, plan, ["10.0.0.2", "2001:db8::1", "10.0.0.1"], 3)
    assert check_server(files[plan.server_file], plan.blocks) == []
    for block in plan.blocks:
        assert check_hosts(files[block.hosts_file], block, ["10.0.0.1", "10.0.0.2", "2001:db8::1"]) == []


@pytest.mark.parametrize(("change", "words"), [
    (("a.io:53 {", "a.io\n:53 {"), "is not <zone>:53"),  # a name broken over two lines
    (("# tenants: a\n", "# tenants: a\nimport /etc/passwd\n"), "'import' at the top level"),
    (("    errors\n", "    errors\n    forward . 192.0.2.1\n"), "'forward' where 'cache' was rendered"),
    (("    errors\n", "    errors\n}\n"), "'}' closes no block"),
    (("    prometheus :9153\n}", "    prometheus :9153\n"), "never closed"),
    (("# tenants: a\n", "# tenants: a\n(evil) {\n    forward . 192.0.2.1\n}\n"), "at the top level"),
    (("# tenants: a", "# tenants: a\r"), "character '\\r'"),
    (("a.io:53", "a.io:5353"), "is not <zone>:53"),
    (("a.hosts {", "a.hosts\" {"), "where '/etc/coredns/custom/a.hosts' was rendered"),
    (("a.hosts {", "a.hosts#x {"), "closes no block"),  # a '#' inside a word starts a comment
    (("hosts /etc/coredns/custom/a.hosts", 'hosts "/etc/coredns/custom/a.hosts"'),
     "where '/etc/coredns/custom/a.hosts'"),
])
def test_a_snippet_that_parses_otherwise_is_refused(env: jinja2.Environment, change: tuple[str, str],
                                                    words: str) -> None:
    state = DesiredState(tenants=(Tenant("a", ("api.a.io",), "edge", "a.io"),))
    plan = layout(state, "edge")
    text = render_files(env, plan, ["10.0.0.1"], 1)[plan.server_file]
    assert check_server(text, plan.blocks) == []
    broken = text.replace(*change, 1)
    assert broken != text
    found = check_server(broken, plan.blocks)
    assert any(words in p for p in found), found


def test_an_unsafe_custom_dir_fails_every_block(env: jinja2.Environment) -> None:
    state = DesiredState(tenants=(Tenant("a", ("api.a.io",), "edge"),))
    plan = layout(state, "edge")
    settings = CorefileSettings(custom_dir="/etc/coredns/custom {\n}\nimport /x")
    text = render_files(env, plan, ["10.0.0.1"], 1, settings)[plan.server_file]
    assert check_server(text, plan.blocks, settings) != []


@pytest.mark.parametrize(("change", "words"), [
    (("10.0.0.1 api.a.io", "10.0.0.1 api.a.io\n192.0.2.66 bank.example"), "2 address line(s) where 1"),
    (("tenants: a", "tenants: a\n192.0.2.66 api.a.io"), "2 address line(s) where 1"),
    (("10.0.0.1 api.a.io", "10.0.0.1 api.a.io other.io"), "where '10.0.0.1 api.a.io' was rendered"),
    (("tenants: a", "tenants: a\x00"), "character '\\x00'"),
])
def test_a_hosts_file_with_other_lines_is_refused(env: jinja2.Environment, change: tuple[str, str],
                                                  words: str) -> None:
    state = DesiredState(tenants=(Tenant("a", ("api.a.io",), "edge"),))
    plan = layout(state, "edge")
    [block] = plan.blocks
    text = render_files(env, plan, ["10.0.0.1"], 1)[block.hosts_file]
    assert check_hosts(text, block, ["10.0.0.1"]) == []
    found = check_hosts(text.replace(*change, 1), block, ["10.0.0.1"])
    assert any(words in p for p in found), found


def test_the_lexer_reads_like_coredns() -> None:
    assert lex('a.io:53 { # c { }\n  hosts "/x y" {\n}\n}') == [
        ("a.io:53", 1), ("{", 1), ("hosts", 2), ('"/x y"', 2), ("{", 2), ("}", 3), ("}", 4)]
    assert lex('a#b c\n"d # e" f') == [("a", 1), ('"d # e"', 2), ("f", 2)]
    assert snippet_problems("", [], 53) == []
    assert hosts_problems("# only a comment\n", []) == []


def test_the_zone_snippet_is_checked_before_it_is_written(env: jinja2.Environment) -> None:
    views = [ServedView("default", "default", True), ServedView("GEO-EU", "geo-eu")]
    clients = parse_view_clients("GEO-EU=10.1.0.0/16;US=198.51.100.0/24")
    text = render_zone_server(env, "app.example.com", "/var/lib/gitdns/views/", views, clients)
    assert text.count("app.example.com:53 {") == 3
    for directory in ("/x }\nimport /etc/passwd\n{", "/x # c", "relative/dir", "/x y"):
        with pytest.raises(ValueError, match="corednsDir"):
            render_zone_server(env, "app.example.com", directory, views, clients)
    with pytest.raises(ValueError, match="parse rules"):
        render_zone_server(env, "app.example.com\nimport /x", "/x", views, clients)


def _first_unprintable(text: str) -> list[str]:
    """The rule as written before the one-scan version: line by line, character by character."""
    for number, line in enumerate(text.split("\n"), start=1):
        bad = next((c for c in line if not (" " <= c <= "~" or c == "\t")), None)
        if bad is not None:
            return [f"line {number}: character {bad!r} (only printable ASCII, tabs and line breaks)"]
    return []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.one_of(st.sampled_from("a \t\n~#\r\x0b\x0c\x7f\x00é\u2028\u0085"),
                                  st.characters()), max_size=60))
def test_the_character_check_finds_the_first_character_outside_printable_ascii(text: str) -> None:
    assert character_problems(text) == _first_unprintable(text)


_IPS = st.one_of(st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(str))


@settings(max_examples=100, deadline=None)
@given(ips=st.lists(_IPS, min_size=1, max_size=12), rendered=st.lists(_IPS, min_size=1, max_size=12))
def test_an_ordered_check_of_the_hosts_file_judges_as_the_sorting_one(ips: list[str], rendered: list[str]) -> None:
    """``ordered=True`` (the publisher's addresses, already as `sort_ips` gives them) finds what
    the check that sorts finds, whether the text holds those addresses or others."""
    env = make_environment(load_template_sources())
    state = DesiredState(tenants=(Tenant("a", ("api.a.io", "www.a.io"), "edge"),))
    [block] = layout(state, "edge").blocks
    for text in (render_files(env, layout(state, "edge"), ips, 1)[block.hosts_file],
                 render_files(env, layout(state, "edge"), rendered, 1)[block.hosts_file]):
        assert check_hosts(text, block, sort_ips(ips), ordered=True) == check_hosts(text, block, ips)


_EDITS = st.lists(st.tuples(st.integers(min_value=0, max_value=400),
                            st.sampled_from(["\n", "# c\n", " ", "\t", "#", "x", "\n\n", "10.0.0.1 api.a.io\n", "9"])),
                  max_size=3)


@settings(max_examples=300, deadline=None)
@given(ips=st.lists(_IPS, min_size=1, max_size=8), edits=_EDITS, cut=st.integers(min_value=0, max_value=3))
def test_the_quick_row_comparison_judges_as_the_line_by_line_one(ips: list[str], edits: list[tuple[int, str]],
                                                                 cut: int) -> None:
    """`hosts_rows_match` (one string comparison) says a file's rows are right only when the line by
    line `hosts_problems` finds nothing but character problems, and `check_hosts` judges the same
    with it: on the rendered file and on it edited (lines added, cut, changed, comments and blank
    lines anywhere)."""
    env = make_environment(load_template_sources())
    state = DesiredState(tenants=(Tenant("a", ("api.a.io", "www.a.io"), "edge"),))
    [block] = layout(state, "edge").blocks
    rows = sort_ips(ips)
    text = render_files(env, layout(state, "edge"), rows, 1)[block.hosts_file]
    assert hosts_rows_match(text, rows, " ".join(block.domains))  # as rendered: told at once
    for at, piece in edits:
        at = min(at, len(text))
        text = text[:at] + piece + text[at:]
    text = text[:len(text) - cut] if cut else text
    slow = hosts_problems(text, ((ip, *block.domains) for ip in rows))
    if hosts_rows_match(text, rows, " ".join(block.domains)):
        assert slow == character_problems(text)
    assert check_hosts(text, block, rows, ordered=True) == slow == check_hosts(text, block, ips)
