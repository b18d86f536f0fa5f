"""One fuzz example end to end, judged: a mutated repository through `gitdns validate` (the
function `gitdns.core.validate.check`, and the CLI in process, text and JSON) and through an
agent cycle (tests/agent's in-process agent, a fake git source, the `local` record store).

What must hold (`Verdict.failures` lists what did not):

- **no crash**: no exception out of `check`, `gitdns.cli.main` or `Agent.run`; the CLI exits 0
  or 1 and prints no "Traceback"; no zone pass fails with an unexpected exception (an
  ``InternalError`` in its report, a logged traceback);
- **a refusal names file and line**: every problem has a line, except a file that was not read
  at all (`WHOLE_FILE`); exit 1 exactly when there are problems; the CLI's problems are the
  function's;
- **no zone changes for a rejected document**: every zone validation holds keeps its store
  file byte for byte; when the changed file has a problem, so does every zone the document had
  touched before the change (every document of the file, for a mutation of the whole file);
- **the other zones still reconcile**: a zone the agent does not hold ends its pass without an
  error.

The agent first applies the example unchanged (twice: the second pass is a no-op), then the
mutated commit.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import random
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gitdns.adapters.repo import load_schemas
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.cli import main
from gitdns.commands.validate import validate as validate_command
from gitdns.core.loader import LoadResult
from gitdns.core.problems import Problem, blocked_zones
from gitdns.core.validate import check
from gitdns.core.yamlparse import parse
from gitdns.providers.local import LocalProvider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource
from tests.fuzz.mutations import Case, Mutated, apply, spans
from tests.fuzz.repos import clusters, mutable, repo_files, touched
from tests.fuzz.yamltree import split

WHOLE_FILE = frozenset({"FileTooLarge", "CommitTooLarge", "SymlinkRefused", "NotARegularFile", "FileChanged"})


@dataclass
class Verdict:
    refused: bool = False
    crashes: list[str] = field(default_factory=list)
    lineless: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # zones changed although held or rejected
    unreconciled: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [*self.crashes, *self.lineless, *self.changed, *self.unreconciled, *self.disagreements]


def texts(files: dict[str, bytes]) -> dict[str, str]:
    """As the agent and `read_tree` read a file: UTF-8, an undecodable byte as U+FFFD."""
    return {path: data.decode("utf-8", errors="replace") for path, data in files.items()}


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.tracebacks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.tracebacks.append(f"{record.name}: {record.getMessage()}\n"
                                   + "".join(traceback.format_exception(*record.exc_info)))


@contextlib.contextmanager
def logged_tracebacks() -> Iterator[_Errors]:
    """Every traceback logged meanwhile (also keeps the CLI from installing its own handler)."""
    handler = _Errors()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def _crash(where: str) -> str:
    return f"crash in {where}:\n{traceback.format_exc()}"


def validate_function(files: dict[str, str], verdict: Verdict) -> LoadResult | None:
    try:
        result = check(files, load_schemas())
    except Exception:  # the fuzzer counts it
        verdict.crashes.append(_crash("check"))
        return None
    verdict.refused = bool(result.problems)
    for problem in result.problems:
        if problem.line <= 0 and problem.code not in WHOLE_FILE:
            verdict.lineless.append(f"no line: {problem.format()} [{problem.code}]")
    return result


def _cli(argv: list[str]) -> tuple[int | None, str, str, str]:
    out, err = io.StringIO(), io.StringIO()
    crash = ""
    code: int | None = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException:  # SystemExit and the rest: the fuzzer counts them
            crash = _crash("gitdns " + " ".join(argv[:1]))
    return code, out.getvalue(), err.getvalue(), crash


def validate_cli(files: dict[str, bytes], root: Path, result: LoadResult | None, verdict: Verdict) -> None:
    """`gitdns validate` in process (text), and its command function with ``--format json``,
    whose problems must be the function's."""
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    code, out, err, crash = _cli(["validate", str(root)])
    if crash or code not in (0, 1) or "Traceback" in out + err:
        verdict.crashes.append(crash or f"gitdns validate exited {code}:\n{out[-2000:]}{err[-2000:]}")
    try:
        done = validate_command(root, fmt="json")
    except Exception:  # the fuzzer counts it
        verdict.crashes.append(_crash("gitdns.commands.validate.validate"))
        return
    problems = json.loads("".join(done.out))["problems"]
    if result is not None:
        if done.code != (1 if result.problems else 0) or code != done.code:
            verdict.disagreements.append(f"exit {code} (json: {done.code}) with {len(result.problems)} problem(s)")
        mine = sorted((p.file, p.line, p.code) for p in result.problems)
        theirs = sorted((p["file"], p["line"], p["code"]) for p in problems)
        if mine != theirs:
            verdict.disagreements.append(f"the CLI's problems are not the function's: {theirs[:5]} != {mine[:5]}")


