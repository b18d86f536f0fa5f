"""The examples of a Markdown page, run for real and compared with what the page shows.

An **example** is a fenced block directly below a marker line

    <!-- example: SCENARIO [STEP] -->

whose lines starting with ``$ `` are commands (a line ending in ``\\`` continues on the next)
and whose other lines are the output of the command above them, stdout and stderr interleaved as
a terminal shows them.  SCENARIO names the fixture the commands run in (a `Scenario`: a
directory, repositories, the environment); STEP, when given, is a state the scenario is brought
to first (``fresh``, ``applied``, ...).  The blocks of one scenario run in the page's order and
share its state.  A fenced block with a ``$ `` line and no marker is an error, so no example
goes unchecked by accident.

Each block's commands run in one ``bash`` (``set +e``; ``cd`` and ``$?`` carry from one command
to the next), from the directory the scenario's previous block ended in (the scenario's own
directory at first: one shell session per scenario), with ``gitdns`` on PATH running this
tree's `gitdns.cli`.  Before running, a command's text is rewritten:

- each ``scenario.subs`` key is replaced by its value: ``https://git.example.com/platform/dns.git``
  (and a bare ``dns.git`` argument) by the scenario's local bare repository, ``/tmp/demo`` by a
  directory of the scenario;
- a commit sha the page showed earlier in the scenario is replaced by the real commit it stood
  for (see "mapped values").

The output is compared line by line, after the real output's paths were written back (each
``subs`` value by its key), with these rules and no others:

- ``…`` alone on a line (any indentation) stands for any number of lines, none included;
  ``…`` inside a line for any text on that line;
- a line ending in ``(stderr)`` after spaces must have been written to stderr (the annotation
  is not part of the line);
- trailing spaces are ignored, and inside a line (after its indentation) a run of two or more
  spaces matches any run of two or more (table padding, whose width follows the values);
- **mapped values**: where the page and the run differ in a commit sha of the scenario's
  repositories (7 to 40 hex digits, a prefix of a commit there), in a UTC time
  ``YYYY-MM-DDThh:mm:ssZ`` at or after the moment the test started (a wall-clock time: a status
  branch's push, a heartbeat), or in a duration (``3h05m``, ``1107d04h``: measured against the
  clock), the page's value stands for the real one.  It must have the same shape (the same
  length for a sha); and within a scenario one real commit is always written as the same page
  sha and one page sha stands for one real commit (times and durations read from the clock are
  not held to that: two pushes a second apart in one run may share a second in another).

Everything else must match character for character, so a changed output format fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLE_REPO = ROOT / "example-repo"
URL = "https://git.example.com/platform/dns.git"
MARKER = re.compile(r"^\s*<!--\s*example:\s*(?P<scenario>[\w.-]+)(?:\s+(?P<step>[\w.-]+))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
ELLIPSIS = "…"
STDERR_NOTE = re.compile(r"\s+\(stderr\)$")
CMD_MARK = "\x1eCMD "  # printed between two commands of a block (stdout)
CWD_MARK = "\x1eCWD "  # printed after a block's last command, with the directory it ended in
ERR_TAG = "\x1f"  # starts every line gitdns writes to stderr (the wrapper below)

# The value classes that may be mapped (see the module docstring), one alternation.
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
DURATION = r"\d+d\d\dh|\d+h\d\dm|\d+m\d\ds"
SHA = r"[0-9a-f]{7,40}"
TOKEN = re.compile(rf"(?<![\w-])(?:(?P<time>{TIME})|(?P<duration>{DURATION})|(?P<sha>{SHA}))(?![\w])")


# -- the page ---------------------------------------------------------------------------------


@dataclass
class Command:
    text: str  # as the page shows it, continuation lines joined with their backslashes
    output: list[str] = field(default_factory=list)


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    scenario: str
    step: str | None
    commands: list[Command]

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def blocks(page: Path) -> list[Block]:
    """The examples of ``page``; an unmarked fenced block with a ``$ `` line is an error."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    unmarked: list[int] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
                                      and len(lines[j].strip()) >= len(fence)):
            text = lines[j]
            body.append(text[len(indent):] if text.startswith(indent) else text.lstrip())
            j += 1
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        if marker:
            out.append(Block(page, i + 1, marker["scenario"], marker["step"], _commands(body)))
        elif any(b.startswith("$ ") for b in body):
            unmarked.append(i + 1)
        i = j + 1
    if unmarked:
        raise AssertionError(f"{_shown(page)}: fenced block(s) at line(s) {unmarked} show a `$ ` command "
                             "but have no `<!-- example: SCENARIO [STEP] -->` marker above them")
    return out


