"""The layers of the package (docs/architecture.md, "Layers and packages"), checked two
independent ways.

    gitdns.cli                               parse, call one command, print
    gitdns.commands                          the one-shot verbs: output and exit codes
    gitdns.agent | gitdns.orchestrator       the long-running processes (independent of each other)
    gitdns.kubedelegation                    delegation through Kubernetes (a part of the agent)
    gitdns.reconcile                         the per-zone pipeline
    gitdns.providers                         DNS services (may use the adapters)
    gitdns.adapters                          all other I/O: git, Kubernetes, files, probes
    gitdns.core                              pure

1. ``lint-imports`` with the contracts in pyproject.toml: the layers above, only the adapters
   (and providers) import git, kubernetes and fcntl, and a pure core.  Skipped when
   import-linter is not installed, except under ``CI=true`` where that is a failure.  The
   contracts themselves are checked to say this (a weakened contract fails here), and the
   module graph (grimp, import-linter's) to have no import circle.
2. An AST walk: over every module of ``gitdns/core``, no import (top-level or inside a
   function, ``import x`` or ``from x import y``, or ``__import__``/``importlib.import_module``
   with a literal name) of a module that does I/O, reads clocks or randomness, or logs; over
   every module above the adapters, no import of git, kubernetes or fcntl.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sysconfig
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "gitdns" / "core"

LAYERS = [
    "gitdns.cli",
    "gitdns.commands",
    "gitdns.agent | gitdns.orchestrator",
    "gitdns.kubedelegation",
    "gitdns.reconcile",
    "gitdns.providers",
    "gitdns.adapters",
    "gitdns.core",
]
ABOVE_ADAPTERS = ("gitdns.cli", "gitdns.commands", "gitdns.agent", "gitdns.orchestrator", "gitdns.kubedelegation",
                  "gitdns.reconcile")
ONLY_ADAPTERS = frozenset({"git", "kubernetes", "fcntl"})

FORBIDDEN_IN_CORE = frozenset(
    {
        "os",
        "io",
        "pathlib",
        "time",
        "datetime",
        "logging",
        "random",
        "socket",
        "subprocess",
        "fcntl",
        "threading",
        "asyncio",
        # Also forbidden in the core (no I/O); import-linter cannot name subpackages of external packages.
        "shutil",
        "tempfile",
        "urllib",
        "http",
        "git",
        "dns.query",
        "dns.resolver",
    }
)


def _lint_imports() -> str | None:
    scripts = Path(sysconfig.get_path("scripts")) / "lint-imports"
    if scripts.exists():
        return str(scripts)
    return shutil.which("lint-imports")


def test_import_linter_contracts_hold() -> None:
    exe = _lint_imports()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("lint-imports is not installed (pip install -e '.[test]')")
        pytest.skip("lint-imports is not installed")
    proc = subprocess.run(
        [exe, "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"lint-imports failed:\n{proc.stdout}\n{proc.stderr}"


def _core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def _forbidden(name: str, forbidden: Iterable[str] = FORBIDDEN_IN_CORE) -> bool:
    return any(name == bad or name.startswith(bad + ".") for bad in forbidden)


def _imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                found.append((node.lineno, node.module))
                found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and node.args:
            func, first = node.func, node.args[0]
            dynamic = (isinstance(func, ast.Name) and func.id == "__import__") or (
                isinstance(func, ast.Attribute) and func.attr == "import_module"
            )
            if dynamic and isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
    return found


def test_core_modules_exist() -> None:
    assert _core_modules(), f"no modules under {CORE}"


@pytest.mark.parametrize("path", _core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_imports_nothing_impure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in _imported_names(tree) if _forbidden(name)
    ]
    assert not bad, "gitdns/core must stay pure (docs/architecture.md, Layers and packages):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("import os", True),
        ("import os.path as p", True),
        ("from pathlib import Path", True),
        ("def f():\n    import time\n", True),
        ("from dns import resolver", True),
        ("import dns.name", False),
        ("__import__('logging')", True),
        ("import importlib\nimportlib.import_module('socket')", True),
        ("from . import names", False),
        ("import hashlib, re", False),
        ("from typing import IO", False),
        ("import ossify", False),
    ],
)
def test_the_guard_itself(source: str, caught: bool) -> None:
    names = [name for _, name in _imported_names(ast.parse(source))]
    assert any(_forbidden(n) for n in names) is caught, names


# --- above the adapters ---------------------------------------------------------------------------


def _above_adapter_modules() -> list[Path]:
    found: list[Path] = []
    for package in ABOVE_ADAPTERS:
        path = ROOT / Path(*package.split("."))
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    return found


def test_modules_above_the_adapters_exist() -> None:
    paths = _above_adapter_modules()
    assert all(p.exists() for p in paths) and len(paths) > len(ABOVE_ADAPTERS), paths


@pytest.mark.parametrize("path", _above_adapter_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_adapters_import_git_kubernetes_or_fcntl(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in _imported_names(tree)
           if _forbidden(name, ONLY_ADAPTERS)]
    assert not bad, "git, kubernetes and fcntl are imported by adapters only (gitdns/adapters):\n" + "\n".join(bad)


# --- the contracts say what the layers are --------------------------------------------------------


def _contracts() -> list[dict[str, object]]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = doc["tool"]["importlinter"]["contracts"]
    return contracts


def test_the_layers_contract_states_every_layer() -> None:
    layers = [c for c in _contracts() if c["type"] == "layers"]
    assert len(layers) == 1 and layers[0]["layers"] == LAYERS, layers


def test_a_forbidden_contract_keeps_git_kubernetes_and_fcntl_in_the_adapters() -> None:
    found = [c for c in _contracts() if c["type"] == "forbidden" and set(c["forbidden_modules"]) >= ONLY_ADAPTERS
             and set(ABOVE_ADAPTERS) <= set(c["source_modules"])]
    assert found, "no forbidden contract for git, kubernetes and fcntl above the adapters"


def test_the_core_contract_forbids_every_layer_above_it() -> None:
    core = [c for c in _contracts() if c["type"] == "forbidden" and c["source_modules"] == ["gitdns.core"]]
    above = {m.strip() for layer in LAYERS[:-1] for m in layer.split("|")}
    assert len(core) == 1 and above <= set(core[0]["forbidden_modules"]), core


def test_no_import_circles() -> None:
    try:
        import grimp
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("grimp (import-linter's graph) is not installed (pip install -e '.[test]')")
        pytest.skip("grimp is not installed")
    graph = grimp.build_graph("gitdns", cache_dir=None)
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("gitdns")}
             for m in graph.modules}
    circles = [sorted(c) for c in _strongly_connected(edges) if len(c) > 1]
    assert not circles, f"import circles: {circles}"


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
    return found
