"""Durations as the command line, the environment and config files write them: ``60``, ``60s``,
``500ms``, ``5m``, ``1h`` (a bare number is seconds).  The one parser of both daemons' settings
(the agent's `gitdns.agent.config.coerce`, the orchestrator's `gitdns.orchestrator.config`), so
``GITDNS_POLL_INTERVAL=60``, ``60s`` and ``1m`` mean the same to either.

    parse_duration(raw) -> seconds    ValueError when ``raw`` is not a duration
    EXAMPLES                          what an error message offers instead
"""

from __future__ import annotations

import math
from typing import Any

SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
EXAMPLES = "60, 30s, 5m, 1h"


def parse_duration(raw: Any) -> float:
    """Seconds, finite and not negative; ValueError when ``raw`` is not a duration."""
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a duration")
    if isinstance(raw, (int, float)):
        seconds = float(raw)
    else:
        text = str(raw).strip().lower()
        unit = next((suffix for suffix in ("ms", "s", "m", "h") if text.endswith(suffix)), "")
        number = text[: len(text) - len(unit)].strip() if unit else text
        if not number or not all(c.isdigit() or c == "." for c in number):
            raise ValueError(f"{str(raw)[:40]!r} is not a duration")
        seconds = float(number) * SCALE.get(unit, 1.0)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{str(raw)[:40]!r} is not a duration")
    return seconds
