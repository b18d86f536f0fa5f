"""CoreDNS primaries (issue 7 item 5): Cluster nameservers, the apex NS and glue every primary
publishes, the parent zone's delegation, retiring a former primary's claims, the viewClients
setting and the Corefile snippet that serves the views (golden)."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from gitdns.adapters.repo import load_schemas
from gitdns.adapters.templates import load_template_sources
from gitdns.core.corefile import parse_blocks
from gitdns.core.delegation import (
    NAMESERVER_TTL,
    delegation_records,
    former_primaries,
    nameserver_records,
    nameserver_zones,
    primaries_records,
    primary_nameservers,
    zones_for_primary,
)
from gitdns.core.model import DesiredState, Mode, Nameserver
from gitdns.core.plan.planner import plan as make_plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import RecordSet, ZoneSnapshot
from gitdns.core.render import make_environment
from gitdns.core.review import reviewed_zones
from gitdns.core.store import apply_changes
from gitdns.core.validate import check
from gitdns.core.zonecorefile import ServedView, ViewClients, parse_view_clients, render_zone_server

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "coredns-zone"
UPDATE_GOLDEN = os.environ.get("GITDNS_UPDATE_GOLDEN") == "1"

ZONES = {
    "zones/parent.yaml": """apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: example-com}
spec: {domain: example.com, provider: {type: memory}}
""",
    "zones/app.yaml": """apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: app}
spec:
  domain: app.example.com
  provider:
    type: local
    settings: {viewClients: "GEO-EU=127.0.0.2/32"}
""",
    "zones/other.yaml": """apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: other}
