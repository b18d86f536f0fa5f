"""`gitdns validate` is the whole static gate (issue 28, item 3).

Whatever an agent, ``apply``/``plan`` or the orchestrator refuses without needing an operator
setting, ``validate`` refuses in CI, with the file and line.  `gitdns.core.gates.GATES` lists
every run-time refusal of what the desired state says and who can judge it.  Here:

* the table is complete: every refusal site of the run-time modules (a ``raise`` of a
  refusal, a call of a refusing function) is a site of some row, and every row's site exists —
  so a refusal added to the run time without a row (and, when it needs no operator setting,
  without a ``validate`` counterpart) fails this test;
* every static row's hostile sample is refused by ``validate`` (its code, the sample's file, a
  line, a hint) and by the run time, both saying the row's ``expect``;
* where inputs vary (store paths, endpoints, ports, servers), Hypothesis: ``validate``'s
  verdict is the run time's under the operator settings that allow most.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import math
import os
import shutil
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gitdns.core import gates
from gitdns.core.gates import GATES, Gate, Site
from gitdns.core.model import CredentialsRef, DesiredState, Origin, ProviderRef, Zone
from gitdns.core.problems import Problem
from gitdns.core.providertypes.settings import endpoint_error, host_key, parse_endpoint
from gitdns.errors import ConfigError, GitdnsError, PermanentError

ROOT = Path(__file__).resolve().parents[1]
HYPOTHESIS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- the table is complete ------------------------------------------------------------------------------


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def refusal_sites(module_path: str) -> Iterator[tuple[Site, str]]:
    """Every refusal site of one run-time module, with its source."""
    module = importlib.import_module(module_path.removesuffix(".py").replace("/", "."))
    tree = ast.parse((ROOT / module_path).read_text())

    def refuses(name: str) -> bool:
        """A refusal class; or what is raised is made by a function or held in a variable
        (``raise error_for(...)``, ``raise exc``), which the table must classify too."""
        found = getattr(module, name, None) or getattr(builtins, name, None)
        if not isinstance(found, type):
            return True
        return (issubclass(found, PermanentError) or name in gates.REFUSAL_EXCEPTIONS
                or (module_path in gates.VALUE_ERROR_MODULES and issubclass(found, ValueError)))

    def walk(node: ast.AST, scope: list[str]) -> Iterator[tuple[Site, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from walk(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                name = _name(exc) or "?"
                if refuses(name):
                    yield Site(module_path, ".".join(scope), "raise", name), ast.unparse(child)
            if isinstance(child, ast.Call):
                called = _name(child.func)
                if called is not None and called in gates.GATE_FUNCTIONS:
                    yield Site(module_path, ".".join(scope), "call", called), ast.unparse(child)
            yield from walk(child, scope)

    yield from walk(tree, [])


def matches(row: Site, site: Site, source: str) -> bool:
    return (row.module, row.function, row.what, row.name) == (site.module, site.function, site.what, site.name) \
        and row.text in source


def all_sites() -> list[tuple[Site, str]]:
    return [found for module in gates.RUNTIME_MODULES for found in refusal_sites(module)]


def test_every_run_time_refusal_is_a_row() -> None:
    rows = [(gate, site) for gate in GATES for site in gate.sites]
    unlisted = [f"{site.module}: {site.function}: {site.what} {site.name}: {source[:100]}"
                for site, source in all_sites() if not any(matches(row, site, source) for _, row in rows)]
    assert not unlisted, ("run-time refusals missing from gitdns.core.gates.GATES (add a row; a static one needs "
                          "its validate counterpart):\n" + "\n".join(unlisted))


def test_every_row_names_sites_that_exist() -> None:
    found = all_sites()
    stale = [f"{gate.name}: {site}" for gate in GATES for site in gate.sites
             if not any(matches(site, where, source) for where, source in found)]
    assert not stale, "rows naming run-time sites that do not exist:\n" + "\n".join(stale)
    assert all(gate.sites for gate in GATES)
    assert len({gate.name for gate in GATES}) == len(GATES)


def test_the_walk_sees_the_refusals_this_issue_is_about() -> None:
    """The walk itself works: it finds the endpoint, path and tenant refusals."""
    sources = [f"{site.module}:{site.function}:{site.name}" for site, _ in all_sites()]
    assert "gitdns/providers/fences.py:Fences.check_endpoint:ConfigError" in sources
    assert "gitdns/providers/local.py:from_ref:refuse_static" in sources
    assert "gitdns/orchestrator/sources.py:hold_fenced:refused_tenants" in sources


@pytest.mark.parametrize("gate", gates.static_gates(), ids=lambda g: g.name)
def test_a_static_row_names_its_one_function_and_a_sample(gate: Gate) -> None:
    module, _, name = gate.check.partition(":")
    if module.endswith(".json"):
        assert (ROOT / module).is_file() and gate.code == "SchemaViolation"
    else:
        assert hasattr(importlib.import_module(module), name.split(".")[0]), gate.check
        assert module.startswith("gitdns.core."), "the one function is pure: gitdns/core"
    assert gate.code and gate.sample and gate.expect and gate.runner in RUNNERS


# --- every static row: validate refuses its sample, and so does the run time ----------------------------------


def repo_with(tmp_path: Path, gate: Gate) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", repo, ignore=shutil.ignore_patterns(".gitdns"))
    (repo / gate.sample_file).parent.mkdir(parents=True, exist_ok=True)
    (repo / gate.sample_file).write_text(gate.sample)
    return repo


def validate(repo: Path) -> list[Problem]:
    from gitdns.reconcile.engine import load

    return list(load(repo).problems)


def _zone_of(repo: Path, gate: Gate) -> Zone:
    from gitdns.reconcile.engine import load

    zones = [z for z in load(repo).state.zones if z.origin.file == gate.sample_file]
    assert len(zones) == 1, f"{gate.name}: the sample's Zone is not in the state"
    return zones[0]


def _sample(gate: Gate) -> dict[str, object]:
    doc = YAML(typ="safe").load(gate.sample)
    assert isinstance(doc, dict)
    return doc


def run_provider(repo: Path, gate: Gate, tmp_path: Path) -> str:
    """The zone's provider built as `gitdns apply` and the agent build it (no operator setting)."""
    from gitdns.reconcile.engine import default_factory

    with pytest.raises(GitdnsError) as info:
        default_factory(repo)(_zone_of(repo, gate))
    return str(info.value)


def run_views(repo: Path, gate: Gate, tmp_path: Path) -> str:
    """The zone's provider built, then its views rendered (as after every apply)."""
    from gitdns.reconcile.engine import default_factory, render_views

    zone = _zone_of(repo, gate)
    provider = default_factory(repo)(zone)
    with pytest.raises(GitdnsError) as info:
        render_views(provider, zone)
    return str(info.value)


def run_store(repo: Path, gate: Gate, tmp_path: Path) -> str:
    """The local store names the file of the sample's domain (the schema keeps such a Zone
    out of the state, so it is given to the store directly)."""
    from gitdns.providers.local import LocalProvider

    spec = _sample(gate)["spec"]
    assert isinstance(spec, dict)
    with pytest.raises(ConfigError) as info:
        LocalProvider(tmp_path / "store", base=tmp_path).path(str(spec["domain"]))
    return str(info.value)


def run_credentials(repo: Path, gate: Gate, tmp_path: Path) -> str:
    """The credentials file the sample names, with a credentials directory allowed."""
    from gitdns.providers.credentials import load_credentials
    from gitdns.providers.fences import Fences

    spec = _sample(gate)["spec"]
    assert isinstance(spec, dict)
    provider = spec["provider"]
    assert isinstance(provider, dict)
    creds = provider["credentials"]
    assert isinstance(creds, dict)
    (tmp_path / "creds").mkdir()
    with pytest.raises(ConfigError) as info:
        load_credentials(CredentialsRef(file=str(creds["file"])), provider=str(provider["type"]),
                         fences=Fences.parse(credentials_dir=str(tmp_path / "creds")))
    return str(info.value)