def _commands(body: Sequence[str]) -> list[Command]:
    cmds: list[Command] = []
    it = iter(body)
    for line in it:
        if line.startswith("$ "):
            text = line[2:]
            while text.endswith("\\"):
                nxt = next(it, None)
                if nxt is None:
                    break
                text += "\n" + nxt
            cmds.append(Command(text))
        elif cmds:
            cmds[-1].output.append(line)
        elif line.strip():
            raise AssertionError(f"output before any command: {line!r}")
    return cmds


# -- running ------------------------------------------------------------------------------------

WRAPPER = '''\
#!{python}
"""gitdns of the tree under test; every line written to stderr starts with \\x1f."""
import sys

sys.path.insert(0, {root!r})


class Tagged:
    def __init__(self, real):
        self.real, self.part = real, ""

    def write(self, text):
        self.part += text
        *lines, self.part = self.part.split("\\n")
        for line in lines:
            self.real.write("\\x1f" + line + "\\n")
        self.real.flush()
        return len(text)

    def flush(self):
        self.real.flush()

    def isatty(self):
        return False

    def fileno(self):
        return self.real.fileno()

    def __getattr__(self, name):
        return getattr(self.real, name)

    def close_tag(self):
        if self.part:
            self.real.write("\\x1f" + self.part + "\\n")
            self.part = ""
        self.real.flush()


sys.stderr = tagged = Tagged(sys.__stderr__)
from gitdns.cli import main  # noqa: E402

try:
    code = main()
finally:
    tagged.close_tag()
sys.exit(code)
'''


