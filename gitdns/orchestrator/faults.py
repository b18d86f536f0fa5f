"""The last error of each step of an orchestrator ("desired", "discovery", "probes", "render",
"delivery"), with its reason (a CamelCase word: the conditions and metrics carry it)."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class Faults:
    """Each step's last error, cleared when the step succeeds; a new message is logged once."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}  # step -> the last error
        self.reasons: dict[str, str] = {}  # step -> its reason

    def fail(self, step: str, reason: str, message: str) -> None:
        if self.errors.get(step) != message:
            log.warning("%s: reason=%s %s", step, reason, message)
        self.errors[step] = message
        self.reasons[step] = reason

    def clear(self, step: str) -> None:
        self.errors.pop(step, None)
        self.reasons.pop(step, None)
