"""The fault-injecting provider wrapper (tests/faults/provider.py): what each fault does to the
wrapped provider, what the caller sees, the record of every fault, and that production wiring
cannot reach it."""

from __future__ import annotations

import ast
import contextlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import gitdns.agent.main as wiring
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet
from gitdns.errors import GitdnsError, RetryableError, ThrottledError, UnreachableError
from gitdns.providers.local import LocalProvider, StoreBusyError
from gitdns.providers.memory import MemoryProvider
from tests.faults import flavours, launch
from tests.faults.provider import KINDS, FaultPlan, FaultyProvider, read_log, wrap_factory

ROOT = Path(__file__).resolve().parents[2]
ZONE = "example.com"


def a(label: str, *values: str) -> RecordSet:
    return RecordSet(f"{label}.{ZONE}", "A", 60, values or ("192.0.2.1",))


def creates(*records: RecordSet) -> list[Change]:
    return [Change(Action.CREATE, None, r, r.key) for r in records]


def only(kind: str, seed: int = 3, **settings: object) -> FaultPlan:
    return FaultPlan(seed=seed, rate=1.0, kinds=(kind,), **settings)  # type: ignore[arg-type]


def names(provider: MemoryProvider | LocalProvider) -> set[str]:
    return {r.name for r in provider.read(ZONE).records}


THREE = creates(a("x"), a("y"), a("z"))


def test_timeout_before_the_write_lands_nothing() -> None:
    inner = MemoryProvider()
    with pytest.raises(UnreachableError) as err:
        FaultyProvider(inner, only("timeout-before", flavour="route53")).apply(ZONE, THREE)
    assert "ConnectTimeoutError" in str(err.value)
    assert names(inner) == set()


def test_timeout_after_the_write_lands_everything_and_the_caller_sees_an_error() -> None:
    inner = MemoryProvider()
    with pytest.raises(UnreachableError) as err:
        FaultyProvider(inner, only("timeout-after", flavour="google")).apply(ZONE, THREE)
    assert "ReadTimeout" in str(err.value)
    assert names(inner) == {f"{n}.{ZONE}" for n in "xyz"}


@pytest.mark.parametrize("flavour", ["route53", "google", "azure", "rfc2136"])
def test_5xx_lands_nothing_and_is_retryable_not_unreachable(flavour: str) -> None:
    inner = MemoryProvider()
    with pytest.raises(RetryableError) as err:
        FaultyProvider(inner, only("5xx", flavour=flavour)).apply(ZONE, THREE)
    assert not isinstance(err.value, UnreachableError | ThrottledError)
    assert names(inner) == set()


@pytest.mark.parametrize(("flavour", "retry_after", "text"), [
    ("route53", None, "Throttling"), ("google", None, "429"), ("azure", 2.5, "429 TooManyRequests")])
def test_throttling_is_each_clouds_with_its_retry_after(flavour: str, retry_after: float | None, text: str) -> None:
    inner = MemoryProvider()
    with pytest.raises(ThrottledError) as err:
        FaultyProvider(inner, only("throttled", flavour=flavour, retry_after=2.5)).apply(ZONE, THREE)
    assert err.value.retry_after == retry_after and text in str(err.value)
    assert names(inner) == set()


def test_a_partial_batch_lands_some_groups_and_not_all_then_a_5xx() -> None:
    landed = set()
    for seed in range(20):
        inner = MemoryProvider()
        with pytest.raises(RetryableError):
            FaultyProvider(inner, only("partial-batch", seed=seed, flavour="route53")).apply(ZONE, THREE)
        got = names(inner)
        assert 1 <= len(got) <= 2, got
        assert got == {f"{n}.{ZONE}" for n in "xyz"[:len(got)]}  # the first groups, in order
        landed.add(len(got))
    assert landed == {1, 2}


def test_a_partial_batch_keeps_the_guards_of_the_groups_it_sends() -> None:
    inner = MemoryProvider()
    x, y = a("x"), a("y")
    guard = Guard(RecordKey(f"kuadrant-joiner-a-y.{ZONE}", "TXT"), present=False, group=y.key)
    inner.apply(ZONE, creates(RecordSet(guard.key.name, "TXT", 60, ("joined",))))
    plan = only("partial-batch", seed=1, flavour="route53")
    with pytest.raises(RetryableError):
        FaultyProvider(inner, plan).apply(ZONE, creates(x, y), [guard])
    assert f"x.{ZONE}" in names(inner) and f"y.{ZONE}" not in names(inner)


