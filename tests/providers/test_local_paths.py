"""The `local` store stays inside its base directory and never follows a symbolic link.

The attack (issue "Hostile input"): a Zone with ``provider: {type: local, settings: {path:
../..}}`` made the agent write its record store, the geo views and the CoreDNS ``.server``
snippet outside its state directory (the CLI: outside the repository), and report Ready.
Committed symbolic links in a checkout (``.gitdns -> /elsewhere``, ``default.zone ->
/dev/zero``) would do the same for the one-shot verbs.  Each case here is refused with a
`ConfigError` naming the field, and nothing is read or written outside the base.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gitdns.core.model import Origin, ProviderRef, Zone
from gitdns.core.records import Action, Change, RecordSet
from gitdns.errors import ConfigError
from gitdns.providers.fences import Fences
from gitdns.providers.local import LocalProvider
from gitdns.reconcile.engine import default_factory, render_views

DOMAIN = "example.com"
RECORD = RecordSet(f"www.{DOMAIN}", "A", 60, ("192.0.2.1",))
FILE, LINE = "zones/evil.yaml", 7
ROOT = Path(__file__).resolve().parents[2]


def zone(path: str) -> Zone:
    return Zone("evil", DOMAIN, ProviderRef("local", (("path", path),)), origin=Origin(FILE, 0, LINE))


def write_and_render(provider: object, z: Zone) -> None:
    assert isinstance(provider, LocalProvider)
    provider.apply(DOMAIN, [Change(Action.CREATE, None, RECORD, RECORD.key)])
    render_views(provider, z)


def snapshot(tree: Path) -> dict[str, bytes]:
    """Every file under ``tree`` (links not followed) with its content."""
    out: dict[str, bytes] = {}
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(tree))] = path.read_bytes()
    return out


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """(the base directory, an outside directory holding a file that must stay as it is)."""
    base, outside = tmp_path / "state", tmp_path / "outside"
    base.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("the operator's file\n")
    return base, outside


# --- paths a Zone names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../outside", "../..", "store/../../outside", "~/gitdns", ".git/hooks",
                                  "store/\x00x"])
def test_a_path_out_of_the_base_is_refused_naming_the_field(places: tuple[Path, Path], path: str) -> None:
    base, _ = places
    before = snapshot(base.parent)
    with pytest.raises(ConfigError) as info:
        default_factory(base)(zone(path))
    message = str(info.value)
    assert message.startswith(f"{FILE}:{LINE}: spec.provider.settings.path (zone {DOMAIN}):")
    assert "--store-dir" in message
    assert snapshot(base.parent) == before


def test_an_absolute_path_is_taken_only_inside_the_base(places: tuple[Path, Path]) -> None:
    base, outside = places
    with pytest.raises(ConfigError, match=r"is outside the base directory .*nothing was written"):
        default_factory(base)(zone(str(outside)))
    inside = default_factory(base)(zone(str(base / "zones")))
    write_and_render(inside, zone(str(base / "zones")))
    assert (base / "zones" / f"{DOMAIN}.json").is_file()
    assert (base / "zones" / f"{DOMAIN}.views" / f"{DOMAIN}.server").is_file()
    assert not (outside / f"{DOMAIN}.json").exists()


def test_the_operators_store_dir_is_the_base(places: tuple[Path, Path]) -> None:
    base, outside = places
    fences = Fences.parse(store_dir=str(outside))
    provider = default_factory(base, fences=fences)(zone(str(outside / "zones")))
    write_and_render(provider, zone(str(outside / "zones")))
    assert (outside / "zones" / f"{DOMAIN}.json").is_file()
    with pytest.raises(ConfigError, match="outside the base directory"):
        default_factory(base, fences=fences)(zone(str(base / "zones")))


def test_a_long_path_is_truncated_in_the_message(places: tuple[Path, Path]) -> None:
    base, _ = places
    with pytest.raises(ConfigError) as info:
        default_factory(base)(zone("/" + "x" * 10_000))
    assert len(str(info.value)) < 1_000


# --- symbolic links below the base -------------------------------------------------------------------------


def test_a_linked_store_directory_is_refused_before_and_after_the_provider_is_made(
        places: tuple[Path, Path]) -> None:
    base, outside = places
    before = snapshot(outside)
    (base / "store").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"store is a symbolic link or not a directory"):
        default_factory(base)(zone("store"))
    (base / "store").unlink()
    provider = default_factory(base)(zone("store/zones"))  # the store appears as a link later on
    (base / "store").symlink_to(outside, target_is_directory=True)
    for call in (lambda: provider.read(DOMAIN), lambda: write_and_render(provider, zone("store/zones"))):
        with pytest.raises(ConfigError, match="symbolic link"):
            call()
    assert snapshot(outside) == before


@pytest.mark.parametrize("link", [f"{DOMAIN}.json", f"{DOMAIN}.json.lock", f"{DOMAIN}.views",
                                  f"{DOMAIN}.views.lock"])
def test_a_linked_store_file_lock_or_views_directory_is_refused(places: tuple[Path, Path], link: str) -> None:
    base, outside = places
    store = base / "store"
    store.mkdir()
    (outside / "zone").mkdir()
    target = outside / "zone" if link.endswith(".views") else outside / "keep.txt"
    (store / link).symlink_to(target)
    before = snapshot(outside)
    provider = default_factory(base)(zone("store"))
    with pytest.raises(ConfigError, match="symbolic link"):
        write_and_render(provider, zone("store"))
    assert snapshot(outside) == before


@pytest.mark.parametrize("name", [f"{DOMAIN}.server", "default.zone", "default.weights"])
def test_a_linked_file_in_the_views_directory_is_refused(places: tuple[Path, Path], name: str) -> None:
    base, outside = places
    provider = default_factory(base)(zone("store"))
    write_and_render(provider, zone("store"))  # a real views directory
    views = base / "store" / f"{DOMAIN}.views"
    (views / name).unlink()
    (views / name).symlink_to(outside / "keep.txt")
    with pytest.raises(ConfigError, match="symbolic link"):
        render_views(provider, zone("store"))
    assert (outside / "keep.txt").read_text() == "the operator's file\n"


def test_a_store_file_linked_to_a_file_outside_is_never_read(places: tuple[Path, Path]) -> None:
    base, outside = places
    planted = LocalProvider(outside)  # a valid store for the zone, outside the base
    planted.apply(DOMAIN, [Change(Action.CREATE, None, RECORD, RECORD.key)])
    (base / "store").mkdir()
    (base / "store" / f"{DOMAIN}.json").symlink_to(outside / f"{DOMAIN}.json")
    with pytest.raises(ConfigError, match="symbolic link"):
        default_factory(base)(zone("store")).read(DOMAIN)


def test_the_direct_constructor_without_a_base_is_unchanged(tmp_path: Path) -> None:
    provider = LocalProvider(tmp_path / "anywhere")  # programmatic use: the caller chose the path
    provider.apply(DOMAIN, [Change(Action.CREATE, None, RECORD, RECORD.key)])
    assert provider.read(DOMAIN).records == (RECORD,)


# --- the one-shot verbs and the agent ----------------------------------------------------------------------


def repo_with(tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", repo, ignore=shutil.ignore_patterns(".gitdns"))
    edit(repo)
    return repo


def set_store_path(repo: Path, path: str) -> None:
    for z in (repo / "zones").glob("*.yaml"):
        z.write_text(z.read_text().replace("path: .gitdns/zones", f"path: {path}"))


def test_apply_refuses_a_store_out_of_the_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gitdns.cli import main

    repo = repo_with(tmp_path, lambda r: set_store_path(r, "../outside"))
    assert main(["apply", "--repo", str(repo), "--all-clusters"]) == 1
    # refused as `gitdns validate` refuses it (the same rule), before any provider is built
    assert re.search(r"zones/example-(com|org)\.yaml:\d+: spec\.provider\.settings\.path: '\.\./outside': a path "
                     r"with '\.\.' or '\.git' is refused", capsys.readouterr().err)
    assert not (tmp_path / "outside").exists()


def test_apply_refuses_a_committed_link_out_of_the_repository(places: tuple[Path, Path], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from gitdns.cli import main

    _, outside = places
    before = snapshot(outside)
    repo = repo_with(tmp_path, lambda r: (r / ".gitdns").symlink_to(outside, target_is_directory=True))
    assert main(["apply", "--repo", str(repo), "--all-clusters"]) == 1
    assert "symbolic link" in capsys.readouterr().err
    assert snapshot(outside) == before


def test_the_agent_holds_a_zone_whose_store_leaves_its_state_directory(tmp_path: Path) -> None:
    from tests.e2e.agent_kit import DesiredRepo, run_once

    repo = DesiredRepo(tmp_path / "git")
    for z in (repo.work / "zones").glob("*.yaml"):
        z.write_text(z.read_text().replace(f"path: {tmp_path / 'git' / 'zones'}", "path: ../outside"))
    repo.commit("a store outside the state directory")
    done = run_once(repo, "eu-west-1", tmp_path / "state")
    assert done.returncode != 0, done.stdout
    assert "spec.provider.settings.path (zone example.com)" in done.stdout + done.stderr
    assert not (tmp_path / "outside").exists()
    assert {p.name for p in tmp_path.iterdir()} == {"git", "state"}


def test_no_file_descriptor_is_left_open(places: tuple[Path, Path]) -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc")
    base, _ = places
    provider = default_factory(base)(zone("store"))
    write_and_render(provider, zone("store"))
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        provider.read(DOMAIN)
        render_views(provider, zone("store"))
    assert len(os.listdir("/proc/self/fd")) <= before + 1, sys.platform


def test_a_base_that_is_a_regular_file_is_a_clear_error(tmp_path: Path) -> None:
    """--store-dir naming a file: a ConfigError naming the path, never a NotADirectoryError."""
    base = tmp_path / "not-a-directory"
    base.write_text("x\n")
    with pytest.raises(ConfigError) as info:
        default_factory(base)(zone("store")).read(DOMAIN)
    assert "cannot be read as a directory" in str(info.value) and str(base) in str(info.value)
    assert base.read_text() == "x\n"