spec: {domain: other.org, provider: {type: memory}}
""",
}


def cluster(name: str, mode: str, ns: str | None = None, addresses: str = "") -> str:
    text = f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  id: id-{name}\n"
    text += f"  mode: {mode}\n"
    if ns:
        text += f"  nameserver: {{name: {ns}, addresses: [{addresses}]}}\n"
    return text


def fleet(**overrides: str) -> dict[str, str]:
    files = dict(ZONES)
    files.update({
        "clusters/p1.yaml": cluster("p1", "primary", "ns-p1.example.com", "192.0.2.1"),
        "clusters/p2.yaml": cluster("p2", "primary", "NS-P2.app.example.com.", "192.0.2.2, '2001:db8::2'"),
        "clusters/r1.yaml": cluster("r1", "remote"),
    })
    files.update(overrides)
    return {k: v for k, v in files.items() if v}


def state_of(files: dict[str, str]) -> DesiredState:
    result = check(files, load_schemas())
    assert result.problems == [], [p.message for p in result.problems]
    return result.state


def zone(state: DesiredState, name: str):  # type: ignore[no-untyped-def]
    found = state.zone(name)
    assert found is not None
    return found


# --- the model --------------------------------------------------------------------------------


def test_nameserver_loads_normalised_and_only_primaries_count() -> None:
    state = state_of(fleet(**{"clusters/p3.yaml": cluster("p3", "primary")}))
    p2 = state.cluster("p2")
    assert p2 is not None and p2.mode is Mode.PRIMARY
    assert p2.nameserver == Nameserver("ns-p2.app.example.com", ("192.0.2.2", "2001:db8::2"))
    assert primary_nameservers(state) == (Nameserver("ns-p1.example.com", ("192.0.2.1",)),
                                          Nameserver("ns-p2.app.example.com", ("192.0.2.2", "2001:db8::2")))


# --- apex NS and glue ---------------------------------------------------------------------------


def test_served_zone_gets_every_primary_in_its_apex_ns_and_glue_for_names_inside() -> None:
    state = state_of(fleet())
    records = nameserver_records(state, zone(state, "app"))
    assert records == (
        RecordSet("app.example.com", "NS", NAMESERVER_TTL, ("ns-p1.example.com", "ns-p2.app.example.com")),
        RecordSet("ns-p2.app.example.com", "A", NAMESERVER_TTL, ("192.0.2.2",)),
        RecordSet("ns-p2.app.example.com", "AAAA", NAMESERVER_TTL, ("2001:db8::2",)),
    )  # ns-p1.example.com lies in the parent: its address goes there, not here


def test_zones_not_served_get_no_apex_ns() -> None:
    state = state_of(fleet())
    assert nameserver_records(state, zone(state, "example-com")) == ()  # memory: not served from views
    assert nameserver_records(state, zone(state, "other")) == ()


def test_without_any_nameserver_nothing_changes() -> None:
    # without primaries nothing delegates app.example.com from example.com (ZoneInsideZone): it stands alone here
    alone = ZONES["zones/app.yaml"].replace("app.example.com", "app.example.net")
    state = state_of(fleet(**{"clusters/p1.yaml": cluster("p1", "primary"),
                              "clusters/p2.yaml": cluster("p2", "primary"), "zones/app.yaml": alone}))
    assert all(primaries_records(state, z) == () for z in state.zones)
    assert nameserver_zones(state) == []
    assert zones_for_primary(state, state.cluster("p1"), []) == []


def test_parent_delegates_to_every_primary_with_glue() -> None:
    state = state_of(fleet())
    records = delegation_records(state, zone(state, "example-com"))
    assert records == (
        RecordSet("app.example.com", "NS", NAMESERVER_TTL, ("ns-p1.example.com", "ns-p2.app.example.com")),
        RecordSet("ns-p1.example.com", "A", NAMESERVER_TTL, ("192.0.2.1",)),
        RecordSet("ns-p2.app.example.com", "A", NAMESERVER_TTL, ("192.0.2.2",)),  # below the cut: glue
        RecordSet("ns-p2.app.example.com", "AAAA", NAMESERVER_TTL, ("2001:db8::2",)),
    )
    assert delegation_records(state, zone(state, "other")) == ()
    assert delegation_records(state, zone(state, "app")) == ()


def test_a_served_zone_without_a_parent_in_git_has_no_delegation() -> None:
    state = state_of(fleet(**{"zones/parent.yaml": ""}))
    assert [z.name for z in nameserver_zones(state)] == ["app"]
    assert all(delegation_records(state, z) == () for z in state.zones)


def test_primaries_reconcile_served_zones_and_their_parents() -> None:
    state = state_of(fleet())
    assert [z.name for z in zones_for_primary(state, state.cluster("p1"), [])] == ["app", "example-com"]
    assert zones_for_primary(state, None, []) == []  # removed from git: publishes none of it


# --- a former primary ---------------------------------------------------------------------------


def claims(state: DesiredState, zone_domain: str, owners: dict[str, tuple[RecordSet, ...]]) -> list[RecordSet]:
    """The zone after each owner applied ``records`` under its own id (the planner's writes)."""
    store: dict = {}
    for owner, records in owners.items():
        snapshot = ZoneSnapshot(zone_domain, tuple(store.values()))
        result = make_plan(Intent(owner, records, state.revision), snapshot, PlanPolicy(zone=zone_domain))
        store = dict(apply_changes(store, result.changes, result.guards).records)
    return list(store.values())


def test_a_primary_removed_from_git_is_retired_from_the_stores_and_the_parent() -> None:
    before = state_of(fleet())
    after = state_of(fleet(**{"clusters/p2.yaml": ""}))
    app, parent = zone(before, "app"), zone(before, "example-com")
    store = claims(before, "app.example.com", {o: nameserver_records(before, app) for o in ("id-p1", "id-p2")})
    assert former_primaries(before, app, store, "id-p1") == ()
    assert former_primaries(after, app, store, "id-p1") == ("id-p2",)
    shared = claims(before, "example.com", {o: delegation_records(before, parent) for o in ("id-p1", "id-p2")})
    assert former_primaries(after, parent, shared, "id-p1") == ("id-p2",)
    assert nameserver_records(after, app)[0].values == ("ns-p1.example.com",)


def test_a_primary_moved_to_default_mode_leaves_the_served_store_but_not_a_shared_parent() -> None:
    before = state_of(fleet())
    after = state_of(fleet(**{"clusters/p2.yaml": cluster("p2", "default")}))
    app, parent = zone(before, "app"), zone(before, "example-com")
    store = claims(before, "app.example.com", {o: nameserver_records(before, app) for o in ("id-p1", "id-p2")})
    assert former_primaries(after, app, store, "id-p1") == ("id-p2",)
    shared = claims(before, "example.com", {o: delegation_records(before, parent) for o in ("id-p1", "id-p2")})
    assert former_primaries(after, parent, shared, "id-p1") == ()  # alive in git: it withdraws itself


def test_removing_a_primary_is_a_reviewed_change_of_the_served_zone_and_parent() -> None:
    before = state_of(fleet())
    after = state_of(fleet(**{"clusters/p2.yaml": ""}))
    assert {"app", "example-com"} <= reviewed_zones(before, after)
    assert "other" not in reviewed_zones(before, after)
    assert reviewed_zones(before, before) == set()


# --- validation --------------------------------------------------------------------------------


def test_a_nameserver_on_a_cluster_that_is_not_primary_is_a_problem() -> None:
    result = check(fleet(**{"clusters/d1.yaml": cluster("d1", "default", "ns-d1.example.com", "192.0.2.9")}),
                   load_schemas())
    [problem] = result.problems
    assert (problem.file, problem.yaml_path, problem.code) == ("clusters/d1.yaml", "spec.nameserver",
                                                               "NameserverNotPrimary")
    assert "mode is default" in problem.message and "spec.mode: primary" in problem.hint
    assert "app" in problem.zones and "example-com" in problem.zones


def test_a_nameserver_address_must_be_an_ip() -> None:
    result = check(fleet(**{"clusters/p1.yaml": cluster("p1", "primary", "ns-p1.example.com", "192.0.2.300")}),
                   load_schemas())
    [problem] = result.problems
    assert (problem.yaml_path, problem.code) == ("spec.nameserver.addresses[0]", "InvalidAddress")


def test_a_nameserver_needs_a_name_and_addresses() -> None:
    bad = cluster("p1", "primary") + "  nameserver: {name: ns.example.com}\n"
    result = check(fleet(**{"clusters/p1.yaml": bad}), load_schemas())
    assert [p.code for p in result.problems] == ["SchemaViolation"]
    assert "addresses" in result.problems[0].message


@pytest.mark.parametrize(("setting", "words"), [
    ("GEO-EU", "not VIEW=CIDR"),
    ("=10.0.0.0/8", "not VIEW=CIDR"),
    ("GEO-EU=", "has no CIDR"),
    ("GEO-EU=10.0.0.1/8", "host bits set"),
    ("GEO-EU=10.0.0.0/33", "not a network"),
    ("GEO-EU=eu.example.com", "not a network"),
    ("default=10.0.0.0/8", "not a geo code"),
    ("GEO EU=10.0.0.0/8", "not a geo code"),
    ("US=10.0.0.0/8;US=10.1.0.0/16", "listed twice"),
])
def test_view_clients_errors_name_the_file_and_field(setting: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_view_clients(setting)
    files = fleet(**{"zones/app.yaml": ZONES["zones/app.yaml"].replace("GEO-EU=127.0.0.2/32", setting)})
    [problem] = check(files, load_schemas()).problems
    assert (problem.file, problem.yaml_path, problem.code) == (
        "zones/app.yaml", "spec.provider.settings.viewClients", "InvalidViewClients")
    assert words in problem.message and problem.zones == ("app",) and problem.line > 0


def test_view_clients_parse_in_order_and_normalised() -> None:
    assert parse_view_clients(" GEO-EU = 10.1.0.0/16, 192.0.2.0/24 ; US=2001:DB8::/32;") == (
        ViewClients("GEO-EU", ("10.1.0.0/16", "192.0.2.0/24")), ViewClients("US", ("2001:db8::/32",)))
    assert parse_view_clients("") == ()


def test_view_clients_on_another_provider_is_a_problem() -> None:
    files = fleet(**{"zones/other.yaml": ZONES["zones/other.yaml"].replace(
        "{type: memory}", '{type: memory, settings: {viewClients: "US=10.0.0.0/8"}}')})
    [problem] = check(files, load_schemas()).problems
    assert (problem.file, problem.code) == ("zones/other.yaml", "InvalidViewClients")
    assert "local provider" in problem.message


# --- the Corefile snippet ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return make_environment(load_template_sources())


def snippet(env: jinja2.Environment) -> str:
    views = [ServedView("GEO-EU", "GEO-EU", weights=True), ServedView("US", "US"),
             ServedView("default", "default", weights=True), ServedView("GEO-AS", "GEO-AS")]
    clients = parse_view_clients("US=198.51.100.0/24;GEO-EU=10.1.0.0/16,192.0.2.0/24;GEO-AF=203.0.113.0/24")
    return render_zone_server(env, "app.example.com", "/etc/coredns/gitdns/app.example.com.views/", views, clients)


def test_snippet_golden(env: jinja2.Environment) -> None:
    text = snippet(env)
    path = GOLDEN / "app.example.com.server"
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with GITDNS_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8")


def test_snippet_blocks_in_client_order_default_last_never_forward(env: jinja2.Environment) -> None:
    blocks, problems = parse_blocks(snippet(env))
    assert problems == []
    assert [b.keys for b in blocks] == [("app.example.com:53",)] * 4
    names = [[d for d, _ in b.directives] for b in blocks]
    assert names == [["view", "file", "errors"], ["view", "file", "loadbalance", "errors"],
                     ["view", "file", "loadbalance", "errors"], ["file", "loadbalance", "errors"]]
    text = snippet(env)
    assert "forward" not in text and "expr incidr(client_ip(), '10.1.0.0/16') || incidr(client_ip(), " \
        "'192.0.2.0/24')" in text
    # GEO-AF has no geo rows: its clients get the default view's files; GEO-AS has no clients
    assert "file /etc/coredns/gitdns/app.example.com.views/default.zone" in text.split("view app-example-com-geo-af")[1]
    assert "# view GEO-AS: no client CIDRs" in text
