"""The one-shot commands: one module per verb or verb group.

A command takes its arguments as values and returns a `Result`: what goes to stdout, what goes
to stderr, and the exit code.  `gitdns.cli` parses the command line, calls one command and
prints its result; nothing here prints.  Exit codes (``gitdns --help`` lists them):

    validate.py       gitdns validate
    plan.py           gitdns plan (one cluster, or the merged preview of every cluster)
    apply.py          gitdns apply
    zones.py          gitdns zone show; finding a zone and its provider (shared)
    owners.py         gitdns owners, prune-owner, adopt
    render.py         gitdns render (Kuadrant DNSRecord manifests)
    status.py         gitdns status (statusview.py: the aggregate and its tables)
    history/          gitdns history (a package: trace.py the walk, fmt.py the command,
                      walk.py and trees.py the git side, diff.py, who.py, applied.py, ...)
    groups/           gitdns groups get|add|remove|set|reconcile|log (a package: verbs.py the
                      verbs; file.py the ActiveGroups file; check.py group names and health;
                      direct.py the break-glass write; view.py get's answer; log/ with log/fmt.py)
    failover.py       gitdns failover simulate
    clusters.py       gitdns add-cluster-secret, cluster-id
    daemons.py        gitdns agent, gitdns orchestrator: configure, run, and the --once report
    completion.py     gitdns completion bash|zsh|fish (scripts generated from the parser)

This module stays light (``gitdns --help`` imports it): the commands import their work lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gitdns.core.text import inline

EXIT_OK = 0
EXIT_ERROR = 1  # the desired state does not validate, or a command failed
EXIT_USAGE = 2  # bad command line (argparse)
EXIT_CHANGES = 3  # plan --exit-code: changes are pending
EXIT_STALLED = 4  # plan, apply: a zone stalled (mass change refused); nothing written there
EXIT_CONFLICTS = 5  # plan, apply: the rest applied, conflicting names left as they were


@dataclass(slots=True)
class Result:
    """What a command produced: ``out`` is printed to stdout (each piece carries its own
    newlines), ``err`` line by line to stderr (the CLI prefixes ``gitdns: ``).  The CLI prints
    both through the text gate (`gitdns.core.text`): ``block`` on ``out``, ``inline`` on each
    ``err`` line.  `line` and `lines` take one line each and escape a line break inside it, so a
    value with a newline cannot forge a line; `block` takes text that is lines already (JSON, a
    formatter's output whose values went through the gate)."""

    code: int = EXIT_OK
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    def line(self, text: str = "") -> None:
        self.out.append(inline(text) + "\n")

    def lines(self, texts: list[str]) -> None:
        self.out.extend(inline(t) + "\n" for t in texts)

    def block(self, text: str) -> None:
        self.out.append(text + "\n")

    @property
    def text(self) -> str:
        return "".join(self.out)
