"""DNS names are checked as DNS (issue 28, item 4): the DNS gate of validation.

Each rule is a table of hostile documents added to the example repository, each refused with
its file, line, YAML path, code and the zones it holds, and a table of near misses that
validate clean.  Where inputs vary, Hypothesis: a repository whose names and cluster ids are
mixed in case gets the verdict of the lower-case one; in random CNAME graphs a record is
reported as a loop exactly when its target leads back to it; a non-finite number anywhere in
any document refuses that document at that place.  Expected lines are marked ``# <-`` in the
YAML (in file order).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gitdns.adapters.repo import load_schemas
from gitdns.core import builder
from gitdns.core.checks.tenants import reserved_error as tenant_reserved_error
from gitdns.core.model import Gateway, Listener
from gitdns.core.model.build import with_observed
from gitdns.core.names import cluster_target_name
from gitdns.core.problems import Problem
from gitdns.core.validate import check
from gitdns.core.yamlparse import parse

ROOT = Path(__file__).resolve().parents[2]
HEAD = "apiVersion: gitdns.io/v1alpha1\n"
EU_WEST = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # example-repo/clusters/eu-west-1.yaml
Verdict = list[tuple[str, str, int, str, tuple[str, ...]]]


@cache
def example() -> dict[str, str]:
    base = ROOT / "example-repo"
    return {p.relative_to(base).as_posix(): p.read_text() for p in sorted(base.rglob("*.yaml"))}


def problems(extra: dict[str, str], base: dict[str, str] | None = None) -> list[Problem]:
    return check({**(example() if base is None else base), **extra}, load_schemas()).problems


def verdict(found: list[Problem]) -> Verdict:
    return [(p.file, p.yaml_path, p.line, p.code, p.zones) for p in found]


def marked(files: dict[str, str]) -> list[tuple[str, int]]:
    """(file, line) of every ``# <-`` marker, in file and line order."""
    return [(name, n) for name in sorted(files) for n, line in enumerate(files[name].splitlines(), 1)
            if "# <-" in line]


def record_set(zone: str | None, *rows: str, name: str = "extra") -> str:
    """A RecordSet of block-style rows (each ``name, type, values`` separated by '|')."""
    text = f"{HEAD}kind: RecordSet\nmetadata: {{name: {name}}}\nspec:\n"
    text += f"  zone: {zone}\n" if zone else ""
    text += "  records:\n"
    for row in rows:
        rname, rtype, values, *mark = row.split("|")
        text += f"    - name: {rname!r}{'  # <-' if mark and mark[0] == 'name' else ''}\n"
        text += f"      type: {rtype}{'  # <-' if mark and mark[0] == 'type' else ''}\n"
        text += f"      values: [{values}]{'  # <-' if mark and mark[0] == 'values' else ''}\n"
    return text


def zone(name: str, domain: str, provider: str = "{type: memory}", mark: bool = True) -> str:
    return (f"{HEAD}kind: Zone\nmetadata: {{name: {name}}}\nspec:\n  domain: {domain}{'  # <-' if mark else ''}\n"
            f"  provider: {provider}\n")


def policy(name: str, body: str) -> str:
    return f"{HEAD}kind: DNSPolicy\nmetadata: {{name: {name}}}\nspec:\n{body}"


def cluster(name: str, ident: str, gateway: str = "", mark_id: bool = False, extra: str = "") -> str:
    text = f"{HEAD}kind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  id: {ident}{'  # <-' if mark_id else ''}\n"
    text += extra
    return text + (f"  gateways:\n{gateway}" if gateway else "")


LB_TARGET = cluster_target_name("api.example.com", EU_WEST, "api-gw", "ingress")
WILDCARD = policy("apps", "  targetRef: {hosts: ['*.apps.example.org']}\n")
LOOP_POLICY = policy("shop", "  targetRef: {gateway: shop-gw}\n  strategy: loadbalanced\n")
LOOP_CLUSTER = cluster("shop-1", "shop-1-uid", "    - name: shop-gw\n      namespace: shop\n"
                       "      addresses: [edge.example.org]  # <-\n      listeners: [{hostname: shop.example.org}]\n")

