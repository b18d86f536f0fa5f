"""The package as a user installs it: an sdist, a wheel built from that sdist, installed into a
virtual environment of its own (what pipx does), and run from outside the checkout.

Nothing is fetched: the build runs without isolation (the build backend of the test extra) and
pip installs the one wheel with ``--no-index --no-deps``, the environment seeing this
interpreter's packages (``--system-site-packages``) for the dependencies.  ``gitdns validate``
and ``gitdns apply`` on a copy of example-repo/ then prove the packaged data (the schemas and
templates under gitdns/data) ship in the wheel: the installed package is checked to be the
wheel's, not this checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # ~10 s: an sdist, a wheel, a virtual environment


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=env or clean_env())
    assert done.returncode == 0, f"{' '.join(map(str, argv))}:\n{done.stdout}\n{done.stderr}"
    return done


def clean_env() -> dict[str, str]:
    """This environment without what would point Python or pip at the checkout or an index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build --no-isolation`` of the package's sources: the sdist, then the wheel
    built from it.  gitdns/data's schemas and templates are links to the top-level directories,
    copied along."""
    pytest.importorskip("build", reason="the test extra's build (pip install -e '.[test]')")
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("gitdns", "schemas", "templates"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=ignore)
    out = base / "dist"
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src, cwd=base)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the wheel (its bin/ has the ``gitdns`` script)."""
    where = tmp_path_factory.mktemp("venv") / "env"
    run(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", where, cwd=where.parent)
    (wheel,) = dist.glob("gitdns-*.whl")
    run(sys.executable, "-m", "pip", "--python", where / "bin" / "python", "install", "--no-deps", "--no-index",
        "--no-cache-dir", wheel, cwd=where.parent)
    return where


def test_the_wheel_and_sdist_hold_the_packaged_data(dist: Path) -> None:
    (wheel,) = dist.glob("gitdns-*.whl")
    (sdist,) = dist.glob("gitdns-*.tar.gz")
    assert sdist.stat().st_size > 0
    names = set(zipfile.ZipFile(wheel).namelist())
    schemas = {f"gitdns/data/schemas/{p.name}" for p in (ROOT / "schemas").glob("*.schema.json")}
    templates = {f"gitdns/data/templates/{p.relative_to(ROOT / 'templates').as_posix()}"
                 for p in (ROOT / "templates").rglob("*") if p.is_file()}
    assert len(schemas) >= 7 and len(templates) >= 4
    assert schemas | templates | {"gitdns/py.typed", "gitdns/cli/__init__.py"} <= names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "gitdns = gitdns.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_command_runs_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    gitdns = venv / "bin" / "gitdns"
    assert run(gitdns, "--version", cwd=tmp_path).stdout.strip() == "gitdns 0.1.0"
    probe = ("import gitdns, json; from importlib.resources import files; "
             "print(json.dumps([gitdns.__file__, str(files('gitdns') / 'data' / 'schemas')]))")
    where, schemas = json.loads(run(venv / "bin" / "python", "-c", probe, cwd=tmp_path).stdout)
    site = str(venv.resolve())
    assert Path(where).resolve().is_relative_to(site), f"gitdns imported from {where}, not the wheel"
    assert Path(schemas).resolve().is_relative_to(site) and not str(Path(schemas).resolve()).startswith(str(ROOT))


def test_validate_and_apply_with_the_installed_package(venv: Path, tmp_path: Path) -> None:
    repo = tmp_path / "desired"
    shutil.copytree(ROOT / "example-repo", repo, ignore=shutil.ignore_patterns(".gitdns"))
    gitdns = venv / "bin" / "gitdns"
    assert run(gitdns, "validate", repo, cwd=tmp_path).stdout.startswith("valid:")
    applied = run(gitdns, "apply", "--repo", repo, "--all-clusters", cwd=tmp_path)
    assert "applied" in applied.stdout
    assert (repo / ".gitdns" / "zones" / "example.com.json").is_file()
    again = run(gitdns, "plan", "--repo", repo, "--all-clusters", "--exit-code", cwd=tmp_path)
    assert again.returncode == 0
    rendered = run(gitdns, "render", "--repo", repo, "--cluster", "eu-west-1", "--out", tmp_path / "out",
                   "--all-zones", cwd=tmp_path)
    assert rendered.returncode == 0 and any((tmp_path / "out").rglob("*.yaml"))  # the packaged templates