def test_a_call_with_one_group_is_never_a_partial_batch() -> None:
    inner = MemoryProvider()
    result = FaultyProvider(inner, only("partial-batch")).apply(ZONE, creates(a("x")))
    assert result.ok and names(inner) == {f"x.{ZONE}"}


def test_the_azure_partial_batch_can_leave_a_groups_first_record_alone() -> None:
    """Azure writes one record set at a time: a failure inside a group leaves its first member
    (the ownership TXT, written before the data) without the rest."""
    data = a("x")
    txt = RecordSet(f"kuadrant-owner123-a-x.{ZONE}", "TXT", 60, ("heritage=external-dns,external-dns/owner=o",))
    changes = [*creates(a("w")), Change(Action.CREATE, None, txt, data.key),
               Change(Action.CREATE, None, data, data.key)]
    outcomes = set()
    for seed in range(40):
        inner = MemoryProvider()
        with pytest.raises(RetryableError):
            FaultyProvider(inner, only("partial-batch", seed=seed, flavour="azure")).apply(ZONE, changes)
        outcomes.add(frozenset(names(inner)))
    assert frozenset({f"w.{ZONE}", txt.name}) in outcomes and frozenset({f"w.{ZONE}"}) in outcomes


def test_a_stale_read_answers_an_older_snapshot_of_the_same_read() -> None:
    inner = MemoryProvider()
    inner.apply(ZONE, creates(a("x")))
    p = FaultyProvider(inner, only("stale-read"))
    first = p.read(ZONE)  # nothing older yet: the real answer, no fault
    assert not p.faults
    inner.apply(ZONE, creates(a("y")))
    stale = p.read(ZONE)
    assert stale.records == first.records and [f.kind for f in p.faults] == ["stale-read"]
    assert len(inner.read(ZONE).records) == 2


def test_a_connection_reset_comes_after_the_work_was_done() -> None:
    inner = MemoryProvider()
    p = FaultyProvider(inner, only("connection-reset", flavour="azure"))
    with pytest.raises(UnreachableError):
        p.apply(ZONE, THREE)
    assert len(names(inner)) == 3
    with pytest.raises(UnreachableError):
        p.read(ZONE)


def test_the_local_flavour_times_out_as_the_store_lock_does() -> None:
    with pytest.raises(StoreBusyError):
        FaultyProvider(MemoryProvider(), only("timeout-before", flavour="local")).apply(ZONE, THREE)


def test_auto_takes_the_wrapped_providers_own_flavour(tmp_path: Path) -> None:
    assert FaultyProvider(LocalProvider(tmp_path), FaultPlan(seed=1)).flavour == "local"
    assert flavours.flavour_of(type("P", (), {"name": "route53"})(), "auto") == "route53"
    with pytest.raises(ValueError, match="unknown fault flavour"):
        flavours.flavour_of(MemoryProvider(), "cloudflare")


def test_no_faults_while_the_switch_is_missing(tmp_path: Path) -> None:
    switch = tmp_path / "on"
    inner = MemoryProvider()
    p = FaultyProvider(inner, FaultPlan(seed=1, rate=1.0, switch=str(switch)))
    assert p.apply(ZONE, THREE).ok and not p.faults
    switch.touch()
    with pytest.raises(GitdnsError):
        p.apply(ZONE, creates(a("w")))
    assert len(p.faults) == 1


def test_every_fault_is_recorded_and_logged_with_kind_zone_and_time(tmp_path: Path) -> None:
    log = tmp_path / "faults.jsonl"
    p = FaultyProvider(MemoryProvider(), FaultPlan(seed=5, rate=0.5, log=str(log), label="c0"), clock=lambda: 42.0)
    for i in range(60):
        try:
            p.apply(ZONE, creates(a(f"h{i}"), a(f"g{i}")))
            p.read(ZONE)
        except GitdnsError:
            pass
    logged = read_log(log)
    assert logged == p.faults and len(logged) > 10
    assert {f.kind for f in logged} == set(KINDS)
    assert all(f.zone == ZONE and f.at == 42.0 and f.label == "c0" and f.error for f in logged)
    assert sum(p.counts().values()) == len(logged)


def test_the_same_seed_gives_the_same_faults_call_by_call() -> None:
    def run(seed: int, label: str) -> list[tuple[str, str]]:
        p = FaultyProvider(MemoryProvider(), FaultPlan(seed=seed, rate=0.3, label=label, flavour="mixed"))
        for i in range(80):
            with contextlib.suppress(GitdnsError):
                p.apply(ZONE, creates(a(f"h{i}"), a(f"g{i}")))
        return [(f.kind, f.flavour) for f in p.faults]

    assert run(7, "c0") == run(7, "c0")
    assert run(7, "c0") != run(8, "c0") and run(7, "c0") != run(7, "c1")


