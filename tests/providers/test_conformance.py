"""Run the conformance suite against every provider that needs no server."""

from __future__ import annotations

import pytest

from gitdns.providers.local import LocalProvider
from gitdns.providers.memory import MemoryProvider
from tests.providers.conformance import Conformance, ProviderCase

CASES = [
    ProviderCase("memory", lambda tmp: MemoryProvider()),
    ProviderCase("local", lambda tmp: LocalProvider(tmp / "store")),
]


class TestConformance(Conformance):
    @pytest.fixture(params=CASES, ids=[c.name for c in CASES])
    def case(self, request: pytest.FixtureRequest) -> ProviderCase:
        case: ProviderCase = request.param
        return case