# (id, extra files, code, zones held by each problem); the problems' places are the markers
FAILING: list[tuple[str, dict[str, str], str, tuple[str, ...]]] = [
    # rule 2: a name a policy publishes (the issue's hijack), any type, any case
    ("cname-at-a-simple-host", {"extra.yaml": record_set("example-org", "app|CNAME|app.attacker.example.net.|name")},
     "NameOwnedByPolicy", ("example-org",)),
    ("txt-at-a-simple-host", {"extra.yaml": record_set("example-org", "app|TXT|'hello'|name")},
     "NameOwnedByPolicy", ("example-org",)),
    ("upper-case-name", {"extra.yaml": record_set("example-org", "APP.Example.ORG.|A|192.0.2.66|name")},
     "NameOwnedByPolicy", ("example-org",)),
    ("upper-case-relative-name", {"extra.yaml": record_set("example-org", "App|A|192.0.2.66|name")},
     "NameOwnedByPolicy", ("example-org",)),
    ("cname-at-a-loadbalanced-host",
     {"extra.yaml": record_set("example-com", "api|CNAME|app.attacker.example.net.|name")},
     "NameOwnedByPolicy", ("example-com",)),
    ("the-klb-names", {"extra.yaml": record_set(
        "example-com", "klb.api|CNAME|x.example.net.|name", "geo-eu.klb.api|CNAME|x.example.net.|name",
        "us.klb.api|A|192.0.2.1|name", f"{LB_TARGET}.|A|192.0.2.1|name", "a.b.klb.api|TXT|'x'|name",
        "X.KLB.Api|TXT|'x'|name")}, "NameOwnedByPolicy", ("example-com",)),
    ("below-a-wildcard-host", {"p.yaml": WILDCARD, "extra.yaml": record_set(
        "example-org", "x.apps|A|192.0.2.1|name", "deep.x.apps|A|192.0.2.1|name", "*.apps|A|192.0.2.1|name",
        "klb.apps|A|192.0.2.1|name")}, "NameOwnedByPolicy", ("example-org",)),
    # rule 2: the apex NS and SOA (SOA is no RecordSet type: the schema refuses it), and a CNAME there
    ("apex-ns", {"extra.yaml": record_set("example-org", "@|NS|ns1.attacker.example.net.|type")},
     "ApexRecordRefused", ("example-org",)),
    ("apex-ns-absolute", {"extra.yaml": record_set(None, "Example.ORG.|NS|ns1.attacker.example.net.|type")},
     "ApexRecordRefused", ("example-org",)),
    ("apex-cname", {"extra.yaml": record_set("example-org", "@|CNAME|www.example.com.|type")},
     "ApexRecordRefused", ("example-org",)),
    # rule 1: reserved zones, one function with the tenant zones
    ("public-suffix", {"z.yaml": zone("couk", "co.uk")}, "ReservedZone", ("couk",)),
    ("public-suffix-github-io", {"z.yaml": zone("gh", "github.io")}, "ReservedZone", ("gh",)),
    ("cluster-local", {"z.yaml": zone("kube", "cluster.local")}, "ReservedZone", ("kube",)),
    ("below-cluster-local", {"z.yaml": zone("svc", "svc.Cluster.Local")}, "ReservedZone", ("svc",)),
    ("reverse-zone", {"z.yaml": zone("rev", "2.0.192.in-addr.arpa")}, "ReservedZone", ("rev",)),
    # (one label, ``com``: TopLevelDomain, as before; the gate is the same function, below)
    # rule 1: inside another Zone that does not delegate it (both zones held)
    ("zone-inside-a-zone", {"z.yaml": zone("sub", "sub.example.org")}, "ZoneInsideZone", ("example-org", "sub")),
    ("zone-inside-a-zone-upper-case", {"z.yaml": zone("sub", "SUB.example.ORG")}, "ZoneInsideZone",
     ("example-org", "sub")),
    ("ns-in-the-parent-for-another-name", {
        "z.yaml": zone("sub", "sub.example.org"),
        "r.yaml": record_set("example-org", "other|NS|ns1.example.net.", name="cut")},
     "ZoneInsideZone", ("example-org", "sub")),
    # rule 3: CNAME loops, at every record (and gateway address) on them
    ("self-loop", {"extra.yaml": record_set("example-org", "self|CNAME|SELF.example.org.|values")},
     "CNAMELoop", ("example-org",)),
    ("loop-across-record-sets", {
        "a.yaml": record_set("example-org", "a|CNAME|b.example.org.|values", name="a"),
        "b.yaml": record_set("example-org", "B|CNAME|a.example.org|values", name="b")},
     "CNAMELoop", ("example-org",)),
    ("loop-through-a-wildcard", {"extra.yaml": record_set("example-org", "*.w|CNAME|a.w.example.org.|values")},
     "CNAMELoop", ("example-org",)),
    ("loop-through-a-loadbalanced-layout", {
        "p.yaml": LOOP_POLICY, "c.yaml": LOOP_CLUSTER,
        "r.yaml": record_set("example-org", "edge|CNAME|shop.example.org.|values")},
     "CNAMELoop", ("example-org",)),
    # rule 4: cluster ids equal but for case are one id
    ("cluster-ids-differ-only-in-case",
     {"zz.yaml": cluster("eu-west-1b", EU_WEST.upper(), mark_id=True)},  # reported at the second in file order
     "DuplicateClusterId", ("example-com", "example-org")),
    # rule 5: no number that is not finite, in any field
    ("nan-fraction", {"z.yaml": zone("n", "n.example.net", mark=False)
                      + "  safety:\n    maxChangeFraction: .nan  # <-\n"}, "NonFiniteNumber", ("n",)),
    ("inf-interval", {"p.yaml": policy("p", "  targetRef: {hosts: [app.example.org]}\n  healthCheck:\n"
                                            "    interval: .inf  # <-\n")}, "NonFiniteNumber", ("example-org",)),
    ("minus-inf-weight", {"p.yaml": policy("p", "  targetRef: {hosts: [app.example.org]}\n  loadBalancing:\n"
                                                "    weighted: {defaultWeight: -.Inf}  # <-\n")},
     "NonFiniteNumber", ("example-org",)),
    ("overflowing-serial", {"groups/example-org.yaml": example()["groups/example-org.yaml"].replace(
        "serial: 1", "serial: 1e999  # <-")}, "NonFiniteNumber", ("example-org",)),
]