def test_views_dir_and_account_are_the_wrapped_providers(tmp_path: Path) -> None:
    inner = LocalProvider(tmp_path)
    p = FaultyProvider(inner, FaultPlan(seed=1))
    assert p.views_dir(ZONE) == inner.views_dir(ZONE)
    assert (p.name, p.capabilities, p.account) == (inner.name, inner.capabilities, "local")


def test_wrap_factory_makes_one_wrapper_per_zone_with_its_own_stream() -> None:
    class Zone:
        def __init__(self, name: str, domain: str) -> None:
            self.name, self.domain = name, domain

    made = wrap_factory(lambda zone: MemoryProvider(), FaultPlan(seed=1))
    one, other = Zone("a", "a.test"), Zone("b", "b.test")
    assert made(one) is made(one) and made(one) is not made(other)
    assert isinstance(made(one), FaultyProvider)


def test_a_plan_round_trips_through_its_file(tmp_path: Path) -> None:
    plan = FaultPlan(seed=9, rate=0.25, kinds=("5xx", "stale-read"), flavour="azure", switch="s", log="l", label="c3")
    assert FaultPlan.load(plan.dump(tmp_path / "plan.json")) == plan
    with pytest.raises(ValueError):
        FaultPlan(seed=1, kinds=("meteor",))


# --- the launcher and production wiring --------------------------------------------------------
def test_the_launcher_wraps_every_provider_the_agent_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wiring, "default_factory", wiring.default_factory)  # put back after the test
    launch.install(FaultPlan(seed=1, label="c0"))
    from gitdns.core.model import ProviderRef, Zone

    factory = wiring.default_factory(tmp_path)
    zone = Zone(name="z", domain=ZONE, provider=ProviderRef("local", (("path", "zones"),)))
    provider = factory(zone)
    assert isinstance(provider, FaultyProvider) and isinstance(provider.inner, LocalProvider)


def _imports(tree: ast.AST) -> list[str]:
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                out.append(node.args[0].value)
    return out


def test_no_gitdns_module_imports_the_tests_or_the_bench() -> None:
    """The wrapper lives in tests/: nothing the package runs can import it (or read its plan)."""
    offenders = []
    for path in sorted((ROOT / "gitdns").rglob("*.py")):
        text = path.read_text()
        for name in _imports(ast.parse(text)):
            if name.split(".")[0] in ("tests", "bench"):
                offenders.append(f"{path.relative_to(ROOT)}: imports {name}")
        if "tests.faults" in text or "FaultPlan" in text or "FaultyProvider" in text:
            offenders.append(f"{path.relative_to(ROOT)}: names the fault wrapper")
    assert not offenders


def test_the_import_walk_sees_every_form_of_import() -> None:
    tree = ast.parse("import tests.faults\nfrom tests.faults import provider\n"
                     "importlib.import_module('tests.faults.launch')\n__import__('bench.soak')\nfrom . import x\n")
    assert _imports(tree) == ["tests.faults", "tests.faults", "tests.faults.launch", "bench.soak"]


def test_the_package_and_the_image_hold_gitdns_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["gitdns*"]
    assert project["project"]["scripts"] == {"gitdns": "gitdns.cli:main"}
    copies = [line.split()[1:] for line in (ROOT / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY") and "--from" not in line]
    assert copies and not any(src.startswith(("tests", "bench")) for args in copies for src in args[:-1])


def test_the_gitdns_command_never_loads_the_wrapper(tmp_path: Path) -> None:
    """The production entry point, started with everything the soak hands the launcher (the plan
    file beside it, its path in the environment), imports no module of the wrapper."""
    plan = only("5xx").dump(tmp_path / "plan.json")
    code = ("import sys, runpy; sys.argv = ['gitdns', '--version']\n"
            "try:\n    runpy.run_module('gitdns.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('tests', 'bench'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "GITDNS_FAULTS": str(plan),
                               "SOAK_FAULTS": str(plan)}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_rate_decides_how_often() -> None:
    p = FaultyProvider(MemoryProvider(), FaultPlan(seed=11, rate=0.2))
    for _ in range(500):
        with contextlib.suppress(GitdnsError):
            p.read(ZONE)
    assert 60 < len(p.faults) < 140  # 0.2 of 500, give or take (stale reads need an older answer)
    assert json.dumps([f.kind for f in p.faults])  # plain data
