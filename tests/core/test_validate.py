"""Semantic validation: every check has a failing case (file, path, message, line, zones) and a
passing near miss.  Expected lines are marked in the YAML with ``# <-``."""

from __future__ import annotations

import pytest

from gitdns.adapters.repo import load_schemas
from gitdns.core.loader import LoadResult
from gitdns.core.model import DesiredState, Origin, Zone
from gitdns.core.problems import Problem, blocked_zones
from gitdns.core.validate import check, validate

ZONES = """\
apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: example-com}
spec: {domain: example.com, provider: {type: local}}
---
apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: plain-net}
spec: {domain: plain.net, provider: {type: rfc2136, settings: {server: 192.0.2.53}}}
---
apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: cloud-io}
spec: {domain: cloud.io, provider: {type: google, settings: {project: p}}, registry: none}
---
apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: azure-test}
spec: {domain: azure.test, provider: {type: azure, settings: {subscriptionId: s, resourceGroup: rg}}}
"""

CLUSTERS = """\
apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata: {name: eu}
spec:
  id: 11111111-aaaa-4bbb-8ccc-000000000001
  geo: GEO-EU
  gateways:
    - name: api-gw
      namespace: ingress
      addresses: [192.0.2.1]
      listeners: [{hostname: api.example.com}]
---
apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata: {name: us}
spec:
  id: 11111111-aaaa-4bbb-8ccc-000000000002
  geo: US
  gateways:
    - name: api-gw
      namespace: ingress
      addresses: [198.51.100.1]
      listeners: [{hostname: api.example.com}]
"""

POLICY = """\
apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata: {name: api}
spec:
  targetRef: {gateway: api-gw}
  strategy: loadbalanced
  loadBalancing: {geo: {defaultGeo: GEO-EU}}
"""

BASE = {"zones.yaml": ZONES, "clusters.yaml": CLUSTERS, "policies/api.yaml": POLICY}
HEAD = "apiVersion: gitdns.io/v1alpha1\n"


def cluster(name: str, ident: str, hosts: str, geo: str = "GEO-EU", extra: str = "") -> str:
    return (
        f"{HEAD}kind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  id: {ident}\n  geo: {geo}{extra}\n"
        f"  gateways:\n    - name: {name}-gw\n      namespace: ns\n      addresses: [192.0.2.9]\n"
        f"      listeners: [{hosts}]\n"
    )


def gateway(addresses: str) -> str:
    """A Cluster serving g.example.com through one gateway with the given addresses line."""
    return (f"{HEAD}kind: Cluster\nmetadata: {{name: g}}\nspec:\n  id: g-uid\n  geo: GEO-EU\n  gateways:\n"
            f"    - name: g-gw\n      namespace: ns\n      {addresses}\n"
            "      listeners: [{hostname: g.example.com}]\n")


def policy(name: str, body: str) -> str:
    return f"{HEAD}kind: DNSPolicy\nmetadata: {{name: {name}}}\nspec:\n{body}"


def run(files: dict[str, str]) -> LoadResult:
    return check({**BASE, **files}, load_schemas())


def marked_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if "# <-" in line)


