"""Code reaches an exit only through its gate (docs/security.md, "Where outside content leaves").

An AST walk over every module of ``gitdns/`` finds each call that opens an exit of a kind — text
to a terminal, a log handler's formatting, a Kubernetes Secret read, a socket, a program run, a JSON parse —
and fails when it stands outside the modules the table below allows for that kind.  The allowed
modules are the gate itself, or a place whose input the operator chose (said in the table).  A
new call of a kind elsewhere fails here: it must go through the gate, or be added to the table
with its reason (and to the inventory of docs/security.md).  Each entry must still be used, so
the table cannot keep a stale exemption.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gitdns"


@dataclass(frozen=True)
class Exit:
    kind: str
    names: frozenset[str]  # dotted call names (``print``, ``sys.stdout.write``), or ``.attr``: any object's
                           # attribute of that name, called or passed on (``.read_namespaced_secret``)
    allowed: dict[str, str]  # module path -> why it may


EXITS = (
    Exit("text on a terminal", frozenset({"print", "input", "sys.stdout.write", "sys.stderr.write", "os.write"}), {
        "gitdns/cli/__init__.py": "the one printer: every result through text.block / text.inline",
        "gitdns/imagecheck.py": "the image's own check: prints its fixed check names, outside the layers",
        "gitdns/cli/reference.py": "the CLI reference generator (python -m gitdns.cli.reference): prints the "
                                   "parser's own help texts and a path, no outside content",
    }),
    Exit("a log handler's format", frozenset({"logging.Formatter", "logging.StreamHandler", "logging.FileHandler",
                                              "logging.basicConfig", ".setFormatter"}), {
        "gitdns/adapters/logs.py": "the log gate: message through text.inline, tracebacks through block",
    }),
    Exit("a Kubernetes Secret read", frozenset({".read_namespaced_secret", ".list_namespaced_secret"}), {
        "gitdns/providers/credentials.py": "the Secret gate (secret_gate): a name the repository wrote, if listed",
        "gitdns/providers/defaultprovider.py": "the operator's default provider Secret, found by its label",
        "gitdns/adapters/kube/clusters.py": "remote clusters' kubeconfig Secrets, by the operator's label and "
                                            "namespace",
        "gitdns/adapters/kube/client.py": "the table of the kinds `add-cluster-secret` applies (operator's command)",
        "gitdns/commands/clusters.py": "`gitdns add-cluster-secret`: Secrets the operator names on the command line",
    }),
    Exit("a socket", frozenset({"socket.socket", "socket.create_connection", "socket.socketpair"}), {
        "gitdns/adapters/probes/prober.py": "the probe connection: Prober.destination judges the address first "
                                            "(core/reach)",
        "gitdns/providers/route53/rest.py": "the Route53 API connection (Wire): the origin is the Zone endpoint "
                                            "Fences.check_endpoint allowed (https only), or Route53's own host",
    }),
    Exit("a program run", frozenset({"subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call",
                                     "subprocess.check_output", "os.system", "os.popen", "os.execv", "os.execve",
                                     "os.execvp", "os.execvpe", "os.spawnv", "os.spawnve", "os.posix_spawn",
                                     "os.posix_spawnp"}), {
        "gitdns/adapters/serverreload.py": "rndc, only with the operator's --local-reload rndc and --rndc-config; the "
                                           "zone and view names checked (zone_error, view_error), an argument list",
        "gitdns/adapters/git/cache.py": "git cat-file on the agent's own cache, object ids checked as full hex ids",
        "gitdns/adapters/git/verify.py": "gpg on the operator's trusted keys (--verify-gpg-keys)",
        "gitdns/adapters/status/cache.py": "git on the agent's own caches, remotes and credentials the operator's",
        "gitdns/imagecheck.py": "the image's own check: its fixed programs, outside the layers",
    }),
    Exit("a JSON parse", frozenset({"json.loads", "json.load"}), {
        "gitdns/core/jsonread.py": "the strict reader for JSON gitdns did not write (webhooks, annotations)",
        "gitdns/providers/local.py": "the local store's own files (RecursionError caught: a corrupt store)",
        "gitdns/providers/credentials.py": "a credentials file or variable the operator mounted",
        "gitdns/providers/azure/provider.py": "azure.json from the operator's credentials",
        "gitdns/providers/google/provider.py": "the service account key from the operator's credentials",
        "gitdns/orchestrator/kubeaccess.py": "the pod's own service account token",
        "gitdns/agent/applied.py": "the agent's own state directory",
        "gitdns/agent/identity.py": "the agent's own state directory",
        "gitdns/adapters/repo.py": "the schemas shipped with gitdns",
        "gitdns/adapters/coredns_delivery.py": "the delivery manifest the orchestrator wrote",
        "gitdns/adapters/zonefile.py": "the serving file the renderer wrote",
        "gitdns/commands/history/facts.py": "the history cache the command wrote",
    }),
)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else f".{node.attr}"
    return ""


def _sites(exit_: Exit) -> dict[str, list[int]]:
    """Module path -> lines of each call (or subclass, for the logging classes) of the kind."""
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if any(_hit(name, exit_.names) for name in _names(node)):
                found.setdefault(rel, []).append(node.lineno)
    return found


def _names(node: ast.AST) -> list[str]:
    """The dotted names a node opens an exit by: a call's function, a class's bases, or an
    attribute (a bound method passed on is used as surely as one called)."""
    if isinstance(node, ast.Call):
        return [_dotted(node.func)]
    if isinstance(node, ast.ClassDef):
        return [_dotted(base) for base in node.bases]
    if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "ctx", None), ast.Store):
        return ["." + node.attr]
    return []


def _hit(name: str, names: frozenset[str]) -> bool:
    return name in names or any(n.startswith(".") and name.endswith(n) for n in names)


@pytest.mark.parametrize("exit_", EXITS, ids=lambda e: e.kind)
def test_an_exit_is_reached_only_through_its_gate(exit_: Exit) -> None:
    sites = _sites(exit_)
    outside = {rel: lines for rel, lines in sites.items() if rel not in exit_.allowed}
    assert not outside, (f"{exit_.kind} outside its gate: " + ", ".join(f"{r}:{lines}" for r, lines in outside.items())
                         + " — go through the gate, or add the module to tests/test_exits.py with the reason")
    stale = sorted(set(exit_.allowed) - set(sites))
    assert not stale, f"{exit_.kind}: these modules no longer open the exit, drop them from the table: {stale}"


def test_the_walk_finds_each_kind_in_a_snippet() -> None:
    """The finder itself: a call of each kind in a snippet is found, a look-alike is not."""
    snippet = ("import sys, json, socket, logging\nprint(1)\nsys.stdout.write('x')\n"
               "api.read_namespaced_secret('a', 'b')\nsocket.create_connection(('h', 1))\njson.loads('1')\n"
               "class F(logging.Formatter): pass\n"
               "h.setFormatter(F())\nprinter(1)\nmy_json.loads_all(1)\n")
    names = frozenset().union(*(e.names for e in EXITS))
    lines = {node.lineno for node in ast.walk(ast.parse(snippet)) if any(_hit(n, names) for n in _names(node))}
    assert lines == {2, 3, 4, 5, 6, 7, 8}  # not line 9 (printer) nor 10 (my_json.loads_all)
