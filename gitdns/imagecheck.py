"""The image's entrypoint check: can this installation run every provider?

    python -m gitdns.imagecheck            the Python side: dependencies, provider SDKs, data, CLI
    python -m gitdns.imagecheck --image    and the programs the image runs: git, ssh, gpg, tini, gitdns

The providers import their SDKs lazily (a zone on ``google`` imports ``google.cloud.dns`` when it is
first planned), so an installation without an extra starts, and a zone on that provider fails only
when it is reached.  This check imports, up front, exactly the modules the code imports lazily,
grouped by the extra that installs them, and reads the packaged data the way the agent reads it.
The Dockerfile runs it in both stages, ``scripts/check-image.sh`` in a fresh virtual environment.

One line per check (``ok`` or ``FAIL``); exit status 0 when all pass, 1 otherwise, with a summary
on standard error naming what is missing and the command that installs it.  Importing this module
imports nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

PACKAGE = "gitdns"

# Every third-party module the code imports, grouped by what installs it.  The provider modules and
# the Kubernetes adapters import them inside functions; tests/test_image.py walks gitdns/ and fails
# when an import is missing here.  (requests and urllib3 come with the SDKs that use them.)
CORE_MODULES: tuple[str, ...] = (
    "apscheduler.executors.pool",
    "apscheduler.schedulers.background",
    "apscheduler.triggers.date",
    "apscheduler.triggers.interval",
    "dns.exception",
    "dns.message",
    "dns.name",
    "dns.query",
    "dns.rdata",
    "dns.rdataclass",
    "dns.rdataset",
    "dns.rdatatype",
    "dns.rdtypes.ANY.TXT",
    "dns.rrset",
    "dns.tsig",
    "dns.update",
    "dns.xfr",
    "dns.zone",
    "git",
    "jinja2",
    "jsonschema",
    "jsonschema.validators",
    "prometheus_client",
    "prometheus_client.core",
    "publicsuffixlist",
    "ruamel.yaml",
    "ruamel.yaml.comments",
    "ruamel.yaml.constructor",
    "ruamel.yaml.cyaml",
    "ruamel.yaml.error",
    "ruamel.yaml.events",
    "ruamel.yaml.nodes",
    "ruamel.yaml.resolver",
    "ruamel.yaml.scalarstring",
    "shtab",
)

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "kubernetes": (
        "kubernetes.client",
        "kubernetes.client.exceptions",
        "kubernetes.config",
        "kubernetes.config.config_exception",
        "urllib3.exceptions",
    ),
    "route53": ("botocore.config", "botocore.session"),
    "google": (
        "google.api_core.exceptions",
        "google.auth.credentials",
        "google.auth.exceptions",
        "google.cloud.dns",
        "google.oauth2.service_account",
        "requests.exceptions",
    ),
    "azure": ("azure.core.exceptions", "azure.identity", "azure.mgmt.dns"),
}

# What fails without each extra (the fix line says it).
EXTRA_USERS: dict[str, str] = {
    "kubernetes": "the Kubernetes integrations (Leases, Gateways, DNSRecords, Secrets, ConfigMap delivery)",
    "route53": "zones on provider route53",
    "google": "zones on provider google",
    "azure": "zones on provider azure",
}

# Programs the image runs, with a command that shows they execute, and the Debian package.
PROGRAMS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("git", ("--version",), "apt-get install git"),
    ("ssh", ("-V",), "apt-get install openssh-client"),
    ("gpg", ("--version",), "apt-get install gpg (--verify-gpg-keys runs it)"),
    ("tini", ("--version",), "apt-get install tini (the image's init: ENTRYPOINT [\"tini\", \"--\", \"gitdns\"])"),
    ("gitdns", ("--version",), "pip install gitdns (the console script the ENTRYPOINT runs)"),
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _import_all(modules: Sequence[str]) -> list[str]:
    """``module: error`` for every module that does not import."""
    failed = []
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or whatever a broken package raises on import
            failed.append(f"{module}: {type(exc).__name__}: {_one_line(exc)}")
    return failed


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def check_core() -> Check:
    failed = _import_all(CORE_MODULES)
    if failed:
        return Check(f"{PACKAGE} dependencies", False, "; ".join(failed),
                     f"reinstall {PACKAGE} with its dependencies: pip install '{PACKAGE}[all]'")
    return Check(f"{PACKAGE} dependencies", True, f"{len(CORE_MODULES)} modules import")


def check_extra(extra: str) -> Check:
    name = f"{PACKAGE}[{extra}]"
    failed = _import_all(EXTRA_MODULES[extra])
    if failed:
        return Check(name, False, "; ".join(failed),
                     f"pip install '{PACKAGE}[{extra}]' (or '{PACKAGE}[all]'); without it {EXTRA_USERS[extra]} fail")
    return Check(name, True, " ".join(EXTRA_MODULES[extra]))


def check_package() -> Check:
    """Every module of the package imports (a wheel that lost a subpackage fails here)."""
    try:
        package = importlib.import_module(PACKAGE)
    except Exception as exc:
        return Check(f"{PACKAGE} modules", False, f"{PACKAGE}: {_one_line(exc)}", f"pip install '{PACKAGE}[all]'")
    names = sorted(
        info.name for info in pkgutil.walk_packages(package.__path__, prefix=f"{PACKAGE}.")
        if info.name.rpartition(".")[2] != "__main__"
    )
    failed = _import_all(names)
    if failed:
        return Check(f"{PACKAGE} modules", False, "; ".join(failed), f"pip install '{PACKAGE}[all]'")
    return Check(f"{PACKAGE} modules", True, f"{len(names)} modules import")


def check_schemas() -> Check:
    """The packaged JSON schemas, found through importlib.resources and loaded as the loader loads them."""
    from importlib import resources

    fix = f"reinstall {PACKAGE} from a wheel built with schemas/ beside gitdns/ (gitdns/data/schemas links to it)"
    try:
        root = resources.files(PACKAGE).joinpath("data", "schemas")
        files = sorted(c.name for c in root.iterdir() if c.name.endswith(".schema.json")) if root.is_dir() else []
        if "zone.schema.json" not in files:
            return Check("packaged schemas", False, f"no zone.schema.json in {PACKAGE}/data/schemas", fix)
        from gitdns.adapters.repo import load_schemas

        kinds = load_schemas()
    except Exception as exc:
        return Check("packaged schemas", False, f"{type(exc).__name__}: {_one_line(exc)}", fix)
    if len(kinds) != len(files):
        return Check("packaged schemas", False, f"{len(files)} schema files but {len(kinds)} kinds", fix)
    return Check("packaged schemas", True, f"{len(kinds)} kinds: {' '.join(sorted(kinds))}")


def check_templates() -> Check:
    """The packaged templates: every one the renderers name is there and compiles."""
    fix = f"reinstall {PACKAGE} from a wheel built with templates/ beside gitdns/ (gitdns/data/templates links to it)"
    try:
        from gitdns.adapters.templates import load_template_sources
        from gitdns.core import corefile, render, zonecorefile

        sources = load_template_sources()
        wanted = {render.DNSRECORD_TEMPLATE, corefile.HOSTS_TEMPLATE, corefile.SERVER_TEMPLATE,
                  zonecorefile.SERVER_TEMPLATE}
        missing = sorted(wanted - set(sources))
        if missing:
            return Check("packaged templates", False, f"missing {' '.join(missing)}", fix)
        environment = render.make_environment(sources)
        for name in sorted(sources):
            environment.get_template(name)
    except Exception as exc:
        return Check("packaged templates", False, f"{type(exc).__name__}: {_one_line(exc)}", fix)
    return Check("packaged templates", True, f"{len(sources)} templates compile")


def check_cli() -> Check:
    """What ``gitdns --help`` does: build the whole parser and format its help."""
    try:
        from gitdns.cli import build_parser

        text = build_parser().format_help()
    except Exception as exc:
        return Check("command line", False, f"{type(exc).__name__}: {_one_line(exc)}", f"pip install '{PACKAGE}[all]'")
    if "agent" not in text:
        return Check("command line", False, "the help names no agent command", f"pip install '{PACKAGE}[all]'")
    return Check("command line", True, "gitdns --help")


def check_program(name: str, args: tuple[str, ...], fix: str) -> Check:
    path = shutil.which(name)
    if path is None:
        return Check(f"program {name}", False, f"{name} is not on PATH", fix)
    try:
        done = subprocess.run([path, *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(f"program {name}", False, f"{path} {' '.join(args)}: {_one_line(exc)}", fix)
    output = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0:
        return Check(f"program {name}", False, f"{path} {' '.join(args)} exited {done.returncode}", fix)
    return Check(f"program {name}", True, f"{path}: {output[0] if output else 'runs'}")


def checks(image: bool) -> list[Callable[[], Check]]:
    out: list[Callable[[], Check]] = [check_core]
    out.extend(partial(check_extra, extra) for extra in EXTRA_MODULES)
    out.extend([check_package, check_schemas, check_templates, check_cli])
    if image:
        out.extend(partial(check_program, *program) for program in PROGRAMS)
    return out


def run(image: bool) -> list[Check]:
    return [check() for check in checks(image)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gitdns.imagecheck",
        description="Check that this installation has every provider SDK, the packaged data and a working "
                    "command line (docs/image.md).",
    )
    parser.add_argument("--image", action="store_true",
                        help="also check the programs the image runs: git, ssh, gpg, tini and gitdns on PATH")
    args = parser.parse_args(argv)
    if not args.image:
        # gitpython refuses to import without a git program; outside the image only the module is checked.
        os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    results = run(args.image)
    width = max(len(r.name) for r in results)
    for result in results:
        print(f"{'ok  ' if result.ok else 'FAIL'}  {result.name:<{width}}  {result.detail}", flush=True)
    failed = [r for r in results if not r.ok]
    if failed:
        print(f"imagecheck: {len(failed)} of {len(results)} checks failed:", file=sys.stderr)
        for result in failed:
            print(f"  {result.name}: {result.fix}", file=sys.stderr)
        return 1
    print(f"imagecheck: all {len(results)} checks passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