# (id, extra files, file with the problem, yaml path, message substring, zones blocked)
FAILING = [
    (
        "unknown-gateway",
        {"p.yaml": policy("x", "  targetRef: {gateway: nope-gw}  # <-\n")},
        "spec.targetRef.gateway",
        "no cluster has a gateway 'nope-gw'",
        (),
    ),
    (
        "recordset-unknown-zone",
        {
            "r.yaml": f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nspec:\n  zone: nope  # <-\n"
            "  records: [{name: a.example.com, type: A, values: [192.0.2.1]}]\n"
        },
        "spec.zone",
        "no Zone has that metadata.name",
        ("nope",),
    ),
    (
        "activegroups-unknown-zone",
        {
            "g.yaml": f"{HEAD}kind: ActiveGroups\nmetadata: {{name: g}}\nspec:\n  zone: nope  # <-\n"
            "  serial: 1\n  groups: []\n"
        },
        "spec.zone",
        "ActiveGroups names zone 'nope'",
        ("nope",),
    ),
    (
        "tenant-unknown-node-pool",
        {
            "t.yaml": f"{HEAD}kind: Tenant\nmetadata: {{name: t}}\nspec:\n  nodePool: missing  # <-\n"
            "  domains: [t.example.com]\n"
        },
        "spec.nodePool",
        "Tenant has no node pool",
        ("example-com",),
    ),
    (
        "duplicate-name",
        {
            "zz.yaml": f"{HEAD}kind: DNSPolicy\nmetadata:\n  name: api  # <-\nspec:\n"
            "  targetRef: {hosts: [x.example.com]}\n"
            "  strategy: loadbalanced\n  loadBalancing: {geo: {defaultGeo: GEO-EU}}\n"
        },
        "metadata.name",
        "duplicate DNSPolicy name 'api'",
        ("example-com",),
    ),
    (
        "duplicate-cluster-id",
        {"zz.yaml": cluster("dup", "11111111-aaaa-4bbb-8ccc-000000000001  # <-", "{hostname: d.example.com}")},
        "spec.id",
        "is also the id of Cluster 'eu'",
        ("example-com",),
    ),
    (
        "cluster-hash-collision",
        {
            "c.yaml": cluster("h1", "uid-1758", "{hostname: h.example.com}")
            + "---\n"
            + cluster("h2", "uid-15610  # <-", "{hostname: h.example.com}")
        },
        "spec.id",
        "same 6-character hash '19jwiy'",
        ("example-com",),
    ),
    (
        "policy-host-outside-zones",
        {"p.yaml": policy("x", "  targetRef:\n    hosts:\n      - api.nowhere.test  # <-\n")},
        "spec.targetRef.hosts[0]",
        "lies outside every zone",
        (),
    ),
    (
        "record-outside-its-zone",
        {
            "r.yaml": f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nspec:\n  zone: example-com\n  records:\n"
            "    - name: www.plain.net  # <-\n      type: A\n      values: [192.0.2.1]\n"
        },
        "spec.records[0].name",
        "lies outside zone 'example.com'",
        ("example-com",),
    ),
    (
        "conflicting-strategy",
        {"zz.yaml": policy("x", "  targetRef: {hosts: [api.example.com]}\n  strategy: simple  # <-\n")},
        "spec.strategy",
        "with different strategies",
        ("example-com",),
    ),
    (
        "conflicting-default-geo",
        {
            "zz.yaml": policy(
                "x",
                "  targetRef: {hosts: [api.example.com]}\n  strategy: loadbalanced\n"
                "  loadBalancing:\n    geo:\n      defaultGeo: US  # <-\n",
            )
        },
        "spec.loadBalancing.geo.defaultGeo",
        "a host has one default geo",
        ("example-com",),
    ),
    (
        "default-geo-without-cluster",
        {
            "policies/api.yaml": policy(
                "api",
                "  targetRef: {gateway: api-gw}\n  strategy: loadbalanced\n"
                "  loadBalancing:\n    geo:\n      defaultGeo: GEO-AS  # <-\n",
            )
        },
        "spec.loadBalancing.geo.defaultGeo",
        "no cluster serving this policy's hosts is in that geo",
        ("example-com",),
    ),
    (
        "invalid-geo-route53-style",
        {"c.yaml": cluster("g", "g-uid", "{hostname: g.example.com}", geo="EUROPE  # <-")},
        "spec.geo",
        "geo code 'EUROPE' is not valid in zone 'example-com' (provider local)",
        ("example-com",),
    ),
    (
        "invalid-geo-google",
        {"c.yaml": cluster("g", "g-uid", "{hostname: g.cloud.io}", geo="GEO-EU  # <-")},
        "spec.geo",
        "(provider google)",
        ("cloud-io",),
    ),
    (
        "weight-out-of-range-local",
        {
            "p.yaml": policy(
                "w",
                "  targetRef: {hosts: [w.example.com]}\n  loadBalancing:\n    weighted:\n"
                "      defaultWeight: 300  # <-\n",
            )
        },
        "spec.loadBalancing.weighted.defaultWeight",
        "weight 300 is out of range",
        ("example-com",),
    ),
    (
        "weight-out-of-range-azure",
        {
            "p.yaml": policy(
                "w",
                "  targetRef: {hosts: [w.azure.test]}\n  loadBalancing:\n    weighted:\n"
                "      custom:\n        - {attribute: cloud, value: GCP, weight: 0}  # <-\n",
            )
        },
        "spec.loadBalancing.weighted.custom[0].weight",
        "(provider azure)",
        ("azure-test",),
    ),
    (
        "group-name-forbidden-character",
        {
            "c.yaml": cluster("g", "g-uid", "{hostname: g.example.com}", extra="\n  group: site a  # <-"),
            "ag.yaml": f"{HEAD}kind: ActiveGroups\nmetadata: {{name: ag}}\n"
            "spec: {zone: example-com, serial: 1, groups: []}\n",
        },
        "spec.group",
        "contains ' '",
        ("example-com",),
    ),
    (
        "group-name-too-long",
        {
            "ag.yaml": f"{HEAD}kind: ActiveGroups\nmetadata: {{name: ag}}\nspec:\n  zone: example-com\n  serial: 1\n"
            "  groups:\n    - a-very-long-group-name  # <-\n"
        },
        "spec.groups[0]",
        "is 22 characters long",
        ("example-com",),
    ),
    (
        "wildcard-and-bare-host-differ",
        {
            "p.yaml": policy("bare", "  targetRef: {hosts: [apps.example.com]}\n  strategy: simple\n")
            + "---\n"
            + policy(
                "wild", "  targetRef: {hosts: ['*.apps.example.com']}  # <-\n  strategy: simple\n  ttl: {simple: 30}\n"
            )
        },
        "spec.targetRef",
        "share klb names but have different settings",
        ("example-com",),
    ),
    (
        "first-label-too-long-on-txt-zone",
        {"p.yaml": policy("x", "  targetRef:\n    hosts:\n      - " + "a" * 40 + ".example.com  # <-\n")},
        "spec.targetRef.hosts[0]",
        "is 40 octets long",
        ("example-com",),
    ),
    (
        "apex-host-on-txt-zone",
        {"p.yaml": policy("x", "  targetRef:\n    hosts:\n      - example.com  # <-\n")},
        "spec.targetRef.hosts[0]",
        "is the apex of zone 'example-com'",
        ("example-com",),
    ),
    (
        "loadbalanced-on-rfc2136",
        {"p.yaml": policy("x", "  targetRef: {hosts: [x.plain.net]}\n  strategy: loadbalanced  # <-\n")},
        "spec.strategy",
        "(provider rfc2136) does not have",
        ("plain-net",),
    ),
    (
        "cname-shares-name",
        {
            "r.yaml": f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nspec:\n  zone: example-com\n  records:\n"
            "    - {name: www, type: TXT, values: [hello]}\n"
            "    - name: www\n      type: CNAME  # <-\n      values: [api.example.com.]\n"
        },
        "spec.records[1].type",
        "shares its name with TXT",
        ("example-com",),
    ),
    (
        "target-both-gateway-and-hosts",
        {
            "p.yaml": policy(
                "x",
                "  targetRef: {gateway: api-gw, hosts: [api.example.com]}  # <-\n"
                "  strategy: loadbalanced\n  loadBalancing: {geo: {defaultGeo: GEO-EU}}\n",
            )
        },
        "spec.targetRef",
        "both gateway and hosts",
        ("example-com",),
    ),
    (
        "target-neither",
        {"p.yaml": policy("x", "  targetRef: {namespace: ingress}  # <-\n")},
        "spec.targetRef",
        "neither gateway nor hosts",
        (),
    ),
    (
        "unknown-provider-type",
        {
            "z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n  provider:\n"
            "    type: cloudflare  # <-\n"
        },
        "spec.provider.type",
        "unknown provider type 'cloudflare'",
        ("z",),
    ),
    (
        "coredns-is-no-provider-type",
        {
            "z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n  provider:\n"
            "    type: coredns  # <-\n"
        },
        "spec.provider.type",
        "unknown provider type 'coredns'",
        ("z",),
    ),
    (
        "credentials-on-a-provider-that-takes-none",
        {
            "z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n  provider:\n"
            "    type: local\n    credentials:  # <-\n      env: TOKEN\n"
        },
        "spec.provider.credentials",
        "provider local takes no credentials",
        ("z",),
    ),
    (
        "rfc2136-without-its-server",
        {
            "z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n  provider:  # <-\n"
            "    type: rfc2136\n    settings: {port: '53'}\n"
        },
        "spec.provider",
        "provider rfc2136 needs spec.provider.settings server",
        ("z",),
    ),
    (
        "endpoint-without-its-namespace",
        {
            "z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n  provider:  # <-\n"
            "    type: endpoint\n"
        },
        "spec.provider",
        "provider endpoint needs spec.provider.settings namespace",
        ("z",),
    ),
    (
        "gateway-address-dotted-decimal-out-of-range",
        {"c.yaml": gateway("addresses: [127.0.0.300]  # <-")},
        "spec.gateways[0].addresses[0]",
        "address '127.0.0.300' is not an IPv4 address (octet 300 (> 255) not permitted), and digits and dots "
        "are not a host name",
        ("example-com",),
    ),
    (
        "gateway-address-three-octets",
        {"c.yaml": gateway("addresses:\n        - 192.0.2.1\n        - 10.1.2  # <-")},
        "spec.gateways[0].addresses[1]",
        "'10.1.2' is not an IPv4 address (expected 4 octets)",
        ("example-com",),
    ),
    (
        "gateway-address-bad-ipv6",
        {"c.yaml": gateway("addresses: ['2001:db8::zz']  # <-")},
        "spec.gateways[0].addresses[0]",
        "'2001:db8::zz' is not an IPv6 address",
        ("example-com",),
    ),
    (
        "gateway-address-bad-host-name",
        {"c.yaml": gateway("addresses: [lb..example.net]  # <-")},
        "spec.gateways[0].addresses[0]",
        "'lb..example.net' is not a host name (an empty label",
        ("example-com",),
    ),
    (
        "listener-host-name-numeric",
        {"c.yaml": gateway("addresses: [192.0.2.1]").replace("listeners: [{hostname: g.example.com}]",
                                                             "listeners:\n        - hostname: g.example.300  # <-")},
        "spec.gateways[0].listeners[0].hostname",
        "'g.example.300' is not a host name (its last label '300' is all digits)",
        (),
    ),
    (
        "excluded-address-not-a-network",
        {"p.yaml": policy("x", "  targetRef: {hosts: [x.example.com]}\n  excludeAddresses:\n"
                               "    - 10.0.0.0/8\n    - 10.0.0.0/33  # <-\n")},
        "spec.excludeAddresses[1]",
        "excluded address '10.0.0.0/33' is not a network",
        ("example-com",),
    ),
    (
        "excluded-address-out-of-range",
        {"p.yaml": policy("x", "  targetRef: {hosts: [x.example.com]}\n  excludeAddresses: [192.0.2.256]  # <-\n")},
        "spec.excludeAddresses[0]",
        "excluded address '192.0.2.256' is not an IPv4 address",
        ("example-com",),
    ),
    (
        "node-ip-out-of-range",
        {
            "t.yaml": f"{HEAD}kind: NodePool\nmetadata: {{name: edge}}\nspec:\n  nodes:\n"
            "    - {name: n1, ip: 10.0.0.300}  # <-\n"
            f"---\n{HEAD}kind: Tenant\nmetadata: {{name: t}}\nspec: {{nodePool: edge, domains: [t.example.com]}}\n"
        },
        "spec.nodes[0].ip",
        "node 'n1': ip '10.0.0.300' is not an IPv4 address",
        ("example-com",),
    ),
    (
        "a-record-value-out-of-range",
        {
            "r.yaml": f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nspec:\n  zone: example-com\n  records:\n"
            "    - name: www\n      type: A\n      values: [192.0.2.1, 192.0.2.300]  # <-\n"
        },
        "spec.records[0].values[1]",
        "A record 'www.example.com': value '192.0.2.300' is not an IPv4 address",
        ("example-com",),
    ),
    (
        "aaaa-record-holding-an-ipv4-address",
        {
            "r.yaml": f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nspec:\n  zone: example-com\n  records:\n"
            "    - name: www\n      type: AAAA\n      values: [192.0.2.1]  # <-\n"
        },
        "spec.records[0].values[0]",
        "'192.0.2.1' is not an IPv6 address",
        ("example-com",),
    ),
]


