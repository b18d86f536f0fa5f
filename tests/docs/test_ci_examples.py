"""The CI jobs of the pull-request preview (docs/ci.md, docs/examples/ci/) hold what the page says.

- GitHub: the preview workflow runs on ``pull_request`` only, with ``contents: read`` and no
  secret; the comment workflow runs on the preview's ``workflow_run``, never checks out, holds the
  only write permission, and takes the artifact as untrusted text; every action is pinned by a
  full commit sha with its version beside it.  (``bash .ci/run`` lints both with actionlint.)
- GitLab: the file is valid against GitLab's own CI schema (the copy check-jsonschema ships) and
  its scripts pass shellcheck; the preview runs on merge requests with the whole history and
  without the note token; the note job runs only for merge requests from the project itself,
  reads nothing but the artifact, and posts one note, then edits it (run here against a fake
  GitLab API on loopback).
- Both: every ``gitdns`` command line parses with gitdns's own parser, and the preview's shell
  script, run with a stand-in ``gitdns``, passes on exit 0 and 3 and fails on 1, 4 and 5.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import re
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jsonschema
import pytest
from ruamel.yaml import YAML

from gitdns.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "docs" / "examples" / "ci"
PREVIEW = CI / "github" / "gitdns-preview.yml"
COMMENT = CI / "github" / "gitdns-preview-comment.yml"
GITLAB = CI / "gitlab" / ".gitlab-ci.yml"
MARKER = "<!-- gitdns-preview -->"
LIMIT = 65536
STATUS_REFSPEC = "+refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*"


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))  # YAML 1.2: `on` is a string


def steps(path: Path) -> list[dict[str, Any]]:
    return [s for job in load(path)["jobs"].values() for s in job["steps"]]


def step(path: Path, name: str) -> dict[str, Any]:
    return next(s for s in steps(path) if s.get("name") == name)


def gitlab_scripts(job: str) -> list[str]:
    return list(load(GITLAB)[job]["script"])


def require(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{program} is not installed (scripts/install-test-deps.sh installs it)")
        pytest.skip(f"{program} is not installed")
    return path


# --- GitHub: what each workflow may do ---------------------------------------------------------


def test_the_preview_runs_on_pull_request_with_a_read_only_token_and_no_secret() -> None:
    workflow = load(PREVIEW)
    assert workflow["on"] == {"pull_request": None}
    assert workflow["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in workflow["jobs"].values())
    text = json.dumps(workflow)  # what GitHub reads: the comments left out
    assert "secrets." not in text and "pull_request_target" not in text
    checkout = step(PREVIEW, "Check out the pull request's merge commit")
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"] == {"fetch-depth": 0}
    assert step(PREVIEW, "Fetch the clusters' status branches")["run"] == \
        f"git fetch --no-tags origin '{STATUS_REFSPEC}'"
    upload = step(PREVIEW, "Upload the preview")
    assert upload["if"] == "${{ !cancelled() }}" and upload["with"]["name"] == "gitdns-preview"


def test_the_comment_job_never_checks_out_and_holds_the_only_write_permission() -> None:
    workflow = load(COMMENT)
    assert workflow["on"] == {"workflow_run": {"workflows": [load(PREVIEW)["name"]], "types": ["completed"]}}
    assert workflow["permissions"] == {}
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert "github.event.workflow_run.event == 'pull_request'" in job["if"]
    # Nothing of the pull request runs here: no checkout, no shell step, no install, no secret.
    assert [s["uses"].split("@")[0] for s in job["steps"]] == ["actions/download-artifact", "actions/github-script"]
    text = json.dumps(workflow)
    assert "secrets." not in text and "pull_request_target" not in text and "checkout" not in text.lower()
    download = job["steps"][0]["with"]
    assert download["run-id"] == "${{ github.event.workflow_run.id }}" and download["name"] == "gitdns-preview"


def test_the_comment_script_takes_the_artifact_as_untrusted_text() -> None:
    script = step(COMMENT, "Post or update the comment")["with"]["script"]
    assert f"const MARKER = '{MARKER}';" in script and f"const LIMIT = {LIMIT};" in script
    assert "/^[1-9][0-9]{0,9}$/.test(number)" in script  # the pull request number: digits only
    assert "pr.head.sha !== headSha" in script  # ... naming the pull request whose head ran
    assert "HEAD_SHA: ${{ github.event.workflow_run.head_sha }}" in COMMENT.read_text(encoding="utf-8")
    assert "lstatSync" in script and "isFile()" in script  # no symbolic link followed
    assert "body = clip(body, LIMIT," in script
    assert "c.user?.login === 'github-actions[bot]' && c.body?.startsWith(MARKER)" in script
    for risky in ("child_process", "exec(", "eval(", "${{"):
        assert risky not in script


def test_every_action_is_pinned_by_a_full_commit_sha_with_its_version() -> None:
    for path in (PREVIEW, COMMENT):
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if "uses:" in line]
        assert lines
        for line in lines:
            assert re.fullmatch(r"(- )?uses: actions/[a-z-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), line


# --- GitLab: the schema, the rules, the token --------------------------------------------------


def test_the_gitlab_file_is_valid_gitlab_ci() -> None:
    schema_file = importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "gitlab-ci.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(load(GITLAB)), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_the_gitlab_preview_runs_on_merge_requests_without_the_token() -> None:
    ci = load(GITLAB)
    preview, note = ci["gitdns-preview"], ci["gitdns-preview-note"]
    assert preview["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert preview["variables"] == {"GIT_DEPTH": "0"}
    assert preview["script"][0].startswith("unset PREVIEW_NOTE_TOKEN")
    assert preview["artifacts"]["when"] == "always" and preview["artifacts"]["paths"] == ["preview/"]
    text = GITLAB.read_text(encoding="utf-8")
    assert 'base="${CI_MERGE_REQUEST_TARGET_BRANCH_SHA:-$CI_MERGE_REQUEST_DIFF_BASE_SHA}"' in text
    # The note job: merge requests from this project only, with the token set; the artifact only.
    (rule,) = note["rules"]
    assert rule["if"] == ('$CI_PIPELINE_SOURCE == "merge_request_event" && '
                          "$CI_MERGE_REQUEST_SOURCE_PROJECT_ID == $CI_MERGE_REQUEST_PROJECT_ID && $PREVIEW_NOTE_TOKEN")
    assert rule["when"] == "always"
    assert note["variables"] == {"GIT_STRATEGY": "none"}
    assert note["needs"] == [{"job": "gitdns-preview", "artifacts": True}]
    assert not any(gitdns_lines(script) or "pip install" in script for script in note["script"])


def test_the_gitlab_scripts_pass_shellcheck(tmp_path: Path) -> None:
    """As actionlint checks the GitHub `run:` scripts (.ci/run)."""
    shellcheck = require("shellcheck")
    for job in ("gitdns-preview", "gitdns-preview-note"):
        script = tmp_path / f"{job}.sh"
        script.write_text("\n".join(["#!/bin/bash", *gitlab_scripts(job)]) + "\n", encoding="utf-8")
        done = subprocess.run([shellcheck, "--shell=bash", str(script)], capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr


# --- both: the gitdns command lines are real -----------------------------------------------------


def scripts() -> Iterator[tuple[str, str]]:
    for path in (PREVIEW, COMMENT):
        for s in steps(path):
            if "run" in s:
                yield f"{path.name}: {s['name']}", s["run"]
    for job in ("gitdns-preview", "gitdns-preview-note"):
        for n, script in enumerate(gitlab_scripts(job)):
            yield f".gitlab-ci.yml: {job} script {n}", script


def gitdns_lines(script: str) -> list[list[str]]:
    """The argument lists of the ``gitdns`` commands of a shell script, up to a redirection or
    an operator."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line.strip(), comments=True)
        if words[:1] != ["gitdns"]:
            continue
        args = []
        for word in words[1:]:
            if word in ("||", "&&", ";", "|") or re.match(r"\d?>", word):
                break
            args.append(word)
        out.append(args)
    return out


def test_every_gitdns_command_line_parses_with_gitdns_s_parser() -> None:
    parser = build_parser()
    seen: dict[str, list[Any]] = {}
    for where, script in scripts():
        for args in gitdns_lines(script):
            try:
                parsed = parser.parse_args(args)
            except SystemExit:
                pytest.fail(f"{where}: gitdns {shlex.join(args)} does not parse")
            seen.setdefault(where.split(":")[0], []).append(parsed)
    for name, base in (("gitdns-preview.yml", "HEAD^1"), (".gitlab-ci.yml", "$base")):
        plans = [p for p in seen[name] if p.command == "plan"]
        assert [(p.all_clusters, p.base, p.format, p.exit_code) for p in plans] == [(True, base, "markdown", True)]
        assert [p.path for p in seen[name] if p.command == "validate"] == [Path("$GITDNS_PATH")]


# --- both: the preview script, run with a stand-in gitdns --------------------------------------

FAKE_GITDNS = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_LOG"
case "$1" in
  validate) echo "valid: 1 zone(s)"; exit "$FAKE_VALIDATE" ;;
  plan) echo "### gitdns preview"; echo "gitdns: a note" >&2; exit "$FAKE_PLAN" ;;
esac
"""


def fake_env(tmp_path: Path, validate: int, plan: int) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "gitdns"
    fake.write_text(FAKE_GITDNS, encoding="utf-8")
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path),
            "FAKE_LOG": str(tmp_path / "calls"), "FAKE_VALIDATE": str(validate), "FAKE_PLAN": str(plan),
            "GITDNS_PATH": "."}


def run_bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # GitHub's `run:` and GitLab's script both run in bash with errexit and pipefail on.
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


CODES = [(0, 0, True), (0, 3, True), (0, 1, False), (0, 4, False), (0, 5, False), (1, 1, False), (1, 3, False)]


@pytest.mark.parametrize(("validate", "plan", "passes"), CODES)
def test_the_github_preview_passes_on_0_and_3_and_fails_on_1_4_5(tmp_path: Path, validate: int, plan: int,
                                                               passes: bool) -> None:
    env = {**fake_env(tmp_path, validate, plan), "RUNNER_TEMP": str(tmp_path), "PR_NUMBER": "12",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    first = run_bash(step(PREVIEW, "Record the pull request number")["run"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    done = run_bash(step(PREVIEW, "Validate and preview")["run"], tmp_path, env)
    assert (done.returncode == 0) is passes, done.stdout + done.stderr
    out = tmp_path / "gitdns-preview"
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "pr-number": "12\n", "validate.exit": f"{validate}\n", "plan.exit": f"{plan}\n",
        "validate.txt": "valid: 1 zone(s)\n", "plan.md": "### gitdns preview\n", "plan.err": "gitdns: a note\n"}
    assert (tmp_path / "calls").read_text().splitlines() == [
        "validate .", "plan --repo . --all-clusters --base HEAD^1 --format markdown --exit-code"]


@pytest.mark.parametrize(("validate", "plan", "passes"), CODES)
def test_the_gitlab_preview_passes_on_0_and_3_and_fails_on_1_4_5(tmp_path: Path, validate: int, plan: int,
                                                               passes: bool) -> None:
    env = {**fake_env(tmp_path, validate, plan), "PREVIEW_NOTE_TOKEN": "not for this job",
           "CI_MERGE_REQUEST_DIFF_BASE_SHA": "1111111"}
    runnable = [s for s in gitlab_scripts("gitdns-preview") if "pip install" not in s and "git fetch" not in s]
    done = run_bash("\n".join([*runnable, 'echo "token=${PREVIEW_NOTE_TOKEN-unset}"']), tmp_path, env)
    assert (done.returncode == 0) is passes, done.stdout + done.stderr
    assert (tmp_path / "preview" / "plan.exit").read_text() == f"{plan}\n"
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == ["--version", "validate .",
                     "plan --repo . --all-clusters --base 1111111 --format markdown --exit-code"]
    if passes:
        assert "token=unset" in done.stdout
    # A merged results pipeline: the target branch as it is now.
    merged = run_bash("\n".join(runnable), tmp_path, {**env, "CI_MERGE_REQUEST_TARGET_BRANCH_SHA": "2222222"})
    assert "--base 2222222" in (tmp_path / "calls").read_text().splitlines()[-1], merged.stderr


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=True).stdout


def test_the_status_fetch_brings_every_status_branch_from_the_target(tmp_path: Path) -> None:
    parent = tmp_path / "parent.git"
    work = tmp_path / "work"
    git("init", "-q", "--bare", "-b", "main", str(parent), cwd=tmp_path)
    git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "desired", cwd=work)
    for branch in ("main", "gitdns-status/c1", "gitdns-status/c2"):
        git("push", "-q", str(parent), f"HEAD:refs/heads/{branch}", cwd=work)
    wanted = {"refs/remotes/origin/gitdns-status/c1", "refs/remotes/origin/gitdns-status/c2"}

    def fetched(clone: Path) -> set[str]:
        return set(git("for-each-ref", "--format=%(refname)", "refs/remotes/origin/gitdns-status", cwd=clone).split())

    github = tmp_path / "github"
    git("clone", "-q", str(parent), str(github), cwd=tmp_path)
    run = step(PREVIEW, "Fetch the clusters' status branches")["run"]
    assert run_bash(run, github, dict(os.environ)).returncode == 0 and fetched(github) == wanted
    # GitLab, a fork's pipeline: origin is the fork; the branches come from the target project.
    fork = tmp_path / "fork"
    git("init", "-q", "-b", "main", str(fork), cwd=tmp_path)
    git("remote", "add", "origin", str(work), cwd=fork)
    (script,) = [s for s in gitlab_scripts("gitdns-preview") if "git fetch" in s]
    env = {**os.environ, "CI_MERGE_REQUEST_SOURCE_PROJECT_ID": "2", "CI_MERGE_REQUEST_PROJECT_ID": "1",
           "CI_MERGE_REQUEST_PROJECT_URL": str(tmp_path / "parent")}
    done = run_bash(script, fork, env)
    assert done.returncode == 0 and fetched(fork) == wanted, done.stderr


# --- GitLab: the note, against a fake API on loopback ------------------------------------------


class FakeGitLab(BaseHTTPRequestHandler):
    """Users, and the notes of merge request 7 of project 42; PRIVATE-TOKEN must be the token."""

    token = "glpat-test"
    notes: list[dict[str, Any]] = []
    writes: list[tuple[str, str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self, method: str) -> None:
        if self.headers.get("PRIVATE-TOKEN") != self.token:
            return self.reply(401, {"message": "401 Unauthorized"})
        path, _, query = self.path.partition("?")
        notes = "/api/v4/projects/42/merge_requests/7/notes"
        if method == "GET" and path == "/api/v4/user":
            return self.reply(200, {"id": 1, "username": "project_42_bot"})
        if method == "GET" and path == notes:
            page = int(parse_qs(query)["page"][0])
            return self.reply(200, self.notes[(page - 1) * 100:page * 100])
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["body"]
        if method == "POST" and path == notes:
            self.notes.append({"id": 100 + len(self.notes), "author": {"id": 1}, "body": body})
            self.writes.append(("POST", body))
            return self.reply(201, self.notes[-1])
        if method == "PUT" and path.startswith(notes + "/"):
            note = next(n for n in self.notes if str(n["id"]) == path.rsplit("/", 1)[1])
            note["body"] = body
            self.writes.append((f"PUT {note['id']}", body))
            return self.reply(200, note)
        return self.reply(404, {"message": "404 Not found"})

    def do_GET(self) -> None:
        self.handle_any("GET")

    def do_POST(self) -> None:
        self.handle_any("POST")

    def do_PUT(self) -> None:
        self.handle_any("PUT")


@pytest.fixture
def gitlab() -> Iterator[str]:
    FakeGitLab.notes = [{"id": 7, "author": {"id": 9}, "body": f"{MARKER}\nsomeone else's, with the marker"}]
    FakeGitLab.writes = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitLab)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v4"
    finally:
        server.shutdown()
        server.server_close()


def post_note(tmp_path: Path, api: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update({"NO_PROXY": "*", "CI_API_V4_URL": api, "CI_MERGE_REQUEST_PROJECT_ID": "42",
                "CI_MERGE_REQUEST_IID": "7", "PREVIEW_NOTE_TOKEN": FakeGitLab.token, "CI_COMMIT_SHA": "a" * 40,
                "CI_PROJECT_URL": "https://gitlab.example.com/platform/dns", "CI_JOB_ID": "5"})
    (script,) = gitlab_scripts("gitdns-preview-note")
    return run_bash(script, tmp_path, env)


def test_the_note_is_posted_once_then_edited(tmp_path: Path, gitlab: str) -> None:
    preview = tmp_path / "preview"
    preview.mkdir()
    for name, text in {"validate.exit": "1\n", "plan.exit": "5\n", "plan.err": "gitdns: zone held\n",
                       "validate.txt": "zones/a.yaml:3: spec: ```` and " + MARKER + "\n",
                       "plan.md": "### gitdns preview\n" + "x" * 100_000}.items():
        (preview / name).write_text(text, encoding="utf-8")
    done = post_note(tmp_path, gitlab)
    assert done.returncode == 0, done.stderr
    ((how, body),) = FakeGitLab.writes
    assert how == "POST" and body.startswith(MARKER + "\n**gitdns preview** of aaaaaaa")
    assert body.count(MARKER) == 1 and len(body) == LIMIT and body.endswith("has it all.\n")
    assert "`gitdns plan`: exit 5, conflicts, left as they are" in body
    assert "`````text\nzones/a.yaml:3: spec: ```` and \n`````" in body  # a fence the text cannot close
    assert "```text\ngitdns: zone held\n```" in body
    # The next run edits its own note, not the other author's; a symbolic link is not read.
    (preview / "plan.md").unlink()
    (preview / "plan.md").symlink_to("/etc/hostname")
    (preview / "plan.exit").write_text("3\n", encoding="utf-8")
    done = post_note(tmp_path, gitlab)
    assert done.returncode == 0, done.stderr
    assert [how for how, _ in FakeGitLab.writes] == ["POST", "PUT 101"]
    assert FakeGitLab.notes[0]["body"].endswith("someone else's, with the marker")
    assert "exit 3, changes pending" in FakeGitLab.notes[1]["body"]
    assert FakeGitLab.notes[1]["body"].endswith("```text\ngitdns: zone held\n```\n\n")


def test_a_preview_that_did_not_finish_says_so(tmp_path: Path, gitlab: str) -> None:
    (tmp_path / "preview").mkdir()
    (tmp_path / "preview" / "plan.exit").write_text("3; rm -rf /\n", encoding="utf-8")
    done = post_note(tmp_path, gitlab)
    assert done.returncode == 0, done.stderr
    ((_, body),) = FakeGitLab.writes
    assert body.endswith("The preview did not run to its end: the gitdns-preview job says why.\n")


# --- the page ------------------------------------------------------------------------------------


def test_the_page_is_linked_and_names_every_file() -> None:
    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    for path in (PREVIEW, COMMENT, GITLAB):
        assert str(path.relative_to(ROOT / "docs")) in page, path
    assert "`docs/ci.md`" in (ROOT / "README.md").read_text(encoding="utf-8")
    security = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    section = security.split("## Running the pull-request preview on untrusted pull requests", 1)[1]
    assert "(ci.md)" in section.split("\n## ", 1)[0]