def install_gitdns(bin_dir: Path) -> Path:
    """``bin_dir/gitdns``: this tree's CLI, its stderr lines tagged (see WRAPPER)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "gitdns"
    script.write_text(WRAPPER.format(python=sys.executable, root=str(ROOT)), encoding="utf-8")
    script.chmod(0o755)
    return script


def base_env(home: Path, bin_dir: Path) -> dict[str, str]:
    """A clean environment: no user or system git configuration, no kubeconfig, unbuffered
    Python, the wrapper first on PATH, fixed identities for git commits made by the examples."""
    home.mkdir(parents=True, exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR", "SYSTEMROOT", "CI")
            or k.startswith(("AWS_", "GCE_", "NO_GCE", "CLOUDSDK_", "AZURE_"))}
    return {**keep, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home),
            "LC_ALL": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
            "KUBECONFIG": str(home / "no-kubeconfig"), "COLUMNS": "100"}


@dataclass
class Line:
    text: str
    stderr: bool


class Scenario:
    """Where a page's examples run: ``cwd``, ``env``, the command substitutions ``subs`` (page
    text -> real text), the repositories whose commits may be mapped, and the mapping itself."""

    name = "scenario"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started = int(time.time())
        self.bin = root / ".bin"
        install_gitdns(self.bin)
        self.env = base_env(root / ".home", self.bin)
        self.cwd = root
        self.subs: dict[str, str] = {}
        self.repos: list[Path] = []
        self.to_real: dict[str, str] = {}  # page value -> real value
        self.to_page: dict[str, str] = {}  # real value -> page value
        self.steps: dict[str, Callable[[], None]] = {}

    # the state --------------------------------------------------------------------------------

    def prepare(self, step: str | None) -> None:
        if step is None:
            return
        if step not in self.steps:
            raise AssertionError(f"scenario {self.name} has no step {step!r} (it has: {', '.join(sorted(self.steps))})")
        self.steps[step]()

    def commits(self) -> set[str]:
        found: set[str] = set()
        for repo in self.repos:
            if not repo.exists():
                continue
            done = subprocess.run(["git", "rev-list", "--all"], cwd=repo, env=self.env, capture_output=True,
                                  text=True, check=False, timeout=60)
            found.update(done.stdout.split())
        return found

    def gitdns(self, *args: str) -> str:
        """Run this tree's gitdns from ``cwd`` (a step's action, not an example); its stdout."""
        done = subprocess.run([sys.executable, str(self.bin / "gitdns"), *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, check=False, timeout=180)
        assert done.returncode == 0, f"gitdns {' '.join(args)} (exit {done.returncode}): {done.stdout}{done.stderr}"
        return done.stdout

    # running ----------------------------------------------------------------------------------

    def command_text(self, text: str) -> str:
        for page, real in sorted(self.subs.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(page, real)

        def real_sha(m: re.Match[str]) -> str:
            value = m.group(0)
            return self.to_real.get(value, value)

        return re.sub(rf"(?<![\w-]){SHA}(?![\w])", real_sha, text)

    def run(self, block: Block) -> list[list[Line]]:
        """Run the block's commands; the output of each, its paths written back."""
        parts = ["set +e", f"cd {_quote(str(self.cwd))}"]
        for n, cmd in enumerate(block.commands):
            if n:
                parts.append(f"__rc=$?; printf '\\n%s\\n' '{CMD_MARK}{n}'; (exit $__rc)")
            parts.append(self.command_text(cmd.text))
        parts.append(f"printf '\\n%s%s\\n' '{CWD_MARK}' \"$(pwd)\"")
        done = subprocess.run(["bash", "-c", "\n".join(parts)], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, check=False, timeout=240)
        text, found, cwd = done.stdout.decode("utf-8", "replace").rpartition(CWD_MARK)
        if not found:
            raise AssertionError(f"{block.where}: the shell ended early (exit {done.returncode}): {cwd[-2000:]}")
        self.cwd = Path(cwd.strip())  # the next block goes on where this one ended, as in one shell
        for page, real in sorted(self.subs.items(), key=lambda kv: -len(kv[1])):
            text = text.replace(real, page)
        outputs: list[list[Line]] = [[]]
        for raw in text.split("\n"):
            if raw.startswith(CMD_MARK):
                outputs.append([])
                continue
            tagged = raw.startswith(ERR_TAG)
            outputs[-1].append(Line(raw[1:] if tagged else raw, tagged))
        for out in outputs:
            while out and not out[-1].text.strip():
                out.pop()
        if len(outputs) != len(block.commands):
            raise AssertionError(f"{block.where}: ran {len(block.commands)} command(s), read {len(outputs)} output(s)")
        return outputs

    def check(self, block: Block) -> list[str]:
        """Prepare, run and compare one block: the mismatches, as readable reports."""
        self.prepare(block.step)
        outputs = self.run(block)
        commits = self.commits()
        problems = []
        for cmd, real in zip(block.commands, outputs, strict=True):
            expected = list(cmd.output)
            while expected and not expected[-1].strip():
                expected.pop()
            matcher = Matcher(commits, self.started, self.to_real, self.to_page)
            mapping = matcher.match(expected, real)
            if mapping is None:
                problems.append(report(block, cmd, real, matcher.reason))
                mapping = matcher.learn(expected, real)  # so that one mismatch does not fail what follows
            self.to_real, self.to_page = mapping
        return problems


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def report(block: Block, cmd: Command, real: Sequence[Line], reason: str) -> str:
    shown = "\n".join(("    " + line.text + ("    (stderr)" if line.stderr else "")).rstrip() for line in real)
    page = "\n".join("    " + line for line in cmd.output)
    return (f"{block.where} [{block.scenario}{' ' + block.step if block.step else ''}]: "
            f"$ {cmd.text}\n  {reason}\n  the page shows:\n{page}\n  the run printed:\n{shown}")


# -- comparing ----------------------------------------------------------------------------------