class Stores:
    """The zones of one agent run: `local` record stores (files under ``root``, compared byte
    for byte) or `memory` ones (compared record for record, every value as the string it is)."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind, self.root, self.memory = kind, root, dict[str, MemoryProvider]()

    def factory(self, zone: Any) -> Any:
        if self.kind == "local":
            return LocalProvider(self.root)
        return self.memory.setdefault(zone.domain, MemoryProvider())

    def snapshot(self) -> dict[str, Any]:
        if self.kind == "local":
            return {p.name.removesuffix(".json"): p.read_bytes() for p in sorted(self.root.glob("*.json"))}
        return {domain: provider.read(domain).records for domain, provider in self.memory.items()}


@dataclass
class AgentRun:
    before: dict[str, Any]
    after: dict[str, Any]
    report: Any


_CONVERGED: dict[tuple[str, str, str], dict[str, Any]] = {}  # (repository, cluster, store) -> after the example


def agent_cycle(key: tuple[str, str, str], base: dict[str, str], changed: dict[str, str], root: Path,
                verdict: Verdict) -> AgentRun | None:
    """The agent of cluster ``key[1]`` on stores of kind ``key[2]`` applies ``base`` until it
    settles, then ``changed``."""
    stores = Stores(key[2], root / "store")
    source = FakeSource()
    source.commit(base, "the example")
    agent = Agent(AgentConfig(repo="mem://", cluster=key[1], state_dir=str(root / "state")),
                  AgentPorts(source=source, factory=stores.factory, clock=Clock(), rng=random.Random(1)))
    try:
        agent.run()
        before = stores.snapshot()
        if before != _CONVERGED.get(key):  # the first time, or not settled in one pass
            agent.run()
            before = _CONVERGED[key] = stores.snapshot()
        source.commit(changed, "mutated")
        agent.run()
    except Exception:  # the fuzzer counts it
        verdict.crashes.append(_crash("Agent.run"))
        return None
    if agent.last_report is None:
        verdict.crashes.append("the agent made no report")
        return None
    return AgentRun(before, stores.snapshot(), agent.last_report)


def _documents_at(case: Case, mutated: Mutated, problem: Problem) -> list[str]:
    """The pieces (as they were) of the documents a problem is about: by its line, in the file as
    it was; every piece of the changed file for a problem of the whole file."""
    base = repo_files(case.repo).get(problem.file)
    if base is None:
        return []
    pieces = split(base.decode())
    if problem.file == mutated.path:
        if mutated.whole_file or problem.code == "ParseError" or problem.line <= 0:
            return pieces
        where = mutated.spans
    else:
        where = spans([(p.encode(), i) for i, p in enumerate(pieces)])
    found = [origin for first, last, origin in where if first <= problem.line <= last]
    if not found and problem.file == mutated.path:  # past the end (a line the parser counts, the splitter not)
        found = [mutated.piece]
    return [pieces[origin] for origin in found if origin is not None]


def rejected_zones(case: Case, mutated: Mutated, problems: list[Problem], state: Any) -> set[str]:
    """The zones every document with a problem touched before the change (the example is valid,
    so each of them is the changed document or one the change made wrong)."""
    return {domain for problem in problems for piece in _documents_at(case, mutated, problem)
            for doc in parse(piece) for domain in touched(state, doc.data)}


def judge_zones(run: AgentRun, problems: list[Problem], rejected: set[str], verdict: Verdict,
                names: dict[str, str]) -> None:
    held = {names.get(z, z) for z in blocked_zones(problems, list(names))}
    for zone in run.report.zones:
        if zone.error.startswith("InternalError"):
            verdict.crashes.append(f"zone {zone.zone}: {zone.error}")
        elif not zone.held and zone.error:
            verdict.unreconciled.append(f"zone {zone.zone} not held, yet its pass failed: {zone.error}")
        if zone.held:
            held.add(zone.zone)
    for domain in sorted(held | rejected):
        if run.before.get(domain) != run.after.get(domain):
            why = "held" if domain in held else "touched by the rejected document"
            verdict.changed.append(f"zone {domain} changed although {why}")


@cache
def good_state(repo: str) -> Any:
    return check(texts(repo_files(repo)), load_schemas()).state


def judge(case: Case, root: Path, store: str | None = "memory") -> tuple[Verdict, Mutated]:
    """Run ``case`` in the empty directory ``root``, the agent on ``store`` (memory or local);
    with ``store`` None, `gitdns validate` only (the function, the CLI and its JSON)."""
    verdict = Verdict()
    base = repo_files(case.repo)
    mutated = apply(case, dict(base), mutable(case.repo))
    changed = texts(mutated.files)
    with logged_tracebacks() as errors:
        result = validate_function(changed, verdict)
        validate_cli(mutated.files, root / "repo", result, verdict)
        names = clusters(case.repo) or ["fuzz-harness"]
        good = good_state(case.repo)
        cluster = names[case.cluster % len(names)]
        run = None if store is None else agent_cycle((case.repo, cluster, store), texts(base), changed,
                                                      root / "agent", verdict)
    verdict.crashes.extend(errors.tracebacks)
    if run is not None and result is not None:
        zone_names = {z.name: z.domain for z in good.zones}
        rejected = rejected_zones(case, mutated, result.problems, good)
        judge_zones(run, result.problems, rejected, verdict, zone_names)
    return verdict, mutated