@pytest.mark.parametrize(("case", "files", "path", "message", "zones"), FAILING, ids=[c[0] for c in FAILING])
def test_each_check_reports_file_path_line_and_zones(
    case: str, files: dict[str, str], path: str, message: str, zones: tuple[str, ...]
) -> None:
    problems = run(files).problems
    file = next(iter(files)) if len(files) == 1 else next(f for f, t in files.items() if "# <-" in t)
    text = files[file]
    matching = [p for p in problems if message in p.message]
    assert matching, [p.format() for p in problems]
    problem = matching[0]
    assert (problem.file, problem.yaml_path, problem.line) == (file, path, marked_line(text)), problem.format()
    assert problem.zones == zones
    assert problem.hint, "every problem says what would be right"


PASSING = [
    ("base", {}),
    (
        "known-gateway-in-namespace",
        {
            "p.yaml": policy(
                "x",
                "  targetRef: {gateway: api-gw, namespace: ingress}\n"
                "  strategy: loadbalanced\n"
                "  loadBalancing: {geo: {defaultGeo: GEO-EU}}\n",
            )
        },
    ),
    ("label-of-39-octets", {"p.yaml": policy("x", "  targetRef: {hosts: [" + "a" * 39 + ".example.com]}\n")}),
    ("apex-on-registry-none", {"p.yaml": policy("x", "  targetRef: {hosts: [cloud.io]}\n")}),
    (
        "weight-255-local",
        {
            "p.yaml": policy(
                "w", "  targetRef: {hosts: [w.example.com]}\n  loadBalancing: {weighted: {defaultWeight: 255}}\n"
            )
        },
    ),
    (
        "weight-1000-azure",
        {
            "p.yaml": policy(
                "w", "  targetRef: {hosts: [w.azure.test]}\n  loadBalancing: {weighted: {defaultWeight: 1000}}\n"
            )
        },
    ),
    ("google-region", {"c.yaml": cluster("g", "g-uid", "{hostname: g.cloud.io}", geo="europe-west1")}),
    ("azure-world", {"c.yaml": cluster("g", "g-uid", "{hostname: g.azure.test}", geo="WORLD")}),
    (
        "flattened-on-rfc2136",
        {"p.yaml": policy("x", "  targetRef: {hosts: [x.plain.net]}\n  strategy: loadbalanced\n  flattened: true\n")},
    ),
    (
        "group-with-active-groups",
        {
            "c.yaml": cluster("g", "g-uid", "{hostname: g.example.com}", extra="\n  group: sixteen-chars-ok"),
            "ag.yaml": f"{HEAD}kind: ActiveGroups\nmetadata: {{name: ag}}\n"
            "spec: {zone: example-com, serial: 1, groups: [sixteen-chars-ok]}\n",
        },
    ),
    (
        "wildcard-and-bare-same-settings",
        {"p.yaml": policy("both", "  targetRef: {hosts: [apps.example.com, '*.apps.example.com']}\n")},
    ),
    (
        "cname-alone",
        {
            "r.yaml": f"{HEAD}kind: RecordSet\nmetadata: {{name: r}}\nspec:\n  zone: example-com\n"
            "  records: [{name: www, type: CNAME, values: [api.example.com.]},"
            " {name: '@', type: MX, values: ['10 mx.example.com.']}]\n"
        },
    ),
    ("gateway-addresses-of-every-kind",
     {"c.yaml": gateway("addresses: [192.0.2.1, '2001:db8::1', lb.example.net, LB-2.Example.NET.]")}),
    ("excluded-addresses-and-networks",
     {"p.yaml": policy("x", "  targetRef: {hosts: [x.example.com]}\n"
                            "  excludeAddresses: [10.0.0.0/8, 192.0.2.7, '2001:db8::/32', '::1']\n")}),
    ("reverse-zone-names-are-host-names",  # a Zone below arpa is refused (ReservedZone); its names are host names
     {"r.yaml": f"{HEAD}kind: RecordSet\nmetadata: {{name: rev}}\nspec:\n  zone: example-com\n"
                "  records: [{name: rev, type: CNAME, values: [10.2.0.192.in-addr.arpa.]}]\n"}),
    ("endpoint-zone", {"z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n"
                                 "  provider: {type: endpoint, settings: {namespace: dns}}\n"}),
    ("settings-may-come-with-the-credentials",
     {"z.yaml": f"{HEAD}kind: Zone\nmetadata: {{name: z}}\nspec:\n  domain: z.test\n"
                "  provider: {type: azure, credentials: {secret: azure-dns}}\n"}),
    (
        "tenant-with-pool-outside-zones",
        {
            "t.yaml": f"{HEAD}kind: NodePool\nmetadata: {{name: edge}}\nspec: {{nodes: [{{name: n, ip: 192.0.2.5}}]}}\n"
            f"---\n{HEAD}kind: Tenant\nmetadata: {{name: t}}\nspec: {{nodePool: edge, domains: [t.other.test]}}\n"
        },
    ),
]