@pytest.mark.parametrize(("case", "files", "code", "zones"), FAILING, ids=[c[0] for c in FAILING])
def test_each_rule_refuses_at_file_line_and_holds_the_zone(case: str, files: dict[str, str], code: str,
                                                           zones: tuple[str, ...]) -> None:
    """... and its near misses (`NEAR`) validate clean."""
    found = problems(files)
    assert [(p.file, p.line) for p in found] == marked(files), [p.format() for p in found]
    assert {(p.code, p.zones) for p in found} == {(code, zones)}, [p.format() for p in found]
    assert all(p.message and p.hint and p.yaml_path != "." for p in found)
    for near, near_files in NEAR.get(case, ()):
        assert [p.format() for p in problems(near_files)] == [], near


def test_the_issue_hijack_names_the_policy_and_its_file() -> None:
    [found] = problems({"extra.yaml": record_set("example-org", "app|CNAME|app.attacker.example.net.|name")})
    assert found.format().startswith("extra.yaml:7: spec.records[0].name: CNAME 'app.example.org' is a name "
                                     "DNSPolicy 'web' (policies/web.yaml:")


def test_a_delegation_without_spec_zone_is_the_childs_apex_and_the_hint_names_the_parent() -> None:
    files = {"z.yaml": zone("sub", "sub.example.org", mark=False),
             "r.yaml": record_set(None, "sub.example.org|NS|ns1.example.net.|type", name="cut")}
    found = problems(files)
    assert sorted((p.code, p.zones) for p in found) == [("ApexRecordRefused", ("sub",)),
                                                       ("ZoneInsideZone", ("example-org", "sub"))]
    [apex] = [p for p in found if p.code == "ApexRecordRefused"]
    assert "spec.zone: example-org" in apex.hint


