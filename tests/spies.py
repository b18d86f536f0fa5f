"""Test spies: record what a module-level function is called with, the function still running."""

from __future__ import annotations

from typing import Any

import pytest


def record_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """Replace ``module.name`` for the test by a wrapper that appends its first argument to the
    returned list and calls the real function."""
    calls: list[Any] = []
    real = getattr(module, name)

    def spy(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(first)
        return real(first, *args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls
