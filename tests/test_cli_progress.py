"""Progress of long work: a line on stderr when stderr is a terminal and the output is not JSON,
nothing otherwise.

The terminal path runs the real command line with stderr on a pseudo-terminal (``pty``) and
stdout on a pipe: the line shows on the terminal, is erased before the command ends, and never
reaches stdout.  A pipe and ``--format json`` show nothing.  The commands report their steps to
the `Progress` they are given (`NO_PROGRESS` by default).
"""

from __future__ import annotations

import io
import os
import pty
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from gitdns.cli.progress import TerminalProgress, line, progress_for, shows_progress
from gitdns.commands.apply import apply
from gitdns.commands.history.trace import history
from gitdns.core.progress import NO_PROGRESS, Labelled, labelled
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.base import ApplyOutcome, landed, reporting

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example-repo"
ERASE = "\x1b[K"
PROGRESS = re.compile(r"\r([^\r\n]*)\x1b\[K")


class Recorder:
    def __init__(self) -> None:
        self.steps: list[tuple[int, int | None, str]] = []

    def step(self, done: int, total: int | None, what: str) -> None:
        self.steps.append((done, total, what))


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the terminal line -------------------------------------------------------------------------------


def test_the_line_is_rewritten_in_place_throttled_and_erased_at_the_end() -> None:
    out, clock = Tty(), Clock()
    progress = TerminalProgress(out, clock=clock, width=200)
    progress.step(0, 1000, "writing example.com")
    for done in range(1, 100):  # within the interval: none shown
        clock.now += 0.001
        progress.step(done, 1000, "writing example.com")
    clock.now += 0.25
    progress.step(500, 1000, "writing example.com")
    progress.close()
    assert out.getvalue() == (f"\rgitdns: writing example.com: 0/1,000 (0%){ERASE}"
                              f"\rgitdns: writing example.com: 500/1,000 (50%){ERASE}"
                              f"\r{ERASE}")


def test_nothing_shown_nothing_erased() -> None:
    out = Tty()
    TerminalProgress(out).close()
    assert out.getvalue() == ""


def test_outside_text_goes_through_the_text_gate_and_the_line_fits_the_terminal() -> None:
    out = Tty()
    progress = TerminalProgress(out, width=40)
    progress.step(3, None, "writing evil\x1b]52;c;aGk=\x07.example.com\nforged")
    text = out.getvalue()
    assert "\x1b]" not in text and "\x07" not in text and "\n" not in text
    assert "\\x1b]52" in text
    assert len(text) == len("\r") + 40 - 1 + len(ERASE)
    assert line(3, None, "x") == "gitdns: x: 3" and line(0, None, "x") == "gitdns: x..."
    assert line(7, 7, "x") == "gitdns: x: 7/7 (100%)"


def test_a_terminal_that_went_away_does_not_stop_the_work() -> None:
    out = Tty()
    out.close()
    progress = TerminalProgress(out)
    progress.step(1, 2, "x")
    progress.close()


def test_shown_only_on_a_terminal_and_not_for_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    assert shows_progress("text", Tty()) and shows_progress("markdown", Tty())
    assert not shows_progress("json", Tty())
    assert not shows_progress("text", io.StringIO())
    with progress_for("text", io.StringIO()) as silent:
        assert silent is NO_PROGRESS
    with progress_for("json", Tty()) as silent:
        assert silent is NO_PROGRESS
    monkeypatch.setenv("TERM", "dumb")
    assert not shows_progress("text", Tty())


def test_the_block_erases_the_line_however_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    out = Tty()
    with pytest.raises(KeyError), progress_for("text", out) as progress:
        progress.step(1, 2, "x")
        raise KeyError("boom")
    assert out.getvalue().endswith(f"\r{ERASE}")


# --- the silent path costs nothing -------------------------------------------------------------------