def test_a_loop_names_its_chain_and_the_gateway_address() -> None:
    found = problems({"p.yaml": LOOP_POLICY, "c.yaml": LOOP_CLUSTER,
                      "r.yaml": record_set("example-org", "edge|CNAME|shop.example.org.|values")})
    by_file = {p.file: p for p in found}
    assert by_file["c.yaml"].yaml_path == "spec.gateways[0].addresses[0]"
    assert ("'edge.example.org' → 'shop.example.org' → 'klb.shop.example.org' → 'default.klb.shop.example.org' "
            "→ 'edge.example.org'") in by_file["r.yaml"].message


PRIMARY = cluster("p1", "p1-uid",
                  extra="  mode: primary\n  nameserver: {name: ns-p1.example.net, addresses: [192.0.2.53]}\n")
# failing case -> its near misses: (id, files) that validate clean
NEAR: dict[str, list[tuple[str, dict[str, str]]]] = {
    "cname-at-a-simple-host": [("a-cname-to-a-policy-host",
                                {"extra.yaml": record_set("example-org", "www|CNAME|app.example.org.")})],
    "txt-at-a-simple-host": [("a-name-beside-a-policy-host", {"extra.yaml": record_set(
        "example-org", "app2|A|192.0.2.1", "appklb|A|192.0.2.1", "klb|A|192.0.2.1", "klb.app2|A|192.0.2.1")})],
    "below-a-wildcard-host": [("the-bare-name-of-a-wildcard-host",
                               {"p.yaml": WILDCARD, "extra.yaml": record_set("example-org", "apps|A|192.0.2.1")})],
    "apex-ns": [("apex-records-that-are-data", {"extra.yaml": record_set(
        "example-org", "@|A|192.0.2.1", "@|TXT|'v=spf1 -all'", "@|MX|'10 mail.example.org.'")})],
    "zone-inside-a-zone": [
        ("a-child-zone-the-parent-delegates", {
            "z.yaml": zone("sub", "Sub.Example.org", mark=False),
            "r.yaml": record_set("example-org", "SUB|NS|ns1.example.net.", name="cut")}),
        ("a-child-zone-primaries-serve", {
            "z.yaml": zone("sub", "sub.example.org", "{type: local}", mark=False), "c.yaml": PRIMARY}),
        ("a-zone-beside-a-zone", {"z.yaml": zone("sub", "example-org.net", mark=False)})],
    "public-suffix": [("a-private-suffix-below-a-public-one", {"z.yaml": zone("uk", "bank.co.uk", mark=False)})],
    "self-loop": [("a-chain-that-ends", {"extra.yaml": record_set(
        "example-org", "a|CNAME|b.example.org.", "b|CNAME|c.example.org.", "c|A|192.0.2.1")})],
    "loop-through-a-wildcard": [("a-wildcard-whose-target-exists", {"extra.yaml": record_set(
        "example-org", "*.w|CNAME|a.w.example.org.", "a.w|A|192.0.2.1")})],
    "loop-across-record-sets": [("a-cname-out-of-the-repository", {"extra.yaml": record_set(
        "example-org", "x|CNAME|x.example.org.example.net.")})],
    "cluster-ids-differ-only-in-case": [("ids-that-differ-in-more-than-case",
                                         {"c.yaml": cluster("eu-west-1b", EU_WEST.upper()[:-1] + "4")})],
    "nan-fraction": [("non-finite-words-as-strings", {"extra.yaml": record_set(
        "example-org", "nan|TXT|'.nan'", "inf|TXT|'.inf'")})],
}


# --- one gate: reserved_error for Zones and tenant zones -----------------------------------


@pytest.mark.parametrize("domain", ["com", "co.uk", "github.io", "cluster.local", "a.svc.cluster.local",
                                    "10.in-addr.arpa", "CO.UK", "Cluster.Local."])
def test_zones_and_tenants_share_one_reserved_gate(domain: str) -> None:
    from gitdns.core.checks.dnsnames import reserved_error

    assert tenant_reserved_error is reserved_error
    assert reserved_error(domain) is not None
    assert reserved_error(domain.lower().rstrip(".")) is not None


# --- rule 4: case-insensitive everywhere -------------------------------------------------------