@pytest.mark.parametrize(("case", "files"), PASSING, ids=[c[0] for c in PASSING])
def test_near_misses_validate_clean(case: str, files: dict[str, str]) -> None:
    result = run(files)
    assert [p.format() for p in result.problems] == []


def test_all_problems_of_a_file_are_reported_at_once() -> None:
    text = policy(
        "x",
        "  targetRef: {hosts: [x.plain.net, " + "b" * 45 + ".example.com]}\n  strategy: loadbalanced\n"
        "  loadBalancing: {weighted: {defaultWeight: 999}}\n",
    )
    codes = sorted(p.code for p in run({"p.yaml": text}).problems)
    assert codes == ["NameTooLongForRegistry", "StrategyUnsupported", "WeightOutOfRange", "WeightOutOfRange"]


def test_three_independent_problems_in_one_file_yield_three() -> None:
    text = (
        policy("x", "  targetRef: {gateway: nope-gw}\n")
        + "---\n"
        + f"{HEAD}kind: Tenant\nmetadata: {{name: t}}\nspec: {{nodePool: none, domains: [t.example.com]}}\n"
        + "---\n"
        + f"{HEAD}kind: ActiveGroups\nmetadata: {{name: g}}\nspec: {{zone: nope, serial: 1, groups: []}}\n"
    )
    problems = run({"three.yaml": text}).problems
    assert [(p.file, p.line) for p in problems] == [("three.yaml", 5), ("three.yaml", 10), ("three.yaml", 15)]