def test_the_silent_path_builds_nothing() -> None:
    assert labelled(NO_PROGRESS, "[eu-west-1]") is NO_PROGRESS
    recorder = Recorder()
    assert isinstance(labelled(recorder, "[a]"), Labelled)
    landed("example.com", 1, 2)  # no reporting(): nobody is told


# --- providers: each landed batch is told --------------------------------------------------------------


def _change(i: int) -> Change:
    record = RecordSet(f"h{i}.example.com", "A", 60, (f"192.0.2.{i}",))
    return Change(Action.CREATE, None, record, record.key)


def test_an_apply_tells_each_batch_it_lands() -> None:
    recorder = Recorder()
    changes = [_change(i) for i in range(1, 6)]
    out = ApplyOutcome(zone="example.com", total=len(changes))
    out.land(changes[:2])  # nobody listening: counted only
    with reporting(labelled(recorder, "[eu-west-1]")):
        out.land(changes[2:4])
        out.land(changes[4:])
    assert recorder.steps == [(4, 5, "[eu-west-1] writing example.com"), (5, 5, "[eu-west-1] writing example.com")]
    assert len(out.applied) == 5


# --- commands report to the progress they are given ----------------------------------------------------


def _git(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> None:
    base = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Ann",
            "GIT_AUTHOR_EMAIL": "ann@example.com", "GIT_COMMITTER_NAME": "Ann",
            "GIT_COMMITTER_EMAIL": "ann@example.com"}
    subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **base, **(env or {})}, check=True,
                   capture_output=True, timeout=60)


@pytest.fixture
def history_repo(tmp_path: Path) -> Path:
    """example-repo/ in git, then 12 commits each changing a TTL in example.com."""
    work = tmp_path / "desired"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns(".gitdns"))
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "seed", cwd=work)
    records = work / "records" / "example-com.yaml"
    text = records.read_text(encoding="utf-8")
    assert "ttl: 3600" in text
    for i in range(12):
        records.write_text(text.replace("ttl: 3600", f"ttl: {3601 + i}", 1), encoding="utf-8")
        _git("commit", "-q", "-am", f"ttl {3601 + i}", cwd=work)
    return work


def test_history_tells_each_commit_it_reads(history_repo: Path, tmp_path: Path) -> None:
    recorder = Recorder()
    history("api.example.com", str(history_repo), state_dir=tmp_path / "state", progress=recorder)
    reading = [(done, total) for done, total, what in recorder.steps if what == "history: reading commits"]
    assert reading and reading == [(i, 13) for i in range(13)][: len(reading)]
    assert recorder.steps[0] == (0, None, "history: fetching")


def test_apply_tells_the_changes_each_zone_lands(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".gitdns"))
    recorder = Recorder()
    result = apply(repo, all_clusters=True, from_worktree=True, progress=recorder)
    assert result.code == 0, result.err
    writes = [(d, t, w) for d, t, w in recorder.steps if "writing example.com" in w]
    assert writes, recorder.steps
    assert all(w.startswith("[") and t and 0 < d <= t for d, t, w in writes)
    assert {w.split("]")[0] + "]" for _, _, w in writes} == {"[eu-central-1]", "[eu-west-1]", "[us-east-1]"}


# --- the command line: a terminal shows it, a pipe and JSON do not --------------------------------------


def on_a_terminal(*argv: str, cwd: Path) -> tuple[int, str, str]:
    """``gitdns ARGV`` with stderr on a pseudo-terminal and stdout on a pipe: (code, terminal, stdout)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "200"}
    with subprocess.Popen([sys.executable, "-m", "gitdns", *argv], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=slave, cwd=cwd, env=env) as proc:
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        stdout = proc.stdout.read() if proc.stdout else b""
        code = proc.wait(timeout=120)
    os.close(master)
    return code, seen.decode(), stdout.decode()


def progress_lines(terminal: str) -> tuple[list[str], str]:
    """The progress lines the terminal was shown (each ``\\r TEXT ERASE``; an erased line is
    "") and what else it got (the pty's ``\\r\\n`` as ``\\n``)."""
    shown = [m[1] for m in PROGRESS.finditer(terminal)]
    return shown, PROGRESS.sub("", terminal).replace("\r\n", "\n")


def through_a_pipe(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitdns", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TERM": "xterm"})


def test_apply_on_a_terminal_shows_progress_on_stderr_only(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".gitdns"))
    code, terminal, stdout = on_a_terminal("apply", "--repo", str(repo), "--all-clusters", "--from-worktree",
                                           cwd=tmp_path)
    assert code == 0, terminal
    shown, rest = progress_lines(terminal)
    assert any(text.startswith("gitdns: [") and "] writing example.com: " in text for text in shown), shown
    assert shown[-1] == ""  # erased before the output is printed
    assert "\r" not in rest and "\x1b" not in rest
    assert "\r" not in stdout and "\x1b" not in stdout and "writing example.com" not in stdout
    assert "applied" in stdout


def test_apply_through_a_pipe_and_as_json_shows_none(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".gitdns"))
    piped = through_a_pipe("apply", "--repo", str(repo), "--all-clusters", "--from-worktree", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "writing example.com" not in piped.stderr and "\r" not in piped.stderr and "\x1b" not in piped.stderr
    shutil.rmtree(repo / ".gitdns")
    code, terminal, stdout = on_a_terminal("apply", "--repo", str(repo), "--all-clusters", "--from-worktree",
                                           "--format", "json", cwd=tmp_path)
    assert code == 0, terminal
    shown, rest = progress_lines(terminal)
    assert shown == [] and "writing example.com" not in rest and "\r" not in rest and "\x1b" not in rest
    assert stdout.lstrip().startswith("[")


def test_history_on_a_terminal_shows_progress_and_json_none(history_repo: Path, tmp_path: Path) -> None:
    code, terminal, stdout = on_a_terminal("history", "api.example.com", "--repo", str(history_repo), cwd=tmp_path)
    assert code == 0, terminal
    shown, rest = progress_lines(terminal)
    assert shown[0] == "gitdns: history: fetching..." and shown[-1] == "", shown
    assert "\r" not in rest and "\x1b" not in rest
    assert stdout.startswith("history of name api.example.com") and "\x1b" not in stdout
    code, terminal, stdout = on_a_terminal("history", "api.example.com", "--repo", str(history_repo),
                                           "--format", "json", cwd=tmp_path)
    assert code == 0 and terminal == "" and stdout.startswith("{")
    piped = through_a_pipe("history", "api.example.com", "--repo", str(history_repo), cwd=tmp_path)
    assert piped.returncode == 0 and "history:" not in piped.stderr and "\r" not in piped.stderr


MASTER_FILE = """\
$ORIGIN example.org.
$TTL 300
@ IN SOA ns1.example.org. hostmaster.example.org. 1 3600 600 86400 300
@ IN NS ns1.example.org.
ns1 IN A 192.0.2.53
www IN A 192.0.2.10
"""


def test_import_on_a_terminal_shows_progress_and_json_none(tmp_path: Path) -> None:
    zone_file = tmp_path / "db.example.org"
    zone_file.write_text(MASTER_FILE, encoding="utf-8")
    code, terminal, stdout = on_a_terminal("import", "example.org", "--from", str(zone_file), cwd=tmp_path)
    assert code == 0, terminal
    shown, rest = progress_lines(terminal)
    assert shown[0].startswith("gitdns: reading example.org") and shown[-1] == "", shown
    assert "\r" not in rest and "\x1b" not in rest
    assert stdout.startswith("# gitdns import of zone example.org") and "\x1b" not in stdout
    code, terminal, stdout = on_a_terminal("import", "example.org", "--from", str(zone_file), "--format", "json",
                                           cwd=tmp_path)
    assert code == 0 and terminal == "" and stdout.startswith("{")