class Matcher:
    """Matches a page's lines against a run's (the rules of the module docstring), extending a
    scenario's value mapping; ``reason`` says where the first failure was."""

    def __init__(self, commits: set[str], started: int, to_real: dict[str, str], to_page: dict[str, str]) -> None:
        self.commits = commits
        self.started = started
        self.start = (dict(to_real), dict(to_page))
        self.reason = ""
        self._furthest = -1

    def match(self, page: Sequence[str], real: Sequence[Line]) -> tuple[dict[str, str], dict[str, str]] | None:
        found = self._match(list(page), list(real), 0, 0, self.start)
        return found

    def learn(self, page: Sequence[str], real: Sequence[Line]) -> tuple[dict[str, str], dict[str, str]]:
        """After a mismatch: the mapping extended by the page's lines that match the run's line
        at the same place (up to the first ``…``), the others ignored."""
        mapping = self.start
        for shown, got in zip(page, real, strict=False):
            if ELLIPSIS in shown:
                break
            mapping = self.line(shown, got, mapping) or mapping
        return mapping

    def _match(self, page: list[str], real: list[Line], i: int, j: int,
               mapping: tuple[dict[str, str], dict[str, str]]) -> tuple[dict[str, str], dict[str, str]] | None:
        if i == len(page):
            if j == len(real):
                return mapping
            self._fail(i, f"the run printed more: line {j + 1} {real[j].text!r} is not on the page")
            return None
        if page[i].strip() == ELLIPSIS:
            for k in range(j, len(real) + 1):
                found = self._match(page, real, i + 1, k, mapping)
                if found is not None:
                    return found
            return None
        if j == len(real):
            self._fail(i, f"the run printed less: page line {i + 1} {page[i]!r} has no counterpart")
            return None
        got = self.line(page[i], real[j], mapping)
        if got is None:
            self._fail(i, f"page line {i + 1} {page[i]!r} does not match the run's line {j + 1} {real[j].text!r}"
                       + (f": {self._why}" if self._why else ""))
            return None
        return self._match(page, real, i + 1, j + 1, got)

    def _fail(self, i: int, reason: str) -> None:
        if i >= self._furthest:
            self._furthest, self.reason = i, reason

    _why = ""

    def line(self, page: str, real: Line, mapping: tuple[dict[str, str], dict[str, str]]
             ) -> tuple[dict[str, str], dict[str, str]] | None:
        """One page line against one real line; the mapping extended, or None."""
        self._why = ""
        want_stderr = bool(STDERR_NOTE.search(page))
        page = STDERR_NOTE.sub("", page).rstrip()
        text = real.text.rstrip()
        if want_stderr and not real.stderr:
            self._why = "the page says (stderr), the run wrote it to stdout"
            return None
        pattern, values = _pattern(page)
        found = re.fullmatch(pattern, text)
        if found is None:
            return None
        to_real, to_page = dict(mapping[0]), dict(mapping[1])
        for (kind, shown), got in zip(values, found.groups(), strict=True):
            mappable = self._mappable(kind, got, shown)
            if got == shown and not mappable:
                continue
            if not mappable:
                self._why = f"{shown!r} is not what the run printed ({got!r}), and {got!r} is not a value that varies"
                return None
            if kind != "sha":
                continue  # a clock's reading: its shape is all that is checked
            if to_real.get(shown, got) != got or to_page.get(got, shown) != shown:
                self._why = (f"{shown!r} stands for {to_real.get(shown, '?')!r} elsewhere in this scenario, and "
                             f"{got!r} for {to_page.get(got, '?')!r}")
                return None
            to_real[shown], to_page[got] = got, shown
        return to_real, to_page

    def _mappable(self, kind: str, real: str, page: str) -> bool:
        if kind == "sha":
            return len(real) == len(page) and any(c.startswith(real) for c in self.commits)
        if kind == "time":
            return _epoch(real) >= self.started - 5
        return kind == "duration"


def _epoch(iso: str) -> int:
    from datetime import UTC, datetime

    return int(datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())


def _pattern(page: str) -> tuple[str, list[tuple[str, str]]]:
    """The regular expression one page line stands for, and the (kind, page value) of each of
    its mappable values (one group each, in order)."""
    indent = len(page) - len(page.lstrip(" "))
    out = [re.escape(page[:indent])]
    values: list[tuple[str, str]] = []
    rest = page[indent:]
    pos = 0
    for m in TOKEN.finditer(rest):
        out.append(_literal(rest[pos:m.start()]))
        kind = m.lastgroup or "sha"
        values.append((kind, m.group(0)))
        out.append({"time": f"({TIME})", "duration": f"({DURATION})", "sha": f"({SHA})"}[kind])
        pos = m.end()
    out.append(_literal(rest[pos:]))
    return "".join(out), values


def _literal(text: str) -> str:
    parts = []
    for piece in re.split(r"( {2,}|…)", text):
        if piece == ELLIPSIS:
            parts.append(".*?")
        elif piece.startswith("  ") and not piece.strip():
            parts.append(" {2,}")
        else:
            parts.append(re.escape(piece))
    return "".join(parts)


# -- fixtures shared by the pages ---------------------------------------------------------------

GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
                "GIT_COMMITTER_EMAIL": "dev@example.com"}


def git(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    base = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
            **GIT_IDENTITY}
    done = subprocess.run(["git", *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
                          check=False, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def at(when: int) -> dict[str, str]:
    """git's author and committer dates pinned to ``when`` (unix seconds, UTC)."""
    return {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}


def copy_example(dest: Path) -> Path:
    shutil.copytree(EXAMPLE_REPO, dest, ignore=shutil.ignore_patterns(".gitdns"))
    return dest


def check_page(page: Path, scenarios: dict[str, Scenario], skipped: dict[str, str]) -> Iterator[str]:
    """Every example of ``page`` whose scenario is in ``scenarios``, in order: the mismatches."""
    for block in blocks(page):
        if block.scenario in skipped:
            continue
        if block.scenario not in scenarios:
            continue
        yield from scenarios[block.scenario].check(block)