def test_a_broken_policy_blocks_only_its_zone() -> None:
    files = {"p.yaml": policy("x", "  targetRef: {hosts: [x.plain.net]}\n  strategy: loadbalanced\n")}
    problems = run(files).problems
    all_zones = ["example-com", "plain-net", "cloud-io", "azure-test"]
    assert blocked_zones(problems, all_zones) == {"plain-net"}


def test_a_schema_error_in_a_policy_blocks_only_the_zones_of_its_gateway_hosts() -> None:
    files = {"policies/api.yaml": POLICY.replace("strategy: loadbalanced", "strategy: fancy")}
    result = run(files)
    assert [p.code for p in result.problems] == ["SchemaViolation"]
    assert blocked_zones(result.problems, ["example-com", "plain-net"]) == {"example-com"}


def test_a_rejected_zone_does_not_cascade_into_unknown_reference_noise() -> None:
    files = {"zones.yaml": ZONES.replace("provider: {type: local}", "provider: {type: local, bogus: 1}")}
    problems = run(files).problems
    assert [p.code for p in problems] == ["SchemaViolation"]
    assert problems[0].zones == ("example-com",)


def test_validate_works_on_a_state_built_in_code() -> None:
    zone = Zone("z", "z.test", provider=__import__("gitdns.core.model").core.model.ProviderRef("dyn"),
                origin=Origin("z.yaml", 0, 3))  # fmt: skip
    problems = validate(DesiredState(zones=(zone,)))
    assert problems == [
        Problem("z.yaml", ("spec", "provider", "type"), "unknown provider type 'dyn'",
                hint=problems[0].hint, line=3, zones=("z",), code="UnknownProvider")
    ]  # fmt: skip