def _mixed(rng: random.Random) -> Callable[[str], str]:
    return lambda text: "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def mixed_repo(m: Callable[[str], str]) -> dict[str, str]:
    """Hostile and harmless documents whose names and cluster ids go through ``m``."""
    files = dict(example())
    files["clusters/extra.yaml"] = cluster("extra", m("extra-uid-1"), (
        "    - name: web-gw\n      namespace: web\n      addresses: [" + m("edge.example.org") + "]\n"
        "      listeners: [{hostname: " + m("web2.example.org") + "}, "
        "{hostname: '" + m("*.apps.example.org") + "'}]\n"))
    files["clusters/twin.yaml"] = cluster("twin", m(EU_WEST))
    files["policies/lb.yaml"] = policy("lb", f"  targetRef: {{hosts: [{m('lb.example.com')}]}}\n"
                                             "  strategy: loadbalanced\n")
    files["zones/more.yaml"] = (zone("sub", m("sub.example.org"), mark=False) + "---\n"
                                + zone("kube", m("svc.cluster.local"), mark=False) + "---\n"
                                + zone("deleg", m("deleg.example.com"), mark=False))
    files["records/more.yaml"] = (
        record_set("example-org", f"{m('app')}|TXT|'x'", f"{m('x.apps.example.org.')}|A|192.0.2.1",
                   f"{m('loop1')}|CNAME|{m('loop2.example.org.')}", f"{m('loop2')}|CNAME|{m('loop1.example.org')}",
                   f"{m('web3')}|CNAME|{m('web2.example.org')}", "@|NS|ns.example.net.", name="more")
        + "---\n" + record_set("example-com", f"{m('klb.lb')}|A|192.0.2.1", f"{m('deleg')}|NS|ns.example.net.",
                               f"{m('ok')}|A|192.0.2.2", name="more-com"))
    return files


