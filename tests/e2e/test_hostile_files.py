"""Hostile files in a desired repository, through `gitdns validate` and `gitdns agent --once`
as child processes: the 380- and 480-byte alias bombs, a 40 MB file, symlinks out of and
inside the repository.  Each is refused with a problem naming the file; the bombs and the
40 MB file in bounded memory (the child's peak RSS, measured by ``wait4``, stays below the
agent's memory limit in deploy/base), and a symlink's target is never read or echoed.

Each child runs under an address-space and CPU limit, so a reader that expands aliases or
reads everything fails these tests in seconds instead of taking the machine's memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gitdns.adapters.git.source import GitSource
from gitdns.core.limits import MiB, ReadLimits
from gitdns.providers.local import LocalProvider
from gitdns.reconcile.engine import from_files, load
from tests.core.hostile_kit import alias_bomb, big_file, first_alias_line, zone
from tests.e2e.agent_kit import ROOT, DesiredRepo, agent_cmd, git

SECRET = "kind: gitdns-test-secret-8c1f9e\n"  # what a symlink points at: never to be read or echoed
BIG = 40 * 1000 * 1000
# The child's address space: far above what gitdns needs (~1 GiB of it is mappings, not memory),
# far below what an expanding reader asks for.
ADDRESS_SPACE = 2 * 1024 * MiB
CPU_SECONDS = 120


def memory_limit() -> int:
    """The agent container's memory limit in deploy/base, in bytes."""
    for doc in YAML(typ="safe").load_all((ROOT / "deploy" / "base" / "deployment.yaml").read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "Deployment":
            [container] = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "gitdns"]
            limit = str(container["resources"]["limits"]["memory"])
            assert limit.endswith("Mi"), limit
            return int(limit[:-2]) * MiB
    raise AssertionError("no agent Deployment in deploy/base/deployment.yaml")