def test_a_zone_at_a_top_level_domain_is_refused() -> None:
    from gitdns.adapters.repo import load_schemas
    from gitdns.core.validate import check

    files = {"zones/tld.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata:\n  name: tld\n"
                               "spec:\n  domain: com\n  provider: {type: memory}\n"}
    problems = [p for p in check(files, load_schemas()).problems if p.code == "TopLevelDomain"]
    assert len(problems) == 1 and problems[0].line == 6 and problems[0].zones == ("tld",)


def test_loadbalanced_on_azure_needs_the_flattened_form() -> None:
    from gitdns.adapters.repo import load_schemas
    from gitdns.core.validate import check

    files = {
        "z.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata:\n  name: z\nspec:\n  domain: example.com\n"
                  "  provider: {type: azure, settings: {subscriptionId: s, resourceGroup: rg}}\n",
        "c.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: c\nspec:\n  id: c-uid\n"
                  "  gateways:\n    - {name: gw, namespace: ns, addresses: [192.0.2.1],"
                  " listeners: [{hostname: api.example.com}]}\n",
        "p.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata:\n  name: p\nspec:\n"
                  "  targetRef: {gateway: gw}\n  strategy: loadbalanced\n",
    }
    problems = [p for p in check(files, load_schemas()).problems if p.code == "StrategyUnsupported"]
    assert problems and "azure" in problems[0].message