def test_the_mixed_repository_is_hostile_in_every_way() -> None:
    codes = {p.code for p in problems({}, mixed_repo(str.lower))}
    assert codes == {"NameOwnedByPolicy", "CNAMELoop", "ApexRecordRefused", "ReservedZone", "ZoneInsideZone",
                     "DuplicateClusterId"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
def test_case_mixed_names_and_ids_get_the_lower_case_verdict(seed: int) -> None:
    lower = verdict(problems({}, mixed_repo(str.lower)))
    assert verdict(problems({}, mixed_repo(_mixed(random.Random(seed))))) == lower


def test_a_cluster_is_found_by_its_id_in_any_case_and_exactly_first() -> None:
    found = check({**example(), "c.yaml": cluster("shout", EU_WEST.upper())}, load_schemas()).state
    assert found.cluster(EU_WEST.upper()).name == "shout"  # type: ignore[union-attr]
    assert found.cluster(EU_WEST).name == "eu-west-1"  # type: ignore[union-attr]
    state = check(example(), load_schemas()).state
    assert state.cluster(EU_WEST.upper()).name == "eu-west-1"  # type: ignore[union-attr]


def test_observed_listeners_are_normalised_as_written_ones() -> None:
    files = {**example(), "c.yaml": cluster("disc", "disc-uid", "    - {name: d-gw, namespace: d}\n")}
    state = check(files, load_schemas()).state
    seen = with_observed(state, "DISC-UID", {("d", "d-gw"): (("LB.Example.NET.",), (Listener("App.Example.ORG."),))})
    gateway: Gateway = seen.cluster("disc").gateways[0]  # type: ignore[union-attr]
    assert (gateway.addresses, [ls.hostname for ls in gateway.listeners]) == (("lb.example.net",), ["app.example.org"])


def test_the_policy_lookup_is_the_builders() -> None:
    gateway = ("    - name: other-gw\n      namespace: o\n      addresses: [192.0.2.7]\n"
               "      listeners: [{hostname: a.deflt.example.net}, {hostname: app.example.org}]\n")
    files = {**example(),
             "p.yaml": policy("byhost", "  targetRef: {hosts: [api.example.com]}\n  strategy: loadbalanced\n"),
             "z.yaml": zone("deflt", "deflt.example.net", mark=False) + "  defaultPolicy: web\n",
             "c.yaml": cluster("c", "c-uid", gateway)}
    from gitdns.core.checks.cnames import _Policies

    state = check(files, load_schemas()).state
    lookup = _Policies(state.policies)
    seen = 0
    for c in state.clusters:
        for gateway in c.gateways:
            for listener in gateway.listeners:
                home = state.zone_for_host(listener.hostname)
                assert home is not None
                assert lookup.of(home, gateway, listener.hostname) == builder.policy_for(state, home, gateway,
                                                                                         listener.hostname)
                seen += 1
    assert seen >= 7


# --- rule 3: a loop is reported exactly when one exists ----------------------------------------

NAMES = [f"n{i}" for i in range(6)]


@st.composite
def cname_graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    """name -> its CNAME values (one, or two: a CNAMEConflict, still followed); names absent
    hold an A record or nothing; targets may leave the repository."""
    graph: dict[str, list[str]] = {}
    for name in NAMES:
        if draw(st.booleans()):
            graph[name] = draw(st.lists(st.sampled_from([*NAMES, "out"]), min_size=1, max_size=2))
    return graph


def _reaches(graph: dict[str, list[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cname_graphs(), st.integers(min_value=0, max_value=2**32))
def test_a_cname_is_reported_exactly_when_its_target_leads_back(graph: dict[str, list[str]], seed: int) -> None:
    rng = random.Random(seed)
    m = _mixed(rng)
    docs: dict[str, list[str]] = {"one.yaml": [], "two.yaml": []}
    where: dict[tuple[str, int], tuple[str, int]] = {}
    for name in NAMES:
        rows = [f"{m(name)}|CNAME|{', '.join(m(v) + '.example.org.' for v in graph[name])}"] if name in graph \
            else ([f"{m(name)}|A|192.0.2.1"] if rng.random() < 0.5 else [])
        if rows:
            file = rng.choice(sorted(docs))
            if name in graph:
                where[(file, len(docs[file]))] = (name, 0)
            docs[file] += rows
    files = {file: record_set("example-org", *rows, name=file[:-5]) for file, rows in docs.items() if rows}
    found = [p for p in problems(files) if p.code == "CNAMELoop"]
    reported = {(p.file, p.yaml_path) for p in found}
    expected = set()
    for (file, index), (name, _) in where.items():
        for j, target in enumerate(graph[name]):
            if _reaches(graph, target, name):
                expected.add((file, f"spec.records[{index}].values[{j}]"))
    assert reported == expected
    assert all(p.zones == ("example-org",) for p in found)


# --- rule 5: one gate for every number, in every field -----------------------------------------

_YAML = YAML(typ="safe", pure=True)
_YAML.default_flow_style = False
SENTINEL = "sentinel-value-0"


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


def _documents() -> list[tuple[str, Any]]:
    out = []
    for name, text in example().items():
        for doc in parse(text):
            out.append((name, doc.data))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([".nan", ".NaN", ".inf", "-.inf", "+.Inf", "1e999", "-2e400"]))
def test_a_non_finite_number_anywhere_refuses_its_document_there(data: st.DataObject, spelling: str) -> None:
    file, doc = data.draw(st.sampled_from(_documents()))
    leaves = [p for p in _leaves(doc) if p[:1] != ("apiVersion",) and p[:1] != ("kind",)]
    path = data.draw(st.sampled_from(leaves))
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    copy_of = _YAML.load(_dump(doc))
    holder = copy_of
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = SENTINEL
    text = _dump(copy_of).replace(SENTINEL, spelling)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if spelling in row)
    found = [p for p in problems({file: text}) if p.code == "NonFiniteNumber"]
    expected = ".".join(f"[{k}]" if isinstance(k, int) else str(k) for k in path).replace(".[", "[")
    assert [(p.file, p.line, p.yaml_path) for p in found] == [(file, line, expected)]


def _dump(value: Any) -> str:
    import io

    out = io.StringIO()
    _YAML.dump(value, out)
    return out.getvalue()


def test_the_finite_gate_is_the_desired_states() -> None:
    """Status documents (which gitdns writes, ``.inf`` included) are read as before; the
    desired state's loader refuses."""
    [status] = parse("expires: .inf\n")
    assert status.refused is None and status.data == {"expires": float("inf")}
    [desired] = parse("expires: .inf\n", finite=True)
    assert desired.refused is not None and (desired.refused.code, desired.refused.path) == ("NonFiniteNumber",
                                                                                            ("expires",))
