"""The layer rules of ARCHITECTURE.md §3, checked two independent ways.

1. ``lint-imports`` with the contracts in pyproject.toml (layers, and a pure core).  Skipped
   when import-linter is not installed, except under ``CI=true`` where that is a failure.
2. An AST walk over every module of ``gitdns/core``: no import (top-level or inside a
   function, ``import x`` or ``from x import y``, or ``__import__``/``importlib.import_module``
   with a literal name) of a module that does I/O, reads clocks or randomness, or logs.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "gitdns" / "core"

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
        # Also forbidden by §3; import-linter cannot name subpackages of external packages.
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


def _forbidden(name: str) -> bool:
    return any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_IN_CORE)


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
    assert not bad, "gitdns/core must stay pure (ARCHITECTURE.md §3):\n" + "\n".join(bad)


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
