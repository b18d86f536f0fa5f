"""Durations as the command line and config files write them: ``60``, ``60s``, ``500ms``,
``5m``, ``1h`` (a bare number is seconds)."""

from __future__ import annotations

from typing import Any

SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(raw: Any) -> float:
    """Seconds; ValueError when ``raw`` is not a duration."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    text = str(raw).strip().lower()
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * SCALE[suffix]
    return float(text)