_LAUNCHER = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({space}, {space}))
resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
pid = os.posix_spawn(sys.executable, [sys.executable, *sys.argv[2:]], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{{os.waitstatus_to_exitcode(status)}} {{usage.ru_maxrss * 1024}}")
"""


@dataclass
class Run:
    code: int
    output: str
    peak: int  # bytes: the child's peak resident set (ru_maxrss of wait4)


def measured(args: list[str], tmp: Path) -> Run:
    """``python3 args`` as a child of a small launcher that sets the limits and reports the
    child's exit code and peak RSS (so the test process's own size never counts)."""
    result = tmp / "run.result"
    launcher = _LAUNCHER.format(space=ADDRESS_SPACE, cpu=CPU_SECONDS)
    done = subprocess.run([sys.executable, "-c", launcher, str(result), *args], capture_output=True, text=True,
                          timeout=CPU_SECONDS + 60, check=False)
    code, peak = result.read_text().split()
    return Run(int(code), done.stdout + done.stderr, int(peak))


def validate(path: Path, tmp: Path) -> Run:
    return measured(["-m", "gitdns.cli", "validate", str(path)], tmp)


def desired_tree(root: Path) -> Path:
    tree = root / "desired"
    (tree / "zones").mkdir(parents=True)
    (tree / "zones" / "other.yaml").write_text(zone("other", "other.example"))
    return tree


# --- gitdns validate on a checkout -------------------------------------------------------------


@pytest.mark.parametrize("size", [380, 480])
def test_validate_refuses_an_alias_bomb_in_bounded_memory(size: int, tmp_path: Path) -> None:
    tree = desired_tree(tmp_path)
    bomb = alias_bomb(size)
    assert len(bomb.encode()) == size
    (tree / "zones" / "bomb.yaml").write_text(bomb)
    run = validate(tree, tmp_path)
    assert run.code == 1, run.output
    where = f"zones/bomb.yaml:{first_alias_line(bomb)}: spec.provider.settings.b[0]"
    assert f"{where}: aliases are not allowed" in run.output
    assert "1 problem(s); zones held: bomb;" in run.output
    assert run.peak < memory_limit(), f"peak RSS {run.peak / MiB:.0f} MiB"


def test_validate_refuses_a_40_mb_file_unread(tmp_path: Path) -> None:
    tree = desired_tree(tmp_path)
    big_file(tree / "zones" / "big.yaml", BIG)
    run = validate(tree, tmp_path)
    assert run.code == 1, run.output
    assert f"zones/big.yaml: .: the file is 38.1 MiB ({BIG} bytes), over the cap of 4 MiB per file" in run.output
    assert run.peak < memory_limit(), f"peak RSS {run.peak / MiB:.0f} MiB"
    assert run.peak < 20 * MiB + baseline_peak(tmp_path)  # not read: no more than a valid repository


def baseline_peak(tmp: Path) -> int:
    tree = desired_tree(tmp / "baseline")
    run = validate(tree, tmp)
    assert run.code == 0, run.output
    return run.peak


def test_validate_never_follows_a_symlink(tmp_path: Path) -> None:
    tree = desired_tree(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text(SECRET)
    (tree / "zones" / "x.yaml").symlink_to(outside / "secret.yaml")  # out of the repository
    (tree / "zones" / "in.yaml").symlink_to("other.yaml")  # inside it
    (tree / "more").symlink_to(outside, target_is_directory=True)  # a linked directory: not entered
    os.mkfifo(tree / "zones" / "fifo.yaml")  # never opened: it would block
    run = validate(tree, tmp_path)
    assert run.code == 1, run.output
    assert "zones/x.yaml: .: the file is a symlink; symlinks are not followed" in run.output
    assert "zones/in.yaml: .: the file is a symlink; symlinks are not followed" in run.output
    assert "zones/fifo.yaml: .: not a regular file" in run.output
    assert "3 problem(s); zones held: none; 1 zone(s)" in run.output  # the linked directory is not read
    assert "gitdns-test-secret" not in run.output


def test_the_operator_sets_the_caps(tmp_path: Path) -> None:
    tree = desired_tree(tmp_path)
    (tree / "zones" / "z.yaml").write_text(zone("z", "z.example"))
    first = (tree / "zones" / "other.yaml").stat().st_size
    desired = load(tree, ReadLimits(file_bytes=10_000, commit_bytes=first + 10))
    [problem] = desired.problems
    assert (problem.file, problem.code) == ("zones/z.yaml", "CommitTooLarge")
    assert f"total {first} bytes" in problem.message and f"cap of {first + 10} bytes per commit" in problem.message
    repo = DesiredRepo(tmp_path / "git")
    small = ReadLimits(file_bytes=500, commit_bytes=MiB)
    files = GitSource(str(repo.bare), workdir=tmp_path / "cache", limits=small).fetch().files
    assert {rel for rel, text in files.items() if getattr(text, "code", "") == "FileTooLarge"} == {
        rel for rel in files if (repo.work / rel).stat().st_size > 500} != set()


# --- the agent's git reader and the agent ------------------------------------------------------


def commit_symlinks(repo: DesiredRepo, outside: Path) -> None:
    (repo.work / "zones" / "x.yaml").symlink_to(outside)
    (repo.work / "zones" / "in.yaml").symlink_to("example-com.yaml")


def test_the_git_reader_never_resolves_a_symlink_and_reads_no_oversize_blob(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    secret = tmp_path / "secret.yaml"
    secret.write_text(SECRET)
    commit_symlinks(repo, secret)
    big_file(repo.work / "records" / "big.yaml", BIG)
    repo.commit("links and a big file")
    source = GitSource(str(repo.bare), workdir=tmp_path / "cache")
    fetched = source.fetch()
    assert git("ls-files", "-s", "zones/x.yaml", cwd=repo.work).startswith("120000")
    desired = from_files(tmp_path, fetched.files, None)
    found = {p.file: p for p in desired.problems}
    assert found["zones/x.yaml"].code == found["zones/in.yaml"].code == "SymlinkRefused"
    assert found["records/big.yaml"].code == "FileTooLarge"
    assert "38.1 MiB" in found["records/big.yaml"].message
    assert all("gitdns-test-secret" not in text for text in fetched.files.values())
    assert desired.blocked == {"example-com", "example-org"}  # the big file's zones cannot be known


def once(repo: DesiredRepo, tmp: Path) -> Run:
    """``gitdns agent --once`` of eu-west-1; its state directory holds the local stores."""
    return measured(agent_cmd(repo, "eu-west-1", repo.zones.parent, "--once", "--listen", "")[1:], tmp)


def status_of(repo: DesiredRepo, zone_file: str) -> str:
    branch = git("branch", "--list", "gitdns-status/*", cwd=repo.bare).split()[-1]
    return git("show", f"refs/heads/{branch}:zones/{zone_file}", cwd=repo.bare)


def test_the_agent_holds_only_the_zone_an_alias_bomb_touches(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    bomb = alias_bomb(480, zone="example-org")
    repo.write("zones/bomb.yaml", bomb)
    repo.commit("an alias bomb in example-org")
    run = once(repo, tmp_path)
    assert run.code == 1, run.output  # example-org held
    assert run.peak < memory_limit(), f"peak RSS {run.peak / MiB:.0f} MiB"
    held = status_of(repo, "example.org.yaml")
    assert "held: true" in held
    assert f"zones/bomb.yaml:{first_alias_line(bomb)}: spec.provider.settings.b[0]: aliases are not allowed" in held
    assert "held: false" in status_of(repo, "example.com.yaml")


def test_the_agent_reads_no_40_mb_file_and_holds_every_zone(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    big_file(repo.work / "records" / "big.yaml", BIG)
    repo.commit("a 40 MB file")
    run = once(repo, tmp_path)
    assert run.code == 1, run.output
    assert run.peak < memory_limit(), f"peak RSS {run.peak / MiB:.0f} MiB"
    assert LocalProvider(repo.zones).read("example.com").records == ()  # nothing applied


def test_the_agent_never_follows_a_symlink(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    secret = tmp_path / "secret.yaml"
    secret.write_text(SECRET)
    commit_symlinks(repo, secret)
    repo.commit("symlinks")
    run = once(repo, tmp_path)
    assert "gitdns-test-secret" not in run.output
    assert "held: false" in status_of(repo, "example.com.yaml")
    everything = git("log", "-p", "--all", cwd=repo.bare)
    assert "gitdns-test-secret" not in everything.replace(str(secret), "")
