"""The text gate over every verb and format: no outside text reaches a terminal, a log or a
pull-request comment raw (docs/security.md, "Text leaves through one escaping layer").

Hypothesis draws hostile strings — C0 and C1 controls, DEL, ESC sequences (OSC 52 sets the
clipboard, ``ESC [ 2J`` clears the screen), bidi overrides and isolates, U+2028/U+2029, markdown
syntax — each ending in a line break and ``FORGED``.  Each input source gets them: file names,
YAML keys and values, commit authors and messages, status-branch documents (an agent's own, and
a forged commit), records in the zone that gitdns did not write.  Then every verb runs in every
format, and its stdout and stderr must hold

* no character `str.isprintable` refuses other than the line break, and
* no line that starts with ``FORGED`` (a line an outside value forged), and, for markdown,
* ``FORGED`` only inside code spans or code blocks (never in a link, emphasis, HTML or a table
  cell of its own), parsed by a real markdown renderer (markdown-it-py, with GFM tables).

The agent's own output (its ``--once`` report and its log lines) is checked the same way.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from gitdns.adapters import logs
from gitdns.cli import main
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.local import LocalProvider
from tests.e2e.agent_kit import GIT_ENV, DesiredRepo, git, run_once

MARK = "FORGED"
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
FORMATS = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029, 0x200E, 0x200F,
                            0x061C, 0xFEFF, 0x200B)]
SEQUENCES = ["\x1b]52;c;SGVsbG8=\x07", "\x1b[2J\x1b[H", "\x9b31m", "\x1b]8;;http://x.test\x1b\\", "\r\n"]
MARKDOWN = ["|", "`", "```", "*", "_", "<b>", "](x)", "[x", "@team", "#1", "\\", "> ", "<!--"]
ALL_IN_ONE = "".join(SEQUENCES) + "".join(FORMATS) + "".join(CONTROLS) + "|`<b>[x](y)@team"

_pieces = st.one_of(st.sampled_from(CONTROLS + FORMATS + SEQUENCES), st.sampled_from(MARKDOWN),
                    st.text(alphabet="ab.-", max_size=3))
HOSTILE = st.lists(_pieces, min_size=1, max_size=6).map(lambda parts: "x" + "".join(parts) + "\n" + MARK)
FILE_NAME = HOSTILE.map(lambda s: s.replace("/", "_").replace("\0", "_")).filter(lambda s: len(s.encode()) < 200)

_MD = MarkdownIt("commonmark").enable("table")


def gated(text: str, what: str) -> None:
    """``text`` (a verb's stdout or stderr) carries nothing raw from outside."""
    raw = sorted({repr(c) for c in text if not c.isprintable() and c != "\n"})
    assert not raw, f"{what}: unsafe characters reached the output: {raw}"
    forged = [line for line in text.split("\n") if line.lstrip(" \t>|*-+~#`").startswith(MARK)]
    assert not forged, f"{what}: an outside value forged a line: {forged[:3]}"


def gated_markdown(text: str, what: str) -> None:
    """In markdown, outside text is only ever inside a code span or a code block."""
    gated(text, what)
    for token in _MD.parse(text):
        if token.type in ("fence", "code_block"):
            continue
        assert MARK not in token.content or token.type == "inline", f"{what}: {MARK} in a {token.type}"
        for child in token.children or ():
            assert MARK not in child.content or child.type == "code_inline", \
                f"{what}: outside text as markdown {child.type}: {child.content[:120]!r}"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def sweep(verbs: list[tuple[str, ...]]) -> dict[str, tuple[int, str, str]]:
    """Run each verb line; check stdout and stderr (markdown parsed when asked for); what each
    printed, by its first two words."""
    seen: dict[str, tuple[int, str, str]] = {}
    for argv in verbs:
        code, out, err = run(*argv)
        what = "gitdns " + " ".join(argv)
        assert code in (0, 1, 3, 4, 5), f"{what}: exit {code}: {err[-500:]}"
        (gated_markdown if "markdown" in argv else gated)(out, what + " (stdout)")
        gated(err, what + " (stderr)")
        seen[" ".join(argv[:2])] = (code, out, err)
    return seen


def _repo_verbs(work: Path, store: Path) -> list[tuple[str, ...]]:
    repo, fences = str(work), ("--store-dir", str(store))
    verbs: list[tuple[str, ...]] = [("validate", repo), ("validate", repo, "--format", "json")]
    for fmt in ("text", "json", "markdown"):
        verbs.append(("plan", "--repo", repo, "--all-clusters", "--format", fmt, *fences))
        verbs.append(("plan", "--repo", repo, "--all-clusters", "--format", fmt, "--verbose", "--base", "HEAD"))
    verbs.append(("plan", "--repo", repo, "--cluster", "eu-west-1", *fences))
    for fmt in ("text", "json"):
        verbs.append(("apply", "--repo", repo, "--all-clusters", "--dry-run", "--format", fmt, *fences))
        verbs.append(("zone", "show", "example.com", "--repo", repo, "--format", fmt, *fences))
        verbs.append(("owners", "example.com", "--repo", repo, "--format", fmt, *fences))
    for fmt in ("text", "markdown", "json"):
        verbs.append(("failover", "simulate", "example.com", "--to", "site-b", "--repo", repo, "--format", fmt,
                      *fences))
    verbs.append(("render", "--repo", repo, "--cluster", "eu-west-1", "--out", str(store / "rendered")))
    return verbs


# --- the fleet: example-repo in a bare remote, each cluster's agent run once ----------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DesiredRepo]:
    root = tmp_path_factory.mktemp("gate")
    repo = DesiredRepo(root)
    for cluster in ("eu-west-1", "eu-central-1", "us-east-1"):
        done = run_once(repo, cluster, root / f"state-{cluster}")
        assert done.returncode == 0, done.stderr[-2000:]
    yield repo


@pytest.fixture
def work(fleet: DesiredRepo, tmp_path: Path) -> Path:
    """A clone of the fleet's desired repository to add hostile content to."""
    clone = tmp_path / "clone"
    git("clone", "-q", str(fleet.bare), str(clone))
    return clone


_EXAMPLES = settings(max_examples=6, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


# --- the gate itself ---------------------------------------------------------------------------------


@given(st.text())
def test_inline_leaves_only_printable_characters_and_keeps_clean_text(text: str) -> None:
    from gitdns.core.text import inline

    out = inline(text)
    assert out.isprintable()
    assert (out == text) == text.isprintable()


@given(st.text())
def test_block_keeps_line_breaks_only(text: str) -> None:
    from gitdns.core.text import block

    out = block(text)
    assert all(c.isprintable() or c == "\n" for c in out)
    assert out.count("\n") == text.count("\n")


@given(HOSTILE)
def test_md_code_is_one_code_span_in_a_table_cell(value: str) -> None:
    from gitdns.core.text import md_code, md_text

    table = f"| a | b |\n|---|---|\n| {md_code(value)} | {md_text(value)} |\n"
    tokens = _MD.parse(table)
    cells = [t for t in tokens if t.type == "td_open"]
    assert len(cells) == 2
    inline_cells = [t for t in tokens if t.type == "inline"][2:]
    assert [c.type for c in inline_cells[0].children] == ["code_inline"]
    assert all(c.type == "text" for c in inline_cells[1].children), [c.type for c in inline_cells[1].children]


def test_the_log_formatters_escape_message_and_traceback() -> None:
    record = logging.LogRecord("gitdns.test", logging.WARNING, __file__, 1, "path=%s", (ALL_IN_ONE + "\nFORGED",),
                               None)
    try:
        raise ValueError("boom\x1b[2J\nFORGED")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    text = logs.TextFormatter(logs.TEXT_TEMPLATE).format(record)
    gated(text, "text log")
    assert text.split("\n")[0].endswith("\\nFORGED")  # the message is one line
    doc = json.loads(logs.JsonFormatter().format(record))
    gated(doc["message"], "json log message")
    gated(doc["exception"], "json log exception")


# --- file names, YAML keys and values ----------------------------------------------------------------------


@_EXAMPLES
@given(name=FILE_NAME)
def test_a_hostile_file_name_is_escaped_everywhere(work: Path, tmp_path: Path, name: str) -> None:
    bad = work / "zones" / f"{name}.yaml"
    bad.write_text("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata:\n  name: [\n")
    try:
        sweep(_repo_verbs(work, tmp_path / "store"))
    finally:
        bad.unlink()


@_EXAMPLES
@given(key=HOSTILE, value=HOSTILE)
def test_hostile_yaml_keys_and_values_are_escaped_everywhere(work: Path, tmp_path: Path, key: str,
                                                             value: str) -> None:
    quoted_key, quoted_value = json.dumps(key), json.dumps(value)  # JSON strings are YAML double-quoted scalars
    bad = work / "records" / "hostile.yaml"
    bad.write_text(
        "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n  name: hostile\nspec:\n"
        f"  zone: example-com\n  {quoted_key}: 1\n  records:\n"
        f"    - {{name: {quoted_value}, type: TXT, values: [{quoted_value}]}}\n"
        f"    - {{name: txt, type: TXT, values: [{quoted_value}]}}\n"
        "---\napiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata:\n"
        f"  name: {quoted_value}\nspec:\n  targetRef: {{hosts: [{quoted_value}]}}\n")
    try:
        sweep(_repo_verbs(work, tmp_path / "store"))
    finally:
        bad.unlink()


# --- records in the zone gitdns did not write -------------------------------------------------------------


@_EXAMPLES
@given(value=HOSTILE)
def test_hostile_records_read_from_the_zone_are_escaped(fleet: DesiredRepo, work: Path, tmp_path: Path,
                                                        value: str) -> None:
    store = tmp_path / "store"
    zones = store / "zones"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(fleet.zones, zones)
    for zone in (work / "zones").glob("*.yaml"):
        zone.write_text(zone.read_text().replace(str(fleet.zones), str(zones)))
    foreign = RecordSet("foreign.example.com", "TXT", 60, (value,))
    LocalProvider(zones).apply("example.com", [Change(Action.CREATE, None, foreign, foreign.key)])
    txt_owner = RecordSet("kuadrant-zzzzzzzz-a-foreign.example.com", "TXT", 60,
                          (f'"heritage=external-dns,external-dns/owner={value},external-dns/version=1"',))
    LocalProvider(zones).apply("example.com", [Change(Action.CREATE, None, txt_owner, txt_owner.key)])
    seen = sweep([*_repo_verbs(work, store),
                  ("adopt", "foreign.example.com", "--zone", "example.com", "--cluster", "eu-west-1", "--repo",
                   str(work), "--store-dir", str(store), "--force", "--from-worktree")])
    assert seen["adopt foreign.example.com"][0] == 0, seen["adopt foreign.example.com"][2]
    assert "foreign.example.com" in seen["zone show"][1]  # the hostile records were read and shown


# --- commits: authors and messages -------------------------------------------------------------------------


def _commit_as(work: Path, author: str, message: str) -> None:
    """A commit of the work tree with ``author`` and ``message`` as a forge would store whatever
    its user typed (git's own ident checks bypassed: the object is written as is)."""
    git("add", "-A", cwd=work)
    tree = git("write-tree", cwd=work)
    parent = git("rev-parse", "HEAD", cwd=work)
    who = author.replace("\n", " ").replace("<", "(").replace(">", ")")
    body = (f"tree {tree}\nparent {parent}\nauthor {who} <a@example.com> 1790000000 +0000\n"
            f"committer {who} <a@example.com> 1790000000 +0000\n\n{message}\n")
    sha = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--literally", "--stdin"], cwd=work,
                         input=body.encode(), capture_output=True, check=True, env={**os.environ, **GIT_ENV}
                         ).stdout.decode().strip()
    git("update-ref", "refs/heads/main", sha, cwd=work)


def _history_verbs(repo: str, state: Path) -> list[tuple[str, ...]]:
    verbs: list[tuple[str, ...]] = []
    for fmt in ("text", "json"):
        verbs.append(("history", "app.example.org", "--repo", repo, "--state-dir", str(state), "--format", fmt))
        verbs.append(("history", "api.example.com", "--repo", repo, "--state-dir", str(state), "--format", fmt))
        verbs.append(("status", "--repo", repo, "--state-dir", str(state), "--format", fmt))
        verbs.append(("status", "--repo", repo, "--state-dir", str(state), "--format", fmt, "--revision", "HEAD"))
        verbs.append(("groups", "log", "example.com", "--repo", repo, "--state-dir", str(state), "--format", fmt))
    verbs.append(("groups", "get", "example.com", "--repo", repo))
    verbs.append(("groups", "get", "example.com", "--repo", repo, "--format", "json"))
    return verbs


@_EXAMPLES
@given(author=HOSTILE, message=HOSTILE)
def test_hostile_commit_authors_and_messages_are_escaped(work: Path, tmp_path: Path, author: str,
                                                         message: str) -> None:
    git("fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*", cwd=work)
    policy = work / "policies" / "web.yaml"
    policy.write_text(policy.read_text().replace("simple: 30", "simple: 45"))
    _commit_as(work, author, f"{message}\n\n{message}\nGitdns-Allow-Mass-Change: {message}")
    seen = sweep([*_history_verbs(str(work), tmp_path / "state"), *_repo_verbs(work, tmp_path / "store"),
                  ("groups", "set", "example.com", "site-b", "--repo", str(work), "--store-dir",
                   str(tmp_path / "store"), "--branch", f"failover-{uuid.uuid4().hex[:12]}")])
    code, out, err = seen["groups set"]
    assert code == 0 and "--- pull request ---" in out, err  # the pull request's text was written


# --- status branches: what an agent published, and a forged commit -----------------------------------------


def _forge_status(repo: DesiredRepo, value: str) -> None:
    """Rewrite every cluster's status branch head with ``value`` in every string field of its
    documents, and as its commit message (a git host, or anyone who can push, can)."""
    from gitdns.core.status.doc import dump, load

    def poison(doc: object, data_keys: bool = False) -> object:
        """Every string value, and the keys of the maps keyed by data (targets, policies)."""
        if isinstance(doc, dict):
            return {(k + value if data_keys else k): poison(v, k in ("targets", "policies")) for k, v in doc.items()}
        if isinstance(doc, list):
            return [poison(v) for v in doc]
        if isinstance(doc, str) and not doc.startswith(("gitdns", "3f6c", "8a1e", "c5d0")) and len(doc) != 40:
            return doc + value
        return doc

    bare = repo.bare
    env = {**os.environ, **GIT_ENV, "GIT_INDEX_FILE": str(bare / "forge.index")}

    def run_git(*args: str, data: str | None = None) -> str:
        return subprocess.run(["git", *args], cwd=bare, input=data, text=True, capture_output=True, check=True,
                              env=env).stdout.strip()

    for ref in run_git("for-each-ref", "--format=%(refname)", "refs/heads/gitdns-status/").split():
        head = run_git("rev-parse", ref)
        run_git("read-tree", head)
        for line in run_git("ls-tree", "-r", head).splitlines():
            meta, path = line.split("\t", 1)
            new = dump(poison(load(run_git("cat-file", "blob", meta.split()[2]))))  # type: ignore[arg-type]
            blob = run_git("hash-object", "-w", "--stdin", data=new)
            run_git("update-index", "--cacheinfo", f"100644,{blob},{path}")
        tree = run_git("write-tree")
        message = f"status: Ready{value.replace(chr(0), '')}\n"  # git refuses a NUL in a message
        run_git("update-ref", ref, run_git("commit-tree", tree, "-p", head, "-F", "-", data=message))


def test_a_forged_status_branch_is_escaped(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("forged")
    repo = DesiredRepo(root)
    for cluster in ("eu-west-1", "us-east-1"):
        assert run_once(repo, cluster, root / f"state-{cluster}").returncode == 0
    _forge_status(repo, ALL_IN_ONE + "\n" + MARK + " All clusters Ready")
    sweep(_history_verbs(str(repo.bare), tmp_path / "state"))


def test_a_hostile_file_name_published_by_an_agent_is_escaped_by_status(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The pull request needs no git host: a file name with escapes makes the agent hold the zone
    and publish the problem; the agent's report and logs, and the next `gitdns status`, escape it."""
    root = tmp_path_factory.mktemp("published")
    repo = DesiredRepo(root)
    name = "x" + ALL_IN_ONE.replace("/", "_").replace("\0", "_")[:120] + "\n" + MARK
    repo.write(f"zones/{name}.yaml", "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata:\n  name: [\n")
    repo.commit("a file with escapes in its name")
    done = run_once(repo, "eu-west-1", root / "state", "--log-level", "debug")
    gated(done.stdout, "agent --once (stdout)")
    gated(done.stderr, "agent --once (log)")
    summary = git("show", f"gitdns-status/{_cluster_id(repo, 'eu-west-1')}:summary.yaml", cwd=repo.bare)
    assert "ValidationFailed" in summary
    sweep(_history_verbs(str(repo.bare), tmp_path / "state"))


# --- webhook requests: paths, headers and a signed body, into the daemons' log -----------------------------


@pytest.fixture(scope="module")
def endpoint() -> Iterator[object]:
    """The daemons' HTTP endpoint on loopback, with a GitHub webhook secret."""
    from gitdns.adapters.http.server import HttpServer, WebhookConfig
    from gitdns.agent.metrics import Metrics

    server = HttpServer("127.0.0.1", 0, metrics=Metrics(), status=lambda: {"ok": True}, ready=lambda: True,
                        webhook=WebhookConfig(github_secret=b"gate-secret"), on_push=lambda event: None)
    server.start()
    yield server
    server.stop()


def _send(port: int, raw: bytes) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=HOSTILE, header=HOSTILE, ref=HOSTILE)
def test_hostile_requests_reach_the_log_escaped(endpoint: object, path: str, header: str, ref: str) -> None:
    """Request paths, header values and a signed push's ref, logged at debug by the agent's
    and the orchestrator's endpoint through both log formats: nothing raw."""
    from gitdns.core.webhook import sign_github

    text_out, json_out = io.StringIO(), io.StringIO()
    handlers = [logging.StreamHandler(text_out), logging.StreamHandler(json_out)]
    handlers[0].setFormatter(logs.TextFormatter(logs.TEXT_TEMPLATE))
    handlers[1].setFormatter(logs.JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    for handler in handlers:
        root.addHandler(handler)
    try:
        line_safe = path.replace("\r", "").replace("\n", "%0A").encode("utf-8")  # a request line ends at CR LF
        field = header.replace("\r", "").replace("\n", " ").encode("utf-8")
        body = json.dumps({"ref": ref, "before": "0" * 40, "after": "1" * 40,
                           "repository": {"full_name": "acme/dns"}}).encode()
        port = endpoint.port  # type: ignore[attr-defined]
        _send(port, b"GET /" + line_safe + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        _send(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Trace: " + field + b"\r\nConnection: close\r\n\r\n")
        _send(port, b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: "
              + field + b"\r\nX-Hub-Signature-256: " + sign_github(b"gate-secret", body).encode()
              + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    finally:
        for handler in handlers:
            root.removeHandler(handler)
        root.setLevel(level)
    assert text_out.getvalue().count("request") >= 3  # each request was logged (the test is not empty)
    gated(text_out.getvalue(), "text log")
    for line in json_out.getvalue().splitlines():
        doc = json.loads(line)
        gated(doc["message"], "json log")


def _cluster_id(repo: DesiredRepo, name: str) -> str:
    text = (repo.work / "clusters" / f"{name}.yaml").read_text()
    return next(line.split(":", 1)[1].split("#")[0].strip().strip('"') for line in text.splitlines()
                if line.strip().startswith("clusterId:") or line.strip().startswith("id:"))


Check = Callable[[str, str], None]
