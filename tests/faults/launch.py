"""Run the gitdns CLI with every provider the agent builds wrapped in a `FaultyProvider`.

    python -m tests.faults.launch PLAN.json agent --repo ... --cluster ...

This is the only way a `gitdns agent` gets faults: `install` replaces
``gitdns.agent.main.default_factory`` (the factory `build_agent` wraps in the request
budgets and hands to the agent, the owner lease included) in this process only, then the
ordinary command line runs.  The agent's own code is unchanged, and nothing in ``gitdns`` reads
a plan: the production console script ``gitdns`` never sees one
(`tests/faults/provider.py`, "Never in production wiring").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.faults.provider import FaultPlan, wrap_factory


def install(plan: FaultPlan) -> None:
    import gitdns.agent.main as wiring

    plain = wiring.default_factory

    def faulty_default_factory(*args: Any, **kwargs: Any) -> Any:
        return wrap_factory(plain(*args, **kwargs), plan)

    wiring.default_factory = faulty_default_factory  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit("usage: python -m tests.faults.launch PLAN.json agent [gitdns agent arguments]")
    install(FaultPlan.load(Path(argv[0])))
    from gitdns.cli import main as gitdns_main

    return gitdns_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