def run_orchestrator(repo: Path, gate: Gate, tmp_path: Path) -> str:
    """Each node pool as its orchestrator takes it: the nodes' addresses, the tenant fences,
    the layout, and the files rendered and checked with CoreDNS's rules before delivery."""
    from gitdns.adapters.templates import load_template_sources
    from gitdns.core.corefile import CorefileSettings, layout
    from gitdns.core.render import make_environment
    from gitdns.orchestrator.publisher import Publisher, RenderRefused
    from gitdns.orchestrator.sources import hold_addresses, hold_fenced
    from gitdns.reconcile.engine import load

    env = make_environment(load_template_sources())
    state = load(repo).state
    said: list[str] = []
    for pool in state.node_pools:
        held, notes = hold_addresses(state, None, pool.name)
        held, refused, fenced = hold_fenced(held, None, pool.name)
        plan = layout(held, pool.name, refused)
        said += [*notes, *fenced, *(s.reason for s in (*plan.skipped, *plan.refused))]
        nodes = next(p.nodes for p in held.node_pools if p.name == pool.name)
        view = types.SimpleNamespace(pool_name=pool.name, plan=plan, nodes=nodes)
        publisher = Publisher(view, None, None, env, CorefileSettings(), None, None, lambda: 0.0)  # type: ignore[arg-type]
        try:
            publisher.render(["192.0.2.1"])
        except RenderRefused as exc:
            said.append(str(exc))
        said += [why for _, why in publisher.refused.values()]
    return "\n".join(said)


def run_probes(repo: Path, gate: Gate, tmp_path: Path) -> str:
    """Each node pool's probe targets as its orchestrator sets them (no operator setting)."""
    from gitdns.orchestrator.sources import hold_addresses, pool_targets
    from gitdns.reconcile.engine import load

    state = load(repo).state
    said: list[str] = []
    for pool in state.node_pools:
        held, _ = hold_addresses(state, None, pool.name)
        nodes = next(p.nodes for p in held.node_pools if p.name == pool.name)
        _, notes, refused = pool_targets(pool, nodes)
        said += [*notes, *refused.values()]
    return "\n".join(said)


RUNNERS: dict[str, Callable[[Path, Gate, Path], str]] = {
    "provider": run_provider, "views": run_views, "store": run_store, "credentials": run_credentials,
    "orchestrator": run_orchestrator, "probes": run_probes,
}


@pytest.mark.parametrize("gate", gates.static_gates(), ids=lambda g: g.name)
def test_validate_refuses_what_the_run_time_refuses(gate: Gate, tmp_path: Path) -> None:
    repo = repo_with(tmp_path, gate)
    found = [p for p in validate(repo) if p.file == gate.sample_file and p.code == gate.code]
    assert found, f"{gate.name}: validate does not report {gate.code} on {gate.sample_file}: {validate(repo)}"
    mine = [p for p in found if gate.expect in p.format()]
    assert mine, f"{gate.name}: no {gate.code} problem says {gate.expect!r}: {[p.format() for p in found]}"
    assert all(p.line > 0 and p.hint for p in mine), [p.format() for p in mine]
    said = RUNNERS[gate.runner](repo, gate, tmp_path)
    assert gate.expect in said, f"{gate.name}: the run time does not refuse it saying {gate.expect!r}: {said}"


def test_the_example_repository_passes_every_gate(tmp_path: Path) -> None:
    """The samples are what is refused: the repository they are added to is clean."""
    assert not validate(ROOT / "example-repo")


