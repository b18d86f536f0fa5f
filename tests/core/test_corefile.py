"""CoreDNS hosts files and Corefile snippets for tenants (gitdns/core/corefile/__init__.py).

Golden files live in ``tests/golden/coredns/<case>/``; after an intended change to a template
or the renderer rewrite them with::

    GITDNS_UPDATE_GOLDEN=1 python -m pytest -q tests/core/test_corefile.py

and review the diff.  The tests do not run CoreDNS: ``lint`` stands in for what it would refuse
(two ``hosts`` in one block, one address served twice) plus our own rules (``errors``
everywhere, no ``forward`` or ``kubernetes`` in a tenant block), and every rendered snippet
must pass it together with the stock Corefile that imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from gitdns.adapters.templates import load_template_sources
from gitdns.core.corefile import (
    CorefileSettings,
    Layout,
    ZoneBlock,
    inferred_zone,
    layout,
    lint,
    lint_files,
    parse_blocks,
    render_files,
    render_hosts,
    server_file,
    sort_ips,
)
from gitdns.core.model import DesiredState, Node, NodePool, Tenant
from gitdns.core.render import make_environment

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "coredns"
UPDATE_GOLDEN = os.environ.get("GITDNS_UPDATE_GOLDEN") == "1"

# The stock CoreDNS Corefile as k3s ships it: the tenant snippets come in through `import`.
STOCK_COREFILE = """\
.:53 {
    errors
    health
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }
    hosts /etc/coredns/NodeHosts {
      ttl 60
      reload 15s
      fallthrough
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
    import /etc/coredns/custom/*.override
}
import /etc/coredns/custom/*.server
"""

# The OpenOva failover spec's broken Corefile (two hosts plugins in one block), cut down.
SEED_COREFILE = """\
.:53 {
    errors
    hosts /etc/coredns/tenant-a.hosts {
        fallthrough
        reload 5s
    }
    hosts /etc/coredns/tenant-b.hosts {
        fallthrough
        reload 5s
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
}
"""

# The Corefile of the OpenOva "DNS Failover Service" specification, verbatim.
FAILOVER_SPEC_COREFILE = """\
.:53 {
    errors
    health {
       lameduck 5s
    }
    ready

    # Custom hosts per tenant - loaded from ConfigMap
    hosts /etc/coredns/tenant-a.hosts {
        fallthrough
        reload 5s
    }
    hosts /etc/coredns/tenant-b.hosts {
        fallthrough
        reload 5s
    }

    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }

    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
"""

POOL = NodePool("edge", (Node("node-1", "10.0.0.1", "http://10.0.0.1:15021/healthz/ready"),
                         Node("node-2", "10.0.0.2", "http://10.0.0.2:15021/healthz/ready"),
                         Node("node-3", "10.0.0.3", "http://10.0.0.3:15021/healthz/ready")))
TENANTS = (
    Tenant("tenant-a", ("api.tenant-a.io", "app.tenant-a.io"), "edge", "tenant-a.io"),
    Tenant("tenant-b", ("api.tenant-b.io", "app.tenant-b.io"), "edge"),  # zone inferred: tenant-b.io
    Tenant("shop-eu", ("eu.shop.example",), "edge", "shop.example"),  # two tenants share one zone
    Tenant("shop-us", ("us.shop.example", "www.shop.example"), "edge", "shop.example"),
)
STATE = DesiredState(tenants=TENANTS, node_pools=(POOL,))


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return make_environment(load_template_sources())


CASES = {
    "three-healthy": ["10.0.0.3", "10.0.0.1", "10.0.0.2"],
    "one-failed": ["10.0.0.1", "10.0.0.3"],
}


def rendered(env: jinja2.Environment, case: str) -> dict[str, str]:
    return render_files(env, layout(STATE, "edge"), CASES[case], total=len(POOL.nodes))


# --- golden files -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(env: jinja2.Environment, case: str) -> None:
    files = rendered(env, case)
    directory = GOLDEN / case
    if UPDATE_GOLDEN:
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.iterdir():
            old.unlink()
        for name, text in files.items():
            (directory / name).write_text(text, encoding="utf-8")
    assert directory.is_dir(), f"{directory} missing: run with GITDNS_UPDATE_GOLDEN=1 to create it"
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in directory.iterdir()}
    assert sorted(on_disk) == sorted(files)
    for name, text in files.items():
        assert text == on_disk[name], f"{case}/{name} differs from the golden file"


def test_files_per_zone_block(env: jinja2.Environment) -> None:
    files = rendered(env, "three-healthy")
    assert sorted(files) == ["gitdns-edge.server", "shop.example.hosts", "tenant-a.hosts", "tenant-b.hosts"]


def host_lines(text: str) -> list[tuple[str, ...]]:
    return [tuple(line.split()) for line in text.splitlines() if line and not line.startswith("#")]


def test_hosts_file_one_line_per_ip_sorted_with_every_domain(env: jinja2.Environment) -> None:
    files = rendered(env, "one-failed")
    assert host_lines(files["tenant-a.hosts"]) == [
        ("10.0.0.1", "api.tenant-a.io", "app.tenant-a.io"),
        ("10.0.0.3", "api.tenant-a.io", "app.tenant-a.io"),
    ]


def test_shared_zone_merges_domains(env: jinja2.Environment) -> None:
    lines = host_lines(rendered(env, "three-healthy")["shop.example.hosts"])
    assert {line[1:] for line in lines} == {("eu.shop.example", "us.shop.example", "www.shop.example")}
    assert [line[0] for line in lines] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def test_content_depends_only_on_the_published_set(env: jinja2.Environment) -> None:
    plan = layout(STATE, "edge")
    once = render_files(env, plan, ["10.0.0.2", "10.0.0.1"], total=3)
    again = render_files(env, plan, ["10.0.0.1", "10.0.0.2", "10.0.0.1"], total=3)
    assert once == again
    assert once != render_files(env, plan, ["10.0.0.1"], total=3)


def test_empty_hosts_file_is_refused(env: jinja2.Environment) -> None:
    block = ZoneBlock("tenant-a.io", ("tenant-a",), ("api.tenant-a.io",), "tenant-a.hosts")
    with pytest.raises(ValueError, match="empty hosts file"):
        render_hosts(env, "edge", block, [], 3)


def test_ipv6_sorts_after_ipv4_and_numerically() -> None:
    assert sort_ips(["2001:db8::1", "10.0.0.10", "10.0.0.9", "::1"]) == ["10.0.0.9", "10.0.0.10", "::1", "2001:db8::1"]
    with pytest.raises(ValueError):
        sort_ips(["not-an-ip"])


def test_no_tenants_no_files(env: jinja2.Environment) -> None:
    assert render_files(env, Layout("empty", ()), ["10.0.0.1"], 1) == {}


# --- layout rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(("domains", "zone"), [
    (("api.tenant-a.io", "app.tenant-a.io"), "tenant-a.io"),
    (("a.x.tenant.io", "b.y.tenant.io"), "tenant.io"),
    (("shop.tenant-b.test",), "shop.tenant-b.test"),
    (("tenant-b.test", "www.tenant-b.test"), "tenant-b.test"),
    (("a.one.io", "b.two.io"), None),  # only the TLD in common
    (("API.Tenant-A.io.", "app.tenant-a.io"), "tenant-a.io"),
])
def test_inferred_zone(domains: tuple[str, ...], zone: str | None) -> None:
    assert inferred_zone(domains) == zone


def test_layout_groups_by_zone() -> None:
    plan = layout(STATE, "edge")
    assert [(b.zone, b.tenants, b.hosts_file) for b in plan.blocks] == [
        ("shop.example", ("shop-eu", "shop-us"), "shop.example.hosts"),
        ("tenant-a.io", ("tenant-a",), "tenant-a.hosts"),
        ("tenant-b.io", ("tenant-b",), "tenant-b.hosts"),
    ]
    assert plan.skipped == ()
    assert plan.server_file == server_file("edge") == "gitdns-edge.server"
    assert plan.block_of("shop-us") is plan.blocks[0]


def test_layout_reports_what_it_leaves_out() -> None:
    state = DesiredState(tenants=(
        Tenant("spread", ("a.one.io", "b.two.io"), "edge"),
        Tenant("stray", ("api.stray.io", "api.elsewhere.io"), "edge", "stray.io"),
        Tenant("late", ("api.shared.io",), "edge", "shared.io"),
        Tenant("early", ("www.shared.io",), "core", "shared.io"),  # pool "core" sorts before "edge"
    ))
    edge = layout(state, "edge")
    assert [b.zone for b in edge.blocks] == ["stray.io"]
    assert edge.blocks[0].domains == ("api.stray.io",)
    reasons = {(s.tenant, s.reason.split(":")[0].split(";")[0]) for s in edge.skipped}
    assert ("spread", "its domains share no parent below a top-level domain") in reasons
    assert ("stray", "domain api.elsewhere.io is outside zone stray.io") in reasons
    assert any(s.tenant == "late" and "served by node pool core" in s.reason for s in edge.skipped)
    assert [b.zone for b in layout(state, "core").blocks] == ["shared.io"]


# --- lint -------------------------------------------------------------------------------------


def test_rendered_snippets_pass_the_lint_with_the_stock_corefile(env: jinja2.Environment) -> None:
    for case in CASES:
        files = rendered(env, case)
        assert lint(files["gitdns-edge.server"]) == []
        assert lint_files(files, STOCK_COREFILE) == []


def test_snippet_has_one_block_per_zone_and_nothing_that_recurses(env: jinja2.Environment) -> None:
    text = rendered(env, "three-healthy")["gitdns-edge.server"]
    blocks, problems = parse_blocks(text)
    assert problems == []
    assert [b.keys for b in blocks] == [("shop.example:53",), ("tenant-a.io:53",), ("tenant-b.io:53",)]
    for block in blocks:
        names = [name for name, _ in block.directives]
        assert sorted(names) == ["cache", "errors", "hosts", "prometheus"]
    for word in ("forward", "kubernetes", "fallthrough"):
        assert word not in text.replace("# ", "")
    assert "hosts /etc/coredns/custom/shop.example.hosts {" in text


def test_settings_reach_the_snippet(env: jinja2.Environment) -> None:
    settings = CorefileSettings(custom_dir="/srv/dns/", port=1053, ttl=5, reload="1s", cache=5)
    text = render_files(env, layout(STATE, "edge"), ["10.0.0.1"], 3, settings)["gitdns-edge.server"]
    assert "tenant-a.io:1053 {" in text and "hosts /srv/dns/tenant-a.hosts {" in text
    assert "ttl 5" in text and "reload 1s" in text and "cache 5" in text


def test_lint_flags_seed_004s_corefile() -> None:
    problems = lint(SEED_COREFILE)
    assert len(problems) == 1 and "2 'hosts' plugins" in problems[0]


def test_lint_flags_the_seed_document_itself() -> None:
    assert any("'hosts' plugins" in p for p in lint(FAILOVER_SPEC_COREFILE))


@pytest.mark.parametrize(("text", "needle"), [
    ("t.io:53 {\n  hosts /f\n  cache 30\n}\n", "no 'errors' plugin"),
    ("t.io:53 {\n  errors\n  hosts /f\n  forward . 8.8.8.8\n}\n", "'forward' in a tenant block"),
    ("t.io {\n  errors\n  kubernetes cluster.local\n}\n", "'kubernetes' in a tenant block"),
    ("t.io:53 {\n  errors\n}\nt.io. {\n  errors\n}\n", "already served"),
    ("t.io:53 {\n  errors\n", "never closed"),
    ("}\n", "unbalanced"),
    ("t.io:53\n", "not followed by a block"),
])
def test_lint_problems(text: str, needle: str) -> None:
    assert any(needle in p for p in lint(text)), lint(text)


def test_lint_accepts_forward_in_the_root_block_and_ignores_snippets_and_comments() -> None:
    text = (
        "(common) {\n  forward . 1.1.1.1\n}\n"
        ".:53 {\n  errors # keep\n  forward . /etc/resolv.conf\n}\n"
        "t.io:53 {\n  errors\n  # forward . 8.8.8.8\n  hosts /f {\n    ttl 30\n  }\n}\n"
    )
    assert lint(text) == []


def test_lint_files_finds_a_zone_served_by_two_files(env: jinja2.Environment) -> None:
    files = rendered(env, "three-healthy")
    other = {"other.server": "tenant-a.io:53 {\n  errors\n  hosts /x\n}\n"}
    problems = lint_files({**files, **other})
    assert any("tenant-a.io.:53 is already served" in p for p in problems), problems