def test_the_issue_reproduction_fails_in_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An http:// endpoint and a store path with '..': `gitdns validate` exits 1 naming the
    file, the line and the field of each (it exited 0 before, and every agent refused them)."""
    from gitdns.commands.validate import validate as validate_command

    gate = next(g for g in GATES if g.name == "provider.endpoint")
    repo = repo_with(tmp_path, gate)
    with (repo / gate.sample_file).open("a") as out:
        out.write("---\n" + next(g for g in GATES if g.name == "local.path").sample)
    result = validate_command(repo)
    assert result.code == 1
    text = "\n".join([*result.out, *result.err])
    assert "zones/hostile.yaml:10: spec.provider.settings.endpoint:" in text
    assert "zones/hostile.yaml:21: spec.provider.settings.path:" in text


# --- Hypothesis: validate's verdict is the run time's ------------------------------------------------------

SEGMENTS = st.sampled_from(["..", ".", ".git", "store", "a", "", "%2e%2e", "%2E.", ".%2e", "..%2f", "..\\", "\\..",
                            "\uff0e\uff0e", "\u2025", "...", ". .", "..a", "a..", ".git2", "~", "~root", ".GIT", "%00"])


def local_zone(path: str) -> Zone:
    return Zone("z", "example.com", ProviderRef("local", (("path", path),)), origin=Origin("zones/z.yaml", 0, 5))


def validate_says(zone: Zone, code: str) -> list[Problem]:
    """What `gitdns validate` says of ``zone`` (its semantic checks: the schema allows the value)."""
    from gitdns.core.validate import validate as check

    return [p for p in check(DesiredState(zones=(zone,))) if p.code == code]


def validate_refuses(zone: Zone) -> bool:
    return bool(validate_says(zone, "InvalidStorePath"))


@HYPOTHESIS
@given(st.lists(SEGMENTS, min_size=1, max_size=6), st.booleans())
@example(["..", "etc"], False)
@example(["store", "..", "..", "etc"], True)
@example(["~root"], False)
def test_a_store_path_is_refused_by_validate_exactly_when_the_run_time_refuses_it(
        tmp_path_factory: pytest.TempPathFactory, parts: list[str], absolute: bool) -> None:
    from gitdns.providers.fences import Fences
    from gitdns.reconcile.engine import default_factory

    base = tmp_path_factory.getbasetemp() / "store-base"
    base.mkdir(exist_ok=True)
    path = "/".join(parts).strip()
    assume(path and not path.startswith("/"))  # an absolute path: below, inside the allowed base
    if absolute:
        path = f"{base}/{path}"
    zone = local_zone(path)
    try:
        provider = default_factory(base, fences=Fences.parse(store_dir=str(base)))(zone)
    except ConfigError as exc:
        assert "spec.provider.settings.path" in str(exc)
        refused = True
    else:
        refused = False
        directory = Path(os.path.realpath(provider.directory))  # type: ignore[attr-defined]
        assert directory == base or base in directory.parents, path  # what validate lets through stays inside
    assert validate_refuses(zone) == refused, path


HOSTS = st.sampled_from(["example.com", "EXAMPLE.com.", "127.0.0.1", "[::1]", "[2001:db8::1]", "::1", "a_b.test",
                         "ex ample.com", "exa%6dple.com", "*.example.com", "", "0x7f000001", "1.2.3", "bücher.de",
                         "xn--bcher-kva.de", "evil.com\\@good.com", "[::ffff:127.0.0.1]", "[fe80::1%25eth0]",
                         "-bad.com", "a..b", "[1.2.3.4]"])
ENDPOINTS = st.builds(
    lambda scheme, user, host, port, path: f"{scheme}{user}{host}{port}{path}",
    st.sampled_from(["https://", "HTTPS://", "Https://", "http://", "ftp://", "//", "", "https:/", "https:\\\\",
                     " https://", "https:///"]),
    st.sampled_from(["", "user@", "user:secret@", "@", ":@"]),
    HOSTS,
    st.sampled_from(["", ":443", ":8443", ":0", ":65535", ":65536", ":", ":https", ":0443", ":-1", ":١٢"]),
    st.sampled_from(["", "/", "/v1", "/a b", "/?x=1", "#frag", "?q", "/a\\b", "/%2e%2e/", "/@evil", "/\u00e9"]),
)


@HYPOTHESIS
@given(ENDPOINTS)
@example("http://169.254.169.254/latest")
@example("https://user:secret@dns.example.test")
@example("https://dns.example.test:0")
def test_an_endpoint_is_refused_by_validate_exactly_when_the_run_time_refuses_it_whatever_is_allowed(url: str) -> None:
    """The run time with the operator allowing the URL's origin (as urllib reads it) refuses
    exactly what validate refuses; never a user name or password in a message."""
    from gitdns.providers.fences import Fences, refuse_static
    from gitdns.providers.fences import Origin as Allowed

    ref = ProviderRef("route53", (("endpoint", url),))
    static = validate_says(Zone("z", "example.com", ref), "InvalidEndpoint")
    origin: tuple[Allowed, ...] = ()
    try:
        parts = urlsplit(url.strip())
        origin = (Allowed(host_key(parts.hostname or ""), parts.port or 443),)
    except ValueError:
        pass
    fences = Fences(endpoints=origin)
    try:
        refuse_static("example.com", ref)  # what route53's from_ref does before it makes a client
        fences.check_endpoint(url, zone="example.com")
    except ConfigError as exc:
        refused_text = str(exc)
    else:
        refused_text = ""
    if static:
        assert refused_text and static[0].message in refused_text, (url, refused_text)
    else:
        assert not refused_text, (url, refused_text)
    for said in (refused_text, *(p.message for p in static)):
        assert "secret" not in said


@HYPOTHESIS
@given(ENDPOINTS)
def test_an_endpoint_validate_accepts_is_read_alike_by_urllib_and_urllib3(url: str) -> None:
    """No parser differential: what parse_endpoint lets through, the SDKs' URL parsers read
    with the same host and port (so the origin the operator allowed is the one connected to)."""
    if endpoint_error(url) is not None:
        return
    endpoint = parse_endpoint(url)
    parts = urlsplit(endpoint.url)
    assert parts.scheme.lower() == "https" and parts.username is None and parts.password is None
    assert (host_key(parts.hostname or ""), parts.port or 443) == (endpoint.host, endpoint.port), url
    urllib3 = pytest.importorskip("urllib3.util")
    parsed = urllib3.parse_url(endpoint.url)
    assert (host_key(parsed.host or ""), parsed.port or 443) == (endpoint.host, endpoint.port), url
    assert parsed.auth is None


PORTS = st.one_of(st.sampled_from(["53", "5353", "0", "65535", "65536", "", " 53 ", "53.0", "1e1", "inf", "nan",
                                   "-1", "0x35", "5_3", "٥٣", "00053", "99999999999"]),
                  st.text(alphabet="0123456789.-+e_ x", max_size=8))


@HYPOTHESIS
@given(PORTS, st.sampled_from(["", "10", "0.5", "0", "-1", "inf", "nan", "1e400", "abc", "1e-9"]))
def test_an_rfc2136_port_and_timeout_are_refused_by_validate_exactly_when_the_run_time_refuses_them(
        tmp_path_factory: pytest.TempPathFactory, port: str, timeout: str) -> None:
    from gitdns.providers.fences import Fences
    from gitdns.providers.rfc2136.provider import from_ref

    ref = ProviderRef("rfc2136", (("port", port), ("server", "192.0.2.53"), ("timeout", timeout)))
    zone = Zone("z", "example.com", ref)
    static = [p for code in ("InvalidPort", "InvalidTimeout") for p in validate_says(zone, code)]
    try:
        provider = from_ref("example.com", ref, tmp_path_factory.getbasetemp(),
                            fences=Fences.parse(rfc2136_servers="192.0.2.53:*"))
    except ConfigError as exc:
        assert static and static[0].message in str(exc)
    else:
        assert not static, static
        client = provider._client
        assert 0 < client.port < 65536 and math.isfinite(client.timeout) and client.timeout > 0  # type: ignore[attr-defined]


SERVERS = st.one_of(HOSTS, st.sampled_from(["ns1.example.net:5353", "192.0.2.53:53", "[2001:db8::53]:53",
                                            "ns1 example", "ns1/x", "user@ns1", "*", "[::1]"]))


@HYPOTHESIS
@given(SERVERS)
def test_an_rfc2136_server_is_refused_by_validate_exactly_when_no_operator_list_could_allow_it(server: str) -> None:
    """A server validate refuses is refused whatever the operator lists; any other is taken
    once the operator lists it, and refused until then (an operator-dependent refusal)."""
    from gitdns.providers.fences import Fences, refuse_static

    ref = ProviderRef("rfc2136", (("server", server),))
    zone = Zone("z", "example.com", ref)
    static = [*validate_says(zone, "InvalidServer"), *validate_says(zone, "MissingSetting")]
    if static:
        with pytest.raises(ConfigError) as info:
            refuse_static("example.com", ref)
        assert static[0].message in str(info.value)
        return
    bare = server.strip()
    entry = (bare if bare.startswith("[") else f"[{bare}]" if ":" in bare else bare) + ":*"
    refuse_static("example.com", ref)
    Fences.parse(rfc2136_servers=entry).check_server(bare, 53, zone="example.com")  # listed: taken
    with pytest.raises(ConfigError, match="is not an rfc2136 server the operator allows"):
        Fences().check_server(bare, 53, zone="example.com")  # the default lists none: only the agent can say
